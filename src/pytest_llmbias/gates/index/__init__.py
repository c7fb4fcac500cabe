"""``bias_index``: the LLM Bias Index (:mod:`.gate`) and its result (:mod:`.result`)."""
