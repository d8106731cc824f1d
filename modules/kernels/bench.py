"""Time and peak memory of banded attention against dense attention (``attncard bench attention``).

Forward: every head uses the same window ``span``; dense SDPA gets the (N, N) boolean band mask, built inside
the measured call since it is part of what dense attention needs. Forward + backward: per-head adaptive spans
up to ``backward_span``, with a soft ramp entering as a log-mask ``distance_bias`` that requires grad; the
dense side gets the equivalent (H, N, N) float bias, gathered from the same ``distance_bias`` inside the call.

Peak memory is the growth of the process's peak RSS during one call on CPU (Linux: VmHWM, reset through
/proc/self/clear_refs, after handing freed heap memory back with malloc_trim), or the growth of
``torch.cuda.max_memory_allocated`` on CUDA; None where neither can be read.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from .banded import banded_attention_torch
from .memory import PeakMemory
from .reference import dense_banded_reference

# The dense reference holds about three (B, H, N, N) float32 tensors at once; skipped beyond this budget.
REFERENCE_MEMORY_BUDGET_BYTES = 6e9
RAMP = 32  # length of the adaptive-span soft ramp in the forward + backward benchmark
MIN_TIMED_SECONDS = 1.0  # fast calls are repeated beyond ``repeats`` until their times add up to this
MAX_TIMED_CALLS = 50


def run_attention_benchmark(
    ns: Sequence[int] = (512, 1024, 2048, 4096, 8192, 16384),
    span: int = 64,
    batch: int = 1,
    heads: int = 12,
    head_dim: int = 64,
    repeats: int = 3,
    backward_n: int | None = 4096,
    backward_span: int = 128,
    device: str | None = None,
) -> list[dict]:
    """Measure dense SDPA, the dense reference and the torch banded kernel.

    Args:
        ns: sequence lengths for the forward benchmark.
        span: window of every head in the forward benchmark.
        batch, heads, head_dim: attention shape (B, H, ·, D).
        repeats: timed calls per measurement (at least; see ``MIN_TIMED_SECONDS``); the median is reported.
        backward_n: sequence length of the forward + backward benchmark; None skips it.
        backward_span: largest per-head span of the forward + backward benchmark.
        device: "cpu" or "cuda"; default CUDA when available.

    Returns:
        One record per (mode, N, implementation): ``{"mode": "forward" | "forward_backward", "n": N,
        "span": W, "impl": "sdpa_dense" | "dense_reference" | "banded" | "dense_bias", "seconds": median
        seconds, "peak_mb": peak memory growth in MB or None}``. "dense_reference" is absent where it would
        need more than ``REFERENCE_MEMORY_BUDGET_BYTES``.

    Example:
        >>> records = run_attention_benchmark(ns=(64,), span=8, heads=2, head_dim=16, backward_n=None)
        >>> [(r["n"], r["impl"]) for r in records]
        [(64, 'sdpa_dense'), (64, 'dense_reference'), (64, 'banded')]
        >>> print(format_table(records))
        mode                   N  impl               seconds   peak MB  speed-up   memory
        ---------------------------------------------------------------------------------
        forward               64  sdpa_dense         ...      1.0x ...
        forward               64  dense_reference    ...
        forward               64  banded             ...
        speed-up: baseline seconds / seconds; memory: peak MB / baseline peak MB
        (baseline: sdpa_dense for forward, dense_bias for forward_backward)
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    scaling = head_dim**-0.5
    records = []
    for n in ns:
        inputs = [torch.randn(batch, heads, n, head_dim, device=device) for _ in range(3)]
        runs = _forward_runs(*inputs, span, scaling)
        if 12 * batch * heads * n * n > REFERENCE_MEMORY_BUDGET_BYTES:
            del runs["dense_reference"]
        for impl, run in runs.items():
            with torch.no_grad():
                seconds, peak_mb = _measure(run, device, repeats)
            records.append(dict(mode="forward", n=n, span=span, impl=impl, seconds=seconds, peak_mb=peak_mb))

    if backward_n is not None:
        records += _forward_backward_records(
            backward_n, backward_span, batch, heads, head_dim, repeats, device
        )
    return records


def _forward_runs(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, span: int, scaling: float
) -> dict[str, Callable[[], torch.Tensor]]:
    window = torch.full((query.shape[1],), span, device=query.device)
    return {
        "sdpa_dense": lambda: _sdpa_band(query, key, value, span, scaling),
        "dense_reference": lambda: dense_banded_reference(query, key, value, window, scaling=scaling),
        "banded": lambda: banded_attention_torch(query, key, value, window, scaling=scaling),
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

    records = []
    for impl, run in (("dense_bias", step(_sdpa_bias)), ("banded", step(_banded_bias))):
        seconds, peak_mb = _measure(run, device, repeats)
        records.append(
            dict(mode="forward_backward", n=n, span=max_span, impl=impl, seconds=seconds, peak_mb=peak_mb)
        )
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
    return banded_attention_torch(query, key, value, window, scaling=scaling, distance_bias=distance_bias)


def _measure(run: Callable[[], object], device: str, repeats: int) -> tuple[float, float | None]:
    """Median seconds of the timed calls and peak-memory growth in MB of one call, after a warm-up call.

    At least ``repeats`` timed calls, more while they add up to under ``MIN_TIMED_SECONDS``: the median of
    many short calls shrugs off the odd preempted one. Memory is measured on its own call, since resetting the
    peak hands memory back to the OS and would charge the page faults of getting it again to the timing.
    """
    run()
    with PeakMemory(torch.device(device)) as memory:
        run()
    peak_mb = memory.peak_mb if memory.block_only else None

    seconds: list[float] = []
    while len(seconds) < repeats or (sum(seconds) < MIN_TIMED_SECONDS and len(seconds) < MAX_TIMED_CALLS):
        start = time.perf_counter()
        run()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), peak_mb


def format_table(records: list[dict]) -> str:
    """Records of :func:`run_attention_benchmark` as a text table, with speed-up and memory ratios against the
    dense baseline of the same run (sdpa_dense for forward, dense_bias for forward_backward)."""
    baseline_impl = {"forward": "sdpa_dense", "forward_backward": "dense_bias"}
    baselines = {(r["mode"], r["n"]): r for r in records if r["impl"] == baseline_impl[r["mode"]]}
    header = f"{'mode':<17}{'N':>7}  {'impl':<16}{'seconds':>10}{'peak MB':>10}{'speed-up':>10}{'memory':>9}"
    lines = [header, "-" * len(header)]
    for r in records:
        base = baselines.get((r["mode"], r["n"]))
        speedup = f"{base['seconds'] / r['seconds']:.1f}x" if base else "-"
        memory = "-"
        if base and r["peak_mb"] is not None and base["peak_mb"]:
            memory = f"{r['peak_mb'] / base['peak_mb']:.3f}"
        peak = "-" if r["peak_mb"] is None else f"{r['peak_mb']:.0f}"
        lines.append(
            f"{r['mode']:<17}{r['n']:>7}  {r['impl']:<16}{r['seconds']:>10.4f}{peak:>10}"
            f"{speedup:>10}{memory:>9}"
        )
    forward_ns = sorted({r["n"] for r in records if r["mode"] == "forward"})
    with_reference = {r["n"] for r in records if r["impl"] == "dense_reference"}
    skipped = [n for n in forward_ns if n not in with_reference]
    if skipped:
        budget_gb = REFERENCE_MEMORY_BUDGET_BYTES / 1e9
        lines.append(
            f"dense_reference not run at N = {', '.join(map(str, skipped))} (would need > {budget_gb:g} GB)"
        )
    lines.append(
        "speed-up: baseline seconds / seconds; memory: peak MB / baseline peak MB "
        "(baseline: sdpa_dense for forward, dense_bias for forward_backward)"
    )
    return "\n".join(lines)
