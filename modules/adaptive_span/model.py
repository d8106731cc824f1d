"""Installing `adaptive_span`, its penalty and statistics, and what the pipeline asks of it: FLOPs and the
crossover calibration (the plot of the learned spans is in plots.py, which imports no torch)."""

from __future__ import annotations

import functools
import statistics

import torch
from torch import nn

from ..base import attention_layers, attention_shape, install_attention, unwrap_peft
from ..measure import peak_memory_mb, wall_seconds
from .attention import CALIBRATION_LENGTHS, AdaptiveSpan, adaptive_span_attention, fused_path_available
from .config import AdaptiveSpanConfig

# Measured-memory calls per path and length in [`calibrate_crossover`]; each peak is their median.
MEMORY_PASSES = 5


def apply(model: nn.Module, config: AdaptiveSpanConfig) -> nn.Module:
    """Gives every attention layer its learnable spans (`module.adaptive_span`) and routes attention through
    [`adaptive_span_attention`]. The projections are untouched.

    Example:
        >>> model = apply(model, AdaptiveSpanConfig(max_span=64))
        >>> mean_span(model)  # every head starts open: 64·σ(4)
        62.84...
    """
    for layer in attention_layers(model):
        heads = model.config.num_attention_heads
        device = next(layer.module.parameters()).device
        layer.module.adaptive_span = AdaptiveSpan(
            heads, config.max_span, config.ramp, config.init_logit, config.global_token
        ).to(device)
    install_attention(model, "adaptive_span", adaptive_span_attention)
    return model


def span_modules(model: nn.Module) -> list[AdaptiveSpan]:
    """Each layer's spans, in layer order. Under peft, `adaptive_span` is a ModulesToSaveWrapper holding a
    frozen original and the trained copy; attribute access on it reaches the copy of the active adapter."""
    return [layer.module.adaptive_span for layer in attention_layers(model)]


def span_penalty(model: nn.Module, config: AdaptiveSpanConfig, step: int) -> torch.Tensor:
    """The L1 span penalty λ_t·mean(z)/S_max over every head of every layer, λ_t warming up linearly.

    Args:
        model: a model with adaptive_span installed (peft-wrapped or not).
        config: the module's config (λ, its warm-up and S_max).
        step: the optimizer step about to be taken, from 0.
    """
    spans = torch.cat([module.spans() for module in span_modules(model)])
    warmup = min(1.0, step / config.penalty_warmup_steps) if config.penalty_warmup_steps > 0 else 1.0
    return config.penalty * warmup * spans.mean() / config.max_span


def mean_span(model: nn.Module) -> float:
    return float(torch.cat([module.spans().detach() for module in span_modules(model)]).mean())


def skipped_pair_share(model: nn.Module, lengths: list[int], causal: bool) -> float:
    """Share of the attention pairs full attention would compute that the learned spans skip, over
    sequences of the given lengths (pairs with zero weight; the global token's pairs are always kept)."""
    computed, full = 0, 0
    windows = [module.windows(max(lengths)) for module in span_modules(model)]
    for length in lengths:
        positions = torch.arange(length)
        offset = positions[:, None] - positions[None, :]
        allowed = offset >= 0 if causal else torch.ones(length, length, dtype=torch.bool)
        is_global = torch.zeros(length, dtype=torch.bool)
        is_global[length - 1 if causal else 0] = True
        keep_global = (is_global[:, None] | is_global[None, :]) & allowed
        for layer_windows in windows:
            in_band = offset.abs()[None] <= layer_windows[:, None, None]  # (H, N, N)
            kept = (in_band & allowed) | keep_global
            computed += int(kept.sum())
            full += int(allowed.sum()) * len(layer_windows)
    return 1.0 - computed / full


def module_stats(model: nn.Module, lengths: list[int] | None = None) -> dict:
    """The learned spans per layer and head, their mean, the length from which inference runs the banded
    kernel (`crossover`, with the table it was measured from when [`calibrate_crossover`] ran), and (given
    evaluation lengths) the pairs skipped."""
    causal = bool(getattr(attention_layers(model)[0].module, "is_causal", False))
    spans = [[round(float(z), 4) for z in module.spans().detach()] for module in span_modules(model)]
    stats = {
        "spans": spans,
        "mean_span": mean_span(model),
        "windows": [module.windows(1 << 30).tolist() for module in span_modules(model)],
    }
    first = span_modules(model)[0]
    table = crossover_table(first)
    # Inference below this length runs the fused path, from it the banded kernel; measured after training
    # ("crossover_table", medians of layer 0's attention), else the default.
    stats["crossover"] = int(first.crossover)
    stats["crossover_measured"] = bool(table)
    if table:
        stats["crossover_table"] = table
    if lengths:
        stats["skipped_pair_share"] = skipped_pair_share(model, lengths, causal)
    return stats


def calibrate_crossover(
    model: nn.Module,
    config: AdaptiveSpanConfig | None = None,
    *,
    lengths: tuple[int, ...] = CALIBRATION_LENGTHS,
    repeats: int = 7,
) -> dict:
    """`MODULE.training.calibrate`: measures, on the trained spans, the length from which the banded kernel
    is faster than the fused path without using more memory, and stores it in every layer's `crossover`
    (saved with the adapter).

    Layer 0's attention function runs on synthetic q, k, v of its shape (one row, no padding) at each length,
    forced once on each path: a warm-up call, `MEMORY_PASSES` calls whose peak memory is measured, then
    `repeats` timed calls, the two paths alternating; each path's time and peak are the medians. The
    crossover is the smallest measured length from which the banded kernel is faster and its peak memory at
    most the fused path's, at it and at every longer measured length (one past the longest when the fused
    path is kept at the longest). Without a fused path (not on the CPU, or spans that cover the sequence)
    nothing is measured, and the crossover stays as it was.

    Args:
        model: the trained model with adaptive_span installed (peft-wrapped or not).
        config: the module's config (unused: the spans are read from the model).
        lengths: the sequence lengths measured.
        repeats: timed calls per path and length.

    Returns:
        `{"crossover": N or None, "crossover_table": [{"n", "fused_ms", "banded_ms", "fused_mb",
        "banded_mb"}, …]}`.
    """
    layer = attention_layers(model)[0].module
    span = layer.adaptive_span
    if len(lengths) > span.calibration.shape[0]:
        raise ValueError(f"at most {span.calibration.shape[0]} lengths can be kept; got {len(lengths)}")
    heads, kv_heads, head_dim = attention_shape(unwrap_peft(model).config)
    parameter = next(layer.parameters())
    device, dtype = parameter.device, parameter.dtype
    if not fused_path_available(device):
        return {"crossover": None, "crossover_table": []}
    modules = span_modules(model)
    generator = torch.Generator(device="cpu").manual_seed(0)
    kept = int(span.crossover)
    measured: dict[int, tuple[float, float, float, float]] = {}
    try:
        with torch.inference_mode():
            for n in lengths:
                plan = span.plan(n, bool(getattr(layer, "is_causal", False)), dtype)
                if plan.covers:
                    continue
                query = torch.randn(1, heads, n, head_dim, generator=generator).to(device, dtype)
                key, value = (
                    torch.randn(1, kv_heads, n, head_dim, generator=generator).to(device, dtype) for _ in "kv"
                )
                run = functools.partial(
                    adaptive_span_attention, layer, query, key, value, None, scaling=layer.scaling
                )
                paths = (("fused", n + 1), ("banded", 0))
                times: dict[str, list[float]] = {"fused": [], "banded": []}
                peaks: dict[str, list[float]] = {"fused": [], "banded": []}
                # A warm-up pass, measured-memory passes, then timed passes, the two paths alternating.
                for repeat in range(1 + MEMORY_PASSES + repeats):
                    for path, crossover in paths:
                        span.crossover.fill_(crossover)
                        if repeat == 0:
                            run()
                        elif repeat <= MEMORY_PASSES:
                            # A peak that cannot be read counts as 0.0 on both paths: speed alone decides.
                            peaks[path].append(peak_memory_mb(run, device) or 0.0)
                        else:
                            times[path].append(wall_seconds(run, device))
                measured[n] = (
                    statistics.median(times["fused"]),
                    statistics.median(times["banded"]),
                    statistics.median(peaks["fused"]),
                    statistics.median(peaks["banded"]),
                )
    finally:
        span.crossover.fill_(kept)
    if not measured:
        return {"crossover": None, "crossover_table": []}
    ordered = sorted(measured)
    crossover = ordered[-1] + 1
    for n in reversed(ordered):
        fused_seconds, banded_seconds, fused_mb, banded_mb = measured[n]
        if banded_seconds < fused_seconds and banded_mb <= fused_mb:
            crossover = n
        else:
            break
    rows = torch.tensor([(n, *measured[n]) for n in ordered], dtype=torch.float64)
    for module in modules:
        module.crossover.fill_(crossover)
        module.calibration.fill_(float("nan"))
        module.calibration[: len(rows)] = rows
    return {"crossover": crossover, "crossover_table": crossover_table(span)}


def crossover_table(span: AdaptiveSpan) -> list[dict]:
    """The measurements a layer keeps (see [`calibrate_crossover`]): medians in milliseconds, peaks in MB."""
    return [
        {
            "n": int(n),
            "fused_ms": round(fused * 1e3, 4),
            "banded_ms": round(banded * 1e3, 4),
            "fused_mb": round(fused_mb, 3),
            "banded_mb": round(banded_mb, 3),
        }
        for n, fused, banded, fused_mb, banded_mb in span.calibration.tolist()
        if n == n  # a measured row: not NaN
    ]


def attention_flops(model: nn.Module, n: int) -> tuple[float, str]:
    """`MODULE.measurement.flops`: the attention FLOPs of the whole model at length N over the learned bands.

    Per layer and head, 4·d·(N·b_h + 2·N): b_h = min(N, 2·w_h + 1) keys per query in encoders, min(N, w_h + 1)
    in decoders (past only), w_h the head's learned window ⌈z_h + R⌉ − 1 at N; 2·N for the global token's
    row and column (when on); capped at the head's dense 4·N²·d. This counts the band itself: the torch
    kernel computes blocks of 32 queries against 32 + 2·max_h w_h keys (rounded up to whole blocks), more
    than the band for short windows.

    Args:
        model: a model with adaptive_span installed (peft-wrapped or not).
        n: the sequence length N.

    Returns:
        `(flops, formula)`, the formula naming every window.

    Example:
        >>> model = apply(model, AdaptiveSpanConfig(max_span=16))  # z_h = 16·σ(4) = 15.7, w_h = ⌈z_h + 8⌉ − 1
        >>> flops, formula = attention_flops(model, 64)  # a BERT encoder: 2 layers of 4 heads, d = 8
        >>> flops == 2 * 4 * 4 * 8 * (64 * (2 * 23 + 1) + 2 * 64)  # every w_h = 23: bands of 47 keys
        True
    """
    _, _, d = attention_shape(unwrap_peft(model).config)
    causal = bool(getattr(attention_layers(model)[0].module, "is_causal", False))
    dense_per_head = 4 * n * n * d
    flops = 0
    all_windows = []
    for span in span_modules(model):
        windows = span.windows(n).tolist()
        all_windows.append(windows)
        global_pairs = 2 * n if span.global_token else 0
        for w in windows:
            band = min(n, w + 1) if causal else min(n, 2 * w + 1)
            flops += min(dense_per_head, 4 * d * (n * band + global_pairs))
    side = "w_h + 1 (past only)" if causal else "2·w_h + 1"
    formula = (
        f"Σ_layers Σ_h min(4·N²·d, 4·d·(N·min(N, {side}) + 2·N [global token row and column])), windows "
        f"w_h = {all_windows}; band pairs only (the torch kernel computes blocks of 32 queries against "
        "32 + 2·max w_h keys, more)"
    )
    return float(flops), formula
