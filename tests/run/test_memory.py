"""Peak memory on the CPU (`modules/measure.py`): an exact block counts the bytes torch's allocator
holds, the same figure on every call, where the resident set gives whatever the heap's free pages allow."""

from __future__ import annotations

import torch

from attncard.modules.measure import PeakMemory, peak_memory_mb

CPU = torch.device("cpu")
MIB = 2**20


def _two_at_once() -> None:
    """8 MiB, then 16 MiB, the first freed, then 24 MiB: at most 40 MiB live at once (the 16 and the 24)."""
    first = torch.ones(2 * MIB)
    second = torch.ones(4 * MIB)
    del first
    third = torch.ones(6 * MIB)
    del second, third


def test_an_exact_block_reads_the_tensors_live_at_once_on_every_call():
    assert [peak_memory_mb(_two_at_once, CPU) for _ in range(3)] == [40.0, 40.0, 40.0]


def test_a_buffer_freed_and_taken_again_counts_once_and_a_call_s_temporaries_count():
    def one_at_a_time() -> None:
        for size in (2 * MIB, 4 * MIB, 2 * MIB):  # 8, 16 and 8 MiB
            torch.ones(size)

    with PeakMemory(CPU, exact=True) as memory:
        one_at_a_time()
    assert memory.exact and memory.block_only and memory.peak_mb == 16.0

    rows = torch.ones(1024, 64)
    # The (1024, 1024) product lives only inside the call (4 MiB); what is returned is a scalar.
    assert peak_memory_mb(lambda: (rows @ rows.T).sum(), CPU) >= 4.0


def test_tensors_made_before_the_block_and_freed_in_it_do_not_lower_its_peak():
    held = [torch.ones(4 * MIB)]

    def free_then_take() -> None:
        held.pop()  # 16 MiB back to the allocator
        torch.ones(2 * MIB)  # 8 MiB

    assert peak_memory_mb(free_then_take, CPU) == 8.0


def test_a_timed_block_reads_the_resident_set_and_a_cuda_one_its_allocator():
    with PeakMemory(CPU) as memory:
        torch.ones(2 * MIB)
    assert not memory.exact and memory.block_only and memory.peak_mb > 0
    assert not PeakMemory(torch.device("cuda"), exact=True).exact  # CUDA's own counters are exact already


def test_inside_another_profiler_an_exact_block_reads_the_resident_set():
    outer = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with outer, PeakMemory(CPU, exact=True) as memory:
        torch.ones(2 * MIB)
    assert not memory.exact
    assert memory.peak_mb > 0 or not memory.block_only


def test_identical_passes_of_a_model_read_the_same_peak():
    # The scaling tables' case: a pass of many tensors, some of them freed before others are taken.
    torch.manual_seed(0)
    block = [torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)]
    layers = torch.nn.Sequential(*block * 3)
    inputs = torch.randn(2048, 256)
    with torch.inference_mode():
        layers(inputs)
        peaks = {peak_memory_mb(lambda: layers(inputs), CPU) for _ in range(5)}
    assert len(peaks) == 1, peaks
    # A Linear's (2048, 1024) output and its GELU are live at once: 16 MiB.
    assert peaks.pop() >= 16.0


def test_profiling_prints_nothing(capfd):
    peak_memory_mb(_two_at_once, CPU)
    captured = capfd.readouterr()
    assert "profiler_start" not in captured.err + captured.out
