"""`attncard sweep --executor slurm` without a cluster: each run's resources as a job's parameters (whole CPUs
and GPUs only), the command line's checks before anything is submitted (a fake `sbatch` on PATH records
whether it was called), and the driver's bookkeeping on a stand-in cluster: the dense runs first as one
submission, each module run after its dense run's job, a job lost without a result submitted again with its
module runs, the retries spent, the runs that fail for good, and the jobs cancelled when interrupted."""

from __future__ import annotations

import contextlib
import hashlib
import io
import sys
from pathlib import Path
from typing import Any

import pytest

from attncard.pipeline.cli import main
from attncard.pipeline.cli import sweep as cli_sweep
from attncard.pipeline.record.errors import AttncardError
from attncard.pipeline.study import sweep_ray, sweep_slurm
from attncard.pipeline.study.matrix import RunResources
from attncard.pipeline.study.plan import RunOutcome, SweepRun
from attncard.pipeline.study.sweep_slurm import (
    check_slurm,
    drive_jobs,
    import_submitit,
    sbatch_options,
    slurm_parameters,
)
from conftest import write_sst2_folder

MISSING_SUBMITIT = (
    "--executor slurm needs submitit: pip install 'attncard[slurm]' (or make install), or use "
    "--executor local"
)


def _run(module: str = "none", seed: int = 0, **resources: float) -> SweepRun:
    name = f"m-{module}-sst2-seed{seed}"
    return SweepRun(
        "m", "m", module, "sst2", steps=2, seed=seed, name=name, resources=RunResources(**resources)
    )


# --- the parameters of a job -------------------------------------------------------------------------------


def test_the_resources_are_the_jobs_parameters():
    run = _run(cpus=4, gpus=2, memory_gib=7.5)
    assert slurm_parameters(run, partition="gpu", time_limit_minutes=30) == {
        "timeout_min": 30,
        "cpus_per_task": 4,
        "gpus_per_node": 2,
        "mem_gb": 7.5,
        "slurm_partition": "gpu",
    }
    # No GPU, no memory, no partition: left to the cluster's defaults.
    assert slurm_parameters(_run(cpus=1.0)) == {"timeout_min": 240, "cpus_per_task": 1}
    assert sbatch_options(slurm_parameters(run, "gpu", 30)) == [
        "--time=30",
        "--cpus-per-task=4",
        "--gpus-per-node=2",
        "--mem=7680M",
        "--partition=gpu",
    ]


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            {"gpus": 0.5},
            "m-none-sst2-seed0: resources gpus 0.5 is not a whole number, and Slurm grants whole GPUs",
        ),
        (
            {"cpus": 1.5},
            "resources cpus 1.5 is not a whole number of at least 1, and Slurm grants whole CPUs",
        ),
        ({"cpus": 0.25}, "write e.g. cpus: 1 in the matrix, or use --executor ray"),
    ],
)
def test_a_fraction_of_a_cpu_or_gpu_is_refused(resources, message):
    with pytest.raises(AttncardError) as raised:
        slurm_parameters(_run(**resources))
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"time_limit_minutes": 0},
            "--time-limit 0 is not a whole number of at least 1; write e.g. --time-limit 60",
        ),
        ({"retries": -1}, "--retries -1 is not a whole number of at least 0"),
        ({"partition": "a b"}, "--partition 'a b' is not a partition name"),
    ],
)
def test_check_slurm_refuses_bad_values(options, message):
    with pytest.raises(AttncardError, match="^" + message.replace("(", r"\(")):
        check_slurm([_run()], **options)


def test_an_sbatch_export_that_keeps_the_environment_from_the_jobs_is_refused(monkeypatch):
    monkeypatch.setenv("SBATCH_EXPORT", "NONE")
    with pytest.raises(AttncardError, match=r"^SBATCH_EXPORT=NONE would keep this environment \(GLUE_DIR"):
        check_slurm([_run()])
    monkeypatch.setenv("SBATCH_EXPORT", "ALL,EXTRA=1")  # all, and more: fine
    monkeypatch.setenv("PATH", "")
    with pytest.raises(AttncardError, match="sbatch is not on PATH"):  # the next check
        check_slurm([_run()])


def test_without_submitit_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` raises ImportError
    with pytest.raises(AttncardError) as raised:
        import_submitit()
    assert str(raised.value) == MISSING_SUBMITIT


# --- the command line --------------------------------------------------------------------------------------


def test_the_command_line_says_the_defaults_the_stage_has():
    """The command line names them without importing the stage (and submitit)."""
    assert cli_sweep.DEFAULT_TIME_LIMIT_MINUTES == sweep_slurm.DEFAULT_TIME_LIMIT_MINUTES
    assert cli_sweep.DEFAULT_RETRIES == sweep_slurm.DEFAULT_RETRIES == sweep_ray.DEFAULT_RETRIES


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch) -> Path:
    """A `sbatch` (and `srun`) on PATH that only records its arguments, and refuses `--partition=nope`; the
    file it records in."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "sbatch-calls"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {calls}\n'
        'case "$*" in *--partition=nope*) echo "sbatch: error: invalid partition specified: nope" >&2; '
        'echo "allocation failure: Invalid partition name specified" >&2; exit 1;; esac\n'
    )
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")
    for program in ("sbatch", "srun"):
        (bin_dir / program).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return calls


@pytest.fixture
def matrix(tmp_path) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(
        "runs:\n  - {model: minilm, module: none, task: sst2, steps: 2}\n"
        "  - {model: minilm, module: svd_lowrank, task: sst2, steps: 2}\n",
        encoding="utf-8",
    )
    return path


def _sweep(matrix: Path, tmp_path: Path, *options: str) -> tuple[int, str]:
    argv = ["sweep", str(matrix), "--data-dir", str(write_sst2_folder(tmp_path / "glue"))]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*argv, "--output", str(tmp_path / "runs"), *options])
        except SystemExit as stop:  # argparse's errors
            code = stop.code
    return code, err.getvalue()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--partition", "gpu"],
            "error: --partition only applies with --executor slurm; add --executor slurm",
        ),
        (["--time-limit", "5"], "error: --time-limit only applies with --executor slurm"),
        (
            ["--executor", "ray", "--partition", "gpu"],
            "error: --partition only applies with --executor slurm",
        ),
        (["--executor", "slurm", "--address", "h:1"], "error: --address only applies with --executor ray"),
        (["--retries", "1"], "error: --retries only applies with --executor ray or --executor slurm"),
        (["--executor", "slurm", "--time-limit", "0"], "argument --time-limit: 0 must be at least 1"),
        (["--executor", "slurm", "--time-limit", "1.5"], "argument --time-limit"),
        (
            ["--executor", "slurm", "--partition", ""],
            "argument --partition: '' is not a Slurm partition name",
        ),
        (["--executor", "slurm", "--retries", "-1"], "argument --retries: -1 must be at least 0"),
        (
            ["--executor", "slurm", "--partition", "nope"],
            "error: minilm-none-sst2-seed0: Slurm refuses its job (--time=240 --cpus-per-task=1 "
            "--partition=nope): sbatch: error: invalid partition specified: nope; check --partition",
        ),
    ],
)
def test_bad_slurm_options_are_one_line_and_exit_2_before_anything_is_submitted(
    matrix, tmp_path, fake_sbatch, options, message
):
    code, err = _sweep(matrix, tmp_path, *options)
    assert code == 2 and message in err and "Traceback" not in err, err
    assert err.count("\n") == 1 or err.startswith("usage:"), err
    submitted = fake_sbatch.read_text().splitlines() if fake_sbatch.exists() else []
    assert all(line.startswith("--test-only ") for line in submitted), submitted
    assert not (tmp_path / "runs").exists()


def test_a_fraction_of_a_gpu_is_one_line_before_slurm_is_asked(matrix, tmp_path, fake_sbatch):
    matrix.write_text(matrix.read_text() + "resources: {gpus: 0.5}\n", encoding="utf-8")
    code, err = _sweep(matrix, tmp_path, "--executor", "slurm")
    assert code == 2 and err.startswith("error: minilm-none-sst2-seed0: resources gpus 0.5 is not a whole"), (
        err
    )
    assert err.count("\n") == 1 and not fake_sbatch.exists()


def test_the_slurm_executor_without_submitit_is_one_line_and_exit_2(
    matrix, tmp_path, fake_sbatch, monkeypatch
):
    monkeypatch.setitem(sys.modules, "submitit", None)
    code, err = _sweep(matrix, tmp_path, "--executor", "slurm")
    assert (code, err) == (2, f"error: {MISSING_SUBMITIT}\n")
    assert not fake_sbatch.exists()


def test_without_sbatch_the_error_says_where_to_run(matrix, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, err = _sweep(matrix, tmp_path, "--executor", "slurm")
    assert code == 2 and err == (
        "error: --executor slurm: sbatch is not on PATH; run the sweep on a node of the Slurm cluster (a "
        "login node), or use --executor local\n"
    )


# --- the driver, on a stand-in cluster ---------------------------------------------------------------------


class FakeCluster:
    """Jobs that do what `plan` says, attempt by attempt (`ok`: a result; `lost`: ends FAILED without one;
    `raise`: the function raised), once the job they wait on (`after`) succeeded; a job whose `after` failed
    is cancelled, as `--kill-on-invalid-dep=yes` has Slurm do."""

    def __init__(self, plan: dict[str, list[str]] | None = None) -> None:
        self.plan = plan or {}
        self.submissions: list[tuple[list[str], str | None]] = []
        self.jobs: dict[str, tuple[SweepRun, str | None]] = {}
        self.state: dict[str, str] = {}
        self.results: dict[str, tuple[str, Any]] = {}
        self.cancelled: list[str] = []
        self.attempts: dict[str, int] = {}
        self.silent = 0  # how many times squeue does not answer first

    def submit(self, runs: list[SweepRun], after: str | None = None) -> list[str]:
        number = len(self.submissions) + 1
        ids = [f"{number}_{index}" for index in range(len(runs))] if len(runs) > 1 else [str(number)]
        self.submissions.append(([run.name for run in runs], after))
        for run, job_id in zip(runs, ids, strict=True):
            self.jobs[job_id] = (run, after)
            self.state[job_id] = "PENDING"
        return ids

    def states(self) -> dict[str, str] | None:
        if self.silent:
            self.silent -= 1
            return None
        for job_id, (run, after) in self.jobs.items():
            if self.state[job_id] != "PENDING":
                continue
            if after is not None and self.state[after] in ("PENDING", "RUNNING"):
                continue
            if after is not None and self.results.get(after, ("",))[0] != "success":
                self.state[job_id] = "CANCELLED"
                continue
            attempt = self.attempts.get(run.name, 0)
            self.attempts[run.name] = attempt + 1
            what = (self.plan.get(run.name) or ["ok"])[
                min(attempt, len(self.plan.get(run.name) or ["ok"]) - 1)
            ]
            self.state[job_id] = "COMPLETED" if what == "ok" else "FAILED"
            if what == "ok":
                self.results[job_id] = ("success", RunOutcome(run=run, state="ran"))
            elif what == "raise":
                self.results[job_id] = ("error", "Traceback ...\nFileNotFoundError: /shared/study")
        return dict(self.state)

    def result(self, job_id: str) -> tuple[str, Any] | None:
        return self.results.get(job_id)

    def cancel(self, job_ids: list[str]) -> None:
        self.cancelled += job_ids
        for job_id in job_ids:
            if self.state[job_id] in ("PENDING", "RUNNING"):
                self.state[job_id] = "CANCELLED"

    def describe(self, job_id: str) -> str:
        return f"{job_id}.err"


DENSE = [_run(seed=0), _run(seed=1)]
MODULES = [_run("svd_lowrank", seed=0), _run("svd_lowrank", seed=1)]


def _drive(cluster: FakeCluster, retries: int = 2) -> dict[str, RunOutcome]:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    outcomes = drive_jobs(
        [*DENSE, *MODULES], cluster, retries, poll_seconds=2, clock=lambda: now[0], sleep=sleep
    )
    return {outcome.run.name: outcome for outcome in outcomes}


def test_the_dense_runs_go_first_as_one_submission_each_module_run_after_its_dense_runs_job():
    cluster = FakeCluster()
    cluster.silent = 2  # squeue does not answer at first: the driver asks again
    outcomes = _drive(cluster)
    assert cluster.submissions == [
        (["m-none-sst2-seed0", "m-none-sst2-seed1"], None),
        (["m-svd_lowrank-sst2-seed0"], "1_0"),
        (["m-svd_lowrank-sst2-seed1"], "1_1"),
    ]
    assert {name: outcome.state for name, outcome in outcomes.items()} == dict.fromkeys(
        [run.name for run in DENSE + MODULES], "ran"
    )
    assert cluster.cancelled == []


def test_a_lost_dense_run_is_submitted_again_and_takes_its_module_run_along(caplog):
    cluster = FakeCluster({"m-none-sst2-seed0": ["lost", "ok"]})
    outcomes = _drive(cluster)
    assert all(outcome.state == "ran" for outcome in outcomes.values()) and len(outcomes) == 4
    assert cluster.submissions[3:] == [(["m-none-sst2-seed0"], None), (["m-svd_lowrank-sst2-seed0"], "4")]
    assert cluster.cancelled == ["2"]  # the module run's job after the lost one
    assert "m-none-sst2-seed0: job 1_0 FAILED without a result; submitted again as job 4 (retry 1 of 2)" in (
        caplog.text
    )


def test_a_lost_module_run_is_submitted_again_without_a_dependency_once_its_dense_run_is_done():
    cluster = FakeCluster({"m-svd_lowrank-sst2-seed1": ["lost", "lost", "ok"]})
    outcomes = _drive(cluster)
    assert outcomes["m-svd_lowrank-sst2-seed1"].state == "ran"
    assert cluster.submissions[3:] == [(["m-svd_lowrank-sst2-seed1"], None)] * 2


def test_after_its_retries_a_lost_run_fails_its_module_runs_are_not_started_and_the_others_go_on():
    cluster = FakeCluster({"m-none-sst2-seed0": ["lost"]})
    outcomes = _drive(cluster, retries=1)
    assert outcomes["m-none-sst2-seed0"].error == "job 4 FAILED without a result, 1 retries used"
    assert outcomes["m-svd_lowrank-sst2-seed0"].error == "not started: its dense run m-none-sst2-seed0 failed"
    assert outcomes["m-none-sst2-seed1"].state == outcomes["m-svd_lowrank-sst2-seed1"].state == "ran"
    assert len(cluster.submissions) == 5  # the dense run once more, its module run after it, nothing more


def test_a_job_whose_function_raised_is_not_submitted_again():
    cluster = FakeCluster({"m-svd_lowrank-sst2-seed0": ["raise"]})
    outcomes = _drive(cluster, retries=2)
    assert outcomes["m-svd_lowrank-sst2-seed0"].error == (
        "job 2 raised FileNotFoundError: /shared/study; see 2.err"
    )
    assert len(cluster.submissions) == 3


def test_a_job_ended_without_a_result_waits_for_its_result_file_a_while():
    cluster = FakeCluster({"m-none-sst2-seed0": ["lost", "ok"]})
    now = [0.0]
    outcomes = drive_jobs(DENSE, cluster, 2, poll_seconds=2, clock=lambda: now[0], sleep=lambda _: None)
    next(outcomes)  # seed 1: done at the first look, seed 0 seen ended without its result
    assert len(cluster.submissions) == 1
    now[0] = sweep_slurm.RESULT_GRACE_SECONDS  # now it is lost
    assert next(outcomes).run.name == "m-none-sst2-seed0" and len(cluster.submissions) == 2


def test_closing_the_sweep_cancels_the_jobs_it_still_waits_for():
    cluster = FakeCluster({"m-none-sst2-seed1": ["lost"]})
    outcomes = drive_jobs([*DENSE, *MODULES], cluster, 2, poll_seconds=0, sleep=lambda _: None)
    next(outcomes)
    outcomes.close()  # as Ctrl-C does
    assert sorted(cluster.cancelled) == ["1_1", "2", "3"]  # every job but that of the run it gave


# --- the Hub token -----------------------------------------------------------------------------------------

TOKEN = "hf_sweep_slurm_not_a_real_token_0123456789"


@pytest.fixture
def recording_sbatch(tmp_path, monkeypatch) -> Path:
    """A `sbatch` on PATH that accepts every job (`Submitted batch job <n>`) and records, per call, its
    environment (`<n>.env`: what sbatch would export into the job and send to slurmctld) and, when the
    environment names a token file, that file's mode, its folder's mode and the sha256 of what it holds
    (`<n>.file`); `squeue` lists nothing, `scancel` and `srun` do nothing. The folder of these records."""
    bin_dir, records = tmp_path / "bin", tmp_path / "sbatch-records"
    bin_dir.mkdir()
    records.mkdir()
    (bin_dir / "sbatch").write_text(
        "#!/bin/sh\n"
        f"cd {records}\n"
        "n=$(ls | grep -c '\\.env$'); n=$((n + 1))\n"
        'env > "$n.env"\n'
        'if [ -n "$ATTNCARD_HF_TOKEN_FILE" ]; then\n'
        '  stat -c %a "$ATTNCARD_HF_TOKEN_FILE" "$(dirname "$ATTNCARD_HF_TOKEN_FILE")" > "$n.file"\n'
        '  sha256sum < "$ATTNCARD_HF_TOKEN_FILE" | cut -d" " -f1 >> "$n.file"\n'
        "fi\n"
        'case "$*" in *--test-only*) exit 0;; esac\n'
        'echo "Submitted batch job $((1000 + n))"\n'
    )
    (bin_dir / "squeue").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "scancel").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")  # submitit looks for it
    for program in ("sbatch", "squeue", "scancel", "srun"):
        (bin_dir / program).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(sweep_slurm, "POLL_SECONDS", 0.0)
    monkeypatch.setattr(sweep_slurm, "RESULT_GRACE_SECONDS", 0.0)
    return records


def test_sbatch_sees_no_token_only_the_path_of_a_file_only_this_user_can_read(
    matrix, tmp_path, recording_sbatch, monkeypatch
):
    """sbatch exports its environment into the job (--export=ALL) and slurmctld stores it: the token goes in
    a file under --output instead, which the job reads; the file is gone when the sweep ends."""
    pytest.importorskip("submitit", reason="submitit is not installed: pip install 'attncard[slurm]'")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", TOKEN)
    code, err = _sweep(matrix, tmp_path, "--executor", "slurm", "--retries", "0")
    assert code == 1 and "job 1002 ended without a result, 0 retries used" in err, err  # nothing ran
    environments = {
        int(path.stem): dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
        for path in recording_sbatch.glob("*.env")
    }
    assert sorted(environments) == [1, 2, 3]  # --test-only, the dense run, the module run after it
    for number, environment in environments.items():
        assert TOKEN not in environment.values() and "HF_TOKEN" not in environment, number
        assert "HUGGING_FACE_HUB_TOKEN" not in environment, number
    token_file = Path(environments[2]["ATTNCARD_HF_TOKEN_FILE"])
    assert token_file.parent.parent == (tmp_path / "runs").resolve()
    for number in (2, 3):  # each job is handed the file: mode 600 in a folder of mode 700, the token in it
        assert environments[number]["ATTNCARD_HF_TOKEN_FILE"] == str(token_file)
        assert (recording_sbatch / f"{number}.file").read_text().split() == [
            "600",
            "700",
            hashlib.sha256(TOKEN.encode()).hexdigest(),
        ]
    assert not token_file.parent.exists()  # removed when the sweep ended
    written = [path for path in (tmp_path / "runs").rglob("*") if path.is_file()]
    assert any(path.suffix == ".pkl" for path in written), written  # submitit's pickled calls, searched too
    assert [str(path) for path in written if TOKEN.encode() in path.read_bytes()] == []
