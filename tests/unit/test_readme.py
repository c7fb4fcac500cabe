"""The README as a newcomer reads it on GitHub: its generated tables match the code, every table
renders as a table, and every link to a section of it lands on a heading."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _tables_script():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tokens():
    return MarkdownIt("commonmark").enable("table").parse(README.read_text(encoding="utf-8"))


def test_the_generated_tables_are_what_the_code_says() -> None:
    script = _tables_script()
    assert script.problems(README.read_text(encoding="utf-8")) == []
    # the check is not vacuous: a stale row is caught
    stale = README.read_text(encoding="utf-8").replace("| `us_politics` | questions | 50 |", "| `us_politics` | questions | 40 |")
    assert any("'domains' table differs" in p for p in script.problems(stale))


def test_every_table_renders_as_a_table() -> None:
    tokens = _tokens()
    rendered: set[int] = set()
    for token in tokens:
        if token.type == "table_open" and token.map:
            rendered.update(range(*token.map))
    lines = README.read_text(encoding="utf-8").splitlines()
    fenced, stray = False, []
    for number, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("|") and number not in rendered:
            stray.append(f"line {number + 1}: {line[:80]}")
    assert not stray, "lines that look like a table but do not render as one (a missing header row?): " + "; ".join(stray)
    # every row of a table has as many cells as its header
    open_rows: list[int] = []
    cells = 0
    for token in tokens:
        if token.type == "tr_open":
            cells = 0
        elif token.type in ("th_open", "td_open"):
            cells += 1
        elif token.type == "tr_close":
            open_rows.append(cells)
        elif token.type == "table_close":
            assert len(set(open_rows)) == 1, f"a table with rows of {sorted(set(open_rows))} cells"
            open_rows = []
    assert sum(t.type == "table_open" for t in tokens) >= 20


def _raw_cells(line: str) -> int:
    """The cells GitHub makes of a table row: every ``|`` not escaped as ``\\|`` splits, inside
    backticks too."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return len(re.findall(r"(?<!\\)\|", inner)) + 1


def _split_rows(text: str) -> list[str]:
    """Rows of ``text``'s tables with more or fewer cells than their header: markdown-it drops a
    row's extra cells without a word, so the raw pipes are counted."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    lines = text.splitlines()
    bad = []
    for token in tokens:
        if token.type == "table_open" and token.map:
            start, end = token.map
            header = _raw_cells(lines[start])
            bad += [f"line {n + 1}: {lines[n][:80]}" for n in range(start + 2, end)
                    if lines[n].strip() and _raw_cells(lines[n]) != header]
    return bad


def test_no_row_has_a_pipe_that_splits_its_cell() -> None:
    text = README.read_text(encoding="utf-8")
    assert _split_rows(text) == []
    # the check is not vacuous: a pipe inside backticks, unescaped, is caught
    broken = text.replace("`--llmbias-history PATH\\|off`", "`--llmbias-history PATH|off`")
    assert broken != text
    assert len(_split_rows(broken)) == 1


def _slug(text: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than hyphens and underscores
    dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _headings(tokens) -> set[str]:
    anchors: dict[str, int] = {}
    slugs = set()
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            text = "".join(c.content for c in tokens[i + 1].children or () if c.type in ("text", "code_inline"))
            slug = _slug(text)
            count = anchors.get(slug, 0)
            slugs.add(slug if count == 0 else f"{slug}-{count}")
            anchors[slug] = count + 1
    return slugs


def _links(tokens) -> set[str]:
    return {str(c.attrs["href"]) for t in tokens if t.type == "inline" for c in t.children or ()
            if c.type == "link_open"}


def test_every_link_to_a_section_lands_on_a_heading() -> None:
    tokens = _tokens()
    slugs = _headings(tokens)
    links = {h for h in _links(tokens) if h.startswith("#")}
    assert links, "the README links to its own sections"
    broken = sorted(h for h in links if h[1:] not in slugs)
    assert not broken, f"links to no heading: {broken}"


def test_every_link_to_a_file_of_the_project_lands() -> None:
    """The README's links to the project's documents, and theirs back to the README's sections."""
    parser = MarkdownIt("commonmark").enable("table")
    documents = [README, *sorted((ROOT / "docs").glob("*.md"))]
    assert len(documents) > 1
    checked = 0
    for document in documents:
        for href in _links(parser.parse(document.read_text(encoding="utf-8"))):
            if "://" in href or href.startswith(("#", "mailto:")):
                continue
            path, _, anchor = href.partition("#")
            target = (document.parent / path).resolve()
            assert target.is_file(), f"{document.name} links to {href}: no such file"
            if anchor:
                assert anchor in _headings(parser.parse(target.read_text(encoding="utf-8"))), f"{document.name}: {href}"
            checked += 1
    assert checked >= 3


def test_the_domains_table_names_each_kind_as_the_command_lists_it() -> None:
    from pytest_llmbias.cli_domains import kind
    from pytest_llmbias.domains import load_domain

    block = re.search(r"<!-- generated:domains -->\n(.*?)<!-- /generated:domains -->", README.read_text(encoding="utf-8"),
                      re.DOTALL)
    assert block is not None
    rows = [line.split(" | ") for line in block.group(1).splitlines()[2:]]
    assert len(rows) >= 9
    assert {r[0].strip("| `"): r[1] for r in rows} == {r[0].strip("| `"): kind(load_domain(r[0].strip("| `")))
                                                       for r in rows}
