"""A card as a Hub visitor sees it: rendered to HTML (CommonMark with tables, as the Hub renders Markdown) and
laid out by headless Chromium (Debian's `chromium`, installed by `make tools`) at 1280 px. What the visitor
asks first, what the run is, its status and verdict and how to load it, comes above the first table of
results. Chromium runs with the flags that keep it off the network (these machines have none)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from conftest import HEADLESS_CHROMIUM, REPO_ROOT

CARDS = [
    REPO_ROOT / "cards" / "minilm-adaptive_span-sst2-seed0" / "README.md",  # a module run, with a verdict
    REPO_ROOT / "tests" / "support" / "fixtures" / "tiny_card.md",  # the dense baseline, a FAIL run
]
CHROMIUM_FLAGS = [*HEADLESS_CHROMIUM, "--window-size=1280,800"]
# Run in the page once it is laid out: the top, in CSS pixels, of what the test orders; the DOM dump shows it.
LAYOUT_SCRIPT = """
<script>
const topOf = (element) => element ? Math.round(element.getBoundingClientRect().top + window.scrollY) : null;
const byText = (selector, test) => [...document.querySelectorAll(selector)].find((e) => test(e.textContent));
document.body.dataset.layout = JSON.stringify({
  summary: topOf(document.querySelector("h1 + p")),
  status: topOf(byText("p", (text) => text.startsWith("Status: "))),
  use_it: topOf(byText("h2", (text) => text.trim() === "Use it")),
  snippet: topOf(document.querySelector("pre code.language-python")),
  first_table: topOf(document.querySelector("table")),
  results: topOf(byText("h2", (text) => text.startsWith("Results on "))),
});
</script>
"""


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium is not installed (`make tools` installs it where apt-get may)")
    return path


def card_html(card: Path) -> str:
    """The card body (front matter dropped, as the Hub shows it) as an HTML page whose images load from the
    card's folder."""
    body = card.read_text(encoding="utf-8").split("\n---\n", 1)[1]
    rendered = MarkdownIt("commonmark").enable("table").render(body)
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><base href="{card.parent.as_uri()}/">'
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px}img{max-width:100%}</style></head>"
        f"<body>{rendered}{LAYOUT_SCRIPT}</body></html>"
    )


@pytest.mark.integration
@pytest.mark.parametrize("card", CARDS, ids=[card.parent.name for card in CARDS])
def test_the_summary_and_use_it_come_above_the_first_results_table(card: Path, tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "card.html"
    page.write_text(card_html(card), encoding="utf-8")
    run = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [*run, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    layout = json.loads(html.unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))
    assert None not in layout.values(), layout
    order = ["summary", "status", "use_it", "snippet", "first_table"]
    assert [layout[name] for name in order] == sorted(layout[name] for name in order), layout
    assert layout["results"] < layout["first_table"], layout  # no table comes before the results' own
    screenshot = tmp_path / "card.png"  # the first screen, as a visitor sees it
    subprocess.run(
        [*run, f"--screenshot={screenshot}", page.as_uri()], capture_output=True, timeout=120, check=True
    )
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
