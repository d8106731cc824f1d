"""Adaptive attention span (Sukhbaatar et al., 2019, "Adaptive Attention Span in Transformers").

Each head h learns a span z_h = S_max·σ(θ_h). A key at distance x from the query is weighted by the soft
ramp mask

    m_h(x) = clamp((R + z_h − x) / R, 0, 1)

(full weight up to z_h, falling linearly to zero at z_h + R), applied as the additive bias log m_h(x) before
the softmax — softmax(s + log m) is the paper's m·exp(s) renormalised — so θ receives gradients through the
ramp. Distances are |i − j| in encoders and i − j ≥ 0 (past only) in decoders. One global token per row
attends to and is attended by every position with full weight. Keys beyond z_h + R get weight zero, so a
head only reads a band of ⌈z_h + R⌉ − 1 keys on each side: at inference that band is computed by the banded
kernel, in memory linear in the sequence length.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers.integrations.sdpa_attention import repeat_kv

from ..base import global_token_index, padding_and_causality
from ..kernels import banded_attention
from ..trace import trace_step


class AdaptiveSpan(nn.Module):
    """The learnable spans of one attention layer: one logit θ_h per head.

    Example:
        >>> spans = AdaptiveSpan(num_heads=12, max_span=128, ramp=8, init_logit=4.0)
        >>> spans.spans().shape
        torch.Size([12])
    """

    def __init__(
        self, num_heads: int, max_span: int, ramp: int, init_logit: float, global_token: bool = True
    ):
        super().__init__()
        self.span_logits = nn.Parameter(torch.full((num_heads,), float(init_logit)))
        self.max_span = max_span
        self.ramp = ramp
        self.global_token = global_token

    def spans(self) -> torch.Tensor:
        """z_h = S_max·σ(θ_h), in tokens: (H,)."""
        return self.max_span * torch.sigmoid(self.span_logits)

    def windows(self, length: int) -> torch.Tensor:
        """Per head, the farthest distance with non-zero weight, ⌈z_h + R⌉ − 1, capped at length − 1: (H,)."""
        reach = torch.ceil(self.spans().detach() + self.ramp).long() - 1
        return reach.clamp(min=0, max=max(length - 1, 0))

    def log_mask(self, max_distance: int) -> torch.Tensor:
        """log m_h(x) for x = 0 … max_distance: (H, max_distance + 1), −inf where the weight is zero."""
        distance = torch.arange(max_distance + 1, device=self.span_logits.device, dtype=torch.float32)
        mask = ((self.ramp + self.spans()[:, None].float() - distance) / self.ramp).clamp(0, 1)
        # Two-sided where: log(0) must give −inf without a NaN gradient flowing into θ.
        return torch.where(mask > 0, torch.log(mask.clamp_min(1e-30)), -math.inf)

    def extra_repr(self) -> str:
        return f"heads={self.span_logits.numel()}, max_span={self.max_span}, ramp={self.ramp}"


def dense_span_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    log_mask: torch.Tensor,
    *,
    scaling: float,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
    global_index: torch.Tensor | None,
    dropout: float,
) -> torch.Tensor:
    """The span mask as a full (B, H, N, N) bias on the scores: used for training with dropout.

    Shapes: query, key, value (B, H, N, D); log_mask (H, W + 1); returns (B, H, N, D).
    """
    batch, _, length, _ = query.shape
    positions = torch.arange(length, device=query.device)
    offset = positions[:, None] - positions[None, :]  # i − j
    distance = offset.abs()
    max_distance = log_mask.shape[1] - 1
    bias = log_mask[:, distance.clamp(max=max_distance)]  # (H, N, N)
    bias = torch.where(distance <= max_distance, bias, -math.inf)[None].expand(batch, -1, -1, -1)
    if global_index is not None:
        is_global = positions[None, :] == global_index[:, None]  # (B, N)
        global_pair = is_global[:, :, None] | is_global[:, None, :]  # query or key is the global token
        bias = torch.where(global_pair[:, None], 0.0, bias)
    allowed = torch.ones(batch, 1, length, length, dtype=torch.bool, device=query.device)
    if causal:
        allowed = allowed & (offset >= 0)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]
    bias = torch.where(allowed, bias, -math.inf).to(query.dtype)
    # Written out rather than F.scaled_dot_product_attention: its fused CPU kernels give no gradient to a
    # float attn_mask, and the span logits learn only through that gradient.
    weights = torch.softmax(torch.matmul(query, key.transpose(-1, -2)) * scaling + bias, dim=-1)
    weights = F.dropout(weights, p=dropout, training=True)
    return torch.matmul(weights, value)


def adaptive_span_attention(
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
    """Attention with a learned span per head.

    Shapes: query (B, H, N, D), key and value (B, H_kv, N, D), attention_mask sdpa's boolean (B, 1, N, N)
    or None; returns (B, N, H, D) like transformers' `sdpa_attention_forward`.

    With dropout (training) the span is applied as a dense bias, so dropout acts on the same probabilities as
    in the model's own attention; without it (inference) the banded kernel reads only the band.
    """
    span: AdaptiveSpan = module.adaptive_span
    if hasattr(module, "num_key_value_groups"):
        key = repeat_kv(key, module.num_key_value_groups)
        value = repeat_kv(value, module.num_key_value_groups)
        trace_step(
            module,
            "repeat_kv",
            "repeat key/value heads for grouped-query attention",
            {},
            {"key": key, "value": value},
        )
    batch, _, length, head_dim = query.shape
    scaling = head_dim**-0.5 if scaling is None else scaling
    key_padding_mask, causal = padding_and_causality(module, query, attention_mask)
    global_index = None
    if span.global_token:
        global_index = global_token_index(key_padding_mask, causal, batch, length, query.device)

    windows = span.windows(length)
    log_mask = span.log_mask(int(windows.max()))
    trace_step(
        module,
        "span mask",
        "log m(x), m(x) = clamp((R + z_h − x)/R, 0, 1), z_h = S_max·σ(θ_h)",
        {"span_logits": span.span_logits},
        {"log_mask": log_mask},
    )

    if dropout > 0.0 and module.training:
        output = dense_span_attention(
            query,
            key,
            value,
            log_mask,
            scaling=scaling,
            causal=causal,
            key_padding_mask=key_padding_mask,
            global_index=global_index,
            dropout=dropout,
        )
        op = "scaled_dot_product_attention with the span bias, dropout"
    else:
        output = banded_attention(
            query,
            key,
            value,
            windows,
            scaling=scaling,
            causal=causal,
            key_padding_mask=key_padding_mask,
            distance_bias=log_mask.to(query.dtype),
            global_index=global_index,
        )
        op = "banded attention over each head's window ⌈z_h + R⌉ − 1, span bias"
    trace_step(module, "attention", op, {"query": query, "key": key, "value": value}, {"output": output})
    return output.transpose(1, 2).contiguous(), None
