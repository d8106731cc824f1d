"""Golden-file test of the rendered card: one tiny GPT-2 run, rendered from a fixed results.json.

The fixture's figures were measured once by a real tiny run (paths replaced by stable ones); the golden
card is what the template makes of them. A change to the template, a filter or a module's spec or source
changes the card: review the diff, then regenerate with `ATTNCARD_UPDATE_GOLDEN=1 pytest
tests/test_card_golden.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

from huggingface_hub import ModelCard

from pipeline.render import render_card
from pipeline.results import Results

FIXTURES = Path(__file__).parent / "fixtures"
RESULTS = FIXTURES / "tiny_results.json"
GOLDEN = FIXTURES / "tiny_card.md"


def test_card_matches_the_golden_file():
    plots = [{"file": "scaling.png", "title": "Time and peak memory"}]
    card = render_card(Results.load(RESULTS), plots=plots)
    if os.environ.get("ATTNCARD_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(card, encoding="utf-8")
    golden = GOLDEN.read_text(encoding="utf-8")
    assert card == golden, "the card changed: review the diff, then regenerate (see the module doc)"


def test_golden_card_is_a_hub_card():
    card = ModelCard(GOLDEN.read_text(encoding="utf-8"))
    results = Results.load(RESULTS)
    assert card.data.eval_results[0].metric_value == results.metrics.accuracy
    assert f"**Status: {results.verification.status.value}**" in card.text
