"""The memo of `summary --hub` (`HubSummaryOptions.memo`): which runs a leaderboard checked again re-checks.
A run's key is its tag with the tags of the dense runs its paired verdict names, and nothing else: a dense run
pushed again re-checks itself and the runs compared with it, not every run of its model and task (what
tests/bench/bench_space_scale.py measures over 200 runs)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from attncard.pipeline.study.hub_leaderboard import _Memo


def staged(name: str, tag: str, baselines: tuple[str, ...] | None = None) -> SimpleNamespace:
    """What `_Memo.key` reads of a staged run: its repository, copy, tag, and the dense runs its verdict
    names (None: a dense run, no verdict)."""
    comparison = None
    if baselines is not None:
        comparison = SimpleNamespace(baselines=[SimpleNamespace(repo_name=dense) for dense in baselines])
    results = SimpleNamespace(comparison=comparison)
    return SimpleNamespace(
        repo_id=f"org/{name}",
        folder=Path("board") / name,
        tag=tag,
        checked=SimpleNamespace(read=lambda: results),
    )


def keys(runs: list[SimpleNamespace]) -> dict[str, str]:
    memo = _Memo({})
    return {run.repo_id: memo.key(run, runs) for run in runs}


def test_a_changed_dense_run_changes_its_key_and_those_of_the_runs_compared_with_it_only() -> None:
    dense = [staged("none-seed0", "run-a"), staged("none-seed1", "run-b")]
    module = [staged("span-seed0", "run-c", ("none-seed0",)), staged("span-seed1", "run-d", ("none-seed1",))]
    before = keys([*dense, *module])
    changed = staged("none-seed0", "run-a2")
    after = keys([changed, dense[1], *module])
    assert {run for run in before if before[run] != after[run]} == {"org/none-seed0", "org/span-seed0"}
    assert after["org/span-seed0"] == "org/span-seed0@run-c:none-seed0@run-a2"
    assert after["org/none-seed1"] == "org/none-seed1@run-b:"


def test_a_pooled_verdict_keys_every_dense_run_it_names_and_a_missing_one_changes_the_key() -> None:
    dense = [staged("none-seed0", "run-a"), staged("none-seed1", "run-b")]
    pooled = staged("span-pooled", "run-p", ("none-seed1", "None-Seed0"))  # any case, as a disk may find it
    assert (
        keys([*dense, pooled])["org/span-pooled"] == "org/span-pooled@run-p:none-seed0@run-a,none-seed1@run-b"
    )
    assert keys([dense[1], pooled])["org/span-pooled"] == "org/span-pooled@run-p:none-seed1@run-b"
