"""The paired verdict's records: a module run against its dense baseline, as results.json holds it (the
verdict, the baseline runs it names, the counts and intervals; computed by pipeline.scoring.paired).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from . import text


class Verdict(StrEnum):
    """Non-inferiority of a module run against its dense baseline at a margin (see [`Comparison`])."""

    NON_INFERIOR = "NON_INFERIOR"  # the interval's lower end is above −margin
    INFERIOR = "INFERIOR"  # the interval's upper end is below −margin
    INCONCLUSIVE = "INCONCLUSIVE"  # the interval straddles −margin


@dataclass
class BaselineRecord:
    """The dense run (module `none`) a module run is compared with: the same base model and revision, task,
    split, data, seed and training settings; identified by its results.json and predictions.

    Attributes:
        repo_name: its run folder's (and Hub repository's) name.
        repo_id: its Hub repository, when it was published with one.
        results_sha256: sha256 of its results.json.
        predictions_sha256: its `metrics.predictions_sha256`.
        accuracy: its accuracy on the evaluated split.
        seed: its training seed.
    """

    repo_name: str = field(metadata={"text": text.HUB_NAME})
    repo_id: str | None = field(metadata={"text": text.HUB_ID})
    results_sha256: str = field(metadata={"text": text.SHA256})
    predictions_sha256: str = field(metadata={"text": text.SHA256})
    accuracy: float
    seed: int


@dataclass
class MccDifference:
    """The MCC difference (module − dense) of a CoLA run on the same rows, with a paired bootstrap interval
    (schema 4; see [`pipeline.scoring.metrics.mcc_difference_interval`]).

    Each of `resamples` resamples draws the evaluated rows with replacement (numpy's `default_rng(seed)`) and
    takes both runs' MCC on the same drawn rows; the interval is the percentile interval of the resampled
    differences at `confidence`. The seed is the run's training seed, so the interval is recomputable from
    both runs' predictions.csv and cannot be picked among seeds.

    Attributes:
        difference: the module's MCC minus the dense run's, on all rows.
        ci_low, ci_high: the interval's ends.
        confidence: of the interval (the comparison's, 0.95).
        resamples: bootstrap resamples (`pipeline.scoring.metrics.BOOTSTRAP_RESAMPLES`).
        seed: of the resampling: the run's training seed.
    """

    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    resamples: int
    seed: int


@dataclass
class Comparison:
    """The paired verdict of a module run against its dense baseline, on the same evaluated rows.

    Each row is counted by which of the two runs classify it correctly. The accuracy difference (module −
    baseline) is the mean of the per-row differences of correctness (−1, 0 or 1), its interval the normal
    interval of that mean at `confidence`; `mcnemar_p` is the exact two-sided McNemar test on the discordant
    rows (binomial, p = ½). The verdict compares the interval with −`margin` (in accuracy, 0.01 = one
    point). Pooled over seeds, the rows of every seed count (n = rows × seeds).

    Attributes:
        baselines: the dense runs compared with, one per seed pooled (empty: no baseline was found; every
            count below is then 0 and `verdict` None).
        n: rows compared.
        both_correct, module_only, baseline_only, both_wrong: rows by correctness (module_only: the module
            right, the baseline wrong).
        difference: accuracy of the module run minus the baseline's.
        ci_low, ci_high: the interval of the difference.
        confidence: of the interval (0.95).
        mcnemar_p: exact two-sided McNemar p-value (1.0 when no row is discordant).
        margin: the non-inferiority margin, in accuracy (0.01 by default).
        verdict: NON_INFERIOR, INFERIOR or INCONCLUSIVE; None without a baseline.
        method: how the figures were computed, in words, for the card.
    """

    baselines: list[BaselineRecord]
    n: int
    both_correct: int
    module_only: int
    baseline_only: int
    both_wrong: int
    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    mcnemar_p: float
    margin: float
    verdict: Verdict | None
    method: str
    # CoLA (from schema 4 on): the MCC difference with its paired bootstrap interval; None otherwise.
    mcc_difference: MccDifference | None = None
