"""Peak memory growth of a block of code, in MB: on a GPU CUDA's max allocated, on the CPU the growth of the
process's peak resident set or, exactly, of what torch's allocator holds; and the wall time of one call. One
home for the evaluation's, the scaling tables', the calibrations' and the benchmark's figures: here, below
the pipeline, because a module measures itself too (adaptive_span's crossover, after training).

The resident set is what the OS sees, but at a few MB it is noise: a freed tensor's pages stay on glibc's
heap and a later one may or may not land on them, and Linux counts resident pages per CPU, read approximately
(docs/benchmarks.md has how far identical models read apart). An `exact` block counts instead the bytes
torch's CPU allocator hands out and takes back during the block, from the profiler's allocation events: the
peak of the tensors live at once, kernels' scratch tensors included, the same on every pass (what CUDA's
`max_memory_allocated` is on a GPU). Memory that libraries allocate outside torch (MKL's, oneDNN's own
buffers) is not in it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch


def _malloc_trim() -> None:
    """Hand freed heap memory back to the OS (glibc), so that reusing it counts as growth of the peak RSS."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: reused heap memory may then go uncounted
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def _allocation_peak_bytes(profiler: torch.profiler.profile) -> int:
    """The largest growth of torch's allocated bytes over a profiled block: its allocations and frees
    (negative sizes) in the order they happened, summed from zero."""
    from torch._C._profiler import _EventType

    allocations, events = [], list(profiler.profiler.kineto_results.experimental_event_tree())
    while events:
        event = events.pop()
        if event.tag == _EventType.Allocation:
            allocations.append((event.start_time_ns, event.extra_fields.alloc_size))
        events.extend(event.children)
    held = peak = 0
    for _, size in sorted(allocations, key=lambda allocation: allocation[0]):
        held += size
        peak = max(peak, held)
    return peak


def _lifetime_peak_kb() -> int:
    import resource  # Unix only; Windows has neither this nor /proc

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class PeakMemory:
    """Peak memory growth of a block, in MB: CUDA max allocated, or the growth of the CPU peak RSS, or
    (`exact`) of the bytes torch's CPU allocator holds.

    On Linux the kernel's high-water mark (VmHWM) is reset through `/proc/self/clear_refs` (after
    `malloc_trim`, so that reusing freed heap memory counts as growth), so the peak is that of the block
    alone. Elsewhere the CPU peak is the growth of `getrusage`'s lifetime peak, which misses a block that
    stays below an earlier peak: `block_only` is then False.

    With `exact=True` on the CPU the block runs under torch's profiler, recording allocations only, and the
    peak is that of the tensors live at once (see the module's docstring); `exact` then says whether that
    held (not inside another profiler, which would not nest: the block then reads the resident set). Use it
    for a block that only measures memory: the profiler costs time.

    Args:
        device: where the block computes; CUDA reads the allocator, the CPU the process's peak RSS.
        exact: on the CPU, count torch's allocations instead of the resident set.

    Example:
        >>> with PeakMemory(torch.device("cpu"), exact=True) as memory:
        ...     x = torch.ones(2**20)  # 4 MiB of float32
        ...     del x
        ...     y = torch.ones(2**19)  # 2 MiB, after the 4 MiB went back
        >>> memory.peak_mb, memory.exact
        (4.0, True)
    """

    def __init__(self, device: torch.device, *, exact: bool = False) -> None:
        self.device = device
        self.exact = exact and device.type == "cpu"
        self.peak_mb = 0.0
        self.block_only = True
        self._profiler: torch.profiler.profile | None = None

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            return self
        if self.exact and torch.autograd._profiler_enabled():
            self.exact = False  # profilers do not nest: inside the caller's, the resident set it is
        if self.exact:
            # Kineto prints two lines each time a profiler starts and stops unless its log level is above
            # them; read when the profiler is first set up, and left to the user where already set.
            os.environ.setdefault("KINETO_LOG_LEVEL", "6")
            self._profiler = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True
            )
            self._profiler.__enter__()
            return self
        # The young generations hold what earlier passes left; a full collection would also walk every
        # object of the libraries (400k with transformers loaded, half a second) for nothing.
        gc.collect(1)
        _malloc_trim()
        try:
            Path("/proc/self/clear_refs").write_text("5")  # 5: reset the peak RSS to the current RSS
            self._start = _status_kb("VmRSS")
        except OSError:
            self._start = _lifetime_peak_kb()
            self.block_only = False
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_mb = (torch.cuda.max_memory_allocated(self.device) - self._start) / 2**20
        elif self._profiler is not None:
            self._profiler.__exit__(None, None, None)
            self.peak_mb = _allocation_peak_bytes(self._profiler) / 2**20
            self._profiler = None
        elif self.block_only:
            self.peak_mb = (_status_kb("VmHWM") - self._start) / 1024
        else:
            self.peak_mb = (_lifetime_peak_kb() - self._start) / 1024


def wall_seconds(run: Callable[[], object], device: torch.device) -> float:
    """The wall time of one call of `run`, with the GPU's queued work finished before and after it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def peak_memory_mb(run: Callable[[], object], device: torch.device) -> float | None:
    """Peak memory growth during one call of `run`, in MB ([`PeakMemory`], exact: a call only measured).

    Args:
        run: the call to measure.
        device: where it computes; CUDA and the CPU read their allocators' bytes.

    Returns:
        MB, or None where the peak could not be read: on a CPU where another profiler is running and there is
        no /proc/self/clear_refs (not Linux) to reset the resident set's peak.

    Example:
        >>> peak_memory_mb(lambda: torch.ones(2**20), torch.device("cpu"))  # 4 MiB of float32
        4.0
    """
    with PeakMemory(device, exact=True) as memory:
        run()
    return memory.peak_mb if memory.block_only else None
