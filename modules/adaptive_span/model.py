from __future__ import annotations

import torch
from torch import nn

from ..base import attention_layers, install_attention
from .attention import AdaptiveSpan, adaptive_span_attention
from .config import AdaptiveSpanConfig


def apply(model: nn.Module, config: AdaptiveSpanConfig) -> nn.Module:
    """Gives every attention layer its learnable spans (`module.adaptive_span`) and routes attention through
    [`adaptive_span_attention`]. The projections are untouched.

    Example:
        >>> model = apply(model, AdaptiveSpanConfig(max_span=64))
        >>> mean_span(model)  # every head starts open
        62.87...
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
    """The learned spans per layer and head, their mean, and (given evaluation lengths) the pairs skipped."""
    causal = bool(getattr(attention_layers(model)[0].module, "is_causal", False))
    spans = [[round(float(z), 4) for z in module.spans().detach()] for module in span_modules(model)]
    stats = {
        "spans": spans,
        "mean_span": mean_span(model),
        "windows": [module.windows(1 << 30).tolist() for module in span_modules(model)],
    }
    if lengths:
        stats["skipped_pair_share"] = skipped_pair_share(model, lengths, causal)
    return stats
