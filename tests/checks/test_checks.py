"""One ordered list of checks (issue 43, item 4): `attncard download`, `attncard verify --predictions` and
`attncard summary --hub` run the checks of pipeline/checks/registry.py, each with its profile.

The registry's order and each profile's checks are pinned; an entry added to the registry runs in every
profile that has its needs and in no other; `verify --predictions` now refuses a redrawn plot and an edited
card in a download's words (exit 2), while a figure that differs stays a MISMATCH (exit 1); and a leaderboard
refuses an edited card with the very line a download gives.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import numpy as np
import pytest

from attncard.pipeline.checks import registry as checks
from attncard.pipeline.checks.registry import (
    CHECKS,
    DOWNLOAD,
    PROFILES,
    SUMMARY_HUB,
    VERIFY_PREDICTIONS,
    Check,
    CheckedRun,
    Need,
    checks_of,
    run_checks,
)
from attncard.pipeline.cli import main
from attncard.pipeline.record.errors import IntegrityError
from attncard.pipeline.record.manifest import CARD_FILE, PREDICTIONS_FILE, RESULTS_FILE, sha256_file
from attncard.pipeline.record.results import PLOT_STYLE, Results
from attncard.pipeline.study.hub_leaderboard import write_hub_summary
from attncard.pipeline.verify.download import download_verified
from attncard.pipeline.verify.reverify_predictions import reverify_predictions
from conftest import HUB_USER, TINY_GPT2_REPO, commit_run_folder
from run_folders import MINE, loss_plot, sealed_copy

CARDS = Path(__file__).resolve().parents[2] / "cards"
DOCS = CARDS.parent / "docs"
DENSE = CARDS / "minilm-none-sst2-seed0"  # a committed cards copy: predictions, card, plots, no weights


def names(profile) -> list[str]:
    return [check.name for check in checks_of(profile)]


def verify_predictions(folder: Path, glue: Path, *more: str) -> tuple[int, str, str]:
    """`attncard verify --predictions FOLDER --data-dir GLUE ...`: `(exit status, stdout, stderr)`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["verify", "--predictions", str(folder), "--data-dir", str(glue), *more])
    return code, out.getvalue(), err.getvalue()


def reseal_card(folder: Path, edit) -> None:
    """The card rewritten by `edit` and its new sha256 written into the manifest, as a forger would."""
    card = folder / CARD_FILE
    card.write_text(edit(card.read_text(encoding="utf-8")), encoding="utf-8")
    results = Results.load(folder)
    results.manifest = {**results.manifest, CARD_FILE: sha256_file(card)}
    results.save(folder)


def edited_card(text: str) -> str:
    """The card with its first figure of four decimals shown otherwise."""
    accuracy = next(word for word in text.split() if word.startswith("0.") and len(word.rstrip("|,")) == 6)
    return text.replace(accuracy, "0.9999", 1)


# --- the registry -------------------------------------------------------------------------------------------


def test_the_registry_order_and_what_each_profile_runs():
    assert [check.name for check in CHECKS] == [
        "run tag",
        "files",
        "listed repository",
        "module",
        "adapter config",
        "figures",
        "stock load record",
        "predictions listed",
        "predictions",
        "figures from predictions",
        "card",
        "signature",
        "status",
    ]
    assert names(DOWNLOAD) == [
        *("run tag", "files", "module", "adapter config", "figures", "stock load record"),
        *("predictions", "card", "signature", "status"),
    ]
    assert names(VERIFY_PREDICTIONS) == [
        *("files", "figures", "predictions listed", "predictions", "figures from predictions", "card"),
    ]
    assert names(SUMMARY_HUB) == [
        *("run tag", "files", "listed repository", "figures", "predictions listed", "predictions"),
        *("figures from predictions", "card", "signature"),
    ]
    # The card comes after the recomputation, so that a figure that differs stays a MISMATCH.
    assert names(VERIFY_PREDICTIONS).index("card") > names(VERIFY_PREDICTIONS).index(
        "figures from predictions"
    )
    # Neither command that runs without torch runs a check that needs it.
    for profile in (VERIFY_PREDICTIONS, SUMMARY_HUB):
        assert not [check.name for check in checks_of(profile) if Need.TORCH in check.needs]


def test_the_table_of_docs_downloading_md_is_the_registry():
    """docs/downloading.md, "The checks, in order": one row per check, in order, ticked for each command
    that runs it."""
    text = (DOCS / "downloading.md").read_text(encoding="utf-8")
    section = text.split("\n## The checks, in order\n", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| Check ")
    ]
    assert [row[0] for row in rows] == [check.name for check in CHECKS]
    for column, profile in ((2, DOWNLOAD), (3, VERIFY_PREDICTIONS), (4, SUMMARY_HUB)):
        assert [row[0] for row in rows if row[column] == "✓"] == names(profile), profile.name


def test_start_and_stop_must_name_a_check_of_the_profile(tiny_gpt2_run):
    run = CheckedRun(tiny_gpt2_run[0], "run")
    with pytest.raises(ValueError, match=r"verify --predictions runs no check named 'status'"):
        run_checks(VERIFY_PREDICTIONS, run, stop="status")


@pytest.mark.parametrize(
    ("needs", "expected"),
    [
        pytest.param(set(), {"download", "verify --predictions", "summary --hub"}, id="needs nothing"),
        pytest.param({Need.TORCH}, {"download"}, id="torch"),
        pytest.param(
            {Need.PREDICTIONS, Need.RECOMPUTE}, {"verify --predictions", "summary --hub"}, id="recompute"
        ),
        pytest.param({Need.LISTING, Need.SIGNATURE}, {"summary --hub"}, id="listing and signature"),
    ],
)
def test_one_entry_added_runs_in_every_profile_with_its_needs_and_only_those(
    tiny_gpt2_run, tmp_path, monkeypatch, needs, expected
):
    run_dir, glue = tiny_gpt2_run
    seen: list[tuple[str, str]] = []

    def noted(run: CheckedRun, profile) -> None:  # what it saw: the checks before it had read results.json
        seen.append((profile.name, run.read().repo_id))

    entry = Check("noted", noted, frozenset(needs), "notes that it ran")
    after_files = [check.name for check in CHECKS].index("files") + 1
    monkeypatch.setattr(checks, "CHECKS", [*CHECKS[:after_files], entry, *CHECKS[after_files:]])
    for profile in PROFILES:
        assert ("noted" in names(profile)) == (profile.name in expected), profile.name

    # And it runs: each command, on the tiny run (a local folder; a leaderboard's as if listed).
    download_verified(run_dir)
    assert reverify_predictions(run_dir, data_dir=glue).matches
    listed = CheckedRun(run_dir, "listed", repo_id=TINY_GPT2_REPO, data_dir=glue)
    run_checks(SUMMARY_HUB, listed)
    assert not listed.differs
    assert sorted(profile for profile, _ in seen) == sorted(expected)
    assert {repo for _, repo in seen} <= {TINY_GPT2_REPO}


# --- verify --predictions: the card and the plots -----------------------------------------------------------


@pytest.mark.slow
def test_verify_predictions_refuses_a_redrawn_loss_plot_in_a_downloads_words(glue, tmp_path):
    """One step's loss moved by 0.05 and the plot drawn again, sealed into the manifest with the card: every
    figure still matches its recomputation, and the plot is refused as a download refuses it."""
    sealed = sealed_copy(tmp_path / "sealed", MINE, plot_style=PLOT_STYLE)  # as it is: it passes
    code, out, err = verify_predictions(sealed, glue, "--baseline", str(CARDS))
    assert code == 0 and "MATCH: " in out, err
    forged = sealed_copy(tmp_path / "forged", MINE, loss_plot(tmp_path, 0.05, PLOT_STYLE), PLOT_STYLE)

    code, out, err = verify_predictions(forged, glue, "--baseline", str(CARDS))

    assert code == 2, out + err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(
        f"error: {forged}: the card does not show what {RESULTS_FILE} records: training_loss.png is not the "
        "plot results.json draws: a 32-pixel tile of it is "
    ), err
    assert err.rstrip().endswith("do not use this checkpoint"), err
    assert "it was edited after publishing, or rendered by another attncard" in err


def test_an_edited_card_resealed_is_refused_by_verify_predictions(glue, tmp_path):
    folder = tmp_path / DENSE.name
    shutil.copytree(DENSE, folder)
    code, out, err = verify_predictions(folder, glue)
    assert code == 0, out + err
    reseal_card(folder, edited_card)

    code, out, err = verify_predictions(folder, glue)

    assert code == 2, out + err
    assert f"error: {folder}: the card does not show what {RESULTS_FILE} records: {CARD_FILE} line " in err
    assert err.rstrip().endswith("do not use this checkpoint"), err
    with pytest.raises(IntegrityError, match=r"the card does not show what results\.json records"):
        reverify_predictions(folder, data_dir=glue)


def test_a_figure_that_differs_stays_a_mismatch_when_the_card_is_edited_too(glue, tmp_path):
    """The figures are recomputed before the card is checked: the MISMATCH is the answer, exit 1."""
    folder = tmp_path / DENSE.name
    shutil.copytree(DENSE, folder)
    reseal_card(folder, edited_card)
    path = folder / PREDICTIONS_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    fields = lines[1].split(",")
    column = 3 + int(fields[2])  # row 0's predicted logit, raised: its prediction stays, the loss moves
    fields[column] = repr(float(np.float32(float(fields[column]) + 0.25)))
    path.write_text("\n".join([lines[0], ",".join(fields), *lines[2:]]) + "\n", encoding="utf-8")
    results = Results.load(folder)
    results.manifest = {**results.manifest, PREDICTIONS_FILE: sha256_file(path)}
    results.save(folder)

    code, out, err = verify_predictions(folder, glue)

    assert code == 1, out + err
    assert out.splitlines()[-1].startswith("MISMATCH: metrics.loss "), out
    assert err == ""


# --- summary --hub and download: one card problem, one wording ----------------------------------------------


@pytest.mark.slow
def test_summary_hub_and_download_refuse_an_edited_card_in_the_same_words(tiny_gpt2_run, hub, tmp_path):
    from huggingface_hub import HfApi

    from attncard.pipeline.record.run_names import run_tag

    run_dir, glue = tiny_gpt2_run
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    reseal_card(folder, edited_card)
    commit_run_folder(hub.endpoint, TINY_GPT2_REPO, folder)
    tag = run_tag(Results.load(folder).started_at, sha256_file(folder / RESULTS_FILE))
    HfApi(endpoint=hub.endpoint).create_tag(TINY_GPT2_REPO, tag=tag)

    with pytest.raises(IntegrityError) as refused:
        download_verified(TINY_GPT2_REPO, tag, cache_dir=str(tmp_path / "cache"))
    summary = write_hub_summary(HUB_USER, tmp_path / "board", data_dir=glue)

    assert summary.verified == [] and [run.repo_id for run in summary.refused] == [TINY_GPT2_REPO]
    assert "the card does not show what results.json records: README.md line" in str(refused.value)
    assert summary.refused[0].reason == str(refused.value)
