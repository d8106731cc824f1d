"""`attncard sweep --executor ray` on a real Ray cluster: two nodes on this machine (`ray start --head` and
`ray start --address`, one CPU each, separate processes) run the tiny study of test_sweep.py (two modules,
two seeds), the dense runs first; a worker killed in the middle of a run is retried and the sweep still
ends with every run done; one run writes the same predictions.csv, byte for byte, with either executor (on
a Ray instance the sweep starts itself); the Hub token reaches a run, which pushes with it, without
entering any file of Ray or of the sweep."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from attncard.pipeline.cli import main
from attncard.pipeline.record.results import Results
from conftest import HUB_USER, check_same_predictions, sweep_in_process, write_study_files

pytest.importorskip("ray", reason="ray is not installed: pip install 'attncard[ray]'")

pytestmark = pytest.mark.slow  # each test starts Ray and trains in its workers: minutes

MODULE = "svd_lowrank"
SEEDS = (0, 1)
STEPS = 2
RAY = Path(sys.executable).parent / "ray"
NAMES = [f"bert-{module}-sst2-seed{seed}" for module in ("none", MODULE) for seed in SEEDS]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _session_processes(leader: int) -> list[int]:
    """The live processes of the session `leader` started (`ray start` and every process Ray started under
    it); the ended ones left unreaped (state Z) are not waited on."""
    listing = subprocess.run(["ps", "-eo", "pid=,sid=,stat="], capture_output=True, text=True, check=True)
    rows = (line.split() for line in listing.stdout.splitlines())
    return [int(pid) for pid, sid, state in rows if int(sid) == leader and not state.startswith("Z")]


def _stop(processes: list[subprocess.Popen]) -> None:
    """Ends each `ray start --block` and what it started, by the ids of its session: TERM, then KILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for process in processes:
            for pid in _session_processes(process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_session_processes(p.pid) for p in processes):
            time.sleep(0.2)
    for process in processes:
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def ray_root(tmp_path_factory) -> Path:
    """The folder of the cluster's nodes: their temp dirs (`h/`, `w/`, with every log Ray writes) and the
    output of `ray start`.

    Short folder names: Ray's sockets live in its temp dir, and a Unix socket's path has at most 107 bytes."""
    return tmp_path_factory.mktemp("r")


@pytest.fixture
def hub_token() -> str:
    """A token of this test's own for the `hub` fixture: bytes no file may hold by chance."""
    return f"hf_sweep_{secrets.token_hex(16)}"


@pytest.fixture(scope="module")
def cluster(ray_root) -> Iterator[str]:
    """The address of a Ray cluster of two nodes of one CPU each, on this machine; stopped at the end."""
    root = ray_root
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--disable-usage-stats", "--block"]
    processes: list[subprocess.Popen] = []
    try:
        for name, where in (("h", ["--head", f"--port={port}", "--include-dashboard=false"]), ("w", [])):
            where = where or [f"--address={address}"]
            with (root / f"{name}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [str(RAY), "start", *where, *common, f"--temp-dir={root / name}"],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its own session: torn down by its ids, nothing else
                    )
                )
            _wait_for_nodes(address, len(processes), root)
        yield address
    finally:
        _stop(processes)


def _wait_for_nodes(address: str, count: int, root: Path) -> None:
    deadline = time.monotonic() + 120
    status = ""
    while time.monotonic() < deadline:
        shown = subprocess.run(
            [str(RAY), "status", f"--address={address}"], capture_output=True, text=True, check=False
        )
        status = shown.stdout
        active = status.split("Active:", 1)[-1].split("Pending:", 1)[0]
        if shown.returncode == 0 and active.count("node_") == count:
            return
        time.sleep(1)
    logs = "\n".join(path.read_text(errors="replace")[-2000:] for path in sorted(root.glob("*.log")))
    pytest.fail(f"the Ray cluster did not come up with {count} nodes:\n{status}\n{logs}")


@pytest.fixture(scope="module")
def study_files(tiny_model_dir, tmp_path_factory) -> tuple[Path, Path]:
    """`(matrix, glue)`: the tiny study's matrix (the module row first) and its GLUE folder."""
    return write_study_files(tmp_path_factory.mktemp("study"), tiny_model_dir("bert"), MODULE, SEEDS, STEPS)


def test_the_study_runs_on_a_two_node_cluster_the_dense_runs_first(cluster, study_files, tmp_path):
    matrix, glue = study_files
    runs = tmp_path / "runs"
    code, out, err = sweep_in_process(matrix, glue, runs, "--executor", "ray", "--address", cluster)
    assert code == 0, err[-3000:]
    lines = out.splitlines()
    assert lines[-1] == "4 runs: 4 ran, 0 skipped, 0 failed", out
    assert [line.split()[:2] for line in lines[:-1]] == [["ran", f"{name}:"] for name in NAMES], (
        out
    )  # in order
    assert "sweep: 100%" in err  # one progress bar on the driver
    results = {name: Results.load(runs / name) for name in NAMES}
    for seed in SEEDS:
        dense, module = results[f"bert-none-sst2-seed{seed}"], results[f"bert-{MODULE}-sst2-seed{seed}"]
        assert module.started_at >= dense.finished_at  # it waited on its dense run's task
        assert [b.repo_name for b in module.comparison.baselines] == [f"bert-none-sst2-seed{seed}"]
    for name in NAMES:
        log = (runs / f"{name}.sweep.log").read_text(encoding="utf-8")
        started = re.findall(rf"^{name}: started on (\S+), process \d+$", log, re.MULTILINE)
        assert len(started) == 1 and f"{name}: training (" in log, log
    # A second sweep finds every run finished: nothing is trained again.
    code, out, err = sweep_in_process(matrix, glue, runs, "--executor", "ray", "--address", cluster)
    assert code == 0 and out.splitlines()[-1] == "4 runs: 0 ran, 4 skipped, 0 failed", err[-3000:]
    assert "skipped, finished before" in (runs / f"{NAMES[0]}.sweep.log").read_text(encoding="utf-8")


def test_a_worker_killed_in_the_middle_of_a_run_is_retried_and_the_sweep_ends(
    cluster, study_files, tmp_path, capsys
):
    matrix, glue = study_files
    runs, cards = tmp_path / "runs", tmp_path / "cards"
    victim = f"bert-{MODULE}-sst2-seed0"
    log = runs / f"{victim}.sweep.log"
    killed: list[int] = []

    def kill_the_worker() -> None:
        """Waits for the run to start, reads its worker's process id from its log, and kills that process."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not killed:
            found = re.search(r"started on \S+, process (\d+)", log.read_text()) if log.exists() else None
            if found:
                time.sleep(0.5)  # into the run: its model is loading or training
                os.kill(int(found[1]), signal.SIGKILL)
                killed.append(int(found[1]))
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_worker, daemon=True)
    killer.start()
    code, out, err = sweep_in_process(
        matrix, glue, runs, "--executor", "ray", "--address", cluster, "--cards", str(cards)
    )
    killer.join(timeout=5)
    assert killed, "the run's worker was never found"
    assert code == 0 and out.splitlines()[-1] == "4 runs: 4 ran, 0 skipped, 0 failed", err[-3000:]
    attempts = re.findall(r"started on \S+, process (\d+)", log.read_text(encoding="utf-8"))
    assert len(attempts) == 2 and int(attempts[0]) == killed[0] and attempts[1] != attempts[0], attempts
    assert Results.load(runs / victim).verification.n > 0
    assert main(["summary", str(cards)]) == 0  # the leaderboard of the four runs
    assert "4 runs in 2 groups" in capsys.readouterr().out
    assert (cards / "README.md").is_file()


def test_a_run_gives_the_same_predictions_with_either_executor(study_files, tmp_path):
    """On a Ray instance the sweep starts itself (no --address), as on a laptop: the run trains on its one
    torch thread in the Ray task and in the sweep's own process alike, so every logit is the same."""
    check_same_predictions(*study_files, tmp_path, "bert-none-sst2-seed0", "--executor", "ray")


def test_the_hub_token_reaches_the_run_without_entering_any_file_of_ray_or_the_sweep(
    cluster, ray_root, study_files, tmp_path, hub, hub_token
):
    """Ray's runtime-env agent logs the `env_vars` of a runtime env on every node: the token must not be one
    of them. The run pushes to the loopback Hub, which accepts only this token: the worker had it."""
    matrix, glue = study_files
    runs, name = tmp_path / "runs", "bert-none-sst2-seed0"
    code, out, err = sweep_in_process(
        matrix, glue, runs, "--executor", "ray", "--address", cluster, "--only", name,
        "--hub-org", HUB_USER, "--push", "--allow-fail",  # 2 steps: FAIL, pushed all the same
    )  # fmt: skip
    assert code == 0 and out.splitlines()[-1] == "1 run: 1 ran, 0 skipped, 0 failed", (out, err[-3000:])
    assert hub.commits(f"{HUB_USER}/{name}"), "the run was not pushed"
    files = [path for root in (ray_root, runs) for path in root.rglob("*") if path.is_file()]
    # The search looks where the environment of a task lands: the runtime env (HF_ENDPOINT is in it) is there.
    assert any(hub.endpoint.encode() in path.read_bytes() for path in files if "runtime_env" in path.name)
    leaked = [str(path) for path in files if hub_token.encode() in path.read_bytes()]
    assert leaked == [], leaked
    assert not [path for path in runs.iterdir() if path.name.startswith(".attncard-token")]  # removed
