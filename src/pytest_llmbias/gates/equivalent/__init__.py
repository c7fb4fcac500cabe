"""``bias_equivalent``: relative bias by embeddings or a judge (:mod:`.gate`), and its result (:mod:`.result`)."""
