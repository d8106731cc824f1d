"""Builds one of the compiled CPU kernels beside this file, on first use, or says once why it cannot.

The kernels (`top_k_attention.cpp`, `banded_attention.cpp`) are the CPU implementations of operators under
`torch.ops.attncard`, which Python defines ([`define_operator`]): each once a process, with a fake
implementation, so that `torch.compile` can trace a model that calls one, and so that loading a second build
of a kernel only replaces its CPU implementation (two C++ definitions of one operator abort the process).
They are compiled by `torch.utils.cpp_extension` (once per machine and torch version, into
torch's extension cache: `TORCH_EXTENSIONS_DIR`, by default `~/.cache/torch_extensions`), with AVX2 and FMA,
so only on a CPU that has them; a kernel with an AVX-512 form (`avx512=True`) gets it, as an extension of
its own name, where torch's own CPU capability is AVX512 (so `ATEN_CPU_CAPABILITY=avx2` builds and runs the
AVX2 form, as it sends torch's kernels to theirs). Where one cannot be built (an older CPU, no C++ compiler,
no ninja) or its environment variable is "0", the caller keeps its torch path, which computes the same.

Example:
    >>> build_kernel("attncard_banded", "banded_attention.cpp", "ATTNCARD_BANDED_KERNEL", "SDPA", avx512=True)
    True
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

CAPABILITIES = ("AVX2", "AVX512")
NAMESPACE = "attncard"
# Holds the operators' definitions and fake implementations: they last as long as this object.
_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")


def define_operator(schema: str, fake: Callable) -> None:
    """Defines the operator `attncard::<name>` from its schema, with `fake` as its fake implementation (the
    shapes, dtypes and devices of its results, computed from fake tensors), unless it is defined already.

    Its CPU implementation is the compiled kernel's, registered when [`build_kernel`] loads it.

    Args:
        schema: e.g. "top_k_rows(Tensor scores, int k) -> (Tensor, Tensor)"; `Tensor(a!)` marks an argument
            the kernel writes into.
        fake: takes the operator's arguments and returns empty tensors shaped like its results (None for an
            operator that returns nothing).

    Example:
        >>> from attncard.modules.kernels import top_k  # defines top_k_rows and top_k_attention
        >>> with torch._subclasses.FakeTensorMode():  # traced, not run: no kernel needed
        ...     values, indices = torch.ops.attncard.top_k_rows(torch.empty(6, 128), 8)
        >>> values.shape, indices.dtype
        (torch.Size([6, 8]), torch.int64)
    """
    name = schema.split("(", 1)[0]
    if hasattr(getattr(torch.ops, NAMESPACE), name):  # a second import of its module, or a reload
        return
    _LIBRARY.define(schema)
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_LIBRARY)


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
