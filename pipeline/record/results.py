"""results.json: every figure of a run, in one versioned schema. The card shows nothing that is not here.

Written as strict JSON (`allow_nan=False`: a NaN is a broken run, not a number). `manifest` holds the
sha256 of every other file of the run folder; results.json cannot hold its own hash.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from . import text
from .comparison import Comparison
from .environment import EnvironmentRecord
from .errors import NonFiniteNumberError, ResultsError, UnknownSchemaError
from .frozen_schemas import FROZEN_SCHEMA_TASKS, check_frozen_provenance
from .json_strict import build, json_default, loads_strict
from .manifest import MAX_RESULTS_BYTES, RESULTS_FILE
from .text import TextFormat

# The version publish writes: 3 counts the layers with LoRA and the attention layers the module changes apart
# (`Parameters`); 4 records the task's official GLUE metric (`Metrics.official`) and, for CoLA, the paired
# bootstrap of the MCC difference (`Comparison.mcc_difference`). Every version in READABLE_SCHEMA_VERSIONS
# loads and renders the card it was published with.
SCHEMA_VERSION = 4
READABLE_SCHEMA_VERSIONS = (2, 3, 4)
# How a run's plots are drawn (`Results.plot_style`, pipeline.card.plots.plot_context): publish records
# PLOT_STYLE; a run without one (published before it was recorded) is drawn the first way.
PLOT_STYLE = 2
PLOT_STYLES = (PLOT_STYLE,)
# The wording of a run's card (`Results.card_template`, pipeline.card.render.CARD_TEMPLATE_FILES): publish
# records CARD_TEMPLATE; a run without one (every run published before it was recorded) is card template 1. A
# download renders the card again with the recorded version, so new wording is a new version, not an edit of a
# run.
CARD_TEMPLATE = 2
CARD_TEMPLATES = (1, CARD_TEMPLATE)
# The first schema that records `Metrics.official`, and the names it may have (the model-index's types). The
# scoring registers how each is computed and shown (pipeline.scoring.metrics.register_official_metric) and
# refuses a name this schema lacks: a new official metric is a name here (and in ONE_CLASS_METRICS when
# it is of one class) and an entry there.
OFFICIAL_METRIC_SCHEMA = 4
OFFICIAL_METRIC_NAMES = ("accuracy", "f1", "matthews_correlation")


# ----------------------------------------------------------------------------------------------------------
# The records of each stage: training, evaluation, scaling, verification, the tensor trace


@dataclass
class TrainConfig:
    """Hyperparameters of LoRA recovery fine-tuning; every field is recorded in results.json."""

    steps: int = field(default=200, metadata={"help": "Optimizer steps."})
    batch_size: int = field(default=16, metadata={"help": "Training rows per step (per process)."})
    lr: float = field(default=2e-4, metadata={"help": "Peak learning rate of AdamW."})
    max_length: int = field(default=128, metadata={"help": "Tokens per row; longer rows are truncated."})
    seed: int = field(
        default=0, metadata={"help": "Seed of the head and LoRA initialisation and data order."}
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "Dropout on the LoRA branch input."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    lr_schedule: str = field(
        default="constant_with_warmup",
        metadata={
            "help": "Learning-rate schedule, a name transformers' `get_scheduler` knows (e.g. linear).",
            "text": text.SCHEDULE,
        },
    )
    warmup_ratio: float = field(default=0.0, metadata={"help": "Share of steps with linear warm-up."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping by global norm."})


@dataclass
class TensorSpec:
    shape: list[int]
    dtype: str = field(metadata={"text": text.DTYPE})

    @classmethod
    def of(cls, tensor) -> TensorSpec:
        """The spec of a `torch.Tensor`."""
        return cls(shape=list(tensor.shape), dtype=str(tensor.dtype).removeprefix("torch."))

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass
class TraceStep:
    """One stage of the traced layer: the operation, its tensor inputs and outputs."""

    stage: str = field(metadata={"text": text.STAGE})
    op: str = field(metadata={"text": text.PROSE})
    inputs: dict[str, TensorSpec] = field(default_factory=dict, metadata={"text_keys": text.WORD})
    outputs: dict[str, TensorSpec] = field(default_factory=dict, metadata={"text_keys": text.WORD})


SCALING_TIMING_METHOD = (
    "wall-clock seconds (time.perf_counter, CUDA synchronised) of each timed pass, after one warm-up pass "
    "per model; module and dense passes run in pairs in the same run, each first in every other pair; each "
    "time is the median of the repeated passes with their minimum and maximum; the speed-up is the median "
    "of the pairs' ratios (dense / module), its range dense minimum / module maximum to dense maximum / "
    "module minimum, and a range that contains 1 is no measurable difference"
)
# Measured-memory passes per side and length of the scaling tables, module and dense alternating: each peak
# is their median. A pass counts torch's allocations (`PeakMemory(exact=True)`), the same on every pass; the
# median is for a module whose path or allocations change from call to call (docs/benchmarks.md).
SCALING_MEMORY_PASSES = 7
SCALING_MEMORY_METHOD = (
    "peak memory growth during a pass: CUDA max_memory_allocated minus the memory allocated before it, or "
    "on the CPU the largest growth of the bytes torch's CPU allocator holds, from the profiler's allocation "
    "events (tensors and kernels' scratch tensors; not memory libraries allocate outside torch); weights and "
    f"inputs are not counted; each peak is the median of {SCALING_MEMORY_PASSES} passes, module and dense "
    "alternating"
)


@dataclass
class ScalingRow:
    """Time and peak memory at one sequence length, the module against dense attention, measured together.

    Attributes:
        n: the sequence length N (tokens per row, no padding).
        repeats: timed pairs of passes, one per side each; each time below is over these.
        module_seconds: median seconds of one pass with the module.
        module_seconds_min: the fastest of those passes.
        module_seconds_max: the slowest.
        dense_seconds: median seconds of one pass of the dense reference.
        dense_seconds_min: the fastest of those passes.
        dense_seconds_max: the slowest.
        module_peak_mb: median peak memory growth of a pass with the module, in MB (None where unmeasurable).
        dense_peak_mb: the same for the dense reference.
        speedup: the median over the timed pairs of the dense pass's time / the module pass's (above 1: the
            module is faster), which need not equal dense_seconds / module_seconds.
        speedup_low: dense_seconds_min / module_seconds_max, the least speed-up the passes allow.
        speedup_high: dense_seconds_max / module_seconds_min, the most; a range [low, high] that contains 1
            is no measurable difference.
        memory_ratio: module_peak_mb / dense_peak_mb (below 1: the module needs less); None when either peak
            is unmeasurable or the dense peak is 0.
    """

    n: int
    repeats: int
    module_seconds: float
    module_seconds_min: float
    module_seconds_max: float
    dense_seconds: float
    dense_seconds_min: float
    dense_seconds_max: float
    module_peak_mb: float | None
    dense_peak_mb: float | None
    speedup: float
    speedup_low: float
    speedup_high: float
    memory_ratio: float | None


@dataclass
class FlopsEstimate:
    """Attention FLOPs of the whole model at one sequence length, dense against the module.

    Attributes:
        n: the sequence length N.
        dense: FLOPs of dense attention, all layers and heads.
        module: FLOPs of the module's attention (and of what it adds around it, see `formula`).
        ratio: module / dense (below 1: the module computes less).
        formula: what was counted, with the numbers it was counted with.
        projections_dense: FLOPs of the q, k, v and o projections of the base model.
        projections_module: the same with the module installed (differs for a module that replaces them).
    """

    n: int
    dense: float
    module: float
    ratio: float
    formula: str = field(metadata={"text": text.PROSE})
    projections_dense: float
    projections_module: float


@dataclass
class ClassScores:
    label: str
    precision: float
    recall: float
    f1: float
    support: int


_OFFICIAL_METRIC_NAME = TextFormat(
    f"one of {', '.join(OFFICIAL_METRIC_NAMES)}", OFFICIAL_METRIC_NAMES.__contains__
)


@dataclass
class OfficialMetric:
    """The task's official GLUE metric of the evaluated split, as the benchmark defines it (schema 4).

    Attributes:
        name: "matthews_correlation" (CoLA), "f1" (MRPC and QQP: the F1 of one class) or "accuracy" (the
            other tasks); `TaskSpec.official_metric` says which.
        value: the metric, from −1 to 1 for the correlation and from 0 to 1 otherwise.
        positive_label: for "f1", the name of the class whose F1 it is ("equivalent" for MRPC); "" otherwise.

    Example:
        >>> OfficialMetric("f1", 0.866, positive_label="equivalent").positive_label
        'equivalent'
    """

    name: str = field(metadata={"text": _OFFICIAL_METRIC_NAME})
    value: float
    positive_label: str = field(default="", metadata={"text": text.empty_or(text.LABEL)})


@dataclass
class Metrics:
    accuracy: float
    f1_macro: float
    f1_weighted: float
    precision_macro: float
    recall_macro: float
    loss: float
    confusion_matrix: list[list[int]]  # rows: true label, columns: predicted label
    per_class: list[ClassScores]
    # Of the predicted label ids, int64 little-endian, in split order.
    predictions_sha256: str = field(metadata={"text": text.SHA256})
    official: OfficialMetric | None = None  # from schema 4 on; None in runs of schemas 2 and 3


EVAL_TIMING_METHOD = (
    "wall-clock time (time.perf_counter) of one pass over the whole split, tokenization included, measured "
    "once (not repeated, so it has no spread); throughput = non-padding tokens / that time"
)


@dataclass
class Efficiency:
    device: str = field(metadata={"text": text.DEVICE})
    # The GPU's name, or the CPU's model name.
    device_name: str = field(metadata={"text": text.MACHINE_NAME})
    torch_threads: int
    peak_memory_mb: float
    peak_memory_method: str = field(metadata={"text": text.PROSE})
    eval_seconds: float
    train_seconds: float
    tokens: int  # non-padding tokens evaluated
    throughput_tokens_per_s: float
    batch_size: int
    timing_method: str = field(metadata={"text": text.PROSE})
    # Measured on synthetic inputs after evaluation, the module against the same model with dense attention;
    # both empty for a module that leaves attention as the model's own (nothing to compare):
    scaling: list[ScalingRow] = field(default_factory=list)  # the whole model, N up to its positions
    layer_scaling: list[ScalingRow] = field(default_factory=list)  # attention layer 0 alone, N up to 4096
    flops: list[FlopsEstimate] = field(default_factory=list)  # attention FLOPs estimate at each scaling N
    scaling_timing_method: str = field(default=SCALING_TIMING_METHOD, metadata={"text": text.PROSE})
    scaling_memory_method: str = field(default=SCALING_MEMORY_METHOD, metadata={"text": text.PROSE})


@dataclass
class Parameters:
    before: int  # the model as loaded, classification head included
    after: int  # the model as deployed: LoRA merged into the weights it adapts
    trainable: int  # LoRA factors, the module's own trained parameters and the classification head
    lora_layers: int  # layers with a LoRA adapter
    attention_layers_changed: int  # attention layers whose computation the module replaces; 0 for `none`
    compression_factor: float  # before / after


@dataclass
class ParametersV2:
    """`Parameters` as schema 2 recorded them: one count of the layers with LoRA and the attention layers the
    module changes together, which its card showed as "Layers adapted by LoRA"."""

    before: int
    after: int
    trainable: int
    layers_changed: int
    compression_factor: float


class Status(StrEnum):
    PASS = "PASS"
    PASS_NO_COMPRESSION = "PASS_NO_COMPRESSION"
    FAIL = "FAIL"


@dataclass
class Verification:
    n: int
    class_counts: dict[str, int]  # label name -> rows of the evaluated split
    majority_label: str
    p0: float
    se: float
    threshold: float
    accuracy: float
    correct: int
    p_value: float  # P(X >= correct) for X ~ Binomial(n, p0)
    wilson_low: float
    wilson_high: float
    compression_factor: float
    status: Status
    reasons: list[str]


@dataclass
class SplitResult:
    """A task's second evaluated split (MNLI's `validation_mismatched`; schema 4), scored and gated as the
    first: its own metrics, predictions (`predictions_<split>.csv`) and 3·SE gate. The run's status
    (`Results.verification.status`) is FAIL when either gate fails.

    Attributes:
        split: its name on the Hub (`TaskSpec.second_split`).
        metrics: every quality figure of the split, the official metric included.
        verification: its own gate against its majority class.
    """

    split: str = field(metadata={"text": text.LOWERCASE_NAME})
    metrics: Metrics
    verification: Verification


@dataclass
class StockLoad:
    """The run's adapter as stock tools load it, evaluated on the same split: peft's
    `PeftModel.from_pretrained` on the base model with transformers' own attention, without the attncard
    module (what the Hub's "Use in PEFT" builds). For a module that changes attention this is another model.

    Attributes:
        same_model: the module keeps the model's own attention (`none`): stock tools build the model that was
            evaluated, so nothing is measured.
        accuracy: accuracy on the evaluated split with stock attention; None when nothing was measured or
            stock peft could not load the adapter.
        predictions_sha256: of those predicted label ids, as `Metrics.predictions_sha256`; "" when none.
        adapter_weights: tensors in the adapter file.
        ignored_weights: of those, the ones stock peft loads into nothing, without a warning: the module's own
            weights (`modules_to_save` of submodules the stock model lacks).
        error: the first line of the error stock peft raised while loading; "" when it loaded.
    """

    same_model: bool = False
    accuracy: float | None = None
    predictions_sha256: str = field(default="", metadata={"text": text.OPTIONAL_SHA256})
    adapter_weights: int = 0
    ignored_weights: int = 0
    error: str = field(default="", metadata={"text": text.OPTIONAL_PROSE})




# ----------------------------------------------------------------------------------------------------------
# results.json


@dataclass
class ModelRecord:
    # As given on the command line: alias, Hub id or folder.
    name: str = field(metadata={"text": text.MODEL_NAME})
    model_id: str = field(metadata={"text": text.MODEL_ID})  # Hub id of the base weights
    revision: str = field(metadata={"text": text.REVISION})  # Hub commit, or sha256 of the weight files
    family: str = field(metadata={"text": text.LOWERCASE_NAME})  # transformers model_type
    # The Hub's licence id the base model's card declares, or "other".
    license: str = field(metadata={"text": text.LICENSE})
    # With `license: other`: the licence's id and URL as the base model's card names them; "" when its card
    # named none (or declared no licence at all). The run's LICENSE file says which.
    license_name: str = field(default="", metadata={"text": text.LICENSE_NAME})
    license_link: str = field(default="", metadata={"text": text.HTTPS_URL})
    # From the base model's config: positions (the longest sequence it reads), layers, hidden size, attention
    # heads and vocabulary; and the printout of the trained model (`repr`), LoRA and the module included.
    max_position_embeddings: int | None = None
    num_layers: int = 0
    hidden_size: int = 0
    num_heads: int = 0
    vocab_size: int = 0
    printout: str = field(default="", metadata={"text": text.PRINTOUT})


@dataclass
class ModuleRecord:
    name: str = field(metadata={"text": text.LOWERCASE_NAME})
    config: dict[str, typing.Any] = field(default_factory=dict, metadata={"text_walk": text.value_words})
    config_help: dict[str, str] = field(default_factory=dict)  # field -> its help text, for the card
    citation: str = ""
    bibtex: str = ""  # the BibTeX entries of the papers the module implements
    # The module's source files -> sha256.
    source: dict[str, str] = field(
        default_factory=dict, metadata={"text_keys": text.FILE_NAME, "text": text.SHA256}
    )
    # Where the module came from: `attncard` for a built-in one, else the package registering it (entry-point
    # group `attncard.modules`), its version, and the sha256 of its source (`modules.source_sha256`: the
    # `*.py` files and spec.md of its folder). Empty in runs written before attncard recorded them.
    package: str = field(default="", metadata={"text": text.MODULE_PACKAGE})
    package_version: str = field(default="", metadata={"text": text.OPTIONAL_VERSION})
    source_sha256: str = field(default="", metadata={"text": text.OPTIONAL_SHA256})
    # Learned spans, ranks, … of the run.
    stats: dict[str, typing.Any] = field(default_factory=dict, metadata={"text_walk": text.value_words})
    trace: list[TraceStep] = field(default_factory=list)  # attention layer 0 in one real forward pass


def _files_texts(where: str, files: dict[str, dict[str, str]]) -> typing.Iterator[text.TextItem]:
    """The texts of `dataset.files`: each split's name, and the keys and values of its file's entry (the path
    a file in a GLUE folder, the other values words)."""
    for split, file in files.items():
        yield f"{where} key {split!r}", split, text.LOWERCASE_NAME
        for key, value in file.items():
            yield f"{where}.{split} key {key!r}", key, text.LOWERCASE_NAME
            yield f"{where}.{split}.{key}", value, text.WORD if key != "path" else text.GLUE_FILE


@dataclass
class DatasetRecord:
    task: str = field(metadata={"text": text.LOWERCASE_NAME})
    # nyu-mll/glue, or glue-tsv for a local folder.
    dataset_id: str = field(metadata={"text": text.DATASET_ID})
    config: str = field(metadata={"text": text.LOWERCASE_NAME})
    revision: str = field(metadata={"text": text.REVISION})
    split: str = field(metadata={"text": text.LOWERCASE_NAME})  # the evaluated split, as named on the Hub
    label_names: list[str] = field(metadata={"text": text.LABEL})
    train_rows: int
    validation_rows: int
    # Split -> its file's path, sha256, …
    files: dict[str, dict[str, str]] = field(default_factory=dict, metadata={"text_walk": _files_texts})
    # Per split ("train" and the evaluated split): rows, rows per label and token lengths with the model's
    # tokenizer; and the first rows of the evaluated split, as read.
    statistics: dict[str, SplitStatistics] = field(
        default_factory=dict, metadata={"text_keys": text.LOWERCASE_NAME}
    )
    samples: list[SampleRow] = field(default_factory=list)


@dataclass
class TokenLengths:
    """Tokens per row with the run's tokenizer, special tokens included and before truncation."""

    min: int
    mean: float
    max: int
    truncated: int  # rows longer than the run's max_length, cut to it in training and evaluation


@dataclass
class SplitStatistics:
    rows: int
    label_counts: dict[str, int]  # label name -> rows
    tokens: TokenLengths


@dataclass
class SampleRow:
    index: int  # the row's position in the split
    texts: dict[str, str] = field(metadata={"text_keys": text.LOWERCASE_NAME})  # text column -> text
    label: str


@dataclass
class TrainingRecord:
    hyperparameters: TrainConfig
    lora_target_modules: list[str] = field(metadata={"text": text.TARGET_MODULE})
    losses: list[float]  # training loss of every step
    final_loss: float  # mean task loss of the last `final_loss_steps` steps: one step's loss is noise
    final_loss_steps: int
    seconds: float
    device: str = field(metadata={"text": text.DEVICE})
    penalties: list[float] = field(default_factory=list)  # the module's penalty of every step, if any
    mixed_precision: str = field(default="no", metadata={"text": text.MIXED_PRECISION})
    log: list[LoggedStep] = field(default_factory=list)  # the losses, averaged over equal stretches of steps


@dataclass
class LoggedStep:
    """The training loss averaged over the steps since the previous logged step (`first_step` to `step`)."""

    step: int
    first_step: int
    loss: float


def _label_line(results: Results) -> TextFormat:
    """The format of `usage.output`: what the usage snippet printed, one of the labels and a line break."""
    labels = set(results.dataset.label_names)
    return TextFormat(
        "a label name and a line break", lambda value: value.endswith("\n") and value[:-1] in labels
    )


@dataclass
class UsageRecord:
    """The card's usage snippet and what it printed when it was run on the finished run folder."""

    code: str
    output: str = field(metadata={"text": _label_line})


@dataclass
class Results:
    """One run, as results.json holds it."""

    schema_version: int
    repo_name: str = field(metadata={"text": text.HUB_NAME})
    command: str  # the command that reproduces the run
    started_at: str = field(metadata={"text": text.TIME})  # ISO 8601, UTC
    finished_at: str = field(metadata={"text": text.TIME})
    model: ModelRecord
    module: ModuleRecord
    dataset: DatasetRecord
    training: TrainingRecord
    metrics: Metrics
    efficiency: Efficiency
    parameters: Parameters | ParametersV2  # ParametersV2 in schema 2 only
    verification: Verification
    environment: EnvironmentRecord
    # Path in the run folder -> sha256.
    manifest: dict[str, str] = field(
        default_factory=dict, metadata={"text_keys": text.RUN_FILE, "text": text.SHA256}
    )
    # The Hub repository, when publish was given one.
    repo_id: str | None = field(default=None, metadata={"text": text.HUB_ID})
    usage: UsageRecord | None = None
    stock: StockLoad | None = None  # absent in runs written before it was measured
    # The paired verdict against the dense baseline; None for `none` itself (the baseline) and for runs
    # written before it was recorded. A module run with no baseline found has one with `baselines` empty.
    comparison: Comparison | None = None
    # A task with a second evaluated split (MNLI's mismatched, from schema 4 on): its metrics and gate.
    second_split: SplitResult | None = None
    # How the plots were drawn (PLOT_STYLE); None in runs published before it was recorded, whose plots are
    # drawn again the first way.
    plot_style: int | None = None
    # The card template version the card was rendered with (CARD_TEMPLATE); None in runs published before it
    # was recorded, whose cards are card template 1.
    card_template: int | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """Strict JSON: raises `ValueError` on NaN or infinity."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False, default=json_default) + "\n"

    def save(self, run_dir: Path) -> Path:
        path = Path(run_dir) / RESULTS_FILE
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    @classmethod
    def from_dict(cls, data: dict) -> Results:
        """Builds results from their dict form; raises [`ResultsError`] on bad fields, and
        [`UnknownSchemaError`] on an unknown schema or one the run cannot have: a frozen schema (2, 3) with a
        task it did not record (`FROZEN_SCHEMA_TASKS`) or an attncard that did not write it
        (`FROZEN_SCHEMA_COMMITS`, `FROZEN_SCHEMA_ATTNCARD_VERSIONS`)."""
        version = data.get("schema_version") if isinstance(data, dict) else None
        if version not in READABLE_SCHEMA_VERSIONS:
            *earlier, last = READABLE_SCHEMA_VERSIONS
            readable = f"{', '.join(map(str, earlier))} and {last}"
            raise UnknownSchemaError(
                f"results.json has schema version {version!r}; this attncard reads versions {readable}: "
                "upgrade attncard (pip install -U attncard), or use the attncard version that wrote the run"
            )
        results = build(cls, data, "results")
        task = results.dataset.task
        if task not in FROZEN_SCHEMA_TASKS.get(version, (task,)):
            # UnknownSchemaError: no advice to read the run with the attncard of its schema, which accepts it.
            raise UnknownSchemaError(
                f"results.json: dataset.task is {task!r}, which no run of schema {version} records: those "
                f"are of {', '.join(FROZEN_SCHEMA_TASKS[version])}, one evaluated split each; a task gated "
                f"on two splits (mnli) needs schema {OFFICIAL_METRIC_SCHEMA} or later: the run claims an "
                "older schema than it can have, do not use this checkpoint"
            )
        expected = ParametersV2 if version == 2 else Parameters
        if not isinstance(results.parameters, expected):
            fields = ", ".join(f.name for f in dataclasses.fields(expected))
            raise ResultsError(f"results.json: parameters of schema {version} hold exactly {fields}")
        second = results.second_split
        if version < OFFICIAL_METRIC_SCHEMA and second is not None:
            raise ResultsError(
                f"results.json: second_split is recorded from schema {OFFICIAL_METRIC_SCHEMA} on, not in "
                f"schema {version}"
            )
        if second is not None and (second.metrics.official is None) != (results.metrics.official is None):
            raise ResultsError(
                "results.json: second_split.metrics records an official metric as metrics does"
            )
        if (results.metrics.official is None) == (version >= OFFICIAL_METRIC_SCHEMA):
            has = "has no" if results.metrics.official is None else "has"
            raise ResultsError(
                f"results.json: metrics {has} official metric; schema {OFFICIAL_METRIC_SCHEMA} and later "
                "record one, earlier schemas none"
            )
        if version < OFFICIAL_METRIC_SCHEMA and results.comparison and results.comparison.mcc_difference:
            raise ResultsError(
                f"results.json: comparison.mcc_difference is recorded from schema {OFFICIAL_METRIC_SCHEMA} "
                f"on, not in schema {version}"
            )
        if results.plot_style is not None and results.plot_style not in PLOT_STYLES:
            raise UnknownSchemaError(
                f"results.json: plot_style is {results.plot_style!r}; this attncard draws plot styles "
                f"{', '.join(map(str, PLOT_STYLES))}: upgrade attncard (pip install -U attncard)"
            )
        if results.card_template is not None and results.card_template not in CARD_TEMPLATES:
            raise UnknownSchemaError(
                f"results.json: card_template is {results.card_template!r}; this attncard renders card "
                f"templates {', '.join(map(str, CARD_TEMPLATES))}: upgrade attncard (pip install -U attncard)"
            )
        text.check_text_formats(results)
        check_names(results)
        if version in FROZEN_SCHEMA_TASKS:
            check_frozen_provenance(version, results.environment)
        return results

    @classmethod
    def load(cls, path: str | Path) -> Results:
        """Reads a results.json file (or the one in a run folder).

        Example:
            >>> results = Results.load("runs/tiny-gpt2-none-sst2")
            >>> results.verification.status
            <Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>
        """
        path = Path(path)
        if path.is_dir():
            path = path / RESULTS_FILE
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_RESULTS_BYTES + 1)
        except FileNotFoundError as error:
            raise ResultsError(f"{path}: not found; is this a run folder written by publish?") from error
        if len(raw) > MAX_RESULTS_BYTES:
            raise ResultsError(
                f"{path}: larger than {MAX_RESULTS_BYTES >> 20} MiB, far more than any run's results.json; "
                "do not use this checkpoint"
            )
        try:
            data = loads_strict(raw.decode("utf-8"))
        except (json.JSONDecodeError, NonFiniteNumberError, ValueError) as error:
            raise ResultsError(f"{path}: not valid strict JSON ({error})") from error
        return cls.from_dict(data)


# A git commit (or blob) id: 40 lowercase hex digits; match with `fullmatch`.
def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


LOGGED_STEPS = 20  # rows of the card's table of logged training steps


def training_log(losses: list[float], rows: int = LOGGED_STEPS) -> list[LoggedStep]:
    """The training losses averaged over `rows` equal stretches of steps (the last may be shorter), as a
    trainer logs them: one step's loss is the noise of one batch.

    Example:
        >>> [(s.first_step, s.step, s.loss) for s in training_log([4.0, 2.0, 1.0, 1.0, 0.5], rows=2)]
        [(1, 3, 2.3333333333333335), (4, 5, 0.75)]
    """
    every = max(1, -(-len(losses) // rows))
    return [
        LoggedStep(step=min(start + every, len(losses)), first_step=start + 1, loss=sum(part) / len(part))
        for start in range(0, len(losses), every)
        if (part := losses[start : start + every])
    ]


# ----------------------------------------------------------------------------------------------------------
# The names results.json holds agree with each other


def check_names(results: Results) -> None:
    """The names results.json holds agree with each other: a module's package names its version, every label
    is named once in `dataset.label_names`, and every other field that names a label names one of those."""
    module = results.module
    if module.package not in ("", "attncard") and not module.package_version:
        raise ResultsError(
            f"results.json: module.package is {module.package!r} with no module.package_version; a run names "
            "the version of the package its module comes from"
        )
    labels = results.dataset.label_names
    if not labels or len(set(labels)) != len(labels):
        raise ResultsError("results.json: dataset.label_names must name each label once")
    official_label_problems(results)
    officials = _officials(results)
    second = results.second_split
    named = [
        ("verification.class_counts", set(results.verification.class_counts)),
        ("verification.majority_label", {results.verification.majority_label}),
        *(
            (f"dataset.statistics.{split}.label_counts", set(s.label_counts))
            for split, s in results.dataset.statistics.items()
        ),
        *(
            (f"dataset.samples[{i}].label", {sample.label})
            for i, sample in enumerate(results.dataset.samples)
        ),
        *_positive_label("metrics", officials),
    ]
    if second is not None:
        named += [
            ("second_split.verification.class_counts", set(second.verification.class_counts)),
            ("second_split.verification.majority_label", {second.verification.majority_label}),
            ("second_split.metrics.per_class", {scores.label for scores in second.metrics.per_class}),
            *_positive_label("second_split.metrics", officials),
        ]
    for where, names in named:
        if not names <= set(labels):
            raise ResultsError(
                f"results.json: {where} names {sorted(names - set(labels))[0][:40]!r}, which is not one of "
                f"dataset.label_names {labels}"
            )


def _officials(results: Results) -> dict[str, OfficialMetric | None]:
    """The official metric of each evaluated split, by where results.json holds it."""
    second = results.second_split
    return {
        "metrics": results.metrics.official,
        "second_split.metrics": second.metrics.official if second is not None else None,
    }


# The official metrics of one class, whose `positive_label` names the class, and how a refusal names one.
ONE_CLASS_METRICS = {"f1": "an F1"}


def official_label_problems(results: Results) -> None:
    """Raises [`ResultsError`] when an official metric's `positive_label` does not fit its name: an F1 names
    the class whose F1 it is, no other metric names one."""
    labels = results.dataset.label_names
    for where, official in _officials(results).items():
        if official is None:
            continue
        # An F1 is the F1 of one class (the card and the model-index name it); accuracy and MCC have none.
        one_class = ONE_CLASS_METRICS.get(official.name)
        if one_class and not official.positive_label:
            raise ResultsError(
                f"results.json: {where}.official is {one_class} of no class: its positive_label must name "
                f"one of dataset.label_names {labels}"
            )
        if not one_class and official.positive_label:
            raise ResultsError(
                f"results.json: {where}.official is {official.name}, which has no positive_label, but names "
                f"{official.positive_label[:40]!r}"
            )


def _positive_label(where: str, officials: dict[str, OfficialMetric | None]) -> list[tuple[str, set[str]]]:
    """The label an official metric of `where` names, as `check_names` checks names: none, or one."""
    official = officials[where]
    return (
        [(f"{where}.official.positive_label", {official.positive_label})]
        if official and official.positive_label
        else []
    )


__all__ = [
    "OFFICIAL_METRIC_NAMES",
    "OFFICIAL_METRIC_SCHEMA",
    "ONE_CLASS_METRICS",
    "READABLE_SCHEMA_VERSIONS",
    "SCHEMA_VERSION",
    "ClassScores",
    "DatasetRecord",
    "Efficiency",
    "LoggedStep",
    "Metrics",
    "ModelRecord",
    "ModuleRecord",
    "OfficialMetric",
    "Parameters",
    "ParametersV2",
    "Results",
    "SampleRow",
    "SplitResult",
    "SplitStatistics",
    "Status",
    "StockLoad",
    "TokenLengths",
    "TrainingRecord",
    "Verification",
    "check_names",
    "official_label_problems",
    "training_log",
]
