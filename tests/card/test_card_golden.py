"""Golden-file tests of the rendered card: one tiny GPT-2 run, rendered from a fixed results.json.

The fixture's figures were measured once by a real tiny run (paths replaced by stable ones); the golden
card is what the template makes of them. A change to the template, a filter or a module's spec or source
changes the card: review the diff, then regenerate it with `make golden` (tests/scripts/make_golden.py), never
from the test itself.

The same run as schema 2 (and schema 3) recorded it renders the card schema 2 (schema 3) rendered, byte for
byte, forever: a card published then is verified by rendering it again. So does the run recording card
template 1 (or none), in schema 4 (tiny_card_t1.md). `make golden` never writes those.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from attncard.pipeline.record.results import CARD_TEMPLATE, SCHEMA_VERSION, Results
from conftest import FIXTURES
from golden import GOLDEN, RESULTS, golden_card

FIXTURES = FIXTURES
# The same run in card template 1, as every run published before template 2 recorded it: frozen.
GOLDEN_T1 = FIXTURES / "tiny_card_t1.md"
# Schema 2's results.json and the card published from it, frozen.
RESULTS_V2 = FIXTURES / "tiny_results_v2.json"
GOLDEN_V2 = FIXTURES / "tiny_card_v2.md"
# Schema 3's, frozen the same way (every card in cards/ was published in schema 3).
RESULTS_V3 = FIXTURES / "tiny_results_v3.json"
GOLDEN_V3 = FIXTURES / "tiny_card_v3.md"




def test_card_matches_the_golden_file():
    assert Results.load(RESULTS).schema_version == SCHEMA_VERSION
    assert Results.load(RESULTS).card_template == CARD_TEMPLATE
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


@pytest.mark.parametrize("card_template", [None, 1])
def test_a_run_of_card_template_1_renders_the_card_it_was_published_with(card_template: int | None):
    """Card template 2 changed the layout, the stock sentence and the install lines: a run recording
    template 1 (or none, published before it was recorded) renders template 1's card, byte for byte."""
    assert golden_card(card_template=card_template) == GOLDEN_T1.read_text(encoding="utf-8")


def test_card_template_2_leads_with_speed_and_folds_the_source_below_the_evidence():
    card_1, card_2 = GOLDEN_T1.read_text(encoding="utf-8"), GOLDEN.read_text(encoding="utf-8")
    summary = card_2[: card_2.index("## Use it")]
    assert (
        "**Speed and memory**: `none` leaves attention as the model's own, so nothing is timed against dense "
        "attention; evaluating the 40 rows took "
    ) in summary
    assert "**Speed and memory**" not in card_1[: card_1.index("## Use it")]
    headings = [line for line in card_2.splitlines() if line.startswith("## ")]
    # The evidence first, then what the model and module are; the source and printout folded at the end.
    order = ["## Verification", "## Efficiency", "## Training", "## Data", "## Model details"]
    assert [headings.index(heading) for heading in order] == sorted(headings.index(h) for h in order)
    assert headings[-1] == "## Source and printouts"
    appendix = card_2[card_2.index("## Source and printouts") :]
    assert (
        appendix.count("<details>") == 2
        and "```python\n" in appendix
        and "GPT2ForSequenceClassification(" in appendix
    )
    assert card_2.count("```python\n") == 2  # the usage snippet, and the module's source in the appendix


@pytest.mark.parametrize(
    ("results_file", "golden"),
    [(RESULTS, GOLDEN), (RESULTS, GOLDEN_T1), (RESULTS_V2, GOLDEN_V2), (RESULTS_V3, GOLDEN_V3)],
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
