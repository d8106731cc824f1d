from __future__ import annotations

import math

import pytest

from attncard.pipeline.record.results import Efficiency, Metrics, Parameters, Status
from attncard.pipeline.run.evaluate import EvalResult
from attncard.pipeline.scoring.gate import decide_status, majority_threshold, verify


def test_sst2_threshold():
    """SST-2 validation: n = 872, majority 444 (positive)."""
    p0, se, threshold = majority_threshold([428, 444])
    assert p0 == pytest.approx(444 / 872)
    assert se == pytest.approx(0.016929, abs=1e-6)  # sqrt(0.509174 * 0.490826 / 872)
    assert round(100 * threshold, 3) == 55.996


@pytest.mark.parametrize(
    ("counts", "p0", "se", "threshold"),
    [
        ([50, 50], 0.5, 0.05, 0.65),  # sqrt(0.25 / 100) = 0.05
        ([10, 90], 0.9, 0.03, 0.99),  # sqrt(0.09 / 100) = 0.03
        ([146, 131], 146 / 277, 0.0299980, 0.6170698),  # RTE validation
        ([60, 25, 15], 0.6, 0.0489898, 0.7469694),  # three classes: sqrt(0.24 / 100)
    ],
)
def test_hand_computed_thresholds(counts, p0, se, threshold):
    got_p0, got_se, got_threshold = majority_threshold(counts)
    assert got_p0 == pytest.approx(p0, abs=1e-7)
    assert got_se == pytest.approx(se, abs=1e-7)
    assert got_threshold == pytest.approx(threshold, abs=1e-7)


def test_empty_split_is_an_error():
    with pytest.raises(ValueError, match="empty split"):
        majority_threshold([0, 0])


@pytest.mark.parametrize(
    ("accuracy", "factor", "finite", "status"),
    [
        (0.64, 1.0, True, Status.FAIL),
        (0.65, 1.0, True, Status.PASS_NO_COMPRESSION),  # at the threshold passes
        (0.70, 0.99, True, Status.PASS_NO_COMPRESSION),
        (0.70, 1.5, True, Status.PASS),
        (0.70, 1.5, False, Status.FAIL),
        (0.60, 2.0, True, Status.FAIL),
    ],
)
def test_status(accuracy, factor, finite, status):
    got, reasons = decide_status(accuracy, 0.65, factor, finite)
    assert got is status
    assert reasons


def _evaluation(labels, predictions, *, loss=0.5, factor=1.0) -> EvalResult:
    accuracy = sum(t == p for t, p in zip(labels, predictions, strict=True)) / len(labels)
    metrics = Metrics(
        accuracy=accuracy,
        f1_macro=accuracy,
        f1_weighted=accuracy,
        precision_macro=accuracy,
        recall_macro=accuracy,
        loss=loss,
        confusion_matrix=[[0, 0], [0, 0]],
        per_class=[],
        predictions_sha256="0" * 64,
    )
    efficiency = Efficiency("cpu", "test cpu", 1, 1.0, "test", 1.0, 1.0, 10, 10.0, 8, "test")
    parameters = Parameters(
        before=100,
        after=round(100 / factor),
        trainable=1,
        lora_layers=1,
        attention_layers_changed=0,
        compression_factor=factor,
    )
    return EvalResult(
        trained=None,
        metrics=metrics,
        efficiency=efficiency,
        parameters=parameters,
        labels=list(labels),
        predictions=list(predictions),
        module_stats={},
        example={},
        trace=[],
    )


def test_verify_figures_against_hand_computation():
    # 20 rows, 12 positive: p0 = 0.6; 17 correct.
    labels = [1] * 12 + [0] * 8
    predictions = [1] * 12 + [0] * 5 + [1] * 3
    result = verify(_evaluation(labels, predictions), ["negative", "positive"])
    assert result.n == 20
    assert result.class_counts == {"negative": 8, "positive": 12}
    assert result.majority_label == "positive"
    assert result.correct == 17
    assert result.accuracy == pytest.approx(0.85)
    # P(X >= 17), X ~ Binomial(20, 0.6), summed by hand.
    p_value = sum(math.comb(20, k) * 0.6**k * 0.4 ** (20 - k) for k in range(17, 21))
    assert result.p_value == pytest.approx(p_value, rel=1e-9)
    # Wilson interval, closed form with z = 1.959964.
    z, n, p = 1.959963984540054, 20, 0.85
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (result.wilson_low, result.wilson_high) == pytest.approx((centre - half, centre + half), abs=1e-9)
    assert result.threshold == pytest.approx(0.6 + 3 * math.sqrt(0.24 / 20))  # 0.928634
    # 0.85 beats p0 = 0.6 with p < 0.05, yet 20 rows are too few to clear p0 + 3 SE.
    assert result.p_value < 0.05
    assert result.status is Status.FAIL
    assert result.reasons == ["accuracy 85.0000% is below the threshold 92.8634% (majority share + 3 SE)"]


def test_verify_fails_on_nan_metric():
    result = verify(_evaluation([1, 0, 1, 1], [1, 0, 1, 1], loss=float("nan")), ["negative", "positive"])
    assert result.status is Status.FAIL
    assert "not finite" in result.reasons[0]


def test_verify_pass_with_compression():
    labels = [0, 1] * 50
    result = verify(_evaluation(labels, labels, factor=1.25), ["negative", "positive"])
    assert result.status is Status.PASS
