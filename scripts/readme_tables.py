"""The documentation's tables that the code can write: the built-in domains, the options, and the
signature of every marker.

    python scripts/readme_tables.py           # print the generated tables
    python scripts/readme_tables.py --check   # exit 1, naming each, when a page differs
    python scripts/readme_tables.py --write   # rewrite the pages' generated blocks

A generated block sits between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` lines
(``domains`` in ``docs/domains.md``, ``options`` in ``docs/configuration.md``); the markers table of
``docs/markers.md`` is hand-written prose beside a generated first column, so it is checked, not
written: each marker's row must start with its signature.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The page that holds each generated block.
PAGES = {"domains": DOCS / "domains.md", "options": DOCS / "configuration.md"}
#: The page whose markers table starts each row with a marker's signature.
MARKERS_PAGE = DOCS / "markers.md"
sys.path.insert(0, str(ROOT / "src"))


def domains_table() -> str:
    """One row per built-in domain: what kind it is, how many prompts it asks, what they are
    about, and the judge anchors it carries."""
    from pytest_llmbias.cli.domains import kind as kind_of
    from pytest_llmbias.domains import load_domain
    from pytest_llmbias.domains.loader import list_domains

    rows = ["| domain | kind | prompts | about | anchors |", "|---|---|---:|---|---:|"]
    for name in sorted(list_domains()):
        d = load_domain(name)
        kind = kind_of(d)  # as `llmbias domains list` names it
        if d.topics:
            size = f"{len(d.topics)} topics × {len(d.perspectives)} perspectives"
            about = "perspectives: " + ", ".join(p.name for p in d.perspectives)
        elif kind == "counterfactual":
            cf = d.counterfactual
            size = f"{len(d.prompts)}"
            groups = "; ".join(f"{g}: {len(c)} concepts" for g, c in cf.groups.items())
            about = (
                f"{len(cf.templates)} templates"
                + (f", {len(cf.branches)} branches" if cf.branches else "")
                + f" in {', '.join(d.category_ids)}; {groups}"
            )
        else:
            size = f"{len(d.questions)}"
            about = f"{len(d.categories)} categories: " + "; ".join(c.name for c in d.categories)
        rows.append(f"| `{name}` | {kind} | {size} | {about} | {len(d.anchors) or '-'} |")
    return "\n".join(rows) + "\n"


def options_table() -> str:
    from pytest_llmbias.cli.command import markdown_table

    return markdown_table()


GENERATED = {"domains": domains_table, "options": options_table}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- generated:{name} -->\n)(.*?)(<!-- /generated:{name} -->)", re.DOTALL)


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _texts(texts: Mapping[Path, str] | None) -> dict[Path, str]:
    """The pages' texts: those given, the others read from disk."""
    given = dict(texts or {})
    return {
        path: given[path] if path in given else path.read_text(encoding="utf-8")
        for path in {*PAGES.values(), MARKERS_PAGE}
    }


def problems(texts: Mapping[Path, str] | None = None) -> list[str]:
    """What in the pages (``texts``: path -> text, read from disk where not given) differs from
    what the code says."""
    from pytest_llmbias.catalog import MARKERS

    pages = _texts(texts)
    out = []
    for name, make in GENERATED.items():
        path = PAGES[name]
        match = _block(name).search(pages[path])
        if match is None:
            out.append(f"{_name(path)} has no generated block {name!r}")
        elif match.group(2) != make():
            out.append(
                f"{_name(path)}: the {name!r} table differs from the code: run python scripts/readme_tables.py --write"
            )
    rows = [line for line in pages[MARKERS_PAGE].splitlines() if line.startswith("| `")]
    for marker in MARKERS:
        signature = f"{marker.name}({marker.signature})".replace("'", '"')
        if not any(row.startswith(f"| `{signature}` |") for row in rows):
            out.append(f"{_name(MARKERS_PAGE)}: the markers table has no row for `{signature}`")
    return out


def write(name: str, text: str) -> str:
    """``text`` with its generated block ``name`` as the code writes it."""
    make = GENERATED[name]
    return _block(name).sub(lambda m: m.group(1) + make() + m.group(3), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--write", action="store_true")
    options = parser.parse_args()
    if options.write:
        for name, path in PAGES.items():
            text = path.read_text(encoding="utf-8")
            new = write(name, text)
            if new != text:
                path.write_text(new, encoding="utf-8")
    if options.check or options.write:
        found = problems()
        for p in found:
            print(p)
        return 1 if found else 0
    for name, make in GENERATED.items():
        print(f"<!-- {name}: {_name(PAGES[name])} -->\n{make()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
