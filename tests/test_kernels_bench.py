"""The attention benchmark: a quick smoke run by default, the full measurement under ``-m benchmark``."""

from __future__ import annotations

import json

import pytest

from attncard.modules.kernels import bench
from attncard.modules.kernels.bench import format_table, run_attention_benchmark
from attncard.pipeline.cli import main


def test_benchmark_records_and_table(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "MIN_TIMED_SECONDS", 0.0)  # one timed call each is enough here
    records = run_attention_benchmark(
        ns=(64, 128), span=8, heads=2, head_dim=16, repeats=1, backward_n=128, backward_span=16
    )
    measured = {(r["mode"], r["n"], r["impl"]) for r in records}
    assert measured == {
        *{("forward", n, impl) for n in (64, 128) for impl in ("sdpa_dense", "dense_reference", "banded")},
        ("forward_backward", 128, "dense_bias"),
        ("forward_backward", 128, "banded"),
    }
    assert all(r["seconds"] > 0 for r in records)
    table = format_table(records)
    assert "banded" in table and "speed-up" in table

    out = tmp_path / "bench.json"
    assert (
        main(
            [
                "bench",
                "attention",
                "--ns",
                "64",
                "--span",
                "4",
                "--heads",
                "2",
                "--head-dim",
                "8",
                "--repeats",
                "1",
                "--backward-n",
                "0",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert {r["impl"] for r in json.loads(out.read_text())} == {"sdpa_dense", "dense_reference", "banded"}


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
