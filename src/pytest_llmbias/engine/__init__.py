"""What every gate shares: the comparison engine (:mod:`.relative`, its options and its report block), the
group-sequential design and its looks (:mod:`.sequential_design`, :mod:`.sequential_gate`), more samples on
demand (:mod:`.extension`), sizing before any call (:mod:`.sizing`, :mod:`.expected_power`), the suite's
shares of ``suite.alpha`` (:mod:`.suite_levels`), the judge method's scores (:mod:`.judging`), verdicts
against a pinned anchor (:mod:`.anchored`), and the gate protocol and result base (:mod:`.protocol`,
:mod:`.base`, :mod:`.result`).

It knows no gate by name: the gates (:mod:`pytest_llmbias.gates`) sit above it and call down into it.
"""
