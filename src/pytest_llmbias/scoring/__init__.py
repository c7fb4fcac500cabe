"""Scoring of model responses: the LLM judge and the relative deviation measures built on it."""
