"""Adding a task and an official metric through their registries (issue 45), as a contributor would.

A task is one `register_task(TaskSpec(...))` in pipeline/scoring/tasks.py: here GLUE's WNLI, declared in
the test, is published from a GLUE folder, linted and verified from its predictions like a built-in task,
with no other file touched. An official metric is one `register_official_metric(OfficialMetricSpec(...))`
in pipeline/scoring/metrics.py: here balanced accuracy is computed by `label_metrics`, heads the card's
model-index and results table, and needs no MCC difference. Each registry also refuses, in one sentence
that says what to do, a declaration that does not hold together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sklearn.metrics import balanced_accuracy_score

from attncard.pipeline.card.context import official_figure
from attncard.pipeline.card.model_index import model_index_metrics
from attncard.pipeline.card.render import render_card
from attncard.pipeline.checks.figures import mcc_difference_problems, official_metric_of
from attncard.pipeline.checks.lint import lint_run_folder
from attncard.pipeline.cli import main, publish_main
from attncard.pipeline.record.errors import UnknownNameError
from attncard.pipeline.record.manifest import CARD_FILE
from attncard.pipeline.record.results import OfficialMetric, Results
from attncard.pipeline.run.data import load_task, load_validation
from attncard.pipeline.scoring import metrics
from attncard.pipeline.scoring.metrics import (
    OFFICIAL_METRICS,
    OfficialMetricSpec,
    get_official_metric,
    label_metrics,
    official_metric,
    register_official_metric,
)
from attncard.pipeline.scoring.tasks import TASKS, TaskSpec, get_task, register_task, title_of_task
from conftest import SST2_ROWS, quick_scaling

# GLUE's WNLI, as pipeline/scoring/tasks.py would declare it: the whole of adding a task.
WNLI = TaskSpec(
    name="wnli",
    title="GLUE WNLI",
    text_columns=("sentence1", "sentence2"),
    label_names=("not_entailment", "entailment"),
    folder="WNLI",
    tsv_columns={"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"},
    citation="Levesque, Davis and Morgenstern, The Winograd Schema Challenge, KR 2012",
    bibtex="""@inproceedings{levesque2012winograd,
  title = {The {W}inograd Schema Challenge},
  author = {Levesque, Hector J. and Davis, Ernest and Morgenstern, Leora},
  booktitle = {Thirteenth International Conference on the Principles of Knowledge Representation
    and Reasoning},
  year = {2012}
}""",
)


def _balanced_accuracy(labels, predictions, size: int, positive: int) -> float:
    """The mean recall over the classes: scikit-learn's `balanced_accuracy_score`."""
    return label_metrics(labels, predictions, [str(i) for i in range(size)]).recall_macro


# Balanced accuracy, as pipeline/scoring/metrics.py would declare it: the whole of adding an official metric.
BALANCED_ACCURACY = OfficialMetricSpec(
    "balanced_accuracy",
    _balanced_accuracy,
    metric_name="Balanced accuracy",
    card_label="Balanced accuracy",
    reported="balanced accuracy (the mean recall of the classes)",
)

# Sentences of SST-2's rows, paired with themselves (entailment) and with the next row (not entailment).
NEXT = [text for text, _ in SST2_ROWS[1:] + SST2_ROWS[:1]]
WNLI_ROWS = [(text, text, 1) for text, _ in SST2_ROWS] + [
    (text, other, 0) for (text, _), other in zip(SST2_ROWS, NEXT, strict=True)
]


def write_wnli(root: Path) -> Path:
    """A small GLUE folder holding WNLI as GLUE ships it: `index`, the two sentences and a 0/1 label."""
    folder = root / "WNLI"
    folder.mkdir(parents=True)
    for name, repeats in (("train.tsv", 6), ("dev.tsv", 3)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        lines += [f"{i}\t{a}\t{b}\t{label}" for i, (a, b, label) in enumerate(WNLI_ROWS * repeats)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def wnli() -> Iterator[TaskSpec]:
    """WNLI registered for the module's tests, and taken out of `TASKS` after them."""
    yield register_task(WNLI)
    del TASKS["wnli"]


@pytest.fixture
def balanced_accuracy(monkeypatch) -> Iterator[OfficialMetricSpec]:
    """Balanced accuracy registered for one test as a contributor adds it (its name in results.json's schema,
    record.results.OFFICIAL_METRIC_NAMES, here as the scoring reads it, and its entry), and taken out of
    `OFFICIAL_METRICS` after it."""
    with pytest.raises(ValueError, match=r"add it to record\.results\.OFFICIAL_METRIC_NAMES$"):
        register_official_metric(BALANCED_ACCURACY)
    schema = (*metrics.OFFICIAL_METRIC_NAMES, "balanced_accuracy")
    monkeypatch.setattr(metrics, "OFFICIAL_METRIC_NAMES", schema)
    yield register_official_metric(BALANCED_ACCURACY)
    del OFFICIAL_METRICS["balanced_accuracy"]


@pytest.fixture(scope="module")
def wnli_run(wnli, tiny_model_dir, tmp_path_factory) -> tuple[Path, Path]:
    """`(run folder, GLUE folder)`: a tiny GPT-2 run of `none` on the registered WNLI."""
    root = tmp_path_factory.mktemp("registries")
    glue = write_wnli(root / "glue")
    argv = [
        *("--model", str(tiny_model_dir("gpt2")), "--module", "none", "--task", "wnli"),
        *("--steps", "4", "--batch-size", "8", "--lr", "3e-2"),
        *("--data-dir", str(glue), "--output", str(root / "runs")),
    ]
    with quick_scaling():
        assert publish_main(argv) == 0
    return root / "runs" / "gpt2-none-wnli", glue


def test_a_registered_task_is_read_as_a_built_in_one(wnli, tmp_path):
    glue = write_wnli(tmp_path / "glue")
    assert get_task("wnli") is wnli and title_of_task("wnli") == "GLUE WNLI"
    data = load_task("wnli", glue)
    assert (len(data.train), len(data.validation)) == (6 * len(WNLI_ROWS), 3 * len(WNLI_ROWS))
    assert data.validation.features["label"].names == ["not_entailment", "entailment"]
    split = load_validation("wnli", glue)
    assert split.labels == [label for _, _, label in WNLI_ROWS * 3]
    assert split.source.files["validation"]["path"] == "WNLI/dev.tsv"


def test_a_registered_task_publishes_lints_and_verifies(wnli_run, capsys):
    run_dir, glue = wnli_run
    results = Results.load(run_dir)
    assert (results.dataset.task, results.dataset.label_names) == ("wnli", ["not_entailment", "entailment"])
    assert results.metrics.official.name == "accuracy"
    assert official_metric_of(results) == ("accuracy", 1)
    card = (run_dir / CARD_FILE).read_text(encoding="utf-8")
    assert "GLUE WNLI is reported by accuracy." in card
    assert "@inproceedings{levesque2012winograd," in card
    assert lint_run_folder(run_dir) == []
    assert main(["verify", "--predictions", str(run_dir), "--data-dir", str(glue)]) == 0
    assert "\nMATCH: " in capsys.readouterr().out


def test_a_registered_official_metric_is_computed_indexed_and_shown_first(wnli_run, balanced_accuracy):
    labels, predictions = [0, 0, 0, 1], [0, 1, 1, 1]
    expected = balanced_accuracy_score(labels, predictions)
    assert official_metric("balanced_accuracy", labels, predictions, 2) == expected
    metrics = label_metrics(labels, predictions, ["no", "yes"], "balanced_accuracy")
    assert metrics.official == OfficialMetric("balanced_accuracy", expected, positive_label="")

    # A task may name it, and its run's card shows it: the model-index's first metric, the table's first row.
    assert register_task(dataclasses.replace(WNLI, official_metric="balanced_accuracy"), replace=True)
    try:
        results = Results.load(wnli_run[0])
        results.metrics.official = OfficialMetric("balanced_accuracy", 0.625)
        index = model_index_metrics(results)
        assert [(metric.type, metric.name, metric.args) for metric in index] == [
            ("balanced_accuracy", "Balanced accuracy", None),
            ("accuracy", "Accuracy", None),
            ("f1", "F1 (macro)", {"average": "macro"}),
        ]
        figure = official_figure(results)
        assert (figure.label, figure.value) == ("Balanced accuracy", "62.50%")
        assert figure.note.startswith("GLUE WNLI is reported by balanced accuracy (the mean recall of the")
        card = render_card(results)
        assert "| Metric | Value |\n|---|---|\n| **Balanced accuracy** | **62.50%** |" in card
        first = yaml.safe_load(card.split("---\n")[1])["model-index"][0]["results"][0]["metrics"][0]
        assert (first["type"], first["value"]) == ("balanced_accuracy", 0.625)
        assert mcc_difference_problems(results) == []  # only a metric that records one wants one
    finally:
        register_task(WNLI, replace=True)


def test_each_glue_metric_is_registered_as_its_cards_show_it():
    shown = {
        name: (spec.card_label, spec.metric_name, spec.percent, spec.records_mcc_difference)
        for name, spec in OFFICIAL_METRICS.items()
    }
    assert shown == {
        "accuracy": ("Accuracy", "Accuracy", True, False),
        "f1": ("F1 of {positive}", "F1 ({positive})", True, False),
        "matthews_correlation": ("Matthews correlation (MCC)", "Matthews correlation", False, True),
    }
    assert get_official_metric("f1").metric_args(1) == {"average": "binary", "pos_label": 1}
    assert {spec.title for spec in TASKS.values()} >= {"GLUE SST-2", "GLUE CoLA", "GLUE MNLI"}


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({"name": "sst2"}, "a task named 'sst2' is registered already; give another name, or replace=True"),
        ({"name": "WNLI-1"}, "task name 'WNLI-1': use lower-case letters, digits and _ alone"),
        ({"official_metric": "auc"}, "unknown official metric 'auc': give one of accuracy, f1, matthews_"),
        (
            {"official_metric": "f1", "positive_label": 2},
            "task wnli2: positive_label 2 is not a label id of not_entailment, entailment; give the id of "
            "the class its f1 is of",
        ),
        (
            {"tsv_columns": {"sentence1": "sentence1", "label": "label"}},
            "task wnli2: tsv_columns places no sentence2; give the TSV column of each text column and of the",
        ),
    ],
)
def test_a_task_that_does_not_hold_together_is_refused(change, refused):
    with pytest.raises(ValueError, match=refused):
        register_task(dataclasses.replace(WNLI, **{"name": "wnli2", **change}))
    assert "wnli2" not in TASKS and "WNLI-1" not in TASKS  # nothing half-registered


def test_a_metric_name_is_registered_once_and_an_unknown_task_is_named():
    with pytest.raises(ValueError, match="an official metric named 'f1' is registered already"):
        register_official_metric(dataclasses.replace(BALANCED_ACCURACY, name="f1"))
    assert OFFICIAL_METRICS["f1"].name == "f1"
    with pytest.raises(UnknownNameError, match="unknown task 'wnli2'; valid tasks: cola, mnli, "):
        get_task("wnli2")
