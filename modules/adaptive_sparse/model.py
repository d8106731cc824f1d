"""`adaptive_sparse`: installs top-k attention in every attention layer, reports on it, counts its FLOPs."""

from __future__ import annotations

import math

from torch import nn

from ..base import attention_layers, attention_shape, install_attention, unwrap_peft
from .attention import AdaptiveSparseState, adaptive_sparse_attention
from .config import AdaptiveSparseConfig


def apply(model: nn.Module, config: AdaptiveSparseConfig) -> nn.Module:
    """Switches every attention layer to top-k attention, in place.

    Each attention module gets an [`AdaptiveSparseState`] as `module.adaptive_sparse` (its `top_k` and
    warm-up counter; no parameters), and the model's attention function becomes
    [`adaptive_sparse_attention`], registered as `attncard_adaptive_sparse`. The projections are untouched,
    so LoRA targets the same q and v projections as for any other module.

    Args:
        model: a loaded transformers model of a family in `modules.base.FAMILIES`.
        config: `top_k` and `warmup_steps`.

    Returns:
        The same model.

    Example:
        >>> model = apply(model, AdaptiveSparseConfig(top_k=8))
        >>> attention_layers(model)[0].module.adaptive_sparse
        AdaptiveSparseState(top_k=8, warmup_steps=0)
    """
    for layer in attention_layers(model):
        device = next(layer.module.parameters()).device  # the counter lives beside the layer's weights
        layer.module.adaptive_sparse = AdaptiveSparseState(config.top_k, config.warmup_steps).to(device)
    install_attention(model, "adaptive_sparse", adaptive_sparse_attention)
    return model


def module_stats(model: nn.Module) -> dict:
    """The top-k setting and warm-up progress of every layer, for results.json and the card.

    Args:
        model: a model with `adaptive_sparse` installed, peft-wrapped or not.

    Returns:
        A JSON-serialisable dict: `top_k` and `warmup_steps` (of the first layer, as configured), and
        `layers`, per attention layer `{"index", "top_k", "warmup_steps", "training_forward_passes",
        "warmup_done"}`.

    Example:
        >>> model = apply(model, AdaptiveSparseConfig(top_k=8, warmup_steps=2))
        >>> logits = model.train()(**batch).logits  # one training forward pass
        >>> module_stats(model)["layers"][0]
        {'index': 0, 'top_k': 8, 'warmup_steps': 2, 'training_forward_passes': 1, 'warmup_done': False}
    """
    layers = []
    for layer in attention_layers(model):
        state: AdaptiveSparseState = layer.module.adaptive_sparse
        passes = int(state.steps.item())
        layers.append(
            {
                "index": layer.index,
                "top_k": state.top_k,
                "warmup_steps": state.warmup_steps,
                "training_forward_passes": passes,
                "warmup_done": passes >= state.warmup_steps,
            }
        )
    return {"top_k": layers[0]["top_k"], "warmup_steps": layers[0]["warmup_steps"], "layers": layers}


def attention_flops(model: nn.Module, n: int) -> tuple[float, str]:
    """`MODULE.measurement.flops`: every score, the top-k selection, and P·V over the k kept keys, at
    inference.

    Every score Q·Kᵀ is computed (2·N²·d per head; in decoders too, counted in full as for dense attention).
    Without autograd each query multiplies only its k value rows picked by index (2·N·k·d), at every length;
    k at least N is dense attention (2·N²·d). The top-k selection adds N·max(1, ⌈log₂ k⌉) comparisons per
    query row and head (k = min(top_k, N)), counted as if they were FLOPs.

    Args:
        model: a model with adaptive_sparse installed (peft-wrapped or not).
        n: the sequence length N.

    Returns:
        `(flops, formula)`, the formula naming each layer's k.

    Example:
        >>> model = apply(model, AdaptiveSparseConfig(top_k=8))
        >>> flops, formula = attention_flops(model, 64)  # a tiny BERT: 2 layers, 4 heads, d = 8
        >>> flops == 2 * 4 * (2 * 64**2 * 8 + 2 * 64 * 8 * 8) + 2 * 4 * 64 * 64 * 3
        True
        >>> flops, formula = attention_flops(model, 4)  # k of 8 beyond N: dense, with the selection
        >>> flops == 2 * 4 * (2 * 4**2 * 8 + 2 * 4 * 4 * 8) + 2 * 4 * 4 * 4 * 2
        True
    """
    heads, _, head_dim = attention_shape(unwrap_peft(model).config)
    top_ks = [layer.module.adaptive_sparse.top_k for layer in attention_layers(model)]
    selection = sum(heads * n * n * max(1, math.ceil(math.log2(min(k, n)))) for k in top_ks)
    products = sum(heads * (2 * n * n * head_dim + 2 * n * min(k, n) * head_dim) for k in top_ks)
    formula = (
        "all scores are computed, L·H·2·N²·d, P·V over the k kept keys only, L·H·2·N·min(k, N)·d "
        f"+ top-k selection L·H·N·N·max(1, ⌈log₂ min(k, N)⌉) comparisons, k = {top_ks}"
    )
    return products + selection, formula
