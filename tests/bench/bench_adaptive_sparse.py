"""One `adaptive_sparse` attention layer against fused SDPA: time and peak memory, forward, no grad, eval.

Run: `.venv/bin/python tests/bench/bench_adaptive_sparse.py [N ...]` (default 512 1024 2048 4096). Shape B =
1, H = 12, D = 64, no mask, bidirectional, top_k the config default. Times are the median (min–max) of
`--repeats` rounds in which every implementation runs once, interleaved, after one warm-up call each; the
speed against SDPA is the median (min–max) over those rounds of SDPA's time in the round over the
implementation's. Memory is the growth of the peak resident set (`PeakMemory`) over one call, measured
in `--memory-repeats` interleaved rounds of their own (a measurement returns freed memory to the system,
which a timed call should not pay for): the median in MB, and the median (min–max) over the rounds of
the ratio to SDPA's. "full matrix" is the former implementation (the whole (B, H, N, N) score matrix),
kept here as the baseline being replaced; it is skipped above `--full-max` tokens.

`--train N`: one training step of one layer instead (forward + backward, train mode, grad of q, k, v;
B = 32), the three implementations at length N, timed the same way; no memory column.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from transformers.integrations.sdpa_attention import repeat_kv

from attncard.modules.adaptive_sparse import (
    AdaptiveSparseConfig,
    AdaptiveSparseState,
    adaptive_sparse_attention,
)
from attncard.modules.adaptive_sparse.attention import kept_bias
from attncard.modules.measure import PeakMemory

SCALE = 64**-0.5  # 1/√D


def full_matrix(query, key, value, top_k: int, scaling: float) -> torch.Tensor:
    """The former implementation without mask: all N×N scores, top-k bias, masked softmax, dense P·V."""
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    scores = torch.matmul(query, key.transpose(-2, -1)) * scaling
    bias, _, _ = kept_bias(scores, None, top_k)
    probabilities = (scores + bias).softmax(dim=-1, dtype=torch.float32).to(value.dtype)
    return torch.matmul(probabilities, value).transpose(1, 2).contiguous()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ns", nargs="*", type=int, default=[512, 1024, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-repeats", type=int, default=3)
    parser.add_argument("--full-max", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--train", type=int, default=None, help="time a training step at this N instead")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.train:
        train_step(args.train, args.repeats)
        return
    top_k = AdaptiveSparseConfig().top_k
    module = torch.nn.Module()
    module.is_causal = False
    module.adaptive_sparse = AdaptiveSparseState(top_k)
    module.eval()
    print(f"B=1 H=12 D=64 top_k={top_k} threads={torch.get_num_threads()}")
    header = ["N", "impl", "median s", "min–max s", "speed×SDPA", "min–max", "peak MB", "mem×SDPA", "min–max"]
    print("{:>6} {:<12} {:>9} {:>16} {:>10} {:>11} {:>8} {:>8} {:>11}".format(*header))
    for n in args.ns:
        generator = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(1, 12, n, 64, generator=generator) for _ in range(3))
        runs = {
            "sdpa": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, scale=SCALE),
            "top-k tiled": lambda q=q, k=k, v=v: adaptive_sparse_attention(
                module, q, k, v, None, scaling=SCALE
            )[0],
        }
        if n <= args.full_max:
            runs["full matrix"] = lambda q=q, k=k, v=v: full_matrix(q, k, v, top_k, SCALE)
        peaks, times = {name: [] for name in runs}, {name: [] for name in runs}
        with torch.no_grad():
            for run in runs.values():
                run()
            for _ in range(args.memory_repeats):
                for name, run in runs.items():
                    with PeakMemory(torch.device("cpu")) as memory:
                        run()
                    peaks[name].append(memory.peak_mb)
            for _ in range(args.repeats):
                for name, run in runs.items():
                    start = time.perf_counter()
                    run()
                    times[name].append(time.perf_counter() - start)
        for name in runs:
            speed = [base / seconds for base, seconds in zip(times["sdpa"], times[name], strict=True)]
            memory = [peak / base for base, peak in zip(peaks["sdpa"], peaks[name], strict=True)]
            median = statistics.median
            print(
                f"{n:>6} {name:<12} {median(times[name]):>9.4f} {_spread(times[name], 4):>16}"
                f" {median(speed):>9.2f}× {_spread(speed, 2):>11} {median(peaks[name]):>8.1f}"
                f" {median(memory):>7.2f}× {_spread(memory, 2):>11}"
            )


def _spread(numbers: list[float], digits: int) -> str:
    return f"{min(numbers):.{digits}f}–{max(numbers):.{digits}f}"


def train_step(n: int, repeats: int) -> None:
    """Forward + backward of one layer at length N, B = 32: SDPA (the module `none`), tiled, full matrix."""
    top_k = AdaptiveSparseConfig().top_k
    module = torch.nn.Module()
    module.is_causal = False
    module.adaptive_sparse = AdaptiveSparseState(top_k)
    module.train()
    generator = torch.Generator().manual_seed(n)
    leaves = [torch.randn(32, 12, n, 64, generator=generator).requires_grad_() for _ in range(3)]
    grad = torch.randn(32, n, 12, 64, generator=generator)

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=SCALE).transpose(1, 2)

    impls = {
        "sdpa (none)": sdpa,
        "top-k tiled": lambda q, k, v: adaptive_sparse_attention(module, q, k, v, None, scaling=SCALE)[0],
        "full matrix": lambda q, k, v: full_matrix(q, k, v, top_k, SCALE),
    }
    times = {name: [] for name in impls}
    for round_ in range(repeats + 1):  # the first round warms up
        for name, attend in impls.items():
            for leaf in leaves:
                leaf.grad = None
            start = time.perf_counter()
            attend(*leaves).backward(grad)
            if round_:
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["sdpa (none)"])
    print(f"training step, one layer, B=32 H=12 N={n} D=64 top_k={top_k} threads={torch.get_num_threads()}")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        spread = f"{min(seconds):.4f}–{max(seconds):.4f}"
        print(f"{name:<12} {median:.4f} s ({spread}), {median / base:.2f}× SDPA's time")


if __name__ == "__main__":
    main()
