"""adaptive_sparse's compiled top-k attention on the CPU: scores, selection, softmax and P·V in one pass.

`torch.topk` costs about 0.75 µs a row on the CPU at any length up to 512: with MiniLM's shape (12 heads,
N = 128) that is 1.1–1.3 ms a layer, three to four times the whole fused SDPA call. `top_k_attention.cpp`
(beside this file) computes the scores of 32 query rows at a time against every key (AVX2 and FMA, from the
keys transposed once), bounds each row's k-th largest score from vector maxima, compares every score with the
bound, 8 at a time, and ranks the few that pass; then it applies the softmax over the k kept scores and sums
their value rows into the output. Ties go to the lower key index; NaN ranks first, as in `torch.topk`. No
(N, N) tensor is built: beyond its inputs and output it holds the keys transposed and 32 rows of scores per
thread.

It is compiled on first use by `torch.utils.cpp_extension` (about 20 s, once per machine and torch version,
into torch's extension cache: `TORCH_EXTENSIONS_DIR`, by default `~/.cache/torch_extensions`), and only on a
CPU with AVX2. Where it cannot be built (an older CPU, no C++ compiler, no ninja), [`top_k_kernel`] returns
None, the reason is logged once, and the caller keeps `torch.topk`. Setting `ATTNCARD_TOP_K_KERNEL=0` keeps
`torch.topk` without trying.

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
import logging
import os
from collections.abc import Callable
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("top_k_attention.cpp")
KERNEL_ENV_VAR = "ATTNCARD_TOP_K_KERNEL"
# The kernel's bound applies up to k = 16 (32 from 512 keys on); a larger k would send every row to its sort,
# slower than torch.topk.
KERNEL_MAX_K = 16
CAPABILITIES = ("AVX2", "AVX512")


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
    if os.environ.get(KERNEL_ENV_VAR) == "0":
        return None
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in CAPABILITIES:
        logger.info(
            "the compiled top-k kernel needs AVX2 (CPU: %s); adaptive_sparse keeps torch.topk", capability
        )
        return None
    try:
        from torch.utils import cpp_extension

        cpp_extension.load(
            name="attncard_top_k",
            sources=[str(SOURCE)],
            # -fopenmp: at::parallel_for is inline OpenMP in torch's headers, serial without it. The library
            # then needs libgomp.so.1, the one torch has already loaded.
            extra_cflags=["-O3", "-mavx2", "-mfma", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
            is_python_module=False,
        )
    except Exception as error:  # any build failure leaves torch.topk, which is always correct
        # A compiler's message names the first error; else the exception's first line.
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = next(
            (line for line in lines if "error:" in line), lines[0] if lines else type(error).__name__
        )
        logger.warning(
            "adaptive_sparse could not build its compiled top-k kernel (%s); it uses torch.topk instead, "
            "slower on the CPU (set %s=0 to skip the attempt)",
            reason,
            KERNEL_ENV_VAR,
        )
        return None
    return torch.ops.attncard.top_k_attention
