"""The leaderboard page (`attncard.pipeline.space.app`) served on 127.0.0.1 in a thread, and headless Chromium
to read it: Playwright's Python package driving the system Chromium that `make tools` installs (Debian's
`chromium`), never a browser Playwright downloads. A test without either is skipped with one line.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from attncard.pipeline.space.app import serve
from attncard.pipeline.space.source import Checker

# Debian's `chromium` is a shell script that execs this binary with its flags; Playwright needs the binary.
CHROMIUM_BINARIES = ("/usr/lib/chromium/chromium",)
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def served_page(
    checker: Checker, *, title: str = "attncard leaderboard", cards_dir: Path | None = None
) -> Iterator[str]:
    """Serves the page over `checker` (already checked once) on a free port of 127.0.0.1 until the block
    ends; yields its address."""
    port = free_port()
    server = serve(checker, title=title, port=port, cards_dir=cards_dir)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the page's server did not start within 30 s")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def chromium_path() -> str:
    """The system Chromium's binary, or the test is skipped."""
    for path in CHROMIUM_BINARIES:
        if Path(path).is_file():
            return path
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("Debian's chromium is not installed (`make tools` installs it where apt-get may)")
    return found


@contextlib.contextmanager
def browser() -> Iterator[object]:
    """Headless Chromium under Playwright, or the test is skipped with one line."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (`make install`)"
    )
    path = chromium_path()
    with sync_api.sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        except sync_api.Error as error:
            pytest.skip(f"Chromium at {path} does not start under Playwright: {str(error).splitlines()[0]}")
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(chromium, url: str, viewport: dict[str, int] = DESKTOP):
    """A new tab at `url`, once the page shows its leaderboard (the status line says what was checked);
    returns `(page, seconds it took)`."""
    page = chromium.new_page(viewport=viewport)
    start = time.monotonic()
    page.goto(url)
    page.wait_for_function(STATUS_SHOWN, timeout=30_000)
    page.wait_for_selector("#attncard-answer [role=grid]", timeout=30_000)
    return page, time.monotonic() - start


STATUS_SHOWN = """() => {
    const status = document.querySelector('#attncard-status');
    return status !== null && /checked|failed/.test(status.innerText);
}"""


def table_rows(page, table_id: str) -> list[list[str]]:
    """The cells of a table of the page (`attncard-answer`, `attncard-groups`, `attncard-refused`), row by
    row, as the visitor reads them. Gradio draws only the rows in view (a virtual table): a long table gives
    its first rows; `row_count` gives all."""
    return page.eval_on_selector(
        f"#{table_id} [role=grid]",
        """grid => Array.from(grid.querySelectorAll('.virtual-row')).map(
            row => Array.from(row.querySelectorAll('[role=gridcell]')).map(cell => cell.innerText.trim()))""",
    )


def row_count(page, table_id: str) -> int:
    """How many rows the table holds, those out of view included (its `aria-rowcount` less the header)."""
    return int(page.get_attribute(f"#{table_id} [role=grid]", "aria-rowcount")) - 1


def table_headers(page, table_id: str) -> list[str]:
    return page.eval_on_selector(
        f"#{table_id} [role=grid]",
        "grid => Array.from(grid.querySelectorAll('thead th')).map(cell => cell.innerText.trim())",
    )
