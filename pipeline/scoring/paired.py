"""The paired verdict: does a module run keep the accuracy of its dense baseline, on the same rows?

The dense baseline of a module run is the run of the module `none` with the same base model (id and
revision), task, data (dataset, revision, split, files, rows, labels), seed and training settings: the two
differ only in the attention module. Both classify the same evaluated rows, so each row is counted by which
of the two get it right (see [`Comparison`]):

- the accuracy difference (module − baseline) is the mean of the per-row differences of correctness, +1
  where only the module is right, −1 where only the baseline is, 0 elsewhere; its interval is the normal
  interval of that mean, with the sample standard deviation (n − 1);
- McNemar's exact two-sided test: do the discordant rows (one run right, the other wrong) split between the
  two runs as a fair coin would (scipy's `binomtest` at p = ½)?
- the verdict compares the interval with −margin (`DEFAULT_MARGIN`, one accuracy point): NON_INFERIOR when
  its lower end is above, INFERIOR when its upper end is below, INCONCLUSIVE when it straddles it.

The status of a run (PASS / PASS_NO_COMPRESSION / FAIL, see [`pipeline.scoring.gate`]) is not touched by this.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from pathlib import Path

from ..record.comparison import BaselineRecord, Comparison, Verdict
from ..record.errors import AttncardError, ResultsError
from ..record.manifest import RESULTS_FILE, sha256_file
from ..record.results import Results, TrainConfig
from .tolerances import difference_note, same_figure

DEFAULT_MARGIN = 0.01  # one accuracy point
# The confidence of every interval publish records (the paired comparison's and the MCC bootstrap's): publish
# has no option for it, so a run recording another was derived again by someone else, e.g. at 0.5 for a
# narrower interval and an easier verdict; `comparison_problems` refuses it.
DEFAULT_CONFIDENCE = 0.95
# The module whose runs are the dense baselines.
DENSE_MODULE = "none"
# The counts of a comparison, in the order `comparison_from_counts` takes them.
COUNT_FIELDS = ("both_correct", "module_only", "baseline_only", "both_wrong")
# What the card shows of a baseline must be what it claims: a sha256, a Hub repository name or id.
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_REPO_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_REPO_ID_RE = re.compile(rf"{_REPO_NAME_RE.pattern}/{_REPO_NAME_RE.pattern}")


class ComparisonError(AttncardError, ValueError):
    """A paired comparison that cannot be computed: predictions of different lengths, impossible counts, a
    margin or confidence outside (0, 1), counts without a baseline."""


def comparison_from_counts(
    both_correct: int,
    module_only: int,
    baseline_only: int,
    both_wrong: int,
    *,
    baselines: list[BaselineRecord],
    margin: float = DEFAULT_MARGIN,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Comparison:
    """Every figure of the paired comparison, from the rows counted by which run classifies them correctly.

    The one place the comparison is computed: [`paired_comparison`] uses it on fresh predictions, a check of
    a published run recomputes the recorded figures from the recorded counts with it, and a summary pools
    seeds with it. Pooling over seeds is summing the counts of each seed (each seed's rows are rows of the
    pooled comparison, n = rows × seeds), with the baselines of every seed in `baselines`: the same as
    counting the concatenated predictions of all seeds.

    Args:
        both_correct: rows both runs classify correctly.
        module_only: rows only the module run classifies correctly.
        baseline_only: rows only the dense baseline classifies correctly.
        both_wrong: rows neither classifies correctly.
        baselines: the dense runs compared with, one per seed pooled; at least one (without a baseline the
            comparison is [`no_baseline`]).
        margin: the non-inferiority margin, in accuracy (0.01 = one point), in (0, 1).
        confidence: of the interval of the difference, in (0, 1).

    Returns:
        A [`Comparison`].

    Raises:
        [`ComparisonError`]: a negative count, fewer than 2 rows (no sample standard deviation), no baseline,
        or a margin or confidence outside (0, 1).

    Example:
        >>> dense = baseline_record(Path("runs/tiny-gpt2-none-sst2"), results)
        >>> comparison = comparison_from_counts(700, 10, 13, 149, baselines=[dense])
        >>> comparison.n, round(comparison.difference, 5), comparison.verdict
        (872, -0.00344, <Verdict.INCONCLUSIVE: 'INCONCLUSIVE'>)
        >>> round(comparison.ci_low, 5), round(comparison.ci_high, 5), round(comparison.mcnemar_p, 4)
        (-0.01422, 0.00734, 0.6776)
    """
    counts = (both_correct, module_only, baseline_only, both_wrong)
    n = sum(counts)
    if min(counts) < 0 or n < 2:
        raise ComparisonError(
            f"the counts {list(counts)} (both correct, module only, baseline only, both wrong) are not the "
            "rows of a comparison: counts cannot be negative, and the interval needs at least 2 rows"
        )
    if not baselines:
        raise ComparisonError(
            "counts of a comparison without a baseline: give the dense run(s) compared with, or use "
            "no_baseline() when none was found"
        )
    _check_fraction("margin", margin)
    _check_fraction("confidence", confidence)
    from scipy.stats import binomtest, norm  # here, not at the top: `publish --help` reads DEFAULT_MARGIN

    # The per-row differences: module_only rows are +1, baseline_only rows −1, the others 0.
    difference = (module_only - baseline_only) / n
    variance = max(0.0, (module_only + baseline_only - n * difference**2) / (n - 1))
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    half_width = z * math.sqrt(variance / n)
    ci_low, ci_high = difference - half_width, difference + half_width
    discordant = module_only + baseline_only
    mcnemar_p = float(binomtest(module_only, discordant, 0.5).pvalue) if discordant else 1.0
    verdict = verdict_of(ci_low, ci_high, margin)
    return Comparison(
        baselines=list(baselines),
        n=n,
        both_correct=both_correct,
        module_only=module_only,
        baseline_only=baseline_only,
        both_wrong=both_wrong,
        difference=difference,
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=confidence,
        mcnemar_p=mcnemar_p,
        margin=margin,
        verdict=verdict,
        method=_method(n, discordant, len(baselines), margin, confidence, z),
    )


def verdict_of(ci_low: float, ci_high: float, margin: float) -> Verdict:
    """The verdict an interval of the accuracy difference gives at a non-inferiority margin: NON_INFERIOR when
    its lower end is above −margin, INFERIOR when its upper end is below it, INCONCLUSIVE otherwise.

    Example:
        >>> [verdict_of(low, high, 0.01).value for low, high in [(-0.008, 0.04), (-0.03, -0.02), (-0.03, 0)]]
        ['NON_INFERIOR', 'INFERIOR', 'INCONCLUSIVE']
    """
    if ci_low > -margin:
        return Verdict.NON_INFERIOR
    if ci_high < -margin:
        return Verdict.INFERIOR
    return Verdict.INCONCLUSIVE


def _check_fraction(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and 0 < value < 1):
        raise ComparisonError(f"the {name} is {value!r}; give a share between 0 and 1 (0.01 = one point)")


def _points(share: float) -> str:
    """A share in accuracy points, as the card writes a margin: `1.0 point`, `0.5 points`."""
    points = 100 * share
    return f"{points:.1f} point{'' if points == 1 else 's'}"


def _method(n: int, discordant: int, seeds: int, margin: float, confidence: float, z: float) -> str:
    """How the figures of a comparison were computed, in one paragraph for the card."""
    pooled = (
        f" The counts of {seeds} seeds are summed: each seed's rows count, each against its own seed's "
        "dense run."
        if seeds > 1
        else ""
    )
    return (
        f"Each of the {n} rows is counted by which of the two runs classify it correctly. The accuracy "
        "difference (module − dense) is the mean of the per-row differences of correctness (+1 where only "
        "the module is right, −1 where only the dense model is, 0 elsewhere); its "
        f"{100 * confidence:g}% interval is the normal interval of that mean, with the sample standard "
        f"deviation (n − 1) and z = {z:.4f}. The p-value is McNemar's exact two-sided test on the "
        f"{discordant} rows where the two disagree (binomial, p = 1/2). The module is non-inferior when the "
        f"interval's lower end is above −{_points(margin)}, inferior when its upper end is below it, and "
        f"the comparison inconclusive otherwise.{pooled}"
    )


def paired_comparison(
    labels: list[int],
    predictions: list[int],
    baseline_predictions: list[int],
    *,
    baselines: list[BaselineRecord],
    margin: float = DEFAULT_MARGIN,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Comparison:
    """The paired comparison of a module run's predictions with its dense baseline's, on the same rows.

    Args:
        labels: the gold label id of each evaluated row, in split order.
        predictions: the module run's predicted label ids, in the same order.
        baseline_predictions: the dense baseline's predicted label ids, in the same order.
        baselines: the dense run(s) the baseline predictions are from (one per seed pooled; see
            [`comparison_from_counts`]).
        margin: the non-inferiority margin, in accuracy.
        confidence: of the interval of the difference.

    Returns:
        A [`Comparison`].

    Raises:
        [`ComparisonError`]: the three lists differ in length, or [`comparison_from_counts`] refuses.

    Example:
        >>> dense = baseline_record(Path("runs/tiny-gpt2-none-sst2"), results)
        >>> comparison = paired_comparison([0, 1, 1, 0], [0, 1, 0, 1], [0, 0, 1, 1], baselines=[dense])
        >>> comparison.both_correct, comparison.module_only, comparison.baseline_only, comparison.both_wrong
        (1, 1, 1, 1)
        >>> paired_comparison([0, 1], [0, 1, 1], [0, 1], baselines=[dense])
        Traceback (most recent call last):
        ...
        attncard.pipeline.scoring.paired.ComparisonError: 2 labels, 3 predictions and 2 baseline predictions:
        ...
    """
    if not len(labels) == len(predictions) == len(baseline_predictions):
        raise ComparisonError(
            f"{len(labels)} labels, {len(predictions)} predictions and {len(baseline_predictions)} baseline "
            "predictions: a paired comparison needs both runs' predictions of the same evaluated rows"
        )
    counts = [0, 0, 0, 0]  # both correct, module only, baseline only, both wrong
    for label, module, dense in zip(labels, predictions, baseline_predictions, strict=True):
        counts[2 * (module != label) + (dense != label)] += 1
    return comparison_from_counts(*counts, baselines=baselines, margin=margin, confidence=confidence)


def no_baseline(margin: float = DEFAULT_MARGIN) -> Comparison:
    """The comparison of a module run for which no dense baseline of the same setup was found: no baseline,
    no rows, no verdict.

    Example:
        >>> comparison = no_baseline()
        >>> comparison.baselines, comparison.n, comparison.verdict
        ([], 0, None)
    """
    _check_fraction("margin", margin)
    return Comparison(
        baselines=[],
        n=0,
        both_correct=0,
        module_only=0,
        baseline_only=0,
        both_wrong=0,
        difference=0.0,
        ci_low=0.0,
        ci_high=0.0,
        confidence=DEFAULT_CONFIDENCE,
        mcnemar_p=1.0,
        margin=margin,
        verdict=None,
        method=(
            "No dense baseline was found: no run of the module none with the same base model and revision, "
            "task, data, seed and training settings, so nothing was compared."
        ),
    )


def pool_comparisons(comparisons: list[Comparison]) -> Comparison:
    """The comparison pooled over seeds: the counts of each seed summed, the baselines of all seeds listed,
    at the margin and confidence they share (see [`comparison_from_counts`]).

    Raises:
        [`ComparisonError`]: nothing to pool, a comparison without a baseline, or comparisons at different
        margins or confidences.

    Example:
        >>> dense = baseline_record(Path("runs/tiny-gpt2-none-sst2"), results)
        >>> seeds = [comparison_from_counts(30, 2, 1, 7, baselines=[dense]) for _ in range(2)]
        >>> pooled = pool_comparisons(seeds)
        >>> pooled.n, pooled.module_only, len(pooled.baselines)
        (80, 4, 2)
    """
    if not comparisons or any(not comparison.baselines for comparison in comparisons):
        raise ComparisonError(
            "pooling needs the comparison of every seed, each with its baseline; a seed without a dense "
            "baseline cannot be pooled"
        )
    settings = {(comparison.margin, comparison.confidence) for comparison in comparisons}
    if len(settings) > 1:
        raise ComparisonError(
            f"the comparisons have different margins and confidences {sorted(settings)}; pool comparisons "
            "made at the same ones"
        )
    ((margin, confidence),) = settings
    return comparison_from_counts(
        sum(comparison.both_correct for comparison in comparisons),
        sum(comparison.module_only for comparison in comparisons),
        sum(comparison.baseline_only for comparison in comparisons),
        sum(comparison.both_wrong for comparison in comparisons),
        baselines=[baseline for comparison in comparisons for baseline in comparison.baselines],
        margin=margin,
        confidence=confidence,
    )


# --- finding the baseline ----------------------------------------------------------------------------------


def setup_differences(run: Results, baseline: Results) -> list[str]:
    """Why `baseline` is not the dense baseline of `run`: each way it is not a run of `none`, or differs from
    `run` in base model, data or training settings; empty when it is the baseline.

    Compared: the module (must be `none`), the base model's id and revision, the task, the dataset's id,
    config, revision, evaluated split, files, rows and label names, and every training hyperparameter (seed,
    steps, batch size, learning rate, max length, LoRA and optimiser settings).

    Example:
        >>> dense = Results.load("runs/tiny-gpt2-none-sst2")
        >>> setup_differences(dense, dense)
        []
        >>> other = Results.load("runs/tiny-gpt2-none-sst2")
        >>> other.module.name, other.training.hyperparameters.seed = "sliding_window", 1
        >>> setup_differences(dense, other)
        ["its module is 'sliding_window', not 'none'", 'training.hyperparameters.seed is 1, the run has 0']
    """
    differences = []
    if baseline.module.name != DENSE_MODULE:
        differences.append(f"its module is '{baseline.module.name}', not '{DENSE_MODULE}'")
    ours, theirs = run.training.hyperparameters, baseline.training.hyperparameters
    pairs = [
        ("model.model_id", run.model.model_id, baseline.model.model_id),
        ("model.revision", run.model.revision, baseline.model.revision),
        ("dataset.task", run.dataset.task, baseline.dataset.task),
        ("dataset.dataset_id", run.dataset.dataset_id, baseline.dataset.dataset_id),
        ("dataset.config", run.dataset.config, baseline.dataset.config),
        ("dataset.revision", run.dataset.revision, baseline.dataset.revision),
        ("dataset.split", run.dataset.split, baseline.dataset.split),
        ("dataset.files", run.dataset.files, baseline.dataset.files),
        ("dataset.validation_rows", run.dataset.validation_rows, baseline.dataset.validation_rows),
        ("dataset.label_names", run.dataset.label_names, baseline.dataset.label_names),
        *(
            (f"training.hyperparameters.{f.name}", getattr(ours, f.name), getattr(theirs, f.name))
            for f in fields(TrainConfig)
        ),
    ]
    differences += [f"{name} is {other!r}, the run has {own!r}" for name, own, other in pairs if own != other]
    return differences


def find_baseline(run: Results, folders: list[Path]) -> Path | None:
    """The run folder among `folders` that holds the dense baseline of `run` ([`setup_differences`] empty).

    A folder without a readable results.json is skipped. When several are baselines of `run` (re-runs of
    the same setup), the one named like the run with `none` in place of its module is taken, else the first
    by name. A run of `none` is itself the baseline and has none.

    Args:
        run: the module run.
        folders: the candidate run folders, e.g. every folder of `runs/`.

    Returns:
        The baseline's folder, or None when no folder holds one.

    Example:
        >>> run = Results.load("runs/tiny-gpt2-none-sst2")
        >>> run.module.name, run.repo_name = "sliding_window", "tiny-gpt2-sliding_window-sst2"
        >>> find_baseline(run, sorted(Path("runs").iterdir()))
        PosixPath('runs/tiny-gpt2-none-sst2')
        >>> run.training.hyperparameters.seed = 1
        >>> print(find_baseline(run, sorted(Path("runs").iterdir())))
        None
    """
    if run.module.name == DENSE_MODULE:
        return None
    matches = []
    for folder in sorted(map(Path, folders), key=lambda path: path.name):
        try:
            candidate = Results.load(folder / RESULTS_FILE)
        except (ResultsError, OSError):
            continue
        if not setup_differences(run, candidate):
            matches.append(folder)
    named = baseline_name(run.repo_name, run.module.name)
    return next((folder for folder in matches if folder.name == named), matches[0] if matches else None)


def baseline_name(repo_name: str, module: str) -> str:
    """The name a run's dense baseline has when the runs are named alike (`<model>-<module>-<task>…`, see
    [`default_repo_name`]): `none` in place of the module's last hyphen-separated occurrence, since a model
    name may hold the module's name but the task after it cannot; the name unchanged when it holds none.

    Example:
        >>> baseline_name("minilm-sliding_window-sst2-seed0", "sliding_window")
        'minilm-none-sst2-seed0'
    """
    occurrences = list(re.finditer(rf"(?<![^-]){re.escape(module)}(?![^-])", repo_name))
    if not occurrences:
        return repo_name
    last = occurrences[-1]
    return repo_name[: last.start()] + DENSE_MODULE + repo_name[last.end() :]


def baseline_record(folder: Path, results: Results) -> BaselineRecord:
    """The record of a dense baseline, for a [`Comparison`]: its name, repository, results.json sha256,
    predictions hash, accuracy and seed.

    Args:
        folder: its run folder (its results.json is hashed).
        results: its results, as loaded from that folder.

    Example:
        >>> record = baseline_record(Path("runs/tiny-gpt2-none-sst2"), results)
        >>> record.repo_name, record.seed, record.accuracy == results.metrics.accuracy
        ('tiny-gpt2-none-sst2', 0, True)
    """
    return BaselineRecord(
        repo_name=results.repo_name,
        repo_id=results.repo_id,
        results_sha256=sha256_file(Path(folder) / RESULTS_FILE),
        predictions_sha256=results.metrics.predictions_sha256,
        accuracy=results.metrics.accuracy,
        seed=results.training.hyperparameters.seed,
    )


# --- checking a recorded comparison ------------------------------------------------------------------------


def comparison_problems(results: Results) -> list[str]:
    """Every way results.json's recorded comparison contradicts itself or the run; empty when it agrees, or
    when the run records none (written before it was recorded).

    A figure that was not recomputed is not trusted: the counts must be counts of the run's rows (with one
    baseline: the run's rows, its correct rows, and the baseline's accuracy), and the difference, interval,
    McNemar p, verdict and method must be what [`comparison_from_counts`] makes of them. A run of `none` is
    the baseline, and must record no comparison.

    Example:
        >>> results = Results.load("runs/tiny-gpt2-none-sst2")  # `none`: the baseline itself
        >>> comparison_problems(results)
        []
        >>> results.comparison = no_baseline()
        >>> comparison_problems(results)
        ["comparison is recorded, but the module 'none' is the dense baseline and has none"]
    """
    comparison = results.comparison
    if comparison is None:
        return []
    if results.module.name == DENSE_MODULE:
        return [f"comparison is recorded, but the module '{DENSE_MODULE}' is the dense baseline and has none"]
    problems = []
    for name in ("margin", "confidence"):
        value = getattr(comparison, name)
        if not 0 < value < 1:
            problems.append(f"comparison.{name} is {value!r}, not a share between 0 and 1")
    counts = {name: getattr(comparison, name) for name in COUNT_FIELDS}
    negative = [name for name, count in counts.items() if count < 0]
    if negative:
        problems.append(f"comparison.{negative[0]} is {counts[negative[0]]}, a negative count of rows")
    if sum(counts.values()) != comparison.n:
        problems.append(f"comparison counts {sum(counts.values())} rows, comparison.n is {comparison.n}")
    if problems:
        return problems
    if not comparison.baselines:
        expected = no_baseline(comparison.margin)
    else:
        problems += _row_problems(results)
        try:
            expected = comparison_from_counts(
                *counts.values(),
                baselines=comparison.baselines,
                margin=comparison.margin,
                confidence=comparison.confidence,
            )
        except ComparisonError as error:
            return [*problems, f"comparison: {error}"]
    for f in fields(Comparison):
        # From both runs' predictions, not the counts (pipeline.checks.integrity).
        if f.name == "mcc_difference":
            continue
        recorded, recomputed = getattr(comparison, f.name), getattr(expected, f.name)
        if not same_figure(f"comparison.{f.name}", recorded, recomputed):
            shown = [value.value if isinstance(value, Verdict) else value for value in (recorded, recomputed)]
            note = difference_note(f"comparison.{f.name}", recorded, recomputed)
            problems.append(
                f"comparison.{f.name} is {shown[0]!r} but {shown[1]!r} when recomputed"
                + (f" ({note})" if note else "")
            )
    # The interval may differ from its recomputation in the last bits (another scipy's z), the verdict not at
    # all: the recorded interval must give the recorded verdict, so no difference the tolerance allows turns
    # an interval that crosses −margin into a verdict the counts do not give.
    if comparison.baselines and comparison.verdict == expected.verdict:
        given = verdict_of(comparison.ci_low, comparison.ci_high, comparison.margin)
        if given != comparison.verdict:
            problems.append(
                f"comparison.verdict is {comparison.verdict.value!r}, but the recorded interval "
                f"[{comparison.ci_low!r}, {comparison.ci_high!r}] at the margin {comparison.margin!r} gives "
                f"{given.value!r}"
            )
    # Recomputed at the recorded confidence, every figure may agree: the confidence itself is publish's.
    if comparison.confidence != DEFAULT_CONFIDENCE:
        problems.append(
            f"comparison.confidence is {comparison.confidence!r}, but publish derives every interval at "
            f"{DEFAULT_CONFIDENCE!r}"
        )
    # The verdict first: it is what a forger is after.
    return sorted(problems, key=lambda problem: not problem.startswith("comparison.verdict "))


def _row_problems(results: Results) -> list[str]:
    """The counts of a comparison against the run's rows and correct rows and its baselines' accuracies, and
    the baselines' records (hashes and names the card shows)."""
    comparison, verification = results.comparison, results.verification
    baselines, rows = comparison.baselines, verification.n
    problems = []
    if comparison.n != rows * len(baselines):
        problems.append(
            f"comparison.n is {comparison.n}, but {len(baselines)} baseline(s) of the run's {rows} rows make "
            f"{rows * len(baselines)}"
        )
    seeds = [baseline.seed for baseline in baselines]
    if len(set(seeds)) != len(seeds):
        problems.append(f"comparison.baselines has the seeds {seeds}; each seed is pooled once")
    baseline_correct, shares = 0, True
    for index, baseline in enumerate(baselines):
        where = f"comparison.baselines[{index}]"
        for name in ("results_sha256", "predictions_sha256"):
            if not _SHA256_RE.fullmatch(value := getattr(baseline, name)):
                problems.append(f"{where}.{name} is {value[:80]!r}, not a sha256 (64 lowercase hex digits)")
        if not _REPO_NAME_RE.fullmatch(baseline.repo_name) or not (
            baseline.repo_id is None or _REPO_ID_RE.fullmatch(baseline.repo_id)
        ):
            shown = baseline.repo_id if _REPO_NAME_RE.fullmatch(baseline.repo_name) else baseline.repo_name
            problems.append(f"{where} names the run {shown[:80]!r}, which is no Hub repository name")
        correct = baseline.accuracy * rows
        if not (0 <= baseline.accuracy <= 1 and math.isclose(correct, round(correct), abs_tol=1e-6)):
            problems.append(f"{where}.accuracy is {baseline.accuracy!r}, no share of the run's {rows} rows")
            shares = False
        baseline_correct += round(correct)
    counted = comparison.both_correct + comparison.baseline_only
    if shares and counted != baseline_correct:
        problems.append(
            f"comparison counts {counted} rows the dense run(s) get right, their accuracies of {rows} rows "
            f"make {baseline_correct}"
        )
    if len(baselines) != 1:
        return problems  # the module runs of the other seeds are not this run: their counts cannot be checked
    if baselines[0].seed != results.training.hyperparameters.seed:
        problems.append(
            f"comparison.baselines[0].seed is {baselines[0].seed}, the run's seed is "
            f"{results.training.hyperparameters.seed}"
        )
    module_correct = comparison.both_correct + comparison.module_only
    if module_correct != verification.correct:
        problems.append(
            f"comparison counts {module_correct} rows the module gets right, verification.correct is "
            f"{verification.correct}"
        )
    return problems


__all__ = [
    "COUNT_FIELDS",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_MARGIN",
    "DENSE_MODULE",
    "ComparisonError",
    "baseline_name",
    "baseline_record",
    "comparison_from_counts",
    "comparison_problems",
    "find_baseline",
    "no_baseline",
    "paired_comparison",
    "pool_comparisons",
    "setup_differences",
    "verdict_of",
]
