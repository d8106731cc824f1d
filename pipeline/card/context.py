"""The card's context: everything a card template shows, collected from results.json into one
[`CardContext`] by [`card_context`], and the sentences and tables of it that attncard builds in Python (the
status line, the paired verdict, the official metric, the stock load's agreement, the BibTeX).

The template sees the context's fields by name (`CardContext.template_variables`), results.json itself as
`r`. A card section that needs a figure not in results.json as the template can print it adds a field here,
built in `card_context`.

Example:
    >>> context = card_context(results)
    >>> context.task_title, context.template_variables()["r"] is results
    ('GLUE SST-2', True)
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

from ...modules import get_module
from ..record.citations import LORA_BIBTEX
from ..record.comparison import Comparison
from ..record.manifest import SECOND_PREDICTIONS_FILE
from ..record.results import Results, ScalingRow, SplitResult, Status, TrainConfig
from ..scoring import paired
from ..scoring.metrics import get_official_metric
from ..scoring.tasks import GLUE_BIBTEX, GLUE_CITATION, TASKS, title_of_task
from .formats import capitalize_first, distinct_percentages, num, p_value, pct, signed, signed_points
from .model_index import card_data, model_index_results
from .plots import LOSS_PLOT, SCALING_PLOT
from .snippet import card_usage_code, install_commands, usage_location, usage_where

# `official_figure` is kept as written (its branches on the metric's name are another change's), with the
# names it calls the formats by.
_pct, _num = pct, num


@dataclass(frozen=True)
class CardContext:
    """What the card template renders, all of it built from results.json (and the plots drawn from it).

    Attributes:
        results: the run's results.json, `r` in the template.
        usage_code: the usage snippet ([`snippet.card_usage_code`]); None when the run records none, or it
            cannot be built.
        command: the command that reproduces the run, as recorded (one of `snippet.reproduce_commands`, or
            the render is refused).
        front_matter: the YAML front matter ([`model_index.card_data`]).
        status_line: the sentence beside the status ([`status_line`]).
        comparison_line: the paired verdict against the dense baseline ([`comparison_line`]).
        official: the official GLUE metric of the evaluated split ([`official_figure`]); None before schema 4.
        second_official: the same of the second evaluated split (MNLI's mismatched); None for one split.
        second_predictions_file: the second split's predictions file ("" names no split).
        comparison: the counts and dense runs under the verdict, when the line gives one; None otherwise.
        task_title: the task as the card names it ("GLUE SST-2").
        task_citation: the task's citation; glue_citation: GLUE's.
        hyperparameters: `(name, value, help)` for every training setting.
        module_spec: the module's spec.md; module_source: its attention.py, as installed.
        module_plots, scaling_plots, loss_plots: the `{"file", "title"}` of each plot, by the section that
            shows it.
        install_commands: the install block ([`snippet.install_commands`]).
        usage_where: what the card says under the snippet ("" without one).
        rows_seen: how much of the training split the training saw ([`rows_seen`]).
        stock_agreement: the stock load against the run ([`stock_agreement`]); None when not shown.
        headline_scaling: the two scaling rows of the summary ([`headline_scaling`]).
        eval_lengths: the evaluated split's rows and token lengths; None when the run recorded none.
        bibtex: the card's BibTeX ([`bibtex`]).
        stat_scalars, stat_matrices, stat_other: the module's statistics ([`split_module_stats`]).
    """

    results: Results
    usage_code: str | None
    command: str
    front_matter: str
    status_line: str
    comparison_line: str
    official: OfficialFigure | None
    second_official: OfficialFigure | None
    second_predictions_file: str
    comparison: Comparison | None
    task_title: str
    task_citation: str
    glue_citation: str
    hyperparameters: list[tuple[str, object, str]]
    module_spec: str
    module_source: str
    module_plots: list[dict[str, str]]
    scaling_plots: list[dict[str, str]]
    loss_plots: list[dict[str, str]]
    install_commands: str
    usage_where: str
    rows_seen: str
    stock_agreement: StockAgreement | None
    headline_scaling: tuple[ScalingRow | None, ScalingRow | None]
    eval_lengths: dict[str, int | float] | None
    bibtex: str
    stat_scalars: list[tuple[str, str]]
    stat_matrices: list[tuple[str, list[list[str]]]]
    stat_other: list[tuple[str, str]]

    def template_variables(self) -> dict[str, object]:
        """The names the card template reads: every field by its name, `results` as `r`.

        Example:
            >>> variables = card_context(results).template_variables()
            >>> variables["r"] is results, "results" in variables, variables["task_title"]
            (True, False, 'GLUE SST-2')
        """
        variables = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        variables["r"] = variables.pop("results")
        return variables


def card_context(results: Results, plots: list[dict[str, str]] | None = None) -> CardContext:
    """Collects what the card of a run shows into one [`CardContext`].

    Args:
        results: the run's results; `results.manifest` lists the files the card's file table shows.
        plots: the `{"file", "title"}` of each plot drawn for the run (`plots.write_plots`); None for none.

    Returns:
        The context the card template renders.

    Raises:
        `ValueError`: a figure of the model-index is not finite.

    Example:
        >>> card_context(results).status_line
        'accuracy ... clears the threshold ...; the model is not compressed.'
    """
    index = [metric for _, metrics in model_index_results(results) for metric in metrics]
    if not all(math.isfinite(metric.value) for metric in index):
        raise ValueError("the metrics of the card's model-index must be finite to be written into it")
    config = results.training.hyperparameters
    hyperparameters = [
        (f.name, getattr(config, f.name), f.metadata["help"]) for f in dataclasses.fields(TrainConfig)
    ]
    module = get_module(results.module.name)
    stat_scalars, stat_matrices, stat_other = split_module_stats(results.module.stats)
    plots = plots or []
    return CardContext(
        results=results,
        usage_code=card_usage_code(results) if results.usage is not None else None,
        command=results.command,
        front_matter=card_data(results).to_yaml(),
        status_line=status_line(results),
        comparison_line=comparison_line(results),
        official=official_figure(results),
        second_official=official_figure(results, results.second_split),
        second_predictions_file=SECOND_PREDICTIONS_FILE.format(
            split=getattr(results.second_split, "split", "")
        ),
        # The counts and the dense runs, shown under the verdict when the line gives one.
        comparison=results.comparison if _has_verdict(results) else None,
        task_title=title_of_task(results.dataset.task),
        task_citation=TASKS[results.dataset.task].citation,
        glue_citation=GLUE_CITATION,
        hyperparameters=hyperparameters,
        module_spec=module.spec.strip(),
        module_source=(module.folder / "attention.py").read_text(encoding="utf-8").rstrip(),
        module_plots=[plot for plot in plots if plot["file"] not in (SCALING_PLOT, LOSS_PLOT)],
        scaling_plots=[plot for plot in plots if plot["file"] == SCALING_PLOT],
        loss_plots=[plot for plot in plots if plot["file"] == LOSS_PLOT],
        install_commands=install_commands(results),
        usage_where=usage_where(results, usage_location(results) or "") if results.usage is not None else "",
        rows_seen=rows_seen(results),
        stock_agreement=stock_agreement(results),
        headline_scaling=headline_scaling(results),
        # Token lengths of the evaluated split, for the limitations; absent from a run that recorded none.
        eval_lengths=(
            {"rows": stats.rows, **dataclasses.asdict(stats.tokens)}
            if (stats := results.dataset.statistics.get(results.dataset.split)) is not None
            else None
        ),
        bibtex=bibtex(results),
        stat_scalars=stat_scalars,
        stat_matrices=stat_matrices,
        stat_other=stat_other,
    )


@dataclass(frozen=True)
class OfficialFigure:
    """The task's official GLUE metric as the card shows it (schema 4).

    Attributes:
        label: its name in the results table ("Matthews correlation (MCC)").
        value: formatted as the table prints it (a correlation to 4 decimals, a share in percent).
        headline: the figures the card's first paragraph names, official metric first.
        note: the sentence beside the table: what GLUE reports for the task, and that the pass gate is on
            accuracy.
    """

    label: str
    value: str
    headline: str
    note: str


def official_figure(results: Results, split: SplitResult | None = None) -> OfficialFigure | None:
    """The official metric of a run as its card shows it (given `split`, of that second evaluated split);
    None before schema 4, which recorded none.

    Example:
        >>> official_figure(results).headline  # an SST-2 run
        'accuracy 87.50%'
    """
    metrics = (split or results).metrics
    official = metrics.official
    if official is None:
        return None
    task = title_of_task(results.dataset.task)
    accuracy = f"accuracy {_pct(metrics.accuracy)}"
    if split is None and (second := results.second_split) is not None:  # MNLI: both splits, by name
        accuracy = (
            f"accuracy {_pct(metrics.accuracy)} on {results.dataset.split} and "
            f"{_pct(second.metrics.accuracy)} on {second.split}"
        )
    gate = (
        "The pass gate ([Verification](#verification)) is on accuracy for every task: it must clear the "
        "majority-class share by three standard errors."
    )
    spec = get_official_metric(official.name)
    label = spec.card_label.format(positive=official.positive_label)
    value = _pct(official.value) if spec.percent else _num(official.value)
    reported = spec.reported.format(positive=official.positive_label)
    if spec.is_accuracy:  # the accuracy row itself: the headline names accuracy alone
        return OfficialFigure(label, value, accuracy, f"{task} is reported by {reported}. {gate}")
    return OfficialFigure(
        label,
        value,
        f"{label} {value} (the official metric of {task}), {accuracy}",
        f"{task} is reported by {reported}: the first row. {gate}",
    )


def status_line(results: Results) -> str:
    """One sentence under the title saying what the status means for this run."""
    v = results.verification
    line = {
        "PASS": f"accuracy {pct(v.accuracy)} clears the threshold {pct(v.threshold)} and the model is "
        f"compressed {num(v.compression_factor)}×.",
        "PASS_NO_COMPRESSION": f"accuracy {pct(v.accuracy)} clears the threshold {pct(v.threshold)}; the "
        "model is not compressed.",
        "FAIL": f"{capitalize_first(v.reasons[0])}. Do not use this checkpoint.",
    }[v.status.value]
    if (second := results.second_split) is not None and v.status != Status.FAIL:
        s = second.verification
        line += f" On {second.split}, accuracy {pct(s.accuracy)} clears its threshold {pct(s.threshold)}."
    return line


@dataclass(frozen=True)
class StockAgreement:
    """How the stock load's figures (`Results.stock`) stand to the run's, as card template 2 says it.

    Attributes:
        same_predictions: stock tools predicted every evaluated row as the run did (equal sha256 of the
            predicted label ids), so every figure agrees.
        same_accuracy: the two accuracies are equal, with the same or other predictions.
        stock_accuracy: the stock accuracy as the card prints it ([`distinct_percentages`]).
        accuracy: the run's accuracy, printed alike.
    """

    same_predictions: bool
    same_accuracy: bool
    stock_accuracy: str
    accuracy: str


def stock_agreement(results: Results) -> StockAgreement | None:
    """The stock load against the run, when stock tools loaded another model and scored it; None otherwise
    (the module keeps the model's own attention, stock peft failed, or the run recorded no stock load).

    Example:
        >>> stock_agreement(results) is None  # a run of `none`: stock tools load the same model
        True
        >>> accuracy = results.metrics.accuracy
        >>> results.stock = dataclasses.replace(results.stock, same_model=False, accuracy=accuracy)
        >>> stock_agreement(results).same_predictions, stock_agreement(results).same_accuracy
        (False, True)
    """
    stock = results.stock
    if stock is None or stock.same_model or stock.accuracy is None:
        return None
    return StockAgreement(
        same_predictions=stock.predictions_sha256 == results.metrics.predictions_sha256,
        same_accuracy=stock.accuracy == results.metrics.accuracy,
        stock_accuracy=distinct_percentages(stock.accuracy, results.metrics.accuracy)[0],
        accuracy=distinct_percentages(stock.accuracy, results.metrics.accuracy)[1],
    )


def headline_scaling(results: Results) -> tuple[ScalingRow | None, ScalingRow | None]:
    """The two scaling rows card template 2's summary quotes: attention layer 0 alone at the longest N
    measured, and the whole model at the run's length: the shortest N measured that holds
    `max_length` tokens (the longest N when none does). None for a side the run did not measure.

    Example:
        >>> headline_scaling(results)  # a run of `none`: nothing is timed against dense attention
        (None, None)
    """
    efficiency, length = results.efficiency, results.training.hyperparameters.max_length
    layer = max(efficiency.layer_scaling, key=lambda row: row.n, default=None)
    by_length = sorted(efficiency.scaling, key=lambda row: row.n)
    model = next((row for row in by_length if row.n >= length), by_length[-1] if by_length else None)
    return layer, model


_VERDICT_MEANING = {
    "NON_INFERIOR": "`{module}` keeps the dense model's accuracy to within the margin.",
    "INFERIOR": "`{module}` loses more than the margin against the dense model.",
    "INCONCLUSIVE": "these rows cannot tell whether `{module}` keeps the dense model's accuracy to within "
    "the margin.",
}


def _has_verdict(results: Results) -> bool:
    """Whether the run is a module run whose comparison has a baseline and a verdict to show."""
    c = results.comparison
    if results.module.name == paired.DENSE_MODULE or c is None:
        return False
    return bool(c.baselines) and c.verdict is not None


def comparison_line(results: Results) -> str:
    """The paragraph beside the status on the paired verdict against the dense baseline (see
    [`pipeline.scoring.paired`]); "" for a module run that recorded no comparison (written before it was
    recorded).

    Example:
        >>> print(comparison_line(results))  # a run of `none`
        This run is the dense baseline: ...
        >>> results.module.name = "sliding_window"
        >>> results.comparison = paired.no_baseline()
        >>> print(comparison_line(results))
        No dense baseline of the same setup ... was found, so this card says nothing about whether ...
    """
    module = results.module.name
    if module == paired.DENSE_MODULE:
        return (
            "This run is the dense baseline: the runs of the other attention modules with the same base "
            "model and revision, task, data, seed and training settings are compared with it, row by row."
        )
    c = results.comparison
    if c is None:
        return ""
    if not _has_verdict(results):
        return (
            "No dense baseline of the same setup (a run of the module `none` with the same base model and "
            "revision, task, data, seed and training settings) was found, so this card says nothing about "
            f"whether `{module}` keeps the dense model's accuracy."
        )
    runs = "; ".join(f"{b.repo_name}, accuracy {pct(b.accuracy)}" for b in c.baselines)
    against = "the dense model" if len(c.baselines) == 1 else f"the dense models of {len(c.baselines)} seeds"
    margin = f"{100 * c.margin:.1f} point{'' if 100 * c.margin == 1 else 's'}"
    line = (
        f"Against {against} ({runs}): {signed_points(c.difference)} points "
        f"({100 * c.confidence:g}% CI {signed_points(c.ci_low)} to {signed_points(c.ci_high)}), exact "
        f"McNemar p = {p_value(c.mcnemar_p)}: **{c.verdict.value}** at a non-inferiority margin of "
        f"{margin}. {capitalize_first(_VERDICT_MEANING[c.verdict.value].format(module=module))}"
    )
    if (mcc := c.mcc_difference) is not None:
        line += (
            f" In Matthews' correlation, the task's official metric, the difference is "
            f"{signed(mcc.difference)} ({100 * mcc.confidence:g}% paired bootstrap CI {signed(mcc.ci_low)} "
            f"to {signed(mcc.ci_high)}, {mcc.resamples:,} resamples of the rows, seed {mcc.seed})."
        )
    return line


def _stat_value(value) -> str:
    return num(value, 4) if isinstance(value, float) else str(value)


def _is_matrix(value) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(
            isinstance(row, list) and row and all(isinstance(x, int | float) for x in row) for row in value
        )
    )


def split_module_stats(stats: dict) -> tuple[list, list, list]:
    """Sorts a module's statistics for the card: scalars for a table, layer × head matrices for their own
    tables, anything else as JSON."""
    scalars, matrices, other = [], [], []
    for name, value in stats.items():
        if isinstance(value, bool | int | float | str):
            scalars.append((name, _stat_value(value)))
        elif _is_matrix(value):
            matrices.append((name, [[_stat_value(x) for x in row] for row in value]))
        else:
            other.append((name, json.dumps(value, indent=1, allow_nan=False)))
    return scalars, matrices, other


def rows_seen(results: Results) -> str:
    """How much of the training split the run's training saw, as the card says it.

    Example:
        >>> rows_seen(results)  # a tiny run on a tiny SST-2 folder
        '10 steps × 8 rows = 80 rows, 1.25 passes over the 64 training rows'
    """
    config, rows = results.training.hyperparameters, results.dataset.train_rows
    seen = config.steps * config.batch_size
    share = f"{100 * seen / rows:.2f}% of" if seen < rows else f"{seen / rows:.2f} passes over"
    steps = f"{config.steps:,} steps × {config.batch_size:,} rows = {seen:,} rows"
    return f"{steps}, {share} the {rows:,} training rows"


def bibtex(results: Results) -> str:
    """The BibTeX of the card's citations: the module's papers, the task's, GLUE's and LoRA's, each entry
    once (a module may cite LoRA itself).

    Example:
        >>> print(bibtex(results).splitlines()[0])  # `none` cites nothing; SST-2 comes first
        @inproceedings{socher2013recursive,
    """
    sources = (results.module.bibtex, TASKS[results.dataset.task].bibtex, GLUE_BIBTEX, LORA_BIBTEX)
    entries: dict[str, str] = {}  # first line (`@type{key,`) -> entry, in the order first met
    for source in filter(None, (source.strip() for source in sources)):
        for entry in source.removeprefix("@").split("\n@"):
            entries.setdefault(entry.split("\n", 1)[0], "@" + entry)
    return "\n".join(entries.values())
