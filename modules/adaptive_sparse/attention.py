"""`adaptive_sparse`: exact top-k attention per query (Zhao et al., 2019, Explicit Sparse Transformer).

For each query row i of each head, with scores s_ij = scaling · q_i·k_j over the keys j it may attend to
(padding and, in decoders, the causal triangle removed):

    K_i   = the k allowed keys with the largest s_ij (exactly k; ties broken by `torch.topk`)
    p_ij  = exp(s_ij) / Σ_{l ∈ K_i} exp(s_il)   for j ∈ K_i,   0 otherwise
    out_i = Σ_j p_ij · v_j

The keys kept adapt to each query (unlike a fixed window), hence the name. The selection is not
differentiable; gradients flow through the kept scores, as through any masked softmax. The full score
matrix is computed before the selection: this implementation concentrates attention, it does not save
compute.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.integrations.sdpa_attention import repeat_kv

from ..trace import trace_step


class AdaptiveSparseState(nn.Module):
    """A layer's top-k setting and its count of training forward passes (for the full-attention warm-up).

    Args:
        top_k: keys kept per query.
        warmup_steps: training forward passes that use full attention first.

    The count is a non-persistent buffer: it follows the model across devices but stays out of saved
    weights, as it is training-loop state, not a parameter.
    """

    def __init__(self, top_k: int, warmup_steps: int = 0):
        super().__init__()
        self.top_k = top_k
        self.warmup_steps = warmup_steps
        self.register_buffer("steps", torch.zeros((), dtype=torch.long), persistent=False)

    def count_pass(self, training: bool) -> bool:
        """Counts a forward pass made in training mode; returns whether it is a warm-up (full) pass."""
        if not training:
            return False
        warming_up = self.warmup_steps > 0 and int(self.steps.item()) < self.warmup_steps
        self.steps.add_(1)
        return warming_up

    def extra_repr(self) -> str:
        return f"top_k={self.top_k}, warmup_steps={self.warmup_steps}"


def allowed_keys(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    is_causal: bool | None = None,
) -> torch.Tensor:
    """The boolean mask of keys each query may attend to, as SDPA would read the same arguments.

    `sdpa_mask` gives a boolean (B, 1, N, N) mask with the causal triangle folded in; when it is `None`
    (nothing padded) a causal model relies on `is_causal` (the argument, else `module.is_causal`).

    Returns:
        A boolean tensor broadcastable to the scores (B, H, N_q, N_k): True where a query may attend.
    """
    n_q, n_k = query.shape[-2], key.shape[-2]
    if attention_mask is not None:
        mask = attention_mask[..., :n_k]
        return mask if mask.dtype == torch.bool else mask == 0  # an additive float mask: 0 where allowed
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    ones = torch.ones(n_q, n_k, dtype=torch.bool, device=query.device)
    if causal and n_q > 1:
        return ones.tril(diagonal=n_k - n_q)[None, None]  # aligned to the last key, as with a cache
    return ones[None, None]


def select_top_k(
    scores: torch.Tensor, allowed: torch.Tensor, top_k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exactly `top_k` allowed keys per query row, or all allowed keys when fewer are allowed.

    Args:
        scores: (B, H, N_q, N_k) scaled attention scores.
        allowed: boolean, broadcastable to `scores`.
        top_k: keys to keep per row.

    Returns:
        `(keep, threshold)`: `keep` boolean (B, H, N_q, N_k); `threshold` (B, H, N_q, 1) the smallest kept
        score of each row (-inf where a row has fewer than `top_k` allowed keys).

    Example:
        >>> scores = torch.tensor([[[[0.1, 0.9, 0.5]]]])
        >>> keep, _ = select_top_k(scores, torch.ones_like(scores, dtype=torch.bool), top_k=2)
        >>> keep.int().tolist()
        [[[[0, 1, 1]]]]
    """
    allowed = allowed.expand_as(scores)
    k = min(top_k, scores.shape[-1])
    # The selection is a choice of indices, not a function to differentiate.
    masked = scores.detach().masked_fill(~allowed, float("-inf"))
    values, indices = masked.topk(k, dim=-1)
    keep = torch.zeros_like(allowed).scatter_(-1, indices, True)
    # A row with fewer than k allowed keys had disallowed keys among its top k: drop them again.
    return keep & allowed, values[..., -1:]


def adaptive_sparse_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    scaling: float | None = None,
    dropout: float = 0.0,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k attention, with the layer's settings in `module.adaptive_sparse` ([`AdaptiveSparseState`]).

    Shapes: query (B, H, N, D), key and value (B, H_kv, N, D), attention_mask (B, 1, N, N) bool or None;
    returns the output (B, N, H, D) and, like transformers' eager attention, the probabilities
    (B, H, N, N), zero outside the kept keys. A query with no allowed key at all gets output 0.

    Example:
        >>> attention = nn.Module()  # stands for a layer's attention module, here of an encoder
        >>> attention.is_causal = False
        >>> attention.adaptive_sparse = AdaptiveSparseState(top_k=2)  # `apply` does this for every layer
        >>> q = k = v = torch.randn(1, 4, 6, 8)  # (B, H, N, D)
        >>> output, probabilities = adaptive_sparse_attention(attention, q, k, v, None, scaling=8**-0.5)
        >>> output.shape, (probabilities > 0).sum(-1).unique().tolist()  # 2 keys kept per query
        (torch.Size([1, 6, 4, 8]), [2])
    """
    state: AdaptiveSparseState = module.adaptive_sparse
    groups = query.shape[1] // key.shape[1]  # grouped-query attention: H / H_kv query heads per key head
    key = repeat_kv(key, groups)
    value = repeat_kv(value, groups)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling

    scores = torch.matmul(query, key.transpose(-2, -1)) * scaling
    trace_step(
        module,
        "attention scores",
        "scaling · Q·Kᵀ (GQA key heads repeated)",
        {"query": query, "key": key},
        {"scores": scores},
    )
    allowed = allowed_keys(module, query, key, attention_mask, is_causal)
    if state.count_pass(module.training):
        keep = allowed.expand_as(scores)
        trace_step(
            module, "top-k selection", "skipped: full attention (warm-up)", {"mask": allowed}, {"keep": keep}
        )
    else:
        keep, threshold = select_top_k(scores, allowed, state.top_k)
        trace_step(
            module,
            "top-k selection",
            f"keep the {state.top_k} highest allowed scores per query (torch.topk)",
            {"scores": scores, "mask": allowed},
            {"threshold": threshold, "keep": keep},
        )

    # The most negative float rather than -inf: a row with nothing kept gets a finite softmax, zeroed next.
    # The softmax runs in float32 for half-precision models, as in transformers' eager attention.
    masked = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    probabilities = masked.softmax(dim=-1, dtype=torch.float32).to(value.dtype).masked_fill(~keep, 0.0)
    probabilities = nn.functional.dropout(probabilities, p=dropout, training=module.training)
    trace_step(
        module,
        "softmax",
        "softmax over the kept keys; others get probability 0",
        {"scores": scores, "keep": keep},
        {"probabilities": probabilities},
    )

    output = torch.matmul(probabilities, value)
    trace_step(
        module, "weighted sum", "P·V", {"probabilities": probabilities, "value": value}, {"output": output}
    )
    return output.transpose(1, 2).contiguous(), probabilities
