"""MNLI matched and mismatched, end to end on a tiny run (issue 34): both splits evaluated, each with its
metrics, predictions file and gate in results.json and on the card, the run failing when either gate fails;
a download, `verify --predictions` and `lint` check both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from attncard.pipeline.card.groups import read_cards
from attncard.pipeline.card.leaderboard import render_leaderboard
from attncard.pipeline.checks.figures import recomputed_verification, recorded_figure_problems
from attncard.pipeline.checks.lint import lint_run_folder
from attncard.pipeline.checks.predictions import read_predictions
from attncard.pipeline.cli import main, publish_main
from attncard.pipeline.publish.publish import copy_to_cards
from attncard.pipeline.record.errors import IntegrityError, ResultsError
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE, build_manifest
from attncard.pipeline.record.results import Results
from attncard.pipeline.scoring.gate import both_gates
from attncard.pipeline.verify.download import download_verified
from attncard.pipeline.verify.reverify import reverify
from conftest import SST2_ROWS
from run_folders import reseal

MNLI_HEADER = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
)
SECOND_FILE = "predictions_validation_mismatched.csv"
NEXT = [text for text, _ in SST2_ROWS[1:] + SST2_ROWS[:1]]
# A premise with itself (entailment), with the next row (contradiction), with a remark (neutral).
ROWS = [
    row
    for (text, _), other in zip(SST2_ROWS, NEXT, strict=True)
    for row in ((text, text, "entailment"), (text, other, "contradiction"), (text, "i saw it .", "neutral"))
]


def write_mnli(root: Path) -> Path:
    """A small MNLI folder: train, dev_matched (every row) and dev_mismatched (the rows of 4 premises)."""
    folder = root / "MNLI"
    folder.mkdir(parents=True)
    for name, rows in (("train.tsv", ROWS * 6), ("dev_matched.tsv", ROWS), ("dev_mismatched.tsv", ROWS[:12])):
        lines = [MNLI_HEADER] + [
            f"{i}\t1\t1e\tfiction\t( p )\t( h )\t(ROOT p)\t(ROOT h)\t{first}\t{second}\t{label}\t{label}"
            for i, (first, second, label) in enumerate(rows)
        ]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def mnli_run(tiny_model_dir, tmp_path_factory) -> tuple[Path, Path]:
    """`(run folder, GLUE folder)` of a tiny GPT-2 run of MNLI."""
    root = tmp_path_factory.mktemp("mnli")
    glue = write_mnli(root / "glue")
    argv = [
        *("--model", str(tiny_model_dir("gpt2")), "--module", "none", "--task", "mnli"),
        *("--steps", "20", "--batch-size", "8", "--lr", "3e-2"),
        *("--data-dir", str(glue), "--output", str(root / "runs")),
    ]
    assert publish_main(argv) == 0
    return root / "runs" / "gpt2-none-mnli", glue


@pytest.mark.slow
def test_both_splits_are_evaluated_recorded_and_gated(mnli_run):
    run_dir, _ = mnli_run
    results = Results.load(run_dir)
    second = results.second_split
    assert (results.dataset.split, second.split) == ("validation_matched", "validation_mismatched")
    assert (results.verification.n, second.verification.n) == (24, 12)
    assert second.metrics.official.name == "accuracy"
    assert second.metrics.official.value == second.metrics.accuracy == second.verification.accuracy
    # The run's status is the worse of the two gates.
    first_alone = download_verified(run_dir, allow_failed=True).results.verification
    assert results.verification.status == both_gates(first_alone, second.verification, second.split).status
    assert sorted(results.dataset.files) == ["train", "validation", "validation_mismatched"]
    assert SECOND_FILE in results.manifest
    predictions = read_predictions(run_dir, results, split=second)
    assert len(predictions.labels) == 12


def test_the_card_and_the_model_index_give_both_splits(mnli_run):
    run_dir, _ = mnli_run
    results = Results.load(run_dir)
    second = results.second_split
    card = (run_dir / CARD_FILE).read_text(encoding="utf-8")
    assert "## Results on GLUE MNLI (validation_mismatched, all 12 rows)" in card
    assert f"| **Status of this split** | **{second.verification.status.value}** |" in card
    assert f"`{SECOND_FILE}`" in card
    front_matter = yaml.safe_load(card.split("---\n")[1])
    splits = {
        result["dataset"]["split"]: {metric["type"]: metric["value"] for metric in result["metrics"]}
        for result in front_matter["model-index"][0]["results"]
    }
    assert splits["validation_matched"]["accuracy"] == results.metrics.accuracy
    assert splits["validation_mismatched"]["accuracy"] == second.metrics.accuracy
    assert lint_run_folder(run_dir) == []


def test_verify_predictions_recomputes_both_splits(mnli_run, capsys):
    run_dir, glue = mnli_run
    assert main(["verify", "--predictions", str(run_dir), "--data-dir", str(glue)]) == 0
    assert "\nMATCH: " in capsys.readouterr().out


def _copy(mnli_run, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(mnli_run[0], copy)
    return copy


def _edit_results(run_dir: Path, edit) -> None:
    data = json.loads((run_dir / RESULTS_FILE).read_text(encoding="utf-8"))
    edit(data)
    (run_dir / RESULTS_FILE).write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_an_edited_figure_of_the_second_split_is_refused(mnli_run, tmp_path):
    run_dir = _copy(mnli_run, tmp_path)
    _edit_results(run_dir, lambda data: data["second_split"]["metrics"].update(accuracy=1.0))
    with pytest.raises(IntegrityError, match=r"second_split\.metrics\.accuracy is 1\.0 but"):
        download_verified(run_dir, allow_failed=True)


def test_a_run_without_the_second_split_is_refused(mnli_run, tmp_path):
    run_dir = _copy(mnli_run, tmp_path)
    _edit_results(run_dir, lambda data: data.update(second_split=None))
    # A run whose second split failed its gate would otherwise pass for the first split's status alone.
    with pytest.raises(IntegrityError, match="contradicts itself"):
        download_verified(run_dir, allow_failed=True)
    problems = recorded_figure_problems(Results.load(run_dir))
    assert "second_split is None, but the task mnli evaluates validation_mismatched" in problems


def test_the_second_predictions_file_must_be_there_and_the_one_recorded(mnli_run, tmp_path, capsys):
    run_dir = _copy(mnli_run, tmp_path)
    lines = (run_dir / SECOND_FILE).read_text(encoding="utf-8").splitlines(keepends=True)
    (run_dir / SECOND_FILE).write_text("".join(lines[:-1]), encoding="utf-8")  # a row dropped
    _edit_results(run_dir, lambda data: data.update(manifest=build_manifest(run_dir)))
    with pytest.raises(IntegrityError, match=rf"{SECOND_FILE} holds 11 rows"):
        download_verified(run_dir, allow_failed=True)
    (run_dir / SECOND_FILE).unlink()
    _edit_results(run_dir, lambda data: data.update(manifest=build_manifest(run_dir)))
    with pytest.raises(IntegrityError, match=rf"{SECOND_FILE} is missing"):
        download_verified(run_dir, allow_failed=True)


def test_the_leaderboard_gives_both_splits(mnli_run, tmp_path):
    cards = tmp_path / "cards"
    copy_to_cards(mnli_run[0], cards)
    results = Results.load(mnli_run[0])
    leaderboard = render_leaderboard(read_cards(cards))
    [row] = [line for line in leaderboard.splitlines() if line.startswith("| gpt2 ")]
    matched, mismatched = results.metrics.official.value, results.second_split.metrics.official.value
    expected = (
        f"accuracy {matched:.4f} (one seed: no spread); validation_mismatched: {mismatched:.4f} (one seed: "
        "no spread)"
    )
    assert f"| {expected} |" in row


def test_verify_evaluates_both_splits_with_the_model(mnli_run, tiny_model_dir):
    run_dir, glue = mnli_run
    check = reverify(run_dir, data_dir=glue, base_model=tiny_model_dir("gpt2"))
    assert check.matches, check.problems
    names = [figure.name for figure in check.figures]
    assert "second_split.metrics.accuracy" in names and "second_split.verification.status" in names
    assert check.recomputed_status == Results.load(run_dir).verification.status


def as_schema_3(run_dir: Path) -> None:
    """The downgrade of issue 42: the run relabelled as schema 3, which evaluated one split, and re-sealed
    with attncard's own hashing: the second split, the official metric and the mismatched predictions
    dropped, the first split's gate kept as the run's."""
    results = Results.load(run_dir)
    results.schema_version = 3
    results.second_split = None
    results.metrics.official = None
    results.verification = recomputed_verification(results)  # the first split's gate alone
    results.dataset.files.pop("validation_mismatched")
    results.dataset.statistics.pop("validation_mismatched")
    (run_dir / SECOND_FILE).unlink()
    reseal(run_dir, results)


def test_a_run_of_mnli_relabelled_as_schema_3_is_refused(mnli_run, tiny_model_dir, tmp_path, capsys):
    run_dir, glue = _copy(mnli_run, tmp_path), mnli_run[1]
    as_schema_3(run_dir)
    refused = "dataset.task is 'mnli', which no run of schema 3 records"
    with pytest.raises(ResultsError, match=refused):
        download_verified(run_dir, allow_failed=True)
    assert main(["verify", "--predictions", str(run_dir), "--data-dir", str(glue)]) == 2
    assert refused in capsys.readouterr().err
    assert (
        main(["verify", str(run_dir), "--data-dir", str(glue), "--base-model", str(tiny_model_dir("gpt2"))])
        == 2
    )
    err = capsys.readouterr().err
    assert refused in err and err.count("\n") == 1 and "Traceback" not in err
    [finding] = lint_run_folder(run_dir)
    assert refused in finding.message
