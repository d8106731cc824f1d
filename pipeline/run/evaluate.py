"""Stage 4 — evaluate: quality on the task's full validation split, and efficiency, all measured.

Quality: accuracy, F1 (macro and weighted), precision and recall (macro), loss, the confusion matrix and
per-class scores, computed from the logits by [`pipeline.scoring.metrics`] (which imports no torch).
Efficiency: peak memory during evaluation (CUDA's max allocated on a GPU; on the CPU the growth of the
process's peak resident set), throughput in non-padding tokens per second, evaluation time. Parameters: before
fine-tuning, after (as deployed, LoRA merged), trainable, layers changed, and the compression factor
before/after. For a module that changes attention, also the accuracy of the adapter as stock tools load it,
with the model's own attention ([`stock_load`]).
"""

from __future__ import annotations

import copy
import platform
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from peft import PeftModel
from peft.utils import get_peft_model_state_dict
from safetensors import safe_open
from tqdm.auto import tqdm

from ...modules.base import sdpa_copy
from ...modules.measure import PeakMemory
from ...modules.trace import record_trace
from ..record.errors import first_line
from ..record.results import EVAL_TIMING_METHOD, Efficiency, Metrics, Parameters, StockLoad, TraceStep
from ..scoring.metrics import label_metrics, quality_metrics
from .data import TaskData
from .models import load_model, tokenize
from .scaling import attention_flops, default_lengths, measure_layer_scaling, measure_model_scaling
from .train import TrainResult

# Whole-model scaling stops here even for models with longer positions (a 40k-position Qwen would take
# hours on a CPU); the single-layer table goes to 4096 regardless.
MAX_SCALING_POSITIONS = 2048


@dataclass
class SplitEvaluation:
    """A second evaluated split (MNLI's mismatched genres), scored as the first: its metrics, gold labels,
    predictions and float32 logits, in split order (publish writes them to `predictions_<split>.csv`)."""

    split: str
    metrics: Metrics
    labels: list[int]
    predictions: list[int]
    logits: torch.Tensor


@dataclass
class EvalResult:
    """What evaluation measured, plus the trained model it measured (for the stages after)."""

    trained: TrainResult
    metrics: Metrics
    efficiency: Efficiency
    parameters: Parameters
    labels: list[int]  # gold labels of the evaluated split, in order
    predictions: list[int]
    module_stats: dict  # what the trained module reports about itself (learned spans, ranks, …)
    example: dict[str, str]  # the text columns of the first evaluated row, for the card's usage snippet
    trace: list[TraceStep]  # one real forward pass through attention layer 0
    stock: StockLoad | None = None  # the adapter as stock tools load it (see `stock_load`)
    # float32 `(rows, labels)` logits of the evaluated split, in order: publish writes them to predictions.csv
    # (pipeline.checks.predictions). None only in an EvalResult built by hand without them, which publish
    # refuses.
    logits: torch.Tensor | None = None
    second: SplitEvaluation | None = None  # the task's second evaluated split, when it has one


def _memory_method(memory: PeakMemory) -> str:
    if memory.device.type == "cuda":
        return "CUDA max_memory_allocated during evaluation, minus memory allocated before it"
    if memory.block_only:
        return "CPU: growth of the process peak RSS during evaluation (Linux VmHWM, reset before)"
    return "CPU: growth of the process lifetime peak RSS during evaluation (getrusage)"


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name as the kernel reports it."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or platform.machine()


def dense_reference(trained: TrainResult) -> torch.nn.Module:
    """The fine-tuned model with the model's own (sdpa) attention instead of the module, for the scaling
    tables: the module's `dense_reference` (by default a copy of the model on sdpa), which may load the base
    model again when the installed model cannot be turned back into the dense one."""
    device = next(trained.model.parameters()).device

    def load_base() -> torch.nn.Module:
        reloaded = load_model(
            trained.loaded.source or trained.loaded.name, trained.model.config.id2label.values()
        )
        return reloaded.model.to(device).eval()

    if trained.module is None:
        return sdpa_copy(trained.model, load_base)
    return trained.module.measurement.dense_reference(trained.model, load_base)


def stock_load(trained: TrainResult, data: TaskData, batch_size: int = 64) -> StockLoad:
    """Loads the trained adapter as stock tools do and evaluates it on `data.validation`: what a user gets
    from the Hub's "Use in PEFT" or `PeftModel.from_pretrained` on the base model.

    The adapter is saved as publish saves it and loaded by peft ([`evaluate_stock`]) into the base model
    freshly loaded as [`pipeline.run.models.load_model`] loads it (same labels, transformers' own sdpa
    attention), without the attncard module. For a module that keeps the model's own attention
    (`claims.changes_attention` False, as `none`) the stock model is the evaluated one: nothing is loaded and
    the record says `same_model`.

    Args:
        trained: the result of [`pipeline.run.train.train`].
        data: the task; its validation split is evaluated in order, as [`evaluate`] does.
        batch_size: rows per forward pass.

    Returns:
        A [`StockLoad`].

    Example:
        >>> stock_load(trained, data).same_model  # trained with `none`, the model's own attention
        True
    """
    module = trained.module
    if module is None or not module.claims.changes_attention:
        return StockLoad(same_model=True)
    device = next(trained.model.parameters()).device
    # The base model's new head draws random values (overwritten by the adapter's): the caller's random
    # state is left as it was.
    with tempfile.TemporaryDirectory(prefix="attncard-stock-") as folder, torch.random.fork_rng(devices=[]):
        trained.model.save_pretrained(folder, save_embedding_layers=False)
        base = load_model(
            trained.loaded.source or trained.loaded.name, list(trained.model.config.id2label.values())
        ).model.to(device)
        tokenizer, max_length = trained.loaded.tokenizer, trained.config.max_length
        return evaluate_stock(base, Path(folder), tokenizer, data, max_length, batch_size, progress=True)


def evaluate_stock(
    base: torch.nn.Module,
    folder: Path,
    tokenizer,
    data: TaskData,
    max_length: int,
    batch_size: int = 64,
    adapter_config: object | None = None,
    *,
    progress: bool = False,
) -> StockLoad:
    """Loads the adapter in a run folder into `base` with peft's `PeftModel.from_pretrained`, as stock tools
    do, and evaluates the result on `data.validation`.

    peft loads a saved weight into nothing, silently, when the model lacks its submodule (the attncard
    module's own `modules_to_save`): those are counted in `ignored_weights`. When peft raises instead, the
    first line of its error is recorded and nothing is measured.

    Args:
        base: the base model with transformers' own attention and the run's labels, in eval mode.
        folder: holds `adapter_model.safetensors` and `adapter_config.json`.
        tokenizer, max_length: as the run evaluated, see [`classify`].
        data: the task; its validation split is evaluated in order.
        batch_size: rows per forward pass.
        adapter_config: the adapter's config, when already read (and checked) from the folder.
        progress: show a progress bar of the evaluation.

    Returns:
        A [`StockLoad`] with the accuracy and predictions hash, or the error.
    """
    with safe_open(folder / "adapter_model.safetensors", framework="pt") as handle:
        stored = set(handle.keys())
    try:
        stock = PeftModel.from_pretrained(base, str(folder), config=adapter_config, is_trainable=False)
    except Exception as error:  # whatever stock peft raises is the fact measured, not a bug here
        return StockLoad(adapter_weights=len(stored), error=first_line(error))
    loaded = set(get_peft_model_state_dict(stock, save_embedding_layers=False))
    logits, _ = classify(stock, tokenizer, data, max_length, batch_size, progress=progress, desc="stock peft")
    metrics = label_metrics(
        list(data.validation["label"]), logits.argmax(dim=-1).tolist(), data.spec.label_names
    )
    return StockLoad(
        accuracy=metrics.accuracy,
        predictions_sha256=metrics.predictions_sha256,
        adapter_weights=len(stored),
        ignored_weights=len(stored - loaded),
    )


def count_deployed_parameters(model: torch.nn.Module) -> int:
    """Parameters of the model as it would be deployed: LoRA merged into the layers it adapts."""
    merged = copy.deepcopy(model).merge_and_unload()
    return sum(p.numel() for p in merged.parameters())


def classify(
    model: torch.nn.Module,
    tokenizer,
    data: TaskData,
    max_length: int,
    batch_size: int = 64,
    progress: bool = False,
    desc: str = "evaluate",
) -> tuple[torch.Tensor, list[int]]:
    """Runs a classifier over every row of `data.validation`, in order: the one prediction loop, for
    evaluation and for a downloaded checkpoint alike.

    Args:
        model: a sequence classifier (peft-wrapped or not); put in eval mode.
        tokenizer: its tokenizer.
        data: the task; its text columns are read.
        max_length: tokens per row, longer rows truncated, as in training.
        batch_size: rows per forward pass.
        progress: show a progress bar.
        desc: what the progress bar says it is doing.

    Returns:
        `(logits, lengths)`: float logits `(rows, labels)` on the CPU, and each row's non-padding token count.

    Example:
        >>> logits, lengths = classify(model, tokenizer, data, max_length=128)
        >>> logits.shape, len(lengths) == len(data.validation)
        (torch.Size([40, 2]), True)
    """
    device = next(model.parameters()).device
    model.eval()
    validation = data.validation
    batches, lengths = [], []
    starts = range(0, len(validation), batch_size)
    with torch.inference_mode():
        for start in tqdm(starts, desc=desc, unit="batch", disable=not progress):
            rows = validation[start : start + batch_size]
            batch = tokenize(tokenizer, rows, data.spec.text_columns, max_length).to(device)
            lengths += batch["attention_mask"].sum(dim=1).tolist()
            batches.append(model(**batch).logits.float().cpu())
    labels = len(data.spec.label_names)
    return (torch.cat(batches) if batches else torch.empty(0, labels)), lengths


def evaluate(trained: TrainResult, data: TaskData, batch_size: int = 64) -> EvalResult:
    """Evaluates a fine-tuned model on every row of the task's validation split.

    Args:
        trained: the result of [`pipeline.run.train.train`].
        data: the task; `data.validation` is evaluated in order.
        batch_size: rows per forward pass (does not change the results on the CPU).

    Returns:
        An [`EvalResult`] with metrics, efficiency and parameter counts.

    Example:
        >>> result = evaluate(trained, data)  # the training the workspace's run recorded
        >>> len(result.predictions), result.metrics.accuracy == results.metrics.accuracy
        (40, True)
        >>> result.logits.dtype, tuple(result.logits.shape)
        (torch.float32, (40, 2))
    """
    model, tokenizer = trained.model, trained.loaded.tokenizer
    device = next(model.parameters()).device
    spec = data.spec
    validation = data.validation

    with PeakMemory(device) as memory:
        started = time.perf_counter()
        max_length = trained.config.max_length
        logits, lengths = classify(model, tokenizer, data, max_length, batch_size, progress=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - started
    tokens = sum(lengths)

    labels = list(validation["label"])
    official = (spec.official_metric, spec.positive_label)
    metrics = quality_metrics(logits.numpy(), labels, spec.label_names, *official)
    y_true, y_pred = np.asarray(labels), logits.argmax(dim=-1).numpy()
    efficiency = Efficiency(
        device=str(device),
        device_name=device_name(device),
        torch_threads=torch.get_num_threads(),
        peak_memory_mb=memory.peak_mb,
        peak_memory_method=_memory_method(memory),
        eval_seconds=seconds,
        train_seconds=trained.seconds,
        tokens=tokens,
        throughput_tokens_per_s=tokens / seconds,
        batch_size=batch_size,
        timing_method=EVAL_TIMING_METHOD,
    )
    scaling_lengths = default_lengths(model.config, cap=MAX_SCALING_POSITIONS)
    if trained.module is not None and trained.module.claims.changes_attention:
        # A module that keeps the model's own attention would be timed against itself: noise, not a result.
        reference = dense_reference(trained)
        efficiency.scaling = measure_model_scaling(model, reference, lengths=scaling_lengths, progress=True)
        # Layer 0 at LAYER_LENGTHS.
        efficiency.layer_scaling = measure_layer_scaling(model, trained.module, progress=True)
        del reference
    efficiency.flops = [attention_flops(model, trained.module, n) for n in scaling_lengths]

    after = count_deployed_parameters(model)
    parameters = Parameters(
        before=trained.base_parameters,
        after=after,
        trainable=trained.trainable_parameters,
        lora_layers=trained.lora_layers,
        attention_layers_changed=trained.attention_layers_changed,
        compression_factor=trained.base_parameters / after,
    )
    second = None
    if data.second is not None:  # scored as the first split; speed and memory are measured on the first
        second_logits, _ = classify(
            model,
            tokenizer,
            data.second_split_data(),
            max_length,
            batch_size,
            progress=True,
            desc=spec.second_split,
        )
        second_labels = list(data.second["label"])
        second = SplitEvaluation(
            split=spec.second_split,
            metrics=quality_metrics(second_logits.numpy(), second_labels, spec.label_names, *official),
            labels=second_labels,
            predictions=second_logits.argmax(dim=-1).tolist(),
            logits=second_logits,
        )
    module = trained.module
    # The trace runs on the first two rows: a real batch, with padding when their lengths differ.
    first_rows = tokenize(tokenizer, validation[:2], spec.text_columns, trained.config.max_length).to(device)
    return EvalResult(
        trained=trained,
        metrics=metrics,
        efficiency=efficiency,
        parameters=parameters,
        labels=y_true.tolist(),
        predictions=y_pred.tolist(),
        module_stats=module.measurement.stats(model, lengths) if module and module.measurement.stats else {},
        trace=record_trace(model, dict(first_rows)) if module is not None else [],
        example={column: validation[0][column] for column in spec.text_columns},
        stock=stock_load(trained, data, batch_size),
        logits=logits,
        second=second,
    )
