"""Sliding-window attention (Beltagy, Peters and Cohan, 2020, "Longformer", local attention only).

Query i attends to key j when j is within the window — |i − j| ≤ w in encoders, i − w ≤ j ≤ i in decoders —
and j is a real token. The band is read with `Tensor.unfold`: keys and values padded at the ends give each
query a (width, D) slice of its keys, width 2·w + 1 (encoders) or w + 1 (decoders), so the scores, softmax
and weighted sum run over (N, width) rather than (N, N). Window positions outside the sequence and padding
keys get weight zero. When the width reaches N, the dense (N, N) scores under the same band mask cost less
and are computed instead.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.integrations.sdpa_attention import repeat_kv

from attncard.modules.base import padding_and_causality
from attncard.modules.trace import trace_step

from .config import SlidingWindowConfig


def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor, dropout: float) -> torch.Tensor:
    """softmax over the last dimension, of the allowed scores only, then dropout. A row with nothing allowed
    (a padding query farther than w from every real token) gets all zeros, never NaN."""
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1) * allowed
    return F.dropout(weights, p=dropout)


def band_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    *,
    window: int,
    causal: bool,
    scaling: float,
    dropout: float,
) -> torch.Tensor:
    """Attention over each query's band, from (N, width) scores.

    Shapes: query, key, value (B, H, N, D); key_padding_mask (B, N), True on real tokens, or None; returns
    (B, H, N, D).
    """
    length = query.shape[-2]
    before, after = window, 0 if causal else window
    width = before + after + 1
    # Slot t of query i's window holds key i − w + t: padding the sequence puts every slot in range.
    keys = F.pad(key, (0, 0, before, after)).unfold(2, width, 1)  # (B, H, N, D, width)
    values = F.pad(value, (0, 0, before, after)).unfold(2, width, 1)
    slots = torch.arange(-before, after + 1, device=query.device)
    positions = torch.arange(length, device=query.device)[:, None] + slots  # (N, width): the key of each slot
    allowed = ((positions >= 0) & (positions < length))[None, None]  # (1, 1, N, width)
    if key_padding_mask is not None:
        real = F.pad(key_padding_mask, (before, after), value=False).unfold(1, width, 1)  # (B, N, width)
        allowed = allowed & real[:, None]
    scores = torch.einsum("bhnd,bhndw->bhnw", query, keys) * scaling
    weights = masked_softmax(scores, allowed, dropout)
    return torch.einsum("bhnw,bhndw->bhnd", weights, values)


def dense_band_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    *,
    window: int,
    causal: bool,
    scaling: float,
    dropout: float,
) -> torch.Tensor:
    """The same attention from the full (N, N) scores under the band mask: cheaper once the band is N wide.

    Shapes as [`band_attention`].
    """
    positions = torch.arange(query.shape[-2], device=query.device)
    offset = positions[None, :] - positions[:, None]  # j − i
    allowed = ((offset >= -window) & (offset <= (0 if causal else window)))[None, None]  # (1, 1, N, N)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]
    weights = masked_softmax(torch.matmul(query, key.transpose(-1, -2)) * scaling, allowed, dropout)
    return torch.matmul(weights, value)


def sliding_window_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    scaling: float | None = None,
    dropout: float = 0.0,
    config: SlidingWindowConfig,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Attention over a window of w keys on each side (encoders) or before (decoders).

    Shapes: query (B, H, N, D), key and value (B, H_kv, N, D), attention_mask sdpa's boolean (B, 1, N, N)
    or None; returns (B, N, H, D) like transformers' `sdpa_attention_forward`. The window is `config.window`:
    attncard gives every call the configuration the module was installed with.
    """
    if hasattr(module, "num_key_value_groups"):  # grouped-query attention: each key/value head serves a group
        key = repeat_kv(key, module.num_key_value_groups)
        value = repeat_kv(value, module.num_key_value_groups)
    length, head_dim = query.shape[-2], query.shape[-1]
    scaling = head_dim**-0.5 if scaling is None else scaling
    key_padding_mask, causal = padding_and_causality(module, query, attention_mask)
    window = min(config.window, length - 1)
    width = window + 1 if causal else 2 * window + 1
    attend = band_attention if width < length else dense_band_attention
    output = attend(
        query,
        key,
        value,
        key_padding_mask,
        window=window,
        causal=causal,
        scaling=scaling,
        dropout=dropout,
    )
    op = "softmax(q·kᵀ/√d) over each query's window, " + (
        "dense scores under the band mask" if width >= length else "band scores (unfold)"
    )
    trace_step(module, "attention", op, {"query": query, "key": key, "value": value}, {"output": output})
    return output.transpose(1, 2).contiguous(), None
