"""The golden card: the card of the recorded tiny run, rendered, and the fixture it is held to
(`make golden` writes it again after a deliberate change)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from attncard.pipeline.card.plots import write_plots
from attncard.pipeline.card.render import render_card
from attncard.pipeline.record.results import Results
from conftest import FIXTURES

GOLDEN = FIXTURES / "tiny_card.md"
RESULTS = FIXTURES / "tiny_results.json"  # a recorded run of `none`


def golden_card(results_file: Path = RESULTS, card_template: int | str | None = "recorded") -> str:
    """The card the template makes of the fixture's results, with the plots results.json draws (the run is of
    `none`, which keeps the model's own attention: a loss curve, no scaling plot): what `make golden` writes.
    Given `card_template`, the card of the run recording that version instead (None: recording none).
    """
    results = Results.load(results_file)
    if card_template != "recorded":
        results = dataclasses.replace(results, card_template=card_template)
    with tempfile.TemporaryDirectory() as scratch:
        plots = write_plots(results, Path(scratch))
    assert [plot["file"] for plot in plots] == ["training_loss.png"]
    return render_card(results, plots=plots)
