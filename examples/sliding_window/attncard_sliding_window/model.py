"""The FLOPs of `sliding_window`: the band, not the N×N square."""

from __future__ import annotations

from torch import nn

from attncard.modules.base import attention_layers, attention_shape, installed_config, unwrap_peft


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
    window = min(installed_config(model).window, max(n - 1, 0))
    width = window + 1 if causal else 2 * window + 1
    flops = len(layers) * heads * 4 * head_dim * n * min(n, width)
    side = "w′ + 1" if causal else "2·w′ + 1"
    formula = (
        f"L·H·4·d·N·min(N, {side}), w′ = min(w, N − 1) = {window}, L = {len(layers)}, H = {heads}, "
        f"d = {head_dim}: the band of each query, its slots past the ends of the sequence included"
    )
    return float(flops), formula
