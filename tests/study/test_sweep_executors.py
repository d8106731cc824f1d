"""The registry of sweep executors (`pipeline.study.executors`, filled in `pipeline.cli.sweep.EXECUTORS`): an
executor registered in one call is a choice of `attncard sweep --executor`, with its own options, and runs a
sweep from the command line.

Adding an executor to attncard touches at most three files: its own file in pipeline/study/ (the function
that runs the runs), its registration in pipeline/cli/sweep.py (`EXECUTORS.register(SweepExecutor(...))`:
name, help, options, run function), and its extra in pyproject.toml when it needs a package. The executor
here is registered from this file alone: no other file of attncard changes for it.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from attncard.pipeline.cli import main
from attncard.pipeline.cli.sweep import EXECUTORS, RETRIES
from attncard.pipeline.record.results import Status
from attncard.pipeline.study.executors import ExecutorOption, SweepExecutor, SweepExecutors
from attncard.pipeline.study.plan import RunOutcome, SweepRun, SweepSettings
from conftest import write_sst2_folder


class Recorder:
    """A test-only executor's run function: it records the runs, the settings and the options it is given,
    and gives each run an outcome, the last run first (a cluster's runs end in any order)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], SweepSettings, dict[str, Any]]] = []

    def __call__(
        self, runs: list[SweepRun], settings: SweepSettings, options: dict[str, Any]
    ) -> list[RunOutcome]:
        self.calls.append(([run.name for run in runs], settings, options))
        return [
            RunOutcome(run=run, state="ran", status=Status.PASS_NO_COMPRESSION, accuracy=0.5)
            for run in reversed(runs)
        ]


LABEL = ExecutorOption("--label", "the label of every run (default: none)", metavar="TEXT", default="none")


@pytest.fixture
def recorder() -> Any:
    """The executor `recording` (option `--label`), registered while the test runs."""
    help_before = _help()
    recorder = Recorder()
    EXECUTORS.register(SweepExecutor("recording", "each run recorded, none trained", recorder, (LABEL,)))
    try:
        yield recorder
    finally:
        EXECUTORS.unregister("recording")
    assert _help() == help_before  # unregistered, the command is as it was


@pytest.fixture
def matrix(tmp_path) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(
        "seeds: [0, 1]\nruns:\n  - {model: minilm, module: svd_lowrank, task: sst2, steps: 2}\n"
        "  - {model: minilm, module: none, task: sst2, steps: 2}\n",
        encoding="utf-8",
    )
    return path


def _sweep(matrix: Path, tmp_path: Path, *options: str) -> tuple[int, str, str]:
    """`attncard sweep MATRIX --data-dir ... --output <tmp>/runs OPTIONS`: exit status, stdout, stderr."""
    glue = write_sst2_folder(tmp_path / "glue")
    argv = ["sweep", str(matrix), "--data-dir", str(glue), "--output", str(tmp_path / "runs"), *options]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's errors, and --help
            code = stop.code
    return code, out.getvalue(), err.getvalue()


def _help() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["sweep", "--help"])
    return " ".join(out.getvalue().split())  # argparse's wrapping aside


def test_a_registered_executor_runs_a_sweep_from_the_command_line(recorder, matrix, tmp_path):
    code, out, err = _sweep(matrix, tmp_path, "--executor", "recording", "--label", "nightly")
    assert (code, err.count("error")) == (0, 0), err
    names = [f"minilm-{module}-sst2-seed{seed}" for module in ("none", "svd_lowrank") for seed in (0, 1)]
    [(given, settings, options)] = recorder.calls
    assert given == names  # the plan, the dense runs first
    assert settings.output == tmp_path / "runs" and options == {"label": "nightly"}
    # The report is the command's, in the plan's order, whatever order the executor gave the outcomes in.
    assert out.splitlines() == [
        *(f"ran      {name}: PASS_NO_COMPRESSION, accuracy 0.5000" for name in names),
        "4 runs: 4 ran, 0 skipped, 0 failed",
    ]


def test_an_option_not_given_is_its_default(recorder, matrix, tmp_path):
    code, _, err = _sweep(matrix, tmp_path, "--executor", "recording", "--only", "*-none-*")
    assert code == 0, err
    [(given, _, options)] = recorder.calls
    assert given == ["minilm-none-sst2-seed0", "minilm-none-sst2-seed1"] and options == {"label": "none"}


def test_the_help_names_the_executor_and_its_option(recorder):
    shown = _help()
    assert "{local,ray,slurm,recording}" in shown
    assert "slurm: each run a Slurm job" in shown and "; recording: each run recorded, none trained" in shown
    assert "--label TEXT with --executor recording: the label of every run (default: none)" in shown


def test_its_option_with_another_executor_is_refused_before_anything_runs(recorder, matrix, tmp_path):
    code, out, err = _sweep(matrix, tmp_path, "--label", "nightly")
    assert (code, out) == (2, "")
    assert err == (
        "error: --label only applies with --executor recording; add --executor recording, or drop --label\n"
    )
    assert recorder.calls == []


def test_an_option_shared_with_the_cluster_executors_is_one_option_of_all_three(matrix, tmp_path):
    recorder = Recorder()
    EXECUTORS.register(SweepExecutor("recording", "each run recorded", recorder, (RETRIES,)))
    try:
        assert "--retries N with --executor ray or slurm or recording: start a run lost" in _help()
        code, _, err = _sweep(matrix, tmp_path, "--executor", "recording", "--retries", "5")
        assert code == 0, err
        assert recorder.calls[0][2] == {"retries": 5}
        code, _, err = _sweep(matrix, tmp_path, "--retries", "5")
        assert code == 2
        assert err.startswith("error: --retries only applies with --executor ray or --executor slurm or ")
    finally:
        EXECUTORS.unregister("recording")


@pytest.mark.parametrize(
    ("executor", "message"),
    [
        (
            SweepExecutor("ray", "another ray", Recorder()),
            "an executor named 'ray' is registered already; pick another name",
        ),
        (
            SweepExecutor("recording", "", Recorder(), (ExecutorOption("--retries", "mine", metavar="N"),)),
            "--retries of executor 'recording' differs from that of ray, slurm; give both the same "
            "ExecutorOption, or another flag",
        ),
    ],
)
def test_a_name_or_an_option_taken_otherwise_is_refused(executor, message):
    executors = SweepExecutors()
    for name in ("ray", "slurm"):
        executors.register(EXECUTORS[name])
    with pytest.raises(ValueError) as raised:
        executors.register(executor)
    assert str(raised.value) == message
    assert list(executors) == ["ray", "slurm"]
