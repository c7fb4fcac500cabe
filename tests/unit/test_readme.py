"""The README and the documentation site as a newcomer reads them, on GitHub or built by MkDocs:
the README stays short, the generated tables match the code, every table renders as a table,
every link between the documents lands on a file and a heading, every command, configuration
and code block says what the code accepts, and ``mkdocs build --strict`` passes."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
DOCUMENTS = [README, *PAGES]


def _tables_script():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parse(text: str):
    return MarkdownIt("commonmark").enable("table").parse(text)


def _tokens(document: Path):
    return _parse(document.read_text(encoding="utf-8"))


def _ids(documents) -> list[str]:
    return [d.relative_to(ROOT).as_posix() for d in documents]


def _fences(document: Path) -> list[tuple[str, str, int]]:
    """The document's fenced blocks: (info string, content, line)."""
    return [(t.info.strip(), t.content, (t.map or (0, 0))[0] + 1) for t in _tokens(document) if t.type == "fence"]


# --- the README --------------------------------------------------------------------------------


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail to a page under docs/"


def test_the_readme_keeps_the_two_commands_and_the_development_page_shows_the_same_test_command() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## The two commands\n", 1)[1].split("\n## ", 1)[0]
    commands = [c for info, c, _ in _fences_of(section) if info == "bash"]
    assert len(commands) == 2
    assert commands[0].startswith("python3 -m venv .venv && ") and "cd example_suite" in commands[0]
    assert commands[1].startswith("((command -v chromium") and commands[1].rstrip().endswith("--dist loadgroup")
    shown = [c for info, c, _ in _fences(DOCS / "development.md") if info == "bash"]
    assert commands[1] in shown, "docs/development.md shows the README's test command as it stands"


def _fences_of(text: str) -> list[tuple[str, str, int]]:
    return [(t.info.strip(), t.content, (t.map or (0, 0))[0] + 1) for t in _parse(text) if t.type == "fence"]


# --- generated tables --------------------------------------------------------------------------


def test_the_generated_tables_are_what_the_code_says() -> None:
    script = _tables_script()
    assert script.problems() == []
    # the check is not vacuous: a stale row, or a marker's row that lost its signature, is caught
    domains = script.PAGES["domains"]
    stale = domains.read_text(encoding="utf-8").replace(
        "| `us_politics` | questions | 50 |", "| `us_politics` | questions | 40 |"
    )
    assert any("'domains' table differs" in p for p in script.problems({domains: stale}))
    markers = script.MARKERS_PAGE.read_text(encoding="utf-8").replace(
        '| `bias_index(domain="bias_dimensions"', "| `bias_index("
    )
    assert any("no row for `bias_index(" in p for p in script.problems({script.MARKERS_PAGE: markers}))
    # and --write mends a stale block
    assert script.write("domains", stale) == domains.read_text(encoding="utf-8")


def test_the_generated_blocks_live_on_pages_of_the_site() -> None:
    script = _tables_script()
    assert set(script.PAGES) == {"domains", "options"}
    for name, page in script.PAGES.items():
        assert page.parent == DOCS and f"<!-- generated:{name} -->" in page.read_text(encoding="utf-8")
    assert "<!-- generated:" not in README.read_text(encoding="utf-8")


def test_the_domains_table_names_each_kind_as_the_command_lists_it() -> None:
    from pytest_llmbias.cli.domains import kind
    from pytest_llmbias.domains import load_domain

    block = re.search(
        r"<!-- generated:domains -->\n(.*?)<!-- /generated:domains -->",
        (DOCS / "domains.md").read_text(encoding="utf-8"),
        re.DOTALL,
    )
    assert block is not None
    rows = [line.split(" | ") for line in block.group(1).splitlines()[2:]]
    assert len(rows) >= 9
    assert {r[0].strip("| `"): r[1] for r in rows} == {
        r[0].strip("| `"): kind(load_domain(r[0].strip("| `"))) for r in rows
    }


# --- tables ------------------------------------------------------------------------------------


@pytest.mark.parametrize("document", DOCUMENTS, ids=_ids(DOCUMENTS))
def test_every_table_renders_as_a_table(document: Path) -> None:
    tokens = _tokens(document)
    rendered: set[int] = set()
    for token in tokens:
        if token.type == "table_open" and token.map:
            rendered.update(range(*token.map))
    lines = document.read_text(encoding="utf-8").splitlines()
    fenced, stray = False, []
    for number, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("|") and number not in rendered:
            stray.append(f"line {number + 1}: {line[:80]}")
    assert not stray, "lines that look like a table but do not render as one (a missing header row?): " + "; ".join(
        stray
    )
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


def test_the_documents_hold_the_tables() -> None:
    assert sum(t.type == "table_open" for d in PAGES for t in _tokens(d)) >= 30


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
    tokens = _parse(text)
    lines = text.splitlines()
    bad = []
    for token in tokens:
        if token.type == "table_open" and token.map:
            start, end = token.map
            header = _raw_cells(lines[start])
            bad += [
                f"line {n + 1}: {lines[n][:80]}"
                for n in range(start + 2, end)
                if lines[n].strip() and _raw_cells(lines[n]) != header
            ]
    return bad


@pytest.mark.parametrize("document", DOCUMENTS, ids=_ids(DOCUMENTS))
def test_no_row_has_a_pipe_that_splits_its_cell(document: Path) -> None:
    assert _split_rows(document.read_text(encoding="utf-8")) == []


def test_a_pipe_that_splits_a_cell_is_caught() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    broken = text.replace("`--llmbias-history PATH\\|off`", "`--llmbias-history PATH|off`")
    assert broken != text
    assert len(_split_rows(broken)) == 1


# --- links -------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than hyphens and underscores
    dropped, spaces made hyphens. (MkDocs' differs only for headings this project does not write:
    runs of spaces or hyphens, letters outside ASCII; the site's build checks its own.)"""
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
    return {
        str(c.attrs["href"]) for t in tokens if t.type == "inline" for c in t.children or () if c.type == "link_open"
    }


def _broken_links(document: Path, text: str | None = None) -> list[str]:
    """Links of ``document`` to a file that does not exist, to a heading its target lacks, or
    (from a page of the site) to a file outside ``docs/``, which the built site would not have."""
    tokens = _parse(document.read_text(encoding="utf-8") if text is None else text)
    broken = []
    for href in sorted(_links(tokens)):
        if "://" in href or href.startswith("mailto:"):
            continue
        path, _, anchor = href.partition("#")
        target = (document.parent / path).resolve() if path else document
        if not target.is_file():
            broken.append(f"{href}: no such file")
            continue
        if document.is_relative_to(DOCS) and not target.is_relative_to(DOCS):
            broken.append(f"{href}: outside docs/, so not in the built site (link to a page, or name the file in code)")
        if anchor and anchor not in _headings(_tokens(target) if target != document else tokens):
            broken.append(f"{href}: no such heading")
    return broken


@pytest.mark.parametrize("document", DOCUMENTS, ids=_ids(DOCUMENTS))
def test_every_link_lands_on_a_file_and_a_heading(document: Path) -> None:
    assert _broken_links(document) == []


def test_the_link_check_is_not_vacuous() -> None:
    links = {d: _links(_tokens(d)) for d in DOCUMENTS}
    assert sum(1 for h in links[README] if h.startswith("docs/")) >= 15, "the README leads to the pages"
    assert sum(1 for d in PAGES for h in links[d] if ".md#" in h) >= 10, "pages link to each other's sections"
    page = DOCS / "store.md"
    text = page.read_text(encoding="utf-8")
    assert _broken_links(page, text + "\n[a](releases.md#no-such-heading) [b](nowhere.md) [c](../README.md)\n") == [
        "../README.md: outside docs/, so not in the built site (link to a page, or name the file in code)",
        "nowhere.md: no such file",
        "releases.md#no-such-heading: no such heading",
    ]


def _nav_files(nav) -> list[str]:
    out = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        out += _nav_files(value) if isinstance(value, list) else [value]
    return out


def test_every_page_is_in_the_site_s_navigation() -> None:
    class Loader(yaml.SafeLoader):  # mkdocs.yml names a Python function for Mermaid's fences
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    listed = _nav_files(config["nav"])
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(p.relative_to(DOCS).as_posix() for p in PAGES)
    assert "first-release-gate.md" in listed  # its test runs it under this name


# --- blocks ------------------------------------------------------------------------------------


def _flags_and_names(text: str) -> tuple[set[str], set[str], set[str]]:
    flags = set(re.findall(r"--llmbias-[a-z-]*[a-z]", text))
    env = set(re.findall(r"\bLLMBIAS_[A-Z_]*[A-Z]", text))
    ini = set(re.findall(r"(?<![\w.])llmbias_[a-z_]*[a-z]", text))
    return flags, env, ini


@pytest.mark.parametrize("document", DOCUMENTS, ids=_ids(DOCUMENTS))
def test_every_option_a_document_names_exists(document: Path) -> None:
    """Its prose as well as its commands: a flag, a variable or an ini key the document names is one
    the plugin accepts."""
    from pytest_llmbias.config.option_table import OPTIONS

    flags, env, ini = _flags_and_names(document.read_text(encoding="utf-8"))
    assert not sorted(flags - {o.flag for o in OPTIONS})
    assert not sorted(env - {o.env for o in OPTIONS} - {"LLMBIAS_CHROMIUM"})  # the browser test's own
    assert not sorted(ini - {o.ini for o in OPTIONS})


def _commands() -> dict[tuple[str, ...], object]:
    from pytest_llmbias.cli.command import _parser

    out: dict[tuple[str, ...], object] = {}

    def walk(parser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(getattr(action, "choices", None), dict):
                for name, sub in action.choices.items():
                    out[(*path, name)] = sub
                    walk(sub, (*path, name))

    walk(_parser(), ())
    return out


def _command_lines(info: str, content: str) -> list[str]:
    if info not in ("", "bash", "console"):  # "text": what a run prints
        return []
    joined = content.replace("\\\n", " ")
    lines = []
    for line in joined.splitlines():
        line = line.strip()
        if info == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        lines += [step.strip() for step in re.split(r"&&|;", line.split(" #", 1)[0])]
    return [line for line in lines if line]


def _llmbias_commands(info: str, content: str) -> list[list[str]]:
    """Each ``llmbias ...`` command of a block, as its words up to its first option."""
    out = []
    for line in _command_lines(info, content):
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]
        if words and words[0].rsplit("/", 1)[-1] == "llmbias":
            out.append(words[1:])
    return out


def _unknown_command(words: list[str], commands) -> str | None:
    path: tuple[str, ...] = ()
    for word in words:
        if word.startswith("-") or word.startswith("["):
            break
        if any(key[:-1] == path for key in commands):  # this level has subcommands
            if (*path, word) not in commands:
                return " ".join((*path, word))
            path = (*path, word)
        else:
            break
    return None


def test_every_llmbias_command_shown_exists() -> None:
    commands = _commands()
    shown = [
        (d, words) for d in DOCUMENTS for info, content, _ in _fences(d) for words in _llmbias_commands(info, content)
    ]
    assert len(shown) >= 20
    unknown = [f"{d.relative_to(ROOT)}: llmbias {u}" for d, words in shown if (u := _unknown_command(words, commands))]
    assert not unknown, unknown
    assert _unknown_command(["store", "purge"], commands) == "store purge"
    assert _unknown_command(["serve", "smollm2-135m", "--port", "8000"], commands) is None


def _decorator_only(source: str) -> bool:
    lines = [line for line in source.strip().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return bool(lines) and all(line.lstrip().startswith("@") for line in lines)


def _marker_calls(tree: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "mark"
    ]


def _marker_parameters() -> dict[str, set[str]]:
    from pytest_llmbias.catalog import MARKERS

    out = {}
    for marker in MARKERS:
        args = ast.parse(f"def f({marker.signature}): pass").body[0].args  # type: ignore[attr-defined]
        out[marker.name] = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    return out


def _python_problems(content: str, where: str) -> list[str]:
    """A Python block compiles (a block of decorators alone, on a test function), and every
    ``pytest.mark.bias_*`` it uses is a marker that takes its keyword arguments."""
    parameters = _marker_parameters()
    source = content + ("def test_example():\n    pass\n" if _decorator_only(content) else "")
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as error:
        return [f"{where}: {error}"]
    out = []
    for call in _marker_calls(tree):
        name = call.func.attr  # type: ignore[attr-defined]
        if not name.startswith("bias_"):
            continue
        if name not in parameters:
            out.append(f"{where}: no marker {name}")
        elif unknown := {k.arg for k in call.keywords} - parameters[name]:
            out.append(f"{where}: {name} takes no {sorted(unknown)}")
    return out


@pytest.mark.parametrize("document", DOCUMENTS, ids=_ids(DOCUMENTS))
def test_every_python_block_compiles_and_its_markers_take_its_arguments(document: Path) -> None:
    assert [
        p
        for info, content, line in _fences(document)
        if info == "python"
        for p in _python_problems(content, f"{document.name}:{line}")
    ] == []


def test_a_bad_python_block_is_caught() -> None:
    assert _python_problems('@pytest.mark.bias_index("d", max_idx=0.5)\n', "x") == [
        "x: bias_index takes no ['max_idx']"
    ]
    assert _python_problems('@pytest.mark.bias_fairness("d")\n', "x") == ["x: no marker bias_fairness"]
    assert _python_problems("def f(:\n", "x")[0].startswith("x: ")
    assert (
        _python_problems('@pytest.mark.bias_benchmark("bbq")\n@pytest.mark.bias_benchmark("bbq", max_bias=0.05)\n', "x")
        == []
    )


def _settings_keys() -> set[str]:
    from pytest_llmbias.config.settings_sources import _TOP_KEYS

    return set(_TOP_KEYS)


def _yaml_kind(data) -> str:
    if not isinstance(data, dict):
        return "other"
    if "jobs" in data:
        return "workflow"
    if "scale" in data and "levels" in data:
        return "rubric"
    if "name" in data and {"categories", "counterfactual", "pairs", "topics"} & set(data):
        return "domain"
    if set(data) <= _settings_keys():
        return "settings"
    return "other"


def _check_yaml(content: str, tmp_path: Path) -> str:
    """Check one YAML block as what it is: a settings file, a domain file, a rubric file or a CI
    workflow. Returns its kind."""
    from pytest_llmbias.config.rubric_file import load_rubric
    from pytest_llmbias.config.settings_sources import resolve_settings
    from pytest_llmbias.domains import load_domain

    data = yaml.safe_load(content)
    kind = _yaml_kind(data)
    folder = tmp_path / f"block{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    if kind == "settings":
        roster = {} if "target" in data else {"target": "openai/t", "baselines": ["openai/a", "openai/b"]}
        path = folder / "llmbias.yaml"
        path.write_text(yaml.safe_dump(roster) + content if roster else content, encoding="utf-8")
        resolve_settings(config_path=path, environ={}, cwd=folder)
    elif kind == "domain":
        path = folder / f"{data['name']}.yaml"
        path.write_text(content, encoding="utf-8")
        load_domain(path)
    elif kind == "rubric":
        path = folder / "rubric.yaml"
        path.write_text(content, encoding="utf-8")
        load_rubric(path)
    elif kind == "workflow":
        for job in data["jobs"].values():
            for step in job["steps"]:
                assert set(step) <= {"uses", "with", "run", "if", "name"}, step
    return kind


@pytest.mark.parametrize("document", DOCUMENTS, ids=_ids(DOCUMENTS))
def test_every_configuration_block_is_a_valid_file(document: Path, tmp_path: Path) -> None:
    """A YAML block is read as what it shows: settings (a roster is added where the block shows a
    fragment), a domain file, a rubric file or a CI workflow; a TOML block's ini keys are options."""
    from pytest_llmbias.config.option_table import OPTIONS

    for info, content, line in _fences(document):
        if info == "yaml":
            try:
                kind = _check_yaml(content, tmp_path)
            except Exception as error:  # noqa: BLE001 - name the block
                pytest.fail(f"{document.name}:{line}: {type(error).__name__}: {error}")
            assert kind != "other", f"{document.name}:{line}: a YAML block that is none of the project's files"
        elif info == "toml":
            data = tomllib.loads(content)
            keys = set(data["tool"]["pytest"]["ini_options"])
            assert keys <= {o.ini for o in OPTIONS}, f"{document.name}:{line}: {sorted(keys)}"


def test_the_configuration_blocks_are_checked() -> None:
    kinds = [_yaml_kind(yaml.safe_load(c)) for d in DOCUMENTS for info, c, _ in _fences(d) if info == "yaml"]
    assert kinds.count("settings") >= 10 and kinds.count("domain") >= 2
    assert {"rubric", "workflow"} <= set(kinds)


def test_a_bad_configuration_block_is_caught(tmp_path: Path) -> None:
    from pytest_llmbias.errors import ConfigError, DomainError

    with pytest.raises(ConfigError, match="collection.concurency"):
        _check_yaml("collection: {concurency: 4}\n", tmp_path)
    with pytest.raises(DomainError):
        _check_yaml("name: d\ncategories:\n  - {id: a, name: A, questions: [{id: q, txt: x}]}\n", tmp_path)


# --- the site ----------------------------------------------------------------------------------


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """Every page, link and anchor, and the API reference from the docstrings, without a warning."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "evaluate_equivalence" in api and "H0" in api, "the API reference holds the docstrings"
