from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.cli import main, publish_main


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
        "--push",
    ):
        assert option in out
    assert "minilm" in out and "sst2" in out and "example: publish --model minilm" in out


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


def test_modules_command(capsys):
    assert main(["modules"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert sorted(rows) == ["adaptive_span", "adaptive_sparse", "none", "span_expanded", "svd_lowrank"]
    assert rows["none"] == ["yes", "yes", "yes"]


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
