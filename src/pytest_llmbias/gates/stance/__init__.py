"""``bias_stance``: binary-choice stances (:mod:`.gate`), its marker spec (:mod:`.spec`), the calls it plans
(:mod:`.calls`), how answers are read (:mod:`.reading`), its three checks (:mod:`.checks`) and its result
(:mod:`.result`).
"""
