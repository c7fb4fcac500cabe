"""A real headless Chromium for the HTML report's tests, driven by Playwright.

Debian's ``chromium`` package is used (the README's test command installs it when it is missing);
``LLMBIAS_CHROMIUM`` names another executable. Chromium is started with no background networking,
so the only request a page can make is one the page itself asks for, and :class:`PageVisit`
records every one of them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_executable() -> str:
    """The Chromium to drive; fails the test, saying how to get one, when there is none."""
    path = os.environ.get("LLMBIAS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail(
            "no Chromium found: install Debian's chromium package (the README's test command does) or set "
            "LLMBIAS_CHROMIUM to a Chromium executable",
            pytrace=False,
        )
    return path


@dataclass
class PageVisit:
    """What happened while a page was open: script errors, console errors and warnings, and
    every URL the page requested."""

    page: Any
    errors: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@contextlib.contextmanager
def open_page(path: Path, *, width: int = 1280, height: int = 900) -> Iterator[PageVisit]:
    """Open the file ``path`` in headless Chromium and yield the visit, once the page has loaded."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_executable(), args=list(ARGS))
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            visit = PageVisit(page)
            page.on("pageerror", lambda exc: visit.errors.append(str(exc)))
            page.on(
                "console",
                lambda msg: (
                    visit.console.append(f"{msg.type}: {msg.text}") if msg.type in ("error", "warning") else None
                ),
            )
            page.on("request", lambda request: visit.requests.append(request.url))
            page.goto(path.resolve().as_uri(), wait_until="load")
            yield visit
        finally:
            browser.close()
