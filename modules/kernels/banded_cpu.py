"""Banded attention compiled for the CPU, at inference: each query reads only its band of keys.

`banded_attention.cpp` (beside this file) computes, per head, the scores of 4 query rows at a time against
the keys of their band (AVX2 and FMA, from the keys transposed once; AVX-512 where torch's own CPU capability
is AVX512, see [`build_kernel`]), adds the distance bias, takes the softmax with a vectorised exp and sums the
band's value rows into the output; the global token's key is read apart, and its query row reads every key.
Time and memory are linear in N: with MiniLM's learned spans a row reads 17 to 63 keys at any length, where
fused SDPA reads all N and needs the (H, N, N) bias as its mask. It has no backward:
[`banded_attention`](dispatch.py) takes it on the CPU when no gradient is needed.

It is built on first use ([`build_kernel`]); where it cannot be, [`banded_kernel`] returns None and the
dispatcher keeps the SDPA-based kernel. `ATTNCARD_BANDED_KERNEL=0` skips the attempt.

Example:
    >>> q = k = v = torch.randn(1, 2, 40, 16)  # (B, H, N, D)
    >>> window = torch.tensor([3, 7])
    >>> out = banded_attention_cpu(q, k, v, window, scaling=0.25)
    >>> torch.allclose(out, dense_banded_reference(q, k, v, window, scaling=0.25), atol=1e-5)
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from .banded import check_banded_inputs
from .build import build_kernel, define_operator, reads_float32_rows
from .reference import dense_banded_reference  # noqa: F401  (the example above)

SOURCE = "banded_attention.cpp"
KERNEL_ENV_VAR = "ATTNCARD_BANDED_KERNEL"
# The op's "not given" arguments, made once rather than three allocations a call.
_NONE_FLOAT = torch.empty(0)
_NONE_BOOL = torch.empty(0, dtype=torch.bool)
_NONE_LONG = torch.empty(0, dtype=torch.long)


def _fake_banded_attention(
    query, key, value, window, distance_bias, key_padding_mask, global_index, causal, scaling, out
) -> None:
    """`banded_attention` returns nothing: it writes `out`."""


define_operator(
    "banded_attention(Tensor query, Tensor key, Tensor value, Tensor window, Tensor distance_bias, "
    "Tensor key_padding_mask, Tensor global_index, bool causal, float scaling, Tensor(a!) out) -> ()",
    _fake_banded_attention,
)


@functools.cache
def banded_kernel() -> Callable[..., None] | None:
    """`torch.ops.attncard.banded_attention`, built on the first call; None where it cannot be.

    The op: `(query, key, value, window, distance_bias, key_padding_mask, global_index, causal, scaling,
    out)`. query, key, value and out (B, H, N, D) float32 on the CPU with a contiguous last dimension (any
    other strides: `out` may be a transposed view of a (B, N, H, D) result); window (H,) int64;
    distance_bias, key_padding_mask and global_index as in [`dense_banded_reference`], or empty tensors. It
    writes `out`.
    """
    fallback = "the SDPA-based banded kernel"
    if not build_kernel("attncard_banded", SOURCE, KERNEL_ENV_VAR, fallback, avx512=True):
        return None
    return torch.ops.attncard.banded_attention


def applies(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether the compiled kernel can take a call without gradients on these tensors: float32 on the CPU,
    last dimensions contiguous. The kernel is built on the first call that can use it."""
    return reads_float32_rows(query, key, value) and banded_kernel() is not None


def banded_attention_cpu(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    window: torch.Tensor,
    *,
    scaling: float,
    causal: bool = False,
    key_padding_mask: torch.Tensor | None = None,
    distance_bias: torch.Tensor | None = None,
    global_index: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """[`dense_banded_reference`]'s result from the compiled kernel: (B, H, N, D), or written into `out`
    (any (B, H, N, D) view with a contiguous last dimension, e.g. `result.transpose(1, 2)` of a (B, N, H, D)
    result) and returned.

    Raises:
        ValueError: shapes that disagree (as every banded kernel checks them).
        RuntimeError: where the kernel could not be built (check [`banded_kernel`] first).
    """
    # The kernel checks the values (windows, global positions) itself: here the shapes, without tensor work.
    shapes = (query, key, value, window, key_padding_mask, distance_bias, global_index)
    check_banded_inputs(*shapes, values=False)
    kernel = banded_kernel()
    if kernel is None:
        raise RuntimeError("the compiled banded kernel could not be built on this machine (see the log)")
    out = torch.empty_like(query) if out is None else out
    kernel(
        query,
        key,
        value,
        window.long(),
        _NONE_FLOAT if distance_bias is None else distance_bias.float(),
        _NONE_BOOL if key_padding_mask is None else key_padding_mask,
        _NONE_LONG if global_index is None else global_index,
        causal,
        scaling,
        out,
    )
    return out
