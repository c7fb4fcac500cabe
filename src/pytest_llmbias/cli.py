"""The ``llmbias`` command (also ``python -m pytest_llmbias``): domains and the response store,
without running pytest (only ``generate-domain`` calls a model, through the store).

Exit codes: 0 success; 1 a check found problems (``domains validate``, ``store verify``); 2 bad
usage (argparse's); 3 an error (an unknown domain, an unreadable store).

    llmbias domains list [--path DIR]          every domain: name, kind, size, file
    llmbias domains show NAME [--path DIR]     one domain's categories, questions, topics
    llmbias domains validate FILE...           load each file; report the first error in each
    llmbias store stats [--store DIR]          entries, models, size on disk
    llmbias store verify [--store DIR] [--snapshot FILE ...]
                                               re-hash every entry and snapshot line; list what is wrong
    llmbias store export OUT [--store DIR]     every stored response as a JSONL snapshot
    llmbias store import SNAPSHOT... [--store DIR]
                                               write a snapshot's responses into the store
    llmbias store clear [--store DIR] --yes    delete the store folder (snapshots are kept)
    llmbias report RUN.json [--markdown]       the end-of-run table of a saved JSON document
    llmbias report RUN.json --html OUT.html    its HTML report, re-rendered without calling any model
    llmbias generate-domain --name N --description D --category C... [--questions N] [--model ALIAS]
                                               a model of the roster drafts a domain file to review
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

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
    parser = argparse.ArgumentParser(prog="llmbias", description="Domains and the response store of pytest-llmbias.",
                                     epilog="Exit codes: 0 ok, 1 problems found, 2 bad usage, 3 error.")
    commands = parser.add_subparsers(title="commands")

    domains = commands.add_parser("domains", help="list, show and validate domains").add_subparsers(title="domains")
    p = domains.add_parser("list", help="every domain: name, kind, size and file")
    p.add_argument("--path", action="append", default=[], type=Path, help="a folder of domain files (repeat)")
    p.set_defaults(run=_domains_list)
    p = domains.add_parser("show", help="one domain's categories and questions, or perspectives and topics")
    p.add_argument("name")
    p.add_argument("--path", action="append", default=[], type=Path)
    p.set_defaults(run=_domains_show)
    p = domains.add_parser("validate", help="load each file and report the first error in each")
    p.add_argument("files", nargs="+", type=Path)
    p.set_defaults(run=_domains_validate)

    store = commands.add_parser("store", help="inspect, verify, export or clear the response store").add_subparsers(title="store")
    for name, run, help_ in (("stats", _store_stats, "entries per model and size on disk"),
                             ("verify", _store_verify, "re-hash every entry (and snapshot line); list what is wrong"),
                             ("export", _store_export, "write every stored response to a JSONL snapshot"),
                             ("import", _store_import, "write the responses of snapshots into the store"),
                             ("clear", _store_clear, "delete the store folder")):
        p = store.add_parser(name, help=help_)
        p.add_argument("--store", type=Path, default=Path(".llmbias"), help="the store folder (default .llmbias)")
        if name == "verify":
            p.add_argument("--snapshot", action="append", default=[], type=Path, help="a snapshot to verify too (repeat)")
        if name == "export":
            p.add_argument("out", type=Path)
        if name == "import":
            p.add_argument("snapshots", nargs="+", type=Path)
        if name == "clear":
            p.add_argument("--yes", action="store_true", help="really delete it")
        p.set_defaults(run=run)
    release = commands.add_parser("release", help="list and show recorded releases").add_subparsers(title="release")
    p = release.add_parser("list", help="every recorded release: name, date, target and answers")
    p.add_argument("--dir", type=Path, default=Path("bias_releases"), help="the release folder (default bias_releases)")
    p.set_defaults(run=_release_list)
    p = release.add_parser("show", help="one release's manifest, its answers checked against it")
    p.add_argument("name", help="a release name, or a release folder's path")
    p.add_argument("--dir", type=Path, default=Path("bias_releases"), help="the release folder (default bias_releases)")
    p.set_defaults(run=_release_show)
    p = commands.add_parser("history", help="the trend of the gates' figures over the recorded runs")
    p.add_argument("--db", type=Path, default=Path(".llmbias") / "history.sqlite",
                   help="the history database (default .llmbias/history.sqlite)")
    p.add_argument("--gate", help="one gate marker's rows (bias_equivalent, ...)")
    p.add_argument("--domain", help="one domain's rows")
    p.add_argument("--last", type=int, metavar="N", help="the last N runs only")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.set_defaults(run=_history)
    p = commands.add_parser("report", help="the end-of-run table of a run's JSON document (--llmbias-json)")
    p.add_argument("document", type=Path)
    p.add_argument("--markdown", action="store_true", help="as Markdown, for a pull request or a step summary")
    p.add_argument("--html", type=Path, metavar="OUT", help="render the run's HTML report to OUT (no model is called)")
    p.set_defaults(run=_report)
    _generate_domain_parser(commands)
    return parser


def _release_list(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.releases import list_releases

    releases = list_releases(args.dir)
    if not releases:
        print(f"no release recorded in {args.dir}", file=out)
        return OK
    for r in releases:
        m = r.manifest
        target = (m.get("target") or {}).get("model", "?")
        answers = (m.get("responses") or {}).get("count", "?")
        print(f"{r.name:<16} {str(m.get('created', '?')):<26} {target:<32} {answers} answers", file=out)
    return OK


def _release_show(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.releases import Release

    for line in Release.load(args.name, args.dir).describe():
        print(line, file=out)
    return OK


def _history(args: argparse.Namespace, out: TextIO) -> int:
    import sqlite3

    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.report.history import read, render

    if not args.db.is_file():
        raise StoreError(f"no run history at {args.db}: a run with a gate marker writes one (--llmbias-history)")
    try:
        rows = read(args.db, gate=args.gate, domain=args.domain, last=args.last)
    except sqlite3.Error as exc:
        raise StoreError(f"{args.db}: not a run history ({exc})") from None
    out.write(render(rows, args.format))
    return OK


def _report(args: argparse.Namespace, out: TextIO) -> int:
    import json

    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.report.json_report import SCHEMA_VERSION
    from pytest_llmbias.report.terminal import gate_table

    try:
        doc = json.loads(args.document.read_text(encoding="utf-8"))
        rows = [g["row"] for g in doc["gates"]]
        plan = doc["plan"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{args.document} is not a pytest-llmbias JSON document ({type(exc).__name__}: {exc})") from None
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(f"{args.document} has schema_version {doc.get('schema_version')!r}; this pytest-llmbias reads "
                         f"{SCHEMA_VERSION}")
    if args.html is not None:
        from pytest_llmbias.report import html

        html.write(args.html, doc)
        print(f"{args.html}: {len(doc['gates'])} gate(s) rendered", file=out)
        return OK
    if args.markdown:
        from pytest_llmbias.report.markdown import markdown_report

        out.write(markdown_report(doc["gates"]))
        return OK
    print(f"run of {doc.get('created_at')}, pytest-llmbias {doc.get('plugin_version')}: {plan['calls']} calls "
          f"({plan['from_store']} from store, {plan['fetched']} fetched, {plan['failed']} failed)", file=out)
    for line in gate_table(rows):
        print(line, file=out)
    return OK


# -- domains -----------------------------------------------------------------------------------------


def _kind(domain) -> str:
    if domain.topics:
        return "topics"
    if any(q.texts or q.split for q in domain.questions):
        return "binary"
    return "counterfactual" if domain.counterfactual is not None and not domain.categories else "questions"


def _domains_list(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.domains import load_domain
    from pytest_llmbias.domains.loader import list_domains

    for name, path in sorted(list_domains(args.path).items()):
        domain = load_domain(path)
        size = f"{len(domain.topics)} topics" if domain.topics else f"{len(domain.prompts)} prompts"
        print(f"{name:<20} {_kind(domain):<15} {size:<14} {path}", file=out)
    return OK


def _domains_show(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.domains import load_domain

    domain = load_domain(args.name, args.path)
    print(f"{domain.name}: {domain.title}\n{domain.description}\nfocus: {domain.focus}\nsource: {domain.source}", file=out)
    for category in domain.categories:
        weight = f" (weight {category.weight:g})" if category.weight is not None else ""
        print(f"\n[{category.id}] {category.name}{weight}", file=out)
        for q in category.questions:
            languages = f" [{', '.join(q.texts)}]" if q.texts else ""
            print(f"  {q.id}: {q.text}{languages}", file=out)
    if domain.counterfactual is not None:
        print(f"\ncounterfactual prompts: {len(domain.counterfactual.expand())}", file=out)
    if domain.topics:
        print("\nperspectives: " + ", ".join(p.name + (" (neutral)" if p.neutral else "") for p in domain.perspectives), file=out)
        for t in domain.topics:
            print(f"  {t.id}: {t.title}", file=out)
    return OK


def _domains_validate(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.domains import load_domain
    from pytest_llmbias.errors import DomainError

    bad = 0
    for path in args.files:
        try:
            domain = load_domain(path)
        except DomainError as exc:
            bad += 1
            print(f"FAIL {exc}", file=out)
        else:
            print(f"ok   {path}: {domain.name}, {len(domain.topics) or len(domain.prompts)} items", file=out)
    return PROBLEMS if bad else OK


# -- generate-domain ------------------------------------------------------------------------------


def _generate_domain_parser(commands) -> None:
    p = commands.add_parser(
        "generate-domain", help="have a model of the roster draft a domain's questions, for review",
        description="A model of the roster (the judge by default, else the target) writes N questions per "
                    "category; near-duplicates are removed with the project's embedding model and a domain "
                    "file is written for a person to review. Calls go through the response store: the "
                    "same arguments again are answered from it (and work with --offline).")
    p.add_argument("--name", required=True, help="the domain's name (also the file's: NAME.yaml)")
    p.add_argument("--description", required=True, help="what the domain covers, in a sentence or two")
    p.add_argument("--category", action="append", required=True, metavar="NAME",
                   help="a category to write questions for (repeat, or a comma list)")
    p.add_argument("--questions", type=int, default=10, metavar="N", help="questions per category (default 10)")
    p.add_argument("--model", metavar="ALIAS", help="the alias of the model that writes (target, a baseline or the "
                                                   "judge; default: the judge if configured, else the target)")
    p.add_argument("--similarity", type=float, default=None, metavar="COS",  # None: DEFAULT_SIMILARITY, 0.9
                   help="drop a question whose cosine similarity to a kept one is at least this (default 0.9)")
    p.add_argument("--samples", type=int, default=1, metavar="S",
                   help="answers asked per category, pooled before deduplication (default 1; more fill short categories)")
    p.add_argument("--seed", type=int, default=None, help="the first sample's seed (default: generation.seed of the settings)")
    p.add_argument("--title", help="the domain's title (default: drawn from the name)")
    p.add_argument("--out", type=Path, metavar="FILE", help="the file to write (default NAME.yaml; its name must be NAME)")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.add_argument("--rootdir", type=Path, default=None, metavar="DIR",
                   help="where llmbias.yaml is found and relative store paths start (default: the current folder)")
    p.add_argument("--offline", action="store_true", help="call no model: answer only from the store and snapshots")
    p.set_defaults(run=_generate_domain)


def _generate_domain(args: argparse.Namespace, out: TextIO) -> int:
    """Draft a domain file; 0 written (with a warning per short category), 2 bad arguments or an
    existing file without --force, 3 an error (settings, a failed call, a category left empty)."""
    import dataclasses
    import os

    from pytest_llmbias.domain_writer import generate_domain
    from pytest_llmbias.domains.draft_file import check_output, write_domain
    from pytest_llmbias.domains.draft_questions import DEFAULT_SIMILARITY, DomainBrief
    from pytest_llmbias.errors import ConfigError, DomainError
    from pytest_llmbias.session import BiasSession
    from pytest_llmbias.settings_sources import find_config, resolve_settings

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
    root = (args.rootdir or Path.cwd()).resolve()
    if not root.is_dir():
        print(f"llmbias: --rootdir {args.rootdir} is not a folder", file=sys.stderr)
        return USAGE
    config = find_config(cli_path=None, ini_path=None, environ=os.environ, rootdir=root, cwd=root)
    settings = resolve_settings(cli={"offline": args.offline}, environ=os.environ, config_path=config, cwd=root)
    if args.seed is not None:
        settings = dataclasses.replace(settings, generation=dataclasses.replace(settings.generation, seed=args.seed))
    session = BiasSession(settings)
    try:
        generated = generate_domain(session, brief, alias=args.model, samples=args.samples, threshold=threshold)
    finally:
        session.close()

    print(f"domain {brief.name!r}: questions by {generated.alias} ({generated.model}); "
          f"{generated.fetched + generated.from_store} call(s): {generated.fetched} fetched, "
          f"{generated.from_store} from the store", file=out)
    print(f"  {'category':<28} {'asked':>5} {'parsed':>6} {'near-dup':>8} {'kept':>5}", file=out)
    for c in generated.categories:
        print(f"  {c.id:<28} {c.asked:>5} {c.parsed:>6} {len(c.dropped):>8} {len(c.questions):>5}", file=out)
    for c in generated.categories:
        if c.questions and c.short:
            print(f"warning: category {c.id!r}: {len(c.questions)} of {c.asked} questions kept ({c.parsed} parsed, "
                  f"{len(c.dropped)} near-duplicate(s) dropped); ask again with --samples {args.samples + 1} "
                  "for more, or write the rest by hand", file=out)
    if generated.empty:
        names = ", ".join(repr(c.id) for c in generated.empty)
        print(f"llmbias: the model's answer held no usable question for category {names}; nothing was written "
              "(the answers are stored: read them with `llmbias store export`, or ask again with another --seed)",
              file=sys.stderr)
        return ERROR
    written = write_domain(generated, target, force=args.force)
    print(f"wrote {written}: a model wrote it, so review every question before use; "
          f"check it with `llmbias domains validate {written}`", file=out)
    return OK


# -- the store -----------------------------------------------------------------------------------------


def _entries(directory: Path):
    """(key, record) of every response entry of the store, read straight from diskcache."""
    import json

    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.store.disk import open_cache

    db = directory / "responses" / "cache.db"
    if not db.is_file():
        raise StoreError(f"no response store at {directory} (no {db})")
    cache = open_cache(directory / "responses", timeout=60.0)
    try:
        for key in list(cache.iterkeys()):
            if str(key).startswith("response:"):
                raw = cache.get(key)
                try:
                    record = json.loads(raw)
                except (TypeError, ValueError):
                    record = None
                yield str(key)[len("response:"):], record
    finally:
        cache.close()


def _store_stats(args: argparse.Namespace, out: TextIO) -> int:
    by_model: Counter[str] = Counter()
    tokens = 0
    for _, record in _entries(args.store):
        if isinstance(record, dict):
            by_model[str(record.get("model"))] += 1
            usage = record.get("usage") or {}
            tokens += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
    size = sum(p.stat().st_size for p in args.store.rglob("*") if p.is_file())
    print(f"{sum(by_model.values())} responses, {tokens:,} tokens, {size / 1e6:.1f} MB in {args.store}", file=out)
    for model, n in by_model.most_common():
        print(f"  {model}: {n}", file=out)
    return OK


def _store_verify(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.calls import Response
    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.store.snapshot import SnapshotLayer

    problems = checked = 0
    for key, record in _entries(args.store):
        checked += 1
        try:
            if not isinstance(record, dict):
                raise ValueError("not a JSON response record")
            response = Response.from_dict(record, source="store")
            if response.key != key or record.get("key") != key:
                raise ValueError("its request fields hash to another key")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problems += 1
            print(f"bad entry {key}: {exc}", file=out)
    for snapshot in args.snapshot:
        try:
            n = len(SnapshotLayer().add(snapshot).responses)
            checked += n
        except StoreError as exc:
            problems += 1
            print(f"bad snapshot: {exc}", file=out)
    print(f"{checked} checked, {problems} problem(s)", file=out)
    return PROBLEMS if problems else OK


def _store_export(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.calls import Response
    from pytest_llmbias.store.snapshot import write_snapshot

    responses = [Response.from_dict(r, source="store") for _, r in _entries(args.store) if isinstance(r, dict)]
    n = write_snapshot(args.out, responses)
    print(f"{n} responses written to {args.out}", file=out)
    return OK


def _store_import(args: argparse.Namespace, out: TextIO) -> int:
    """Every response of the snapshots (checked line by line, as a run reads them) into the store;
    a call the store already answers differently is reported and left as it is."""
    from pytest_llmbias.store import ResponseStore
    from pytest_llmbias.store.snapshot import SnapshotLayer

    layer = SnapshotLayer()
    for snapshot in args.snapshots:
        layer.add(snapshot)
    store = ResponseStore(args.store)
    added = same = conflicts = 0
    try:
        for key, response in layer.responses.items():
            known = store.get(key)
            if known is None:
                store.put(response)
                added += 1
            elif known.text == response.text:
                same += 1
            else:
                conflicts += 1
                print(f"conflict {key}: the store answers this call differently; kept the store's", file=out)
    finally:
        store.close()
    print(f"{added} imported, {same} already stored, {conflicts} conflict(s) into {args.store}", file=out)
    return PROBLEMS if conflicts else OK


def _store_clear(args: argparse.Namespace, out: TextIO) -> int:
    if not args.yes:
        print(f"llmbias: this deletes {args.store}; pass --yes to do it", file=sys.stderr)
        return USAGE
    if args.store.exists():
        shutil.rmtree(args.store)
    print(f"deleted {args.store}", file=out)
    return OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
