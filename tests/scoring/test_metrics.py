"""The arithmetic of the quality figures (pipeline/scoring/metrics.py), held to what it replaces:
scikit-learn's scores bit for bit, and torch's cross-entropy to float32 rounding (`LOSS_REL_TOL`), the
tolerance a loss recorded by torch is compared with."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import (
    confusion_matrix,
    f1_score,
    matthews_corrcoef,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
)

from attncard.pipeline.scoring.metrics import (
    LOSS_REL_TOL,
    cross_entropy,
    label_metrics,
    matthews_correlation,
    mcc_difference_interval,
    official_metric,
    positive_f1,
    quality_metrics,
)
from attncard.pipeline.scoring.tasks import TASKS


def scikit_learn_figures(labels: np.ndarray, predictions: np.ndarray, count: int) -> dict:
    """The figures `label_metrics` computes, as scikit-learn computes them (what evaluation called before)."""
    ids = list(range(count))
    options = {"labels": ids, "zero_division": 0}
    precision, recall, f1, support = precision_recall_fscore_support(labels, predictions, **options)
    per_class = zip(precision, recall, f1, support, strict=True)
    return {
        "f1_macro": float(f1_score(labels, predictions, average="macro", **options)),
        "f1_weighted": float(f1_score(labels, predictions, average="weighted", **options)),
        "precision_macro": float(precision_score(labels, predictions, average="macro", **options)),
        "recall_macro": float(recall_score(labels, predictions, average="macro", **options)),
        "confusion_matrix": confusion_matrix(labels, predictions, labels=ids).tolist(),
        "per_class": [(float(p), float(r), float(f), int(s)) for p, r, f, s in per_class],
    }


@pytest.mark.slow
def test_the_scores_are_scikit_learns_bit_for_bit():
    generator = np.random.default_rng(0)
    for case in range(400):
        count, rows = int(generator.integers(2, 5)), int(generator.integers(1, 1000))
        labels = generator.integers(0, count, rows)
        right = generator.random(rows) < generator.random()  # anywhere from chance to perfect
        predictions = np.where(right, labels, generator.integers(0, count, rows))
        if case % 5 == 0:  # one label never predicted: its precision divides by zero
            predictions[predictions == count - 1] = 0
        if case % 7 == 0:  # one label never true: its recall divides by zero
            labels[labels == count - 1] = 0
        names = [f"label {i}" for i in range(count)]
        metrics = label_metrics(labels.tolist(), predictions.tolist(), names)
        expected = scikit_learn_figures(labels, predictions, count)
        per_class = [(c.precision, c.recall, c.f1, c.support) for c in metrics.per_class]
        assert {
            "f1_macro": metrics.f1_macro,
            "f1_weighted": metrics.f1_weighted,
            "precision_macro": metrics.precision_macro,
            "recall_macro": metrics.recall_macro,
            "confusion_matrix": metrics.confusion_matrix,
            "per_class": per_class,
        } == expected, f"case {case}"
        assert metrics.accuracy == float(np.mean(labels == predictions))


def test_the_loss_is_torchs_cross_entropy_within_its_tolerance():
    generator = torch.Generator().manual_seed(0)
    for scale in (1e-3, 1.0, 10.0, 1e3):
        logits = torch.randn(5000, 3, generator=generator) * scale
        labels = torch.randint(0, 3, (5000,), generator=generator)
        ours = cross_entropy(logits.numpy(), labels.tolist())
        in_float64 = torch.nn.functional.cross_entropy(logits.double(), labels).item()
        in_float32 = torch.nn.functional.cross_entropy(logits, labels).item()  # as runs recorded it
        assert ours == pytest.approx(in_float64, rel=1e-12, abs=1e-300)
        assert ours == pytest.approx(in_float32, rel=LOSS_REL_TOL, abs=1e-300), scale
    # The largest logits do not overflow.
    assert cross_entropy(np.array([[3e38, -3e38]], dtype=np.float32), [1]) == pytest.approx(6e38, rel=1e-6)


def test_quality_metrics_predict_the_first_maximum():
    logits = np.array([[1.0, 1.0], [0.0, 2.0], [3.0, -1.0]], dtype=np.float32)
    metrics = quality_metrics(logits, [1, 1, 0], ["negative", "positive"])
    assert metrics.confusion_matrix == [[1, 0], [1, 1]]  # the tie is label 0
    assert metrics.predictions_sha256 == label_metrics([1, 1, 0], [0, 1, 0], ["a", "b"]).predictions_sha256


@pytest.mark.parametrize(
    ("labels", "predictions"),
    [([0, 1], [0]), ([0, 2], [0, 1]), ([0, 1], [-1, 1])],
    ids=["fewer predictions", "a label out of range", "a negative prediction"],
)
def test_labels_that_are_not_label_ids_are_refused(labels, predictions):
    with pytest.raises(ValueError, match="give as many of each, each a label id 0 to 1"):
        label_metrics(labels, predictions, ["negative", "positive"])


@pytest.mark.filterwarnings("ignore:A single label was found")  # scikit-learn's, on one-class cases
def test_the_official_metrics_are_scikit_learns():
    generator = np.random.default_rng(1)
    for case in range(400):
        count, rows = int(generator.integers(2, 4)), int(generator.integers(1, 300))
        labels = generator.integers(0, count, rows)
        # Some cases predict one class only, or nearly: where MCC is undefined, scikit-learn gives 0.
        predictions = generator.integers(0, count, rows) if case % 3 else np.full(rows, case % count)
        mcc = matthews_correlation(labels.tolist(), predictions.tolist(), count)
        assert mcc == pytest.approx(float(matthews_corrcoef(labels, predictions)), abs=1e-12), case
        if count == 2:
            expected = f1_score(labels, predictions, pos_label=1, average="binary", zero_division=0)
            assert positive_f1(labels.tolist(), predictions.tolist()) == float(expected), case


def test_mcc_is_zero_where_scikit_learn_gives_zero():
    for labels, predictions in [([0, 1, 1, 0], [1, 1, 1, 1]), ([1, 1], [0, 1]), ([0, 1, 0], [0, 0, 0])]:
        assert float(matthews_corrcoef(labels, predictions)) == 0.0
        assert matthews_correlation(labels, predictions, 2) == 0.0
    assert matthews_correlation([0, 1, 0, 1], [0, 1, 0, 1], 2) == 1.0
    assert matthews_correlation([0, 1, 0, 1], [1, 0, 1, 0], 2) == -1.0


def test_each_task_names_its_glue_metric():
    official = {name: spec.official_metric for name, spec in TASKS.items()}
    assert official == {
        "sst2": "accuracy",
        "cola": "matthews_correlation",
        "mrpc": "f1",
        "qqp": "f1",
        "rte": "accuracy",
        "qnli": "accuracy",
        "mnli": "accuracy",
    }
    assert (TASKS["mrpc"].positive_label_name, TASKS["qqp"].positive_label_name) == (
        "equivalent",
        "duplicate",
    )
    labels, predictions = [0, 1, 1, 0, 1], [0, 1, 0, 1, 1]
    assert official_metric("f1", labels, predictions, 2) == float(f1_score(labels, predictions))
    assert official_metric("matthews_correlation", labels, predictions, 2) == pytest.approx(
        float(matthews_corrcoef(labels, predictions)), abs=1e-12
    )
    assert official_metric("accuracy", labels, predictions, 2) == 0.6
    with pytest.raises(ValueError, match="give one of accuracy, f1, matthews_correlation"):
        official_metric("auc", labels, predictions, 2)


def test_the_mcc_bootstrap_is_a_paired_resampling_of_rows():
    generator = np.random.default_rng(2)
    labels = generator.integers(0, 2, 120)
    module = np.where(generator.random(120) < 0.8, labels, 1 - labels)
    dense = np.where(generator.random(120) < 0.7, labels, 1 - labels)
    difference, low, high = mcc_difference_interval(labels, module, dense, 2, seed=7, resamples=300)
    assert difference == matthews_corrcoef(labels, module) - matthews_corrcoef(labels, dense)
    # The same draws, one resample at a time, with scikit-learn's MCC.
    draws = np.random.default_rng(7).integers(0, 120, (300, 120))
    naive = [matthews_corrcoef(labels[d], module[d]) - matthews_corrcoef(labels[d], dense[d]) for d in draws]
    assert (low, high) == pytest.approx(tuple(np.percentile(naive, [2.5, 97.5])), abs=1e-12)
    assert low < difference < high
    assert mcc_difference_interval(labels, module, dense, 2, seed=7, resamples=300) == (difference, low, high)
    assert mcc_difference_interval(labels, module, dense, 2, seed=8, resamples=300) != (difference, low, high)
