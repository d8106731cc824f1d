"""Installing `span_expanded`, segment-wise processing with memory, the module's statistics, and what the
pipeline asks of it: FLOPs, the dense reference and the single-layer call.

Example:
    >>> model = apply(model, SpanExpandedConfig(memory_length=8))  # a BERT of 2 layers
    >>> ids = torch.randint(1000, 2000, (1, 24))  # a long text's token ids
    >>> with segment_memory(model) as memory:
    ...     first = model(input_ids=ids[:, :12])  # no memory yet; stores its last 8 real positions per layer
    ...     second = model(input_ids=ids[:, 12:], position_ids=torch.arange(12, 24)[None])  # [memory ‖ 12:24]
    ...     memory.sizes()
    [8, 8]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ..base import (
    attention_layers,
    call_attention,
    dense_attention_flops,
    install_attention,
    projection_shape,
    sdpa_copy,
    unwrap_peft,
)
from .attention import SpanExpandedBranch, SpanExpandedState, span_expanded_attention
from .config import SpanExpandedConfig

BRANCH_ATTRIBUTE = "span_expanded"  # the submodule peft's `modules_to_save` names
STATE_ATTRIBUTE = "span_expanded_state"


def _capturing_forward(module: nn.Module, forward: Callable, *args, **kwargs) -> object:
    """The attention module's forward as `apply` installs it: keeps the layer input X for the attention
    function of the same call, then runs the module's own `forward`.

    BERT, RoBERTa, DistilBERT and GPT-2 pass X as the first positional argument; Llama and Qwen as the
    `hidden_states` keyword. (A forward pre-hook did the same at 25 µs a call at MiniLM's N = 128, the hooks'
    path through `nn.Module.__call__`, 2% of a whole pass over six layers.)
    """
    hidden_states = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
    getattr(module, STATE_ATTRIBUTE).hidden_states = hidden_states
    return forward(*args, **kwargs)


def _installed_layers(model: nn.Module) -> list[nn.Module]:
    modules = [layer.module for layer in attention_layers(model)]
    if not all(hasattr(module, STATE_ATTRIBUTE) for module in modules):
        raise ValueError("span_expanded is not installed in this model; call apply(model, config) first")
    return modules


def apply(model: nn.Module, config: SpanExpandedConfig) -> nn.Module:
    """Installs `span_expanded` in place: the attention function and, per layer, a HyLoRA branch and a
    forward that captures the layer input.

    Each attention module gets `span_expanded` (a [`SpanExpandedBranch`], B = 0, so the model computes
    exactly what it computed before), `span_expanded_state` (the memory, empty) and a `forward` that
    captures the layer input before running its own. Call it before wrapping the model with peft, and give
    peft `modules_to_save=["span_expanded"]` so the branches are trained and saved.

    Args:
        model: a transformers model of a family in `modules.base.FAMILIES`.
        config: the memory length and HyLoRA settings.

    Returns:
        The same model.

    Raises:
        UnsupportedModelError: the model's family is not supported, or a projection's shape is unknown.
        ValueError: the module is already installed.

    Example:
        >>> model = apply(model, SpanExpandedConfig(hylora_rank=8))
        >>> type(attention_layers(model)[0].module.span_expanded).__name__
        'SpanExpandedBranch'
    """
    layers = attention_layers(model)
    if any(hasattr(layer.module, STATE_ATTRIBUTE) for layer in layers):
        raise ValueError("span_expanded is already installed in this model")
    install_attention(model, "span_expanded", span_expanded_attention)
    for layer in layers:
        weight = next(layer.projection("q").parameters())
        branch = SpanExpandedBranch(
            projection_shape(layer.projection("q"))[0],
            projection_shape(layer.projection("o"))[0],  # H·D, which need not equal the hidden size (Qwen3)
            rank=config.hylora_rank,
            alpha=config.hylora_alpha,
            dropout=config.hylora_dropout,
        ).to(device=weight.device, dtype=weight.dtype)
        branch.train(layer.module.training)
        setattr(layer.module, BRANCH_ATTRIBUTE, branch)
        setattr(layer.module, STATE_ATTRIBUTE, SpanExpandedState(memory_length=config.memory_length))
        # A partial, not a closure: copies of the model (copy.deepcopy) then capture into their own modules.
        layer.module.forward = functools.partial(_capturing_forward, layer.module, layer.module.forward)
    return model


class SegmentMemory:
    """What `segment_memory` yields: a view of every layer's memory, and a way to empty it."""

    def __init__(self, states: list[SpanExpandedState]):
        self._states = states

    def sizes(self) -> list[int]:
        """M, the memory slots of each layer (0 while empty)."""
        return [state.memory_size for state in self._states]

    def memory(self, layer_index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """`(keys, values, mask)` of one layer: (B, H_kv, M, D), (B, H_kv, M, D), (B, M); None while empty."""
        state = self._states[layer_index]
        if state.memory_keys is None:
            return None
        return state.memory_keys, state.memory_values, state.memory_mask

    def reset(self) -> None:
        """Empties every layer's memory, e.g. before the first segment of the next batch of documents."""
        for state in self._states:
            state.clear_memory()


@contextmanager
def segment_memory(model: nn.Module) -> Iterator[SegmentMemory]:
    """Processes a long text segment by segment, Transformer-XL style, within the `with` block.

    Inside, every forward call attends to [memory ‖ current] and then stores, per layer, the last
    `memory_length` real (non-padding) positions of [memory ‖ current] (keys and values, detached) for the
    next call. Every call must have the batch size of the first. Positions are the caller's: pass
    `position_ids` continuing the previous segment (see the spec). Leaving the block empties the memory;
    outside it the module never uses memory.

    Args:
        model: a model with `span_expanded` installed (peft-wrapped or not).

    Yields:
        A [`SegmentMemory`].

    Raises:
        ValueError: the module is not installed.
        RuntimeError: a `segment_memory` block is already open on this model.

    Example:
        >>> model = apply(model, SpanExpandedConfig(memory_length=8))
        >>> ids = torch.randint(1000, 2000, (1, 24))  # a long text's token ids
        >>> with segment_memory(model) as memory:
        ...     first = model(input_ids=ids[:, :12])
        ...     second = model(input_ids=ids[:, 12:], position_ids=torch.arange(12, 24)[None])
        ...     memory.sizes()
        [8, 8]
        >>> memory.sizes()  # emptied when the block ends
        [0, 0]
    """
    states = [getattr(module, STATE_ATTRIBUTE) for module in _installed_layers(model)]
    if any(state.recording for state in states):
        raise RuntimeError("a segment_memory block is already open on this model")
    for state in states:
        state.clear_memory()
        state.recording = True
    try:
        yield SegmentMemory(states)
    finally:
        for state in states:
            state.recording = False
            state.clear_memory()


def module_stats(model: nn.Module) -> dict:
    """JSON-serialisable facts about the installed module, for results.json and the card.

    `ab_frobenius_norm[i]` is ‖A·B‖_F of layer i, without the alpha/r scale: 0 right after installation, so
    it measures how far training moved the branch. Under peft, the trained copy is read.

    Args:
        model: a model with `span_expanded` installed (peft-wrapped or not).

    Returns:
        `{"memory_length", "hylora_rank", "hylora_alpha", "hylora_scale", "layers", "ab_frobenius_norm",
        "parameters_added"}`.

    Example:
        >>> model = apply(model, SpanExpandedConfig())
        >>> module_stats(model)["ab_frobenius_norm"]  # B starts at zero
        [0.0, 0.0]
    """
    modules = _installed_layers(model)
    # peft's ModulesToSaveWrapper forwards attribute access to the copy of the active adapter.
    branches = [getattr(module, BRANCH_ATTRIBUTE) for module in modules]
    with torch.no_grad():
        norms = [float(torch.linalg.matrix_norm(branch.delta_weight())) for branch in branches]
    return {
        "memory_length": getattr(modules[0], STATE_ATTRIBUTE).memory_length,
        "hylora_rank": branches[0].rank,
        "hylora_alpha": branches[0].alpha,
        "hylora_scale": branches[0].scale,
        "layers": len(branches),
        "ab_frobenius_norm": norms,
        "parameters_added": sum(branch.A.weight.numel() + branch.B.weight.numel() for branch in branches),
    }


def attention_flops(model: nn.Module, n: int) -> tuple[float, str]:
    """`MODULE.measurement.flops`: dense attention plus the HyLoRA branch, 2·N·r·(d_in + d_out) per layer
    (X·A then ·B), at length N. No memory keys: single rows have none (M = 0).

    Args:
        model: a model with span_expanded installed (peft-wrapped or not).
        n: the sequence length N.

    Returns:
        `(flops, formula)`, the formula naming each layer's (r, d_in, d_out).

    Example:
        >>> model = apply(model, SpanExpandedConfig(hylora_rank=8))
        >>> flops, formula = attention_flops(model, 64)  # a tiny BERT: 2 layers, 4 heads, d = 8, hidden 32
        >>> flops == 2 * 4 * 4 * 64**2 * 8 + 2 * (2 * 64 * 8 * (32 + 32))
        True
    """
    # peft's ModulesToSaveWrapper forwards attribute access to the copy of the active adapter.
    branches = [getattr(module, BRANCH_ATTRIBUTE) for module in _installed_layers(model)]
    hylora = sum(2 * n * b.rank * (b.in_features + b.out_features) for b in branches)
    formula = (
        "dense + HyLoRA Σ_layers 2·N·r·(d_in + d_out) with (r, d_in, d_out) = "
        f"{[(b.rank, b.in_features, b.out_features) for b in branches]}; no memory keys (M = 0)"
    )
    return dense_attention_flops(model, n) + hylora, formula


def dense_reference(model: nn.Module, load_base: Callable[[], nn.Module]) -> nn.Module:
    """`MODULE.measurement.dense_reference`: a copy of the model on sdpa ([`sdpa_copy`]) whose layers capture
    no input.

    The copy's attention modules get their own `forward` back: sdpa would never consume the layer input that
    `apply`'s forward stores, and the reference runs exactly the dense model's code.

    Args:
        model: a model with span_expanded installed (peft-wrapped or not).
        load_base: unused (the copy is the dense model: the branch is only called by the module's function).

    Returns:
        The copy, on the model's device, its attention implementation "sdpa".
    """
    reference = sdpa_copy(model, load_base)
    for module in _installed_layers(unwrap_peft(reference)):
        captured = module.forward
        if isinstance(captured, functools.partial) and captured.func is _capturing_forward:
            module.forward = captured.args[1]
    return reference


def layer_attention(
    attention: Callable,
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    hidden_states: torch.Tensor | None,
) -> torch.Tensor:
    """`MODULE.measurement.layer_attention`: one call of `attention` on one layer, as its forward makes it.

    span_expanded's function reads the layer input X that the module's forward stores on it for each call
    (and consumes it): called directly, it gets `hidden_states` here, as that forward would give it.
    It then runs sdpa over the (empty) memory and the current keys, plus the branch X·A·B.
    """
    state = getattr(module, STATE_ATTRIBUTE, None)
    if state is not None and hidden_states is not None:
        state.hidden_states = hidden_states
    return call_attention(attention, module, query, key, value, hidden_states)
