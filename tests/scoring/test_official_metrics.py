"""Each task's official GLUE metric, end to end on tiny runs (issue 34): a CoLA run records Matthews'
correlation and an MRPC run the F1 of "equivalent" in results.json, the card shows it first, the model-index
and `.eval_results` carry it, and `verify --predictions` recomputes it; a CoLA module run records its MCC
difference against its dense run with a seeded paired bootstrap interval, recomputed from both
predictions.csv. Every edit of those figures is caught: by a download when the figure can be recomputed from
results.json alone, by `verify --predictions` when it needs the predictions.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard
from sklearn.metrics import f1_score, matthews_corrcoef

from attncard.pipeline.card.eval_results import eval_results_file
from attncard.pipeline.card.groups import read_cards
from attncard.pipeline.card.leaderboard import render_leaderboard
from attncard.pipeline.checks.lint import lint_run_folder
from attncard.pipeline.checks.predictions import read_predictions
from attncard.pipeline.cli import main, publish_main
from attncard.pipeline.publish.publish import copy_to_cards
from attncard.pipeline.record.errors import IntegrityError, ResultsError
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE
from attncard.pipeline.record.results import OfficialMetric, Results
from attncard.pipeline.scoring.metrics import mcc_difference
from attncard.pipeline.scoring.paired import comparison_from_counts
from attncard.pipeline.verify.download import download_verified
from conftest import SST2_ROWS, quick_scaling
from run_folders import reseal

# Sentences of SST-2's rows: CoLA calls the positive ones acceptable; MRPC pairs a row with itself
# (equivalent) and with the next row, of the other sentiment (not equivalent).
COLA_ROWS = [(text, label) for text, label in SST2_ROWS]
NEXT = [text for text, _ in SST2_ROWS[1:] + SST2_ROWS[:1]]
MRPC_ROWS = [(text, text, 1) for text, _ in SST2_ROWS] + [
    (text, other, 0) for (text, _), other in zip(SST2_ROWS, NEXT, strict=True)
]


def write_glue(root: Path) -> Path:
    """A small GLUE folder with CoLA (no header: source, label, original label, sentence) and MRPC."""
    cola, mrpc = root / "CoLA", root / "MRPC"
    cola.mkdir(parents=True)
    mrpc.mkdir()
    for name, repeats in (("train.tsv", 8), ("dev.tsv", 5)):
        lines = [f"src\t{label}\t\t{text}" for text, label in COLA_ROWS * repeats]
        (cola / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        lines += [f"{label}\t1\t2\t{first}\t{second}" for first, second, label in MRPC_ROWS * repeats]
        (mrpc / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory) -> tuple[Path, Path]:
    """`(runs folder, GLUE folder)`: tiny GPT-2 runs of CoLA (`none`, then `svd_lowrank` against it) and of
    MRPC (`none`)."""
    root = tmp_path_factory.mktemp("official")
    glue = write_glue(root / "glue")
    for task, module in (("cola", "none"), ("cola", "svd_lowrank"), ("mrpc", "none")):
        argv = [
            *("--model", str(tiny_model_dir("gpt2")), "--module", module, "--task", task),
            *("--steps", "10", "--batch-size", "8", "--lr", "3e-2"),
            *("--data-dir", str(glue), "--output", str(root / "runs")),
        ]
        with quick_scaling():
            assert publish_main(argv) == 0
    return root / "runs", glue


def copy(runs: tuple[Path, Path], name: str, tmp_path: Path) -> Path:
    """A copy of the run `name` beside copies of the other runs (its dense run among them)."""
    target = tmp_path / "runs"
    if not target.exists():
        shutil.copytree(runs[0], target)
    return target / name


def model_index(run_dir: Path) -> list[dict]:
    metadata = yaml.safe_load((run_dir / CARD_FILE).read_text(encoding="utf-8").split("---\n")[1])
    return metadata["model-index"][0]["results"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "metric", "label", "positive"),
    [
        ("gpt2-none-cola", "matthews_correlation", "Matthews correlation (MCC)", ""),
        ("gpt2-svd_lowrank-cola", "matthews_correlation", "Matthews correlation (MCC)", ""),
        ("gpt2-none-mrpc", "f1", "F1 of equivalent", "equivalent"),
    ],
)
def test_the_official_metric_is_recorded_shown_first_and_recomputed(
    runs, name, metric, label, positive, capsys
):
    run_dir, glue = runs[0] / name, runs[1]
    results = Results.load(run_dir)
    predictions = read_predictions(run_dir, results)
    expected = (
        matthews_corrcoef(predictions.labels, predictions.predictions)
        if metric == "matthews_correlation"
        else f1_score(predictions.labels, predictions.predictions, pos_label=1)
    )
    official = results.metrics.official
    assert (official.name, official.positive_label) == (metric, positive)
    assert official.value == pytest.approx(expected, abs=1e-12)

    card = (run_dir / CARD_FILE).read_text(encoding="utf-8")
    table = card.split("| Metric | Value |\n|---|---|\n", 1)[1]
    assert table.startswith(f"| **{label}** |"), table[:200]
    assert "The pass gate ([Verification](#verification)) is on accuracy for every task" in card
    first = model_index(run_dir)[0]["metrics"][0]
    assert (first["type"], first["value"]) == (metric, official.value)
    assert ModelCard(card).data.eval_results[0].metric_type == metric
    entry = yaml.safe_load((run_dir / eval_results_file(results)).read_text(encoding="utf-8"))
    assert entry[0]["value"] == official.value

    assert lint_run_folder(run_dir) == []
    assert main(["verify", "--predictions", str(run_dir), "--data-dir", str(glue)]) == 0
    assert "\nMATCH: " in capsys.readouterr().out


def test_a_cola_module_run_records_the_mcc_difference_with_its_bootstrap(runs):
    module = Results.load(runs[0] / "gpt2-svd_lowrank-cola")
    dense = Results.load(runs[0] / "gpt2-none-cola")
    mcc = module.comparison.mcc_difference
    assert (mcc.seed, mcc.resamples, mcc.confidence) == (0, 10_000, 0.95)
    assert mcc.difference == pytest.approx(module.metrics.official.value - dense.metrics.official.value)
    assert mcc.ci_low <= mcc.ci_high
    card = (runs[0] / "gpt2-svd_lowrank-cola" / CARD_FILE).read_text(encoding="utf-8")
    assert "paired bootstrap CI" in card and "10,000 resamples of the rows, seed 0" in card
    assert dense.comparison is None and Results.load(runs[0] / "gpt2-none-mrpc").comparison is None


@pytest.mark.parametrize(
    ("edit", "refused"),
    [
        (
            lambda r: setattr(r.metrics.official, "value", r.metrics.official.value + 0.1),
            "metrics.official.value",
        ),
        (
            lambda r: setattr(r.metrics, "official", OfficialMetric("accuracy", r.metrics.accuracy)),
            "metrics.official.name",
        ),
        (lambda r: setattr(r.comparison.mcc_difference, "seed", 7), "comparison.mcc_difference.seed is 7"),
        (lambda r: setattr(r.comparison, "mcc_difference", None), "comparison.mcc_difference is missing"),
    ],
)
def test_an_edited_official_figure_is_refused_by_a_download(runs, tmp_path, edit, refused):
    run_dir = copy(runs, "gpt2-svd_lowrank-cola", tmp_path)
    results = Results.load(run_dir)
    edit(results)
    reseal(run_dir, results)  # card, plots and manifest made to agree with the edit
    with pytest.raises(IntegrityError, match=refused):
        download_verified(run_dir, allow_failed=True)


def test_an_edited_mcc_interval_is_caught_by_verify_predictions(runs, tmp_path, capsys):
    """The interval cannot be recomputed from results.json alone: a download takes it, the predictions do
    not."""
    run_dir = copy(runs, "gpt2-svd_lowrank-cola", tmp_path)
    results = Results.load(run_dir)
    mcc = results.comparison.mcc_difference
    results.comparison.mcc_difference = dataclasses.replace(mcc, ci_high=mcc.ci_high + 0.05)
    reseal(run_dir, results)
    download_verified(run_dir, allow_failed=True)  # the tiny module run FAILs: beside the point here
    assert main(["verify", "--predictions", str(run_dir), "--data-dir", str(runs[1])]) == 1
    out = capsys.readouterr().out
    assert "comparison.mcc_difference.ci_high" in out and "MISMATCH" in out


def test_the_leaderboard_gives_each_task_its_official_metric(runs, tmp_path):
    cards = tmp_path / "cards"
    for name in ("gpt2-none-cola", "gpt2-svd_lowrank-cola", "gpt2-none-mrpc"):
        copy_to_cards(runs[0] / name, cards)
    rows = {
        tuple(cells[2:4]): cells
        for line in render_leaderboard(read_cards(cards)).splitlines()
        if line.startswith("| gpt2 ") and (cells := [cell.strip() for cell in line.split("|")])
    }
    mcc = Results.load(runs[0] / "gpt2-none-cola").metrics.official.value
    f1 = Results.load(runs[0] / "gpt2-none-mrpc").metrics.official.value
    assert rows[("none", "cola")][6] == f"MCC {mcc:.4f} (one seed: no spread)"
    assert rows[("none", "mrpc")][6] == f"F1 (equivalent) {f1:.4f} (one seed: no spread)"


def test_an_f1_without_its_positive_label_is_one_line_everywhere(runs, tmp_path, capsys):
    """An official F1 must name the class it is the F1 of: `lint` used to end in `ValueError: '' is not in
    list` on one that names none, where a download refused it in one line."""
    run_dir = copy(runs, "gpt2-none-mrpc", tmp_path)
    data = json.loads((run_dir / RESULTS_FILE).read_text(encoding="utf-8"))
    data["metrics"]["official"]["positive_label"] = ""
    (run_dir / RESULTS_FILE).write_text(json.dumps(data, indent=2), encoding="utf-8")
    refused = r"metrics\.official is an F1 of no class: its positive_label must name one of"
    with pytest.raises(ResultsError, match=refused):
        download_verified(run_dir, allow_failed=True)
    [finding] = lint_run_folder(run_dir)
    assert re.search(refused, finding.message), finding
    assert main(["lint", str(run_dir)]) == 1
    out = capsys.readouterr().out
    assert re.search(refused, out) and "Traceback" not in out


def test_a_comparison_at_another_confidence_than_publish_writes_is_refused(runs, tmp_path, capsys):
    """publish derives the paired interval and the MCC bootstrap at 0.95 only: a run re-derived at 0.5 (a
    narrower interval, a verdict more easily NON_INFERIOR) and re-sealed is refused, by every check."""
    run_dir = copy(runs, "gpt2-svd_lowrank-cola", tmp_path)
    results = Results.load(run_dir)
    recorded = results.comparison
    counts = (recorded.both_correct, recorded.module_only, recorded.baseline_only, recorded.both_wrong)
    narrower = comparison_from_counts(
        *counts, baselines=recorded.baselines, margin=recorded.margin, confidence=0.5
    )
    module = read_predictions(run_dir, results)
    dense = read_predictions(
        run_dir.parent / "gpt2-none-cola", Results.load(run_dir.parent / "gpt2-none-cola")
    )
    narrower.mcc_difference = mcc_difference(
        module.labels, module.predictions, dense.predictions, 2, seed=0, confidence=0.5
    )
    results.comparison = narrower
    reseal(run_dir, results)
    refused = r"comparison\.confidence is 0\.5, but publish derives every interval at 0\.95"
    with pytest.raises(IntegrityError, match=refused):
        download_verified(run_dir, allow_failed=True)
    assert main(["verify", "--predictions", str(run_dir), "--data-dir", str(runs[1])]) == 2
    err = capsys.readouterr().err
    assert re.search(refused, err) and err.count("\n") == 1 and "Traceback" not in err
    assert any(re.search(refused, finding.message) for finding in lint_run_folder(run_dir))
