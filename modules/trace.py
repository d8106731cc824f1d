"""The tensor trace: one real forward pass, recording what each stage of one attention layer did.

The card prints the trace, so nothing it says about shapes is written by hand. Projections are recorded by
forward hooks; the steps inside an attention function are recorded by the function itself, through
[`trace_step`], which costs one context-variable lookup when no trace is running.

Example:
    >>> from attncard.modules import get_module
    >>> model = get_module("none").apply(model, get_module("none").config_class())  # a BERT
    >>> steps = record_trace(model, tokenizer(["a fine film ."], return_tensors="pt"))
    >>> [step.stage for step in steps]
    ['q projection', 'k projection', 'v projection', 'attention', 'output projection']
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

import torch
from torch import nn

from ..pipeline.record.results import TensorSpec, TraceStep
from .base import attention_layers


@dataclass
class _ActiveTrace:
    layer_index: int
    steps: list[TraceStep]


_ACTIVE: contextvars.ContextVar[_ActiveTrace | None] = contextvars.ContextVar("attncard_trace", default=None)


# The stages `record_trace` records itself, by hooks on the projections; every other step is the attention
# function's own, recorded through `trace_step`.
PROJECTION_STAGES = frozenset(
    ("q projection", "k projection", "v projection", "qkv projection (fused)", "output projection")
)


def _specs(tensors: dict[str, torch.Tensor | None]) -> dict[str, TensorSpec]:
    return {name: TensorSpec.of(t) for name, t in tensors.items() if isinstance(t, torch.Tensor)}


def trace_step(
    module: nn.Module,
    stage: str,
    op: str,
    inputs: dict[str, torch.Tensor | None],
    outputs: dict[str, torch.Tensor | None],
) -> None:
    """Records a step of an attention function, when a trace of this module's layer is running.

    The card's tensor trace holds the projections, which [`record_trace`] hooks itself, and the steps the
    attention function records through this call: a function that records none leaves the card without an
    attention row. Call it after computing a step, with the tensors that step read and wrote; outside a
    trace it only looks up a context variable.

    Args:
        module: the attention module the function was called with (its layer index selects the layer).
        stage: the row's name in the card, e.g. "attention" (or "scores", "top-k", … for several steps).
        op: what the step computes, in words or a formula: the card prints it as it is.
        inputs: name -> tensor read; a `None` value is left out (e.g. no mask).
        outputs: name -> tensor written.

    Example:
        >>> from attncard.modules import get_module
        >>> none = get_module("none")
        >>> model = none.apply(model, none.config_class())  # a BERT; `none_attention` calls trace_step once
        >>> step = record_trace(model, batch)[3]
        >>> step.stage, sorted(step.inputs), step.outputs["output"].shape  # output (B, N, H, D)
        ('attention', ['key', 'mask', 'query', 'value'], [3, 15, 4, 8])
    """
    if tracing(module):
        _ACTIVE.get().steps.append(TraceStep(stage, op, _specs(inputs), _specs(outputs)))


def tracing(module: nn.Module) -> bool:
    """Whether a running trace records `module`'s layer: then tensors made for [`trace_step`] are needed."""
    active = _ACTIVE.get()
    return active is not None and getattr(module, "attncard_layer_index", None) == active.layer_index


def record_trace(model: nn.Module, inputs: dict[str, torch.Tensor], layer_index: int = 0) -> list[TraceStep]:
    """Runs one forward pass of `model` on `inputs` and returns the steps of attention layer `layer_index`.

    Args:
        model: a model with an attncard module installed (peft-wrapped or not).
        inputs: the model's keyword inputs, e.g. a tokenizer's output.
        layer_index: which attention layer to trace.

    Returns:
        The [`TraceStep`]s in the order they ran: the projections, the attention function's own steps, the
        output projection.
    """
    layer = attention_layers(model)[layer_index]
    steps: list[TraceStep] = []
    projections = {"q": "q projection", "k": "k projection", "v": "v projection", "o": "output projection"}
    if layer.projection("q") is layer.projection("k"):  # GPT-2's fused c_attn
        projections = {"q": "qkv projection (fused)", "o": "output projection"}
    handles = []
    for which, stage in projections.items():
        projection = layer.projection(which)

        def hook(mod, args, output, stage=stage):
            steps.append(TraceStep(stage, type(mod).__name__, _specs({"x": args[0]}), _specs({"y": output})))

        handles.append(projection.register_forward_hook(hook))
    token = _ACTIVE.set(_ActiveTrace(layer_index, steps))
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        _ACTIVE.reset(token)
        for handle in handles:
            handle.remove()
    return steps
