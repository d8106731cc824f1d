"""One entry point for banded attention that picks the fastest correct implementation for the inputs."""

from __future__ import annotations

import functools
import importlib.util
import os

import torch

from . import banded_cpu
from .banded import banded_attention_sdpa, banded_attention_torch
from .reference import dense_banded_reference

IMPLEMENTATIONS = ("compiled", "sdpa", "torch", "triton", "reference")
# Names the implementation for calls that do not pass ``impl`` (e.g. to rule a kernel out when debugging).
IMPL_ENV_VAR = "ATTNCARD_BANDED_IMPL"


@functools.cache
def triton_available() -> bool:
    """Whether the triton package is installed (it only is on Linux x86-64)."""
    return importlib.util.find_spec("triton") is not None


def select_implementation(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    distance_bias: torch.Tensor | None = None,
    impl: str | None = None,
) -> str:
    """Name of the implementation :func:`banded_attention` will run.

    ``impl``, else the ``ATTNCARD_BANDED_IMPL`` environment variable, else, per call:

    - "triton" on CUDA when triton is installed and no gradient is needed (it has no backward kernel);
    - "compiled" (:func:`~modules.kernels.banded_cpu.banded_attention_cpu`) on the CPU when no gradient is
      needed, for float32 inputs whose last dimension is contiguous, where the kernel could be built: each
      query reads its band only, in no memory beyond its output;
    - "torch" (:func:`~modules.kernels.banded.banded_attention_torch`) when ``distance_bias`` needs a
      gradient: the fused SDPA kernels give none to an additive mask, and the torch kernel's own backward
      does (the adaptive-span training step);
    - "sdpa" (:func:`~modules.kernels.banded.banded_attention_sdpa`) otherwise, gradients of query, key and
      value included: one fused SDPA call per group of query blocks, which never holds the blocks' scores
      that the torch kernel computes and keeps for its backward.

    Their time and memory against dense attention: ``attncard bench attention`` (``bench/attention.md``).

    Example:
        >>> q = k = v = torch.randn(1, 2, 64, 8)
        >>> select_implementation(q, k, v)  # "sdpa" where the compiled kernel cannot be built
        'compiled'
        >>> select_implementation(q.requires_grad_(), k, v)
        'sdpa'
        >>> select_implementation(q, k, v, torch.zeros(2, 9, requires_grad=True))
        'torch'
    """
    choice = impl or os.environ.get(IMPL_ENV_VAR) or None
    if choice is None:
        needs_grad = torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (query, key, value, distance_bias)
        )
        bias_needs_grad = (
            torch.is_grad_enabled() and distance_bias is not None and distance_bias.requires_grad
        )
        if query.is_cuda and triton_available() and not needs_grad:
            choice = "triton"
        elif not needs_grad and banded_cpu.applies(query, key, value):
            choice = "compiled"
        else:
            choice = "torch" if bias_needs_grad else "sdpa"
    if choice not in IMPLEMENTATIONS:
        raise ValueError(f"unknown banded attention implementation {choice!r}, expected {IMPLEMENTATIONS}")
    if choice == "triton" and not triton_available():
        raise RuntimeError("impl='triton' needs the triton package, which is only installed on Linux x86-64")
    if choice == "compiled" and banded_cpu.banded_kernel() is None:
        raise RuntimeError(
            "impl='compiled' needs the compiled banded kernel, which could not be built here (see the log); "
            "use impl='sdpa'"
        )
    return choice


def banded_attention(
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
    impl: str | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Banded attention with per-head windows, run by the fastest implementation correct for the inputs.

    Query i of head h attends key j when |i - j| <= window[h] (and j <= i when causal) and key j is real
    (``key_padding_mask[b, j]``). With ``global_index``, the token g = global_index[b] is attended by every
    query and attends every key (still causal and padding-aware). Scores are ``scaling * q_i·k_j +
    distance_bias[h, |i - j|]`` for band pairs; global pairs carry no bias. Queries with nothing
    to attend to, and padding queries, output zeros; -inf bias entries never produce NaN.

    Args:
        query, key, value: (B, H, N, D).
        window: (H,) integer per-head window; values >= N mean "the whole sequence".
        scaling: multiplier of q·k, usually D**-0.5.
        causal: additionally require j <= i.
        key_padding_mask: (B, N) bool, True for real tokens.
        distance_bias: (H, W + 1) float additive bias by distance, may require grad.
        global_index: (B,) int64 position of one global token per row.
        impl: "compiled", "sdpa", "torch", "triton" or "reference" to force one; see
            :func:`select_implementation`.
        out: a (B, H, N, D) tensor, or view, that receives the result (the compiled kernel writes it there
            directly, e.g. into the transposed view of a (B, N, H, D) result, saving a copy); returned.

    Returns:
        (B, H, N, D) attention output in the dtype of ``query`` (``out`` when given).

    Example:
        >>> q = k = v = torch.randn(2, 12, 2048, 64)
        >>> window = torch.tensor([16, 32, 64, 128] * 3)
        >>> mask = torch.ones(2, 2048, dtype=torch.bool)
        >>> out = banded_attention(q, k, v, window, scaling=64**-0.5, key_padding_mask=mask,
        ...                        global_index=torch.tensor([0, 0]))
    """
    kwargs = dict(
        scaling=scaling,
        causal=causal,
        key_padding_mask=key_padding_mask,
        distance_bias=distance_bias,
        global_index=global_index,
    )
    choice = select_implementation(query, key, value, distance_bias, impl)
    if choice == "compiled":
        return banded_cpu.banded_attention_cpu(query, key, value, window, **kwargs, out=out)
    if choice == "triton":
        # Imported here: triton may be missing, and the module picks interpreted or compiled mode on import.
        from . import triton_banded

        result = triton_banded.banded_attention_triton(query, key, value, window, **kwargs)
    elif choice == "reference":
        result = dense_banded_reference(query, key, value, window, **kwargs)
    elif choice == "sdpa":
        result = banded_attention_sdpa(query, key, value, window, **kwargs)
    else:
        result = banded_attention_torch(query, key, value, window, **kwargs)
    return result if out is None else out.copy_(result)
