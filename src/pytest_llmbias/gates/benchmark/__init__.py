"""``bias_benchmark``: BBQ and discrim-eval as gates (:mod:`.gate`), its marker spec (:mod:`.spec`), how items
are asked and read (:mod:`.reading`), the scores per unit (:mod:`.scores`), discrim-eval's groups
(:mod:`.groups`), its looks (:mod:`.looks`) and its result (:mod:`.result`).
"""
