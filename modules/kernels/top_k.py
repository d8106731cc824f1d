"""adaptive_sparse's compiled top-k attention on the CPU: scores, selection, softmax and P·V in one pass.

With MiniLM's shape, `torch.topk` alone costs more on the CPU than a whole fused SDPA call (adaptive_sparse's
spec.md has the figures). `top_k_attention.cpp` (beside this file) computes the scores of 36 query rows at a
time against every key (vector FMAs, from the keys transposed once), bounds each row's k-th largest score from
vector maxima, compares every score with the bound, a register at a time, and ranks the few that pass; then it
applies the softmax over the k kept scores and sums their value rows into the output. Ties go to the lower key
index; NaN ranks first, as in `torch.topk`. No (N, N) tensor is built: beyond its inputs and output it holds
the keys transposed and 36 rows of scores per thread.

It is compiled on first use by `torch.utils.cpp_extension` (about 20 s, once per machine and torch version,
into torch's extension cache: `TORCH_EXTENSIONS_DIR`, by default `~/.cache/torch_extensions`), and only on a
CPU with AVX2; in its AVX-512 form where torch's CPU capability is AVX512 (see `build.build_kernel`). Where
it cannot be built (an older CPU, no C++ compiler, no ninja), [`top_k_kernel`] returns None, the reason is
logged once, and the caller keeps `torch.topk`. Setting `ATTNCARD_TOP_K_KERNEL=0` keeps `torch.topk` without
trying.

Example:
    >>> kernel = top_k_kernel()  # None where it cannot be built
    >>> q, k, v = torch.randn(3, 1, 2, 40, 16).unbind(0)  # (B, H, N, D)
    >>> out = torch.empty(1, 2, 40, 16)
    >>> kept, indices = kernel(q, k, v, torch.empty(0), False, 0.25, 8, True, out)  # writes out
    >>> torch.allclose(kept, (0.25 * q @ k.transpose(-1, -2)).topk(8).values, atol=1e-6)
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from .build import CAPABILITIES, build_kernel, define_operator

SOURCE = "top_k_attention.cpp"
KERNEL_ENV_VAR = "ATTNCARD_TOP_K_KERNEL"
# The kernel's bound applies up to k = 16 (32 from 512 keys on); a larger k would send every row to its sort,
# slower than torch.topk.
KERNEL_MAX_K = 16
__all__ = ["CAPABILITIES", "KERNEL_ENV_VAR", "KERNEL_MAX_K", "top_k_kernel", "top_k_rows_kernel"]


def _fake_top_k_attention(query, key, value, mask, causal, scaling, k, keep, out):
    """`top_k_attention`'s results without computing them: (B, H, N_q, k) kept scores and key indices, or
    (0, H, N_q, k) each without `keep`; `out` is written in place."""
    batch, heads, n_q, _ = query.shape
    shape = (batch if keep else 0, heads, n_q, k)
    return query.new_empty(shape), query.new_empty(shape, dtype=torch.long)


def _fake_top_k_rows(scores, k):
    """`top_k_rows`'s results without computing them: values and indices, (..., k)."""
    shape = (*scores.shape[:-1], k)
    return scores.new_empty(shape), scores.new_empty(shape, dtype=torch.long)


define_operator(
    "top_k_attention(Tensor query, Tensor key, Tensor value, Tensor mask, bool causal, float scaling, int k, "
    "bool keep, Tensor(a!) out) -> (Tensor, Tensor)",
    _fake_top_k_attention,
)
define_operator("top_k_rows(Tensor scores, int k) -> (Tensor, Tensor)", _fake_top_k_rows)


@functools.cache
def top_k_kernel() -> Callable[..., tuple[torch.Tensor, torch.Tensor]] | None:
    """`torch.ops.attncard.top_k_attention`, built on the first call; None where it cannot be (see above).

    The op: `(query, key, value, mask, causal, scaling, k, keep, out) -> (kept, indices)`. query and out
    (B, H, N_q, D), key and value (B, H, N_k, D): float32 on the CPU, each with a contiguous last dimension
    (any other strides, so `out` may be a view of a larger output). `mask`: an empty tensor, or a boolean one
    broadcastable to (B, H, N_q, N_k), True where a query may attend, with a contiguous last dimension.
    `causal` (read without a mask): query i attends to keys j <= i + N_k - N_q. k at most N_k. It writes
    `out`; with `keep` it returns each row's k kept scores (scaled), largest first, and their key indices,
    (B, H, N_q, k) each (a row with fewer than k allowed keys has -inf for the rest, and one with none gets
    output 0), else two empty tensors.
    """
    fallback = "torch.topk for adaptive_sparse"
    if not build_kernel("attncard_top_k", SOURCE, KERNEL_ENV_VAR, fallback, avx512=True):
        return None
    return torch.ops.attncard.top_k_attention


def top_k_rows_kernel() -> Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]] | None:
    """`torch.ops.attncard.top_k_rows`, from the same build as [`top_k_kernel`]; None where it cannot be.

    The op: `(scores, k) -> (values, indices)`, `scores.topk(k, dim=-1)` for a float32 CPU tensor (largest
    first, ties to the lower index, NaN first), by the kernel's bounded selection, faster than `torch.topk`
    (adaptive_sparse's spec.md). Best for k up to `KERNEL_MAX_K`; larger k sorts each row.

    Example:
        >>> scores = torch.randn(6, 128)
        >>> values, indices = top_k_rows_kernel()(scores, 8)
        >>> torch.equal(values, scores.topk(8).values), torch.equal(indices, scores.topk(8).indices)
        (True, True)
    """
    return None if top_k_kernel() is None else torch.ops.attncard.top_k_rows
