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
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pytest_llmbias.errors import ConfigError

TEST_FILE = "test_bias.py"
WORKFLOW = Path(".github") / "workflows" / "bias.yml"
RELEASE = "main"
#: the anchor the workflow keeps when ``--anchor`` names none: the first release recorded on main
FIRST = "first"

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
    p.set_defaults(run=run_init)


def run_init(args: argparse.Namespace, out: TextIO) -> int:
    """Write the scaffold into ``args.dir``; 0, or 2 (nothing written) when a file exists or an
    entry is not a model."""
    import sys

    folder = args.dir.resolve()
    try:
        scaffold = scaffold_for(args.target, args.baseline, args.judge, args.domain, anchor=args.anchor)
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
    for name in scaffold.files:
        print(f"wrote {name}", file=out)
    print(
        "next: run pytest here; the workflow records the release on pushes to main and compares pull requests "
        f"with it and with the anchor release {args.anchor or FIRST!r} (add the secrets its comment names)",
        file=out,
    )
    return 0


def scaffold_for(
    target: str, baselines: list[str], judge: str | None, domain: str, *, anchor: str | None = None
) -> Scaffold:
    """The three files for this roster, the workflow's anchor release ``anchor`` (None: the first
    release recorded on main); ConfigError for an entry that is not a model, fewer than two
    baselines, an unknown domain, or an anchor that cannot name a release."""
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
        load_domain(domain)
    except ConfigError as exc:
        raise ConfigError(f"--domain: {exc}") from None
    method = "judge" if judge is not None else "embedding"
    return Scaffold(
        {
            "llmbias.yaml": _settings(entries),
            TEST_FILE: _test(domain, method),
            str(WORKFLOW): _workflow(_key_variables([spec for _, spec in parsed]), anchor),
        }
    )


def _entry(value: str, flag: str) -> tuple[Any, Any]:
    """``value`` as the settings file will hold it (a string, or the mapping its inline YAML
    gives), and the model entry a run reads from it (checked as a run checks it)."""
    from pytest_llmbias.config.model_entries import Where, parse_model
    from pytest_llmbias.config.yamlutil import load_inline_mapping

    raw: Any = value.strip()
    if raw.startswith("{"):
        raw = load_inline_mapping(raw, what=flag, error=ConfigError)
    return raw, parse_model(raw, flag, Where(flag), Path("."))


def _settings(entries: dict[str, Any]) -> str:
    import yaml

    body = yaml.safe_dump(entries, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return (
        "# pytest-llmbias: the roster. The target is the release under test; the baselines are trusted models\n"
        "# it is compared with; the judge rates answers. See `llmbias --help` and pytest-llmbias's docs.\n"
        + body
        + "generation: {max_tokens: 300}\n"
    )


def _test(domain: str, method: str) -> str:
    return f'''"""The release's first bias gate (pytest-llmbias). Run: pytest"""

import pytest


@pytest.mark.bias_equivalent({json.dumps(domain)}, method={json.dumps(method)})
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


def _workflow(keys: list[str], anchor: str | None = None) -> str:
    env = "".join(f"          {k}: ${{{{ secrets.{k} }}}}\n" for k in keys) or "          {}\n"
    pinned = anchor or FIRST
    if anchor is None:
        about = (
            f"# and with the anchor, the first release recorded on main (kept as {FIRST!r} beside it), so that a\n"
            "# chain of small regressions cannot pass one release at a time. To pin another release, record it,\n"
            "# commit it under bias_releases/ and name it in --llmbias-anchor below (or llmbias init --anchor NAME).\n"
        )
        keep = (
            f"            if [ ! -f bias_releases/{FIRST}/manifest.json ]; then  # the anchor: the first one recorded\n"
            f"              pytest --llmbias-record-release {FIRST} --llmbias-json out/{FIRST}.json  # warm: no call\n"
            "            fi\n"
        )
    else:
        about = (
            f"# and with the anchor release {anchor!r}, which the team recorded and committed under\n"
            f"# bias_releases/{anchor}/, so that a chain of small regressions cannot pass one release at a time.\n"
        )
        keep = ""
    return f"""# pytest-llmbias in CI: a push to main records the release; a pull request is compared with the last
# one recorded (kept in the Actions cache)
{about}# Add these secrets to the repository: {", ".join(keys) or "none"}.
name: bias
on:
  push:
    branches: [main]
  pull_request:
jobs:
  bias:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install pytest-llmbias
      - name: The releases recorded on main
        uses: actions/cache/restore@v4
        with:
          path: bias_releases
          key: llmbias-release-${{{{ github.sha }}}}
          restore-keys: llmbias-release-
      - name: Bias gates
        env:
{env}        run: |
          if [ "${{{{ github.event_name }}}}" = "pull_request" ]; then
            pytest --llmbias-against {RELEASE} --llmbias-anchor {pinned} --llmbias-json out/run.json
          else
            pytest --llmbias-record-release {RELEASE} --llmbias-force --llmbias-json out/run.json
{keep}          fi
      - name: Summary
        if: always()
        run: llmbias report out/run.json --markdown >> "$GITHUB_STEP_SUMMARY"
      - name: Keep the releases
        if: github.event_name == 'push'
        uses: actions/cache/save@v4
        with:
          path: bias_releases
          key: llmbias-release-${{{{ github.sha }}}}
"""
