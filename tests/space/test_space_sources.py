"""Where the page's rows come from, each run checked first (pipeline/space/source.py): a local cards folder
whose forged copy is refused, the Hub's runs verified once and then re-checked only when something changed,
and a check that fails keeping the rows of the last one, saying why.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attncard.pipeline.publish.publish import copy_to_cards
from attncard.pipeline.publish.push import push_run_folder
from attncard.pipeline.record.errors import DownloadError, HubUnreachableError
from attncard.pipeline.space.source import LOCAL_CHECKS, Checker, check_cards, check_hub
from attncard.pipeline.space.table import Leaderboard
from attncard.pipeline.study import hub_leaderboard
from conftest import HUB_USER, TINY_GPT2_REPO


@pytest.fixture
def cards(tiny_gpt2_run, tmp_path: Path) -> Path:
    cards = tmp_path / "cards"
    copy_to_cards(tiny_gpt2_run[0], cards)
    return cards


def test_a_cards_folder_shows_its_checked_copies_and_refuses_a_forged_one(cards, tiny_gpt2_run, tmp_path):
    glue = tiny_gpt2_run[1]
    board = check_cards(cards, data_dir=glue, work_dir=tmp_path / "page")
    [row] = board.rows
    assert (row.module, row.task, row.checks, board.refused) == ("none", "sst2", LOCAL_CHECKS, ())
    assert row.cards == ((0, "cards/tiny-gpt2-none-sst2/README.md"),)
    assert board.checked_at.endswith("+00:00") and board.source == f"the cards folder {cards.as_posix()}"
    # Its predictions edited in place: refused with the reason, not shown.
    predictions = cards / "tiny-gpt2-none-sst2" / "predictions.csv"
    lines = predictions.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = lines[1].replace(",0,", ",1,", 1) if ",0," in lines[1] else lines[1].replace(",1,", ",0,", 1)
    predictions.write_text("".join(lines), encoding="utf-8")
    forged = check_cards(cards, data_dir=glue, work_dir=tmp_path / "page")
    assert forged.rows == () and len(forged.refused) == 1
    name, reason = forged.refused[0]
    assert name == "tiny-gpt2-none-sst2" and "predictions.csv" in reason, reason
    # One check's folder at a time under the work folder: the older is removed.
    assert [path.name for path in (tmp_path / "page").iterdir()] == ["cards-2"]


def test_a_folder_without_cards_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match=r"no cards copy \(\*/results.json\) in it; pass the folder"):
        check_cards(tmp_path, work_dir=tmp_path / "page")


def test_a_failed_check_keeps_the_last_rows_and_says_why(cards, tiny_gpt2_run, tmp_path) -> None:
    answers = [
        lambda: check_cards(cards, data_dir=tiny_gpt2_run[1], work_dir=tmp_path / "page"),
        lambda: (_ for _ in ()).throw(HubUnreachableError("could not list the models of org; try again")),
    ]
    checker = Checker(lambda: answers.pop(0)(), "the cards")
    assert checker.current.rows == () and checker.current.checked_at == ""
    first = checker.refresh()
    assert len(first.rows) == 1 and first.problem == ""
    second = checker.refresh()
    assert second.rows == first.rows and second.problem == "could not list the models of org; try again"
    assert checker.current is second and second.checked_at >= first.checked_at


def test_a_first_check_that_fails_shows_no_row() -> None:
    def unreachable() -> Leaderboard:
        raise HubUnreachableError("could not list the models of org on https://hub.example; try again")

    board = Checker(unreachable, "the Hub organisation org").refresh()
    assert board.rows == () and board.problem.startswith("could not list the models of org")


@pytest.mark.slow  # a push and three checks of the Hub: about 4 s
def test_the_hub_is_checked_again_only_where_something_changed(hub, tiny_gpt2_run, tmp_path, monkeypatch):
    run_dir, glue = tiny_gpt2_run
    push_run_folder(run_dir, TINY_GPT2_REPO, endpoint=hub.endpoint)
    recomputed: list[str] = []
    check = hub_leaderboard._check

    def counted(run, output, options):
        recomputed.append(run.repo_id)
        return check(run, output, options)

    monkeypatch.setattr(hub_leaderboard, "_check", counted)
    work = tmp_path / "page"
    first = check_hub(HUB_USER, work_dir=work, endpoint=hub.endpoint, data_dir=glue)
    assert [row.module for row in first.rows] == ["none"] and recomputed == [TINY_GPT2_REPO]
    [(_, link)] = first.rows[0].cards
    assert link.startswith(f"{hub.endpoint}/{TINY_GPT2_REPO}/blob/run-") and link.endswith("/README.md")
    memo = json.loads((work / "verified.json").read_text(encoding="utf-8"))
    # A dense run names no baseline: its key is its tag alone.
    assert list(memo["verified"]) == [f"{TINY_GPT2_REPO}@{link.split('/')[-2]}:"]
    # Nothing changed: the run is fetched from the cache and checked against its tag, not recomputed.
    resolved = hub.request_count("resolve")
    again = check_hub(HUB_USER, work_dir=work, endpoint=hub.endpoint, data_dir=glue)
    assert again.rows == first.rows and recomputed == [TINY_GPT2_REPO]
    assert again.rows[0].checks == first.rows[0].checks
    assert hub.request_count("resolve") - resolved < resolved  # the cache answered most of it
    # Other settings (another data folder) check again; so does a memo that does not read.
    other = shutil.copytree(glue, tmp_path / "other-glue")
    check_hub(HUB_USER, work_dir=work, endpoint=hub.endpoint, data_dir=other)
    assert recomputed == [TINY_GPT2_REPO] * 2
    (work / "verified.json").write_text("{not json", encoding="utf-8")
    check_hub(HUB_USER, work_dir=work, endpoint=hub.endpoint, data_dir=other)
    assert recomputed == [TINY_GPT2_REPO] * 3


def test_an_organisation_without_runs_is_said_so(hub, tmp_path: Path) -> None:
    from attncard.pipeline.space.app import _status

    board = check_hub("nobody-here", work_dir=tmp_path / "page", endpoint=hub.endpoint)
    assert board.rows == () and board.refused == () and board.problem == ""
    status = _status(board, 0)
    assert status.startswith("No attncard run of the Hub organisation nobody-here") and "was found" in status
