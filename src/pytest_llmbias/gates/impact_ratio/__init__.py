"""``bias_impact_ratio``: the four-fifths rule (:mod:`.gate`), its marker spec (:mod:`.spec`), its statistics
(:mod:`.statistics`), the comparison with a recorded release (:mod:`.release`) and its result (:mod:`.result`).
"""
