"""`attncard summary CARDS` on the committed study's cards copies (cards/): the same cards give the same
bytes, and one run compared at another margin than its seeds (issue 42, item 5) is a row of its own instead of
stopping the whole leaderboard, in `summary CARDS` and in `summary --hub ORG` alike."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from attncard.pipeline.card.plots import PLOT_TILE_RMS_TOLERANCE, plot_difference
from attncard.pipeline.cli import main, publish_main
from conftest import HUB_USER, REPO_ROOT, quick_scaling
from hub_server import LoopbackHub

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


def test_the_committed_cards_give_the_same_leaderboard(cards: Path) -> None:
    """The same README, byte for byte; the same leaderboard plot by its pixels, as lint compares it: another
    numpy (1.26, at the floors) drew it 0.14 tile RMS apart before issue 44 marked the FAIL points, 0.0
    since (with matplotlib 3.8.4)."""
    code, _, err = _summary(cards)

    assert code == 0, err
    assert (cards / "README.md").read_bytes() == (CARDS / "README.md").read_bytes()
    difference = plot_difference(
        (cards / "leaderboard.png").read_bytes(), (CARDS / "leaderboard.png").read_bytes()
    )
    assert difference is not None and difference.worst_tile_rms <= PLOT_TILE_RMS_TOLERANCE, difference


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
    from attncard.pipeline.study.hub_leaderboard import DEFAULT_SUMMARY_DEADLINE_S, FETCHING_RUNS

    with pytest.raises(SystemExit):
        main(["summary", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"downloads ({FETCHING_RUNS} at once)" in shown
    assert f"(default: {DEFAULT_SUMMARY_DEADLINE_S:g})" in shown


def _hub_summary(hub: LoopbackHub, output: Path, glue: Path) -> tuple[int, str, str, str]:
    """`attncard summary --hub`: `(exit status, stdout, stderr, README.md or "")`."""
    out, err = io.StringIO(), io.StringIO()
    argv = [
        *("summary", "--hub", HUB_USER, "--output", str(output), "--data-dir", str(glue)),
        *("--hub-endpoint", hub.endpoint),
    ]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    readme = output / "README.md"
    return code, out.getvalue(), err.getvalue(), readme.read_text("utf-8") if readme.is_file() else ""


def _hub_rows(readme: str) -> dict[str, dict[str, str]]:
    """The rows of the leaderboard's table by their Module cell, each a mapping from header to cell."""
    rows = [line for line in readme.split("## Every group", 1)[1].splitlines() if line.startswith("|")]
    headers = [cell.strip() for cell in rows[0].strip("|").split(" | ")]
    cells = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]
    return {row[1]: dict(zip(headers, row, strict=True)) for row in cells}


# Publishes three tiny runs of its own and checks every run against the Hub twice: 30-60 s on two cores.
@pytest.mark.slow
def test_a_run_published_at_another_margin_is_a_row_of_its_own_in_summary_hub(
    hub: LoopbackHub, tiny_gpt2_run, gpt2_base: Path, tmp_path: Path
) -> None:
    """Honest runs, pushed as `attncard push` pushes them: the dense tiny GPT-2 run at seeds 0 and 1, the
    module at seed 0 with the default margin and at seed 1 with `publish --margin 2` (both FAIL: 10 steps).
    `summary --hub` used to exit 2 and write nothing (the seeds' comparisons cannot be pooled); now every run
    is verified, the margin-2 run is a row of its own naming its margin, and the other rows are those of the
    leaderboard without it."""
    from attncard.pipeline.publish.push import push_run_folder
    from attncard.pipeline.record.results import Results

    run_dir, glue = tiny_gpt2_run
    runs = tmp_path / "runs"
    shutil.copytree(run_dir, runs / run_dir.name)  # the dense run at seed 0, the module's seed-0 baseline
    for module, seed, margin in (("none", 1, ()), (MODULE, 0, ()), (MODULE, 1, ("--margin", "2"))):
        name = f"tiny-gpt2-{module}-sst2" + (f"-seed{seed}" if seed else "")
        argv = [
            *("--model", str(gpt2_base), "--module", module, "--seed", str(seed)),
            *("--steps", "10", "--batch-size", "8", "--lr", "3e-2", *margin),  # as tiny_gpt2_run trains
            *("--data-dir", str(glue), "--output", str(runs), "--repo-id", f"{HUB_USER}/{name}"),
        ]
        with quick_scaling():
            assert publish_main(argv) == 0
    names = sorted(path.name for path in runs.iterdir())
    margins = {name: Results.load(runs / name).comparison for name in names}
    assert {name: (c.margin, c.baselines[0].seed) for name, c in margins.items() if c is not None} == {
        f"tiny-gpt2-{MODULE}-sst2": (0.01, 0),
        f"tiny-gpt2-{MODULE}-sst2-seed1": (0.02, 1),
    }

    def push(name: str) -> None:
        push_run_folder(runs / name, f"{HUB_USER}/{name}", endpoint=hub.endpoint, allow_fail=True)

    for name in names:
        if name != f"tiny-gpt2-{MODULE}-sst2-seed1":
            push(name)
    code, out, err, before = _hub_summary(hub, tmp_path / "before", glue)
    assert code == 0 and "3 runs verified, 0 refused" in out, err
    push(f"tiny-gpt2-{MODULE}-sst2-seed1")

    code, out, err, readme = _hub_summary(hub, tmp_path / "board", glue)

    assert code == 0 and "4 runs verified, 0 refused" in out, err
    assert (tmp_path / "board" / "leaderboard.png").is_file()
    rows, earlier = _hub_rows(readme), _hub_rows(before)
    default, wider = (f"{MODULE} (compared at margin {m}, 95% interval)" for m in ("1 point", "2 points"))
    assert set(rows) == {"none", default, wider}, rows
    assert rows[wider]["Seeds"] == "1" and "margin 2 points" in rows[wider]["Against dense (pooled)"]
    assert rows[wider]["Checks passed"] == (
        "run tag, manifest, card, figures from predictions.csv, paired verdict from both runs' predictions"
    )
    # The default-margin rows are those of the leaderboard without the margin-2 run, but for the module's
    # name, which now names its setting.
    assert set(earlier) == {"none", MODULE} and earlier[MODULE]["Seeds"] == "0", earlier
    assert {**rows[default], "Module": MODULE} == earlier[MODULE]
    assert rows["none"] == earlier["none"] and rows["none"]["Seeds"] == "0, 1"
    assert "compared with the dense runs at different margins or confidences" in readme
    assert readme.split("## Refused", 1)[1].split("\n## ", 1)[0].strip().startswith("No run failed a check.")
