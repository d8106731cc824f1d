"""`adaptive_sparse`: exact top-k attention per query (Zhao et al., 2019, Explicit Sparse Transformer).

For each query row i of each head, with scores s_ij = scaling · q_i·k_j over the keys j it may attend to
(padding and, in decoders, the causal triangle removed):

    K_i   = the k allowed keys with the largest s_ij (exactly k; ties to the lower key)
    p_ij  = exp(s_ij) / Σ_{l ∈ K_i} exp(s_il)   for j ∈ K_i,   0 otherwise
    out_i = Σ_j p_ij · v_j

The keys kept adapt to each query (unlike a fixed window), hence the name. The selection is not
differentiable; gradients flow through the kept scores, as through any masked softmax.

How it is computed. An exact top-k must read every allowed score of a row, so Q·Kᵀ is computed in full:
O(N²·d) time per head, as in dense attention. What is avoided is holding it: the queries are cut into
tiles ([`query_tiles`]) that go through the steps above one after the other; without autograd each
tile's output is written into the result and the next tile reuses its score buffer, with autograd the
tile outputs are concatenated at the end.

- Without autograd or dropout (inference), float32 on the CPU, k ≤ `KERNEL_MAX_K`: the whole call is one
  compiled kernel ([`compiled_kernel`], `modules/kernels/top_k_attention.cpp`): per head, the scores of 36
  query rows at a time, each row's k-th largest score bounded from vector maxima, the few scores that pass
  ranked, and the softmax and the sum of the k value rows written into the output. No N×N tensor.
- With autograd (training), short inputs (N ≤ `SINGLE_BLOCK_MAX_KEYS` keys) are one tile of the whole
  (B, H, N, N) score matrix, a masked softmax ([`kept_bias`]): the top-k picks ([`select_top_k`]: the
  compiled kernel's bounded selection where it is built, else `torch.topk`) scattered into an additive
  bias (0 kept, the lowest float elsewhere), a softmax over all N columns of scores + bias, and a dense
  P·V. Memory O(N²) per head.
- Other inputs are cut into tiles of at most [`tile_scores`] scores, a third of the output's elements
  within 896 KiB and 1.75 MiB of float32 (whole heads and batch rows when they fit, else blocks of query
  rows of one head). Per tile: the scores of its rows against all keys (only against the keys up to the
  tile's last row, rounded up to a whole `CHUNK`, in a causal model without padding), the tile's rows of
  the mask as -inf, the top k of each row ([`select_top_k`]; `torch.topk` in two stages for rows of at
  least 2k chunks of `CHUNK` keys: [`top_k_of_rows`]), a softmax over the k kept scores, and the weighted
  sum of the k value rows picked by index ([`weighted_rows`]: one `torch.embedding_bag` without
  autograd): P·V costs O(N·k·d) per head, not O(N²·d). Memory beyond the inputs and the output is
  O(block·N) (one tile of scores, and its slice of the mask when there is one), not O(N²): no N×N tensor
  is built, neither scores nor mask. In training, autograd keeps per query the k indices, probabilities
  and gathered value rows, O(N·k·d) per head; the backward pass rebuilds each tile's (block, N) score
  gradient and multiplies it back through Q·Kᵀ, O(N²·d) time.
- Full attention (the warm-up, or k at least the number of keys) is a masked softmax per tile.
- Grouped-query key and value heads are first repeated to the query heads (`repeat_kv`).

The transformers return value `attn_weights`, the (B, H, N, N) probabilities, is built only when the model
asks for it (`output_attentions=True`); otherwise it is None, as with SDPA.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from transformers.integrations.sdpa_attention import repeat_kv

from ..kernels.build import reads_float32_rows
from ..kernels.top_k import KERNEL_MAX_K, top_k_kernel, top_k_rows_kernel
from ..trace import trace_step, tracing

# With autograd, inputs of at most this many keys are one (B, H, N, N) tile (the fastest to train).
SINGLE_BLOCK_MAX_KEYS = 256
# Beyond it, a tile holds at least this many scores (896 KiB of float32) and at most `LARGEST_TILE_SCORES`:
# a third of the layer's output elements between the two ([`tile_scores`]). A tile is memory that fused SDPA
# does not need, beside an output both need, hence a share of the output; fewer, larger tiles spend less on
# each product and selection call. spec.md has the sizes' time and memory against SDPA.
TILE_SCORES = 7 * 2**15
LARGEST_TILE_SCORES = 7 * 2**16
# The top-k of a long row is taken among the k chunks of this many keys with the highest maxima.
CHUNK = 64


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
    This builds the whole (N_q, N_k) mask; the attention itself reads one tile of it at a time
    ([`allowed_rows`]).

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


def allowed_rows(
    attention_mask: torch.Tensor | None,
    causal: bool,
    rows: slice,
    n_q: int,
    n_k: int,
    device: torch.device,
    keys: int | None = None,
) -> torch.Tensor | None:
    """The rows `rows` of [`allowed_keys`]'s (N_q, N_k) mask, its first `keys` columns (default all `n_k`).

    A slice (a view) of `attention_mask` when there is one; else, in a causal model, the causal triangle
    of those rows only, (1, 1, rows, keys), aligned to the last key as with a cache; None when every key is
    allowed.

    Example:
        >>> allowed_rows(None, True, slice(1, 3), n_q=4, n_k=4, device=torch.device("cpu")).int().tolist()
        [[[[1, 1, 0, 0], [1, 1, 1, 0]]]]
        >>> allowed_rows(None, False, slice(1, 3), n_q=4, n_k=4, device=torch.device("cpu")) is None
        True
    """
    keys = n_k if keys is None else keys
    if attention_mask is not None:
        mask = attention_mask[..., :keys]
        mask = mask if mask.shape[-2] == 1 else mask[..., rows, :]  # a one-row mask serves every query
        return mask if mask.dtype == torch.bool else mask == 0  # an additive float mask: 0 where allowed
    if not causal or n_q == 1:
        return None
    first, stop, _ = rows.indices(n_q)
    last_allowed = torch.arange(first, stop, device=device)[:, None] + (n_k - n_q)
    return (torch.arange(keys, device=device)[None, :] <= last_allowed)[None, None]


def tile_scores(batch: int, heads: int, n_q: int, head_dim: int | None = None) -> int:
    """The most scores a tile holds: a third of the output's B·H·N·D elements, at least `TILE_SCORES` and at
    most `LARGEST_TILE_SCORES`; `TILE_SCORES` when the head size is not given.

    Example:
        >>> tile_scores(1, 12, 4096, 32), tile_scores(1, 12, 1024, 32)  # 112 rows of 4096, 224 of 1024
        (458752, 229376)
    """
    if head_dim is None:
        return TILE_SCORES
    return min(LARGEST_TILE_SCORES, max(TILE_SCORES, batch * heads * n_q * head_dim // 3))


def query_tiles(
    batch: int, heads: int, n_q: int, n_k: int, head_dim: int | None = None, autograd: bool = True
) -> tuple[int, int, int]:
    """How the queries are cut: `(batch rows, heads, query rows)` per tile.

    With autograd, one tile when there are at most `SINGLE_BLOCK_MAX_KEYS` keys (one masked softmax trains
    fastest). Otherwise a tile holds at most [`tile_scores`] scores: blocks of query rows of one head and
    batch row (as many rows in each block as the count of blocks allows, so that the score buffer is no
    larger than needed), or, when a whole head fits, several heads (and batch rows) at once. Tiles of every
    head of a block of rows would make one batched product of thin matrices instead of one product, which is
    slower (spec.md).

    Example:
        >>> query_tiles(32, 12, 128, 128)  # short, with autograd: one tile
        (32, 12, 128)
        >>> query_tiles(1, 12, 256, 256, head_dim=32, autograd=False)  # inference: 3 heads of 65536 scores
        (1, 3, 256)
        >>> query_tiles(1, 12, 4096, 4096, head_dim=32)  # 37 tiles of at most 112 rows per head, evened out
        (1, 1, 111)
        >>> query_tiles(1, 12, 4096, 4096)  # without the head size: 56 rows
        (1, 1, 56)
        >>> query_tiles(1, 12, 512, 512)  # at most 448 rows: 2 tiles of 256 rather than 448 and 64
        (1, 1, 256)
        >>> query_tiles(8, 12, 1, 4096)  # one query row (decoding with a cache): 12 heads of 4 batch rows
        (4, 12, 1)
    """
    if autograd and n_k <= SINGLE_BLOCK_MAX_KEYS:
        return batch, heads, n_q
    budget = tile_scores(batch, heads, n_q, head_dim)
    rows = max(1, min(n_q, budget // n_k))
    if rows < n_q:
        return 1, 1, -(-n_q // -(-n_q // rows))  # the same count of blocks, evened out
    per_head = n_q * n_k
    head_step = max(1, min(heads, budget // per_head))
    if head_step < heads:
        return 1, head_step, n_q
    return max(1, min(batch, budget // (heads * per_head))), heads, n_q


def top_k_of_rows(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`scores.topk(k, dim=-1)` (values and indices, largest first), in two stages for long rows.

    When a row of N keys splits into at least 2k chunks of `CHUNK` keys, its k largest scores lie in the k
    chunks with the largest maxima: any score above the k-th largest chunk maximum τ is the maximum or
    below the maximum of a chunk whose maximum exceeds τ. So: the maximum of each chunk, `topk` of those
    N/CHUNK maxima, and `topk` of the k·CHUNK scores of the chunks chosen, instead of `topk` of N scores.
    The same values; only among exactly tied scores may the indices chosen differ from `torch.topk`'s.

    Example:
        >>> scores = torch.randn(3, 1024)
        >>> values, indices = top_k_of_rows(scores, 8)  # 16 chunks of 64: two stages
        >>> torch.equal(values, scores.topk(8).values), torch.equal(indices, scores.topk(8).indices)
        (True, True)
    """
    n = scores.shape[-1]
    if n % CHUNK or n // CHUNK < 2 * k:
        return scores.topk(k, dim=-1)
    leading = scores.shape[:-1]
    chunks = scores.reshape(-1, n // CHUNK, CHUNK)
    # The order of the k chunks does not matter (the second stage sorts), so the first stage skips sorting.
    best = chunks.amax(dim=-1).topk(k, dim=-1, sorted=False).indices  # (rows, k) chunks
    # The chosen chunks as whole rows of 64 scores: index_select copies rows, where gather goes element-wise.
    per_row = chunks.shape[1]
    chosen = best + torch.arange(0, best.shape[0] * per_row, per_row, device=best.device)[:, None]
    candidates = chunks.view(-1, CHUNK).index_select(0, chosen.view(-1))  # (rows · k, CHUNK)
    values, within = candidates.view(-1, k * CHUNK).topk(k, dim=-1)
    indices = best.gather(-1, within // CHUNK).mul_(CHUNK).add_(within % CHUNK)
    return values.view(*leading, k), indices.view(*leading, k)


def select_top_k(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`scores.topk(k, dim=-1)` (values and indices, largest first): the compiled selection
    ([`top_k_rows_kernel`]) for float32 CPU scores and k up to `KERNEL_MAX_K` where it is built, else
    [`top_k_of_rows`]. The same values; among exactly tied scores (the -inf of masked keys) the indices
    may differ.

    The training step's masked softmax selects over every (B, H, N, N) score, most of its time with
    `torch.topk` (spec.md).

    Example:
        >>> scores = torch.randn(3, 128)
        >>> torch.equal(select_top_k(scores, 8)[0], scores.topk(8).values)
        True
    """
    compiled = scores.device.type == "cpu" and scores.dtype == torch.float32 and k <= KERNEL_MAX_K
    select = top_k_rows_kernel() if compiled else None
    return select(scores, k) if select is not None else top_k_of_rows(scores, k)


def weighted_rows(value: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Σ_j weights_j · value[..., indices_j, :] for every query: the P·V of a tile over its k kept keys.

    Args:
        value: (B, H, N, D), the tile's batch rows and heads.
        indices: (B, H, rows, k) key indices, one row of k per query.
        weights: (B, H, rows, k) probabilities, in `value`'s dtype.

    Returns:
        (B, H, rows, D).

    Without autograd, the k value rows of each query are summed by one `torch.embedding_bag` (weighted
    sums of rows picked from a table, here `value` itself read as a table of rows: [`row_table`]), which
    never holds the (rows, k, D) gathered rows. With autograd, or a `value` that is no such table, the
    rows are gathered and multiplied by the weights (autograd keeps the gathered rows for the backward).

    Example:
        >>> value = torch.arange(12.0).view(1, 2, 3, 2)  # 2 heads of 3 keys, D = 2
        >>> indices = torch.tensor([[[[0, 2]], [[1, 1]]]])  # one query per head, k = 2
        >>> weights = torch.tensor([[[[0.5, 0.5]], [[1.0, 0.0]]]])
        >>> weighted_rows(value, indices, weights).tolist()  # (v0 + v2) / 2 of head 0, v1 of head 1
        [[[[2.0, 3.0]], [[8.0, 9.0]]]]
    """
    b, h, rows, k = indices.shape
    table = None
    if not (torch.is_grad_enabled() and (value.requires_grad or weights.requires_grad)):
        table = row_table(value)
    if table is not None:
        rows_of, batch_step, head_step, key_step = table
        flat = indices * key_step  # the table row of each kept key
        if b > 1:
            flat += torch.arange(b, device=flat.device).mul_(batch_step)[:, None, None, None]
        if h > 1:  # (a step of 0: heads expanded from one key head)
            flat += torch.arange(h, device=flat.device).mul_(head_step)[:, None, None]
        bags = torch.arange(0, flat.numel(), k, device=flat.device)  # each query's k rows are one bag
        summed = torch.embedding_bag(rows_of, flat.view(-1), bags, False, 0, False, weights.reshape(-1))[0]
        return summed.view(b, h, rows, -1)
    if b == h == 1:  # one head of one batch row: rows of a (N, d) matrix
        kept_values = value[0, 0].index_select(0, indices.flatten()).view(1, 1, rows, k, value.shape[-1])
    else:
        batch_index = torch.arange(b, device=value.device)[:, None, None, None]
        kept_values = value[batch_index, torch.arange(h, device=value.device)[None, :, None, None], indices]
    return torch.matmul(weights.unsqueeze(-2), kept_values).squeeze(-2)


def row_table(value: torch.Tensor) -> tuple[torch.Tensor, int, int, int] | None:
    """`value` (B, H, N, D) read, without a copy, as a table of rows of D: `(table, b_step, h_step, n_step)`.

    `value[b, h, j]` is row `b·b_step + h·h_step + j·n_step` of `table`. The rows are D consecutive numbers
    of `value`'s storage every s = gcd of its batch, head and key strides, so any layout whose last
    dimension is contiguous has one: the (B, H, N, D) of a standalone tensor, the transposed (B, N, H, D)
    of a projection's output, a slice of a fused projection. Rows between those of `value` (of other
    tensors sharing the storage) are never read. None when the last dimension is not contiguous.

    Example:
        >>> value = torch.randn(2, 5, 3, 4).transpose(1, 2)  # (B, H, N, D) = (2, 3, 5, 4), keys outermost
        >>> table, b_step, h_step, n_step = row_table(value)
        >>> (b_step, h_step, n_step), torch.equal(table[1 * b_step + 2 * h_step + 4 * n_step], value[1, 2, 4])
        ((15, 1, 3), True)
    """
    if value.stride(-1) != 1 and value.shape[-1] > 1:
        return None
    # A dimension of size 1 is never stepped over: its stride does not count.
    sizes = value.shape[:-1]
    strides = [stride if size > 1 else 0 for size, stride in zip(sizes, value.stride()[:-1], strict=True)]
    step = math.gcd(*strides) or 1
    count = 1 + sum((size - 1) * stride // step for size, stride in zip(sizes, strides, strict=True))
    table = value.as_strided((count, value.shape[-1]), (step, 1))
    return (table, *(stride // step for stride in strides))


def masked_softmax(scores: torch.Tensor, keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Softmax of each row over its kept scores, in `dtype`; the others get probability 0, and a row with
    nothing kept is all zeros.

    The most negative float rather than -inf masks the rest: a row with nothing kept gets a finite softmax,
    zeroed next. The softmax runs in float32 for half-precision models, as in transformers' eager attention.

    Example:
        >>> keep = torch.tensor([[True, True, False]])
        >>> masked_softmax(torch.tensor([[0.0, 0.0, 5.0]]), keep, torch.float32)
        tensor([[0.5000, 0.5000, 0.0000]])
    """
    masked = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return masked.softmax(dim=-1, dtype=torch.float32).to(dtype).masked_fill(~keep, 0.0)


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`allowed` as a float mask to add to scores: 0 where allowed, -inf elsewhere, in `dtype`.

    Adding it, when one mask serves several heads, is an arithmetic pass over the scores, where a boolean
    `masked_fill` would broadcast the mask over the heads, slower on the CPU (spec.md).

    Example:
        >>> additive_mask(torch.tensor([True, False]), torch.float32)
        tensor([0., -inf])
    """
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return mask.masked_fill_(~allowed, float("-inf"))


def kept_bias(
    scores: torch.Tensor, allowed: torch.Tensor | None, top_k: int | None
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """The additive bias of a masked softmax over `scores`: 0 on the keys kept, the lowest float elsewhere.

    Kept: the `top_k` best allowed keys of each row (every allowed key when fewer are allowed, or when `top_k`
    is None). The selection reads a detached copy of the scores plus [`additive_mask`] (-inf where not
    allowed). The bias is added rather than masked in: `scores + 0` is the score itself and a score plus the
    lowest float has probability 0, so the softmax of `scores + bias` gives the same numbers as masking the
    rest out, and the backward of the addition is free (a training step's time against boolean masks:
    spec.md).

    Args:
        scores: (B, H, N_q, N_k) scaled attention scores.
        allowed: boolean, broadcastable to `scores`, or None when every key is allowed.
        top_k: keys to keep per row; None keeps every allowed key.

    Returns:
        `(bias, threshold, empty)`: `bias` shaped like `scores` (None when every key is kept); `threshold`
        (B, H, N_q, 1) the smallest kept score of each row, -inf where fewer than `top_k` keys are allowed
        (None when `top_k` is None); `empty` (…, N_q, 1) True for rows with no key kept at all (None when
        every row keeps one).

    Example:
        >>> scores = torch.tensor([[[[0.1, 0.9, 0.5]]]])
        >>> bias, threshold, empty = kept_bias(scores, None, top_k=2)
        >>> (bias == 0).int().tolist(), threshold.tolist(), empty
        ([[[[0, 1, 1]]]], [[[[0.5]]]], None)
    """
    lowest = torch.finfo(scores.dtype).min
    allowed_bias = None if allowed is None else additive_mask(allowed, scores.dtype)
    if top_k is None:
        if allowed_bias is None:
            return None, None, None
        empty = ~allowed.any(dim=-1, keepdim=True)
        return allowed_bias.clamp(min=lowest), None, empty if empty.any() else None
    # The selection is a choice of indices, not a function to differentiate.
    masked = scores.detach() if allowed_bias is None else scores.detach() + allowed_bias
    values, indices = select_top_k(masked, min(top_k, scores.shape[-1]))
    # A row with fewer than k allowed keys has disallowed keys (at -inf) among its top k: they stay out.
    picked = torch.where(values == float("-inf"), lowest, 0.0).to(scores.dtype)
    bias = torch.full_like(scores, lowest).scatter_(-1, indices, picked)
    empty = None
    if allowed is not None:
        empty = values[..., :1] == float("-inf")
        empty = empty if empty.any() else None
    return bias, values[..., -1:], empty


def compiled_kernel(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    top_k: int,
    in_place: bool,
    with_dropout: bool,
) -> Callable[..., tuple[torch.Tensor, torch.Tensor]] | None:
    """The compiled top-k attention ([`top_k_kernel`]) when it applies to a call, else None (then the tiles).

    It applies without autograd (`in_place`) and without dropout, for k up to `KERNEL_MAX_K`, to float32
    tensors on the CPU whose rows are contiguous, with no mask or a boolean one, where it could be built (its
    speed against fused SDPA and the tiles: spec.md).
    """
    if not in_place or with_dropout or top_k > KERNEL_MAX_K or not reads_float32_rows(query, key, value):
        return None
    if attention_mask is not None and (attention_mask.dtype != torch.bool or attention_mask.stride(-1) != 1):
        return None
    return top_k_kernel()


def _compiled_call(
    module: nn.Module,
    kernel: Callable[..., tuple[torch.Tensor, torch.Tensor]],
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    causal: bool,
    scaling: float,
    top_k: int,
    want_probabilities: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The whole call in the compiled kernel: output (B, N, H, D), and P (B, H, N, N) when asked for."""
    batch, heads, n_q, head_dim = query.shape
    n_k = key.shape[-2]
    output = query.new_empty(batch, n_q, heads, head_dim)
    if attention_mask is None:
        mask = query.new_empty(0, dtype=torch.bool)
    else:  # a one-row mask serves every query, as in `allowed_rows` (expanded: a stride of 0)
        mask = attention_mask[..., :n_k].expand(-1, -1, n_q, -1)
    traced = tracing(module)
    # The causal triangle is the kernel's own when no mask carries it (as `allowed_rows` reads it). The kept
    # scores and their keys are returned only when the trace or P needs them.
    keep = traced or want_probabilities
    causal = causal and n_q > 1
    kept, indices = kernel(query, key, value, mask, causal, scaling, top_k, keep, output.transpose(1, 2))
    if traced:
        trace_step(
            module,
            "top-k attention",
            f"scaling · Q·Kᵀ, the {top_k} highest allowed scores per query, a softmax over them and Σ p · v "
            "over their value rows, 36 query rows at a time (compiled kernel; GQA key heads repeated)",
            {"query": query, "key": key, "value": value, "mask": attention_mask},
            {"threshold": kept[..., -1:], "indices": indices, "output": output},
        )
    if not want_probabilities:
        return output, None
    probabilities = query.new_zeros(batch, heads, n_q, n_k)
    kept_probabilities = masked_softmax(kept, kept != float("-inf"), query.dtype)
    return output, probabilities.scatter_(-1, indices, kept_probabilities)


def _dense_tile(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    allowed: torch.Tensor | None,
    top_k: int | None,
    scaling: float,
    dropout: float,
    note: str | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A tile as a masked softmax over all its keys; `top_k` None: full attention. Returns (output, P)."""
    scores = torch.matmul(query, key.transpose(-2, -1)) * scaling
    trace = note is not None
    if trace:
        trace_step(
            module,
            "attention scores",
            f"scaling · Q·Kᵀ (GQA key heads repeated){note}",
            {"query": query, "key": key},
            {"scores": scores},
        )
    bias, threshold, empty = kept_bias(scores, allowed, top_k)
    if trace:
        keep = torch.ones_like(scores, dtype=torch.bool) if bias is None else bias == 0
        mask = torch.ones((), dtype=torch.bool, device=scores.device) if allowed is None else allowed
        if top_k is None:
            trace_step(
                module, "top-k selection", "skipped: full attention (warm-up)", {"mask": mask}, {"keep": keep}
            )
        else:
            trace_step(
                module,
                "top-k selection",
                f"keep the {top_k} highest allowed scores per query (compiled selection, else torch.topk)",
                {"scores": scores, "mask": mask},
                {"threshold": threshold, "keep": keep},
            )
    logits = scores if bias is None else scores + bias
    # In float32 for half-precision models, as in transformers' eager attention.
    probabilities = logits.softmax(dim=-1, dtype=torch.float32).to(value.dtype)
    if empty is not None:  # a row with no key kept: probabilities 0 (its finite softmax was uniform)
        probabilities = probabilities.masked_fill(empty, 0.0)
    probabilities = nn.functional.dropout(probabilities, p=dropout, training=module.training)
    if trace:
        trace_step(
            module,
            "softmax",
            "softmax over the kept keys; others get probability 0",
            {"scores": scores, "bias": bias if bias is not None else torch.zeros(())},
            {"probabilities": probabilities},
        )
    output = torch.matmul(probabilities, value)
    if trace:
        trace_step(
            module,
            "weighted sum",
            "P·V",
            {"probabilities": probabilities, "value": value},
            {"output": output},
        )
    return output, probabilities


def _sparse_tile(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    allowed: torch.Tensor | None,
    top_k: int,
    scaling: float,
    dropout: float,
    note: str | None,
    buffer: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A tile's top-k attention over the gathered keys only. Returns (output, P over the k, key indices).

    `buffer`: storage for the tile's scores, reused by every tile of a call without autograd.
    """
    # Scaling the (block, d) queries rather than the (block, N) scores: one pass over the tile fewer.
    query = query * scaling
    if buffer is None:
        scores = torch.matmul(query, key.transpose(-2, -1))
    else:
        shape = (*query.shape[:-1], key.shape[-2])
        out = buffer[: math.prod(shape)].view(shape)
        if shape[:2] == (1, 1):  # one head of one row: a plain product, which a batched `out=` would copy
            torch.mm(query[0, 0], key[0, 0].transpose(0, 1), out=out[0, 0])
            scores = out
        else:
            scores = torch.matmul(query, key.transpose(-2, -1), out=out)
    trace = note is not None
    if trace:
        trace_step(
            module,
            "attention scores",
            f"(scaling · Q)·Kᵀ (GQA key heads repeated){note}",
            {"scaled query": query, "key": key},
            {"scores": scores},
        )
    if allowed is not None and allowed.shape[1] < scores.shape[1]:  # one mask for several heads
        scores.add_(additive_mask(allowed, scores.dtype))
    elif allowed is not None:  # (here a float mask would cost as much to build as this to apply)
        scores.masked_fill_(~allowed, float("-inf"))
    values, indices = select_top_k(scores.detach(), min(top_k, scores.shape[-1]))
    if trace:
        trace_step(
            module,
            "top-k selection",
            f"indices of the {top_k} highest allowed scores per query (compiled selection, else torch.topk)",
            {"scores": scores, "mask": allowed},
            {"threshold": values[..., -1:], "indices": indices},
        )
    # The same numbers as `values`; gathered from `scores` so that gradients reach the kept scores.
    kept = scores.gather(-1, indices) if scores.requires_grad else values
    if allowed is None:
        probabilities = kept.softmax(dim=-1, dtype=torch.float32).to(value.dtype)
    else:  # a row with fewer than k allowed keys has -inf among its k: probability 0, as in `_dense_tile`
        probabilities = masked_softmax(kept, values != float("-inf"), value.dtype)
    if dropout and module.training:
        probabilities = nn.functional.dropout(probabilities, p=dropout)
    if trace:
        trace_step(
            module,
            "softmax",
            "softmax over the k kept scores of each query",
            {"kept scores": kept},
            {"probabilities": probabilities},
        )
    output = weighted_rows(value, indices, probabilities)
    if trace:
        trace_step(
            module,
            "weighted sum",
            "Σ p · v over the k value rows of each query, picked by index",
            {"probabilities": probabilities, "indices": indices, "value": value},
            {"output": output},
        )
    return output, probabilities, indices


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
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Top-k attention, with the layer's settings in `module.adaptive_sparse` ([`AdaptiveSparseState`]).

    Shapes: query (B, H, N, D), key and value (B, H_kv, N, D), attention_mask (B, 1, N, N) bool or None;
    returns the output (B, N, H, D) and, when `output_attentions=True` is passed (as transformers does when
    the model is asked for attentions), the probabilities (B, H, N, N), zero outside the kept keys, else
    None. A query with no allowed key at all gets output 0.

    Example:
        >>> attention = nn.Module()  # stands for a layer's attention module, here of an encoder
        >>> attention.is_causal = False
        >>> attention.adaptive_sparse = AdaptiveSparseState(top_k=2)  # `apply` does this for every layer
        >>> q = k = v = torch.randn(1, 4, 6, 8)  # (B, H, N, D)
        >>> output, probabilities = adaptive_sparse_attention(
        ...     attention, q, k, v, None, scaling=8**-0.5, output_attentions=True
        ... )
        >>> output.shape, (probabilities > 0).sum(-1).unique().tolist()  # 2 keys kept per query
        (torch.Size([1, 6, 4, 8]), [2])
    """
    state: AdaptiveSparseState = module.adaptive_sparse
    groups = query.shape[1] // key.shape[1]  # grouped-query attention: H / H_kv query heads per key head
    key = repeat_kv(key, groups)
    value = repeat_kv(value, groups)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    warm_up = state.count_pass(module.training)

    batch, heads, n_q, head_dim = query.shape
    n_k = key.shape[-2]
    # Without autograd the tiles are written into the result; with it, concatenated (one backward step).
    in_place = not (torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)))
    want_probabilities = bool(kwargs.get("output_attentions"))
    with_dropout = bool(dropout and module.training)
    # Inference first, before any tiling is worked out: a call the compiled kernel takes is that call only.
    sparse = not warm_up and state.top_k < n_k
    kernel = None
    if sparse:
        kernel = compiled_kernel(query, key, value, attention_mask, state.top_k, in_place, with_dropout)
    if kernel is not None:
        return _compiled_call(
            module,
            kernel,
            query,
            key,
            value,
            attention_mask,
            causal,
            scaling,
            state.top_k,
            want_probabilities,
        )
    batch_step, head_step, row_step = query_tiles(batch, heads, n_q, n_k, head_dim, autograd=not in_place)
    tiled = (batch_step, head_step, row_step) != (batch, heads, n_q)
    top_k = None if warm_up else state.top_k
    # Dense tiles: full attention, k covering every key (then nothing is left to save), or short inputs with
    # autograd (one masked softmax trains faster). Without autograd short inputs take sparse tiles too: the
    # dense tile's masks, scatter, softmax and product over all N columns cost more than the selection itself.
    dense = not sparse or (not tiled and not in_place)
    output = query.new_empty(batch, n_q, heads, head_dim) if in_place else None
    spread = want_probabilities and (tiled or not dense)  # p over the k kept keys, spread into (B, H, N, N)
    probabilities = query.new_zeros(batch, heads, n_q, n_k) if spread else None
    # One tile's scores, reused by every tile (no allocator churn); autograd needs a fresh tensor per tile.
    buffer = query.new_empty(batch_step * head_step * row_step * n_k) if in_place and not dense else None
    tile_count = -(-batch // batch_step) * -(-heads // head_step) * -(-n_q // row_step)

    batch_parts = []
    for b0 in range(0, batch, batch_step):
        b = slice(b0, b0 + batch_step)
        head_parts = []
        for h0 in range(0, heads, head_step):
            h = slice(h0, h0 + head_step)
            row_parts = []
            for r0 in range(0, n_q, row_step):
                r = slice(r0, r0 + row_step)
                keys = n_k
                if causal and attention_mask is None:
                    # Keys after the tile's last row are never allowed: left out, up to a whole `CHUNK` (the
                    # causal mask drops the rest) so that the two-stage top-k applies.
                    keys = min(n_k, -(-max(1, r0 + row_step + n_k - n_q) // CHUNK) * CHUNK)
                allowed = allowed_rows(attention_mask, causal, r, n_q, n_k, query.device, keys)
                if allowed is not None and attention_mask is not None and allowed.shape[0] != 1:
                    allowed = allowed[b]
                note = None
                if (b0, h0, r0) == (0, 0, 0):  # the trace shows the first tile; every tile repeats it
                    note = "" if not tiled else f"; shown: the first of {tile_count} query tiles, each alike"
                tile_args = (query[b, h, r], key[b, h, :keys], value[b, h, :keys], allowed)
                if dense:
                    out, p = _dense_tile(module, *tile_args, top_k, scaling, dropout, note)
                    if probabilities is not None:
                        probabilities[b, h, r, :keys] = p.detach()
                    elif want_probabilities:
                        probabilities = p
                else:
                    out, p, indices = _sparse_tile(module, *tile_args, top_k, scaling, dropout, note, buffer)
                    if probabilities is not None:
                        probabilities[b, h, r].scatter_(-1, indices, p.detach())
                if in_place:
                    output[b, r, h] = out.transpose(1, 2)
                else:
                    row_parts.append(out)
            if not in_place:
                head_parts.append(torch.cat(row_parts, dim=2) if len(row_parts) > 1 else row_parts[0])
        if not in_place:
            batch_parts.append(torch.cat(head_parts, dim=1) if len(head_parts) > 1 else head_parts[0])
    if not in_place:
        output = torch.cat(batch_parts, dim=0) if len(batch_parts) > 1 else batch_parts[0]
        output = output.transpose(1, 2).contiguous()
    return output, probabilities
