"""Sequence-length scaling for the card: time and peak memory of a model with an attention module against the
same model without it, for a whole model and for one attention layer alone, plus an attention-FLOPs estimate.

Every figure is measured in one run: at each length N the module and the dense reference are warmed up,
their peak memory is the median of `MEMORY_PASSES` alternating passes each, and their timed passes
alternate in pairs, so that whatever slows the machine down hits both and the ratios stay meaningful. Each
time is the median of `repeats` passes (by default `MODEL_REPEATS` for the whole model, `REPEATS` for a
layer) with their minimum and maximum; each speed-up is the median of the pairs' ratios, with the range the
times allow (see [`measure_pair`]): a range that contains 1 is no measurable difference.

- [`measure_model_scaling`]: whole forward passes over synthetic token ids, N = 128, 256, … up to the model's
  maximum positions (512 for MiniLM).
- [`measure_layer_scaling`]: layer 0's attention function on synthetic q, k, v, up to N = 4096 (beyond the
  model's own maximum: no position embeddings are involved).
- [`attention_flops`]: a hand-checkable estimate of the attention FLOPs of the whole model at length N, dense
  against the module, with the projection FLOPs, which a module that factorises the projections changes.

What is module-specific comes from the module's [`AttentionModule`]: its FLOPs count (`flops`,
`projection_flops`), its dense reference (`dense_reference`) and its single-layer call (`layer_attention`).

Peak memory is the growth during one pass: on CUDA `torch.cuda.max_memory_allocated` minus the memory
allocated before the pass; on the CPU the largest growth of the bytes torch's allocator holds, from the
profiler's allocation events (`modules.measure.PeakMemory(exact=True)`), as in `pipeline/study/bench.py`.
Weights and inputs allocated before the pass are not counted.

Example:
    >>> from attncard.modules import get_module
    >>> module = get_module("none")  # any module: the pipeline asks it, never names it
    >>> model = module.apply(model, module.config_class())  # a tiny BERT of 160 positions
    >>> reference = module.measurement.dense_reference(model, load_base)  # the same model on sdpa
    >>> rows = measure_model_scaling(model, reference, lengths=[64, 128], repeats=3)
    >>> [row.n for row in rows], [row.repeats for row in rows]
    ([64, 128], [3, 3])
    >>> [row.speedup_low <= row.speedup <= row.speedup_high for row in rows]  # the range holds the median
    [True, True]
"""

from __future__ import annotations

import contextlib
import functools
import statistics
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from ...modules.base import (
    AttentionModule,
    attention_layers,
    attention_shape,
    call_attention,
    dense_attention_flops,
    dense_projection_flops,
    family_layout,
    implementation_name,
    unwrap_peft,
)
from ...modules.measure import peak_memory_mb, wall_seconds
from ..record.results import SCALING_MEMORY_PASSES, FlopsEstimate, ScalingRow

SMALLEST_DEFAULT_LENGTH = 128
# Timed passes per side and length of one layer: each time is their median, with their minimum and maximum.
REPEATS = 9
# The same for the whole model, whose passes are short and whose ratio is the noisiest: enough pairs that the
# speed-up of a model timed against its own copy moves by 1–2% from run to run (docs/benchmarks.md).
MODEL_REPEATS = 61
# Measured-memory passes per side and length, alternating: each peak is their median (see results.py).
MEMORY_PASSES = SCALING_MEMORY_PASSES
LAYER_LENGTHS = (512, 1024, 2048, 4096)
SPECIAL_ID_FIELDS = (
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "sep_token_id",
    "cls_token_id",
    "mask_token_id",
    "unk_token_id",
    "decoder_start_token_id",
)
# ----------------------------------------------------------------------------------------------------------
# Shapes, lengths and inputs


def max_positions(config) -> int:
    """The longest sequence the model's position embeddings accept, without padding.

    `max_position_embeddings` (GPT-2's `n_positions` under that name), less `pad_token_id + 1` for families
    whose position ids start after the padding index (`FamilyLayout.positions_after_padding`, RoBERTa):
    514 − 2 = 512 for roberta-base.

    Args:
        config: a transformers model config of a family in `modules.base.FAMILIES`.

    Returns:
        The largest usable N.

    Raises:
        [`UnsupportedModelError`]: the family is not in `modules.base.FAMILIES`.

    Example:
        >>> from transformers import RobertaConfig
        >>> max_positions(RobertaConfig(max_position_embeddings=514, pad_token_id=1))
        512
    """
    limit = getattr(config, "max_position_embeddings", None)
    if limit is None:
        raise ValueError(f"the {config.model_type} config has no max_position_embeddings")
    if family_layout(config.model_type).positions_after_padding:
        limit -= config.pad_token_id + 1
    return int(limit)


def default_lengths(config, cap: int | None = None) -> list[int]:
    """Powers of two from 128 up to the model's maximum positions (and `cap`, when given).

    Args:
        config: a transformers model config.
        cap: an upper bound below the model's maximum, e.g. for decoders with 32k positions.

    Returns:
        The lengths, increasing; the maximum alone when it is below 128.

    Example:
        >>> from transformers import BertConfig
        >>> default_lengths(BertConfig(max_position_embeddings=512))
        [128, 256, 512]
    """
    limit = max_positions(config) if cap is None else min(cap, max_positions(config))
    lengths = []
    n = SMALLEST_DEFAULT_LENGTH
    while n <= limit:
        lengths.append(n)
        n *= 2
    return lengths or [limit]


def _special_ids(config) -> set[int]:
    ids: set[int] = set()
    for name in SPECIAL_ID_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(v for v in value if isinstance(v, int))
    return ids


def synthetic_input_ids(
    config,
    batch_size: int,
    n: int,
    *,
    vocab_low: int = 1000,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """A fixed-seed random (batch_size, n) sequence of real token ids: no special ids, no padding.

    Ids are drawn uniformly from [low, high) without the config's special ids (pad, bos, eos, sep, cls, …):
    `low = vocab_low` skips the reserved and unused ids at the start of WordPiece vocabularies (BERT's
    [unused…] end at 998), and `high` is the first special id above `low`, since added special tokens sit at
    the end of BPE vocabularies (GPT-2's 50256, Qwen's 151643 on). A vocabulary smaller than `vocab_low`
    (tiny test models) starts at 0.

    Args:
        config: the model config (`vocab_size` and the special ids).
        batch_size: rows.
        n: tokens per row.
        vocab_low: the smallest id drawn.
        seed: the generator's seed; the same arguments give the same ids.
        device: where the ids are put.

    Returns:
        A long tensor (batch_size, n).

    Example:
        >>> from transformers import BertConfig
        >>> synthetic_input_ids(BertConfig(), 1, 4)
        tensor([[11998,  6261, 10877, 25588]])
    """
    vocab_size = int(config.vocab_size)
    special = _special_ids(config)
    low = vocab_low if vocab_low < vocab_size else 0
    high = min([i for i in special if i > low] + [vocab_size])
    candidates = torch.arange(low, high)
    if special:
        candidates = candidates[~torch.isin(candidates, torch.tensor(sorted(special)))]
    if candidates.numel() == 0:
        raise ValueError(f"no ordinary token ids in [{low}, {high}) of a vocabulary of {vocab_size}")
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(candidates.numel(), (batch_size, n), generator=generator)
    return candidates[picks].to(device)


# ----------------------------------------------------------------------------------------------------------
# Measuring


def measure_pair(
    n: int,
    module_run: Callable[[], object],
    dense_run: Callable[[], object],
    device: torch.device,
    repeats: int,
) -> ScalingRow:
    """One [`ScalingRow`]: a warm-up pass each, `MEMORY_PASSES` measured-memory passes each (the peak is
    their median), then `repeats` timed pairs of passes, one module and one dense, so that noise hits both,
    each side first in every other pair.

    Each side's time is the median of its passes, with their minimum and maximum. The speed-up is the median
    over the pairs of dense time / module time: the two passes of a pair run back to back, so a slow spell
    of the machine that spans a pair cancels out of its ratio, where it would move one side's median. Its
    range is the extreme ratios the passes allow: dense min / module max up to dense max / module min. A
    range that contains 1 is no measurable difference.

    Args:
        n: the sequence length, recorded in the row.
        module_run: one pass with the module.
        dense_run: one pass of the dense reference.
        device: where both compute.
        repeats: timed pairs (passes per side); the median, minimum and maximum are reported.

    Returns:
        The row, its ratios computed from its own times and peaks.
    """
    module_run()
    dense_run()
    module_peaks, dense_peaks = [], []
    for _ in range(MEMORY_PASSES):
        module_peaks.append(peak_memory_mb(module_run, device))
        dense_peaks.append(peak_memory_mb(dense_run, device))
    module_peak, dense_peak = _median_or_none(module_peaks), _median_or_none(dense_peaks)
    module_times, dense_times = [], []
    for index in range(repeats):
        # Each side runs first in every other pair (module, dense, dense, module, …): with a fixed order the
        # second pass of a pair is measurably faster, a bias of the order alone (docs/benchmarks.md).
        pair = [(module_run, module_times), (dense_run, dense_times)]
        if index % 2:
            pair.reverse()
        for run, times in pair:
            times.append(wall_seconds(run, device))
    module_seconds = statistics.median(module_times)
    dense_seconds = statistics.median(dense_times)
    speedup = statistics.median(d / m for d, m in zip(dense_times, module_times, strict=True))
    memory_ratio = None
    if module_peak is not None and dense_peak:
        memory_ratio = module_peak / dense_peak
    return ScalingRow(
        n=n,
        repeats=repeats,
        module_seconds=module_seconds,
        module_seconds_min=min(module_times),
        module_seconds_max=max(module_times),
        dense_seconds=dense_seconds,
        dense_seconds_min=min(dense_times),
        dense_seconds_max=max(dense_times),
        module_peak_mb=module_peak,
        dense_peak_mb=dense_peak,
        speedup=speedup,
        speedup_low=min(dense_times) / max(module_times),
        speedup_high=max(dense_times) / min(module_times),
        memory_ratio=memory_ratio,
    )


def _median_or_none(peaks: list[float | None]) -> float | None:
    return None if None in peaks else statistics.median(peaks)


@contextlib.contextmanager
def _eval_mode(*models: nn.Module) -> Iterator[None]:
    """Every submodule in eval mode inside the block, and back to its own mode after."""
    modes = [(module, module.training) for model in models for module in model.modules()]
    for model in models:
        model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def _check_lengths(lengths: Sequence[int], repeats: int) -> None:
    if not lengths or any(n < 1 for n in lengths):
        raise ValueError(f"lengths must be positive and not empty; got {list(lengths)}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1; got {repeats}")


# ----------------------------------------------------------------------------------------------------------
# Whole model


def measure_model_scaling(
    model: nn.Module,
    reference_model: nn.Module,
    *,
    lengths: list[int] | None = None,
    batch_size: int = 1,
    repeats: int = MODEL_REPEATS,
    vocab_low: int = 1000,
    progress: bool = False,
) -> list[ScalingRow]:
    """Forward-pass time and peak memory of the model with its module against the same model without it.

    Both models get the same synthetic rows ([`synthetic_input_ids`]: real token ids, no padding, attention
    mask all ones) and run in eval mode under `torch.inference_mode()`; their earlier train/eval modes are
    restored after. Per length: a warm-up pass each, `MEMORY_PASSES` memory passes each, then `repeats` timed
    passes each, alternating (see [`measure_pair`]).

    The reference must be the same base model on transformers' sdpa attention: what the module's
    `dense_reference` gives (a copy of the model on sdpa by default; the base model loaded again for a module
    whose installed model cannot be turned back into the dense one). A peft-wrapped `model` is measured as
    is: with unmerged LoRA adapters, a freshly loaded reference lacks their cost (a copy keeps them on both
    sides).

    Args:
        model: the model with the module installed (peft-wrapped or not).
        reference_model: the same base model with plain sdpa attention, on the same device.
        lengths: sequence lengths; default [`default_lengths`] of the model (128 … its maximum positions).
        batch_size: rows per pass.
        repeats: timed passes per model and length (median, minimum and maximum reported).
        vocab_low: the smallest token id drawn (see [`synthetic_input_ids`]).
        progress: show a progress bar, a step per length (the longest take most of the time).

    Returns:
        One [`ScalingRow`] per length, in the order given.

    Raises:
        ValueError: a length beyond the model's positions, a reference not on sdpa, or models on different
            devices.

    Example:
        >>> from attncard.modules import get_module
        >>> module = get_module("none")
        >>> model = module.apply(model, module.config_class())  # a tiny BERT
        >>> reference = module.measurement.dense_reference(model, load_base)
        >>> rows = measure_model_scaling(model, reference, lengths=[64, 128], repeats=3)
        >>> rows[0].n, rows[0].speedup_low <= rows[0].speedup <= rows[0].speedup_high
        (64, True)
    """
    config = unwrap_peft(model).config
    lengths = list(lengths) if lengths is not None else default_lengths(config)
    _check_lengths(lengths, repeats)
    limit = max_positions(config)
    if max(lengths) > limit:
        raise ValueError(f"lengths {lengths} go beyond the model's {limit} positions")
    reference_implementation = unwrap_peft(reference_model).config._attn_implementation
    if reference_implementation != "sdpa":
        raise ValueError(
            f"the reference model must use sdpa attention, not '{reference_implementation}' (the module's "
            "dense_reference, or the base model loaded again)"
        )
    device = next(model.parameters()).device
    if next(reference_model.parameters()).device != device:
        raise ValueError("the model and the reference model must be on the same device")

    rows = []
    with _eval_mode(model, reference_model), torch.inference_mode():
        for n in tqdm(lengths, desc="scaling: whole model", unit="length", disable=not progress):
            input_ids = synthetic_input_ids(config, batch_size, n, vocab_low=vocab_low, device=device)
            attention_mask = torch.ones_like(input_ids)
            module_run = functools.partial(model, input_ids=input_ids, attention_mask=attention_mask)
            dense_run = functools.partial(reference_model, input_ids=input_ids, attention_mask=attention_mask)
            rows.append(measure_pair(n, module_run, dense_run, device, repeats))
    return rows


# ----------------------------------------------------------------------------------------------------------
# One attention layer


def layer_attention_runs(
    model: nn.Module, module: AttentionModule | None, n: int, *, seed: int = 0
) -> tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]]:
    """The two calls [`measure_layer_scaling`] times at length N: `(module_run, dense_run)`.

    Both call layer 0's attention module on the same synthetic q (1, H, N, D) and k, v (1, H_kv, N, D) (H_kv
    < H under grouped-query attention), with no mask (no padding), the layer's own `scaling` and dropout 0:
    `module_run` through the module's `layer_attention` with the function the model's `_attn_implementation`
    names in transformers' `AttentionInterface`, `dense_run` through [`call_attention`] with transformers'
    `sdpa_attention_forward`. A synthetic layer input (1, N, hidden) goes with them, for a module whose
    function reads it. Each returns the attention output (1, N, H, D). Call them in eval mode: a module may
    read `module.training`.

    Args:
        model: a model with `module` installed (peft-wrapped or not), or a plain sdpa model.
        module: the installed module; None for the model's own attention.
        n: the sequence length N; it may exceed the model's positions (no embeddings are involved).
        seed: the seed of the synthetic tensors.

    Returns:
        The two zero-argument calls.

    Raises:
        ValueError: the model's attention implementation is not in `AttentionInterface` (eager).

    Example:
        >>> from attncard.modules import get_module
        >>> module = get_module("none")
        >>> minilm = module.apply(minilm, module.config_class())
        >>> module_run, dense_run = layer_attention_runs(minilm, module, 1024)
        >>> module_run().shape, dense_run().shape  # MiniLM: 12 heads of 32
        (torch.Size([1, 1024, 12, 32]), torch.Size([1, 1024, 12, 32]))
    """
    base = unwrap_peft(model)
    implementation = base.config._attn_implementation
    if implementation not in ALL_ATTENTION_FUNCTIONS:
        raise ValueError(
            f"layer scaling calls the attention function through transformers' AttentionInterface; this "
            f"model's '{implementation}' attention is not registered there (install a module, or use sdpa)"
        )
    attention = ALL_ATTENTION_FUNCTIONS[implementation]
    layer_module = attention_layers(base)[0].module
    heads, kv_heads, head_dim = attention_shape(base.config)
    weight = next(layer_module.parameters())
    generator = torch.Generator().manual_seed(seed)

    def synthetic(*shape: int) -> torch.Tensor:
        # Drawn on the CPU, so that every device gets the same values.
        return torch.randn(*shape, generator=generator).to(device=weight.device, dtype=weight.dtype)

    query = synthetic(1, heads, n, head_dim)
    key, value = synthetic(1, kv_heads, n, head_dim), synthetic(1, kv_heads, n, head_dim)
    hidden_states = synthetic(1, n, base.config.hidden_size)
    layer_attention = module.measurement.layer_attention if module is not None else call_attention
    module_run = functools.partial(layer_attention, attention, layer_module, query, key, value, hidden_states)
    dense_run = functools.partial(
        call_attention, sdpa_attention_forward, layer_module, query, key, value, hidden_states
    )
    return module_run, dense_run


def measure_layer_scaling(
    model: nn.Module,
    module: AttentionModule | None,
    *,
    lengths: Sequence[int] = LAYER_LENGTHS,
    repeats: int = REPEATS,
    progress: bool = False,
) -> list[ScalingRow]:
    """Time and peak memory of one attention layer's attention function against transformers' sdpa.

    At each N, the two calls of [`layer_attention_runs`] (layer 0, synthetic q, k, v, no mask) are measured
    in eval mode under `torch.inference_mode()` by [`measure_pair`]. Only attention is timed, not the
    projections around it; N may exceed the model's positions. The module side runs whatever the module's
    attention function runs at inference (its own kernel; sdpa itself for a module that changes only the
    projections, whose ratios are then 1 up to noise); the module's spec says what that is.

    Calling the attention function rather than the layer's forward keeps every family on one call (no rotary
    embeddings or family-specific arguments to build) and leaves the model's configuration untouched.

    Args:
        model: a model with `module` installed (peft-wrapped or not), or a plain sdpa model (ratios 1).
        module: the installed module; None for the model's own attention.
        lengths: sequence lengths N.
        repeats: timed calls per side and length (median, minimum and maximum reported).
        progress: show a progress bar, a step per length.

    Returns:
        One [`ScalingRow`] per length.

    Raises:
        ValueError: the model's attention implementation is not in `AttentionInterface` (eager).

    Example:
        >>> from attncard.modules import get_module
        >>> module = get_module("none")
        >>> model = module.apply(model, module.config_class())  # a tiny BERT
        >>> rows = measure_layer_scaling(model, module, lengths=(256, 1024), repeats=1)
        >>> [row.n for row in rows], all(row.module_seconds > 0 and row.dense_seconds > 0 for row in rows)
        ([256, 1024], True)
    """
    lengths = list(lengths)
    _check_lengths(lengths, repeats)
    device = next(model.parameters()).device
    rows = []
    with _eval_mode(model), torch.inference_mode():
        for n in tqdm(lengths, desc="scaling: attention layer 0", unit="length", disable=not progress):
            module_run, dense_run = layer_attention_runs(model, module, n)
            rows.append(measure_pair(n, module_run, dense_run, device, repeats))
    return rows


# ----------------------------------------------------------------------------------------------------------
# FLOPs


def attention_flops(model: nn.Module, module: AttentionModule | None, n: int) -> FlopsEstimate:
    """An estimate of the attention FLOPs of the whole model at length N (one row, no padding).

    A multiply-add counts 2 FLOPs; d is the head dimension, L the layers, H the query heads. Counted:

    - dense: L·H·(2·N²·d for Q·Kᵀ + 2·N²·d for P·V) = L·H·4·N²·d ([`dense_attention_flops`]). Every pair is
      counted, in decoders too (a dense kernel computes the masked triangle). Softmax, scaling and masks are
      not counted.
    - with the module: the module's own count, `module.measurement.flops(model, n)`, which also gives the
      formula text (with its numbers) that follows `"<name>: "` in `formula`. The default is the dense count.
    - projections, apart: q, k, v and o 2·N·in·out each (a fused c_attn once) as loaded
      ([`dense_projection_flops`]), and as installed, `module.measurement.projection_flops(model, n)`.

    Args:
        model: the model with `module` installed (peft-wrapped or not); with `module` None, any model.
        module: the installed module; None for the model's own attention (the dense count).
        n: the sequence length N.

    Returns:
        A [`FlopsEstimate`]; `ratio` is module / dense.

    Raises:
        ValueError: the model has a different attention installed.

    Example:
        >>> from attncard.modules import get_module
        >>> module = get_module("none")
        >>> minilm = module.apply(minilm, module.config_class())
        >>> estimate = attention_flops(minilm, module, 128)  # MiniLM: 6 layers, 12 heads, d = 32
        >>> estimate.dense == 6 * 12 * 4 * 128**2 * 32, estimate.ratio
        (True, 1.0)
    """
    base = unwrap_peft(model)
    if module is not None and base.config._attn_implementation != implementation_name(module.name):
        raise ValueError(
            f"the model's attention is '{base.config._attn_implementation}', not the module '{module.name}'"
        )
    layers = attention_layers(base)
    heads, _, d = attention_shape(base.config)
    dense = dense_attention_flops(base, n)
    projections_dense = dense_projection_flops(base, n)
    formula = (
        f"dense = L·H·(2·N²·d [Q·Kᵀ] + 2·N²·d [P·V]) with L = {len(layers)}, H = {heads}, N = {n}, d = {d}; "
        "every query–key pair counted (decoders too), softmax and masks not counted"
    )
    if module is None:
        module_flops, projections_module = dense, projections_dense
        formula += "; the model's own attention: the same attention"
    else:
        module_flops, module_formula = module.measurement.flops(model, n)
        projections_module = float(module.measurement.projection_flops(model, n))
        formula += f"; {module.name}: {module_formula}"
    formula += (
        f"; projections (separate): q, k, v, o 2·N·in·out each (a fused c_attn once), factorised 2·N·r·(in + "
        f"out), biases and LoRA not counted: {projections_dense:.0f} before, {projections_module:.0f} after"
    )
    return FlopsEstimate(
        n=n,
        dense=dense,
        module=float(module_flops),
        ratio=module_flops / dense,
        formula=formula,
        projections_dense=projections_dense,
        projections_module=projections_module,
    )
