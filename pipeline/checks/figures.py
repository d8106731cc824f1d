"""What results.json's figures must agree on, before any of them is shown or trusted.

- [`recorded_figure_problems`] (the `figures` check of [`pipeline.checks.registry`]): the verification is
  recomputed from the recorded class counts, correct rows and parameter counts (p0, SE, threshold, p-value,
  Wilson interval, status, reasons), and the metrics from the recorded confusion matrix. A recorded figure is
  never taken on trust: the status gate uses the recomputed status.
- [`stock_load_problems`] (the `stock load record` check): the record of the adapter loaded by stock tools
  (peft on the base model, with the model's own attention) agrees with itself and the run's module.
- [`Figure`] and [`figures`]: a figure as recorded and as recomputed, the pair every recomputation compares
  (from the counts here, from predictions.csv in [`pipeline.checks.reverification`], from the model in
  [`pipeline.verify.reverify`]).

Imports no torch, transformers or peft: `attncard verify --predictions` runs without them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..record.errors import IntegrityError
from ..record.manifest import RESULTS_FILE
from ..record.results import OFFICIAL_METRIC_SCHEMA, Metrics, Results, SplitResult, Verification, training_log
from ..record.text import SHA_PREFIX
from ..scoring.gate import all_finite, both_gates, verification_from_counts
from ..scoring.metrics import BOOTSTRAP_RESAMPLES, get_official_metric, label_metrics
from ..scoring.paired import DEFAULT_CONFIDENCE, comparison_problems
from ..scoring.tasks import TASKS
from ..scoring.tolerances import difference_note, same_figure, tolerance_of

# More rows than any GLUE validation split has by far: a larger count is a forged record, not a run.
MAX_ROWS = 10_000_000


@dataclasses.dataclass(frozen=True)
class Figure:
    """One figure of a run, as recorded and as recomputed.

    Attributes:
        name: where it is in results.json, e.g. `verification.p_value`, `metrics.per_class[0].f1`; it names
            the figure's tolerance in [`pipeline.scoring.tolerances.FIGURE_TOLERANCES`].
        recorded: the value results.json holds.
        recomputed: the value computed again.
    """

    name: str
    recorded: Any
    recomputed: Any

    @property
    def rel_tol(self) -> float:
        """How far, relatively, a recomputed float may be from the recorded one: 0, bit for bit, for every
        figure [`pipeline.scoring.tolerances.FIGURE_TOLERANCES`] does not name."""
        return tolerance_of(self.name).rtol

    def equal(self) -> bool:
        """Whether the two agree ([`pipeline.scoring.tolerances.same_figure`]): floats within what another
        honest environment can give, everything else exactly."""
        return same_figure(self.name, self.recorded, self.recomputed)

    def problem(self) -> str:
        """The figure as a problem message names it: recorded, recomputed, and for floats by how much they
        differ and whether another environment could give that."""
        note = difference_note(self.name, self.recorded, self.recomputed)
        return f"{self.name} is {self.recorded!r} but {self.recomputed!r} when recomputed" + (
            f" ({note})" if note else ""
        )


def figures(prefix: str, recorded: Any, recomputed: Any) -> list[Figure]:
    """Pairs every leaf of two records of the same type (dataclasses, lists, dicts), by its path. A field of
    a dataclass whose default is None and that is None on both sides is no figure (a record the run's
    schema or task does not have, such as the official metric before schema 4) and is left out.

    Example:
        >>> [f.name for f in figures("m", {"a": 1, "b": [2.0]}, {"a": 1, "b": [2.5]})]
        ['m.a', 'm.b[0]']
    """
    if dataclasses.is_dataclass(recorded) and dataclasses.is_dataclass(recomputed):
        return [
            pair
            for f in dataclasses.fields(recorded)
            if f.default is not None
            or getattr(recorded, f.name) is not None
            or getattr(recomputed, f.name) is not None
            for pair in figures(f"{prefix}.{f.name}", getattr(recorded, f.name), getattr(recomputed, f.name))
        ]
    if isinstance(recorded, list) and isinstance(recomputed, list) and len(recorded) == len(recomputed):
        return [
            pair
            for i, (old, new) in enumerate(zip(recorded, recomputed, strict=True))
            for pair in figures(f"{prefix}[{i}]", old, new)
        ]
    if isinstance(recorded, dict) and isinstance(recomputed, dict) and list(recorded) == list(recomputed):
        return [
            pair for key in recorded for pair in figures(f"{prefix}.{key}", recorded[key], recomputed[key])
        ]
    if hasattr(recorded, "value") and hasattr(recomputed, "value"):  # Status
        return [Figure(prefix, recorded.value, recomputed.value)]
    return [Figure(prefix, recorded, recomputed)]


def metrics_figures(recorded: Metrics, recomputed: Metrics, prefix: str = "metrics") -> list[Figure]:
    """Every quality figure of a run, recorded against recomputed ([`figures`]): bit for bit, but the loss
    within [`pipeline.scoring.metrics.LOSS_REL_TOL`] (it may have been recorded in float32), as
    [`pipeline.scoring.tolerances.FIGURE_TOLERANCES`] has it.

    Example:
        >>> [f.rel_tol for f in metrics_figures(results.metrics, results.metrics) if f.name == "metrics.loss"]
        [1e-06]
    """
    return figures(prefix, recorded, recomputed)


def evaluated_figures(
    record: Results | SplitResult, metrics: Metrics, verification: Verification
) -> list[Figure]:
    """An evaluated split's recorded metrics and verification (the run's, or its second split's, named
    `second_split.…`) against the same figures recomputed ([`metrics_figures`], [`figures`]).

    Example:
        >>> [f.name for f in evaluated_figures(results, results.metrics, results.verification)][:2]
        ['metrics.accuracy', 'metrics.f1_macro']
    """
    prefix = "second_split." if isinstance(record, SplitResult) else ""
    return [
        *metrics_figures(record.metrics, metrics, f"{prefix}metrics"),
        *figures(f"{prefix}verification", record.verification, verification),
    ]


def recomputed_verification(results: Results, split: SplitResult | None = None) -> Verification:
    """The verification computed again from results.json's class counts, correct rows and parameter counts:
    the run's (both gates, [`pipeline.scoring.gate.both_gates`], when its task has a second evaluated split),
    or, given `split`, that split's own.

    Raises:
        [`IntegrityError`]: the counts are impossible (labels that are not the task's, more correct rows
        than rows, no parameters).
    """
    labels = list(results.dataset.label_names)
    recorded, metrics = (split or results).verification, (split or results).metrics
    where = f"{'second_split.' if split else ''}verification"
    if list(recorded.class_counts) != labels:
        raise IntegrityError(
            f"{RESULTS_FILE}: {where}.class_counts names {list(recorded.class_counts)}, the labels are "
            f"{labels}"
        )
    parameters = results.parameters
    if parameters.after < 1 or parameters.before < 1:
        raise IntegrityError(
            f"{RESULTS_FILE}: parameters before/after {parameters.before}/{parameters.after}"
        )
    finite = all_finite(dataclasses.asdict(metrics)) and all_finite(dataclasses.asdict(results.efficiency))
    try:
        verification = verification_from_counts(
            [recorded.class_counts[name] for name in labels],
            recorded.correct,
            labels,
            parameters.before / parameters.after,
            finite,
        )
    except ValueError as error:
        raise IntegrityError(f"{RESULTS_FILE}: {where}: {error}") from None
    if split is not None or results.second_split is None:
        return verification
    second = results.second_split
    return both_gates(verification, recomputed_verification(results, second), second.split)


def official_metric_of(results: Results) -> tuple[str | None, int]:
    """The official metric a run must record, as [`pipeline.scoring.metrics.label_metrics`] takes it: its
    task's (`TaskSpec.official_metric` and `positive_label`) from schema 4 on, None in earlier schemas. The
    task's, never the one results.json names, so a run that names another metric is caught recomputing it.

    Example:
        >>> official_metric_of(Results.load("runs/tiny-gpt2-none-sst2"))
        ('accuracy', 1)
    """
    if results.schema_version < OFFICIAL_METRIC_SCHEMA:
        return None, 1
    if results.dataset.task not in TASKS:
        raise IntegrityError(
            f"{RESULTS_FILE}: dataset.task is {results.dataset.task!r}, which is no GLUE task this attncard "
            "knows"
        )
    spec = TASKS[results.dataset.task]
    return spec.official_metric, spec.positive_label


def metrics_from_confusion(results: Results, split: SplitResult | None = None) -> Metrics:
    """The label metrics computed again from the recorded confusion matrix (its rows are the true labels): the
    run's, or, given `split`, that evaluated split's.

    The loss and the predictions hash need the predictions themselves; they are carried over as recorded
    (`attncard verify` recomputes them from the model).
    """
    labels = list(results.dataset.label_names)
    recorded, verification = (split or results).metrics, (split or results).verification
    prefix = "second_split." if split else ""
    matrix = recorded.confusion_matrix
    size = len(labels)
    if len(matrix) != size or any(len(row) != size or min(row) < 0 for row in matrix):
        raise IntegrityError(
            f"{RESULTS_FILE}: {prefix}metrics.confusion_matrix is not a {size}×{size} table of counts"
        )
    total = sum(map(sum, matrix))
    if not 0 < total <= MAX_ROWS or total != verification.n:
        raise IntegrityError(
            f"{RESULTS_FILE}: {prefix}metrics.confusion_matrix counts {total} rows, {prefix}verification.n "
            f"is {verification.n}"
        )
    y_true = [t for t in range(size) for p in range(size) for _ in range(matrix[t][p])]
    y_pred = [p for t in range(size) for p in range(size) for _ in range(matrix[t][p])]
    metrics = label_metrics(y_true, y_pred, labels, *official_metric_of(results))
    return dataclasses.replace(metrics, loss=recorded.loss, predictions_sha256=recorded.predictions_sha256)


def recorded_figure_problems(results: Results) -> list[str]:
    """Every way results.json's verification and metrics disagree with the same figures recomputed from its
    counts; empty when they agree.

    Example:
        >>> recorded_figure_problems(Results.load("runs/tiny-gpt2-none-sst2"))
        []
    """
    recorded = results.verification
    problems = [
        figure.problem()
        for figure in [
            *figures("verification", recorded, recomputed_verification(results)),
            *figures("metrics", results.metrics, metrics_from_confusion(results)),
            Figure(
                "metrics.accuracy (against verification.accuracy)",
                results.metrics.accuracy,
                recorded.accuracy,
            ),
            Figure(
                "parameters.compression_factor",
                results.parameters.compression_factor,
                results.parameters.before / results.parameters.after,
            ),
            Figure("dataset.validation_rows", results.dataset.validation_rows, recorded.n),
            *figures("training.log", results.training.log, training_log(results.training.losses)),
            *_statistics_figures(results),
        ]
        if not figure.equal()
    ]
    problems += second_split_problems(results)
    # The paired verdict against the dense model is recomputed from its counts (pipeline.scoring.paired).
    problems += [f"comparison: {problem}" for problem in comparison_problems(results)]
    problems += mcc_difference_problems(results)
    # The status first: it is what a forger is after.
    return sorted(problems, key=lambda problem: not problem.startswith("verification.status "))


def second_split_problems(results: Results) -> list[str]:
    """Every way results.json's second evaluated split (MNLI's mismatched) disagrees with its task or with
    its own figures recomputed from its counts; empty when it agrees, or when the task has one split."""
    recorded = results.second_split
    expected = TASKS[results.dataset.task].second_split if results.dataset.task in TASKS else ""
    if results.schema_version < OFFICIAL_METRIC_SCHEMA:
        expected = ""  # schema 3 evaluated the first split alone
    if (recorded.split if recorded is not None else "") != expected:
        shown = recorded.split if recorded is not None else None
        return [
            f"second_split is {shown!r}, but the task {results.dataset.task} evaluates {expected or 'none'}"
        ]
    if recorded is None:
        return []
    return [
        figure.problem()
        for figure in [
            *figures(
                "second_split.verification", recorded.verification, recomputed_verification(results, recorded)
            ),
            *figures("second_split.metrics", recorded.metrics, metrics_from_confusion(results, recorded)),
            Figure(
                "second_split.metrics.accuracy (against its verification.accuracy)",
                recorded.metrics.accuracy,
                recorded.verification.accuracy,
            ),
        ]
        if not figure.equal()
    ]


def mcc_difference_problems(results: Results) -> list[str]:
    """Every way results.json's MCC difference (`comparison.mcc_difference`) is not what a CoLA run records:
    missing from a run whose official metric is MCC and that has a dense baseline, present in any other run,
    or resampled with another seed (the run's training seed), count (`BOOTSTRAP_RESAMPLES`) or confidence
    (`DEFAULT_CONFIDENCE`: publish has one of each). The figures themselves need both runs' predictions:
    `attncard verify --predictions` recomputes them.

    Example:
        >>> mcc_difference_problems(Results.load("runs/tiny-gpt2-none-sst2"))
        []
    """
    comparison, official = results.comparison, results.metrics.official
    recorded = comparison.mcc_difference if comparison is not None else None
    wanted = (
        comparison is not None
        and bool(comparison.baselines)
        and official is not None
        and get_official_metric(official.name).records_mcc_difference
    )
    if recorded is None:
        missing = "comparison.mcc_difference is missing: a run scored by MCC records it against its dense run"
        return [missing] if wanted else []
    if not wanted:
        return [
            "comparison.mcc_difference is recorded, but only a run scored by MCC with a dense run has one"
        ]
    expected = {
        "seed": results.training.hyperparameters.seed,
        "resamples": BOOTSTRAP_RESAMPLES,
        "confidence": DEFAULT_CONFIDENCE,
    }
    problems = [
        f"comparison.mcc_difference.{name} is {getattr(recorded, name)!r}, not {value!r}"
        for name, value in expected.items()
        if getattr(recorded, name) != value
    ]
    if not -2 <= recorded.ci_low <= recorded.ci_high <= 2 or not -2 <= recorded.difference <= 2:
        problems.append(
            f"comparison.mcc_difference is {recorded.difference!r} in [{recorded.ci_low!r}, "
            f"{recorded.ci_high!r}]: no difference of two correlations and its interval"
        )
    return problems


def _statistics_figures(results: Results) -> list[Figure]:
    """The dataset statistics against the figures they must agree with: rows of each split, and the evaluated
    split's rows per label against the verification's class counts."""
    statistics = results.dataset.statistics
    pairs = []
    splits = (("train", results.dataset.train_rows), (results.dataset.split, results.verification.n))
    for split, rows in splits:
        if split in statistics:
            pairs.append(Figure(f"dataset.statistics.{split}.rows", statistics[split].rows, rows))
    if results.dataset.split in statistics:
        pairs += figures(
            f"dataset.statistics.{results.dataset.split}.label_counts",
            statistics[results.dataset.split].label_counts,
            results.verification.class_counts,
        )
    return pairs


def stock_load_problems(results: Results, changes_attention: bool) -> list[str]:
    """Every way results.json's stock-loader record (`stock`) contradicts itself or the run's module; empty
    when it agrees, or when the run records none (written before it was measured).

    Args:
        results: the run.
        changes_attention: whether the run's module changes attention
            (`AttentionModule.claims.changes_attention`): only then is the stock model another model, and
            measured.

    Example:
        >>> results = Results.load("runs/tiny-gpt2-none-sst2")  # `none`: stock tools build the same model
        >>> stock_load_problems(results, changes_attention=False)
        []
        >>> stock_load_problems(results, changes_attention=True)
        ["stock.same_model is True but the module 'none' changes attention"]
    """
    stock_load = results.stock
    if stock_load is None:
        return []
    problems = []
    if stock_load.same_model == changes_attention:
        what = "changes attention" if changes_attention else "keeps the model's own attention"
        problems.append(
            f"stock.same_model is {stock_load.same_model!r} but the module '{results.module.name}' {what}"
        )
    measured = not stock_load.same_model and not stock_load.error
    if (stock_load.accuracy is not None) != measured or bool(stock_load.predictions_sha256) != measured:
        recorded = (
            f"{stock_load.accuracy!r} with predictions_sha256 {stock_load.predictions_sha256[:SHA_PREFIX]!r}"
        )
        expected = "a stock load that ran has both" if measured else "nothing was measured"
        problems.append(f"stock.accuracy is {recorded}, but {expected}")
    n = results.verification.n
    share = stock_load.accuracy
    if share is not None and not (0 <= share <= 1 and n > 0 and round(share * n) / n == share):
        problems.append(f"stock.accuracy is {stock_load.accuracy!r}, which is no share of {n} rows")
    if not 0 <= stock_load.ignored_weights <= stock_load.adapter_weights:
        problems.append(
            f"stock.ignored_weights is {stock_load.ignored_weights} of {stock_load.adapter_weights} adapter "
            "weights"
        )
    return problems


__all__ = [
    "Figure",
    "evaluated_figures",
    "figures",
    "mcc_difference_problems",
    "metrics_figures",
    "metrics_from_confusion",
    "official_metric_of",
    "recomputed_verification",
    "recorded_figure_problems",
    "second_split_problems",
    "stock_load_problems",
]
