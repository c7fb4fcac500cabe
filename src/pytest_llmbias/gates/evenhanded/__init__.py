"""``bias_evenhanded``: paired-prompt even-handedness (:mod:`.gate`), its judge panel (:mod:`.judging`) and
its result (:mod:`.result`).
"""
