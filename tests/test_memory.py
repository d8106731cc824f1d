"""Peak memory on the CPU (`modules/kernels/memory.py`): an exact block reads the memory live at once, the
same figure on every call, where glibc's default heap gives whatever its free pages allow."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch

from attncard.modules.kernels import memory as memory_module
from attncard.modules.kernels.memory import EXACT_MMAP_THRESHOLD, PeakMemory, peak_memory_mb

CPU = torch.device("cpu")
MIB = 2**20

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="the CPU peak is reset through /proc/self/clear_refs"
)


# Linux's resident-set counters are per-CPU and read approximately (tens of pages per CPU): the sizes below
# are large enough for that to stay within the tolerances.
TOLERANCE_MB = 0.5


def _two_at_once() -> None:
    """8 MiB, then 16 MiB, the first freed, then 24 MiB: at most 40 MiB live at once (the 16 and the 24)."""
    first = torch.ones(2 * MIB)
    second = torch.ones(4 * MIB)
    del first
    third = torch.ones(6 * MIB)
    del second, third


def test_an_exact_block_reads_the_memory_live_at_once_on_every_call():
    _two_at_once()  # a warm-up, as the scaling tables make: a process's first call also sets up its pools
    peaks = [peak_memory_mb(_two_at_once, CPU) for _ in range(5)]
    assert all(abs(peak - 40) < TOLERANCE_MB for peak in peaks), peaks


def test_an_exact_block_counts_a_buffer_freed_and_taken_again_once():
    # Under the default heap a freed buffer's pages may stay resident and a later buffer reuse them unseen;
    # in an exact block each buffer is its own mapping: freeing returns it, so the peak is the larger one.
    def run() -> None:
        for size in (2 * MIB, 4 * MIB, 2 * MIB):  # 8, 16 and 8 MiB, one at a time
            torch.ones(size)

    with PeakMemory(CPU, exact=True) as memory:
        run()
    assert memory.exact and memory.block_only
    assert abs(memory.peak_mb - 16) < TOLERANCE_MB


def test_allocations_below_the_threshold_stay_on_the_heap_and_the_threshold_is_lifted_after():
    calls = []
    real = memory_module._mallopt

    def recording(parameter: int, value: int) -> bool:
        calls.append((parameter, value))
        return real(parameter, value)

    memory_module._mallopt = recording
    try:
        with PeakMemory(CPU, exact=True):
            torch.ones(MIB // 4)
    finally:
        memory_module._mallopt = real
    assert calls[0] == (memory_module._M_MMAP_THRESHOLD, EXACT_MMAP_THRESHOLD)
    # After the block, the thresholds glibc's dynamic ones grow to: timed passes run on an ordinary heap.
    assert (memory_module._M_MMAP_THRESHOLD, memory_module._AFTER_MMAP_THRESHOLD) in calls[1:]
    assert (memory_module._M_TRIM_THRESHOLD, memory_module._AFTER_TRIM_THRESHOLD) in calls[1:]


def test_a_timed_block_is_not_exact_and_a_cuda_one_never_is():
    with PeakMemory(CPU) as memory:
        torch.ones(MIB // 4)
    assert not memory.exact and memory.block_only and memory.peak_mb > 0
    assert not PeakMemory(torch.device("cuda"), exact=True).exact  # the allocator's own counters are exact


def test_without_glibc_an_exact_block_measures_as_a_plain_one(monkeypatch):
    monkeypatch.setattr(memory_module, "_mallopt", lambda parameter, value: False)
    with PeakMemory(CPU, exact=True) as memory:
        torch.ones(2 * MIB)
    assert not memory.exact
    assert memory.block_only and abs(memory.peak_mb - 8) < TOLERANCE_MB


def test_identical_passes_of_a_model_read_the_same_peak():
    # The scaling tables' case: a pass of many tensors, some of them freed before others are taken.
    torch.manual_seed(0)
    block = [torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)]
    layers = torch.nn.Sequential(*block * 3)
    inputs = torch.randn(2048, 256)
    with torch.inference_mode():
        layers(inputs)
        peaks = [peak_memory_mb(lambda: layers(inputs), CPU) for _ in range(5)]
    # A Linear's (2048, 1024) output and its GELU are live at once (16 MiB), with what the kernels take.
    assert max(peaks) - min(peaks) < TOLERANCE_MB, peaks
    assert statistics.median(peaks) > 16 - TOLERANCE_MB, peaks
