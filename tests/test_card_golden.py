"""Golden-file tests of the rendered card: one tiny GPT-2 run, rendered from a fixed results.json.

The fixture's figures were measured once by a real tiny run (paths replaced by stable ones); the golden
card is what the template makes of them. A change to the template, a filter or a module's spec or source
changes the card: review the diff, then regenerate it with `make golden` (tests/make_golden.py), never from
the test itself.

The same run as schema 2 (and schema 3) recorded it renders the card schema 2 (schema 3) rendered, byte for
byte, forever: a card published then is verified by rendering it again. `make golden` never writes those.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from attncard.pipeline.render import render_card, write_plots
from attncard.pipeline.results import SCHEMA_VERSION, Results

FIXTURES = Path(__file__).parent / "fixtures"
RESULTS = FIXTURES / "tiny_results.json"
GOLDEN = FIXTURES / "tiny_card.md"
# Schema 2's results.json and the card published from it, frozen.
RESULTS_V2 = FIXTURES / "tiny_results_v2.json"
GOLDEN_V2 = FIXTURES / "tiny_card_v2.md"
# Schema 3's, frozen the same way (every card in cards/ was published in schema 3).
RESULTS_V3 = FIXTURES / "tiny_results_v3.json"
GOLDEN_V3 = FIXTURES / "tiny_card_v3.md"


def golden_card(results_file: Path = RESULTS) -> str:
    """The card the template makes of the fixture's results, with the plots results.json draws (the run is of
    `none`, which keeps the model's own attention: a loss curve, no scaling plot): what `make golden` writes.
    """
    results = Results.load(results_file)
    with tempfile.TemporaryDirectory() as scratch:
        plots = write_plots(results, Path(scratch))
    assert [plot["file"] for plot in plots] == ["training_loss.png"]
    return render_card(results, plots=plots)


def test_card_matches_the_golden_file():
    assert Results.load(RESULTS).schema_version == SCHEMA_VERSION
    golden = GOLDEN.read_text(encoding="utf-8")
    assert golden_card() == golden, "the card changed: review the diff, then run `make golden`"


@pytest.mark.parametrize(
    ("results_file", "golden", "schema"), [(RESULTS_V2, GOLDEN_V2, 2), (RESULTS_V3, GOLDEN_V3, 3)]
)
def test_an_older_schema_run_renders_the_card_it_was_published_with(
    results_file: Path, golden: Path, schema: int
):
    assert Results.load(results_file).schema_version == schema
    assert golden_card(results_file) == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("results_file", "golden"), [(RESULTS, GOLDEN), (RESULTS_V2, GOLDEN_V2), (RESULTS_V3, GOLDEN_V3)]
)
def test_golden_card_is_a_hub_card(results_file: Path, golden: Path):
    card = ModelCard(golden.read_text(encoding="utf-8"))
    results = Results.load(results_file)
    assert card.data.eval_results[0].metric_value == results.metrics.accuracy
    assert f"**Status: {results.verification.status.value}**" in card.text


def test_the_card_counts_layers_with_lora_and_attention_layers_changed_apart():
    v3, v2 = GOLDEN.read_text(encoding="utf-8"), GOLDEN_V2.read_text(encoding="utf-8")
    assert "| Layers with LoRA | 2 |" in v3 and "| Attention layers the module changes | 0 of 2 |" in v3
    assert "Layers adapted by LoRA" not in v3
    assert "| Layers adapted by LoRA | 2 |" in v2
