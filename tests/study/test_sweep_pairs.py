"""What a sweep settles before its first run, without training: a module row that no dense run of its settings
will be compared with is one `warning:` line on stderr naming the row, the closest dense row and what differs
(the sweep still runs it); and each run trains on its own number of torch threads, the whole part of its
`cpus`, whichever executor runs it, so that its predictions.csv is the same byte for byte everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attncard.pipeline.cli import main
from attncard.pipeline.record.errors import AttncardError
from attncard.pipeline.record.results import Results
from attncard.pipeline.study import sweep as sweep_stage
from attncard.pipeline.study.matrix import RunResources, read_matrix
from attncard.pipeline.study.plan import SweepRun, SweepSettings, plan_sweep, unpaired_warnings
from attncard.pipeline.study.sweep import torch_threads
from conftest import write_sst2_folder

MODULE = "svd_lowrank"


@pytest.fixture
def bert(tiny_model_dir) -> Path:
    return tiny_model_dir("bert")


def _matrix(tmp_path: Path, text: str, model: Path) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace("{model}", f"'{model}'"), encoding="utf-8")
    return path


def _warnings(matrix: Path, output: Path, seeds=None, only=None) -> list[str]:
    every_run = plan_sweep(read_matrix(matrix), seeds=seeds)
    runs = plan_sweep(read_matrix(matrix), seeds=seeds, only=only)
    return unpaired_warnings(runs, SweepSettings(output=output), planned=every_run)


# --- a module row without its dense row --------------------------------------------------------------------


def test_a_module_row_at_other_steps_is_warned_of_before_any_run_naming_both_rows(
    bert, tmp_path, monkeypatch, capsys
):
    matrix = _matrix(
        tmp_path,
        "runs:\n"
        f"  - {{model: {{model}}, module: {MODULE}, task: sst2, steps: 40}}\n"
        "  - {model: {model}, module: none, task: sst2, steps: 30}\n",
        bert,
    )
    started: list[str] = []

    def no_training(options):
        started.append(capsys.readouterr().err)  # what the sweep had said when this run started
        raise AttncardError("not trained in this test")

    monkeypatch.setattr(sweep_stage, "run_publish", no_training)
    argv = ["sweep", str(matrix), "--data-dir", str(write_sst2_folder(tmp_path / "glue"))]
    code = main([*argv, "--output", str(tmp_path / "runs")])
    expected = (
        f"warning: bert-{MODULE}-sst2-seed0 has no dense run at its settings (steps 40; the dense row "
        "bert-none-sst2 has steps 30): its card will have no paired verdict; give both rows the same steps\n"
    )
    assert len(started) == 2 and started[0].startswith(expected), started  # before the first run
    assert started[0].count("warning:") == 1 and "warning:" not in started[1]
    assert code == 1  # a warning stops nothing: both runs started (and failed here, untrained)


@pytest.mark.parametrize(
    ("rows", "seeds", "only", "expected"),
    [
        (  # the module row's own seeds: seed 2 has no dense run
            f"  - {{model: {{model}}, module: {MODULE}, task: sst2, steps: 2, seeds: [0, 2]}}\n"
            "  - {model: {model}, module: none, task: sst2, steps: 2, seeds: [0, 1]}\n",
            None,
            None,
            f"bert-{MODULE}-sst2-seed2 has no dense run at its settings (seed 2; the dense row "
            "bert-none-sst2 has seeds 0 and 1): its card will have no paired verdict; give both rows the "
            "same seeds",
        ),
        (  # several seeds at other steps: one line for the row
            f"  - {{model: {{model}}, module: {MODULE}, task: sst2, steps: 3}}\n"
            "  - {model: {model}, module: none, task: sst2, steps: 2}\n",
            [0, 1, 2],
            None,
            f"bert-{MODULE}-sst2 (seeds 0, 1 and 2) has no dense runs at its settings (steps 3; the dense "
            "row bert-none-sst2 has steps 2): their cards will have no paired verdict; give both rows the "
            "same steps",
        ),
        (  # no dense row of the model and task at all
            f"  - {{model: {{model}}, module: {MODULE}, task: sst2, steps: 2}}\n",
            None,
            None,
            f"bert-{MODULE}-sst2-seed0 has no dense run at its settings (the matrix has no dense row of "
            "{model} on sst2): its card will have no paired verdict; add the row {model: {model}, module: "
            "none, task: sst2, steps: 2}",
        ),
        (  # the dense row is there, left out by --only
            f"  - {{model: {{model}}, module: {MODULE}, task: sst2, steps: 2}}\n"
            "  - {model: {model}, module: none, task: sst2, steps: 2}\n",
            None,
            [f"*-{MODULE}-*"],
            f"bert-{MODULE}-sst2-seed0 has no dense run at its settings (the dense row bert-none-sst2 is "
            "left out by --only, and {output} does not hold it): its card will have no paired verdict; add "
            "bert-none-sst2-seed* to --only, or run it first",
        ),
    ],
)
def test_each_way_a_module_run_misses_its_dense_run_says_what_differs(
    bert, tmp_path, rows, seeds, only, expected
):
    matrix = _matrix(tmp_path, f"runs:\n{rows}", bert)
    output = tmp_path / "runs"
    expected = expected.replace("{model}", str(bert)).replace("{output}", str(output))
    assert _warnings(matrix, output, seeds, only) == [expected]


def test_module_rows_with_their_dense_rows_and_a_dense_only_matrix_warn_of_nothing(bert, tmp_path):
    paired = _matrix(
        tmp_path,
        "seeds: [0, 1]\nruns:\n"
        f"  - {{model: {{model}}, module: {MODULE}, task: sst2, steps: 2}}\n"
        "  - {model: {model}, module: none, task: sst2, steps: 2}\n",
        bert,
    )
    assert _warnings(paired, tmp_path / "runs") == []
    assert _warnings(paired, tmp_path / "runs", only=["*-seed1"]) == []  # --only keeps both of seed 1
    dense_only = _matrix(tmp_path, "runs:\n  - {model: {model}, module: none, task: sst2, steps: 2}\n", bert)
    assert _warnings(dense_only, tmp_path / "runs") == []


def test_a_dense_run_already_in_the_output_pairs_a_module_row_without_its_dense_row(tiny_gpt2_run):
    """The dense run was trained by an earlier sweep or publish: publish finds it, so nothing is said."""
    run_dir, _ = tiny_gpt2_run
    dense = Results.load(run_dir)
    config = dense.training.hyperparameters
    module_run = SweepRun(
        model=dense.model.model_id,
        model_id=dense.model.model_id,
        module=MODULE,
        task="sst2",
        steps=config.steps,
        seed=config.seed,
        name=f"tiny-gpt2-{MODULE}-sst2",
    )
    settings = SweepSettings(
        output=run_dir.parent, batch_size=config.batch_size, lr=config.lr, max_length=config.max_length
    )
    assert unpaired_warnings([module_run], settings) == []
    other_steps = SweepRun(**{**module_run.__dict__, "steps": config.steps + 1})
    assert unpaired_warnings([other_steps], settings) != []  # that dense run has other steps


# --- the run's torch threads -------------------------------------------------------------------------------


@pytest.mark.parametrize(("cpus", "threads"), [(1, 1), (2, 2), (2.5, 2), (0.5, 1), (16, 16)])
def test_a_runs_torch_threads_are_the_whole_part_of_its_cpus_at_least_one(cpus, threads):
    assert RunResources(cpus=cpus).torch_threads == threads


def test_the_local_executor_trains_each_run_on_its_rows_threads_and_puts_torchs_back(
    bert, tmp_path, monkeypatch
):
    """The local executor runs in the sweep's own process, whose torch has as many threads as cores (or
    OMP_NUM_THREADS): each run gets its own count, as it does in a Ray task or a Slurm job."""
    matrix = _matrix(
        tmp_path,
        "runs:\n"
        "  - {model: {model}, module: none, task: sst2, steps: 2}\n"
        f"  - {{model: {{model}}, module: {MODULE}, task: sst2, steps: 2, resources: {{cpus: 2}}}}\n",
        bert,
    )
    seen: list[int] = []

    def no_training(options):
        seen.append(torch.get_num_threads())
        raise AttncardError("not trained in this test")

    monkeypatch.setattr(sweep_stage, "run_publish", no_training)
    runs = plan_sweep(read_matrix(matrix))
    before = torch.get_num_threads()
    with torch_threads(3):  # a process whose torch has 3 threads, as on a 3-core machine
        outcomes = list(sweep_stage.run_sweep(runs, SweepSettings(output=tmp_path / "runs")))
        assert torch.get_num_threads() == 3
    assert torch.get_num_threads() == before
    assert [outcome.state for outcome in outcomes] == ["failed", "failed"]
    assert seen == [1, 2]  # the default cpus: 1, then the row's 2
