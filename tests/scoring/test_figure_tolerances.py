"""What a recomputed figure may differ by (pipeline.scoring.tolerances): the last bits another scipy or numpy
gives pass, a forged change, an edited count or a decision the recorded figures do not give is refused.

The runs are a committed card (`cards/minilm-adaptive_span-mrpc-seed0`, MRPC with a paired verdict),
loaded and edited in memory, and the values other scipy versions give, as measured for docs/downloading.md
("What may differ between environments").
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attncard.pipeline.checks.figures import Figure, recorded_figure_problems
from attncard.pipeline.checks.reverification import settled
from attncard.pipeline.record.comparison import Verdict
from attncard.pipeline.record.errors import IntegrityError
from attncard.pipeline.record.results import Results
from attncard.pipeline.scoring.paired import COUNT_FIELDS, comparison_from_counts, comparison_problems
from attncard.pipeline.scoring.tolerances import (
    EXACT,
    FIGURE_TOLERANCES,
    difference_note,
    figure_key,
    same_figure,
    tolerance_of,
)
from attncard.pipeline.verify.reverify_predictions import reverify_predictions

CARD = Path(__file__).resolve().parents[2] / "cards" / "minilm-adaptive_span-mrpc-seed0"

# (figure, recorded by scipy 1.17.1 / numpy 2.4.6, recomputed by another version): the largest relative
# differences measured on the committed cards and a sweep of every GLUE split size.
MEASURED = [
    ("verification.p_value", 5.5509172258563125e-11, 5.550917225856274e-11),  # scipy 1.13.1, the issue's
    ("verification.p_value", 4.4024717755610965e-07, 4.4024717755610023e-07),  # scipy 1.11.4, a card
    ("verification.p_value", 2.915443871235411e-14, 2.915443871234024e-14),  # 1.11.4, 3838 of 9815 rows
    ("comparison.mcnemar_p", 0.26305395754293537, 0.26305395754293576),  # 1.11.4, a card
    ("comparison.mcnemar_p", 4.1085017885939046e-23, 4.10850178859373e-23),  # 1.11.4, 1221 of 2000
    ("metrics.loss", 0.4232016077522907, 0.4232016077522906),  # numpy 1.26.4's exp/log
]


def card() -> Results:
    return Results.load(CARD)


def with_figure(results: Results, name: str, value) -> Results:
    """`results` with the figure `name` ("verification.p_value", "comparison.module_only") set to `value`."""
    record, field = name.split(".")
    setattr(results, record, dataclasses.replace(getattr(results, record), **{field: value}))
    return results


def scaled(name: str, factor: float) -> Results:
    results = card()
    record, field = name.split(".")
    return with_figure(results, name, getattr(getattr(results, record), field) * factor)


def refused(results: Results) -> bool:
    """Whether reading `results` finds a problem, or an impossible record (an IntegrityError)."""
    try:
        return bool(recorded_figure_problems(results))
    except IntegrityError:
        return True


def test_the_card_agrees_with_its_recomputation():
    assert recorded_figure_problems(card()) == []


@pytest.mark.parametrize(("name", "recorded", "recomputed"), MEASURED)
def test_what_another_scipy_or_numpy_gives_passes(name, recorded, recomputed):
    assert recorded != recomputed
    assert same_figure(name, recorded, recomputed)
    assert "within" in difference_note(name, recorded, recomputed)


TOLERANT = [name for name in FIGURE_TOLERANCES if name.count(".") == 1 and name != "metrics.loss"]


@pytest.mark.parametrize("name", TOLERANT)
def test_a_last_bits_difference_passes_a_forged_one_is_refused(name):
    assert recorded_figure_problems(scaled(name, 1 + 1e-14)) == []
    problems = recorded_figure_problems(scaled(name, 1 + 1e-3))
    assert len(problems) == 1 and problems[0].removeprefix("comparison: ").startswith(f"{name} is ")
    source = tolerance_of(name).source
    assert (
        f"(differs by 1.0e-03 relative, beyond the {tolerance_of(name).rtol:g} {source} can give)"
        in (problems[0])
    ), problems


# The figures the status is decided on, and the other closed formulas: one ulp off is a forged figure.
EXACT_FIGURES = [
    "verification.p0",
    "verification.se",
    "verification.threshold",
    "verification.accuracy",
    "verification.compression_factor",
    "comparison.difference",
]


@pytest.mark.parametrize("name", EXACT_FIGURES)
def test_figures_computed_exactly_are_compared_bit_for_bit(name):
    results = card()
    record, field = name.split(".")
    value = getattr(getattr(results, record), field)
    problems = recorded_figure_problems(with_figure(results, name, math.nextafter(value, math.inf)))
    assert any("computed exactly, another environment gives the same" in p for p in problems), problems
    assert tolerance_of(name) is EXACT


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("verification.correct", 1),
        ("verification.n", 1),
        ("comparison.module_only", 1),
        ("comparison.both_wrong", -1),
    ],
)
def test_counts_edited_by_one_are_refused(name, change):
    results = card()
    record, field = name.split(".")
    assert refused(with_figure(results, name, getattr(getattr(results, record), field) + change))


def test_a_class_count_or_a_confusion_cell_edited_by_one_is_refused():
    results = card()
    counts = dict(results.verification.class_counts)
    counts[next(iter(counts))] += 1
    assert refused(with_figure(results, "verification.class_counts", counts))
    results = card()
    matrix = [list(row) for row in results.metrics.confusion_matrix]
    matrix[0][0], matrix[0][1] = matrix[0][0] - 1, matrix[0][1] + 1
    assert refused(with_figure(results, "metrics.confusion_matrix", matrix))


def test_status_and_verdict_are_compared_exactly():
    assert recorded_figure_problems(with_figure(card(), "verification.status", "PASS"))
    problems = comparison_problems(with_figure(card(), "comparison.verdict", Verdict.INCONCLUSIVE))
    assert problems[0] == "comparison.verdict is 'INCONCLUSIVE' but 'NON_INFERIOR' when recomputed"


def test_an_interval_moved_within_the_tolerance_across_the_margin_is_refused():
    """The interval may differ in its last bits, the verdict not: at a margin a hair beyond the lower end the
    honest verdict is NON_INFERIOR, and a lower end moved by 2e-14 relative (within the tolerance) would
    give INCONCLUSIVE: the recorded interval must give the recorded verdict."""
    honest = card()
    low = honest.comparison.ci_low
    counts = [getattr(honest.comparison, name) for name in COUNT_FIELDS]
    baselines, margin = honest.comparison.baselines, -low * (1 + 1e-14)
    honest.comparison = comparison_from_counts(*counts, baselines=baselines, margin=margin)
    assert honest.comparison.ci_low == low and honest.comparison.verdict == Verdict.NON_INFERIOR
    assert comparison_problems(honest) == []
    moved = copy_with_ci_low(honest, low * (1 + 2e-14))
    assert same_figure("comparison.ci_low", moved.comparison.ci_low, low)
    problems = comparison_problems(moved)
    assert len(problems) == 1 and problems[0].startswith(
        "comparison.verdict is 'NON_INFERIOR', but the recorded interval ["
    ), problems
    assert problems[0].endswith("gives 'INCONCLUSIVE'")


def copy_with_ci_low(results: Results, ci_low: float) -> Results:
    moved = dataclasses.replace(results)
    moved.comparison = dataclasses.replace(results.comparison, ci_low=ci_low)
    return moved


def test_the_status_cannot_flip_within_a_tolerance():
    """The status rests on the accuracy, the threshold and the compression factor (pipeline.scoring.gate), and
    the verdict on the interval and the margin: none has a tolerance but the interval, which the verdict rule
    above holds to the recorded verdict."""
    for name in ("verification.accuracy", "verification.threshold", "verification.compression_factor"):
        assert tolerance_of(name) is EXACT
    assert tolerance_of("comparison.margin") is EXACT
    for name, tolerance in FIGURE_TOLERANCES.items():
        assert 0 < tolerance.rtol <= 1e-6 and tolerance.atol <= 1e-15 and tolerance.why, name


def test_a_nan_or_an_infinity_agrees_with_nothing():
    for value in (math.nan, math.inf):
        assert not same_figure("verification.p_value", value, 0.5)
        assert not same_figure("verification.p_value", 0.5, value)
    assert not same_figure("verification.p_value", math.nan, math.nan)


def test_figure_names_find_their_tolerance():
    assert figure_key("second_split.verification.wilson_low") == "verification.wilson_low"
    assert figure_key("metrics.per_class[1].f1") == "metrics.per_class.f1"
    assert Figure("second_split.metrics.loss", 1.0, 1.0).rel_tol == FIGURE_TOLERANCES["metrics.loss"].rtol
    assert Figure("metrics.per_class[1].f1", 0.5, 0.5 + 1e-16).equal() is False


def test_verify_predictions_says_whether_another_environment_could_give_a_difference(glue: Path):
    """The issue's case: scipy 1.13.1 recomputes the card's p-value 7e-15 off; that matches, 1e-3 does not."""
    check = reverify_predictions(CARD, data_dir=glue)
    assert check.matches, check.problems

    def with_p_value(recomputed: float):
        check.figures = [
            dataclasses.replace(figure, recomputed=recomputed)
            if figure.name == "verification.p_value"
            else figure
            for figure in check.figures
        ]
        return settled(check)

    assert with_p_value(5.550917225856274e-11).matches
    problems = with_p_value(5.5509172258563125e-11 * (1 + 1e-3)).problems
    assert problems == [
        "verification.p_value 5.556468143082168e-11 recomputed, 5.5509172258563125e-11 recorded (differs by "
        "1.0e-03 relative, beyond the 1e-09 another scipy can give)"
    ]


# --- `attncard verify` with the model: which rows may predict another label (pipeline.verify.reverify)
# -----------


def test_only_a_near_tie_within_the_noise_may_flip():
    from attncard.pipeline.verify.reverify import LOGIT_NOISE, Flips, near_tie_flips

    recorded = np.array([[0.5, 0.5 + LOGIT_NOISE], [0.1, 0.4], [0.5, 0.5 + LOGIT_NOISE], [1.0, 0.0]])
    now = recorded.copy()
    now[0] = [0.5 + LOGIT_NOISE, 0.5 + LOGIT_NOISE / 2]  # a near tie, each logit within the noise: allowed
    now[1] = [0.4, 0.1]  # a margin of 0.3: refused
    now[2] = [0.9, 0.5]  # a near tie, but a logit moved by 0.4: refused
    assert near_tie_flips(recorded, now) == Flips(allowed=[0], refused=[1, 2])
    assert near_tie_flips(recorded, recorded) == Flips()


def _flip_row(monkeypatch, row: int, by: float) -> None:
    """Makes the model's logits now those it computes, with `row`'s two logits swapped and moved by `by`."""
    import attncard.pipeline.verify.reverify as reverify_module
    from attncard.pipeline.verify.download import predict_logits as real

    def flipped(*args, **kwargs):
        logits = real(*args, **kwargs).clone()
        low, high = sorted(logits[row].tolist())
        logits[row] = torch.tensor([high, low] if logits[row].argmax() == 1 else [low, high]) + by
        return logits

    monkeypatch.setattr(reverify_module, "predict_logits", flipped)


def test_verify_keeps_a_flipped_near_tie_and_refuses_another_flip(gpt2_base, tiny_gpt2_run, monkeypatch):
    import attncard.pipeline.verify.reverify as reverify_module
    from attncard.pipeline.checks.predictions import read_predictions

    run_dir, glue = tiny_gpt2_run
    recorded = read_predictions(run_dir, Results.load(run_dir))
    top = np.sort(recorded.logits, axis=-1)
    row = int(np.argmin(top[:, -1] - top[:, -2]))  # the nearest tie of the run
    margin = float(top[row, -1] - top[row, -2])
    _flip_row(monkeypatch, row, 1.0)  # its logits swapped and moved by 1: beyond any noise
    check = reverify_module.reverify(run_dir, data_dir=glue, base_model=gpt2_base)
    assert not check.matches and f"1 row(s) ({row}) predict another label than recorded" in check.note
    assert any(problem.startswith("metrics.predictions_sha256 ") for problem in check.problems)
    # With a noise just above this row's margin, its logits swapped alone are a near tie: the recorded
    # prediction stands, and the note names the row.
    _flip_row(monkeypatch, row, 0.0)
    monkeypatch.setattr(reverify_module, "LOGIT_NOISE", margin * 1.01 + 1e-6)
    check = reverify_module.reverify(run_dir, data_dir=glue, base_model=gpt2_base)
    assert check.matches, check.problems
    assert check.note.startswith(f"1 near-tie row(s) ({row}) predict the other label here"), check.note
