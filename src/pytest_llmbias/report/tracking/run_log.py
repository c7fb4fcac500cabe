"""What a run logs to a tracker, backend-neutral: :class:`RunLog`, built by :func:`run_log` from
the run's JSON document (see :mod:`pytest_llmbias.report.json_report`) — the same data the JSON,
HTML and Markdown reports are made from, so a saved ``RUN.json`` logs exactly as the live run did.

Params are the deployments (model, alias, version, endpoint host, system-prompt hash), the judge
and rubric, the comparator, the suite's budget, the plugin version and the git commit; never a
key, a token, a credential's variable name, a system prompt's text or a URL's path or user.
Standard library only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_llmbias.report.tracking.names import USAGE_METRICS, VERDICT_CODES, key, slug, test_slug

#: the figures of a gate's method row logged as metrics, by the row's key
_ROW_FIGURES = {"target": "target", "baselines": "comparator", "bound": "margin", "p": "p"}
#: the figures of a gate's reliability logged as metrics
_RELIABILITY_FIGURES = ("power", "false_alarm", "designed_power", "designed_false_alarm")
#: the deployment fields logged as params (anything else of an entry is never logged)
_DEPLOYMENT_FIELDS = ("model", "alias", "version", "system_hash")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class GateVerdict:
    """One gate of the run: its test, gate, its own verdict word, the ``outcome`` a tracker
    records (a key of :data:`~pytest_llmbias.report.tracking.names.VERDICT_CODES`) and ``line``,
    its verdict and figures on one line."""

    test: str
    gate: str
    verdict: str
    outcome: str
    line: str

    @property
    def code(self) -> float:
        return VERDICT_CODES[self.outcome]

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "gate": self.gate, "verdict": self.verdict, "outcome": self.outcome}


@dataclass(frozen=True)
class RunLog:
    """One run as a tracker takes it. ``key``: a hash of the run's verdicts, figures, roster and
    plugin version, the same when the same session is logged again (a backend logs it once);
    ``strict``: whether an underpowered pass counts as a failure (``--llmbias-strict``);
    ``document``: the JSON document's text, logged when ``artifacts`` holds no JSON report."""

    run_name: str
    key: str
    params: Mapping[str, str]
    metrics: Mapping[str, float]
    tags: Mapping[str, str]
    gates: tuple[GateVerdict, ...]
    artifacts: tuple[Path, ...] = ()
    strict: bool = False
    document: str | None = field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        """Whether every gate passed: an underpowered pass counts only without ``strict``; a run
        with no gate never passes."""
        ok = {"passed"} if self.strict else {"passed", "underpowered"}
        return bool(self.gates) and all(g.outcome in ok for g in self.gates)

    @property
    def verdict(self) -> str:
        return "passed" if self.passed else "failed"

    def version_tags(self, run_id: str, link: str | None) -> dict[str, str]:
        """The tags a registered model version gets: ``llmbias.verdict``, one ``llmbias.gate.<test>``
        per gate (its verdict word), ``llmbias.run_id`` and ``llmbias.report`` (the run's link)."""
        tags = {key("verdict"): self.verdict, key("run_id"): run_id}
        if link:
            tags[key("report")] = link
        for g in self.gates:
            tags[key("gate", test_slug(g.test))] = f"{g.outcome}: {g.verdict}"[:5000]
        return tags

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_name": self.run_name,
            "key": self.key,
            "verdict": self.verdict,
            "params": dict(self.params),
            "metrics": dict(self.metrics),
            "tags": dict(self.tags),
            "gates": [g.to_dict() for g in self.gates],
            "artifacts": [str(p) for p in self.artifacts],
        }


def gate_outcome(entry: Mapping[str, Any]) -> str:
    """A gate entry's outcome: ``error`` (not computed), ``failed`` (the gate, or its test's own
    assertions), ``underpowered`` (a pass with less power than designed) or ``passed``."""
    if entry.get("passed") is None or entry.get("outcome") == "error":
        return "error"
    if not entry.get("passed") or entry.get("outcome") == "failed":
        return "failed"
    return "underpowered" if "underpowered" in str(entry.get("verdict", "")) else "passed"


def gate_line(entry: Mapping[str, Any]) -> str:
    """A gate's verdict and figures on one line: ``bias_index dims: no-worse; index (relative):
    target 0.8539 vs 0.7996, bound 0.4, p 0.0021`` (the bound: the
    margin of a comparison, a marker's own bound of an absolute check)."""
    head = f"{entry.get('gate')} {entry.get('domain')}: {entry.get('verdict')}"
    if entry.get("passed") is None:
        return f"{head}; {(entry.get('result') or {}).get('error', 'not computed')}"
    parts = []
    for m in (entry.get("row") or {}).get("methods") or []:
        t, b, bound, p = (_number(m.get(k)) for k in ("target", "baselines", "bound", "p"))
        figures = [f"target {t:.4g}" + (f" vs {b:.4g}" if b is not None else "")] if t is not None else []
        figures += [f"bound {bound:.4g}"] if bound is not None else []
        figures += [f"p {p:.2g}"] if p is not None else []
        parts.append(f"{m.get('method')}: {m.get('verdict')}" + (f", {', '.join(figures)}" if figures else ""))
    return "; ".join([head, *parts])


def endpoint_host(entry: Mapping[str, Any]) -> str | None:
    """Where a deployment is served, as a host (and port) only: no scheme's user, no path, no
    query; ``python:<callable>`` for a Python target; None for a provider's default endpoint."""
    if entry.get("python"):
        return f"python:{entry['python']}"
    http = entry.get("http")
    url = entry.get("api_base") or (http.get("url") if isinstance(http, Mapping) else None)
    if not url:
        return None
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{host}:{port}" if port else host or None


def _deployment(role: str, entry: Mapping[str, Any] | None) -> dict[str, str]:
    if not isinstance(entry, Mapping):
        return {}
    out = {key(role, f): str(entry[f]) for f in _DEPLOYMENT_FIELDS if entry.get(f) not in (None, "")}
    host = endpoint_host(entry)
    if host:
        out[key(role, "endpoint")] = host
    return out


def _comparator(settings: Mapping[str, Any], roster: Mapping[str, Any]) -> str:
    release = settings.get("release") or {}
    if release.get("against"):
        return f"release {Path(str(release['against'])).name}"
    aliases = [str(b.get("alias")) for b in roster.get("baselines") or [] if isinstance(b, Mapping)]
    return f"baselines {', '.join(aliases)}" if aliases else "none"


def _params(doc: Mapping[str, Any], git_commit: str | None) -> dict[str, str]:
    roster, settings = doc.get("roster") or {}, doc.get("settings") or {}
    params = _deployment("target", roster.get("target"))
    for b in roster.get("baselines") or []:
        params.update(_deployment(f"baseline.{slug(b.get('alias', ''))}", b))
    judges = roster.get("judges") or ([roster["judge"]] if roster.get("judge") else [])
    for j in judges:
        params.update(_deployment(f"judge.{slug(j.get('alias', ''))}", j))
    judging = settings.get("judging") or {}
    if judging.get("rubric"):
        params[key("judging", "rubric")] = Path(str(judging["rubric"])).name
    params[key("comparator")] = _comparator(settings, roster)
    release = settings.get("release") or {}
    if release.get("anchor"):
        params[key("anchor")] = Path(str(release["anchor"])).name
    suite = settings.get("suite") or {}
    for name in ("alpha", "power", "strict"):
        if name in suite:
            params[key("suite", name)] = str(suite[name])
    params[key("plugin_version")] = str(doc.get("plugin_version"))
    if git_commit:
        params[key("git_commit")] = git_commit
    return {k: v[:6000] for k, v in params.items()}


def _gate_metrics(entry: Mapping[str, Any], outcome: str) -> dict[str, float]:
    t = test_slug(str(entry.get("test")))
    out = {key(t, "verdict"): VERDICT_CODES[outcome], key(t, "passed"): float(outcome in ("passed", "underpowered"))}
    share = _number(entry.get("suite_level"))
    if share is not None:
        out[key(t, "false_alarm_share")] = share
    for name, metric in USAGE_METRICS.items():  # the calls its plan made (a call two gates asked, in both)
        value = _number((entry.get("usage") or {}).get(name))
        if value is not None:
            out[key(t, metric)] = value
    for m in (entry.get("row") or {}).get("methods") or []:
        method = slug(m.get("method", "gate"))
        for field_name, figure in _ROW_FIGURES.items():
            value = _number(m.get(field_name))
            if value is not None:
                out[key(t, method, figure)] = value
        target, comparator = _number(m.get("target")), _number(m.get("baselines"))
        if target is not None and comparator is not None:
            out[key(t, method, "difference")] = target - comparator
    reliability = (entry.get("result") or {}).get("reliability")
    if isinstance(reliability, Mapping):
        nested = {k: v for k, v in reliability.items() if isinstance(v, Mapping)}
        for part, figures in (nested or {"gate": reliability}).items():
            for figure in _RELIABILITY_FIGURES:
                value = _number(figures.get(figure))
                if value is not None:
                    out[key(t, slug(part), figure)] = value
    return out


def _run_metrics(doc: Mapping[str, Any], gates: Sequence[GateVerdict]) -> dict[str, float]:
    plan, suite = doc.get("plan") or {}, doc.get("suite") or {}
    out = {
        key("gates"): float(len(gates)),
        key("gates_passed"): float(sum(g.outcome in ("passed", "underpowered") for g in gates)),
        key("gates_failed"): float(sum(g.outcome in ("failed", "error") for g in gates)),
    }
    for name, metric in USAGE_METRICS.items():
        if _number(plan.get(name)) is not None:
            out[key(metric)] = float(plan[name])
    for alias, usage in (plan.get("usage") or {}).items():
        for figure in ("calls", "cost_usd"):
            value = _number((usage or {}).get(figure))
            if value is not None:
                out[key("model", slug(alias), figure)] = value
    for name, metric in (("at_most", "false_alarm"), ("power", "power")):
        value = _number(suite.get(name))
        if value is not None:
            out[key("suite", metric)] = value
    return out


def run_key(doc: Mapping[str, Any]) -> str:
    """A hash of what decides the run: each gate's test, verdict and figures, the roster, the
    comparator and the plugin version (not the time it ran, nor how long it took)."""
    decided = {
        "gates": sorted(
            (str(g.get("test")), str(g.get("verdict")), json.dumps(g.get("row"), sort_keys=True, default=str))
            for g in doc.get("gates") or []
        ),
        "roster": doc.get("roster"),
        "release": (doc.get("settings") or {}).get("release", {}).get("against"),
        "version": doc.get("plugin_version"),
    }
    return hashlib.sha256(json.dumps(decided, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_log(
    doc: Mapping[str, Any],
    *,
    artifacts: Iterable[Path] = (),
    tags: Mapping[str, str] | None = None,
    git_commit: str | None = None,
) -> RunLog:
    """The RunLog of the run whose JSON document is ``doc`` (credentials already masked in it);
    ``artifacts``: the report files the run wrote (and the release manifest); ``tags``: the
    user's own (``mlflow.tags``), beside ``llmbias.verdict``, ``llmbias.target``,
    ``llmbias.comparator``, ``llmbias.run_key`` and ``llmbias.plugin_version``."""
    entries = list(doc.get("gates") or [])
    gates = tuple(
        GateVerdict(str(e.get("test")), str(e.get("gate")), str(e.get("verdict")), gate_outcome(e), gate_line(e))
        for e in entries
    )
    metrics: dict[str, float] = _run_metrics(doc, gates)
    for entry, gate in zip(entries, gates, strict=True):
        metrics.update(_gate_metrics(entry, gate.outcome))
    strict = bool(((doc.get("settings") or {}).get("suite") or {}).get("strict"))
    settings, roster = doc.get("settings") or {}, doc.get("roster") or {}
    target = (roster.get("target") or {}).get("alias") if isinstance(roster.get("target"), Mapping) else None
    digest = run_key(doc)
    files = tuple(Path(p) for p in artifacts)
    log = RunLog(
        run_name=f"llmbias {target or 'run'} {str(doc.get('created_at', ''))}".strip(),
        key=digest,
        params=_params(doc, git_commit),
        metrics=metrics,
        tags={},
        gates=gates,
        artifacts=files,
        strict=strict,
        document=None
        if any(p.suffix == ".json" and p.name != "manifest.json" for p in files)
        else json.dumps(doc, indent=2, default=str),
    )
    run_tags = {
        **{str(k): str(v) for k, v in (tags or {}).items()},
        key("verdict"): log.verdict,
        key("run_key"): digest,
        key("comparator"): _comparator(settings, roster),
        key("plugin_version"): str(doc.get("plugin_version")),
        **({key("target"): str(target)} if target else {}),
    }
    return dataclasses.replace(log, tags=run_tags)
