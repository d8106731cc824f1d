"""Installing `sliding_window`, and its FLOPs: the band, not the N×N square."""

from __future__ import annotations

from torch import nn

from attncard.modules.base import attention_layers, attention_shape, install_attention, unwrap_peft

from .attention import WINDOW_ATTRIBUTE, sliding_window_attention
from .config import SlidingWindowConfig


def apply(model: nn.Module, config: SlidingWindowConfig) -> nn.Module:
    """Gives every attention layer its window and routes attention through [`sliding_window_attention`].
    Nothing is added to the model's parameters; the projections are untouched.

    Example:
        >>> model = apply(model, SlidingWindowConfig(window=8))
        >>> model.config._attn_implementation
        'attncard_sliding_window'
    """
    if config.window < 0:
        raise ValueError(f"window must be 0 or more, not {config.window}")
    for layer in attention_layers(model):
        setattr(layer.module, WINDOW_ATTRIBUTE, config.window)
    install_attention(model, "sliding_window", sliding_window_attention)
    return model


def attention_flops(model: nn.Module, n: int) -> tuple[float, str]:
    """`MODULE.measurement.flops`: the attention FLOPs of the whole model at length N over the band.

    L·H·4·d·N·min(N, b): each of the N queries scores and sums b = 2·w' + 1 keys in encoders, w' + 1 in
    decoders, w' = min(w, N − 1) (window slots past the ends of the sequence included: they are computed,
    then weighted zero); once b reaches N the dense N×N scores are computed instead.

    Args:
        model: a model with sliding_window installed (peft-wrapped or not).
        n: the sequence length N.

    Returns:
        `(flops, formula)`.

    Example:
        >>> attention_flops(model, 64)  # 2 layers, 4 heads, d = 8, an encoder, w = 16: 2·4·4·8·64·33
        (540672.0, 'L·H·4·d·N·min(N, 2·w′ + 1), w′ = min(w, N − 1) = 16, L = 2, H = 4, d = 8: the band ...')
    """
    layers = attention_layers(model)
    heads, _, head_dim = attention_shape(unwrap_peft(model).config)
    causal = bool(getattr(layers[0].module, "is_causal", False))
    window = min(int(getattr(layers[0].module, WINDOW_ATTRIBUTE)), max(n - 1, 0))
    width = window + 1 if causal else 2 * window + 1
    flops = len(layers) * heads * 4 * head_dim * n * min(n, width)
    side = "w′ + 1" if causal else "2·w′ + 1"
    formula = (
        f"L·H·4·d·N·min(N, {side}), w′ = min(w, N − 1) = {window}, L = {len(layers)}, H = {heads}, "
        f"d = {head_dim}: the band of each query, its slots past the ends of the sequence included"
    )
    return float(flops), formula
