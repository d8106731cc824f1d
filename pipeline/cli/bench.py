"""`attncard bench attention [--ns …] [--repeats K] [--json FILE] [--markdown FILE]`: time and peak memory of
banded attention against dense attention (`pipeline.study.bench`), K interleaved samples per implementation,
printed as a Markdown table with medians, min–max and speed-up ranges. torch and the kernels are imported when
the command runs: `--help` and argument errors answer without them."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from ..record.environment import EnvironmentRecord
from .common import run_command

DESCRIPTION = "Time and peak memory of banded attention against dense attention."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard bench attention`."""
    parser.add_argument("benchmark", choices=["attention"], help="what to measure: banded attention kernels")
    parser.add_argument("--ns", default="512,1024,2048,4096,8192,16384", help="comma-separated, may be empty")
    parser.add_argument("--span", type=int, default=64, help="window of every head (forward)")
    parser.add_argument("--batch", type=int, default=1, help="rows per pass (B of the shape B, H, N, D)")
    parser.add_argument("--heads", type=int, default=12, help="attention heads (H)")
    parser.add_argument("--head-dim", type=int, default=64, help="channels per head (D)")
    parser.add_argument(  # default: the benchmark's DEFAULT_REPEATS, read when it runs
        "--repeats", type=int, default=None, help="timed samples per implementation and point"
    )
    parser.add_argument("--backward-n", type=int, default=4096, help="0 skips forward + backward")
    parser.add_argument(
        "--backward-span", type=int, default=128, help="largest span of a head in forward + backward"
    )
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default=None, help="where to run (default: cuda if there is one)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", metavar="FILE", help="write the records to FILE as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="write the table to FILE as Markdown")


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _bench(args))


def _bench(args: argparse.Namespace) -> int:
    import torch

    from ..study.bench import DEFAULT_REPEATS, format_table, run_attention_benchmark

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    provenance = measured_with(device, args)
    print(provenance, flush=True)
    records = run_attention_benchmark(
        ns=[int(n) for n in args.ns.split(",") if n],
        span=args.span,
        batch=args.batch,
        heads=args.heads,
        head_dim=args.head_dim,
        repeats=DEFAULT_REPEATS if args.repeats is None else args.repeats,
        backward_n=args.backward_n or None,
        backward_span=args.backward_span,
        device=device,
    )
    table = format_table(records)
    print(table)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(records, out, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(f"{provenance}\n\n{table}\n")
    return 0


def measured_with(device: str, args: argparse.Namespace) -> str:
    """The table's first line: the machine, torch and attncard it was measured with, and the day."""
    import torch

    from ..run.evaluate import device_name

    processor = device_name(torch.device(device))
    if device == "cpu":  # torch's vector kernels (AVX2, AVX512, …), which the compiled kernels follow
        processor += f", {torch.backends.cpu.get_cpu_capability()}"
    environment = EnvironmentRecord.capture()  # attncard's version and commit, found as a run records them
    return (
        f"Device {device} ({processor}), torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"B={args.batch} H={args.heads} D={args.head_dim}; attncard {environment.attncard_version} at commit "
        f"{environment.git_commit}, {datetime.now(UTC):%Y-%m-%d}."
    )
