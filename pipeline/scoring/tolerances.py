"""How far a recomputed figure may be from the recorded one, and why: one table, one comparison.

Two honest environments (another scipy, another numpy, float32 against float64) can give a float that
differs in its last bits; a forger changes a figure by far more, or changes a count, a label or a decision.
Every place that compares a recorded figure with its recomputation (`pipeline.checks.integrity`,
`pipeline.scoring.paired`, `attncard verify` with or without `--predictions`) asks [`same_figure`], which
looks the figure up in [`FIGURE_TOLERANCES`] by its name in results.json. A figure the table does not name is
compared exactly: counts, labels, hashes, texts, statuses, verdicts, and the floats computed with correctly
rounded arithmetic (Python's `/` and `math.sqrt`, numpy's division of integer counts), which every IEEE 754
machine gives bit for bit.

The tolerances were set above the largest differences measured on the committed cards and on a sweep of
every split size GLUE has (scipy 1.11.4, 1.13.1, 1.15.3 and 1.17.1; numpy 1.26.4, 2.2.6 and 2.4.6), with a
margin of several hundred, and far below any change a reader would see: the card shows p-values to 2
significant digits, intervals to 4 decimals. docs/downloading.md ("What may differ between environments")
has the table with the measurements.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """What may differ between two honest recomputations of a figure.

    Attributes:
        rtol: the largest relative difference allowed, `|a − b| ≤ rtol · max(|a|, |b|)`; 0 is bit for bit.
        atol: an absolute difference allowed besides (for figures near 0, where a relative one means little).
        source: what gives another value, as a message names it ("another scipy").
        why: how the figure is computed, and what was measured.
    """

    rtol: float
    atol: float
    source: str
    why: str


EXACT = Tolerance(
    0.0,
    0.0,
    "no environment",
    "counted, or computed with correctly rounded arithmetic (Python's `/`, `math.sqrt`, numpy's division "
    "of integer counts): the same bits on every IEEE 754 machine",
)
_SCIPY_P_VALUE = Tolerance(
    1e-9,
    1e-300,
    "another scipy",
    "scipy's `binomtest`, a sum of binomial terms by Boost's incomplete beta, whose last bits change "
    "between scipy versions (largest seen: 4.8e-13 relative, a p-value of 3e-14 on 9,815 rows); below 1e-300 "
    "it may underflow to 0",
)
_SCIPY_INTERVAL = Tolerance(
    1e-12,
    1e-15,
    "another scipy",
    "closed formulas around scipy's `norm.ppf` (z); bit for bit in every version measured, allowed a few "
    "ulp should scipy reorder its arithmetic",
)
_NUMPY_BOOTSTRAP = Tolerance(
    1e-12,
    1e-15,
    "another numpy",
    "the same 10,000 resamples (numpy's `default_rng(seed)`, PCG64, a stream numpy keeps across versions) "
    "and float64 MCCs and percentiles; bit for bit between numpy 1.26 and 2.x, allowed a few ulp for "
    "another summation order",
)
_LOSS = Tolerance(
    1e-6,
    0.0,
    "float32 against float64",
    "the mean cross-entropy of the logits: recomputed in float64, recorded by runs before it was in "
    "float32 by torch (up to 1.4e-7 relative on the committed cards); float64 `exp`/`log` of another libm "
    "differ in the last bit (2.6e-16 seen)",
)

# Figures by their name in results.json, list indices dropped and `second_split.` taken off (the second
# split's figures are computed as the first's). A name not here is compared exactly (EXACT).
FIGURE_TOLERANCES: dict[str, Tolerance] = {
    "verification.p_value": _SCIPY_P_VALUE,
    "verification.wilson_low": _SCIPY_INTERVAL,
    "verification.wilson_high": _SCIPY_INTERVAL,
    "comparison.mcnemar_p": _SCIPY_P_VALUE,
    "comparison.ci_low": _SCIPY_INTERVAL,
    "comparison.ci_high": _SCIPY_INTERVAL,
    "comparison.mcc_difference.difference": _NUMPY_BOOTSTRAP,
    "comparison.mcc_difference.ci_low": _NUMPY_BOOTSTRAP,
    "comparison.mcc_difference.ci_high": _NUMPY_BOOTSTRAP,
    "metrics.loss": _LOSS,
}

_INDEX_RE = re.compile(r"\[\d+\]")


def figure_key(name: str) -> str:
    """The key of a figure's name in [`FIGURE_TOLERANCES`]: indices dropped, `second_split.` taken off, and
    a note in parentheses left out.

    Example:
        >>> figure_key("second_split.metrics.per_class[2].f1")
        'metrics.per_class.f1'
        >>> figure_key("metrics.accuracy (against verification.accuracy)")
        'metrics.accuracy'
    """
    key = _INDEX_RE.sub("", name.split(" ", 1)[0])
    return key.removeprefix("second_split.")


def tolerance_of(name: str) -> Tolerance:
    """The [`Tolerance`] of the figure named `name` ([`EXACT`] when the table does not name it).

    Example:
        >>> tolerance_of("second_split.verification.p_value").rtol
        1e-09
        >>> tolerance_of("verification.threshold") is EXACT
        True
    """
    return FIGURE_TOLERANCES.get(figure_key(name), EXACT)


def _floats(recorded: object, recomputed: object) -> bool:
    return all(isinstance(value, float) for value in (recorded, recomputed))


def relative_difference(recorded: float, recomputed: float) -> float:
    """`|a − b| / max(|a|, |b|)`: 0 for equal values, inf when one is not finite and they differ."""
    if recorded == recomputed:
        return 0.0
    if not (math.isfinite(recorded) and math.isfinite(recomputed)):
        return math.inf
    return abs(recorded - recomputed) / max(abs(recorded), abs(recomputed))


def same_figure(name: str, recorded: object, recomputed: object) -> bool:
    """Whether a recorded figure and its recomputation agree: floats within the figure's [`Tolerance`],
    everything else (and every figure the table does not name) exactly. A NaN agrees with nothing.

    Example:
        >>> same_figure("verification.p_value", 5.5509172258563125e-11, 5.550917225856274e-11)  # scipy 1.13
        True
        >>> same_figure("verification.p_value", 5.55e-11, 5.56e-11)
        False
        >>> same_figure("verification.threshold", 0.752883750899534, 0.7528837508995341)
        False
        >>> same_figure("verification.correct", 337, 338)
        False
    """
    if not _floats(recorded, recomputed):
        return recorded == recomputed
    tolerance = tolerance_of(name)
    if recorded == recomputed:
        return True
    if not (math.isfinite(recorded) and math.isfinite(recomputed)):
        return False
    return abs(recorded - recomputed) <= max(
        tolerance.rtol * max(abs(recorded), abs(recomputed)), tolerance.atol
    )


def difference_note(name: str, recorded: object, recomputed: object) -> str:
    """What a message says of two floats that differ: by how much, relatively, and whether another honest
    environment could give that; empty for anything else.

    Example:
        >>> difference_note("verification.p_value", 0.04, 0.0401)
        'differs by 2.5e-03 relative, beyond the 1e-09 another scipy can give'
        >>> difference_note("verification.threshold", 0.75, 0.76)
        'differs by 1.3e-02 relative; it is computed exactly, another environment gives the same'
    """
    if not _floats(recorded, recomputed) or recorded == recomputed:
        return ""
    tolerance, relative = tolerance_of(name), relative_difference(recorded, recomputed)
    if tolerance.rtol == 0:
        return (
            f"differs by {relative:.1e} relative; it is computed exactly, another environment gives the same"
        )
    where = "within" if same_figure(name, recorded, recomputed) else "beyond"
    return f"differs by {relative:.1e} relative, {where} the {tolerance.rtol:g} {tolerance.source} can give"


__all__ = [
    "EXACT",
    "FIGURE_TOLERANCES",
    "Tolerance",
    "difference_note",
    "figure_key",
    "relative_difference",
    "same_figure",
    "tolerance_of",
]
