"""Fingerprints: telling when the model behind an unchanged name (and version) has changed.

A model's *fingerprint* is a digest of its answers to a few fixed probe prompts, asked at
temperature 0 with a fixed seed (each answer's whitespace normalised), and of the provider's
``system_fingerprint`` where it gives one (:func:`digest`). A model is named by the endpoint its
calls reach (:attr:`~pytest_llmbias.store.calls.ModelCall.endpoint`: model, endpoint, version, HTTP
request shape), so its fingerprint is one whatever deployment (system prompt, parameters) asks it.

Each model has a :class:`History` in the store: every fingerprint it has shown, in order, with the
time it was first seen. Promises:

- The first fingerprint seen is *adopted*, on one ask (no second ask checks it): answers stored
  before fingerprints existed (untagged) count as collected under it, so an existing store keeps
  serving an unchanged model.
- An ask is the current fingerprint's model when it gives the same digest, or, compared by a
  ``like`` function (the probes use :func:`pytest_llmbias.planning.likeness.alike`), answers that
  differ only as a busy batching server's greedy decoding makes them differ (:func:`same_model`;
  each epoch keeps the answers it was first seen with, and later asks are compared with those, so
  that small differences cannot add up). Another model is only believed when a second ask is the
  same model as the first (:func:`judge`); when the two asks are not, the model's answers vary by
  themselves at temperature 0: it cannot be fingerprinted, nothing is recorded as a change, and
  the probes' caller serves none of its stored answers (neither ask answered as the known model).
- A stored answer is served only when it was collected under the model's current fingerprint, or
  is untagged while the current fingerprint is the adopted one (:class:`Serving`).

Adopting on one ask keeps these promises: a *change* is still believed only when two asks agree
(a later run whose first ask differs from the current fingerprint asks again). A model whose
answers vary by themselves shows it on its next run: that run's first ask differs from the
adopted fingerprint, its second ask differs too, and the model is found ``unfingerprintable``
then, one run later than when adoption took two asks (its first run reads ``new``). A later run
whose two asks agree with each other but not with the adopted fingerprint reads ``changed``: the
answers stored under the adoption are asked again, a cost, never a stale answer served.

Pure logic and plain data: the probes are asked by :mod:`pytest_llmbias.planning.probes`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: the store's key of a model's history: this prefix and the model's endpoint id
HISTORY_PREFIX = "fingerprint:"
#: the domain label of a probe's answer (so that no gate or release record takes it for an answer)
PROBE_DOMAIN = "llmbias-fingerprint"

#: what a run found of a model (see :class:`ModelFingerprint`)
NEW, UNCHANGED, CHANGED, VARIES, OFFLINE, RECORDED = (
    "new",
    "unchanged",
    "changed",
    "unfingerprintable",
    "offline",
    "recorded",
)


def digest(texts: Iterable[str], system_fingerprints: Iterable[str | None] = ()) -> str:
    """The fingerprint of a model that answered the probes with ``texts`` (in probe order; runs of
    whitespace count as one space, leading and trailing ones as none), and whose provider gave
    ``system_fingerprints`` (the distinct non-empty ones count, in any order): 16 hex digits."""
    body = {"answers": [" ".join(t.split()) for t in texts], "system": sorted({s for s in system_fingerprints if s})}
    blob = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def when(stamp: float | None) -> str | None:
    """``stamp`` (seconds since the epoch) as an ISO 8601 UTC time to the second."""
    if stamp is None:
        return None
    return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Epoch:
    """A fingerprint a model showed, from ``since`` (first seen) until the next one."""

    digest: str
    since: float
    system_fingerprint: str | None = None
    #: the probe answers it was first seen with (whitespace normalised; empty in a history written
    #: before they were kept): what a later ask is compared with (see :func:`judge`)
    answers: tuple[str, ...] = ()


@dataclass(frozen=True)
class History:
    """Every fingerprint a model has shown, oldest first, and what the last run that probed it
    found (``run``, ``state``: a pytest-xdist worker of the same run reads it instead of asking
    again). ``varies_since``: when its answers were first seen to vary by themselves."""

    epochs: tuple[Epoch, ...] = ()
    varies_since: float | None = None
    run: str | None = None
    state: str | None = None

    @property
    def current(self) -> str | None:
        return self.epochs[-1].digest if self.epochs else None

    @property
    def first(self) -> str | None:
        """The adopted fingerprint: untagged answers count as collected under it."""
        return self.epochs[0].digest if self.epochs else None

    @property
    def since(self) -> float | None:
        return self.epochs[-1].since if self.epochs else None

    @property
    def previous(self) -> Epoch | None:
        return self.epochs[-2] if len(self.epochs) > 1 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "epochs": [
                {
                    "digest": e.digest,
                    "since": e.since,
                    "system_fingerprint": e.system_fingerprint,
                    "answers": list(e.answers),
                }
                for e in self.epochs
            ],
            "varies_since": self.varies_since,
            "run": self.run,
            "state": self.state,
        }

    @classmethod
    def from_dict(cls, data: Any) -> History:
        """A history as the store holds it; an empty one for anything unreadable (it is only
        learnt again: the worst case is one adoption)."""
        try:
            epochs = tuple(
                Epoch(
                    str(e["digest"]),
                    float(e["since"]),
                    e.get("system_fingerprint"),
                    tuple(str(a) for a in e.get("answers") or ()),
                )
                for e in data["epochs"]
            )
            return cls(epochs, data.get("varies_since"), data.get("run"), data.get("state"))
        except (KeyError, TypeError, ValueError, AttributeError):
            return cls()


#: whether two asks' answers (in probe order) come from one model: see
#: :func:`pytest_llmbias.planning.likeness.alike`; None: only the same digest is the same model
Likeness = Callable[[Sequence[str], Sequence[str]], bool]


@dataclass(frozen=True)
class Ask:
    """One ask of the probes: its :func:`digest`, its answers (whitespace normalised, in probe
    order) and the first ``system_fingerprint`` its provider gave. A bare digest (a ``str``) where
    an ask is taken is an ask whose answers are not known."""

    digest: str
    answers: tuple[str, ...] = ()
    system_fingerprint: str | None = None

    @classmethod
    def of(cls, texts: Iterable[str], system_fingerprints: Iterable[str | None] = ()) -> Ask:
        texts, systems = list(texts), list(system_fingerprints)
        return cls(
            digest(texts, systems), tuple(" ".join(t.split()) for t in texts), next((s for s in systems if s), None)
        )


def _ask(a: Ask | str) -> Ask:
    return a if isinstance(a, Ask) else Ask(a)


def same_model(known: Epoch | Ask, found: Ask, like: Likeness | None = None) -> bool:
    """Whether ``found`` is an ask of the model that showed ``known``: the same digest; or, with
    ``like``, the same provider ``system_fingerprint`` and answers ``like`` calls alike (both asks'
    answers known: a history written before answers were kept compares digests only)."""
    if known.digest == found.digest:
        return True
    if like is None or not known.answers or not found.answers:
        return False
    return known.system_fingerprint == found.system_fingerprint and like(known.answers, found.answers)


def needs_second_ask(history: History, first: Ask | str, like: Likeness | None = None) -> bool:
    """Whether a first ask giving ``first`` must be checked by asking the probes again: when the
    model has a current fingerprint and ``first`` is not its model (:func:`same_model` under
    ``like``); never for a model with none (its first ask is adopted: see the module's promises)."""
    return bool(history.epochs) and not same_model(history.epochs[-1], _ask(first), like)


def judge(
    history: History,
    first: Ask | str,
    second: Ask | str | None,
    *,
    now: float,
    system_fingerprint: str | None = None,
    run: str | None = None,
    like: Likeness | None = None,
) -> tuple[str, History]:
    """What the asks ``first`` and ``second`` (None when :func:`needs_second_ask` said no) tell
    of a model with ``history``, and its history afterwards (stamped with ``run``); "the same
    model" is :func:`same_model` under ``like`` (None: the same digest):

    - ``new``: no fingerprint known: ``first`` is adopted, on its own when ``second`` is None;
    - ``unchanged``: ``first`` (or, when ``first`` is not, ``second``) is the current
      fingerprint's model; the current fingerprint stays (its answers are those compared with next
      time, so that small differences cannot add up over runs), and an epoch written without its
      answers takes those of an ask with its very digest;
    - ``unfingerprintable``: the two asks are not the same model as each other: its answers vary
      by themselves; the history keeps its fingerprints (nothing is adopted or changed) and notes
      since when it varies;
    - ``changed``: another model than the current one, seen twice: ``first`` becomes current.

    Raises ValueError when ``first`` is not the current model and ``second`` is None.
    """
    one, two = _ask(first), None if second is None else _ask(second)
    system = system_fingerprint if system_fingerprint is not None else one.system_fingerprint
    current = history.epochs[-1] if history.epochs else None
    for ask in (one, two):
        if current is not None and ask is not None and same_model(current, ask, like):
            if not current.answers and ask.answers and ask.digest == current.digest:
                epochs = (*history.epochs[:-1], replace(current, answers=ask.answers))
                history = replace(history, epochs=epochs)
            return UNCHANGED, replace(history, run=run, state=UNCHANGED)
        if current is not None and two is None:
            raise ValueError("a fingerprint other than the current one needs a second ask")
    if two is not None and not same_model(one, two, like):
        return VARIES, replace(history, varies_since=history.varies_since or now, run=run, state=VARIES)
    state = NEW if current is None else CHANGED
    return state, replace(
        history, epochs=(*history.epochs, Epoch(one.digest, now, system, one.answers)), run=run, state=state
    )


@dataclass(frozen=True)
class Serving:
    """Which stored answers of a model may be served: those collected under ``current``, and the
    untagged ones while ``current`` is the adopted fingerprint (``first``)."""

    current: str
    first: str

    def serves(self, tag: str | None) -> bool:
        return tag == self.current if tag is not None else self.current == self.first


@dataclass(frozen=True)
class ModelFingerprint:
    """What a run knows of one model's fingerprint, for its header and reports.

    ``state``: ``new``, ``unchanged``, ``changed`` or ``unfingerprintable`` when the run probed
    it; ``offline`` when it did not (the history's last fingerprint is shown); ``recorded`` for a
    recorded release (never asked: its manifest's fingerprint). ``since``: when ``fingerprint``
    was first seen (ISO time); ``previous``: the one before it. ``served``: per fingerprint (or
    ``untagged``), how many stored answers of the model the run served."""

    alias: str
    model: str
    state: str
    fingerprint: str | None = None
    since: str | None = None
    previous: str | None = None
    system_fingerprint: str | None = None
    probes: int = 0
    served: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, alias: str, model: str, state: str, history: History, probes: int = 0) -> ModelFingerprint:
        epoch = history.epochs[-1] if history.epochs else None
        return cls(
            alias,
            model,
            state,
            history.current,
            when(history.since),
            history.previous.digest if history.previous else None,
            epoch.system_fingerprint if epoch else None,
            probes,
        )

    def describe(self) -> str:
        """One clause for the header: ``tgt 3f2a9c1e0b7d4a55 unchanged since 2026-...``."""
        fp = self.fingerprint or "none"
        if self.state == CHANGED:
            return (
                f"{self.alias}: the model behind this name changed (fingerprint {fp} since {self.since}, "
                f"was {self.previous}): its stored answers are not served, it is asked again"
            )
        if self.state == VARIES:
            return (
                f"{self.alias}: cannot be fingerprinted (its answers at temperature 0 vary by themselves): "
                "neither ask answered as its fingerprint did, so its stored answers are not served, it is asked "
                "again (--llmbias-no-fingerprint serves them)"
            )
        if self.state == OFFLINE:
            under = ", ".join(f"{n} under {tag}" for tag, n in sorted(self.served.items()))
            return (
                f"{self.alias}: offline, stored answers served as collected"
                + (f" ({under})" if under else "")
                + (f"; last fingerprint {fp} (since {self.since})" if self.fingerprint else "; no fingerprint known")
            )
        if self.state == RECORDED:
            return (
                f"{self.alias}: recorded under fingerprint {fp}"
                if self.fingerprint
                else f"{self.alias}: recorded without a fingerprint"
            )
        return f"{self.alias} {fp} ({'adopted' if self.state == NEW else 'unchanged since ' + str(self.since)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "model": self.model,
            "state": self.state,
            "fingerprint": self.fingerprint,
            "since": self.since,
            "previous": self.previous,
            "system_fingerprint": self.system_fingerprint,
            "probes": self.probes,
            "served": dict(self.served),
            "text": self.describe(),
        }


def fingerprint_lines(entries: Iterable[Mapping[str, Any]], width: int = 100) -> list[str]:
    """The header's fingerprint lines from entries' ``to_dict()``: one line of the unchanged (and
    adopted) models, one line each for a changed, unfingerprintable, offline or recorded one."""
    entries = list(entries)
    plain = [e["text"] for e in entries if e["state"] in (NEW, UNCHANGED)]
    lines = []
    if plain:
        import textwrap

        lines += textwrap.wrap(
            "llmbias: fingerprints: " + ", ".join(plain),
            width,
            subsequent_indent="  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return lines + [f"llmbias: fingerprint: {e['text']}" for e in entries if e["state"] not in (NEW, UNCHANGED)]
