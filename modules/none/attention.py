"""`none`: the model's own scaled dot-product attention, recorded in the tensor trace."""

from __future__ import annotations

import torch
from torch import nn
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from ..trace import trace_step


def none_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, unchanged.

    Shapes: query (B, H, N, D), key and value (B, H_kv, N, D), attention_mask (B, 1, N, N) bool or None;
    returns (B, N, H, D).
    """
    output, _ = sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
    )
    trace_step(
        module,
        "attention",
        "scaled_dot_product_attention (transformers sdpa, GQA heads repeated)",
        {"query": query, "key": key, "value": value, "mask": attention_mask},
        {"output": output},
    )
    return output, None
