"""Stage 5 — verify: is the accuracy clearly above what always answering the majority class gets?

With p0 the majority-class share of the evaluated split and n its size, SE = sqrt(p0·(1 − p0)/n) and the
threshold is p0 + 3·SE. The status is one of:

- FAIL: accuracy below the threshold, or any metric not finite;
- PASS: accuracy at or above the threshold, and the module compresses the model (factor > 1);
- PASS_NO_COMPRESSION: accuracy at or above the threshold, no compression.

Also reported: the exact one-sided binomial p-value of the accuracy against p0, and its Wilson 95% interval.

A task with a second evaluated split (MNLI's mismatched genres) gates each split on its own, and the run
fails when either does ([`both_gates`]).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, replace
from typing import Protocol

from scipy.stats import binomtest

from ..record.results import Efficiency, Metrics, Parameters, Status, Verification


# The arithmetic imports no torch: `attncard verify --predictions` recomputes the verification without it.
# What the gate reads of an evaluation is stated here, so that scoring names no type of the run above it.
class SplitScores(Protocol):
    """An evaluated split as the gate reads it: gold labels and predictions in split order, and its
    metrics."""

    labels: list[int]
    predictions: list[int]
    metrics: Metrics


class EvalResult(SplitScores, Protocol):
    """An evaluation as the gate reads it ([`pipeline.run.evaluate.EvalResult`] is one): the first split's
    scores, the efficiency and parameters it measured, and the task's second split, if it has one."""

    efficiency: Efficiency
    parameters: Parameters
    second: SplitScores | None


def majority_threshold(class_counts: list[int]) -> tuple[float, float, float]:
    """Returns `(p0, SE, threshold)` for the class counts of an evaluation split.

    Example:
        >>> p0, se, threshold = majority_threshold([428, 444])  # SST-2 validation
        >>> round(100 * threshold, 3)
        55.996
    """
    n = sum(class_counts)
    if n == 0:
        raise ValueError("cannot verify on an empty split")
    p0 = max(class_counts) / n
    se = math.sqrt(p0 * (1 - p0) / n)
    return p0, se, p0 + 3 * se


def decide_status(
    accuracy: float, threshold: float, compression_factor: float, finite: bool
) -> tuple[Status, list[str]]:
    """The status and the reasons for it, each reason one sentence with the figures it rests on."""
    if not finite:
        return Status.FAIL, ["a metric is not finite (NaN or infinite): the run is broken"]
    if accuracy < threshold:
        return Status.FAIL, [
            f"accuracy {accuracy:.4%} is below the threshold {threshold:.4%} (majority share + 3 SE)"
        ]
    passed = f"accuracy {accuracy:.4%} is at or above the threshold {threshold:.4%} (majority share + 3 SE)"
    if compression_factor > 1:
        return Status.PASS, [
            passed,
            f"the module compresses the model by a factor of {compression_factor:.4f}",
        ]
    return Status.PASS_NO_COMPRESSION, [
        passed,
        f"no compression: compression factor {compression_factor:.4f} is not above 1",
    ]


def all_finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(all_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(all_finite(item) for item in value)
    return True


def verify(evaluation: EvalResult, label_names: list[str] | tuple[str, ...]) -> Verification:
    """Verifies an evaluation against the majority-class baseline.

    Args:
        evaluation: the result of [`pipeline.run.evaluate.evaluate`].
        label_names: the task's label names, in label-id order.

    Returns:
        A [`Verification`] holding every figure the status rests on.

    Example:
        >>> verification = verify(evaluation, ["negative", "positive"])
        >>> verification.status, verification.n
        (<Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>, 40)
    """
    return _gate(evaluation, evaluation.labels, evaluation.predictions, evaluation.metrics, label_names)


def verify_second(evaluation: EvalResult, label_names: list[str] | tuple[str, ...]) -> Verification | None:
    """[`verify`] of the task's second evaluated split (`evaluation.second`); None when it has none.

    Example:
        >>> verify_second(evaluation, ["negative", "positive"]) is None  # SST-2: one split
        True
    """
    second = evaluation.second
    if second is None:
        return None
    return _gate(evaluation, second.labels, second.predictions, second.metrics, label_names)


def _gate(
    evaluation: EvalResult,
    labels: list[int],
    predictions: list[int],
    metrics: Metrics,
    label_names: list[str] | tuple[str, ...],
) -> Verification:
    counts = Counter(labels)
    correct = sum(int(t == p) for t, p in zip(labels, predictions, strict=True))
    finite = all_finite(asdict(metrics)) and all_finite(asdict(evaluation.efficiency))
    return verification_from_counts(
        [counts.get(i, 0) for i in range(len(label_names))],
        correct,
        label_names,
        evaluation.parameters.compression_factor,
        finite,
    )


def verification_from_counts(
    class_counts: list[int],
    correct: int,
    label_names: list[str] | tuple[str, ...],
    compression_factor: float,
    finite: bool,
) -> Verification:
    """Every figure of the verification, from the class counts of the split and the count of correct rows.

    The one place the verification is computed: [`verify`] uses it on a fresh evaluation, and a download
    recomputes a published run's verification from its recorded counts with it (a recorded status is never
    taken on trust).

    Args:
        class_counts: rows of each label in the evaluated split, in label-id order.
        correct: rows predicted correctly.
        label_names: the task's label names, in label-id order.
        compression_factor: parameters before / after.
        finite: whether every recorded metric is finite.

    Returns:
        A [`Verification`].

    Raises:
        `ValueError`: the counts are impossible (an empty split, more correct rows than rows).

    Example:
        >>> verification_from_counts([428, 444], 690, ["negative", "positive"], 1.0, True).status
        <Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>
    """
    n = sum(class_counts)
    if not 0 <= correct <= n or min(class_counts, default=0) < 0:
        raise ValueError(f"{correct} correct rows of {n} (class counts {class_counts}) is impossible")
    p0, se, threshold = majority_threshold(class_counts)
    accuracy = correct / n
    p_value = binomtest(correct, n, p0, alternative="greater").pvalue
    # The interval is two-sided: a one-sided test's proportion_ci would run up to 1.
    interval = binomtest(correct, n, p0).proportion_ci(confidence_level=0.95, method="wilson")
    status, reasons = decide_status(accuracy, threshold, compression_factor, finite)
    return Verification(
        n=n,
        class_counts=dict(zip(label_names, class_counts, strict=True)),
        majority_label=label_names[class_counts.index(max(class_counts))],
        p0=p0,
        se=se,
        threshold=threshold,
        accuracy=accuracy,
        correct=correct,
        p_value=float(p_value),
        wilson_low=float(interval.low),
        wilson_high=float(interval.high),
        compression_factor=compression_factor,
        status=status,
        reasons=reasons,
    )


def both_gates(first: Verification, second: Verification | None, second_split: str) -> Verification:
    """The run's verification when its task has a second evaluated split: the first split's, with the status
    FAIL when the second split's gate fails (its reasons first, naming the split); `first` as it is when the
    task has one split or the second passes.

    Example:
        >>> passed = verification_from_counts([428, 444], 690, ["negative", "positive"], 1.0, True)
        >>> failed = verification_from_counts([428, 444], 450, ["negative", "positive"], 1.0, True)
        >>> gated = both_gates(passed, failed, "validation_mismatched")
        >>> gated.status, gated.reasons[0]
        (<Status.FAIL: 'FAIL'>, 'on validation_mismatched, accuracy 51.6055% is below the threshold ...')
    """
    if second is None or second.status != Status.FAIL or first.status == Status.FAIL:
        return first
    reasons = [f"on {second_split}, {reason}" for reason in second.reasons]
    return replace(first, status=Status.FAIL, reasons=[*reasons, *first.reasons])
