"""``bias_preference``: self-preference between perspectives (:mod:`.gate`), its marker spec (:mod:`.spec`),
the calls it plans (:mod:`.calls`) and its result (:mod:`.result`).
"""
