"""The ``llmbias`` command (also ``python -m pytest_llmbias``): everything beside the pytest run
itself — a project's start, a local model's server, domains, the response store, recorded
releases, the run history and saved reports (only ``generate-domain`` calls a model, through the
store; ``serve`` runs one).

Exit codes: 0 success; 1 a check found problems (``domains validate``, ``store verify``, ``store check``); 2 bad
usage (argparse's); 3 an error (an unknown domain, an unreadable store). Every command reads the
project's settings as pytest does (``llmbias.yaml`` in the rootdir, see
:mod:`pytest_llmbias.cli.project`): the store, the snapshots, the releases, the history and the
domain paths default to the project's.

    llmbias domains list [--path DIR]          every domain: name, kind, size, file
    llmbias domains show NAME [--path DIR]     one domain in full: questions, groups, templates, topics
    llmbias domains validate FILE...           load each file; report the first error in each
    llmbias store stats [--store DIR] [--snapshot FILE ...]
                                               entries, models, size on disk
    llmbias store verify [--store DIR] [--snapshot FILE ...]
                                               re-hash every entry and snapshot line; list what is wrong
    llmbias store check [--store DIR]          examine the store for damage, changing nothing
    llmbias store repair [--store DIR]         heal it, keeping every answer that can be read
    llmbias store export OUT [--store DIR]     every stored response as a JSONL snapshot
    llmbias store import SNAPSHOT... [--store DIR]
                                               write a snapshot's responses into the store
    llmbias store clear [--store DIR] --yes    delete the store folder (snapshots are kept)
    llmbias report RUN.json [--markdown]       the end-of-run table of a saved JSON document
    llmbias report RUN.json --html OUT.html    its HTML report, re-rendered without calling any model
    llmbias report RUN.json --mlflow [--mlflow-model NAME/VERSION]   log a saved run to MLflow
    llmbias generate-domain --name N --description D --category C... [--questions N] [--model ALIAS]
    llmbias generate-domain --name N --description D --sides A,B... [--questions N] [--model ALIAS]
                                               a model of the roster drafts a domain file to review
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from pytest_llmbias.cli import (
    domains as cli_domains,
    init as cli_init,
    report_mlflow as cli_report_mlflow,
    store as cli_store,
)
from pytest_llmbias.cli.project import Project, epilog

OK, PROBLEMS, USAGE, ERROR = 0, 1, 2, 3


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help(out)
        return USAGE
    from pytest_llmbias.errors import LLMBiasError

    try:
        code = args.run(args, out)
        out.flush()  # inside the try: a closed pipe shows here, not at interpreter exit
        return code
    except LLMBiasError as exc:
        print(f"llmbias: {exc}", file=sys.stderr)
        return ERROR
    except BrokenPipeError:  # the reader stopped early (`llmbias domains list | head`): not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmbias",
        description="The pytest-llmbias command, beside pytest (which runs the gates): start a project "
        "(init), serve a small local model to gate (serve), list and check domains or have a model draft one "
        "(domains, generate-domain), inspect and repair the response store (store), and read what runs "
        "recorded (release, history, report).",
        epilog="Exit codes: 0 ok, 1 problems found, 2 bad usage, 3 error.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(title="commands")

    cli_domains.add_commands(commands)
    cli_store.add_commands(commands)
    release = commands.add_parser("release", help="list and show recorded releases").add_subparsers(title="release")
    releases_help = "the release folder (default: release.dir of the project's llmbias.yaml, else bias_releases)"
    p = release.add_parser(
        "list", help="every recorded release: name, date, target and answers", **_help("release list")
    )
    p.add_argument("--dir", type=Path, default=None, help=releases_help)
    p.set_defaults(run=_release_list)
    p = release.add_parser(
        "show", help="one release's manifest, its answers checked against it", **_help("release show")
    )
    p.add_argument("name", help="a release name, or a release folder's path")
    p.add_argument("--dir", type=Path, default=None, help=releases_help)
    p.set_defaults(run=_release_show)
    p = commands.add_parser(
        "history", help="the trend of the gates' figures over the recorded runs", **_help("history")
    )
    p.add_argument(
        "--db",
        type=Path,
        default=None,
        help="the history database (default: the project's, history.sqlite in its store folder)",
    )
    p.add_argument("--gate", help="one gate marker's rows (bias_equivalent, ...)")
    p.add_argument("--domain", help="one domain's rows")
    p.add_argument("--last", type=int, metavar="N", help="the last N runs only")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.set_defaults(run=_history)
    p = commands.add_parser(
        "report", help="the end-of-run table of a run's JSON document (--llmbias-json)", **_help("report")
    )
    p.add_argument("document", type=Path)
    p.add_argument("--markdown", action="store_true", help="as Markdown, for a pull request or a step summary")
    p.add_argument("--html", type=Path, metavar="OUT", help="render the run's HTML report to OUT (no model is called)")
    cli_report_mlflow.add_options(p)
    p.set_defaults(run=_report)
    _generate_domain_parser(commands)
    cli_init.add_commands(commands, _help("init"))
    p = commands.add_parser(
        "serve", help="serve a small local model behind an OpenAI-compatible endpoint (extra: local)", **_help("serve")
    )
    from pytest_llmbias.local.server import add_arguments

    add_arguments(p)
    p.set_defaults(run=_serve)
    return parser


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    """``llmbias serve``: load the model and serve it until stopped (a missing extra or a bad
    model name is a usage error)."""
    import importlib.util

    missing = [m for m in ("torch", "transformers", "gguf", "aiohttp") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"llmbias serve needs {', '.join(missing)}: pip install 'pytest-llmbias[local]'", file=sys.stderr)
        return USAGE
    from pytest_llmbias.local.server import model_file, serve_parsed

    try:
        model_file(args.model)
    except (ValueError, RuntimeError) as exc:
        print(f"llmbias serve: {exc}", file=sys.stderr)
        return USAGE
    try:
        serve_parsed(args)
    except KeyboardInterrupt:
        pass
    return OK


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-llmbias")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


def _help(command: str) -> dict:
    """The ``add_parser`` keywords that end a command's ``--help`` with its example."""
    return {"epilog": epilog(command), "formatter_class": argparse.RawDescriptionHelpFormatter}


def _release_list(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.releases.release import list_releases

    directory = args.dir if args.dir is not None else Project.find().releases
    releases = list_releases(directory)
    if not releases:
        print(f"no release recorded in {directory}", file=out)
        return OK
    for r in releases:
        m = r.manifest
        target = (m.get("target") or {}).get("model", "?")
        answers = (m.get("responses") or {}).get("count", "?")
        print(f"{r.name:<16} {str(m.get('created', '?')):<26} {target:<32} {answers} answers", file=out)
    return OK


def _release_show(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.releases.release import Release

    directory = args.dir if args.dir is not None else Project.find().releases
    for line in Release.load(args.name, directory).describe():
        print(line, file=out)
    return OK


def _history(args: argparse.Namespace, out: TextIO) -> int:
    import sqlite3

    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.report.history import read, render

    db = args.db if args.db is not None else Project.find().history
    if not db.is_file():
        raise StoreError(f"no run history at {db}: a run with a gate marker writes one (--llmbias-history)")
    try:
        rows = read(db, gate=args.gate, domain=args.domain, last=args.last)
    except sqlite3.Error as exc:
        raise StoreError(f"{db}: not a run history ({exc})") from None
    out.write(render(rows, args.format))
    return OK


def _report(args: argparse.Namespace, out: TextIO) -> int:
    import json

    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.report.json_report import SCHEMA_VERSION
    from pytest_llmbias.report.rows import count
    from pytest_llmbias.report.terminal import gate_table

    try:
        doc = json.loads(args.document.read_text(encoding="utf-8"))
        if any("row" not in g for g in doc["gates"]):  # every entry has its row
            raise KeyError("row")
        plan = doc["plan"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"{args.document} is not a pytest-llmbias JSON document ({type(exc).__name__}: {exc})"
        ) from None
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(
            f"{args.document} has schema_version {doc.get('schema_version')!r}; this pytest-llmbias reads "
            f"{SCHEMA_VERSION}"
        )
    if cli_report_mlflow.wanted(args):
        return cli_report_mlflow.log_saved(args, doc, out)
    if args.html is not None:
        from pytest_llmbias.gates import gate_figures
        from pytest_llmbias.report import html

        html.write(args.html, doc, figures_for=gate_figures)
        print(f"{args.html}: {len(doc['gates'])} gate(s) rendered", file=out)
        return OK
    if args.markdown:
        from pytest_llmbias.report.markdown import markdown_report

        out.write(markdown_report(doc["gates"]))
        return OK
    print(
        f"run of {doc.get('created_at')}, pytest-llmbias {doc.get('plugin_version')}: {plan['calls']} calls "
        f"({plan['from_store']} from store, {plan['fetched']} fetched, {plan['failed']} failed)",
        file=out,
    )
    for line in gate_table(doc["gates"]):  # the entries: each row with its gate's outcome
        print(line, file=out)
    print(count(doc["gates"]).sentence(), file=out)
    return OK


# -- generate-domain ------------------------------------------------------------------------------


def _generate_domain_parser(commands) -> None:
    p = commands.add_parser(
        "generate-domain",
        help="have a model of the roster draft a domain's questions, for review",
        description="A model of the roster (the judge by default, else the target) writes N questions per "
        "category; near-duplicates are removed with the project's embedding model and a domain "
        "file is written for a person to review. Calls go through the response store: the "
        "same arguments again are answered from it (and work with --offline).",
        **_help("generate-domain"),
    )
    p.add_argument("--name", required=True, help="the domain's name (also the file's: NAME.yaml)")
    p.add_argument("--description", required=True, help="what the domain covers, in a sentence or two")
    p.add_argument(
        "--category",
        action="append",
        metavar="NAME",
        help="a category to write questions for (repeat, or a comma list)",
    )
    p.add_argument(
        "--sides",
        action="append",
        metavar="A,B",
        help="draft paired prompts instead: the two sides of one subject (repeat for more subjects); each "
        "pair asks the same task for A and for B, written in the domain's 'pairs:' for bias_evenhanded",
    )
    p.add_argument(
        "--questions",
        type=int,
        default=10,
        metavar="N",
        help="questions per category, or pairs per subject (default 10)",
    )
    p.add_argument(
        "--model",
        metavar="ALIAS",
        help="the alias of the model that writes (target, a baseline or the "
        "judge; default: the judge if configured, else the target)",
    )
    p.add_argument(
        "--similarity",
        type=float,
        default=None,
        metavar="COS",  # None: DEFAULT_SIMILARITY, 0.9
        help="drop a question whose cosine similarity to a kept one is at least this (default 0.9)",
    )
    p.add_argument(
        "--samples",
        type=int,
        default=1,
        metavar="S",
        help="answers asked per category, pooled before deduplication (default 1; more fill short categories)",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="the first sample's seed (default: generation.seed of the settings)"
    )
    p.add_argument("--title", help="the domain's title (default: drawn from the name)")
    p.add_argument(
        "--out", type=Path, metavar="FILE", help="the file to write (default NAME.yaml; its name must be NAME)"
    )
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.add_argument(
        "--rootdir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where llmbias.yaml is found and relative store paths start (default: the project's "
        "rootdir, found upwards from the current folder as pytest finds it)",
    )
    p.add_argument("--offline", action="store_true", help="call no model: answer only from the store and snapshots")
    p.set_defaults(run=_generate_domain)


def _generate_domain(args: argparse.Namespace, out: TextIO) -> int:
    """Draft a domain file; 0 written (with a warning per short category), 2 bad arguments or an
    existing file without --force, 3 an error (settings, a failed call, a category left empty)."""
    import dataclasses

    from pytest_llmbias.cli.generate_domain import generate_domain
    from pytest_llmbias.domains.draft_file import check_output, write_domain
    from pytest_llmbias.domains.draft_questions import DEFAULT_SIMILARITY, DomainBrief
    from pytest_llmbias.errors import ConfigError, DomainError
    from pytest_llmbias.session import BiasSession

    if bool(args.category) == bool(args.sides):
        print(
            "llmbias: generate-domain takes --category (questions) or --sides (paired prompts), one of them",
            file=sys.stderr,
        )
        return USAGE
    if args.sides:
        return cli_domains.generate_pairs(args, out)
    try:
        brief = DomainBrief.build(args.name, args.description, args.category, args.questions, title=args.title)
        if args.samples < 1:
            raise ConfigError(f"--samples must be at least 1, got {args.samples}")
        threshold = DEFAULT_SIMILARITY if args.similarity is None else args.similarity
        if not 0.0 < threshold <= 1.0:
            raise ConfigError(f"--similarity must be in (0, 1], got {threshold:g}")
        target = args.out if args.out is not None else Path(f"{brief.name}.yaml")
        check_output(target, brief.name, force=args.force)
    except DomainError as exc:
        print(f"llmbias: {exc}" + ("; pass --force to replace it" if "exists" in str(exc) else ""), file=sys.stderr)
        return USAGE
    except ConfigError as exc:
        print(f"llmbias: {exc}", file=sys.stderr)
        return USAGE
    if args.rootdir is not None and not args.rootdir.is_dir():
        print(f"llmbias: --rootdir {args.rootdir} is not a folder", file=sys.stderr)
        return USAGE
    project = Project.find(cwd=args.rootdir, root=args.rootdir, cli={"offline": args.offline})
    settings = dataclasses.replace(
        project.settings, store=dataclasses.replace(project.settings.store, dir=project.store)
    )
    if args.seed is not None:
        settings = dataclasses.replace(settings, generation=dataclasses.replace(settings.generation, seed=args.seed))
    session = BiasSession(settings)
    try:
        generated = generate_domain(session, brief, alias=args.model, samples=args.samples, threshold=threshold)
    finally:
        session.close()

    print(
        f"domain {brief.name!r}: questions by {generated.alias} ({generated.model}); "
        f"{generated.fetched + generated.from_store} call(s): {generated.fetched} fetched, "
        f"{generated.from_store} from the store",
        file=out,
    )
    print(f"  {'category':<28} {'asked':>5} {'parsed':>6} {'near-dup':>8} {'kept':>5}", file=out)
    for c in generated.categories:
        print(f"  {c.id:<28} {c.asked:>5} {c.parsed:>6} {len(c.dropped):>8} {len(c.questions):>5}", file=out)
    for c in generated.categories:
        if c.questions and c.short:
            print(
                f"warning: category {c.id!r}: {len(c.questions)} of {c.asked} questions kept ({c.parsed} parsed, "
                f"{len(c.dropped)} near-duplicate(s) dropped); ask again with --samples {args.samples + 1} "
                "for more, or write the rest by hand",
                file=out,
            )
    if generated.empty:
        names = ", ".join(repr(c.id) for c in generated.empty)
        print(
            f"llmbias: the model's answer held no usable question for category {names}; nothing was written "
            "(the answers are stored: read them with `llmbias store export`, or ask again with another --seed)",
            file=sys.stderr,
        )
        return ERROR
    written = write_domain(generated, target, force=args.force)
    print(
        f"wrote {written}: a model wrote it, so review every question before use; "
        f"check it with `llmbias domains validate {written}`",
        file=out,
    )
    return OK


def markdown_table() -> str:
    """docs/configuration.md's table of every option's spellings (command line, environment, ini key, key in
    ``llmbias.yaml``), one row per option in :data:`OPTIONS` order, ending with a newline."""
    from pytest_llmbias.config.option_table import CONFIG, OPTIONS

    rows = ["| command line | environment | ini | llmbias.yaml |", "|---|---|---|---|"]
    for o in OPTIONS:
        value = o.metavar or ("|".join(o.choices.values()) if o.choices else None)
        cli = f"`{o.flag} {value}`" if value else f"`{o.flag}`"
        env, ini = f"`{o.env}`", f"`{o.ini}`"
        if o.repeatable:
            cli += " (repeat; replaces the file's list)"
            env += " (comma-separated)" if o.separator == "," else " (`os.pathsep`-separated)"
            ini += " (one per line)"
        if o.kind == "bool":
            env += " (`true`/`false`)"
            ini += " (`true`/`false`)"
        yaml = "— (names the file)" if o is CONFIG else f"`{o.key}`"
        # a pipe inside a cell, even within backticks, splits the cell on GitHub unless escaped
        cells = (cell.replace("|", "\\|") for cell in (cli, env, ini, yaml))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
