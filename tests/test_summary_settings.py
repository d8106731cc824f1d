"""`attncard summary CARDS` on the committed study's cards copies (cards/): the same cards give the same
bytes, and one run compared at another margin than its seeds (issue 42, item 5) is a row of its own instead of
stopping the whole leaderboard."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from attncard.pipeline.cli import main
from conftest import REPO_ROOT

CARDS = REPO_ROOT / "cards"
MODULE = "svd_lowrank"


@pytest.fixture
def cards(tmp_path: Path) -> Path:
    """A copy of the committed cards folder."""
    return Path(shutil.copytree(CARDS, tmp_path / "cards"))


def _summary(cards_dir: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["summary", str(cards_dir)])
    return code, out.getvalue(), err.getvalue()


def _rows(readme: str, module: str) -> list[list[str]]:
    """The cells of the table rows of `module` on SST-2."""
    table = readme.split("## Every group", 1)[1]
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table.splitlines()]
    return [cells for cells in rows if len(cells) > 2 and cells[1].startswith(module) and cells[2] == "sst2"]


def test_the_committed_cards_give_the_same_bytes(cards: Path) -> None:
    code, _, err = _summary(cards)

    assert code == 0, err
    assert (cards / "README.md").read_bytes() == (CARDS / "README.md").read_bytes()
    assert (cards / "leaderboard.png").read_bytes() == (CARDS / "leaderboard.png").read_bytes()


def test_a_run_compared_at_another_margin_is_a_row_of_its_own(cards: Path) -> None:
    record = cards / f"minilm-{MODULE}-sst2-seed1" / "results.json"
    results = json.loads(record.read_text(encoding="utf-8"))
    results["comparison"]["margin"] = 0.02  # as `publish --margin 2` records it
    record.write_text(json.dumps(results, indent=2), encoding="utf-8")

    code, out, err = _summary(cards)

    assert code == 0, err
    assert "runs in 11 groups" in out, out
    readme = (cards / "README.md").read_text(encoding="utf-8")
    rows = {cells[1]: cells for cells in _rows(readme, MODULE)}
    assert set(rows) == {
        f"{MODULE} (compared at margin 1 point, 95% interval)",
        f"{MODULE} (compared at margin 2 points, 95% interval)",
    }, rows
    assert rows[f"{MODULE} (compared at margin 1 point, 95% interval)"][4] == "0, 2"
    assert rows[f"{MODULE} (compared at margin 2 points, 95% interval)"][4] == "1"
    assert "margin 2 points" in rows[f"{MODULE} (compared at margin 2 points, 95% interval)"][9]
    # The leaderboard says why, and the other rows are as before.
    assert "compared with the dense runs at different margins or confidences" in readme
    assert _rows(readme, "none") == _rows((CARDS / "README.md").read_text(encoding="utf-8"), "none")


def test_the_whole_commands_deadline_applies_to_hub_only(capsys: pytest.CaptureFixture) -> None:
    assert main(["summary", str(CARDS), "--deadline", "3"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --deadline applies to --hub ORG only; drop it, or pass --hub ORG\n"


def test_the_help_gives_the_deadline_and_pool_the_hub_stage_uses(capsys: pytest.CaptureFixture) -> None:
    """cli/summary does not import the Hub stage for --help: its numbers are written there, and must agree."""
    from attncard.pipeline.hub_summary import DEFAULT_SUMMARY_DEADLINE_S, FETCHING_RUNS

    with pytest.raises(SystemExit):
        main(["summary", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"downloads ({FETCHING_RUNS} at once)" in shown
    assert f"(default: {DEFAULT_SUMMARY_DEADLINE_S:g})" in shown
