"""Golden-file test of the rendered card: one tiny GPT-2 run, rendered from a fixed results.json.

The fixture's figures were measured once by a real tiny run (paths replaced by stable ones); the golden
card is what the template makes of them. A change to the template, a filter or a module's spec or source
changes the card: review the diff, then regenerate it with `make golden` (tests/make_golden.py), never from
the test itself.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from huggingface_hub import ModelCard

from attncard.pipeline.render import render_card, write_plots
from attncard.pipeline.results import Results

FIXTURES = Path(__file__).parent / "fixtures"
RESULTS = FIXTURES / "tiny_results.json"
GOLDEN = FIXTURES / "tiny_card.md"


def golden_card() -> str:
    """The card the template makes of the fixture's results, with the plots results.json draws (the run is of
    `none`, which keeps the model's own attention: a loss curve, no scaling plot): what `make golden` writes.
    """
    results = Results.load(RESULTS)
    with tempfile.TemporaryDirectory() as scratch:
        plots = write_plots(results, Path(scratch))
    assert [plot["file"] for plot in plots] == ["training_loss.png"]
    return render_card(results, plots=plots)


def test_card_matches_the_golden_file():
    golden = GOLDEN.read_text(encoding="utf-8")
    assert golden_card() == golden, "the card changed: review the diff, then run `make golden`"


def test_golden_card_is_a_hub_card():
    card = ModelCard(GOLDEN.read_text(encoding="utf-8"))
    results = Results.load(RESULTS)
    assert card.data.eval_results[0].metric_value == results.metrics.accuracy
    assert f"**Status: {results.verification.status.value}**" in card.text
