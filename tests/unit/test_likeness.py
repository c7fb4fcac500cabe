"""The fingerprint comparison: answers that a busy server's greedy decoding makes end or go on in
other words are the same model, answers that differ in their first words are not; a history's
answers survive the store; judge() under the comparison keeps the current fingerprint for a busy
server's variation, and still finds a swap (seen twice) changed and a model whose answers vary by
themselves unfingerprintable."""

from __future__ import annotations

import json

import pytest

from pytest_llmbias.planning.likeness import PREFIX_WORDS, TOLERANCE, alike, answer_distance, distance, words
from pytest_llmbias.store.fingerprints import CHANGED, NEW, UNCHANGED, VARIES, Ask, History, judge, needs_second_ask

#: SmolLM2-135M's greedy answers to the probes on a quiet ``llmbias serve`` (benchmarks/fingerprint_drift.py)
QUIET = (
    "I'm ready.",
    "17 + 25 = 32.",
    "A thermometer measures the temperature of a substance by converting its temperature into a numerical "
    "scale, typically measured in Celsius or Fahrenheit.",
)
#: the same model's answers decoded beside other requests, as measured: one went on, one ended later
BUSY = (
    "I'm ready. I'm ready.",
    "17 + 25 = 32.",
    QUIET[2][:-1] + ", and then converting that into a temperature reading.",
)
#: the same model behind a system prompt the deployment did not ask for, and sampling at 0.7 (as measured)
SWAPS = (
    ("I'm ready.", "17 + 25 = 32.", "A thermometer measures temperature."),
    (
        "I'm ready to help with whatever you need. What seems to be a sentence or a question?",
        "17 + 25 = 32",
        "A thermometer measures the temperature of a substance by converting its internal structure into a "
        "numerical value.",
    ),
    ("Je suis vrai.", "17 + 25 = 32", "Le thermometer measure le temps à l'écran."),
)


def test_words_ignore_case_and_spacing_and_keep_punctuation_apart() -> None:
    assert words("I'm  READY.\n") == ["i", "'", "m", "ready", "."]
    assert words("") == []


def test_the_distance_is_a_normalised_word_levenshtein() -> None:
    assert distance([], []) == 0.0
    assert distance(["a"], []) == 1.0
    assert distance(list("abcd"), list("abcd")) == 0.0
    assert distance(list("abcd"), list("abxd")) == 0.25  # one substitution in four
    assert distance(list("abcd"), list("abd")) == 0.25  # one deletion
    assert distance(list("ab"), list("ba")) == 1.0
    assert distance(list("kitten"), list("sitting")) == pytest.approx(3 / 7)  # the textbook example


def test_an_answer_that_goes_on_or_ends_later_is_zero_from_the_other() -> None:
    assert answer_distance("I'm ready.", "I'm ready. I'm ready.") == 0.0
    assert answer_distance(QUIET[2], BUSY[2]) == 0.0
    assert answer_distance("", "") == 0.0 and answer_distance("", "ready") == 1.0
    # only the first PREFIX_WORDS words are read
    long = " ".join(f"w{i}" for i in range(40))
    assert answer_distance(long, long.replace("w30", "other")) == 0.0
    assert answer_distance(long, long.replace("w3 ", "other ")) == pytest.approx(1 / PREFIX_WORDS)


def test_a_busy_servers_answers_are_alike_and_a_swaps_are_not() -> None:
    assert alike(QUIET, QUIET) and alike(QUIET, BUSY) and alike(BUSY, QUIET)
    for swap in SWAPS:
        assert not alike(QUIET, swap), swap
    assert not alike(QUIET, QUIET[:2])  # another number of probes: not comparable
    # within the tolerance: one word of sixteen replaced on the long answer
    one_word = QUIET[2].replace("substance", "liquid")
    assert answer_distance(QUIET[2], one_word) <= TOLERANCE and alike(QUIET, (*QUIET[:2], one_word))
    # beyond it: the answer takes another turn early on
    assert not alike(QUIET, (*QUIET[:2], "A thermometer is a device that shows how hot or cold something is."))


def _ask(answers: tuple[str, ...]) -> Ask:
    return Ask.of(answers, ["fp"])


def test_judge_keeps_the_current_fingerprint_for_a_busy_servers_variation() -> None:
    state, history = judge(History(), _ask(QUIET), None, now=10.0, like=alike)
    assert state == NEW and history.epochs[0].answers == tuple(" ".join(a.split()) for a in QUIET)
    busy = _ask(BUSY)
    assert busy.digest != history.current
    # by the digest alone the busy ask would need a second one; by the comparison it is the model
    assert needs_second_ask(history, busy) and not needs_second_ask(history, busy, alike)
    state, after = judge(history, busy, None, now=20.0, like=alike)
    assert state == UNCHANGED and after.epochs == history.epochs  # compared with the adopted answers next time
    # an ask with another system_fingerprint is another model, however alike its answers
    assert needs_second_ask(history, Ask.of(QUIET, ["fp_other"]), alike)


def test_judge_still_finds_a_swap_changed_and_a_restless_model_unfingerprintable() -> None:
    _, history = judge(History(), _ask(QUIET), None, now=10.0, like=alike)
    swap = _ask(SWAPS[1])
    assert needs_second_ask(history, swap, alike)
    # the swapped model asked twice: the second ask differs from the first only as a busy server's would
    again = _ask((SWAPS[1][0] + " Let me know.", *SWAPS[1][1:]))
    state, changed = judge(history, swap, again, now=20.0, like=alike)
    assert state == CHANGED and changed.current == swap.digest and changed.epochs[-1].answers == swap.answers
    # a first ask far off and a second that is the known model: the known model, unchanged
    state, same = judge(history, swap, _ask(BUSY), now=20.0, like=alike)
    assert state == UNCHANGED and same.epochs == history.epochs
    # two asks unlike each other and unlike the known one: its answers vary by themselves
    state, varied = judge(history, swap, _ask(SWAPS[2]), now=20.0, like=alike)
    assert state == VARIES and varied.epochs == history.epochs and varied.varies_since == 20.0
    with pytest.raises(ValueError):
        judge(history, swap, None, now=20.0, like=alike)


def test_answers_survive_the_store_and_an_old_history_learns_them_on_an_exact_match() -> None:
    _, history = judge(History(), _ask(QUIET), None, now=10.0, like=alike)
    assert History.from_dict(json.loads(json.dumps(history.to_dict()))) == history
    # a history written before answers were kept: compared by digest only, then given the answers
    old = {"epochs": [{"digest": _ask(QUIET).digest, "since": 10.0, "system_fingerprint": "fp"}]}
    legacy = History.from_dict(old)
    assert legacy.epochs[0].answers == ()
    assert needs_second_ask(legacy, _ask(BUSY), alike)
    state, learnt = judge(legacy, _ask(QUIET), None, now=20.0, like=alike)
    assert state == UNCHANGED and learnt.epochs[0].answers == history.epochs[0].answers
    assert learnt.epochs[0].since == 10.0 and learnt.current == legacy.current
