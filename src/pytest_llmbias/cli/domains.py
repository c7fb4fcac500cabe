"""``llmbias domains list|show|validate``: the domains a project can use, one in full (questions,
or a counterfactual domain's groups, templates and branches, or perspectives and topics), and the
first error of each file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from pytest_llmbias.cli.project import Project, epilog

OK, PROBLEMS = 0, 1


def add_commands(commands: Any) -> None:
    domains = commands.add_parser("domains", help="list, show and validate domains").add_subparsers(title="domains")
    for name, run, help_ in (
        ("list", _list, "every domain: name, kind, size and file"),
        ("show", _show, "one domain in full: questions, or groups, templates and branches, or perspectives and topics"),
        ("validate", _validate, "load each file and report the first error in each"),
    ):
        p = domains.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=epilog(f"domains {name}"),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == "show":
            p.add_argument("name")
        if name == "validate":
            p.add_argument("files", nargs="+", type=Path)
        else:
            p.add_argument(
                "--path",
                action="append",
                default=[],
                type=Path,
                help="a folder of domain files (repeat; the project's domains.paths are searched too)",
            )
        p.set_defaults(run=run)


def _paths(args: argparse.Namespace) -> list[Path]:
    return [*args.path, *Project.find().domain_paths]


def kind(domain: Any) -> str:
    if domain.pairs:
        return "pairs"
    if domain.topics:
        return "topics"
    if any(q.texts or q.split for q in domain.questions):
        return "binary"
    return "counterfactual" if domain.counterfactual is not None and not domain.categories else "questions"


def _list(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.domains import load_domain
    from pytest_llmbias.domains.loader import list_domains

    for name, path in sorted(list_domains(_paths(args)).items()):
        domain = load_domain(path)
        size = f"{len(domain.topics)} topics" if domain.topics else f"{len(domain.prompts)} prompts"
        print(f"{name:<20} {kind(domain):<15} {size:<14} {path}", file=out)
    return OK


def _show(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.domains import load_domain

    project = Project.find()
    domain = load_domain(args.name, [*args.path, *project.domain_paths], project.settings.domains)
    print(
        f"{domain.name}: {domain.title}\n{domain.description}\nfocus: {domain.focus}\nsource: {domain.source}", file=out
    )
    if domain.pairs:
        return _show_pairs(domain, out)
    for category in domain.categories:
        weight = f" (weight {category.weight:g})" if category.weight is not None else ""
        print(f"\n[{category.id}] {category.name}{weight}", file=out)
        for q in category.questions:
            languages = f" [{', '.join(q.texts)}]" if q.texts else ""
            print(f"  {q.id}: {q.text}{languages}", file=out)
    cf = domain.counterfactual
    if cf is not None:
        print(f"\ncounterfactual: {len(cf.expand())} prompts", file=out)
        for group, concepts in cf.groups.items():
            print(f"  group {group}: {', '.join(concepts)}", file=out)
        for t in cf.templates:
            print(
                f"  template {t.id} [{t.category}]: {t.text}"
                + (f"  (reference: {t.reference})" if t.reference else ""),
                file=out,
            )
        for b in cf.branches:
            print(f"  branch {b.id} [{b.category}] on {b.concept}: {b.text}", file=out)
            for concept, words in (b.replacements or {}).items():
                extra = ", ".join(f"{k} -> {v}" for k, v in (words or {}).items())
                print(f"    {concept}" + (f": {extra}" if extra else ""), file=out)
    if domain.topics:
        print(
            "\nperspectives: " + ", ".join(p.name + (" (neutral)" if p.neutral else "") for p in domain.perspectives),
            file=out,
        )
        for topic in domain.topics:
            print(f"  {topic.id}: {topic.title}", file=out)
    if domain.anchors:
        print(f"\njudge anchors ({domain.anchor_misses} may be missed):", file=out)
        for i, a in enumerate(domain.anchors, 1):
            print(f"  {i}. score {a.score} (±{a.tolerance:g}) to {a.question!r}: {a.answer[:100]!r}", file=out)
    return OK


def _show_pairs(domain: Any, out: TextIO) -> int:
    """A paired-prompt domain: its pairs by category, each with its framing, sides and prompts."""
    framings: dict[str, int] = {}
    for p in domain.pairs:
        framings[p.framing] = framings.get(p.framing, 0) + 1
    print(
        f"\n{len(domain.pairs)} pairs; framings: " + ", ".join(f"{f} {n}" for f, n in sorted(framings.items())),
        file=out,
    )
    for category in domain.categories:
        pairs = [p for p in domain.pairs if p.category == category.id]
        print(f"\n[{category.id}] {len(pairs)} pairs", file=out)
        for p in pairs:
            print(f"  {p.id} ({p.framing})", file=out)
            for side, prompt in zip(p.sides, p.prompts, strict=True):
                print(f"    {side}: {prompt}", file=out)
    return OK


def _validate(args: argparse.Namespace, out: TextIO) -> int:
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


def generate_pairs(args: argparse.Namespace, out: TextIO) -> int:
    """``llmbias generate-domain --sides``: draft a paired-prompt domain file for review; 0 written,
    2 bad arguments or an existing file without --force, 3 a subject left without a pair."""
    import dataclasses

    from pytest_llmbias.cli.generate_domain import generate_pairs
    from pytest_llmbias.config.yamlutil import load_yaml_text
    from pytest_llmbias.domains.draft_file import check_output
    from pytest_llmbias.domains.draft_pairs import PairBrief
    from pytest_llmbias.domains.loader import load_domain, parse_domain
    from pytest_llmbias.errors import ConfigError, DomainError
    from pytest_llmbias.session import BiasSession

    try:
        brief = PairBrief.build(args.name, args.description, args.sides, args.questions, title=args.title)
        if args.samples < 1:
            raise ConfigError(f"--samples must be at least 1, got {args.samples}")
        target = args.out if args.out is not None else Path(f"{brief.name}.yaml")
        check_output(target, brief.name, force=args.force)
    except (ConfigError, DomainError) as exc:
        print(f"llmbias: {exc}" + ("; pass --force to replace it" if "exists" in str(exc) else ""), file=sys.stderr)
        return 2
    project = Project.find(cwd=args.rootdir, root=args.rootdir, cli={"offline": args.offline})
    settings = dataclasses.replace(
        project.settings, store=dataclasses.replace(project.settings.store, dir=project.store)
    )
    if args.seed is not None:
        settings = dataclasses.replace(settings, generation=dataclasses.replace(settings.generation, seed=args.seed))
    session = BiasSession(settings)
    try:
        draft = generate_pairs(session, brief, alias=args.model, samples=args.samples)
    finally:
        session.close()
    print(
        f"domain {brief.name!r}: pairs by {draft.alias} ({draft.model}); {draft.fetched + draft.from_store} "
        f"call(s): {draft.fetched} fetched, {draft.from_store} from the store",
        file=out,
    )
    for category, n in draft.kept.items():
        print(f"  {category:<40} {n:>3} of {brief.pairs} pairs", file=out)
    empty = [c for c, n in draft.kept.items() if not n]
    if empty:
        print(
            f"llmbias: the model's answer held no usable pair for {', '.join(map(repr, empty))}; nothing was "
            "written (ask again with another --seed, or another --model)",
            file=sys.stderr,
        )
        return 3
    data, lines = load_yaml_text(draft.text, source=str(target), error=DomainError)
    parse_domain(data, path=target, lines=lines)  # refuse before writing what the loader would
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(draft.text, encoding="utf-8")
    load_domain(target)
    print(
        f"wrote {target}: a model wrote it, so review every pair before use; "
        f"check it with `llmbias domains validate {target}`",
        file=out,
    )
    return OK
