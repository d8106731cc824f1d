"""Stage 6 — render: the model card, from results.json alone, through one Jinja template: the one of the card
template version results.json records (`CARD_TEMPLATE_FILES`), so a published card renders again as it was.

The template is rendered with `StrictUndefined`, so a figure missing from the results fails the render
instead of leaving a gap. The YAML front matter (licence, base model, datasets, tags, model-index) is built
with huggingface_hub's `ModelCardData` and `EvalResult`, so the Hub parses it as it parses its own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
import yaml
from huggingface_hub import EvalResult, EvalResultEntry, ModelCard, ModelCardData, eval_result_entries_to_yaml

from ...modules import get_module
from ..record.manifest import RESULTS_FILE, SECOND_PREDICTIONS_FILE
from ..record.results import Results, ScalingRow, SplitResult, Status, TrainConfig
from ..record.run_names import reproduce_command
from ..record.text import COMMIT_RE
from ..run.data import GLUE_BIBTEX, GLUE_CITATION, GLUE_LANGUAGE, HUB_DATASET_ID, TASKS
from ..scoring import paired
from .plots import plot_context

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"


@dataclass(frozen=True)
class CardTemplateFiles:
    """The files of one card template version (`Results.card_template`), in templates/: the card's, one per
    readable results.json schema, and the LICENSE file's.

    Example:
        >>> CARD_TEMPLATE_FILES[1].cards[4], CARD_TEMPLATE_FILES[1].license
        ('model_card.md.j2', 'license.txt.j2')
    """

    cards: dict[int, str]  # results.json schema version -> its card's template file
    license: str


# Each card template version attncard renders (results.CARD_TEMPLATES), and its files. A published card is
# rendered again from its results.json with the version it records, to verify it; so a released version's
# files never change (tests/verify/test_older_runs.py pins their sha256): new wording is a new version with
# new files, recorded by the runs published with it, and older runs keep rendering with theirs. Each version
# names a card for every readable schema (a frozen schema's card keeps its own file). The install lines are
# built per version (`install_commands`). The gap: the other text attncard builds in Python (`status_line`,
# `comparison_line`, `usage_where`, `rows_seen`, the front matter, TASK_TITLES, the citations and BibTeX here
# and in data.py) is not versioned; a change to its wording still changes every card that shows it.
#
# Version 2 (issue 44): the summary gives the headline speed and memory, the evidence (results, verification,
# efficiency, training, data) comes before the model's and the module's description, and the module's source
# and the model's printout are folded at the end; a stock load that scores the same says that they agree; the
# install lines are ones that work without a release on PyPI. Schemas 3 and 4 share its card; schema 2 keeps
# its frozen one.
CARD_TEMPLATE_FILES = {
    1: CardTemplateFiles(
        cards={2: "model_card_v2.md.j2", 3: "model_card_v3.md.j2", 4: "model_card.md.j2"},
        license="license.txt.j2",
    ),
    2: CardTemplateFiles(
        cards={2: "model_card_v2.md.j2", 3: "model_card_t2.md.j2", 4: "model_card_t2.md.j2"},
        license="license.txt.j2",
    ),
}
SCALING_PLOT = "scaling.png"
LOSS_PLOT = "training_loss.png"
LICENSE_FILE = "LICENSE"
# The card's status line; a card holds exactly one, the verification's.
STATUS_LINE_RE = re.compile(r"^\*\*Status: ", re.MULTILINE)
# The Hub's `license_name` for a base model whose card declared no licence (see `render_license`).
UNKNOWN_LICENSE_NAME = "unknown"

LORA_BIBTEX = """@inproceedings{hu2022lora,
  title = "{LoRA}: Low-Rank Adaptation of Large Language Models",
  author = {Hu, Edward J. and Shen, Yelong and Wallis, Phillip and Allen-Zhu, Zeyuan and Li, Yuanzhi
    and Wang, Shean and Wang, Lu and Chen, Weizhu},
  booktitle = {International Conference on Learning Representations},
  year = {2022},
  url = {https://arxiv.org/abs/2106.09685}
}"""

TASK_TITLES = {
    "sst2": "GLUE SST-2",
    "cola": "GLUE CoLA",
    "mrpc": "GLUE MRPC",
    "qqp": "GLUE QQP",
    "rte": "GLUE RTE",
    "qnli": "GLUE QNLI",
    "mnli": "GLUE MNLI",
}


def _pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def _num(value: float, digits: int = 4) -> str:
    return f"{value:.{digits}f}"


def _sci(value: float) -> str:
    return f"{value:.3e}"


def _mb(value: float | None) -> str:
    return "not measurable" if value is None else f"{value:.1f}"


def _ratio(value: float | None) -> str:
    return "not measurable" if value is None else f"{value:.2f}"


def _seconds(row, side: str) -> str:
    """One side's time of a scaling row: its median, then its fastest and slowest pass in brackets."""
    median, fastest, slowest = (getattr(row, f"{side}_seconds{end}") for end in ("", "_min", "_max"))
    return f"{_sci(median)} ({_sci(fastest)} – {_sci(slowest)})"


def _speedup(row) -> str:
    """A scaling row's speed-up and its range; "no measurable difference" when the range contains 1.

    Example:
        >>> from types import SimpleNamespace as Row
        >>> _speedup(Row(speedup=1.52, speedup_low=1.4, speedup_high=1.61))
        '1.52 (1.40 – 1.61)'
        >>> _speedup(Row(speedup=0.93, speedup_low=0.81, speedup_high=1.07))
        'no measurable difference (0.81 – 1.07)'
    """
    figure = "no measurable difference" if row.speedup_low <= 1 <= row.speedup_high else _num(row.speedup, 2)
    return f"{figure} ({_num(row.speedup_low, 2)} – {_num(row.speedup_high, 2)})"


def _tensor(spec) -> str:
    return f"{spec.dtype}[{', '.join(map(str, spec.shape))}]"


def _capitalize_first(text: str) -> str:
    return text[:1].upper() + text[1:]


# Not errors.markdown_text: a published card is rendered again byte for byte, so its cells keep this table
# (no `~` escaped, a line break made a space) for every run that has one.
_CELL_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "(": "\\(",
        ")": "\\)",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "\n": " ",
        "\r": " ",
        "\t": " ",
    }
)


def _cell(text: str) -> str:
    r"""Text read from a data file, as one Markdown table cell that shows it as written: no markup, link,
    HTML or line break of the text takes effect.

    Example:
        >>> print(_cell("a | b <i>[x](y)</i>"))
        a \| b &lt;i&gt;\[x\]\(y\)&lt;/i&gt;
    """
    return text.translate(_CELL_ESCAPES)


def card_template_files(results: Results) -> CardTemplateFiles:
    """The template files the run's card and LICENSE render with: those of the card template version
    results.json records, version 1 for a run published before it was recorded.

    Example:
        >>> card_template_files(results).cards[results.schema_version]  # a run published now: template 2
        'model_card_t2.md.j2'
    """
    version = 1 if results.card_template is None else results.card_template
    if version not in CARD_TEMPLATE_FILES:  # results.json's own are checked on reading it
        rendered = ", ".join(map(str, CARD_TEMPLATE_FILES))
        raise ValueError(
            f"card_template is {version!r}; this attncard renders card templates {rendered}: "
            "upgrade attncard (pip install -U attncard)"
        )
    return CARD_TEMPLATE_FILES[version]


def template_environment() -> jinja2.Environment:
    """The Jinja environment of the card: strict about undefined names, with the number formats it uses."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # Markdown, not HTML
    )
    environment.filters.update(
        pct=_pct,
        num=_num,
        sci=_sci,
        capitalize_first=_capitalize_first,
        tensor=_tensor,
        mb=_mb,
        ratio=_ratio,
        seconds=_seconds,
        speedup=_speedup,
        cell=_cell,
    )
    return environment


def card_data(results: Results) -> ModelCardData:
    """The card's YAML metadata, to the Hub's model-card spec, with the model-index holding the measured
    accuracy and F1.

    - `base_model` (with `base_model_relation: adapter` and the tag `base_model:adapter:<id>`, on which the
      Hub and inference providers match adapters) only when the base model is a Hub id: a local folder is
      no repository, and the Hub refuses a path there.
    - The model-index sets no `verified` (the Hub computes it), passes macro averaging as the metric's `args`
      (`config` names a metric-loading configuration), and gives the dataset's `revision` only when it is a
      Hub commit (a local TSV is recorded by its sha256, which is no revision of `nyu-mll/glue`).
    """
    task_title = TASK_TITLES.get(results.dataset.task, results.dataset.task)
    dataset = {
        "dataset_type": HUB_DATASET_ID,
        "dataset_name": task_title,
        "dataset_config": results.dataset.config,
        "dataset_split": results.dataset.split,
        # A local TSV is recorded by its sha256, which is no revision of the Hub dataset.
        "dataset_revision": revision if COMMIT_RE.fullmatch(revision := results.dataset.revision) else None,
    }
    task = {"task_type": "text-classification", "task_name": "Text Classification"}
    hub_base_model = None if base_model_is_local(results) else results.model.model_id
    adapter = {"base_model": hub_base_model, "base_model_relation": "adapter"} if hub_base_model else {}
    tags = ["attncard", "peft", "lora", "transformers", f"attention-{results.module.name}"]
    tags.append(results.dataset.task)
    if hub_base_model:
        tags.append(f"base_model:adapter:{hub_base_model}")
    licence = {"license": results.model.license}
    if results.model.license == "other":
        # The spec: `other` with an id of the licence and a link to it, here the LICENSE file of the run.
        licence["license_name"] = results.model.license_name or UNKNOWN_LICENSE_NAME
        licence["license_link"] = LICENSE_FILE
    index = model_index_results(results)
    return ModelCardData(
        model_name=results.repo_name,
        **licence,
        **adapter,
        datasets=[HUB_DATASET_ID],
        language=[GLUE_LANGUAGE],
        metrics=list(dict.fromkeys(metric.type for metric in index[0][1])),
        tags=tags,
        pipeline_tag="text-classification",
        library_name="peft",
        eval_results=[
            EvalResult(
                **task,
                **{**dataset, "dataset_split": split},
                metric_type=metric.type,
                metric_name=metric.name,
                metric_value=metric.value,
                **({"metric_args": metric.args} if metric.args else {}),
            )
            for split, metrics in index
            for metric in metrics
        ],
    )


@dataclass(frozen=True)
class IndexMetric:
    """One metric of the card's model-index.

    Attributes:
        type: the metric's id on the Hub ("accuracy", "f1", "matthews_correlation").
        name: as the Hub shows it ("F1 (equivalent)").
        value: results.json's figure.
        field: where results.json holds it ("metrics.official.value"), for messages.
        args: the metric's arguments (F1's averaging or positive class); None for none.
    """

    type: str
    name: str
    value: float
    field: str
    args: dict[str, str | int] | None = None


def model_index_metrics(results: Results, split: SplitResult | None = None) -> list[IndexMetric]:
    """The metrics of the card's model-index, in order: from schema 4 on, the task's official GLUE metric
    first (Matthews' correlation for CoLA, F1 of the positive class for MRPC and QQP), then accuracy, then
    macro F1 where F1 is not the official metric; before, accuracy and macro F1. Given `split`, those of the
    task's second evaluated split (MNLI's mismatched).

    Example:
        >>> [(metric.type, metric.name) for metric in model_index_metrics(results)]  # SST-2, schema 4
        [('accuracy', 'Accuracy'), ('f1', 'F1 (macro)')]
    """
    metrics = (split or results).metrics
    official, where = metrics.official, "second_split.metrics" if split else "metrics"
    accuracy = IndexMetric("accuracy", "Accuracy", metrics.accuracy, f"{where}.accuracy")
    macro_f1 = IndexMetric("f1", "F1 (macro)", metrics.f1_macro, f"{where}.f1_macro", {"average": "macro"})
    if official is None or official.name == "accuracy":
        return [accuracy, macro_f1]
    if official.name == "f1":
        positive = results.dataset.label_names.index(official.positive_label)
        args = {"average": "binary", "pos_label": positive}
        f1 = IndexMetric(
            "f1", f"F1 ({official.positive_label})", official.value, f"{where}.official.value", args
        )
        return [f1, accuracy]
    mcc = IndexMetric(official.name, "Matthews correlation", official.value, f"{where}.official.value")
    return [mcc, accuracy, macro_f1]


def model_index_results(results: Results) -> list[tuple[str, list[IndexMetric]]]:
    """The model-index's results, `(dataset split, its metrics)`: the evaluated split's
    ([`model_index_metrics`]), then the second evaluated split's (MNLI's mismatched) when the task has one.

    Example:
        >>> [(split, len(metrics)) for split, metrics in model_index_results(results)]
        [('validation', 2)]
    """
    index = [(results.dataset.split, model_index_metrics(results))]
    if (second := results.second_split) is not None:
        index.append((second.split, model_index_metrics(results, second)))
    return index


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
    task = TASK_TITLES.get(results.dataset.task, results.dataset.task)
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
    if official.name == "accuracy":
        return OfficialFigure(
            "Accuracy", _pct(official.value), accuracy, f"{task} is reported by accuracy. {gate}"
        )
    if official.name == "f1":
        label = f"F1 of {official.positive_label}"
        value = _pct(official.value)
        reported = f"F1 of the class {official.positive_label}, with accuracy beside it"
    else:
        label, value, reported = "Matthews correlation (MCC)", _num(official.value), "Matthews' correlation"
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
        "PASS": f"accuracy {_pct(v.accuracy)} clears the threshold {_pct(v.threshold)} and the model is "
        f"compressed {_num(v.compression_factor)}×.",
        "PASS_NO_COMPRESSION": f"accuracy {_pct(v.accuracy)} clears the threshold {_pct(v.threshold)}; the "
        "model is not compressed.",
        "FAIL": f"{_capitalize_first(v.reasons[0])}. Do not use this checkpoint.",
    }[v.status.value]
    if (second := results.second_split) is not None and v.status != Status.FAIL:
        s = second.verification
        line += f" On {second.split}, accuracy {_pct(s.accuracy)} clears its threshold {_pct(s.threshold)}."
    return line


def distinct_percentages(first: float, second: float) -> tuple[str, str]:
    """Two shares in percent with two decimals, or as many more as it takes to print two different shares
    differently (40,430 QQP rows are 0.0025% apiece); equal shares print alike.

    Example:
        >>> distinct_percentages(0.7647, 0.8260), distinct_percentages(20215 / 40430, 20216 / 40430)
        (('76.47%', '82.60%'), ('50.000%', '50.002%'))
    """
    for digits in range(2, 17):
        texts = f"{100 * first:.{digits}f}%", f"{100 * second:.{digits}f}%"
        if texts[0] != texts[1] or first == second:
            return texts
    return texts


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


def _signed_points(share: float) -> str:
    """An accuracy difference in points, signed with a real minus; no sign when it rounds to zero.

    Example:
        >>> _signed_points(-0.0034), _signed_points(0.0052), _signed_points(-0.00001)
        ('−0.34', '+0.52', '0.00')
    """
    return _signed(100 * share, 2)


def _p_value(value: float) -> str:
    """A p-value to two significant digits, as a sentence quotes it.

    Example:
        >>> _p_value(0.6776), _p_value(1.0), _p_value(3.1e-07)
        ('0.68', '1', '3.1e-07')
    """
    return f"{value:.2g}"


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
    runs = "; ".join(f"{b.repo_name}, accuracy {_pct(b.accuracy)}" for b in c.baselines)
    against = "the dense model" if len(c.baselines) == 1 else f"the dense models of {len(c.baselines)} seeds"
    margin = f"{100 * c.margin:.1f} point{'' if 100 * c.margin == 1 else 's'}"
    line = (
        f"Against {against} ({runs}): {_signed_points(c.difference)} points "
        f"({100 * c.confidence:g}% CI {_signed_points(c.ci_low)} to {_signed_points(c.ci_high)}), exact "
        f"McNemar p = {_p_value(c.mcnemar_p)}: **{c.verdict.value}** at a non-inferiority margin of "
        f"{margin}. {_capitalize_first(_VERDICT_MEANING[c.verdict.value].format(module=module))}"
    )
    if (mcc := c.mcc_difference) is not None:
        line += (
            f" In Matthews' correlation, the task's official metric, the difference is "
            f"{_signed(mcc.difference)} ({100 * mcc.confidence:g}% paired bootstrap CI {_signed(mcc.ci_low)} "
            f"to {_signed(mcc.ci_high)}, {mcc.resamples:,} resamples of the rows, seed {mcc.seed})."
        )
    return line


def _signed(value: float, digits: int = 4) -> str:
    """A difference to `digits` decimals, signed with a real minus; no sign when it rounds to zero.

    Example:
        >>> _signed(-0.01234), _signed(0.5), _signed(-0.00001)
        ('−0.0123', '+0.5000', '0.0000')
    """
    text = f"{abs(value):.{digits}f}"
    if float(text) == 0:
        return text
    return ("+" if value > 0 else "−") + text


def _stat_value(value) -> str:
    return _num(value, 4) if isinstance(value, float) else str(value)


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


def _legend(axis, loc: str | None) -> None:
    """The axis's legend at `loc`; None: `axis.legend()` with no argument, as the first drawing called it."""
    if loc is None:
        axis.legend()
    else:
        axis.legend(loc=loc)


def write_plots(results: Results, run_dir: Path) -> list[dict[str, str]]:
    """Draws the run's figures as PNG files in the run folder; returns `{"file", "title"}` for each.

    The training-loss curve is drawn here, each step's loss with the logged averages over it; the scaling
    figure too, medians with the fastest and slowest pass as error bars, and only when results.json holds
    scaling rows (none for a module that keeps the model's own attention); the
    module's own figures by its `plots`, from its statistics as results.json holds them.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot
    from matplotlib.ticker import NullLocator

    plots = []
    plot_style = results.plot_style
    with plot_context(plot_style):
        plots += _draw_plots(results, run_dir, plot_style, pyplot, NullLocator)
    return plots


def _draw_plots(
    results: Results, run_dir: Path, plot_style: int | None, pyplot, NullLocator
) -> list[dict[str, str]]:
    """`write_plots`' drawing, under the rcParams of `plot_style` already in force."""
    plots = []
    losses = results.training.losses
    if losses:
        figure, axis = pyplot.subplots(figsize=(6, 3.5))
        axis.plot(range(1, len(losses) + 1), losses, color="0.75", linewidth=0.8, label="each step")
        log = results.training.log
        axis.plot([s.step for s in log], [s.loss for s in log], "o-", label="mean since the previous point")
        axis.set(xlabel="optimizer step", ylabel="training loss", title="training loss")
        # Style 2 names the place: "best" is decided otherwise by 3.8-3.10 and 3.11. A loss falls, so the
        # upper right is mostly free. The first drawing calls legend() bare: an explicit loc=None places it
        # otherwise in matplotlib 3.11, and runs already published must be drawn as they were.
        _legend(axis, None if plot_style is None else "upper right")
        figure.tight_layout()
        figure.savefig(run_dir / LOSS_PLOT, dpi=100)
        pyplot.close(figure)
        plots.append({"file": LOSS_PLOT, "title": "Training loss at each step and averaged as logged"})
    scaling = results.efficiency.scaling
    if scaling:
        figure, (time_axis, memory_axis) = pyplot.subplots(1, 2, figsize=(9, 3.5))
        n = [row.n for row in scaling]
        for side, line_format, label in (("module", "o-", results.module.name), ("dense", "s--", "dense")):
            times = [[getattr(row, f"{side}_seconds{e}") for e in ("", "_min", "_max")] for row in scaling]
            medians = [median for median, _, _ in times]
            spread = [[mid - low for mid, low, _ in times], [high - mid for mid, _, high in times]]
            # Error bars from the fastest to the slowest pass.
            time_axis.errorbar(n, medians, yerr=spread, fmt=line_format, capsize=3, label=label)
        time_axis.set(xlabel="sequence length N", ylabel="seconds per pass", title="time", xscale="log")
        measured = [
            row for row in scaling if row.module_peak_mb is not None and row.dense_peak_mb is not None
        ]
        memory_axis.plot(
            [r.n for r in measured], [r.module_peak_mb for r in measured], "o-", label=results.module.name
        )
        memory_axis.plot([r.n for r in measured], [r.dense_peak_mb for r in measured], "s--", label="dense")
        memory_axis.set(xlabel="sequence length N", ylabel="peak MB", title="peak memory", xscale="log")
        for axis in (time_axis, memory_axis):
            # The measured lengths as ticks: a log axis's own (2×10², 3×10², …) name none of them.
            axis.set_xticks(n, [str(length) for length in n])
            axis.xaxis.set_minor_locator(NullLocator())
            # Times and memory grow with N: the upper left is free (style 2; "best" before).
            _legend(axis, None if plot_style is None else "upper left")
        figure.tight_layout()
        figure.savefig(run_dir / SCALING_PLOT, dpi=100)
        pyplot.close(figure)
        title = "Time (median, bars from the fastest to the slowest pass) and peak memory against N"
        plots.append({"file": SCALING_PLOT, "title": title})
    module = get_module(results.module.name)
    if module.measurement.plots is not None:
        plots += module.measurement.plots(results.module.stats, run_dir)
    return plots


EVAL_RESULTS_DIR = ".eval_results"


def eval_results_file(results: Results) -> str:
    """The path of the run's `.eval_results` entry in its folder: `.eval_results/<task>.yaml`."""
    return f"{EVAL_RESULTS_DIR}/{results.dataset.task}.yaml"


def render_eval_results(results: Results) -> str:
    """The run's `.eval_results/<task>.yaml`, in huggingface_hub's `EvalResultEntry` format (see
    [`write_eval_results`]): its value is results.json's official metric of the task, as GLUE's leaderboard
    reports it (Matthews' correlation for CoLA, F1 of the positive class for MRPC and QQP, accuracy
    otherwise; accuracy before schema 4), as the card's figures are.

    Example:
        >>> print(render_eval_results(results).splitlines()[3])
          value: 0.875
    """
    # A local TSV has a file hash, not a commit of the Hub dataset.
    hub_revision = COMMIT_RE.fullmatch(results.dataset.revision) is not None
    source = {}
    if results.repo_id:
        source = {"source_url": f"https://huggingface.co/{results.repo_id}/blob/main/{RESULTS_FILE}"}
        source["source_name"] = "attncard results.json"
    entry = EvalResultEntry(
        dataset_id=HUB_DATASET_ID,
        task_id=results.dataset.task,
        value=model_index_metrics(results)[0].value,
        dataset_revision=results.dataset.revision if hub_revision else None,
        date=results.finished_at,
        notes=f"attention {results.module.name}",  # a setup label, as the Hub's own examples
        **source,
    )
    return yaml.safe_dump(eval_result_entries_to_yaml([entry]), sort_keys=False)


def write_eval_results(results: Results, run_dir: Path) -> Path:
    """Writes `.eval_results/<task>.yaml` in huggingface_hub's `EvalResultEntry` format.

    The Hub shows such an entry on the model page and the benchmark's leaderboard only when the dataset is a
    registered benchmark (an `eval.yaml` in its repository, allow-listed by the Hub) and `task_id` one of its
    tasks; otherwise the card's model-index is what it reads. The source is the run's results.json on the Hub,
    when the run names its repository: the run tag cannot be named here, since it is taken over this file.
    """
    path = run_dir / eval_results_file(results)
    path.parent.mkdir(exist_ok=True)
    path.write_text(render_eval_results(results), encoding="utf-8")
    return path


def render_license(results: Results) -> str | None:
    """The run's LICENSE file when its licence is `other` (the card's `license_link` points to it): which
    licence of the base model applies, and where it is published, as results.json records them; None for a
    licence the Hub names (`apache-2.0`), which needs no file.

    Example:
        >>> print(render_license(results).splitlines()[0])  # tiny-gpt2's folder declares no licence
        tiny-gpt2-none-sst2: licence
    """
    if results.model.license != "other":
        return None
    return template_environment().get_template(card_template_files(results).license).render(r=results)


def base_model_is_local(results: Results) -> bool:
    """Whether the run's base model was a local folder, which results.json names only by its folder name and
    the sha256 of its weights: whoever loads the run must bring that folder (`base_model=`).

    Its model id is a folder name, without the `/` of every Hub id (`minilm` records its Hub id); its `name`
    alone cannot tell, as a folder may be named like an alias (`gpt2`).
    """
    return results.model.revision.startswith("sha256:") and "/" not in results.model.model_id


def usage_snippet(results: Results, location: str, example: list[str], base_model: str | None = None) -> str:
    """Python that loads this checkpoint with attncard's verified loader and classifies one example.

    Args:
        results: the run (a FAIL run needs `allow_failed=True` to load at all).
        location: the Hub repository id, or the run folder.
        example: the text(s) of one row, one per text column of the task.
        base_model: for a run whose base model was a local folder (see [`base_model_is_local`]), the folder
            the snippet passes as `base_model=`: the real one to run the snippet here, while the card
            shows the default `./<folder name>`, as the recorded command names it. Unused otherwise.

    The card gives the install commands once, above it ([`install_line`], [`module_install_line`]).

    Example:
        >>> print(usage_snippet(results, "attncard/tiny-gpt2-none-sst2", ["a gorgeous movie ."]))
        from attncard import load_verified
        <BLANKLINE>
        verified = load_verified('attncard/tiny-gpt2-none-sst2', base_model='./gpt2')  # checks every ...
        inputs = verified.tokenizer(['a gorgeous movie .'], return_tensors="pt")
        label_id = int(verified.model(**inputs).logits.argmax(-1))
        print(verified.model.config.id2label[label_id])
        <BLANKLINE>
    """
    arguments = [repr(location)]
    if base_model_is_local(results):
        arguments.append(f"base_model={(base_model or f'./{results.model.model_id}')!r}")
    if results.verification.status.value == "FAIL":
        arguments.append("allow_failed=True")
    texts = ", ".join(repr([text]) for text in example)
    return (
        "from attncard import load_verified\n"
        "\n"
        f"verified = load_verified({', '.join(arguments)})  # checks every file's sha256 and the status\n"
        f'inputs = verified.tokenizer({texts}, return_tensors="pt")\n'
        "label_id = int(verified.model(**inputs).logits.argmax(-1))\n"
        "print(verified.model.config.id2label[label_id])\n"
    )


# Where a recorded usage snippet loads the run from: the argument of its `load_verified(...)` line.
_USAGE_LOCATION_RE = re.compile(r"^verified = load_verified\('([A-Za-z0-9._/-]{1,512})'", re.MULTILINE)


def run_folder_location(repo_name: str) -> str:
    """How the usage snippet of a run not on the Hub names its run folder: `./<name>`, in the folder that
    holds it, never by the path --output gave, which would publish the publisher's folders (an absolute
    --output names their home). Runs published before name the folder by that path, and keep verifying.

    Example:
        >>> run_folder_location("tiny-gpt2-none-sst2")
        './tiny-gpt2-none-sst2'
    """
    return f"./{repo_name}"


def usage_location(results: Results) -> str | None:
    """Where the run's recorded usage snippet loads it from, when that is the run itself: its Hub repository,
    or its folder: `./<name>` ([`run_folder_location`]), or in runs published before, the path publish was
    given (`runs/<name>`, relative to the folder publish ran in, or absolute); None when the snippet loads
    anything else, or there is no snippet.

    Example:
        >>> usage_location(results)
        'loopback-user/tiny-gpt2-none-sst2'
    """
    match = _USAGE_LOCATION_RE.search(results.usage.code) if results.usage is not None else None
    if match is None:
        return None
    location = match.group(1)
    if results.repo_id is not None:
        return location if location == results.repo_id else None
    parts = location.removeprefix("/").split("/")
    return location if parts[-1] == results.repo_name and all(parts) else None


def usage_where(results: Results, location: str) -> str:
    """What the card says under its usage snippet: where the snippet loads the run from and what the loader
    checks.

    Example:
        >>> print(usage_where(results, results.repo_id))  # published as loopback-user/tiny-gpt2-none-sst2
        `load_verified` downloads `loopback-user/tiny-gpt2-none-sst2` from the Hub, checks every file ...
    """
    if results.repo_id is not None:
        where = f"`load_verified` downloads `{location}` from the Hub,"
    elif location == run_folder_location(results.repo_name):
        where = (
            f"This run is not on the Hub: the snippet loads its run folder `{location}`: run it in the "
            "folder that holds the run folder. `load_verified`"
        )
    else:  # a run published before `run_folder_location`: by the path --output gave
        relative = "" if location.startswith("/") else ", relative to the folder `publish` ran in"
        where = (
            f"This run is not on the Hub: the snippet loads its run folder `{location}`{relative}. "
            "`load_verified`"
        )
    base = (
        f" `base_model=` names the folder of the base model `{results.model.model_id}`, which the run does "
        "not hold: pass yours."
        if base_model_is_local(results)
        else ""
    )
    return (
        f"{where} checks every file against the sha256 manifest in `results.json`, refuses a FAIL "
        f"checkpoint, rebuilds the base model with the `{results.module.name}` module and loads the adapter "
        f"(safetensors only).{base}"
    )


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


def card_usage_code(results: Results) -> str | None:
    """The usage snippet the card shows: attncard's own, built again from the run's names, its location
    ([`usage_location`]) and the first evaluated row, never copied from results.json. None when the
    snippet cannot be built (no location of the run's own, or no row); then it is not shown at all."""
    location = usage_location(results)
    if location is None or not results.dataset.samples:
        return None
    return usage_snippet(results, location, list(results.dataset.samples[0].texts.values()))


def reproduce_commands(results: Results) -> list[str]:
    """The commands that may reproduce a run, built again from its recorded names (see
    [`reproduce_command`]): with `--repo-id` when it names one, else without a name and with `--name`, as
    a name given equal to the default leaves no trace elsewhere.

    Example:
        >>> results.command in reproduce_commands(results)
        True
    """
    model = f"./{results.model.model_id}" if base_model_is_local(results) else results.model.name
    names = [None] if results.repo_id else [None, results.repo_name]
    return [
        reproduce_command(
            model,
            results.module.name,
            results.dataset.task,
            results.training.hyperparameters,
            data_from_folder=bool(results.dataset.files),
            repo_id=results.repo_id,
            name=name,
        )
        for name in names
    ]


def rendered_card_problems(results: Results, card: str) -> list[str]:
    r"""What attncard refuses in a card it renders or reads, before comparing the figures: results.json's
    usage snippet or command other than the ones attncard builds again for the run, a module citation, BibTeX
    or config help other than the installed module's, and a card without exactly one status line. Empty when
    there is none.

    Example:
        >>> rendered_card_problems(results, "**Status: PASS** — …\n**Status: PASS** — verified")
        ['the card has 2 status lines, not one']
    """
    problems = []
    if results.usage is not None:
        if usage_location(results) is None:
            problems.append("usage.code loads something other than the run's own repository or folder")
        elif card_usage_code(results) != results.usage.code:
            problems.append("usage.code is not the usage snippet attncard writes for this run")
    if results.command not in reproduce_commands(results):
        problems.append("command is not the command that reproduces this run from its recorded settings")
    # The module's citation, BibTeX and config help are the installed module's words, never a run's: with
    # the recorded source installed they are the same, so any other is an edit.
    module = get_module(results.module.name)
    installed = {
        "citation": module.paper.citation if module.paper else "",
        "bibtex": module.paper.bibtex if module.paper else "",
        "config_help": {field: help_text for field, _, help_text in module.config_fields()},
    }
    problems += [
        f"module.{field} is not the one of the module '{module.name}' installed here"
        for field, text in installed.items()
        if getattr(results.module, field) != text
    ]
    if (count := len(STATUS_LINE_RE.findall(card))) != 1:
        problems.append(f"the card has {count} status lines, not one")
    return problems


def install_line(results: Results) -> str:
    """Card template 1's install command: the `pip install` of the attncard that made the run, pinned to the
    commit results.json records (or to its version when no commit was recorded). Frozen with that version's
    cards; card template 2 builds its lines with [`attncard_install_lines`].

    Example:
        >>> install_line(results)
        'pip install "attncard @ git+https://github.com/attncard/attncard@...'
    """
    environment = results.environment
    commit, dirty = environment.git_commit.removesuffix("+dirty"), environment.git_commit.endswith("+dirty")
    if environment.attncard_repository and commit != "unknown":
        line = f'pip install "attncard @ git+{environment.attncard_repository}@{commit}"'
        return line + ("  # the run had uncommitted changes on top of this commit" if dirty else "")
    if environment.attncard_version != "unknown":
        return f'pip install "attncard=={environment.attncard_version}"'
    return "pip install attncard"


def module_install_line(results: Results) -> str:
    """Card template 1's second install command, for a run whose module comes from a package other than
    attncard: the `pip install` of that package at the recorded version; "" for a built-in module. Frozen
    with that version's cards; card template 2 builds it with [`module_install_lines`].

    Example:
        >>> module_install_line(results)  # a run of the built-in `none`
        ''
        >>> results.module.name = "sliding_window"  # as a run of the example plugin records it
        >>> results.module.package, results.module.package_version = "attncard-sliding-window", "0.1.0"
        >>> module_install_line(results)
        'pip install "attncard-sliding-window==0.1.0"  # the attention module sliding_window'
    """
    module = results.module
    if module.package in ("", "attncard"):
        return ""
    return f'pip install "{module.package}=={module.package_version}"  # the attention module {module.name}'


# The attention-module packages kept in attncard's own repository, by package name, and their folder there:
# installable from the commit of attncard a run records, as pip installs a package from a folder of a git
# repository (`#subdirectory=`). Any other package is installed by its name and version.
REPOSITORY_PLUGINS = {"attncard-sliding-window": "examples/sliding_window"}


def _recorded_commit(results: Results) -> tuple[str, bool]:
    """The attncard commit results.json records without its "+dirty", and whether it had "+dirty"; the commit
    is "" when none was recorded or no repository is named to fetch it from."""
    environment = results.environment
    commit = environment.git_commit.removesuffix("+dirty")
    if not environment.attncard_repository or commit == "unknown":
        return "", False
    return commit, environment.git_commit.endswith("+dirty")


def attncard_install_lines(results: Results) -> list[str]:
    r"""Card template 2's install lines for the attncard that made the run, each one that installs it today:
    from its repository at the recorded commit; without a recorded commit, its release on PyPI by version,
    and where PyPI has none, where else the run says it may come from (a comment: the run cannot name the
    exact source).

    Example:
        >>> attncard_install_lines(results)
        ['pip install "attncard @ git+https://github.com/attncard/attncard@...']
        >>> results.environment.git_commit = "unknown"  # as an install from a wheel records it
        >>> print("\n".join(attncard_install_lines(results)))
        # The run recorded attncard 0.1.0 but no commit: its release on PyPI, or where PyPI has none, ...
        pip install "attncard==0.1.0"
    """
    environment = results.environment
    repository, version = environment.attncard_repository, environment.attncard_version
    commit, dirty = _recorded_commit(results)
    if commit:
        line = f'pip install "attncard @ git+{repository}@{commit}"'
        return [line + ("  # the run had uncommitted changes on top of this commit" if dirty else "")]
    source = f"attncard {version} from {repository}" if repository else f"attncard {version} where you got it"
    if version != "unknown":
        return [
            f"# The run recorded attncard {version} but no commit: its release on PyPI, or where PyPI has "
            f"none, {source}",
            f'pip install "attncard=={version}"',
        ]
    if repository:
        return [
            "# The run recorded no version or commit of attncard: this installs its newest commit",
            f'pip install "attncard @ git+{repository}"',
        ]
    return ["# The run recorded no version, commit or repository of the attncard that made it"]


def module_install_lines(results: Results) -> list[str]:
    r"""Card template 2's install lines for the package of the run's attention module; none for a built-in
    module. A package kept in attncard's repository (`REPOSITORY_PLUGINS`) is installed from there at the
    commit the run records; any other by its name and recorded version, from PyPI, or where its authors
    publish it: the run records the package, not where it came from. Either way the loader refuses a module
    whose source is not the one the run recorded (its sha256).

    Example:
        >>> results.module.name = "sliding_window"  # as a run of the example plugin records it
        >>> results.module.package, results.module.package_version = "attncard-sliding-window", "0.1.0"
        >>> print("\n".join(module_install_lines(results)))
        pip install "attncard-sliding-window @ git+https://github.com/attncard/attncard@...#subdirectory=...
    """
    module = results.module
    if module.package in ("", "attncard"):
        return []
    commit, _ = _recorded_commit(results)
    folder = REPOSITORY_PLUGINS.get(module.package)
    if folder and commit:
        url = f"git+{results.environment.attncard_repository}@{commit}#subdirectory={folder}"
        return [f'pip install "{module.package} @ {url}"  # the attention module {module.name}']
    return [
        f"# The attention module {module.name} comes from the package {module.package} "
        f"{module.package_version}; the run did not record where it came from: from PyPI, or where its "
        "authors publish it (the loader checks its source against the run's sha256)",
        f'pip install "{module.package}=={module.package_version}"',
    ]


def install_commands(results: Results) -> str:
    """The card's install block: the lines of the card template version the run records (1 for none).

    Example:
        >>> print(install_commands(results))  # a run of the built-in `none`, with a recorded commit
        pip install "attncard @ git+https://github.com/attncard/attncard@...
    """
    if results.card_template in (None, 1):
        return "\n".join(filter(None, (install_line(results), module_install_line(results))))
    return "\n".join([*attncard_install_lines(results), *module_install_lines(results)])


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


def render_card(results: Results, plots: list[dict[str, str]] | None = None) -> str:
    """Renders the model card (README.md) of a run.

    Args:
        results: the run's results; `results.manifest` lists the files the card's file table shows.

    Returns:
        The card as Markdown with YAML front matter.

    Raises:
        `jinja2.UndefinedError`: the template uses a figure the results do not have.
        `ValueError`: a figure in the metadata is not finite; results.json's usage snippet or command is not
            the one attncard writes for the run; the card would not have exactly one status line.

    Example:
        >>> card = render_card(Results.load("runs/tiny-gpt2-none-sst2"))
        >>> card.startswith("---"), "**Status: PASS_NO_COMPRESSION**" in card
        (True, True)
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
    template = template_environment().get_template(card_template_files(results).cards[results.schema_version])
    text = template.render(
        r=results,
        usage_code=card_usage_code(results) if results.usage is not None else None,
        command=results.command,  # one of `reproduce_commands`, or the render is refused below
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
        task_title=TASK_TITLES.get(results.dataset.task, results.dataset.task),
        task_citation=TASKS[results.dataset.task].citation,
        glue_citation=GLUE_CITATION,
        hyperparameters=hyperparameters,
        module_spec=module.spec.strip(),
        module_source=(module.folder / "attention.py").read_text(encoding="utf-8").rstrip(),
        module_plots=[plot for plot in plots or [] if plot["file"] not in (SCALING_PLOT, LOSS_PLOT)],
        scaling_plots=[plot for plot in plots or [] if plot["file"] == SCALING_PLOT],
        loss_plots=[plot for plot in plots or [] if plot["file"] == LOSS_PLOT],
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
    problems = rendered_card_problems(results, text)
    if problems:
        raise ValueError(problems[0])
    ModelCard(text)  # parses the front matter as the Hub will; raises on invalid YAML
    return text
