"""The stock-loader fact: the run's adapter loaded as stock tools load it (peft on the base model with
transformers' own attention), measured on the same split, recorded in results.json and stated on the card."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from peft import PeftModel
from safetensors import safe_open

import attncard.pipeline.run.evaluate as evaluate_stage
from attncard.pipeline.card.plots import write_plots
from attncard.pipeline.card.render import render_card
from attncard.pipeline.checks.lint import lint_run_folder
from attncard.pipeline.cli import publish_main
from attncard.pipeline.record.errors import IntegrityError, ResultsError
from attncard.pipeline.record.manifest import CARD_FILE, build_manifest
from attncard.pipeline.record.results import Results, StockLoad
from attncard.pipeline.run.data import load_task
from attncard.pipeline.run.evaluate import classify
from attncard.pipeline.run.models import load_model
from attncard.pipeline.scoring.metrics import label_metrics
from attncard.pipeline.verify.download import load_verified
from attncard.pipeline.verify.reverify import reverify
from conftest import FIXTURES, quick_scaling, write_sst2_folder

FIXTURE = FIXTURES / "tiny_results.json"
STOCK_TOOLS = "Loading with stock tools (peft's `PeftModel.from_pretrained`, the Hub's \"Use in PEFT\")"


def publish_tiny(model_dir: Path, module: str, glue: Path, output: Path) -> Path:
    argv = [
        *("--model", str(model_dir), "--module", module, "--steps", "3", "--batch-size", "4"),
        *("--data-dir", str(glue), "--output", str(output)),
    ]
    with quick_scaling():  # the scaling tables are no concern of these tests
        assert publish_main(argv) == 0
    (run_dir,) = output.iterdir()
    return run_dir


@pytest.fixture(scope="module")
def span_run(tiny_model_dir, tmp_path_factory) -> tuple[Path, Path, Path]:
    """`(run folder, GLUE folder, base model folder)`: a tiny BERT trained with adaptive_span, whose span
    logits are the module's own weights. Copy the run before changing it."""
    root = tmp_path_factory.mktemp("span-run")
    glue = write_sst2_folder(root / "glue")
    base = tiny_model_dir("bert")
    return publish_tiny(base, "adaptive_span", glue, root / "runs"), glue, base


@pytest.mark.slow
def test_stock_accuracy_is_what_stock_peft_gives_on_the_saved_run(span_run):
    run_dir, glue, base = span_run
    results = Results.load(run_dir)
    stock = results.stock
    assert stock is not None and not stock.same_model and stock.error == ""

    # Built here as a user of stock tools builds it: the base model, then peft on the published folder.
    data = load_task("sst2", glue)
    loaded = load_model(str(base), results.dataset.label_names)
    model = PeftModel.from_pretrained(loaded.model, str(run_dir), is_trainable=False)
    assert model.get_base_model().config._attn_implementation == "sdpa"
    assert not any("adaptive_span" in name for name, _ in model.named_modules())
    logits, _ = classify(model, loaded.tokenizer, data, results.training.hyperparameters.max_length)
    labels = list(data.validation["label"])
    expected = label_metrics(labels, logits.argmax(dim=-1).tolist(), results.dataset.label_names)
    assert stock.accuracy == expected.accuracy
    assert stock.predictions_sha256 == expected.predictions_sha256

    # Per layer, the span logits and the measured crossover with its timings are in the adapter file and land
    # nowhere in the stock model.
    with safe_open(run_dir / "adapter_model.safetensors", framework="pt") as handle:
        names = list(handle.keys())
    assert stock.adapter_weights == len(names)
    assert stock.ignored_weights == sum("adaptive_span" in name for name in names) == 2 * 3

    card = (run_dir / "README.md").read_text(encoding="utf-8")
    # Near the top: right under the status line and the paired verdict beside it.
    lines = card.splitlines()
    status = next(i for i, text in enumerate(lines) if text.startswith("**Status:"))
    line = lines[status + 4]
    stock_runs = (
        " — use the attncard loader ([Use it](#use-it)):** stock tools run transformers' own attention, not "
        f"`adaptive_span`, and silently ignore 6 of the adapter's {len(names)} weight tensors"
    )
    assert line.startswith(f"**{STOCK_TOOLS} ") and stock_runs in line, line
    # A tiny run may score at chance either way: equal accuracies are said to agree (card template 2), never
    # "gives 50.00% instead of 50.00%" (tests/card/test_card_template_2.py words each case).
    stock_pct, own_pct = f"{100 * stock.accuracy:.2f}%", f"{100 * results.metrics.accuracy:.2f}%"
    if stock.accuracy == results.metrics.accuracy:
        assert f"the same {own_pct}" in line and "instead of" not in line, line
    else:
        assert f" gives {stock_pct} instead of {own_pct} " in line, line


@pytest.mark.slow
def test_an_adapter_stock_peft_cannot_load_records_its_error(
    tiny_model_dir, small_glue, tmp_path, monkeypatch
):
    class RefusingPeftModel:
        @classmethod
        def from_pretrained(cls, *args, **kwargs):
            raise ValueError("Target modules {'svd_up'} not found in the base model.\nPlease check them.")

    # Only the stock load is refused; the attncard loader (the card's usage snippet) loads as always.
    monkeypatch.setattr(evaluate_stage, "PeftModel", RefusingPeftModel)
    run_dir = publish_tiny(tiny_model_dir("bert"), "adaptive_span", small_glue, tmp_path / "runs")
    stock = Results.load(run_dir).stock
    assert stock.error == "Target modules {'svd_up'} not found in the base model."
    assert stock.accuracy is None and stock.predictions_sha256 == ""
    card = (run_dir / "README.md").read_text(encoding="utf-8")
    assert (
        f"**{STOCK_TOOLS} fails — use the attncard loader ([Use it](#use-it)):** this adapter does not load "
        "with stock PEFT: Target modules {'svd_up'} not found in the base model."
    ) in card.splitlines()
    assert lint_run_folder(run_dir) == []


def test_for_none_the_card_says_stock_tools_give_the_same_model(tiny_gpt2_run):
    run_dir, _ = tiny_gpt2_run
    results = Results.load(run_dir)
    assert results.stock == StockLoad(same_model=True)
    line = (
        f"{STOCK_TOOLS} gives the same model, and the same {100 * results.metrics.accuracy:.2f}%: `none` "
        "keeps transformers' own attention."
    )
    assert line in (run_dir / "README.md").read_text(encoding="utf-8").splitlines()


def test_a_run_recorded_before_the_stock_load_renders_without_the_line():
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    with_line = render_card(Results.from_dict(data))
    del data["stock"]
    results = Results.from_dict(data)
    assert results.stock is None
    without = render_card(results)
    assert STOCK_TOOLS in with_line and STOCK_TOOLS not in without
    # Nothing else moves: the card of an older run renders as it was published.
    stock_paragraph = next(line for line in with_line.splitlines(True) if STOCK_TOOLS in line) + "\n"
    assert with_line.replace(stock_paragraph, "") == without


def test_a_stock_predictions_hash_that_is_no_sha256_is_refused():
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    data["stock"] = {"accuracy": 0.5, "predictions_sha256": "not-a-hash"}
    with pytest.raises(ResultsError, match=r"stock\.predictions_sha256"):
        Results.from_dict(data)


@pytest.mark.slow
def test_reverify_measures_the_stock_load_again(span_run, tmp_path):
    run_dir, glue, base = span_run
    check = reverify(run_dir, data_dir=glue, base_model=base)
    assert check.matches, check.problems
    recorded = Results.load(run_dir).stock
    compared = {f.name: f.recomputed for f in check.figures if f.name.startswith("stock.")}
    assert compared["stock.accuracy"] == recorded.accuracy
    assert compared["stock.predictions_sha256"] == recorded.predictions_sha256

    # A consistently forged stock figure (card rendered again, manifest refreshed) passes every check of the
    # files; only loading the adapter the stock way again tells.
    forged = tmp_path / "forged"
    shutil.copytree(run_dir, forged)
    results = Results.load(forged)
    results.stock = dataclasses.replace(results.stock, accuracy=0.0 if recorded.accuracy else 1.0)
    plots = write_plots(results, forged)
    results.manifest = {k: v for k, v in build_manifest(forged).items() if k != CARD_FILE}
    (forged / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = build_manifest(forged)
    results.save(forged)
    check = reverify(forged, data_dir=glue, base_model=base)
    assert not check.matches
    assert [problem.split()[0] for problem in check.problems] == ["stock.accuracy"]


@pytest.mark.parametrize(
    ("stock", "message"),
    [
        ({"same_model": False}, r"stock\.same_model is False but the module 'none' keeps the model's own"),
        ({"accuracy": 0.5}, r"stock\.accuracy is 0\.5 with predictions_sha256 '', but nothing was measured"),
    ],
)
def test_a_stock_record_that_contradicts_the_module_is_refused(
    tiny_gpt2_run, gpt2_base, tmp_path, stock, message
):
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_gpt2_run[0], run_dir)
    data = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    data["stock"].update(stock)
    (run_dir / "results.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    with pytest.raises(IntegrityError, match=message):
        load_verified(run_dir, base_model=gpt2_base)
