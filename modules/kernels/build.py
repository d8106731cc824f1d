"""Builds one of the compiled CPU kernels beside this file, on first use, or says once why it cannot.

The kernels (`top_k_attention.cpp`, `banded_attention.cpp`) register operators under `torch.ops.attncard`.
They are compiled by `torch.utils.cpp_extension` (15–20 s each, once per machine and torch version, into
torch's extension cache: `TORCH_EXTENSIONS_DIR`, by default `~/.cache/torch_extensions`), with AVX2 and FMA,
so only on a CPU that has them; a kernel with an AVX-512 form (`avx512=True`) gets it, as an extension of
its own name, where torch's own CPU capability is AVX512 (so `ATEN_CPU_CAPABILITY=avx2` builds and runs the
AVX2 form, as it sends torch's kernels to theirs). Where one cannot be built (an older CPU, no C++ compiler,
no ninja) or its environment variable is "0", the caller keeps its torch path, which computes the same. A
kernel's operators can be registered once a process: call it the same way each time.

Example:
    >>> build_kernel("attncard_banded", "banded_attention.cpp", "ATTNCARD_BANDED_KERNEL", "SDPA", avx512=True)
    True
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

CAPABILITIES = ("AVX2", "AVX512")


def build_kernel(name: str, source: str, env_var: str, fallback: str, *, avx512: bool = False) -> bool:
    """Compiles and loads the extension `name` from `source` (a file beside this one); whether it is loaded.

    Args:
        name: the extension's name in torch's cache, e.g. "attncard_top_k".
        source: the C++ file, beside this module.
        env_var: set to "0", nothing is tried.
        fallback: what the caller does instead, named in the one warning a failed build logs.
        avx512: the source has an AVX-512 form (under `#ifdef __AVX512F__`): where torch's CPU capability is
            AVX512 it is built with AVX-512 enabled, as `name` + "_avx512".
    """
    if os.environ.get(env_var) == "0":
        return False
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in CAPABILITIES:
        logger.info("%s needs AVX2 (CPU: %s); keeping %s", source, capability, fallback)
        return False
    flags = ["-O3", "-mavx2", "-mfma"]
    if avx512 and capability == "AVX512":  # torch's AVX512 level: F, BW, DQ and VL
        flags += ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl"]
        name += "_avx512"
    try:
        from torch.utils import cpp_extension

        cpp_extension.load(
            name=name,
            sources=[str(Path(__file__).with_name(source))],
            # -fopenmp: at::parallel_for is inline OpenMP in torch's headers, serial without it. The library
            # then needs libgomp.so.1, the one torch has already loaded.
            extra_cflags=[*flags, "-fopenmp"],
            extra_ldflags=["-fopenmp"],
            is_python_module=False,
        )
    except Exception as error:  # any build failure leaves the torch path, which is always correct
        # A compiler's message names the first error; else the exception's first line.
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = next(
            (line for line in lines if "error:" in line), lines[0] if lines else type(error).__name__
        )
        logger.warning(
            "could not build the compiled kernel %s (%s); using %s instead, slower on the CPU (set %s=0 to "
            "skip the attempt)",
            source,
            reason,
            fallback,
            env_var,
        )
        return False
    return True


def reads_float32_rows(*tensors: torch.Tensor) -> bool:
    """Whether the compiled kernels can read these tensors: float32 on the CPU, last dimension contiguous.

    Example:
        >>> reads_float32_rows(torch.zeros(2, 3)), reads_float32_rows(torch.zeros(2, 3).t())
        (True, False)
    """
    return all(t.device.type == "cpu" and t.dtype == torch.float32 and t.stride(-1) == 1 for t in tensors)
