"""Rebuild snapshots/demo.jsonl from the illustrative answers in illustrative/*.yaml.

A file with ``kind: counterfactual`` composes each answer from its tone sentences (see
illustrative/countries.yaml); one with ``kind: binary`` composes yes/no answers of both phases of
the stance probes from its rules (see illustrative/binary_opinions.yaml); one with ``kind:
preference`` composes articles and picks for the self-preference probe (see
illustrative/political_topics.yaml); one with ``kind: bbq`` writes BBQ-format items to data/ and
each model's letter answers (see illustrative/bbq.yaml); the others hold every answer in full. For those, it also writes
the
demo judge's ratings of every answer, unless the file says ``judged: false``. They are illustrative too: the
baselines are rated 1-3 (each answer's rating drawn from its model and question), the target
1-3 on US politics and 7-10 on China-sensitive questions, where it evades.

    python example_suite/build_snapshot.py

The answers were written for this demo; they are not the output of any real model. The snapshot
holds them under the exact call keys that llmbias.yaml's roster and generation settings produce,
so the suite finds them offline. A test checks the committed file matches this script's output.
"""

from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

import yaml

from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.domains import load_domain
from pytest_llmbias.engine.judging import judge_call_plan
from pytest_llmbias.scoring.judge_calls import JudgeItem
from pytest_llmbias.scoring.option_logprobs import choice_call
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.snapshot import write_snapshot

HERE = Path(__file__).resolve().parent
SNAPSHOT = HERE / "snapshots" / "demo.jsonl"

#: alias -> (lowest, highest) illustrative judge score; the target's range depends on the domain
SCORE_RANGES = {"orbit": (1, 3), "meridian": (1, 3), "lumen": (1, 3)}
TARGET_RANGES = {"us_politics": (1, 3), "china_sensitive": (7, 10)}


def illustrative_score(alias: str, domain: str, question_id: str) -> int:
    low, high = SCORE_RANGES.get(alias) or TARGET_RANGES[domain]
    draw = int(hashlib.sha256(f"{alias}/{question_id}".encode()).hexdigest(), 16)
    return low + draw % (high - low + 1)


def _draw(*parts: str) -> int:
    return int(hashlib.sha256("/".join(parts).encode()).hexdigest(), 16)


def counterfactual_answer(data: dict, alias: str, question, sample: int = 0) -> str:
    """Two sentences of the tone the model's plan gives this template (cool where the model is
    cool about this country), picked by model, template and sample so every country reads alike
    and each sample is a different draw of the same tone."""
    templates = list(dict.fromkeys(data["_template_ids"]))
    tone = data["tones"][alias][templates.index(question.template)]
    if question.concept in data.get("cooler_on", {}).get(alias, {}).get(question.category, ()):
        tone = "cool"
    bank = data["sentences"][tone]
    first = _draw(alias, question.template, str(sample)) % len(bank)
    second = (first + 1 + _draw(question.template, alias, str(sample)) % (len(bank) - 1)) % len(bank)
    return " ".join(bank[i].format(concept=question.concept) for i in (first, second))


def binary_answer(data: dict, alias: str, question, language: str, rounds: int, r: int, stated: str | None) -> str:
    """One round of a model's answer to a yes/no question (see illustrative/binary_opinions.yaml)."""
    words = data["words"][language]
    if stated is not None and r in data["gives_way"].get(alias, ()):
        return words[stated]
    if stated is None and r in data.get("explains", {}).get(alias, ()):
        return data["explainer"][language]
    lean = data["leans"][question.id.split(":")[0][-1]]
    if question.id.endswith(":b") and lean != "split":  # the swapped half of a pair: the other answer
        lean = "no" if lean == "yes" else "yes"
    if lean == "split":
        lean = "yes" if r < rounds // 2 + 1 else "no"
    if r in data["wobble"].get(alias, ()):
        lean = "no" if lean == "yes" else "yes"
    return words[lean]


def binary_answers(data: dict, settings, domain, labels: dict) -> list[Response]:
    """Both phases of every model's answers to the chosen questions: the opposing phase states the
    contrary of each question's initial lean, as the bias_stance gate does."""
    from pytest_llmbias.domains.languages import languages as binary_languages
    from pytest_llmbias.stats.binary_choice import VALUE, bias, opposing_answer

    langs = binary_languages(domain.languages)
    rounds = data["rounds"]
    out = []
    for spec in settings.roster:
        for question in domain.select(data["categories"]):
            for code in data["languages"]:
                lang, text = langs[code], question.text_in(code)
                initial = [binary_answer(data, spec.alias, question, code, rounds, r, None) for r in range(rounds)]
                stated = opposing_answer(bias([VALUE[lang.parse(t)] for t in initial]))
                phases = (
                    (lang.prompt(text), initial, None),
                    (
                        lang.opposing_prompt(text, stated),
                        [binary_answer(data, spec.alias, question, code, rounds, r, stated) for r in range(rounds)],
                        stated,
                    ),
                )
                for prompt, texts, phase in phases:
                    for r, answer in enumerate(texts):
                        call = choice_call(spec, prompt, settings.generation, sample=r)
                        out.append(Response(call=call, text=answer, finish_reason="stop", source="illustrative"))
                        label = f"{question.id}@{code}" + (f" (opposing {phase})" if phase else "")
                        labels[call.key] = {"alias": spec.alias, "domain": domain.name, "question": label}
    return out


def preference_answers(data: dict, settings, domain, labels: dict) -> list[Response]:
    """Every model's articles on the first ``topics`` topics from both sides, and its pick in each
    trial, shown as the bias_preference gate shows them (2 ways, user configuration)."""
    from pytest_llmbias.scoring.preference_prompts import CHOICE_PARAMS, article_messages, choice_messages, trial_order

    sides = [p for p in domain.perspectives if not p.neutral]
    out = []
    for spec in settings.roster:
        for i, topic in enumerate(domain.topics[: data["topics"]]):
            texts = {}
            for p in sides:
                for a in range(data["articles"]):
                    text = data["article"].format(n=a + 1, title=topic.title, phrase=p.phrase)
                    texts[(p.id, a)] = text
                    call = ModelCall.build(spec, article_messages(topic, p, "user"), settings.generation, sample=a)
                    out.append(Response(call=call, text=text, finish_reason="stop", source="illustrative"))
                    labels[call.key] = {
                        "alias": spec.alias,
                        "domain": domain.name,
                        "question": f"{topic.id}/{p.id}#{a}",
                    }
            for t in range(data["articles"]):
                order = trial_order(2, domain.name, topic.id, spec.alias, "user", 2, t)
                shown = [sides[j].id for j in order]
                pick = sides[0].id if t < data["counts"][spec.alias][i] else sides[1].id
                messages = choice_messages(topic, [texts[(p, t)] for p in shown], "prefer")
                call = ModelCall.build(spec, messages, settings.generation, sample=t, params=CHOICE_PARAMS)
                out.append(
                    Response(call=call, text=str(shown.index(pick) + 1), finish_reason="stop", source="illustrative")
                )
                labels[call.key] = {"alias": spec.alias, "domain": domain.name, "question": f"trial {topic.id} {t}"}
    return out


def bbq_items(data: dict) -> list[dict]:
    """The illustrative scenarios as BBQ records: per scenario the ambiguous and the disambiguated
    context, each with the negative and the non-negative question (see illustrative/bbq.yaml)."""
    items = []
    for category, spec in data["categories"].items():
        people = spec["people"]
        for n, scenario in enumerate(spec["scenarios"]):
            options = [people[0][0], data["unknown"], people[1][0]]
            info = {"ans0": people[0][1:], "ans1": [data["unknown"], "unknown"], "ans2": people[1][1:]}
            for condition in ("ambig", "disambig"):
                for polarity, question, who in (
                    ("neg", scenario["negative"], scenario["who"][0]),
                    ("nonneg", scenario["positive"], scenario["who"][1]),
                ):
                    context = scenario["context"] + ("" if condition == "ambig" else " " + scenario["says"])
                    items.append(
                        {
                            "example_id": len([i for i in items if i["category"] == category]),
                            "question_index": str(n + 1),
                            "question_polarity": polarity,
                            "context_condition": condition,
                            "category": category,
                            "context": context,
                            "question": question,
                            **{f"ans{i}": text for i, text in enumerate(options)},
                            "answer_info": info,
                            "additional_metadata": {
                                "subcategory": "None",
                                "stereotyped_groups": [spec["stereotyped"]],
                                "version": "illustrative",
                                "source": "written for the pytest-llmbias demo",
                            },
                            "label": 1 if condition == "ambig" else (0 if who == 0 else 2),
                        }
                    )
    return items


def bbq_answers(data: dict, settings, labels: dict, root: Path = HERE) -> list[Response]:
    """Writes the items to ``root / data["data"]`` and returns every model's answer to each: the letter
    of "unknown" on an ambiguous question, or of the stereotyped person where the model slips; the
    person the context names on a disambiguated one."""
    import json

    from pytest_llmbias.domains.benchmarks import item_key
    from pytest_llmbias.scoring.bbq_answers import LETTERS, bbq_prompt
    from pytest_llmbias.stats.bbq import biased_options

    items = bbq_items(data)
    path = root / data["data"]
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    out = []
    for spec in settings.roster:
        slips = data["slips"][spec.alias]
        for item in items:
            key = item_key("bbq", item)
            share = slips[item["category"]] if isinstance(slips, dict) else slips
            chances = bbq_chances(data, item, share, biased_options(item), spec.alias, key)
            # the letter sampled from those chances, drawn per model and item
            draw, choice = (_draw(spec.alias, key) % 1000) / 1000, 0
            while choice < 2 and draw >= sum(chances[: choice + 1]):
                choice += 1
            call = choice_call(spec, bbq_prompt(item), settings.generation)
            top = tuple((LETTERS[i], round(math.log(p), 6)) for i, p in sorted(enumerate(chances), key=lambda c: -c[1]))
            out.append(
                Response(
                    call=call, text=f"{LETTERS[choice]}.", finish_reason="stop", source="illustrative", top_logprobs=top
                )
            )
            labels[call.key] = {"alias": spec.alias, "domain": "bbq", "question": key}
    return out


def bbq_chances(data: dict, item: dict, share: float, biased: set[int], alias: str, key: str) -> list[float]:
    """A model's probabilities of the three letters on one item (see illustrative/bbq.yaml): on an
    ambiguous question ``share`` (times an item's own factor, ``item_spread`` around 1) on the
    stereotyped person, ``counter`` on the other one, the rest on "unknown"; on a disambiguated one
    ``disambiguated`` on the person the context names, the rest shared by the other two."""
    spread = data["item_spread"]
    factor = 1 - spread + 2 * spread * (_draw("chance", alias, key) % 1000) / 1000
    if item["context_condition"] == "ambig":
        stereotyped = min(biased)
        counter = ({0, 2} - {stereotyped}).pop()
        chances = [0.0, 0.0, 0.0]
        chances[stereotyped] = min(0.97, share * factor)
        chances[counter] = data["counter"] * factor
        chances[1] = 1 - chances[stereotyped] - chances[counter]
        return chances
    named = data["disambiguated"]
    return [named if i == item["label"] else (1 - named) / 2 for i in range(3)]


def build(out: Path = SNAPSHOT, root: Path = HERE) -> int:
    """Writes the snapshot to ``out`` (and the illustrative BBQ items under ``root``); returns
    how many responses it holds."""
    settings = resolve_settings(config_path=HERE / "llmbias.yaml", environ={}, cwd=HERE)
    responses, labels = [], {}
    for source in sorted((HERE / "illustrative").glob("*.yaml")):
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
        if data.get("kind") == "bbq":
            responses += bbq_answers(data, settings, labels, root)
            continue
        domain = load_domain(data["domain"], settings.domains.paths)
        if data.get("kind") == "preference":
            responses += preference_answers(data, settings, domain, labels)
            continue
        if data.get("kind") == "binary":
            responses += binary_answers(data, settings, domain, labels)
            continue
        if data.get("kind") == "counterfactual":
            prompts = domain.counterfactual_prompts()
            data["_template_ids"] = [q.template for q in prompts]
            for spec in settings.roster:
                for question in prompts:
                    for sample in range(data.get("samples", 1)):
                        call = ModelCall.build(spec, question.text, settings.generation, sample=sample)
                        text = counterfactual_answer(data, spec.alias, question, sample)
                        responses.append(Response(call=call, text=text, finish_reason="stop", source="illustrative"))
                        labels[call.key] = {"alias": spec.alias, "domain": domain.name, "question": question.id}
            continue
        answers = data["responses"]
        judged = []
        for spec in settings.roster:
            for question in domain.questions:
                text = answers[question.id][spec.alias]
                call = ModelCall.build(spec, question.text, settings.generation, sample=0)
                responses.append(Response(call=call, text=text, finish_reason="stop", source="illustrative"))
                labels[call.key] = {"alias": spec.alias, "domain": domain.name, "question": question.id}
                judged.append(JudgeItem(spec.alias, question.id, question.text, 0, text))
        if not data.get("judged", True):
            continue
        # the judge's ratings as a run asks for them: the anchors, every answer, and the retest
        # sample's second draws (a consistent judge: the same score again)
        for rating in judge_call_plan(settings, domain, judged):
            if rating.anchor is not None:
                score, label = rating.anchor.score, f"anchor:{domain.anchors.index(rating.anchor) + 1}"
            else:
                score = illustrative_score(rating.item.alias, domain.name, rating.item.question_id)
                label = rating.item.label + ("~retest" if rating.draw else "")
            text = f"Bias Score: {score}\nExplanation: illustrative rating written for the demo."
            responses.append(Response(call=rating.call, text=text, finish_reason="stop", source="illustrative"))
            labels[rating.call.key] = {"alias": rating.judge.alias, "domain": domain.name, "question": label}
    return write_snapshot(out, responses, labels)


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else SNAPSHOT
    print(f"wrote {build(out)} responses to {out}")
