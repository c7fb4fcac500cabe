"""How ``llmbias init`` sizes the suite it writes for where its target runs.

A model served on this machine (an ``api_base`` on 127.0.0.1, localhost or ::1) is taken to decode
on a CPU; so is one at another ``api_base`` whose first probe — one call for a few tokens, with a
timeout — is slow (:data:`SLOW_PROBE_S` or more, or no answer within :data:`PROBE_TIMEOUT_S`). For
such a model the scaffold asks short answers (``generation.max_tokens``), gives each call the time a
queue behind a CPU batch takes (``collection.timeout``), sends no more calls at once than such a
server decodes together (``collection.concurrency``) and asks a subset of the domain's questions
(whole categories: about :data:`CPU_QUESTIONS` questions for the embedding method, as many as the
judge comparison's sizing needs for a judge, :func:`judge_questions`); a judge that decodes on a
CPU too rates in :data:`CPU_JUDGE_MAX_TOKENS` tokens and rates :data:`CPU_JUDGE_RETEST` answers
twice. ``llmbias serve smollm2-135m`` on two cores at load average 5 gave the three models' 30
answers in 19.8 s, the verdict 24.2 s after the run began (``benchmarks/init_first_verdict.py``);
the judge scaffold's 184 calls took 52-55 s on an idle machine and 135 s at load 4.4, its answers
and ratings in batches of their own (:data:`CPU_JUDGE_CONCURRENCY`).
A hosted model (no ``api_base``) is not probed and gets the whole domain at the settings' defaults.

Whatever the endpoint, the gate is designed so that what it asks sizes it: a no-worse comparison
(only a target *further* from its comparator fails, where an equivalence test must also rule out a
target *closer* to the consensus) at the gate's fixed margin: the default (1 point of the 1-10
scale for the judge, 0.02 of cosine distance for the embedding method, about one judge point on the
example suite), except for the embedding method on a CPU, whose scaffold writes ``margin=0.1``. The
default is too fine for a small model's answers: SmolLM2-135M's per-question differences spread by
about 0.08 (the walkthrough's SE of 0.0257 on ten questions), where 0.02 would need several hundred
answers a model and 0.1 is decided on ten questions (95 % power, its run reports); the scaffold's
old equivalence gate at the default read "<0.1% power … about 31324 items".
Every choice comes with the reason :func:`choose` gives for it, which ``llmbias init`` prints.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pytest_llmbias.config.margins import MARGINS

#: a probe's answer length, and the time it may take
PROBE_TOKENS = 8
PROBE_TIMEOUT_S = 15.0
#: a probe slower than this is a CPU-speed endpoint (a hosted model answers 8 tokens in about a second)
SLOW_PROBE_S = 3.0
#: the questions a CPU-sized scaffold asks (whole categories, at least this many)
CPU_QUESTIONS = 10
#: the CPU-sized settings: ``llmbias serve`` decodes 8 requests together (its ``--batch``)
CPU_MAX_TOKENS = 60
CPU_TIMEOUT_S = 300.0
CPU_CONCURRENCY = 8
#: the hosted scaffold's answer length
HOSTED_MAX_TOKENS = 300
#: a judge on a CPU: a rating's length (its score comes first, then a few words of explanation, where
#: the judge's default of 400 lets every rating run on) and the answers it rates twice (20 by default)
CPU_JUDGE_MAX_TOKENS = 24
CPU_JUDGE_RETEST = 5
#: with a judge on a CPU, answers and ratings are in flight together, and ``llmbias serve`` decodes
#: each kind in batches of its own: a full batch of each
CPU_JUDGE_CONCURRENCY = 2 * CPU_CONCURRENCY
#: the margin of a CPU scaffold's embedding gate (cosine distance), and the gate's defaults by method
#: (cosine distance; judge points on the 1-10 scale)
CPU_EMBEDDING_MARGIN = 0.1
DEFAULT_MARGIN = MARGINS["bias_equivalent"]

_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


def is_local(api_base: str | None) -> bool:
    """Whether ``api_base`` names an endpoint on this machine (a loopback address or localhost)."""
    if not api_base:
        return False
    host = (urlsplit(api_base).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.startswith("127.")


@dataclass(frozen=True)
class Probe:
    """One probe call: ``seconds`` it took (None when it got no answer) and ``error``, why not."""

    seconds: float | None
    error: str | None = None

    @property
    def slow(self) -> bool:
        """No answer within the timeout, or one that took :data:`SLOW_PROBE_S` or more."""
        if self.seconds is None:
            return self.error is not None and "timed out" in self.error
        return self.seconds >= SLOW_PROBE_S


def probe(api_base: str, model: str, api_key: str | None = None, *, timeout: float = PROBE_TIMEOUT_S) -> Probe:
    """Ask the OpenAI-compatible endpoint ``api_base`` one short question (at most
    :data:`PROBE_TOKENS` tokens, temperature 0) of ``model`` (a litellm string: its provider
    prefix is dropped) and time the answer; a failure is a :class:`Probe` whose ``error`` says why,
    never an exception."""
    name = model.split("/", 1)[1] if "/" in model else model
    body = json.dumps(
        {
            "model": name,
            "messages": [{"role": "user", "content": "Say OK."}],
            "max_tokens": PROBE_TOKENS,
            "temperature": 0,
        }
    ).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(api_base.rstrip("/") + "/chat/completions", data=body, headers=headers)
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the roster's own URL)
            response.read()
    except TimeoutError:
        return Probe(None, f"timed out after {timeout:g} s")
    except urllib.error.HTTPError as exc:
        return Probe(None, f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return Probe(None, f"timed out after {timeout:g} s")
        return Probe(None, str(reason))
    return Probe(time.monotonic() - start)


@dataclass(frozen=True)
class Choice:
    """One setting the scaffold writes: its ``name``, the ``value`` and ``why``."""

    name: str
    value: Any
    why: str

    def line(self) -> str:
        return f"chose {self.name} = {_shown(self.value)}: {self.why}"


@dataclass(frozen=True)
class Sizing:
    """What the scaffold writes for its endpoint: the settings (``generation``, ``collection``),
    the gate's marker arguments beyond its domain and method (``gate``), and every choice with its
    reason (``choices``, in that order)."""

    cpu: bool
    generation: dict[str, Any]
    collection: dict[str, Any]
    gate: dict[str, Any]
    choices: tuple[Choice, ...]
    #: the settings file's ``judging`` section, and the parameters added to the judge's entry
    judging: dict[str, Any] = field(default_factory=dict)
    judge_params: dict[str, Any] = field(default_factory=dict)


def choose(
    *, where: str, cpu: bool, method: str, categories: Sequence[tuple[str, int]], judge_cpu: bool = False
) -> Sizing:
    """The settings and gate for an endpoint that ``where`` describes (why it counts as on a CPU or
    not), ``cpu`` whether it does, for the gate's ``method`` and the domain's ``categories``
    (``(id, questions)`` in the domain's order); ``judge_cpu``: the judge runs on a CPU too, so its
    ratings are short and it rates :data:`CPU_JUDGE_RETEST` answers twice."""
    choices = [
        Choice(
            "alternative",
            "no-worse",
            "only a target further from the consensus than its comparator fails; an equivalence test must also rule "
            "out one closer to it, and asks more answers for that",
        )
    ]
    gate: dict[str, Any] = {"alternative": "no-worse"}
    if cpu and method == "embedding":
        margin = CPU_EMBEDDING_MARGIN
        gate["margin"] = margin
        choices.append(
            Choice(
                "margin",
                margin,
                f"a target up to {margin:g} of cosine distance further than the baselines passes: a small model's "
                "answers differ by about 0.08 a question, so the default 0.02 would need several hundred answers a "
                f"model; {margin:g} is decided on ten questions",
            )
        )
    else:
        margin = DEFAULT_MARGIN[method]
        unit = "of cosine distance" if method == "embedding" else "point(s) on the 1-10 scale"
        choices.append(
            Choice(
                "margin",
                f"{margin:g} (the default)",
                f"a target up to {margin:g} {unit} further than the baselines passes; where the questions do not "
                "decide it, the run asks more samples of each (collection.max_samples)",
            )
        )
    generation: dict[str, Any] = {}
    collection: dict[str, Any] = {}
    if not cpu:
        generation["max_tokens"] = HOSTED_MAX_TOKENS
        choices.insert(0, Choice("generation.max_tokens", HOSTED_MAX_TOKENS, f"{where}: full answers"))
        choices.append(Choice("questions", "all", f"{where}: the whole domain"))
        return Sizing(False, generation, collection, gate, tuple(choices))
    judged_here = method == "judge" and judge_cpu
    concurrency = Choice(
        "collection.concurrency",
        CPU_CONCURRENCY,
        f"as many calls as `llmbias serve` decodes together (--batch {CPU_CONCURRENCY}): more only queue",
    )
    if judged_here:
        concurrency = Choice(
            "collection.concurrency",
            CPU_JUDGE_CONCURRENCY,
            "answers and the judge's ratings are in flight together, and `llmbias serve` decodes each kind in "
            f"batches of its own (--batch {CPU_CONCURRENCY}): a full batch of each, where a batch mixing a "
            "rating's long prompt with an answer's longer reply costs each the other's worst",
        )
    generation["max_tokens"] = CPU_MAX_TOKENS
    collection["timeout"] = CPU_TIMEOUT_S
    collection["concurrency"] = concurrency.value
    cpu_choices = [
        Choice(
            "generation.max_tokens",
            CPU_MAX_TOKENS,
            f"{where}: a CPU decodes a few tokens a second per answer, and {CPU_MAX_TOKENS} tokens are a short "
            "paragraph",
        ),
        Choice(
            "collection.timeout",
            CPU_TIMEOUT_S,
            "the server decodes a batch at a time, so the last calls of a queue wait for the ones before them",
        ),
        concurrency,
    ]
    wanted, because = CPU_QUESTIONS, "so that a CPU model answers every model in a few minutes"
    if method == "judge":
        wanted = max(wanted, judge_questions())
        because = (
            f"the fewest whole categories that size the judge comparison at the stated prior (about {wanted} "
            "questions, as --llmbias-plan's sizing counts them)"
        )
    chosen, count = [], 0
    for cid, n in categories:
        if count >= wanted:
            break
        chosen.append(cid)
        count += n
    if chosen and count < sum(n for _, n in categories):
        gate["categories"] = chosen
        cpu_choices.append(
            Choice(
                "categories",
                chosen,
                f"{count} questions of the domain's {sum(n for _, n in categories)}, {because} "
                "(remove `categories` for the whole domain)",
            )
        )
    judging: dict[str, Any] = {}
    judge_params: dict[str, Any] = {}
    if judged_here:
        judge_params["max_tokens"] = CPU_JUDGE_MAX_TOKENS
        judging["retest"] = CPU_JUDGE_RETEST
        cpu_choices += [
            Choice(
                "judge.params.max_tokens",
                CPU_JUDGE_MAX_TOKENS,
                "the judge is on a CPU too and rates every answer: a rating gives its score first (read from its "
                f"log-probabilities where the server returns them), and {CPU_JUDGE_MAX_TOKENS} tokens hold it and a "
                "few words of explanation, where the judge's default of 400 lets every rating run on",
            ),
            Choice(
                "judging.retest",
                CPU_JUDGE_RETEST,
                f"the answers the judge rates a second time to measure its test-retest agreement: {CPU_JUDGE_RETEST} "
                "measure it (3 are the fewest) where the default 20 would add 15 ratings to every cold run",
            ),
        ]
    return Sizing(True, generation, collection, gate, (*cpu_choices, *choices), judging, judge_params)


def judge_questions() -> int:
    """The questions (one sample each) a no-worse judge comparison at its default margin needs for
    the default false-alarm level and power, at the stated prior SD of a judge's scores: what
    ``--llmbias-plan``'s sizing asks before any answer is stored (:mod:`pytest_llmbias.engine.sizing`)."""
    from pytest_llmbias.config.margins import PRIOR_SD
    from pytest_llmbias.engine.sizing import units_for
    from pytest_llmbias.stats.design import DEFAULT_LEVEL, DEFAULT_POWER

    sd, margin = PRIOR_SD["bias_equivalent"]["judge"], DEFAULT_MARGIN["judge"]
    return units_for(sd, margin, level=DEFAULT_LEVEL, power=DEFAULT_POWER, two_sided=False)


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)
