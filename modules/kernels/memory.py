"""Peak memory growth of a block of code, in MB: on a GPU CUDA's max allocated, on the CPU the growth of the
process's peak resident set; and the wall time of one call. One home for the evaluation's, the scaling
tables', the calibrations' and the benchmark's figures.

On the CPU a pass's peak depends on where the allocator's heap puts it: with glibc's default settings a freed
tensor's pages go back on the heap, and a later tensor may or may not land on pages already resident. The
same MiniLM pass at N = 128 then read 3.3 or 3.5–3.9 MB, and a model against an identical copy of itself read
0.82–1.10 over 8 trials of 7 passes a side. An `exact` block gives every allocation of `EXACT_MMAP_THRESHOLD`
or more a mapping of its own, returned to the OS the moment it is freed, so the peak is that of the memory
live at once: the same trials read 0.991–1.005 (and the pass 2.1 MB).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import time
from collections.abc import Callable
from pathlib import Path

import torch

# glibc's mallopt parameters (malloc.h) and the settings an exact block uses and leaves behind.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
EXACT_MMAP_THRESHOLD = 64 * 1024
# glibc cannot be put back into its dynamic mode once a threshold is set: what it leaves behind instead are
# the values its dynamic thresholds grow to on 64-bit Linux (mmap up to 32 MiB, trim at twice that), so that
# the timed passes after an exact block run on a heap like the one a long-running process has.
_AFTER_MMAP_THRESHOLD = 32 * 2**20
_AFTER_TRIM_THRESHOLD = 64 * 2**20


def _mallopt(parameter: int, value: int) -> bool:
    """glibc's mallopt; False where there is no glibc (then an exact block measures as a plain one)."""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(parameter, value))
    except (OSError, AttributeError):
        return False


def _malloc_trim() -> None:
    """Hand freed heap memory back to the OS (glibc), so that reusing it counts as growth of the peak RSS."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: reused heap memory may then go uncounted
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def _lifetime_peak_kb() -> int:
    import resource  # Unix only; Windows has neither this nor /proc

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class PeakMemory:
    """Peak memory growth of a block, in MB: CUDA max allocated, or the growth of the CPU peak RSS.

    On Linux the kernel's high-water mark (VmHWM) is reset through `/proc/self/clear_refs` (after
    `malloc_trim`, so that reusing freed heap memory counts as growth), so the peak is that of the block
    alone. Elsewhere the CPU peak is the growth of `getrusage`'s lifetime peak, which misses a block that
    stays below an earlier peak: `block_only` is then False.

    With `exact=True` on the CPU (glibc), every allocation of `EXACT_MMAP_THRESHOLD` (64 KiB) or more gets a
    mapping of its own inside the block, so that the peak is that of the memory live at once and not of where
    freed heap pages happen to lie (see the module's docstring); `exact` then says whether that held. Use it
    for a block that only measures memory: each such allocation costs page faults, so a block that is also
    timed should not be exact. After the block glibc keeps fixed thresholds near those its dynamic ones reach.

    Args:
        device: where the block computes; CUDA reads the allocator, the CPU the process's peak RSS.
        exact: on the CPU, give large allocations their own mappings inside the block.

    Example:
        >>> with PeakMemory(torch.device("cpu"), exact=True) as memory:
        ...     x = torch.ones(2**20)  # 4 MiB of float32
        >>> 3.9 < memory.peak_mb < 4.2, memory.block_only  # the resident set is counted in pages
        (True, True)
    """

    def __init__(self, device: torch.device, *, exact: bool = False) -> None:
        self.device = device
        self.exact = exact and device.type == "cpu"
        self.peak_mb = 0.0
        self.block_only = True

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            return self
        # The young generations hold what earlier passes left; a full collection would also walk every
        # object of the libraries (400k with transformers loaded, half a second) for nothing.
        gc.collect(1)
        if self.exact:
            self.exact = _mallopt(_M_MMAP_THRESHOLD, EXACT_MMAP_THRESHOLD)
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
        elif self.block_only:
            self.peak_mb = (_status_kb("VmHWM") - self._start) / 1024
        else:
            self.peak_mb = (_lifetime_peak_kb() - self._start) / 1024
        if self.exact:
            _mallopt(_M_MMAP_THRESHOLD, _AFTER_MMAP_THRESHOLD)
            _mallopt(_M_TRIM_THRESHOLD, _AFTER_TRIM_THRESHOLD)


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
        device: where it computes; CUDA reads the allocator, the CPU the process's peak RSS.

    Returns:
        MB, or None on a CPU without /proc/self/clear_refs (not Linux), where the peak cannot be reset.

    Example:
        >>> peak = peak_memory_mb(lambda: torch.ones(2**20), torch.device("cpu"))  # 4 MiB of float32
        >>> 2 < peak < 6  # about 4: the resident set is counted in pages, and some may be there already
        True
    """
    with PeakMemory(device, exact=True) as memory:
        run()
    return memory.peak_mb if memory.block_only else None
