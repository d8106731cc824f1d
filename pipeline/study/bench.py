"""Time and peak memory of banded attention against dense attention (``attncard bench attention``).

Forward: every head uses the same window ``span``; dense SDPA gets the (N, N) boolean band mask, built inside
the measured call since it is part of what dense attention needs. "sdpa_fused" is SDPA with no mask at all
(full attention, a different result): the fused kernel at its leanest, which never holds N×N on any device,
so its peak is the memory a banded layer must not exceed (``fused_memory_ratio`` of the banded rows).
"banded" is what :func:`~modules.kernels.dispatch.banded_attention` runs for the call (its ``kernel`` field
names it), "banded_torch" the plain-torch kernel, for comparison. Forward + backward: per-head adaptive
spans up to ``backward_span``, with a soft ramp entering as a log-mask ``distance_bias`` that requires grad;
the dense side gets the equivalent (H, N, N) float bias, gathered from the same ``distance_bias`` inside the
call.

Figures that hold from run to run on a shared machine: every implementation of a point is timed ``repeats``
times, the implementations taking turns (dense, banded; banded, dense; ...: each round starts one later), so
that load from elsewhere hits them alike; each record has the median and the min and max. A speed-up is given
as the ratio of medians and a range: dense fastest / module slowest to dense slowest / module fastest, so a
range that holds 1 says no measurable difference. Calls shorter than ``MIN_SAMPLE_SECONDS`` are repeated
within a sample and averaged.

Peak memory is the largest growth during one call of the bytes torch's allocator holds: on CPU from the
profiler's allocation events (``modules.measure.PeakMemory(exact=True)``; the growth of the peak RSS inside
another profiler), on CUDA ``torch.cuda.max_memory_allocated``; None where neither can be read.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ...modules.kernels import (
    banded_attention,
    banded_attention_torch,
    dense_banded_reference,
    select_implementation,
)
from ...modules.measure import PeakMemory

# The dense reference holds about three (B, H, N, N) float32 tensors at once; skipped beyond this budget.
REFERENCE_MEMORY_BUDGET_BYTES = 6e9
RAMP = 32  # length of the adaptive-span soft ramp in the forward + backward benchmark
DEFAULT_REPEATS = 5
# A sample shorter than this is dominated by timer and scheduler noise: such calls are repeated within one
# sample (at most MAX_CALLS_PER_SAMPLE times) and the sample is their mean.
MIN_SAMPLE_SECONDS = 0.02
MAX_CALLS_PER_SAMPLE = 100
BASELINE_IMPL = {"forward": "sdpa_dense", "forward_backward": "dense_bias"}
# Unmasked fused SDPA: the memory a forward banded layer is held to (it never materialises N×N).
FUSED_IMPL = "sdpa_fused"


def run_attention_benchmark(
    ns: Sequence[int] = (512, 1024, 2048, 4096, 8192, 16384),
    span: int = 64,
    batch: int = 1,
    heads: int = 12,
    head_dim: int = 64,
    repeats: int = DEFAULT_REPEATS,
    backward_n: int | None = 4096,
    backward_span: int = 128,
    device: str | None = None,
) -> list[dict]:
    """Measure dense SDPA, the dense reference and the banded kernels, interleaved, ``repeats`` times each.

    Args:
        ns: sequence lengths for the forward benchmark.
        span: window of every head in the forward benchmark.
        batch, heads, head_dim: attention shape (B, H, ·, D).
        repeats: timed samples per implementation and point; the median, min and max are reported.
        backward_n: sequence length of the forward + backward benchmark; None skips it.
        backward_span: largest per-head span of the forward + backward benchmark.
        device: "cpu" or "cuda"; default CUDA when available.

    Returns:
        One record per (mode, N, implementation): ``{"mode": "forward" | "forward_backward", "n": N,
        "span": W, "impl": "sdpa_dense" | "sdpa_fused" | "dense_reference" | "banded" | "banded_torch" |
        "dense_bias",
        "seconds": median, "seconds_min", "seconds_max", "repeats", "peak_mb": peak memory growth in MB or
        None}``. Banded rows add ``kernel`` (the implementation that ran) and ``compute_limit`` (the speed-up
        if time were proportional to the score pairs computed: dense pairs / band pairs). Every row but the
        baseline (sdpa_dense for forward, dense_bias for forward_backward) adds ``speedup`` (ratio of
        medians), ``speedup_low``, ``speedup_high`` and ``memory_ratio`` (peak MB / baseline peak MB, None
        where either is unknown); forward rows but sdpa_fused add ``fused_memory_ratio`` (peak MB / sdpa_fused
        peak MB). "dense_reference" is absent where it would need more than ``REFERENCE_MEMORY_BUDGET_BYTES``.

    Example:
        >>> records = run_attention_benchmark(
        ...     ns=(64,), span=8, heads=2, head_dim=16, repeats=3, backward_n=None
        ... )
        >>> [r["impl"] for r in records]
        ['sdpa_dense', 'sdpa_fused', 'dense_reference', 'banded', 'banded_torch']
        >>> banded = records[3]
        >>> banded["seconds_min"] <= banded["seconds"] <= banded["seconds_max"], banded["repeats"]
        (True, 3)
        >>> banded["speedup_low"] <= banded["speedup"] <= banded["speedup_high"]
        True
        >>> round(banded["compute_limit"], 3)  # 64² / (64·17 - 8·9): the band holds 1016 of 4096 pairs
        4.031
        >>> print(format_table(records))
        | mode | N | span | impl | kernel | seconds (median) | min–max | peak MB | speed-up (range) | ...
        |---|---|---|---|---|---|---|---|---|---|---|---|
        | forward | 64 | 8 | sdpa_dense | - | ... | 1 | - | - | ... |
        | forward | 64 | 8 | sdpa_fused | - | ...x (...) | - | ... | - |
        | forward | 64 | 8 | dense_reference | - | ...x (...) | - | ... |
        | forward | 64 | 8 | banded | ... | ...x (...) | 4.0x | ... |
        | forward | 64 | 8 | banded_torch | torch | ...x (...) | 4.0x | ... |
        <BLANKLINE>
        3 timed samples per row, implementations interleaved. Speed-up: ...
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    scaling = head_dim**-0.5
    records = []
    for n in ns:
        inputs = [torch.randn(batch, heads, n, head_dim, device=device) for _ in range(3)]
        window = torch.full((heads,), span, device=device)
        runs = _forward_runs(*inputs, window, scaling)
        if 12 * batch * heads * n * n > REFERENCE_MEMORY_BUDGET_BYTES:
            del runs["dense_reference"]
        with torch.no_grad():
            measured = _measure_interleaved(runs, device, repeats)
            kernel = select_implementation(*inputs)
        limit = compute_limit(n, window)
        for impl, figures in measured.items():
            record = dict(mode="forward", n=n, span=span, impl=impl, **figures)
            if impl in ("banded", "banded_torch"):
                record.update(kernel=kernel if impl == "banded" else "torch", compute_limit=limit)
            records.append(record)

    if backward_n is not None:
        records += _forward_backward_records(
            backward_n, backward_span, batch, heads, head_dim, repeats, device
        )
    return _with_ratios(records)


def band_pairs(length: int, window: int, causal: bool = False) -> int:
    """Number of (query, key) pairs with |i - j| <= window (and j <= i when causal) among ``length`` tokens.

    Example:
        >>> band_pairs(5, 1), band_pairs(5, 1, causal=True), band_pairs(5, 9)
        (13, 9, 25)
    """
    window = min(window, length - 1)
    below = length * window - window * (window + 1) // 2  # pairs with 1 <= i - j <= window
    return length + below if causal else length + 2 * below


def compute_limit(length: int, window: torch.Tensor, causal: bool = False) -> float:
    """Speed-up of banded over dense attention if time were proportional to score pairs: dense pairs (all
    N² per head, or the causal half) over the band pairs of the heads' windows; about N / (2W + 1).

    Example:
        >>> round(compute_limit(4096, torch.tensor([64, 64])), 1)
        32.0
    """
    dense = band_pairs(length, length - 1, causal)
    return len(window) * dense / sum(band_pairs(length, int(w), causal) for w in window)


def _forward_runs(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, window: torch.Tensor, scaling: float
) -> dict[str, Callable[[], torch.Tensor]]:
    span = int(window.max())
    return {
        "sdpa_dense": lambda: _sdpa_band(query, key, value, span, scaling),
        "sdpa_fused": lambda: F.scaled_dot_product_attention(query, key, value, scale=scaling),
        "dense_reference": lambda: dense_banded_reference(query, key, value, window, scaling=scaling),
        "banded": lambda: banded_attention(query, key, value, window, scaling=scaling),
        "banded_torch": lambda: banded_attention_torch(query, key, value, window, scaling=scaling),
    }


def _forward_backward_records(
    n: int, max_span: int, batch: int, heads: int, head_dim: int, repeats: int, device: str
) -> list[dict]:
    """Training step of adaptive-span attention: banded kernel vs dense attention with the full span bias."""
    leaves = [torch.randn(batch, heads, n, head_dim, device=device, requires_grad=True) for _ in range(3)]
    grad_output = torch.randn(batch, heads, n, head_dim, device=device)
    # Spans spread over (0, max_span]: weight 1 up to span - RAMP, a linear ramp to 0 at the span; log of it.
    window = torch.linspace(max_span / heads, max_span, heads, device=device).ceil().long()
    distance = torch.arange(max_span + 1, device=device)
    ramp = ((window[:, None] - distance) / RAMP).clamp(0, 1)
    distance_bias = ramp.log().requires_grad_()  # -inf from each head's span on
    scaling = head_dim**-0.5

    def step(attention: Callable[..., torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            for tensor in [*leaves, distance_bias]:
                tensor.grad = None
            attention(*leaves, window, distance_bias, scaling).backward(grad_output)

        return run

    measured = _measure_interleaved(
        {"dense_bias": step(_sdpa_bias), "banded": step(_banded_bias)}, device, repeats
    )
    kernel = select_implementation(*leaves, distance_bias)
    records = []
    for impl, figures in measured.items():
        record = dict(mode="forward_backward", n=n, span=max_span, impl=impl, **figures)
        if impl == "banded":
            record.update(kernel=kernel, compute_limit=compute_limit(n, window))
        records.append(record)
    return records


def _sdpa_band(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, span: int, scaling: float
) -> torch.Tensor:
    """Dense SDPA restricted to |i - j| <= span by an (N, N) boolean mask."""
    positions = torch.arange(query.shape[2], device=query.device)
    band = (positions[:, None] - positions[None, :]).abs() <= span
    return F.scaled_dot_product_attention(query, key, value, attn_mask=band, scale=scaling)


def _sdpa_bias(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    window: torch.Tensor,
    distance_bias: torch.Tensor,
    scaling: float,
) -> torch.Tensor:
    """Dense SDPA with the (H, N, N) float mask equal to the banded kernel's band and distance bias."""
    positions = torch.arange(query.shape[2], device=query.device)
    distance = (positions[:, None] - positions[None, :]).abs()
    bias = distance_bias[:, distance.clamp(max=distance_bias.shape[1] - 1)]
    bias = bias.masked_fill(distance > window[:, None, None], float("-inf"))
    return F.scaled_dot_product_attention(query, key, value, attn_mask=bias, scale=scaling)


def _banded_bias(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    window: torch.Tensor,
    distance_bias: torch.Tensor,
    scaling: float,
) -> torch.Tensor:
    return banded_attention(query, key, value, window, scaling=scaling, distance_bias=distance_bias)


def _measure_interleaved(runs: dict[str, Callable[[], object]], device: str, repeats: int) -> dict[str, dict]:
    """Per implementation: median, min and max seconds of ``repeats`` samples, and peak-memory growth in MB.

    Each implementation is called once to warm up (which also sizes its samples: calls shorter than
    ``MIN_SAMPLE_SECONDS`` are repeated within a sample), then once under :class:`PeakMemory`, then the
    implementations take turns, one sample each per round, so that a burst of load from elsewhere slows them
    alike instead of one of them; each round starts one implementation later than the last. Memory is
    measured on its own call, since resetting the peak hands memory back to the OS and would charge the page
    faults of getting it again to the timing.
    """
    calls_per_sample = {}
    peak_mb: dict[str, float | None] = {}
    for impl, run in runs.items():
        warm_up = _timed(run, device, calls=1)
        calls_per_sample[impl] = min(MAX_CALLS_PER_SAMPLE, max(1, math.ceil(MIN_SAMPLE_SECONDS / warm_up)))
        with PeakMemory(torch.device(device), exact=True) as memory:
            run()
        peak_mb[impl] = memory.peak_mb if memory.block_only else None

    samples: dict[str, list[float]] = {impl: [] for impl in runs}
    turns = list(runs.items())
    for index in range(repeats):
        # Each round starts one implementation later, so no implementation always runs right after the same
        # other one (the pass after another ran 0.3–0.8% faster in pipeline/run/scaling.py's pairs).
        shift = index % len(turns)
        for impl, run in turns[shift:] + turns[:shift]:
            samples[impl].append(_timed(run, device, calls_per_sample[impl]))
    return {
        impl: dict(
            seconds=statistics.median(times),
            seconds_min=min(times),
            seconds_max=max(times),
            repeats=len(times),
            peak_mb=peak_mb[impl],
        )
        for impl, times in samples.items()
    }


def _timed(run: Callable[[], object], device: str, calls: int) -> float:
    """Mean seconds of ``calls`` back-to-back calls (at least one nanosecond, so ratios stay finite)."""
    start = time.perf_counter()
    for _ in range(calls):
        run()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return max((time.perf_counter() - start) / calls, 1e-9)


def _with_ratios(records: list[dict]) -> list[dict]:
    """Add speed-up (median ratio and range) and memory ratio against the baseline of the same mode and N."""
    baselines = {(r["mode"], r["n"]): r for r in records if r["impl"] == BASELINE_IMPL[r["mode"]]}
    leanest = {r["n"]: r for r in records if r["impl"] == FUSED_IMPL}
    for r in records:
        base = baselines.get((r["mode"], r["n"]))
        if base is None or r is base:
            continue
        r["speedup"] = base["seconds"] / r["seconds"]
        r["speedup_low"] = base["seconds_min"] / r["seconds_max"]
        r["speedup_high"] = base["seconds_max"] / r["seconds_min"]
        known = r["peak_mb"] is not None and base["peak_mb"]
        r["memory_ratio"] = r["peak_mb"] / base["peak_mb"] if known else None
        fused = leanest.get(r["n"]) if r["mode"] == "forward" else None
        if fused is not None and r is not fused:
            known = r["peak_mb"] is not None and fused["peak_mb"]
            r["fused_memory_ratio"] = r["peak_mb"] / fused["peak_mb"] if known else None
    return records


def format_table(records: list[dict]) -> str:
    """Records of :func:`run_attention_benchmark` as a Markdown table: median seconds with min–max, peak
    memory, speed-up against the dense baseline of the same run with its range, the compute limit of the
    banded rows and the memory ratio; then notes on what was skipped and how to read it."""
    header = [
        "mode",
        "N",
        "span",
        "impl",
        "kernel",
        "seconds (median)",
        "min–max",
        "peak MB",
        "speed-up (range)",
        "compute limit",
        "memory ratio",
        "memory vs fused",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in records:
        speedup = "1"  # the baseline row
        if "speedup" in r:
            speedup = f"{r['speedup']:.1f}x ({r['speedup_low']:.1f}–{r['speedup_high']:.1f})"
        limit = f"{r['compute_limit']:.1f}x" if "compute_limit" in r else "-"
        ratio = r.get("memory_ratio")
        cells = [
            r["mode"],
            str(r["n"]),
            str(r["span"]),
            r["impl"],
            r.get("kernel", "-"),
            f"{r['seconds']:.4g}",
            f"{r['seconds_min']:.4g}–{r['seconds_max']:.4g}",
            "-" if r["peak_mb"] is None else f"{r['peak_mb']:.1f}",
            speedup,
            limit,
            "-" if ratio is None else f"{ratio:.3f}",
            "-" if r.get("fused_memory_ratio") is None else f"{r['fused_memory_ratio']:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")

    repeats = sorted({r["repeats"] for r in records})
    notes = [
        f"{'/'.join(map(str, repeats))} timed samples per row, implementations interleaved. Speed-up: "
        "baseline median / median, range: baseline fastest / slowest of the row to baseline slowest / "
        "fastest of the row. Memory ratio: peak MB / baseline peak MB (baseline: sdpa_dense for forward, "
        "dense_bias for forward_backward). Memory vs fused: peak MB / sdpa_fused peak MB (SDPA without a "
        "mask: full attention, the fused kernel's own memory, which the banded layer must stay within). "
        "Compute limit: dense score pairs / band score pairs."
    ]
    forward_ns = sorted({r["n"] for r in records if r["mode"] == "forward"})
    with_reference = {r["n"] for r in records if r["impl"] == "dense_reference"}
    skipped = [n for n in forward_ns if n not in with_reference]
    if skipped:
        budget_gb = REFERENCE_MEMORY_BUDGET_BYTES / 1e9
        notes.append(
            f"dense_reference not run at N = {', '.join(map(str, skipped))} (would need > {budget_gb:g} GB)."
        )
    return "\n".join([*lines, "", *notes])
