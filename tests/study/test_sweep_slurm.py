"""`attncard sweep --executor slurm` on a real Slurm cluster: a single node on this machine (`.ci/slurm-up`,
slurm-wlm and munge, one fake GPU) runs the tiny study of test_sweep.py (two modules, two seeds), the dense
runs first as one job array and each module run after its dense run's job; a dense run's job killed in the
middle of its run is submitted again with its module run, and the sweep ends with every run done; with
`--retries 0` a killed run is reported failed and the others go on; a run that asks for a GPU is granted one
and has the driver's environment; the jobs still waited on are cancelled when the sweep is closed; Slurm's
refusal is one line before anything is submitted; one run gives the same predictions as with the local
executor; the Hub token reaches a job, which pushes with it, without entering any file of Slurm or of the
sweep."""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from attncard.pipeline.cli import main
from attncard.pipeline.record.results import Results
from attncard.pipeline.study import sweep_slurm
from attncard.pipeline.study.matrix import read_matrix
from attncard.pipeline.study.plan import SweepSettings, plan_sweep
from attncard.pipeline.study.sweep_slurm import run_sweep_slurm
from conftest import HUB_USER, REPO_ROOT, check_same_predictions, sweep_in_process, write_study_files

pytest.importorskip("submitit", reason="submitit is not installed: pip install 'attncard[slurm]'")

pytestmark = pytest.mark.slow  # each test submits jobs that import everything and train: a minute or more

MODULE = "svd_lowrank"
SEEDS = (0, 1)
STEPS = 2
NAMES = [f"bert-{module}-sst2-seed{seed}" for module in ("none", MODULE) for seed in SEEDS]
SLURM_PROGRAMS = ("slurmctld", "slurmd", "munged", "sbatch")


def _install_slurm() -> None:
    """slurm-wlm and munge from apt, when they are missing and this is root with apt; else a skip."""
    if all(shutil.which(program) for program in SLURM_PROGRAMS):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        packages = ("install", "-y", "slurm-wlm", "munge")
        if not _apt_get(*packages):  # the package lists, then again
            _apt_get("update") and _apt_get(*packages)
    if not all(shutil.which(program) for program in SLURM_PROGRAMS):
        pytest.skip("no Slurm here: apt-get install slurm-wlm munge (as root) to run the Slurm tests")


def _apt_get(*arguments: str) -> bool:
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", *arguments], env=environment, capture_output=True, timeout=900)
    return done.returncode == 0


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Iterator[Path]:
    """A single-node Slurm cluster with one fake GPU, its folder; `SLURM_CONF` points at it meanwhile."""
    _install_slurm()
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root (.ci/slurm-up): run the Slurm tests as root")
    root = tmp_path_factory.mktemp("slurm")
    with pytest.MonkeyPatch.context() as patch:
        try:
            up = subprocess.run(
                [str(REPO_ROOT / ".ci" / "slurm-up"), str(root), "1"],
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            assert up.returncode == 0, up.stdout + up.stderr
            patch.setenv("SLURM_CONF", str(root / "slurm.conf"))
            yield root
        finally:
            subprocess.run([str(REPO_ROOT / ".ci" / "slurm-down"), str(root)], timeout=120, check=False)


@pytest.fixture
def hub_token() -> str:
    """A token of this test's own for the `hub` fixture: bytes no file may hold by chance."""
    return f"hf_sweep_{secrets.token_hex(16)}"


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch) -> None:
    """The driver looks at the jobs often, and takes an ended job without a result file as lost at once."""
    monkeypatch.setattr(sweep_slurm, "POLL_SECONDS", 0.5)
    monkeypatch.setattr(sweep_slurm, "RESULT_GRACE_SECONDS", 1.0)


@pytest.fixture(scope="module")
def study_files(tiny_model_dir, tmp_path_factory) -> tuple[Path, Path, Path]:
    """`(matrix, glue, model)`: the tiny study's matrix (the module row first), its GLUE folder, its model."""
    model = tiny_model_dir("bert")
    return *write_study_files(tmp_path_factory.mktemp("study"), model, MODULE, SEEDS, STEPS), model


def _jobs(err: str) -> dict[str, list[str]]:
    """Each run's jobs, in the order the driver submitted them, from its progress on stderr."""
    jobs: dict[str, list[str]] = {}
    for name, job in re.findall(r"^(\S+): .*?submitted (?:again )?as job (\d+(?:_\d+)?)", err, re.MULTILINE):
        jobs.setdefault(name, []).append(job)
    return jobs


def _attempts(runs: Path, name: str) -> list[int]:
    """The processes each attempt of a run ran in, from its log."""
    log = runs / f"{name}.sweep.log"
    return [int(pid) for pid in re.findall(r"started on \S+, process (\d+)", log.read_text(encoding="utf-8"))]


class Killer:
    """Kills the process of one run's first attempt (SIGKILL: the job ends without a result), once started."""

    def __init__(self, runs: Path, victim: str) -> None:
        self.runs, self.victim, self.killed = runs, victim, []
        self.thread = threading.Thread(target=self._kill, daemon=True)
        self.thread.start()

    def _kill(self) -> None:
        log = self.runs / f"{self.victim}.sweep.log"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not self.killed:
            found = re.search(r"started on \S+, process (\d+)", log.read_text()) if log.exists() else None
            if found:
                time.sleep(0.5)  # into the run: its model is loading or training
                os.kill(int(found[1]), signal.SIGKILL)
                self.killed.append(int(found[1]))
            time.sleep(0.05)

    def join(self) -> int:
        self.thread.join(timeout=5)
        assert self.killed, f"the job of {self.victim} was never found running"
        return self.killed[0]


def test_the_study_runs_as_slurm_jobs_the_dense_runs_first_as_one_array(slurm, study_files, tmp_path, capsys):
    matrix, glue, _ = study_files
    runs, cards = tmp_path / "runs", tmp_path / "cards"
    code, out, err = sweep_in_process(matrix, glue, runs, "--executor", "slurm", "--cards", str(cards))
    assert code == 0, err[-3000:]
    lines = out.splitlines()
    assert lines[-1] == "4 runs: 4 ran, 0 skipped, 0 failed", out
    assert [line.split()[:2] for line in lines[:-1]] == [["ran", f"{name}:"] for name in NAMES], out
    assert "sweep: 100%" in err
    jobs = _jobs(err)
    dense_jobs = [jobs[f"bert-none-sst2-seed{seed}"][0] for seed in SEEDS]
    array = dense_jobs[0].split("_")[0]
    assert dense_jobs == [f"{array}_0", f"{array}_1"], jobs  # one job array
    results = {name: Results.load(runs / name) for name in NAMES}
    for seed in SEEDS:
        dense, module = results[f"bert-none-sst2-seed{seed}"], results[f"bert-{MODULE}-sst2-seed{seed}"]
        assert module.started_at >= dense.finished_at  # afterok: it waited on its dense run's job
        assert [b.repo_name for b in module.comparison.baselines] == [f"bert-none-sst2-seed{seed}"]
        submission = _submission(runs, jobs[f"bert-{MODULE}-sst2-seed{seed}"][0])
        assert f"--dependency=afterok:{dense_jobs[SEEDS.index(seed)]}\n" in submission, submission
        assert "--kill-on-invalid-dep=yes\n" in submission and "--export=ALL\n" in submission, submission
    for name in NAMES:
        assert len(_attempts(runs, name)) == 1
        assert f"{name}: training (" in (runs / f"{name}.sweep.log").read_text(encoding="utf-8")
    assert main(["summary", str(cards)]) == 0  # the leaderboard of the four runs
    assert "4 runs in 2 groups" in capsys.readouterr().out
    assert (cards / "README.md").is_file()
    # A second sweep finds every run finished: nothing is trained again.
    code, out, err = sweep_in_process(matrix, glue, runs, "--executor", "slurm")
    assert code == 0 and out.splitlines()[-1] == "4 runs: 0 ran, 4 skipped, 0 failed", err[-3000:]


def _submission(runs: Path, job: str) -> str:
    """The sbatch script submitit wrote for a job."""
    return (runs / ".slurm" / job / f"{job}_submission.sh").read_text(encoding="utf-8")


def _scontrol(job: str) -> str:
    shown = subprocess.run(
        ["scontrol", "-d", "show", "job", job], capture_output=True, text=True, check=False
    )
    return shown.stdout + shown.stderr


def test_a_dense_run_killed_mid_run_is_submitted_again_with_its_module_run(slurm, study_files, tmp_path):
    matrix, glue, _ = study_files
    runs = tmp_path / "runs"
    victim, module = "bert-none-sst2-seed0", f"bert-{MODULE}-sst2-seed0"
    killer = Killer(runs, victim)
    code, out, err = sweep_in_process(matrix, glue, runs, "--executor", "slurm")
    killed = killer.join()
    assert code == 0 and out.splitlines()[-1] == "4 runs: 4 ran, 0 skipped, 0 failed", err[-3000:]
    attempts = _attempts(runs, victim)
    assert len(attempts) == 2 and attempts[0] == killed, attempts
    jobs = _jobs(err)
    assert len(jobs[victim]) == 2 and len(jobs[module]) == 2, jobs  # the module run went along
    assert re.search(rf"^{victim}: job {jobs[victim][0]} \w+ without a result; submitted again", err, re.M), (
        err
    )
    dense, after = Results.load(runs / victim), Results.load(runs / module)
    assert after.started_at >= dense.finished_at
    assert len(_attempts(runs, module)) == 1  # its first job was cancelled before it started


def test_with_no_retries_a_killed_run_fails_and_the_others_go_on(slurm, study_files, tmp_path):
    matrix, glue, _ = study_files
    runs = tmp_path / "runs"
    victim = f"bert-{MODULE}-sst2-seed1"
    killer = Killer(runs, victim)
    code, out, err = sweep_in_process(matrix, glue, runs, "--executor", "slurm", "--retries", "0")
    killer.join()
    assert code == 1, err[-3000:]
    assert out.splitlines()[-1] == "4 runs: 3 ran, 0 skipped, 1 failed", out
    job = _jobs(err)[victim][0]
    assert re.search(rf"^failed +{victim}: job {job} \w+ without a result, 0 retries used$", out, re.M), out
    assert f"{victim}: job {job}" in err  # also one line on stderr as it happens
    assert not (runs / victim / "results.json").exists()


def test_a_run_that_asks_for_a_gpu_is_granted_one_and_has_the_environment(
    slurm, study_files, tmp_path, monkeypatch, capsys
):
    """The GLUE folder only as $GLUE_DIR, not --data-dir: the job finds it in the environment it was given."""
    _, glue, model = study_files
    matrix = tmp_path / "gpu.yaml"
    matrix.write_text(
        f"runs:\n  - {{model: '{model}', module: none, task: sst2, steps: 1, resources: {{gpus: 1}}}}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("GLUE_DIR", str(glue))
    argv = ["sweep", str(matrix), "--batch-size", "4", "--output", str(tmp_path / "runs")]
    assert main([*argv, "--executor", "slurm", "--time-limit", "10"]) == 0
    err = capsys.readouterr().err.replace("\r", "\n")
    (job,) = _jobs(err)["bert-none-sst2-seed0"]
    shown = _scontrol(job)
    assert re.search(r"\bJOB_GRES=gpu:1\b|\bTresPerNode=\S*gpu:1\b", shown), shown
    assert "TimeLimit=00:10:00" in shown, shown


def test_closing_the_sweep_cancels_the_jobs_it_still_waits_for(slurm, study_files, tmp_path, caplog):
    matrix, glue, _ = study_files
    runs = plan_sweep(read_matrix(matrix))
    settings = SweepSettings(output=tmp_path / "runs", data_dir=glue, batch_size=4)
    with caplog.at_level(logging.INFO, logger="attncard.pipeline.study.sweep_slurm"):
        executed = run_sweep_slurm(runs, settings, time_limit_minutes=10)
        first = next(executed)  # a dense run; the module runs wait on their dense runs' jobs
        executed.close()  # as Ctrl-C does
    assert first.run.module == "none" and first.state == "ran"
    jobs = _jobs("\n".join(caplog.messages))
    modules = [jobs[f"bert-{MODULE}-sst2-seed{seed}"][0] for seed in SEEDS]
    deadline, states = time.monotonic() + 60, {}
    while time.monotonic() < deadline:
        listed = subprocess.run(
            ["squeue", "--me", "--states=all", "--noheader", "--format=%i %T"], capture_output=True, text=True
        )
        states = dict(line.split() for line in listed.stdout.splitlines())
        if all(states.get(job) == "CANCELLED" for job in modules):
            return
        time.sleep(0.5)
    pytest.fail(f"the module runs' jobs {modules} were not cancelled: {states}")


def test_slurm_refuses_a_job_before_anything_is_submitted(slurm, study_files, tmp_path):
    matrix, glue, _ = study_files
    code, _, err = sweep_in_process(
        matrix, glue, tmp_path / "runs", "--executor", "slurm", "--partition", "nowhere"
    )
    assert code == 2 and err.count("\n") == 1 and "Slurm refuses its job (" in err and "partition" in err, err
    assert not (tmp_path / "runs").exists()
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text(
        matrix.read_text().replace("steps: 2}", "steps: 2, resources: {gpus: 4}}"), encoding="utf-8"
    )
    code, _, err = sweep_in_process(gpus, glue, tmp_path / "runs", "--executor", "slurm")
    assert code == 2 and "Slurm refuses its job (" in err and "--gpus-per-node=4" in err, err


def test_a_run_gives_the_same_predictions_with_either_executor(slurm, study_files, tmp_path):
    matrix, glue, _ = study_files
    check_same_predictions(matrix, glue, tmp_path, "bert-none-sst2-seed0", "--executor", "slurm")


def test_the_hub_token_reaches_the_job_without_entering_any_file_of_slurm_or_the_sweep(
    slurm, study_files, tmp_path, hub, hub_token
):
    """sbatch exports its environment into the job and slurmctld keeps it (its state folder holds each job's
    environment): the token must not be in it. The run pushes to the loopback Hub, which accepts only this
    token: the job had it."""
    matrix, glue, _ = study_files
    runs, name = tmp_path / "runs", "bert-none-sst2-seed0"
    code, out, err = sweep_in_process(
        matrix, glue, runs, "--executor", "slurm", "--only", name,
        "--hub-org", HUB_USER, "--push", "--allow-fail",  # 2 steps: FAIL, pushed all the same
    )  # fmt: skip
    assert code == 0 and out.splitlines()[-1] == "1 run: 1 ran, 0 skipped, 0 failed", (out, err[-3000:])
    assert hub.commits(f"{HUB_USER}/{name}"), "the run was not pushed"
    files = [path for root in (slurm, runs) for path in root.rglob("*") if path.is_file()]
    # The search looks where a job's environment lands: HF_ENDPOINT is in it, in slurmctld's state.
    assert any(hub.endpoint.encode() in path.read_bytes() for path in files if slurm in path.parents)
    leaked = [str(path) for path in files if hub_token.encode() in path.read_bytes()]
    assert leaked == [], leaked
    assert not [path for path in runs.iterdir() if path.name.startswith(".attncard-token")]  # removed
