"""`span_expanded`: attention over [memory ‖ current] keys and values, plus the parallel HyLoRA branch.

Shapes, used throughout: B batch, N current (query) positions, K current key positions (N unless a
transformers cache is in use), M memory positions, H query heads, H_kv key/value heads, D head dimension,
d_in the attention layer's input width, d_out = H·D the width the output projection reads.

Each attention module carries two things, attached by `model.apply`:

- `span_expanded`, a [`SpanExpandedBranch`] (an `nn.Module`, so peft's `modules_to_save` can train and save
  it): the low-rank map X ↦ dropout(X)·A·B·(alpha/r) from the layer's input to the output projection's input;
- `span_expanded_state`, a [`SpanExpandedState`] (plain Python, never saved): the layer input captured by the
  module's forward for this call, and the Transformer-XL memory while `segment_memory` is open.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.integrations.sdpa_attention import repeat_kv

from ..base import padding_and_causality
from ..trace import trace_step


class SpanExpandedBranch(nn.Module):
    """The HyLoRA branch of one layer: `dropout(X)·A·B·(alpha/r)`, X the attention layer's input.

    `A` (d_in → r) is initialised like LoRA's A (Kaiming-uniform), `B` (r → d_out) with zeros, so a freshly
    installed branch adds exactly zero and the layer computes what it computed before.

    Args:
        in_features: d_in, the width of the attention layer's input hidden states.
        out_features: d_out = H·D, the width the output projection reads.
        rank: r.
        alpha: the scaling numerator; the branch is multiplied by `alpha / rank`.
        dropout: dropout probability on X, active in training only.

    Example:
        >>> branch = SpanExpandedBranch(32, 32, rank=4, alpha=8.0)
        >>> branch(torch.randn(2, 5, 32)).abs().max().item()  # B starts at zero
        0.0
    """

    def __init__(self, in_features: int, out_features: int, rank: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.rank = rank
        self.alpha = alpha
        self.scale = alpha / rank
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.A = nn.Linear(in_features, rank, bias=False)
        self.B = nn.Linear(rank, out_features, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # As peft's LoRA: A random, B zero, so that the product A·B, and the branch, start at exactly zero.
        nn.init.kaiming_uniform_(self.A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.B.weight)

    def delta_weight(self) -> torch.Tensor:
        """The (d_out, d_in) matrix of the branch without its scale: (A·B)ᵀ in row-vector notation."""
        return self.B.weight @ self.A.weight

    def forward(
        self, hidden_states: torch.Tensor, attention: torch.Tensor | None = None, *, inplace: bool = False
    ) -> torch.Tensor:
        """(B, N, d_in) → (B, N, d_out): the branch; or, given the attention output (B, N, d_out) or (B, N, H,
        D), `attention + branch` in the attention's shape, summed without a tensor of the branch alone.

        Args:
            hidden_states: X, the attention layer's input.
            attention: the attention output to add the branch to, if any.
            inplace: the sum may be written into `attention` when no gradient is recorded (the attention
                function passes its own fresh SDPA output, which nothing else reads).

        Example:
            >>> branch = SpanExpandedBranch(32, 16, rank=4, alpha=8.0)
            >>> _ = nn.init.normal_(branch.B.weight)
            >>> x, attention = torch.randn(2, 5, 32), torch.randn(2, 5, 16)
            >>> torch.allclose(branch(x, attention), attention + branch(x), atol=1e-6)
            True
        """
        # F.linear on the weights: the branch runs on every layer of every pass, and each submodule call costs
        # more Python than the (B, N, r) product itself at small N.
        low_rank = F.linear(self.dropout(hidden_states) if self.training else hidden_states, self.A.weight)
        if attention is None:
            # Scaled at rank r, not at d_out: r/d_out of the multiplications.
            return F.linear(low_rank * self.scale, self.B.weight)
        if attention.is_contiguous():
            # One addmm: attention + scale·(X·A)·B, with no separate scaling, sum or branch tensor. (As
            # linear, multiply, linear and add, the branch cost 3% of a whole MiniLM pass at N = 128.)
            flat = attention.view(-1, self.out_features)
            rows = low_rank.reshape(-1, self.rank).to(attention.dtype)
            weight = self.B.weight.to(attention.dtype).t()
            recorded = flat.requires_grad or rows.requires_grad or weight.requires_grad
            if inplace and not (recorded and torch.is_grad_enabled()):
                # A fresh output and the copy of the attention into it were half of the sum's time (22 of
                # 47 µs at MiniLM's N = 128).
                return flat.addmm_(rows, weight, alpha=self.scale).view(attention.shape)
            return torch.addmm(flat, rows, weight, alpha=self.scale).view(attention.shape)
        # A strided attention (SDPA's output in the (B, H, N, D) layout, transposed) would be copied whole by
        # the product: the branch's own fresh tensor takes the sum instead, reading the attention in place.
        # (Its last step, a linear map, keeps no output for the backward pass: adding in place is safe.)
        branch = F.linear(low_rank * self.scale, self.B.weight)
        return branch.view(attention.shape).to(attention.dtype).add_(attention)

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha}, scale={self.scale:g}"


@dataclass
class SpanExpandedState:
    """Per-layer runtime state: the captured layer input and the segment memory. Never saved.

    Attributes:
        memory_length: L_span, the most memory positions kept per row.
        recording: True inside `segment_memory`: each call stores its keys and values for the next one.
        hidden_states: the layer input X (B, N, d_in) captured by the module's forward, consumed by the
            attention function of the same call.
        memory_keys: (B, H_kv, M, D) keys of earlier positions, detached, or None when memory is empty.
        memory_values: (B, H_kv, M, D) values of the same positions.
        memory_mask: (B, M) bool, True on a real memory slot; a row whose earlier segments held fewer real
            tokens than M has its last slots False.
    """

    memory_length: int
    recording: bool = False
    hidden_states: torch.Tensor | None = None
    memory_keys: torch.Tensor | None = None
    memory_values: torch.Tensor | None = None
    memory_mask: torch.Tensor | None = None

    @property
    def memory_size(self) -> int:
        """M, the number of memory slots (0 when empty)."""
        return 0 if self.memory_keys is None else self.memory_keys.shape[2]

    def clear_memory(self) -> None:
        self.memory_keys = self.memory_values = self.memory_mask = None


def keep_last_positions(
    keys: torch.Tensor, values: torch.Tensor, valid: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The last `length` valid positions of each row, in order, left-aligned: the new memory.

    Args:
        keys: (B, H_kv, T, D).
        values: (B, H_kv, T, D).
        valid: (B, T) bool, True on a real (non-padding) position.
        length: L_span.

    Returns:
        `(keys, values, mask)` of shapes (B, H_kv, M, D), (B, H_kv, M, D) and (B, M), M = the largest number
        kept in any row (at most `length`); `mask` is False on the slots a shorter row leaves empty (their
        keys and values are zero).

    Example:
        >>> valid = torch.tensor([[True, True, True, False], [True, False, False, False]])
        >>> _, _, mask = keep_last_positions(torch.zeros(2, 1, 4, 8), torch.zeros(2, 1, 4, 8), valid, 2)
        >>> mask.tolist()
        [[True, True], [True, False]]
    """
    # Valid positions at or after each position: a position is kept when it is valid and among the last L.
    from_the_end = valid.flip(-1).cumsum(-1).flip(-1)
    keep = valid & (from_the_end <= length)
    counts = keep.sum(-1)
    size = int(counts.max())
    # A stable sort on "not kept" lists each row's kept positions first, in their original order.
    order = torch.sort((~keep).to(torch.int8), dim=-1, stable=True).indices[:, :size]
    index = order[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[-1])
    mask = torch.arange(size, device=valid.device)[None, :] < counts[:, None]
    empty = ~mask[:, None, :, None]  # a shorter row's unused slots: zeros, and masked out when attended
    return keys.gather(2, index).masked_fill(empty, 0), values.gather(2, index).masked_fill(empty, 0), mask


def memory_attention_mask(
    attention_mask: torch.Tensor | None,
    memory_mask: torch.Tensor,
    causal: bool,
    batch: int,
    query_length: int,
    key_length: int,
) -> torch.Tensor:
    """The mask over [memory ‖ current] keys: the memory columns prepended to the current mask.

    Every current query may attend every real memory slot (all of them lie in its past); the current columns
    keep transformers' padding and causal mask. Without a mask from transformers the current part is built
    here: all-True, or, for a causal layer, the causal triangle aligned to the last key (bottom-right).

    Args:
        attention_mask: transformers' (B, 1, N, K) mask, boolean (True = may attend) or additive float, or
            None when nothing is padded.
        memory_mask: (B, M) bool, True on a real memory slot.
        causal: whether the current part is causal.
        batch: B.
        query_length: N.
        key_length: K.

    Returns:
        (B, 1 or H, N, M + K), of `attention_mask`'s dtype (boolean when it is None).
    """
    device = memory_mask.device
    if attention_mask is None:
        if causal:
            queries = torch.arange(query_length, device=device)[:, None] + (key_length - query_length)
            current = queries >= torch.arange(key_length, device=device)[None, :]
        else:
            current = torch.ones(query_length, key_length, dtype=torch.bool, device=device)
        attention_mask = current[None, None].expand(batch, 1, -1, -1)
    attention_mask = attention_mask.expand(batch, -1, query_length, key_length)
    memory = memory_mask[:, None, None, :].expand(-1, attention_mask.shape[1], query_length, -1)
    if attention_mask.dtype != torch.bool:  # additive: 0 where allowed, the dtype's minimum elsewhere
        blocked = torch.finfo(attention_mask.dtype).min
        memory = torch.zeros(memory.shape, dtype=attention_mask.dtype, device=device).masked_fill(
            ~memory, blocked
        )
    return torch.cat([memory, attention_mask], dim=-1)


def span_expanded_attention(
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
    """softmax(Q·[K_mem ‖ K]ᵀ·scaling + mask)·[V_mem ‖ V] + dropout(X)·A·B·(alpha/r), per head.

    With empty memory (always, outside `segment_memory`) the first term is the model's own scaled dot-product
    attention. Inside `segment_memory` this call's keys and values (its real positions only) are appended to
    the memory, which then keeps its last `memory_length` positions per row, for the next call.

    Args:
        module: the attention module, carrying `span_expanded` and `span_expanded_state` (see `model.apply`).
        query: (B, H, N, D).
        key: (B, H_kv, K, D).
        value: (B, H_kv, K, D).
        attention_mask: transformers' boolean (B, 1, N, K) mask from `sdpa_mask` (True = may attend, causal
            triangle included), or None when nothing is padded (causal layers then use `module.is_causal`).
        scaling: the softmax scale, 1/√D when None.
        dropout: attention-probability dropout (transformers passes 0 in eval mode).
        **kwargs: transformers' extra arguments (position ids, sliding window, …); the mask already carries
            what they mean for attention.

    Returns:
        `(output, None)`, output (B, N, H, D), the layout transformers reshapes to (B, N, H·D) before the
        output projection.

    Raises:
        RuntimeError: the module was not installed with `apply`, or its forward did not capture X.
        ValueError: the memory was stored for a different batch size, or `segment_memory` is recording while
            a transformers cache supplies extra keys.

    Example:
        >>> from attncard.modules.span_expanded.model import SpanExpandedConfig, apply
        >>> before = model(**batch).logits
        >>> model = apply(model, SpanExpandedConfig())  # routes every layer through this function
        >>> torch.allclose(model(**batch).logits, before, atol=1e-6)  # the same until B is trained
        True
    """
    state: SpanExpandedState | None = getattr(module, "span_expanded_state", None)
    if state is None:
        raise RuntimeError(
            f"{type(module).__name__} has no span_expanded state; install the module with "
            "modules.span_expanded.model.apply(model, config)"
        )
    hidden_states, state.hidden_states = state.hidden_states, None  # consume: one capture, one call
    if hidden_states is None:
        raise RuntimeError(
            f"the span_expanded forward of {type(module).__name__} captured no input for this call; the "
            "attention function must be called from the module's own forward"
        )
    batch, _, query_length, _ = query.shape
    key_length = key.shape[2]
    key_padding_mask, causal = padding_and_causality(module, query, attention_mask)

    # 1. Memory: [K_mem ‖ K], [V_mem ‖ V] and the mask extended with the memory columns.
    memory_size = state.memory_size
    if memory_size and state.memory_keys.shape[0] != batch:
        raise ValueError(
            f"segment_memory holds memory for batch size {state.memory_keys.shape[0]}, but this call has "
            f"batch size {batch}; process the segments of the same texts, in the same batch size, inside one "
            "segment_memory (or call reset() on it between documents of another batch size)"
        )
    if memory_size:
        full_key = torch.cat([state.memory_keys.to(key.dtype), key], dim=2)
        full_value = torch.cat([state.memory_values.to(value.dtype), value], dim=2)
        mask = memory_attention_mask(
            attention_mask, state.memory_mask, causal, batch, query_length, key_length
        )
        is_causal = False  # the explicit mask carries the causal triangle, shifted past the memory
    else:
        full_key, full_value, mask = key, value, attention_mask
        is_causal = causal and attention_mask is None
    trace_step(
        module,
        "memory concat",
        f"cat([memory ‖ current]) on the key axis (M = {memory_size} memory positions, at most L_span = "
        f"{state.memory_length})",
        {"memory_keys": state.memory_keys, "key": key, "memory_values": state.memory_values, "value": value},
        {"key": full_key, "value": full_value, "mask": mask},
    )

    # 2. Attention over memory and current positions; GQA: each key/value head serves its query-head group.
    groups = getattr(module, "num_key_value_groups", 1)
    attention = F.scaled_dot_product_attention(
        query,
        repeat_kv(full_key, groups),
        repeat_kv(full_value, groups),
        attn_mask=mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=is_causal,
    )
    attention = attention.transpose(1, 2)  # (B, N, H, D)
    trace_step(
        module,
        "attention",
        f"scaled_dot_product_attention over [memory ‖ current] (GQA heads repeated ×{groups})",
        {"query": query, "key": full_key, "value": full_value, "mask": mask},
        {"output": attention},
    )

    # 3. HyLoRA: the low-rank branch from the layer input, added to the attention by the branch's own product.
    if hidden_states.shape[:2] != (batch, query_length):
        raise RuntimeError(
            f"the captured layer input has shape {tuple(hidden_states.shape)}, expected ({batch}, "
            f"{query_length}, d_in)"
        )
    # SDPA's output follows the query's layout: in the models' own projections (B, N, H, D), contiguous here.
    output = module.span_expanded(hidden_states, attention, inplace=True)
    trace_step(
        module,
        "HyLoRA branch and sum",
        "attention + dropout(X)·A·B·(alpha/r), split into heads (one addmm where the attention is "
        "contiguous)",
        {"attention": attention, "x": hidden_states},
        {"output": output},
    )

    # 4. Inside segment_memory: the new memory is the last L_span real positions of [memory ‖ current].
    if state.recording and state.memory_length > 0:
        if key_length != query_length:
            raise ValueError(
                "segment_memory keeps its own memory of earlier segments and cannot be combined with a "
                f"transformers cache ({key_length} keys for {query_length} queries); call the model with "
                "use_cache=False and no cache"
            )
        if key_padding_mask is None:
            key_padding_mask = torch.ones(batch, key_length, dtype=torch.bool, device=key.device)
        valid = key_padding_mask.expand(batch, key_length)
        if memory_size:
            valid = torch.cat([state.memory_mask, valid], dim=-1)
        state.memory_keys, state.memory_values, state.memory_mask = keep_last_positions(
            full_key.detach(), full_value.detach(), valid, state.memory_length
        )
    return output, None
