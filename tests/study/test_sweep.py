"""`attncard sweep`, `attncard summary` and the lint of cards: a tiny study (two modules, two seeds) runs
every (row, seed) with the dense runs first, resumes without training again, goes on after a failing row,
refuses a bad matrix before training, and writes a leaderboard whose every figure `attncard lint` traces to
the cards."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from attncard.pipeline.card.groups import task_length_row
from attncard.pipeline.card.leaderboard import COLUMNS
from attncard.pipeline.checks.lint import is_cards_copy, lint_leaderboard, lint_run_folder
from attncard.pipeline.cli import main
from attncard.pipeline.cli.publish import add_arguments as add_publish_arguments
from attncard.pipeline.cli.publish import options_from_args
from attncard.pipeline.record.results import Results
from attncard.pipeline.scoring.paired import baseline_record, comparison_from_counts, no_baseline
from attncard.pipeline.study import sweep as sweep_stage
from attncard.pipeline.study.matrix import MatrixError, read_matrix
from attncard.pipeline.study.plan import plan_sweep
from conftest import quick_scaling, write_sst2_folder

MODULE = "svd_lowrank"  # the module of the study, beside the dense `none` (the quickest to time on a CPU)
SEEDS = (0, 1)
STEPS = 2


@dataclass
class Study:
    root: Path
    model: Path  # the tiny BERT folder the study trains
    glue: Path
    matrix: Path
    runs: Path
    cards: Path
    out: str  # stdout of the sweep
    err: str  # stderr of the sweep

    def names(self, model: str = "bert") -> list[str]:
        return [f"{model}-{module}-sst2-seed{seed}" for module in ("none", MODULE) for seed in SEEDS]

    def argv(self, runs: Path, cards: Path, matrix: Path | None = None) -> list[str]:
        """The sweep's command line, into other folders."""
        return [
            *("sweep", str(matrix or self.matrix), "--batch-size", "4", "--data-dir", str(self.glue)),
            *("--output", str(runs), "--cards", str(cards)),
        ]


def _matrix_text(model: Path, steps: int = STEPS) -> str:
    """The study's matrix: the module row first, to show that the dense runs go first anyway."""
    return (
        f"seeds: [{', '.join(map(str, SEEDS))}]\n"
        "runs:\n"
        f"  - {{model: '{model}', module: {MODULE}, task: sst2, steps: {steps}}}\n"
        f"  - {{model: '{model}', module: none, task: sst2, steps: {steps}}}\n"
    )


@pytest.fixture(scope="module")
def study(tiny_model_dir, tmp_path_factory) -> Study:
    """The tiny study, swept once a module: copy its folders before changing them."""
    root = tmp_path_factory.mktemp("study")
    model = tiny_model_dir("bert")
    matrix = root / "matrix.yaml"
    matrix.write_text(_matrix_text(model), encoding="utf-8")
    study = Study(
        root, model, write_sst2_folder(root / "glue"), matrix, root / "runs", root / "cards", "", ""
    )
    out, err = io.StringIO(), io.StringIO()
    # No test here checks the scaling tables' passes or lengths, only that the leaderboard shows figures.
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), quick_scaling():
        code = main(study.argv(study.runs, study.cards))
    study.out, study.err = out.getvalue(), err.getvalue()
    assert code == 0, study.err[-3000:]
    return study


@pytest.fixture
def copied(study, tmp_path) -> tuple[Path, Path]:
    """`(runs, cards)`: copies of the study's run folders and cards copies, to change."""
    return (
        Path(shutil.copytree(study.runs, tmp_path / "runs")),
        Path(shutil.copytree(study.cards, tmp_path / "cards")),
    )


@pytest.fixture
def trained(monkeypatch) -> list[str]:
    """The names of the runs the sweep trains from now on (the real `run_publish` still runs)."""
    names: list[str] = []
    real = sweep_stage.run_publish

    def recording(options):
        names.append(options.run_dir.name)
        return real(options)

    monkeypatch.setattr(sweep_stage, "run_publish", recording)
    return names


# --- the sweep ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_sweep_runs_every_row_and_seed_into_its_folder_the_dense_runs_first(study):
    assert sorted(path.name for path in study.runs.iterdir()) == sorted(study.names())
    assert sorted(path.name for path in study.cards.iterdir()) == sorted(study.names())
    results = {name: Results.load(study.runs / name) for name in study.names()}
    for name, run in results.items():
        module, seed = name.split("-")[1], int(name.rsplit("seed", 1)[1])
        assert (run.module.name, run.training.hyperparameters.seed) == (module, seed)
        assert (run.training.hyperparameters.steps, run.training.hyperparameters.batch_size) == (STEPS, 4)
        assert run.repo_name == name and run.repo_id is None
        assert run.efficiency.torch_threads == 1  # the run's own (cpus: 1 by default), not this process's
        assert (
            not list((study.cards / name).glob("*.safetensors"))
            and (study.cards / name / "README.md").is_file()
        )
    # The matrix lists the module row first; every dense run still finished before any module run started.
    dense_done = max(results[name].finished_at for name in study.names() if "-none-" in name)
    assert all(results[name].started_at >= dense_done for name in study.names() if f"-{MODULE}-" in name)
    lines = study.out.splitlines()
    assert lines[-1] == "4 runs: 4 ran, 0 skipped, 0 failed"
    assert [line.split()[1].rstrip(":") for line in lines[:-1]] == [
        f"bert-{module}-sst2-seed{seed}" for module in ("none", MODULE) for seed in SEEDS
    ]
    assert all(line.startswith("ran ") for line in lines[:-1])
    assert "sweep: 100%" in study.err  # the progress bar over all runs


def test_each_runs_recorded_command_writes_a_folder_of_its_name(study, monkeypatch):
    """A reader who runs a sweep run's command as its card records it (beside the model folder, GLUE_DIR set)
    gets the folder of that run's name, not the unseeded `<model>-<module>-<task>` of another run."""
    monkeypatch.chdir(study.model.parent)
    monkeypatch.setenv("GLUE_DIR", str(study.glue))
    for name in study.names():
        command = Results.load(study.runs / name).command
        program, *argv = shlex.split(os.path.expandvars(command))
        assert program == "publish" and argv[-2:] == ["--name", name]
        parser = argparse.ArgumentParser()
        add_publish_arguments(parser)
        assert options_from_args(parser.parse_args(argv)).run_dir == Path("runs", name)


def test_a_second_sweep_trains_nothing_and_says_so(study, copied, trained, capsys):
    runs, cards = copied
    shutil.rmtree(cards)
    assert main(study.argv(runs, cards)) == 0
    assert trained == []
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "4 runs: 0 ran, 4 skipped, 0 failed"
    for name in study.names():
        assert re.search(rf"^(.*\r)?{name}: skipped, finished before \(", captured.err, re.MULTILINE), name
        assert (cards / name / "results.json").is_file()  # copied to --cards again


@pytest.mark.slow
def test_a_failing_row_is_one_line_and_the_sweep_goes_on(study, copied, trained, tmp_path, capsys):
    """A row whose model folder holds broken weights passes the checks (a config and weights are there) and
    fails when loaded: each of its runs is one line, and the sweep trains the deleted run after them."""
    runs, cards = copied
    broken = Path(shutil.copytree(study.model, tmp_path / "broken"))
    for weights in broken.glob("*.safetensors"):
        weights.write_bytes(b"these are not weights")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        _matrix_text(study.model) + f"  - {{model: '{broken}', module: none, task: sst2, steps: {STEPS}}}\n",
        encoding="utf-8",
    )
    rerun = f"bert-{MODULE}-sst2-seed1"
    shutil.rmtree(runs / rerun)

    with quick_scaling():  # the rerun is timed as the study's runs were
        assert main(study.argv(runs, cards, matrix)) == 1
    assert trained == ["broken-none-sst2-seed0", "broken-none-sst2-seed1", rerun]
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[-1] == "6 runs: 1 ran, 3 skipped, 2 failed"
    failed = [line for line in out if line.startswith("failed ")]
    assert [line.split()[1] for line in failed] == ["broken-none-sst2-seed0:", "broken-none-sst2-seed1:"]
    for line in failed:
        name, error = line.split(maxsplit=1)[1].split(": ", 1)
        assert error and "Traceback" not in captured.err
        assert (
            len(re.findall(rf"(?:^|\r){re.escape(name)}: {re.escape(error)}$", captured.err, re.MULTILINE))
            == 1
        )
    assert f"ran      {rerun}: " in captured.out
    assert Results.load(runs / rerun).training.hyperparameters.seed == 1
    assert not (runs / "broken-none-sst2-seed0").exists()


def test_a_run_folder_of_another_run_is_trained_again(study, copied, trained, capsys):
    runs, cards = copied
    name = "bert-none-sst2-seed0"
    argv = [*study.argv(runs, cards), "--only", name, "--lr", "0.001"]
    assert main(argv) == 0
    assert trained == [name]
    err = capsys.readouterr().err
    assert f"{name}: training it again: {runs / name} holds another run: its lr is 0.0002, not 0.001" in err
    assert Results.load(runs / name).training.hyperparameters.lr == 0.001


def test_the_plan_puts_the_dense_runs_first_and_seeds_override(study):
    matrix = read_matrix(study.matrix)
    assert [run.name for run in plan_sweep(matrix)] == study.names()
    assert [run.name for run in plan_sweep(matrix, seeds=[2])] == [
        "bert-none-sst2-seed2",
        f"bert-{MODULE}-sst2-seed2",
    ]
    assert [run.name for run in plan_sweep(matrix, only=["*-seed1"])] == [
        "bert-none-sst2-seed1",
        f"bert-{MODULE}-sst2-seed1",
    ]
    with pytest.raises(MatrixError, match="--only nothing-\\* matches no run"):
        plan_sweep(matrix, only=["nothing-*"])


def test_each_run_asks_for_its_rows_resources_over_the_matrixs(study, tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "resources: {cpus: 2, memory_gib: 4}\nruns:\n"
        f"  - {{model: '{study.model}', module: none, task: sst2}}\n"
        f"  - {{model: '{study.model}', module: {MODULE}, task: sst2, resources: {{gpus: 0.5, cpus: 1}}}}\n",
        encoding="utf-8",
    )
    dense, module = plan_sweep(read_matrix(matrix))
    assert dense.resources.ray_options() == {"num_cpus": 2, "num_gpus": 0, "memory": 4 * 2**30}
    assert module.resources.ray_options() == {"num_cpus": 1, "num_gpus": 0.5, "memory": 4 * 2**30}
    assert [run.resources.ray_options() for run in plan_sweep(read_matrix(study.matrix))] == [
        {"num_cpus": 1, "num_gpus": 0}
    ] * 4


DENSE = "model: '{model}', module: none, task: sst2"  # a good row's keys; {model} is the tiny BERT folder
BAD_MATRICES = [
    (
        "runs:\n  - {model: '{model}', module: adaptive_spam, task: sst2}\n",
        ":2: row 1: unknown module 'adaptive_spam'",
    ),
    ("runs:\n  - {model: '{model}', module: none, task: sst3}\n", ":2: row 1: unknown task 'sst3'"),
    ("runs:\n  - {" + DENSE + ", steps: 0}\n", "steps 0 is not a whole number of at least 1"),
    ("runs:\n  - {" + DENSE + ", steps: many}\n", "steps 'many' is not a whole number"),
    ("runs:\n  - {" + DENSE + ", step: 2}\n", "unknown key 'step'; a row has the keys"),
    ("runs:\n  - {module: none, task: sst2}\n", "row 1: no model; write model: <name>"),
    ("runs:\n  - {model: '{empty}', module: none, task: sst2}\n", "model folder without config.json"),
    ("seeds: [0, -1]\nruns:\n  - {" + DENSE + "}\n", ":1: seeds: -1 is not a whole number"),
    ("seeds: [1, 1]\nruns:\n  - {" + DENSE + "}\n", "seed 1 is listed twice"),
    ("runs:\n  - {" + DENSE + ", seeds: 3}\n", "seeds: write a non-empty list"),
    ("runs:\n  - {" + DENSE + ", seeds: [true]}\n", "True is not a whole number"),
    ("runs:\n  - {" + DENSE + "}\n  - {" + DENSE + "}\n", ":3: row 2 names bert-none-sst2 again (row 1)"),
    ("runs: []\n", "must be a mapping with a non-empty list 'runs'"),
    ("runs:\n  - [bert, none, sst2]\n", "row 1: a row is a mapping"),
    ("rows:\n  - {" + DENSE + "}\n", "must be a mapping with a non-empty list 'runs'"),
    ("runs:\n  - {" + DENSE + "\n", "not valid YAML"),
    ("resources: 2\nruns:\n  - {" + DENSE + "}\n", ":1: resources: write a mapping of cpus, gpus"),
    ("runs:\n  - {" + DENSE + ", resources: {cpu: 2}}\n", "row 1: resources: unknown key 'cpu'"),
    ("runs:\n  - {" + DENSE + ", resources: {cpus: 0}}\n", "cpus 0 is not a number more than 0"),
    ("runs:\n  - {" + DENSE + ", resources: {gpus: -1}}\n", "gpus -1 is not a number 0 or more"),
    ("runs:\n  - {" + DENSE + ", resources: {memory_gib: '8G'}}\n", "memory_gib '8G' is not a number"),
]


def _exit_status(argv: list[str]) -> int:
    """`main(argv)`, or the status of the `SystemExit` argparse raises on a bad option."""
    try:
        return main(argv)
    except SystemExit as exit:
        return exit.code


def _refuse_runs(monkeypatch) -> None:
    monkeypatch.setattr(sweep_stage, "run_publish", lambda options: pytest.fail("a run started on bad input"))


@pytest.mark.parametrize(("text", "message"), BAD_MATRICES)
def test_a_bad_matrix_is_one_line_and_exit_2_before_any_training(
    study, tmp_path, monkeypatch, capsys, text, message
):
    _refuse_runs(monkeypatch)
    (tmp_path / "empty").mkdir()
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(text.replace("{model}", str(study.model)).replace("{empty}", str(tmp_path / "empty")))
    code = main(study.argv(tmp_path / "runs", tmp_path / "cards", matrix))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: {matrix}") and message in err, err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "cards").exists()


def test_a_missing_matrix_file_is_one_line(study, tmp_path, monkeypatch, capsys):
    _refuse_runs(monkeypatch)
    assert main(study.argv(tmp_path / "runs", tmp_path / "cards", tmp_path / "nowhere.yaml")) == 2
    err = capsys.readouterr().err
    matrix = tmp_path / "nowhere.yaml"
    assert err == f"error: {matrix}: no such matrix file; pass a YAML file like cards/matrix.yaml\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--push"], "--push needs --hub-org ORG"),
        (["--sign-key", "key.pem"], "--sign-key only applies with --push"),
        (["--hub-org", "not/an-org"], "argument --hub-org: 'not/an-org' is not a Hub user or organisation"),
        (["--seeds", "-1"], "argument --seeds: -1 must be at least 0"),
        (["--seeds", "1", "1"], "--seeds: seed 1 is listed twice"),
        (["--only", "nothing"], "--only nothing matches no run"),
        (["--data-dir", "{tmp}"], "no folder 'SST-2' or 'sst2' for task sst2"),
        (["--cards", "{runs}"], "overlaps the run folder"),
        (["--address", "127.0.0.1:6379"], "--address only applies with --executor ray"),
        (["--retries", "3"], "--retries only applies with --executor ray"),
        (["--executor", "ray", "--retries", "-1"], "argument --retries: -1 must be at least 0"),
    ],
)
def test_bad_options_are_one_line_and_exit_2_before_any_training(
    study, tmp_path, monkeypatch, capsys, options, message
):
    _refuse_runs(monkeypatch)
    argv = [*study.argv(tmp_path / "runs", tmp_path / "cards"), *options]
    argv = [word.replace("{tmp}", str(tmp_path)).replace("{runs}", str(tmp_path / "runs")) for word in argv]
    assert _exit_status(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


def test_the_ray_executor_without_ray_is_one_line_and_exit_2(study, tmp_path, monkeypatch, capsys):
    _refuse_runs(monkeypatch)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main([*study.argv(tmp_path / "runs", tmp_path / "cards"), "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: --executor ray needs Ray: pip install 'attncard[ray]' (or make install), or use --executor "
        "local\n"
    )
    assert not (tmp_path / "runs").exists()


# --- the leaderboard and the lint of cards -----------------------------------------------------------------

HEADERS = [header for header, _ in COLUMNS]


def _summary(cards: Path) -> dict[str, dict[str, str]]:
    """Runs `attncard summary` on `cards`; returns the leaderboard's rows by module, each a mapping from the
    column header to the cell."""
    assert main(["summary", str(cards)]) == 0
    rows = {}
    for line in (cards / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| bert |"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows[cells[1]] = dict(zip(HEADERS, cells, strict=True))
    return rows


def _line_of(path: Path, fragment: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, start=1) if fragment in line)


def test_the_leaderboard_pools_the_seeds_of_each_group_and_lint_accepts_it(study, copied, capsys):
    _, cards = copied
    rows = _summary(cards)
    assert capsys.readouterr().out == (
        f"wrote {cards.as_posix()}/README.md and {cards.as_posix()}/leaderboard.png: 4 runs in 2 groups\n"
    )
    assert list(rows) == ["none", MODULE]
    for module, row in rows.items():
        names = [f"bert-{module}-sst2-seed{seed}" for seed in SEEDS]
        results = [Results.load(cards / name) for name in names]
        accuracies = [r.metrics.accuracy for r in results]
        assert (row["Model"], row["Task"], row["Steps"], row["Seeds"]) == ("bert", "sst2", str(STEPS), "0, 1")
        mean, sd = statistics.fmean(accuracies), statistics.stdev(accuracies)
        assert row["Accuracy (mean ± sd)"] == f"{mean:.4f} ± {sd:.4f}"
        assert row["Accuracy by seed"] == f"{accuracies[0]:.4f} (seed 0), {accuracies[1]:.4f} (seed 1)"
        statuses = {r.verification.status.value for r in results}
        assert all(status in row["Status"] for status in statuses)
        compression = statistics.median(r.parameters.compression_factor for r in results)
        assert row["Compression"] == f"{compression:.2f}×"
        assert row["Cards"] == f"[seed 0]({names[0]}/README.md), [seed 1]({names[1]}/README.md)"
    assert rows["none"]["Against dense (pooled)"] == "the dense baseline"
    assert rows["none"]["Speed-up at the task's length"] == "not timed: the model's own attention"
    module_results = [Results.load(cards / f"bert-{MODULE}-sst2-seed{seed}") for seed in SEEDS]
    at_length = [task_length_row(r) for r in module_results]
    assert {row.n for row in at_length} == {128}  # the training max_length, measured
    speedup = statistics.median(row.speedup for row in at_length)
    assert rows[MODULE]["Speed-up at the task's length"].startswith(f"{speedup:.2f}× (N 128")
    longest = [r.efficiency.layer_scaling[-1] for r in module_results]
    layer = statistics.median(row.speedup for row in longest)
    assert rows[MODULE]["Layer speed-up at the longest N"].startswith(f"{layer:.2f}× (N {longest[0].n}")
    readme = (cards / "README.md").read_text(encoding="utf-8")
    # The answer first: one line for the module, its verdict and its speed in words.
    assert readme.index("## Which module keeps the dense model's accuracy") < readme.index("## Every group")
    answer = next(line for line in readme.splitlines() if line.startswith(f"| {MODULE} |"))
    keeps, layer_speed = answer.split(" | ")[1:3]
    assert keeps.startswith(("yes: ", "no: ", "not shown: ", "no answer: ")), answer
    assert layer_speed.endswith(f"N {longest[0].n})") and (
        "faster" in layer_speed or "slower" in layer_speed or "no measurable" in layer_speed
    ), answer
    assert "## How each column is computed" in readme and "![" in readme
    assert all(f"- **{header}**: " in readme for header in HEADERS)

    plot = (cards / "leaderboard.png").read_bytes()
    assert plot.startswith(b"\x89PNG")
    _summary(cards)
    assert (cards / "leaderboard.png").read_bytes() == plot  # the same cards, the same bytes
    assert lint_leaderboard(cards) == []
    capsys.readouterr()
    assert main(["lint", str(cards)]) == 0
    assert (
        capsys.readouterr().out
        == f"clean: {cards} (the leaderboard, and each cards copy without its weights)\n"
    )


def test_a_figure_changed_in_the_leaderboard_is_a_finding(study, copied, capsys):
    _, cards = copied
    cell = _summary(cards)[MODULE]["Accuracy (mean ± sd)"]
    readme = cards / "README.md"
    line = _line_of(readme, f"| bert | {MODULE} |")
    mean = float(cell.split()[0])
    forged = f"{mean + 0.25:.4f}" + cell[len(cell.split()[0]) :]
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    # That row only (the dense one may read alike), that cell only (the GLUE metric of SST-2 is accuracy too).
    lines[line - 1] = lines[line - 1].replace(f"| {cell} |", f"| {forged} |")
    readme.write_text("".join(lines), encoding="utf-8")
    with (cards / "leaderboard.png").open("ab") as plot:
        plot.write(b"\0")
    capsys.readouterr()
    assert main(["lint", str(cards)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{cards}/README.md:{line}: column 'Accuracy (mean ± sd)' of row 'bert, {MODULE}, sst2' reads "
        f"'{forged}', the cards give '{cell}'",
        f"{cards}/leaderboard.png: is not the plot the cards draw; write it again with `attncard summary "
        f"{cards}`",
        "2 findings",
    ]


def test_a_figure_changed_in_a_cards_copy_is_a_finding(study, copied):
    _, cards = copied
    _summary(cards)
    name = "bert-none-sst2-seed1"
    results = cards / name / "results.json"
    data = json.loads(results.read_text(encoding="utf-8"))
    data["metrics"]["accuracy"] = 0.125
    results.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    findings = [str(finding) for finding in lint_leaderboard(cards)]
    line = _line_of(cards / "README.md", "| bert | none |")
    # The copy's card no longer shows its results.json, and the leaderboard no longer shows the cards.
    assert any(f.startswith(f"{name}/README.md:") and "model-index accuracy" in f for f in findings), findings
    assert any(
        f.startswith(f"README.md:{line}: column 'Accuracy by seed' of row 'bert, none, sst2'")
        and "0.1250" in f
        for f in findings
    ), findings
    # The plot shows the module runs' speed-ups (and their paired differences, which the dense accuracy
    # alone does not change): a faster module is another plot.
    module_results = cards / f"bert-{MODULE}-sst2-seed1" / "results.json"
    data = json.loads(module_results.read_text(encoding="utf-8"))
    data["efficiency"]["layer_scaling"][-1]["speedup"] *= 10
    module_results.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    findings = [str(finding) for finding in lint_leaderboard(cards)]
    assert "leaderboard.png: is not the plot the cards draw" in "\n".join(findings)


def test_a_cards_copy_is_linted_as_the_run_folder_without_its_weights(study, copied, capsys):
    runs, cards = copied
    name = f"bert-{MODULE}-sst2-seed0"
    copy = cards / name
    weights = sorted(p for p in Results.load(copy).manifest if p.endswith(".safetensors"))
    assert weights and is_cards_copy(copy) and not is_cards_copy(runs / name)
    assert lint_run_folder(copy, cards_copy=True) == []
    # As a run folder it lacks its weights; a run folder is checked as before.
    assert [str(f) for f in lint_run_folder(copy)] == [
        f"{path}: missing, but listed in results.json's manifest" for path in weights
    ]
    assert lint_run_folder(runs / name) == []
    assert main(["lint", str(copy)]) == 0
    assert capsys.readouterr().out == (
        f"clean: {copy} (a cards copy: every file but the weights, which are not there)\n"
    )
    (copy / "config.json").unlink()
    (copy / "notes.txt").write_text("not part of the run\n", encoding="utf-8")
    assert main(["lint", str(copy)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert f"{copy}/config.json: missing, but listed in results.json's manifest" in out
    assert f"{copy}/notes.txt: not in results.json's manifest" in out


def test_the_pooled_verdict_sums_the_counts_of_the_seeds(study, copied):
    _, cards = copied
    dense = [
        baseline_record(
            cards / f"bert-none-sst2-seed{seed}", Results.load(cards / f"bert-none-sst2-seed{seed}")
        )
        for seed in SEEDS
    ]
    counts = {0: (30, 3, 1, 6), 1: (28, 4, 2, 6)}
    for seed in SEEDS:
        folder = cards / f"bert-{MODULE}-sst2-seed{seed}"
        results = Results.load(folder)
        results.comparison = comparison_from_counts(*counts[seed], baselines=[dense[seed]])
        results.save(folder)
    pooled = comparison_from_counts(58, 7, 3, 12, baselines=dense)
    cell = _summary(cards)[MODULE]["Against dense (pooled)"]
    assert cell.startswith(f"{pooled.verdict.value}: +{100 * pooled.difference:.2f} points [")
    # The tiny dense runs learned nothing (they FAIL): the verdict is given, and why it answers nothing.
    verdict, reason = cell.split("; no answer: ")
    assert verdict.endswith(f"McNemar p {pooled.mcnemar_p:.2g}, n 80 (seeds 0, 1)"), cell
    assert reason.startswith("the dense runs of seeds 0, 1 FAIL"), cell

    folder = cards / f"bert-{MODULE}-sst2-seed1"
    results = Results.load(folder)
    results.comparison = no_baseline()
    results.save(folder)
    alone = comparison_from_counts(*counts[0], baselines=[dense[0]])
    cell = _summary(cards)[MODULE]["Against dense (pooled)"]
    assert cell.startswith(f"{alone.verdict.value}: ")
    assert "n 40 (seed 0); no answer: the dense run of seed 0 FAILs" in cell, cell
    assert cell.endswith("; not compared: seed 1 (no dense baseline found)"), cell


def test_a_cards_folder_the_summary_cannot_pool_is_one_line(study, copied, tmp_path, capsys):
    _, cards = copied
    shutil.copytree(cards / "bert-none-sst2-seed0", cards / "again")
    assert main(["summary", str(cards)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "again and bert-none-sst2-seed0 are the same model, module, task and seed 0" in err
    (tmp_path / "empty").mkdir()
    assert main(["summary", str(tmp_path / "empty")]) == 2
    assert "no cards copy (*/results.json) in it" in capsys.readouterr().err


# --- the paired verdict of the study's runs ----------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_each_module_run_is_compared_with_its_own_seeds_dense_run(study, seed):
    module_run = Results.load(study.runs / f"bert-{MODULE}-sst2-seed{seed}")
    dense_folder = study.runs / f"bert-none-sst2-seed{seed}"
    dense = Results.load(dense_folder)
    comparison = module_run.comparison
    assert comparison is not None and [b.repo_name for b in comparison.baselines] == [dense_folder.name]
    (baseline,) = comparison.baselines
    assert baseline == baseline_record(dense_folder, dense) and baseline.seed == seed
    assert comparison.n == module_run.verification.n
    assert comparison.both_correct + comparison.module_only == module_run.verification.correct
    assert comparison.both_correct + comparison.baseline_only == dense.verification.correct
    assert dense.comparison is None  # the dense run is the baseline, not compared
    card = (study.runs / f"bert-{MODULE}-sst2-seed{seed}" / "README.md").read_text(encoding="utf-8")
    assert f"Against the dense model ({dense_folder.name}, accuracy" in card


def test_verify_predictions_recomputes_the_verdict_from_both_predictions_files(study, copied, capsys):
    _, cards = copied
    run = cards / f"bert-{MODULE}-sst2-seed0"
    code = main(["verify", "--predictions", str(run), "--data-dir", str(study.glue)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"comparison\.verdict\s", out) and re.search(r"comparison\.mcnemar_p\s", out), out


def test_a_dense_run_whose_predictions_were_changed_is_refused_as_baseline(study, copied, capsys):
    _, cards = copied
    dense = cards / "bert-none-sst2-seed0" / "predictions.csv"
    lines = dense.read_text(encoding="ascii").splitlines(keepends=True)
    index, label, prediction, *logits = lines[1].rstrip("\n").split(",")
    lines[1] = ",".join([index, label, str(1 - int(prediction)), *reversed(logits)]) + "\n"
    dense.write_text("".join(lines), encoding="ascii")
    run = cards / f"bert-{MODULE}-sst2-seed0"
    code = main(["verify", "--predictions", str(run), "--data-dir", str(study.glue)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "predictions.csv" in err, err


def test_publish_refuses_a_baseline_that_is_not_a_dense_run_of_the_setup_before_training(
    study, copied, monkeypatch, capsys, tmp_path
):
    from attncard.pipeline.publish import publish as publish_stage

    monkeypatch.setattr(publish_stage, "train", lambda *args, **kwargs: pytest.fail("trained on bad input"))
    runs, _ = copied
    common = [
        *("publish", "--model", str(study.model), "--module", MODULE),
        *("--steps", str(STEPS), "--batch-size", "4"),
        *("--data-dir", str(study.glue), "--output", str(tmp_path / "out")),
    ]
    for baseline, message in (
        (runs / f"bert-{MODULE}-sst2-seed0", "its module is 'svd_lowrank', not 'none'"),
        (runs / "bert-none-sst2-seed1", "it was trained with"),  # seed 1's dense run, for a run of seed 0
        (tmp_path / "missing", "not found"),
    ):
        code = main([*common, "--baseline", str(baseline)])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()
