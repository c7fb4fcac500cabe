"""Gates: one module per marker, turning responses into scores, statistics and a verdict."""
