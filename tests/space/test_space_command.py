"""`attncard space`: the Space folder it writes (its metadata read by huggingface_hub's own SpaceCard, an
app.py whose arguments the command takes), and every combination of arguments that cannot work, refused in one
line with exit status 2 before anything is checked, written or served.
"""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

import pytest
from huggingface_hub import SpaceCard

from attncard.pipeline.cli import main
from attncard.pipeline.cli import space as space_command
from attncard.pipeline.cli.common import OneLineParser
from attncard.pipeline.space.folder import GRADIO_FLOOR, write_space_folder
from conftest import REPO_ROOT

CARDS = REPO_ROOT / "cards"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["space", *argv])
        except SystemExit as exit:  # argparse's own refusals
            code = exit.code
    return code, out.getvalue(), err.getvalue()


def _app_arguments(folder: Path) -> list[str]:
    """The argument list app.py gives `attncard` (its one call of `main`), read without running it."""
    tree = ast.parse((folder / "app.py").read_text(encoding="utf-8"))
    [call] = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "main"
    ]
    return ast.literal_eval(call.args[0])


def test_the_space_folder_of_a_cards_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _run("--cards", str(CARDS), "--output", str(tmp_path / "space"))
    assert (code, err) == (0, ""), err
    folder = tmp_path / "space"
    assert (
        out
        == f"wrote {folder.as_posix()}/: app.py, requirements.txt, README.md and cards/ (30 cards copies)\n"
    )
    card = SpaceCard.load(folder / "README.md")
    assert (card.data.sdk, card.data.app_file, card.data.sdk_version) == ("gradio", "app.py", "6.31.0")
    assert card.data.title == f"attncard leaderboard of {CARDS.name}" and "attncard" in card.data.tags
    assert len(card.data.short_description) <= 60  # the Hub refuses a longer one
    requirements = (folder / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert requirements[0].startswith("attncard @ git+https://github.com/attncard/attncard@")
    assert requirements[1] == f"gradio>={GRADIO_FLOOR}"
    # Every cards copy but weights (the committed ones have none), as the Space checks them again.
    copies = sorted(path.parent.name for path in (folder / "cards").glob("*/results.json"))
    assert copies == sorted(path.parent.name for path in CARDS.glob("*/results.json"))
    assert not list((folder / "cards").rglob("*.safetensors"))
    # app.py runs `attncard space --cards cards --serve` on the Space's host and port: arguments the command
    # takes, from the Space folder.
    arguments = _app_arguments(folder)
    assert arguments == ["space", "--cards", "cards", "--serve", "--host", "0.0.0.0", "--port", "7860"]
    parser = OneLineParser(prog="attncard space")
    space_command.add_arguments(parser)
    monkeypatch.chdir(folder)
    space_command._check_arguments(parser.parse_args(arguments[1:]))


def test_the_space_folder_of_an_organisation_names_no_path_or_token(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token_never_written")
    identity = "https://github.com/attncard/attncard/.github/workflows/publish.yml@refs/tags/*"
    code, _, err = _run(
        "attncard", "--output", str(tmp_path / "space"), "--require-signer", identity, "--interval", "600"
    )
    assert code == 0, err
    arguments = _app_arguments(tmp_path / "space")
    assert arguments == [
        *("space", "attncard", "--require-signer", identity, "--interval", "600.0"),
        *("--serve", "--host", "0.0.0.0", "--port", "7860"),
    ]
    written = "".join(path.read_text(encoding="utf-8") for path in (tmp_path / "space").iterdir())
    assert "hf_secret_token_never_written" not in written and str(tmp_path) not in written
    assert not (tmp_path / "space" / "cards").exists()


def test_write_space_folder_refuses_a_folder_that_holds_files(tmp_path: Path) -> None:
    (tmp_path / "space").mkdir()
    (tmp_path / "space" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(Exception, match=r"not a new folder; pass a new \(or empty\) folder for the Space"):
        write_space_folder(tmp_path / "space", title="t", serve_args=["attncard"])
    assert [path.name for path in (tmp_path / "space").iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            (),
            "give a Hub organisation (attncard space ORG) or a local cards folder (--cards DIR), one of them",
        ),
        (
            ("attncard", "--cards", "cards", "--serve"),
            "give a Hub organisation (attncard space ORG) or a local",
        ),
        (("--cards", "cards"), "say what to do: --serve (serve the page here) or --output DIR"),
        (
            ("attncard", "--serve", "--push", "attncard/leaderboard"),
            "--push pushes the Space folder --output",
        ),
        (
            ("--cards", "cards", "--serve", "--require-signer", "x"),
            "--require-signer applies to ORG only",
        ),
        (
            ("--cards", "cards", "--serve", "--interval", "60"),
            "--interval applies to ORG only; drop it",
        ),
        (
            ("--cards", "cards", "--serve", "--hub-endpoint", "https://hub.example"),
            "--hub-endpoint applies to ORG or --push only; drop it, or add --push SPACE",
        ),
        (("--cards", "no-such-cards", "--serve"), "no-such-cards: no such folder; pass the cards folder"),
        (("attncard", "--output", "OUT", "--require-key", "key.pub"), "--require-key names a file of this"),
        (("attncard", "--serve", "--port", "0"), "--port"),
    ],
)
def test_arguments_that_cannot_work_are_one_line(argv, message, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    argv = tuple(str(tmp_path / "out") if arg == "OUT" else arg for arg in argv)
    code, out, err = _run(*argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    assert not (tmp_path / "out").exists()  # nothing written


def test_push_without_a_token_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("attncard.pipeline.publish.push.get_token", lambda: None)
    code, _, err = _run("attncard", "--output", str(tmp_path / "space"), "--push", "attncard/leaderboard")
    assert code == 2 and "needs a Hub token with write access to attncard: set HF_TOKEN" in err, err
    assert not (tmp_path / "space").exists()


def test_output_and_push_write_the_space_folder_and_push_it_as_one_commit(hub, tmp_path: Path) -> None:
    code, out, err = _run(
        *("--cards", str(CARDS), "--output", str(tmp_path / "space")),
        *("--push", "loopback-user/leaderboard", "--hub-endpoint", hub.endpoint),
    )
    assert code == 0, err
    wrote, pushed = out.splitlines()
    assert wrote.startswith(f"wrote {(tmp_path / 'space').as_posix()}/: app.py, requirements.txt, README.md")
    assert pushed.startswith(
        f"pushed {(tmp_path / 'space').as_posix()}/ to the Space loopback-user/leaderboard"
    )
    for path in ("app.py", "README.md", "cards/minilm-none-sst2-seed0/results.json"):
        local = (tmp_path / "space" / path).read_bytes()
        assert hub.read_file("loopback-user/leaderboard", path, repo_type="space") == local, path
