"""The arithmetic of a run's quality figures, from its logits and gold labels, with numpy alone.

Evaluation records these figures ([`pipeline.run.evaluate`] passes its logits as a numpy array), and
`attncard verify` recomputes them, from the model's logits or from predictions.csv alone, with the same
functions: accuracy, F1 (macro and weighted), precision and recall (macro), the confusion matrix and per-class
scores, the cross-entropy loss, and the sha256 of the predicted label ids. The scores are scikit-learn's
(`precision_recall_fscore_support` with `zero_division=0`), computed from the confusion matrix as it computes
them, bit for bit (tests/scoring/test_metrics.py holds them to it), without its import, which takes longer
than recomputing a run. The verification ([`pipeline.scoring.gate`]) and the paired verdict
([`pipeline.scoring.paired`]) import no torch either.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..record.comparison import MccDifference
from ..record.results import OFFICIAL_METRIC_NAMES, ONE_CLASS_METRICS, ClassScores, Metrics, OfficialMetric
from .tolerances import FIGURE_TOLERANCES

# How far a recomputed loss may be from the recorded one, relatively. The loss is computed here in float64;
# runs published before it was recorded torch's float32 cross-entropy, which differs in the last bits (up to
# 1.4 parts in 10⁷ on the committed cards), and float64 exp and log may differ in the last bit between
# machines. The one table of what each figure may differ by is pipeline.scoring.tolerances; the card shows the
# loss to 4 decimals.
LOSS_REL_TOL = FIGURE_TOLERANCES["metrics.loss"].rtol


def cross_entropy(logits: np.ndarray, labels: Sequence[int]) -> float:
    """The mean cross-entropy of `(rows, labels)` logits against the gold labels, in float64.

    Example:
        >>> round(cross_entropy(np.array([[2.0, 0.0], [0.0, 1.0]], dtype=np.float32), [0, 0]), 6)
        0.720095
    """
    values = np.asarray(logits, dtype=np.float64)
    shifted = values - values.max(axis=-1, keepdims=True)  # exp of a large logit would overflow
    log_sums = np.log(np.exp(shifted).sum(axis=-1))
    picked = shifted[np.arange(len(values)), np.asarray(labels, dtype=np.int64)]
    return float(np.mean(log_sums - picked))


def quality_metrics(
    logits: np.ndarray,
    labels: Sequence[int],
    label_names: Sequence[str],
    official: str | None = None,
    positive: int = 1,
) -> Metrics:
    """Every quality figure of a run, from the logits of the evaluated split and its gold labels, in order.

    The one place these figures are computed: evaluation records them, and `attncard verify` recomputes
    them from a downloaded run's model, or its predictions.csv, and compares.

    Args:
        logits: `(rows, labels)` float logits, in split order (evaluation's are float32).
        labels: the gold label ids, in split order.
        label_names: the task's label names, in label-id order.
        official: the task's official GLUE metric (`TaskSpec.official_metric`), recorded as
            `Metrics.official`; None records none (results.json before schema 4).
        positive: the label id whose F1 is the official metric, when that is "f1".

    Returns:
        [`Metrics`]: accuracy, F1, precision, recall, loss ([`cross_entropy`]), confusion matrix, per-class
        scores, the sha256 of the predicted label ids (the first maximum of each row's logits) and the
        official metric.

    Example:
        >>> logits = np.array([[2.0, 0.0], [0.0, 1.0]], dtype=np.float32)
        >>> quality_metrics(logits, [0, 0], ["negative", "positive"]).accuracy
        0.5
    """
    predictions = np.asarray(logits).argmax(axis=-1).tolist()
    metrics = label_metrics(labels, predictions, label_names, official, positive)
    metrics.loss = cross_entropy(logits, labels)
    return metrics


def label_metrics(
    labels: Sequence[int],
    predictions: Sequence[int],
    label_names: Sequence[str],
    official: str | None = None,
    positive: int = 1,
) -> Metrics:
    """The figures of [`quality_metrics`] that depend on the labels and predictions alone (`loss` is NaN).

    Example:
        >>> label_metrics([0, 0, 1], [0, 1, 1], ["negative", "positive"]).confusion_matrix
        [[1, 1], [0, 1]]
        >>> label_metrics([0, 0, 1], [0, 1, 1], ["no", "yes"], "matthews_correlation").official
        OfficialMetric(name='matthews_correlation', value=0.5, positive_label='')
    """
    y_true, y_pred = np.asarray(labels, dtype="<i8"), np.asarray(predictions, dtype="<i8")
    size = len(label_names)
    ids = np.concatenate([y_true, y_pred])
    if len(y_true) != len(y_pred) or not ((ids >= 0) & (ids < size)).all():
        raise ValueError(
            f"{len(y_true)} labels and {len(y_pred)} predictions: give as many of each, each a label id 0 to "
            f"{size - 1}"
        )
    matrix = np.zeros((size, size), dtype=np.int64)  # rows: the gold label; columns: the prediction
    np.add.at(matrix, (y_true, y_pred), 1)
    correct, support, predicted = np.diagonal(matrix), matrix.sum(axis=1), matrix.sum(axis=0)
    precision, recall = _ratio(correct, predicted), _ratio(correct, support)
    f1 = _ratio(2.0 * correct, 1.0 * support + predicted)  # 2·tp / (2·tp + fn + fp), as scikit-learn has it
    return Metrics(
        accuracy=float(np.mean(y_true == y_pred)),
        f1_macro=float(np.mean(f1)),
        # Weighted by support; with no rows at all, scikit-learn drops the weights.
        f1_weighted=float(np.average(f1, weights=support) if support.sum() else np.mean(f1)),
        precision_macro=float(np.mean(precision)),
        recall_macro=float(np.mean(recall)),
        loss=float("nan"),
        confusion_matrix=matrix.tolist(),
        per_class=[
            ClassScores(name, float(p), float(r), float(f), int(s))
            for name, p, r, f, s in zip(label_names, precision, recall, f1, support, strict=True)
        ],
        predictions_sha256=predictions_sha256(predictions),
        official=None
        if official is None
        else OfficialMetric(
            name=official,
            value=official_metric(official, y_true, y_pred, size, positive),
            positive_label=label_names[positive] if get_official_metric(official).of_one_class else "",
        ),
    )


def matthews_correlation(labels: Sequence[int], predictions: Sequence[int], size: int) -> float:
    """The Matthews correlation coefficient of the predictions (CoLA's official GLUE metric), as
    scikit-learn's `matthews_corrcoef` computes it from the confusion matrix: 0 where it is undefined (one
    class predicted, or one gold class).

    Args:
        labels: the gold label ids, in split order.
        predictions: the predicted label ids, in split order.
        size: how many labels the task has.

    Example:
        >>> matthews_correlation([0, 0, 1, 1], [0, 1, 1, 1], 2)
        0.5773502691896258
        >>> matthews_correlation([0, 1], [1, 1], 2)
        0.0
    """
    matrix = label_metrics(labels, predictions, [str(i) for i in range(size)]).confusion_matrix
    return float(_batched_mcc(np.asarray(matrix, dtype=np.int64)[None])[0])


def positive_f1(labels: Sequence[int], predictions: Sequence[int], positive: int = 1) -> float:
    """F1 of the positive class, `2·tp / (2·tp + fn + fp)`, 0 where that class is neither gold nor predicted
    (scikit-learn's `f1_score(..., pos_label=positive, zero_division=0)`): MRPC's and QQP's official metric.

    Example:
        >>> positive_f1([0, 1, 1], [1, 1, 0])
        0.5
    """
    y_true, y_pred = np.asarray(labels, dtype="<i8"), np.asarray(predictions, dtype="<i8")
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} labels and {len(y_pred)} predictions: give as many of each")
    true_positive = int(np.sum((y_true == positive) & (y_pred == positive)))
    denominator = int(np.sum(y_true == positive)) + int(np.sum(y_pred == positive))
    return 2.0 * true_positive / denominator if denominator else 0.0


BOOTSTRAP_RESAMPLES = 10_000


def _batched_mcc(matrices: np.ndarray) -> np.ndarray:
    """[`matthews_correlation`] of each `(size, size)` confusion matrix of a `(batch, size, size)` stack."""
    counts = matrices.astype(np.float64)
    t_sum, p_sum = counts.sum(axis=2), counts.sum(axis=1)
    n_correct = np.trace(counts, axis1=1, axis2=2)
    n_samples = p_sum.sum(axis=1)
    cov_ytyp = n_correct * n_samples - (t_sum * p_sum).sum(axis=1)
    cov_ypyp = n_samples**2 - (p_sum * p_sum).sum(axis=1)
    cov_ytyt = n_samples**2 - (t_sum * t_sum).sum(axis=1)
    denominator = cov_ytyt * cov_ypyp
    return np.divide(
        cov_ytyp, np.sqrt(denominator), out=np.zeros(len(counts)), where=denominator != 0, dtype=np.float64
    )


def mcc_difference_interval(
    labels: Sequence[int],
    module_predictions: Sequence[int],
    baseline_predictions: Sequence[int],
    size: int,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """The MCC difference (module − baseline) on the same rows and its paired bootstrap percentile interval.

    Each resample draws the rows with replacement (numpy's `default_rng(seed)`, `resamples` draws of as
    many rows, in chunks of 1,000 resamples) and takes both runs' MCC on the same drawn rows.

    Returns:
        `(difference, low, high)`: the difference on all rows, and the `(1 − confidence)/2` and
        `(1 + confidence)/2` percentiles (numpy's linear interpolation) of the resampled differences.

    Example:
        >>> labels, module, dense = [0, 1, 1, 0, 1, 0], [0, 1, 1, 0, 0, 0], [0, 1, 0, 1, 1, 0]
        >>> difference, low, high = mcc_difference_interval(labels, module, dense, 2, seed=0, resamples=200)
        >>> round(difference, 4), low <= difference <= high
        (0.3738, True)
    """
    y_true = np.asarray(labels, dtype=np.int64)
    codes, scores = [], []
    for predictions in (module_predictions, baseline_predictions):
        y_pred = np.asarray(predictions, dtype=np.int64)
        scores.append(matthews_correlation(y_true, y_pred, size))  # also checks lengths and ids
        codes.append(y_true * size + y_pred)
    difference = scores[0] - scores[1]
    generator, rows, cells = np.random.default_rng(seed), len(y_true), size * size
    differences = []
    for start in range(0, resamples, 1000):
        chunk = min(1000, resamples - start)
        drawn = generator.integers(0, rows, (chunk, rows))
        offsets = (np.arange(chunk) * cells)[:, None]
        scores = [
            _batched_mcc(
                np.bincount((offsets + code[drawn]).ravel(), minlength=chunk * cells).reshape(
                    chunk, size, size
                )
            )
            for code in codes
        ]
        differences.append(scores[0] - scores[1])
    low, high = np.percentile(np.concatenate(differences), [50 * (1 - confidence), 50 * (1 + confidence)])
    return float(difference), float(low), float(high)


def mcc_difference(
    labels: Sequence[int],
    module_predictions: Sequence[int],
    baseline_predictions: Sequence[int],
    size: int,
    seed: int,
    confidence: float = 0.95,
) -> MccDifference:
    """The [`MccDifference`] a CoLA run records against its dense baseline: [`mcc_difference_interval`] with
    `BOOTSTRAP_RESAMPLES` resamples.

    Example:
        >>> labels, module, dense = [0, 1, 1, 0, 1, 0], [0, 1, 1, 0, 0, 0], [0, 1, 0, 1, 1, 0]
        >>> mcc_difference(labels, module, dense, 2, seed=0).resamples
        10000
    """
    difference, low, high = mcc_difference_interval(
        labels, module_predictions, baseline_predictions, size, seed, BOOTSTRAP_RESAMPLES, confidence
    )
    return MccDifference(
        difference=difference,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        resamples=BOOTSTRAP_RESAMPLES,
        seed=seed,
    )


@dataclass(frozen=True)
class OfficialMetricSpec:
    """One official metric a task may be scored by (`TaskSpec.official_metric`): how it is computed, how the
    card's model-index names it (huggingface_hub's `EvalResult` fields) and how the card's results table
    shows it. `{positive}` in a text stands for the name of the class an F1 is of ("equivalent").

    Attributes:
        name: its id in results.json (`metrics.official.name`) and the model-index's `metric_type`.
        compute: `(labels, predictions, size, positive) -> value`: the gold and predicted label ids in split
            order, how many labels the task has, and the label id of the class the metric is of.
        metric_name: the model-index's `metric_name` ("F1 ({positive})").
        card_label: its row in the card's results table ("F1 of {positive}").
        reported: how the card's note says GLUE reports the task ("Matthews' correlation").
        percent: the card shows it as a percentage; else as a number to 4 decimals.
        metric_args: the model-index's `metric_args`, given the label id of the class the metric is of (None
            for a metric of no class); None for no arguments.
        of_one_class: the value is of one class, which results.json names (`positive_label`).
        is_accuracy: it is the run's accuracy itself: the card and the model-index show accuracy's row.
        keeps_macro_f1: the model-index lists macro F1 after accuracy (not where the metric is an F1).
        records_mcc_difference: a run with a dense baseline records the paired bootstrap interval of its
            MCC difference (`comparison.mcc_difference`).

    Example:
        >>> OFFICIAL_METRICS["f1"].compute([0, 1, 1], [1, 1, 0], 2, 1)
        0.5
    """

    name: str
    compute: Callable[[Sequence[int], Sequence[int], int, int], float]
    metric_name: str
    card_label: str
    reported: str
    percent: bool = True
    metric_args: Callable[[int | None], dict[str, str | int]] | None = None
    of_one_class: bool = False
    is_accuracy: bool = False
    keeps_macro_f1: bool = True
    records_mcc_difference: bool = False


# The official metric of each task, by name: `official_metric` computes with it, the card renders with it,
# the checks look it up. A metric is added with `register_official_metric`.
OFFICIAL_METRICS: dict[str, OfficialMetricSpec] = {}


def register_official_metric(spec: OfficialMetricSpec, replace: bool = False) -> OfficialMetricSpec:
    """Adds an official metric to [`OFFICIAL_METRICS`], for `TaskSpec.official_metric` to name.

    Args:
        spec: the metric.
        replace: replace a metric of the same name; without it, that name is refused.

    Returns:
        `spec`.

    Raises:
        ValueError: a metric of that name is registered and `replace` is not given, or results.json's schema
            does not name it (`record.results.OFFICIAL_METRIC_NAMES`, `record.results.ONE_CLASS_METRICS`).

    Example:
        >>> balanced = OfficialMetricSpec(
        ...     "balanced_accuracy",
        ...     lambda labels, predictions, size, positive: label_metrics(
        ...         labels, predictions, [str(i) for i in range(size)]
        ...     ).recall_macro,
        ...     metric_name="Balanced accuracy",
        ...     card_label="Balanced accuracy",
        ...     reported="balanced accuracy",
        ... )
        >>> try:  # before results.json's schema names it
        ...     register_official_metric(balanced)
        ... except ValueError as error:
        ...     print(str(error).split(": ")[1])
        add it to record.results.OFFICIAL_METRIC_NAMES
    """
    if spec.name in OFFICIAL_METRICS and not replace:
        raise ValueError(
            f"an official metric named {spec.name!r} is registered already; give another name, or "
            "replace=True"
        )
    if spec.name not in OFFICIAL_METRIC_NAMES or spec.of_one_class != (spec.name in ONE_CLASS_METRICS):
        raise ValueError(
            f"results.json cannot record the official metric {spec.name!r} as registered: add it to "
            "record.results.OFFICIAL_METRIC_NAMES"
            + (" and to record.results.ONE_CLASS_METRICS (it is of one class)" if spec.of_one_class else "")
        )
    OFFICIAL_METRICS[spec.name] = spec
    return spec


def get_official_metric(name: str) -> OfficialMetricSpec:
    """The registered official metric of this name.

    Raises:
        ValueError: no official metric has this name; the message lists those that do.

    Example:
        >>> get_official_metric("matthews_correlation").card_label
        'Matthews correlation (MCC)'
    """
    if name not in OFFICIAL_METRICS:
        raise ValueError(f"unknown official metric {name!r}: give one of {', '.join(OFFICIAL_METRICS)}")
    return OFFICIAL_METRICS[name]


def official_metric(
    name: str, labels: Sequence[int], predictions: Sequence[int], size: int, positive: int = 1
) -> float:
    """A task's official GLUE metric (`TaskSpec.official_metric`) of the predictions.

    Args:
        name: one of [`OFFICIAL_METRICS`]: "accuracy", "f1" (of the label id `positive`) or
            "matthews_correlation".
        labels: the gold label ids, in split order.
        predictions: the predicted label ids, in split order.
        size: how many labels the task has.
        positive: the label id whose F1 is taken, for "f1".

    Raises:
        ValueError: `name` is none of `OFFICIAL_METRICS`.

    Example:
        >>> official_metric("f1", [0, 1, 1], [1, 1, 0], 2)
        0.5
    """
    return get_official_metric(name).compute(labels, predictions, size, positive)


def _accuracy(labels: Sequence[int], predictions: Sequence[int], size: int, positive: int) -> float:
    return label_metrics(labels, predictions, [str(i) for i in range(size)]).accuracy


def _positive_f1(labels: Sequence[int], predictions: Sequence[int], size: int, positive: int) -> float:
    return positive_f1(labels, predictions, positive)


def _matthews_correlation(
    labels: Sequence[int], predictions: Sequence[int], size: int, positive: int
) -> float:
    return matthews_correlation(labels, predictions, size)


def _binary_f1_args(positive: int | None) -> dict[str, str | int]:
    return {"average": "binary", "pos_label": positive}


# GLUE's three, in the order results.json's check lists them (record.results.OFFICIAL_METRIC_NAMES).
register_official_metric(
    OfficialMetricSpec(
        "accuracy",
        _accuracy,
        metric_name="Accuracy",
        card_label="Accuracy",
        reported="accuracy",
        is_accuracy=True,
    )
)
register_official_metric(
    OfficialMetricSpec(
        "f1",
        _positive_f1,
        metric_name="F1 ({positive})",
        card_label="F1 of {positive}",
        reported="F1 of the class {positive}, with accuracy beside it",
        metric_args=_binary_f1_args,
        of_one_class=True,
        keeps_macro_f1=False,
    )
)
register_official_metric(
    OfficialMetricSpec(
        "matthews_correlation",
        _matthews_correlation,
        metric_name="Matthews correlation",
        card_label="Matthews correlation (MCC)",
        reported="Matthews' correlation",
        percent=False,
        records_mcc_difference=True,
    )
)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """`numerator / denominator` in float64, and 0 where the denominator is 0 (scikit-learn's
    `zero_division=0`)."""
    return np.divide(
        numerator, denominator, out=np.zeros(len(denominator)), where=denominator != 0, dtype=np.float64
    )


def predictions_sha256(predictions: Sequence[int] | np.ndarray) -> str:
    """sha256 of predicted label ids, int64 little-endian, in split order: `Metrics.predictions_sha256`.

    Example:
        >>> predictions_sha256([1, 0])[:12]
        '4cbbd8ca5215'
    """
    return hashlib.sha256(np.asarray(predictions, dtype="<i8").tobytes()).hexdigest()


__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "LOSS_REL_TOL",
    "OFFICIAL_METRICS",
    "OfficialMetricSpec",
    "cross_entropy",
    "get_official_metric",
    "label_metrics",
    "matthews_correlation",
    "mcc_difference",
    "mcc_difference_interval",
    "official_metric",
    "positive_f1",
    "predictions_sha256",
    "quality_metrics",
    "register_official_metric",
]
