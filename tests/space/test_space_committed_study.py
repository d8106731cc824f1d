"""`attncard space --cards cards --serve`, as a user runs it: the console script serves this repository's
committed study on 127.0.0.1, every copy checked from its predictions and the real GLUE data, and headless
Chromium reads every group of both tasks on the page, each linked to its card, which the page serves as text.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest
from space_page import browser, free_port, open_page, row_count, table_rows

from attncard.pipeline.card.groups import read_cards
from conftest import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CARDS = REPO_ROOT / "cards"
START_S = 120  # the 30 copies checked from their predictions (about 15 s here), then Gradio


@pytest.fixture(scope="module")
def served(glue, tmp_path_factory):
    """The console script serving cards/, on a free port; its address."""
    port = free_port()
    log = tmp_path_factory.mktemp("space") / "serve.log"
    script = REPO_ROOT / ".venv" / "bin" / "attncard"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "attncard.pipeline.cli"]
    with log.open("w") as output:
        process = subprocess.Popen(
            [*command, "space", "--cards", str(CARDS), "--serve", "--port", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "GLUE_DIR": str(glue)},
        )
    try:
        deadline = time.monotonic() + START_S
        while "serving http://" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/", log
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_committed_study_is_served_whole(served) -> None:
    url, log = served
    groups = read_cards(CARDS)
    assert log.read_text().startswith(
        f"checked the cards folder {CARDS.as_posix()}: 30 runs verified in 10 groups, 0 refused\n"
    )
    with browser() as chromium:
        page, seconds = open_page(chromium, url)
        assert seconds < 5.0
        status = page.inner_text("#attncard-status")
        assert "30 runs verified in 10 groups (10 shown), 0 refused" in status, status
        answer = table_rows(page, "attncard-answer")
        assert {(cells[0], cells[1]) for cells in answer} == {
            (group.module, group.task) for group in groups if group.module != "none"
        }
        page.get_by_role("tab", name="Groups").click()
        page.wait_for_selector("#attncard-groups .virtual-row")
        assert row_count(page, "attncard-groups") == 10
        links = page.eval_on_selector_all(
            "#attncard-groups .virtual-row a", "links => links.map(link => link.href)"
        )
        assert len(links) == 30 and all(link.startswith(f"{url}cards/minilm-") for link in links)
        assert {link.split("/")[-2] for link in links} == {
            card.folder for group in groups for card in group.cards
        }
    # The link serves that card, as text; nothing else of the folder is served.
    with urllib.request.urlopen(links[0]) as answer:
        card = answer.read().decode()
        assert answer.headers["Content-Type"].startswith("text/plain")
    assert card == (CARDS / links[0].split("/")[-2] / "README.md").read_text(encoding="utf-8")
    for path in (f"cards/{links[0].split('/')[-2]}/results.json", "cards/..%2Fpyproject.toml/README.md"):
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(url + path)
