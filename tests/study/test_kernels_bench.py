"""The attention benchmark: a quick smoke run by default, the full measurement under ``-m benchmark``."""

from __future__ import annotations

import json
import re

import pytest
import torch

from attncard.modules.kernels import banded_cpu
from attncard.pipeline.cli import main
from attncard.pipeline.study import bench
from attncard.pipeline.study.bench import format_table, run_attention_benchmark

FORWARD_IMPLS = ("sdpa_dense", "sdpa_fused", "dense_reference", "banded", "banded_torch")
# What the dispatcher runs forward on the CPU: the compiled kernel where it builds (ours and CI's machines).
FORWARD_KERNEL = "compiled" if banded_cpu.banded_kernel() is not None else "sdpa"


def test_benchmark_records_and_table(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "MIN_SAMPLE_SECONDS", 0.0)  # one call per sample is enough here
    records = run_attention_benchmark(
        ns=(64, 128), span=8, heads=2, head_dim=16, repeats=3, backward_n=128, backward_span=16
    )
    measured = {(r["mode"], r["n"], r["impl"]) for r in records}
    assert measured == {
        *{("forward", n, impl) for n in (64, 128) for impl in FORWARD_IMPLS},
        ("forward_backward", 128, "dense_bias"),
        ("forward_backward", 128, "banded"),
    }
    baselines = {(r["mode"], r["n"]): r for r in records if r["impl"] in ("sdpa_dense", "dense_bias")}
    fused_rows = {r["n"]: r for r in records if r["impl"] == "sdpa_fused"}
    for r in records:
        assert r["repeats"] == 3
        assert 0 < r["seconds_min"] <= r["seconds"] <= r["seconds_max"]
        base = baselines[r["mode"], r["n"]]
        if r is base:
            assert "speedup" not in r and "memory_ratio" not in r
            continue
        assert r["speedup"] == pytest.approx(base["seconds"] / r["seconds"])
        assert r["speedup_low"] == pytest.approx(base["seconds_min"] / r["seconds_max"])
        assert r["speedup_high"] == pytest.approx(base["seconds_max"] / r["seconds_min"])
        assert r["speedup_low"] <= r["speedup"] <= r["speedup_high"]
        if r["peak_mb"] is not None and base["peak_mb"]:
            assert r["memory_ratio"] == pytest.approx(r["peak_mb"] / base["peak_mb"])
        fused = fused_rows.get(r["n"]) if r["mode"] == "forward" else None
        if fused is None or r is fused:
            assert "fused_memory_ratio" not in r
        elif r["peak_mb"] is not None and fused["peak_mb"]:
            assert r["fused_memory_ratio"] == pytest.approx(r["peak_mb"] / fused["peak_mb"])

    banded = {(r["mode"], r["n"]): r for r in records if r["impl"] == "banded"}
    # Dense pairs over band pairs: N² / (N(2W + 1) - W(W + 1)) with every head at W = 8.
    for n in (64, 128):
        assert banded["forward", n]["compute_limit"] == pytest.approx(n * n / (n * 17 - 8 * 9))
        assert banded["forward", n]["kernel"] == FORWARD_KERNEL
    # Forward + backward: windows ceil(linspace(16/2, 16, 2)) = (8, 16), and distance_bias needs its gradient.
    step = banded["forward_backward", 128]
    assert step["kernel"] == "torch"
    assert step["compute_limit"] == pytest.approx(2 * 128**2 / ((128 * 17 - 8 * 9) + (128 * 33 - 16 * 17)))

    table = format_table(records)
    assert table.startswith("| mode | N |") and "speed-up (range)" in table
    assert f"| banded | {FORWARD_KERNEL} |" in table
    assert table.splitlines()[0].endswith("| memory ratio | memory vs fused |")

    out, markdown = tmp_path / "bench.json", tmp_path / "bench.md"
    arguments = ["--ns", "64", "--span", "4", "--heads", "2", "--head-dim", "8", "--repeats", "2"]
    command = ["bench", "attention", *arguments, "--backward-n", "0", "--json", str(out)]
    assert main([*command, "--markdown", str(markdown)]) == 0
    written = json.loads(out.read_text())
    assert {r["impl"] for r in written} == set(FORWARD_IMPLS)
    assert all(r["repeats"] == 2 for r in written)
    written_table = markdown.read_text()
    assert f"| forward | 64 | 4 | banded | {FORWARD_KERNEL} |" in written_table
    # Its first line says where and with what it was measured: the figures' provenance lives in the file.
    provenance = written_table.splitlines()[0]
    assert provenance.startswith("Device cpu (") and f"torch {torch.__version__}," in provenance
    commit = r"([0-9a-f]{40}(\+dirty)?|unknown)"
    assert re.search(rf"; attncard \S+ at commit {commit}, \d{{4}}-\d\d-\d\d\.$", provenance), provenance


@pytest.mark.benchmark
def test_attention_benchmark(tmp_path):
    """N = 512..16384, span 64, B=1, H=12, D=64, plus forward + backward at N=4096 with spans <= 128.

    Timings are printed, never asserted. Asserted: the banded kernel's peak memory grows linearly in N.
    """
    records = run_attention_benchmark()
    print()
    print(format_table(records))
    (tmp_path / "bench_attention.json").write_text(json.dumps(records, indent=2))

    banded = {r["n"]: r["peak_mb"] for r in records if r["mode"] == "forward" and r["impl"] == "banded"}
    if banded[4096] is not None and banded[16384] is not None:
        assert banded[16384] < 6 * banded[4096]  # linear: 4x; quadratic would be 16x
    fused = {r["n"]: r.get("fused_memory_ratio") for r in records if r["impl"] == "banded" and r["n"] >= 1024}
    print("banded peak / unmasked fused SDPA peak, N >= 1024:", fused)


def test_each_round_of_samples_starts_one_implementation_later(monkeypatch):
    # The call after another implementation's ran a little faster (see pipeline/run/scaling.py's
    # measure_pair): in rotated rounds none of them always runs first, or always after the same other one.
    calls = []
    monkeypatch.setattr(bench, "_timed", lambda run, device, calls=1: run() or 1.0)
    runs = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    measured = bench._measure_interleaved(runs, "cpu", repeats=4)
    rounds = calls[3 * 2 :]  # after each one's warm-up and memory calls
    assert rounds == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    assert {impl: figures["repeats"] for impl, figures in measured.items()} == {"a": 4, "b": 4, "c": 4}
