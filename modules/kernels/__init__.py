"""Banded (sliding-window) attention kernels with per-head windows, padding, distance bias and a global token.

- :func:`banded_attention` picks an implementation for the device and the need for gradients.
- :func:`banded_attention_torch`: pure torch, any device, autograd, memory linear in N.
- ``triton_banded.banded_attention_triton``: forward-only Triton kernel (imported lazily; triton is optional).
- :func:`dense_banded_reference`: O(N²) dense ground truth for tests.

Their time and memory against dense SDPA: ``pipeline/study/bench.py`` (``attncard bench attention``).
"""

from .banded import banded_attention_torch
from .dispatch import IMPLEMENTATIONS, banded_attention, select_implementation, triton_available
from .reference import dense_banded_reference

__all__ = [
    "IMPLEMENTATIONS",
    "banded_attention",
    "banded_attention_torch",
    "dense_banded_reference",
    "select_implementation",
    "triton_available",
]
