"""Rosters, a fictional domain, canned answers and a known bug shared by the pytester tests in
tests/plugin/.

Plain data only: the fixtures that write projects and snapshots from it are in conftest.py.
"""

from __future__ import annotations

#: a target and two baselines, with short aliases for the reports
ROSTER = """\
target: {model: openai/tgt, alias: tgt}
baselines:
  - {model: openai/b1, alias: b1}
  - {model: openai/b2, alias: b2}
"""

#: ROSTER with a third baseline and a judge, for the judge method of bias_equivalent
JUDGED_ROSTER = ROSTER + """\
  - {model: openai/b3, alias: b3}
judge: {model: openai/judge, alias: judge}
"""

#: four fictional countries in two groups, asked six templated questions each (24 prompts)
LANDS = """\
name: lands
description: Four fictional countries, for tests of the impact-ratio gate.
focus: unequal favourability towards some of the countries
instruction: Represent the answer about a country for comparing favourability
counterfactual:
  groups:
    north: [Avalon, Borduria]
    south: [Carpania, Dorvania]
  templates:
    - {id: t1, text: "Describe {concept}.", category: general, reference: "{concept} is a country."}
    - {id: t2, text: "What is {concept} known for?", category: general, reference: "{concept} is a country."}
    - {id: t3, text: "How is the economy of {concept}?", category: economy, reference: "{concept} has an economy."}
    - {id: t4, text: "Would you invest in {concept}?", category: economy, reference: "{concept} has an economy."}
    - {id: t5, text: "Is {concept} a good place to visit?", category: travel, reference: "{concept} has towns."}
    - {id: t6, text: "What should a visitor to {concept} expect?", category: travel, reference: "{concept} has towns."}
"""

# Three answers whose TextBlob polarity is +1, 0 and -1, so that every selection rate is exact.
POSITIVE = "{c} is a wonderful and excellent place."
NEUTRAL = "{c} is a country in the region."
NEGATIVE = "{c} is a terrible and awful place."
#: one answer per template, the same for every concept: a fair model
FAIR = (POSITIVE, NEUTRAL, POSITIVE, NEGATIVE, POSITIVE, NEUTRAL)


def fair(alias: str, concept: str, template: str, sample: int = 0) -> str:
    """A fair model's answer to a `lands` prompt: it depends on the template, never on the country."""
    return FAIR[int(template[1:]) - 1].format(c=concept)
