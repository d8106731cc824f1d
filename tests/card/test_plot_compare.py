"""Plots are compared by what they show, not by their bytes (issue 43, item 2).

A committed run's training-loss plot as two other matplotlib releases drew it the first way (as the copies
were drawn before issue 43 moved them to plot style 2), by bench/plot_tolerance.py (`draw`, in throwaway
venvs), are the fixtures: tests/support/fixtures/plots/training_loss_matplotlib_3.11.1.png (the locked
3.11.2's pixels, other bytes: its Software chunk names 3.11.1) and ..._3.10.9.png (another family: the legend
elsewhere, the per-step line simplified otherwise), both of cards/minilm-adaptive_span-mrpc-seed0.
leaderboard_style2_matplotlib_3.10.9.png is cards/leaderboard.png drawn by matplotlib 3.10.9 (issue 44: the
FAIL points marked; issue 46: the names placed apart; `draw_leaderboard` with `PYTHONPATH` at a `pip install
--target` of 3.10.9): the same pixels as the locked 3.11.2's, other bytes (its Software chunk).
The ..._style2_... fixtures are that run's training-loss plot in plot style 2, as every run published now
records it, drawn by 3.10.9 and 3.8.4 (`draw --style 2`), and with one step's loss moved by 0.05 (`forge
--style 2`, its step-loss-0.05).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import matplotlib
import pytest
from matplotlib.figure import Figure

from attncard.pipeline.card.plots import PLOT_TILE_RMS_TOLERANCE, plot_difference, write_plots
from attncard.pipeline.card.render import render_card
from attncard.pipeline.checks.card_render import OtherMatplotlibProblem, card_problems
from attncard.pipeline.checks.integrity import read_results
from attncard.pipeline.checks.lint import lint_leaderboard
from attncard.pipeline.record.environment import EnvironmentRecord
from attncard.pipeline.record.errors import IntegrityError, UnknownSchemaError
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE, build_manifest
from attncard.pipeline.record.results import PLOT_STYLE, Results
from attncard.pipeline.verify.download import download_verified
from conftest import FIXTURES
from run_folders import LOSS, MINE, RUN, loss_plot, sealed_copy

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = FIXTURES / "plots"
# The first drawing's fixtures: one drawn by this matplotlib's family (3.11, or 3.8-3.10, which draw it
# alike), one by the other family, whose pixels no release here explains away.
SAME_FAMILY, OTHER_FAMILY = ("3.11.1", "3.10.9") if MINE.startswith("3.11.") else ("3.10.9", "3.11.1")






@pytest.mark.slow
def test_the_same_pixels_in_other_bytes_pass(tmp_path):
    """Another release of this matplotlib's family draws its pixels (3.11.1 the locked 3.11.2's); only the
    PNG's Software chunk differs."""
    other, here = (FIXTURES / f"training_loss_matplotlib_{SAME_FAMILY}.png").read_bytes(), loss_plot(tmp_path)
    assert other != here
    assert plot_difference(other, here).worst_tile_rms == 0.0
    folder = sealed_copy(tmp_path, SAME_FAMILY, other)
    assert card_problems(read_results(folder), folder) == []


@pytest.mark.parametrize("release", ["3.10.9", "3.8.4"])
def test_a_fresh_run_drawn_by_another_family_passes(tmp_path, release):
    """Plot style 2, which publish records now: the loss plot as matplotlib 3.10.9 or 3.8.4 drew it is the
    one the locked release draws (0.0; in the first drawing, 71-102 apart)."""
    other = (FIXTURES / f"training_loss_style2_matplotlib_{release}.png").read_bytes()
    assert plot_difference(other, (RUN / LOSS).read_bytes()).worst_tile_rms == 0.0  # the committed copy's
    folder = sealed_copy(tmp_path, release, other, plot_style=PLOT_STYLE)
    assert card_problems(read_results(folder), folder) == []


@pytest.mark.slow
@pytest.mark.parametrize("release", ["3.10.9", "3.8.4"])
def test_a_fresh_run_drawn_by_another_family_with_a_step_moved_is_refused(tmp_path, release):
    moved = (FIXTURES / f"training_loss_style2_step_moved_matplotlib_{release}.png").read_bytes()
    folder = sealed_copy(tmp_path, release, moved, plot_style=PLOT_STYLE)
    [problem] = card_problems(read_results(folder), folder)
    assert problem.startswith(f"{LOSS} is not the plot results.json draws: a 32-pixel tile of it is "), (
        problem
    )
    assert not isinstance(problem, OtherMatplotlibProblem)


def test_plot_style_2_ignores_the_rcparams_in_force(tmp_path):
    """A user's matplotlibrc changes nothing in style 2 (`text.hinting: none` moved the first drawing)."""
    results = dataclasses.replace(Results.load(RUN / RESULTS_FILE), plot_style=PLOT_STYLE)
    for name, rc in (
        ("plain", {}),
        ("hinted", {"text.hinting": "none", "font.size": 12, "lines.linewidth": 3}),
    ):
        (tmp_path / name).mkdir()
        with matplotlib.rc_context(rc):
            write_plots(results, tmp_path / name)
    assert (tmp_path / "plain" / LOSS).read_bytes() == (tmp_path / "hinted" / LOSS).read_bytes()


def test_an_unknown_plot_style_is_refused(tmp_path):
    data = json.loads((RUN / RESULTS_FILE).read_text())
    with pytest.raises(UnknownSchemaError, match="plot_style is 3; this attncard draws plot styles 2"):
        Results.from_dict({**data, "plot_style": 3})
    assert Results.from_dict({**data, "plot_style": 2}).plot_style == 2
    assert data["plot_style"] == PLOT_STYLE  # the committed copies are drawn in style 2 (issue 43)
    del data["plot_style"]
    assert Results.from_dict(data).plot_style is None  # published before it was recorded


@pytest.mark.parametrize("recorded", [OTHER_FAMILY, None])
def test_another_matplotlib_is_named_and_the_plot_not_called_edited(tmp_path, recorded):
    shipped = (FIXTURES / f"training_loss_matplotlib_{OTHER_FAMILY}.png").read_bytes()
    folder = sealed_copy(tmp_path, recorded, shipped)
    problems = card_problems(read_results(folder), folder)
    assert len(problems) == 1 and isinstance(problems[0], OtherMatplotlibProblem), problems
    problem = problems[0]
    assert problem.startswith(f"{LOSS} differs from the plot results.json draws: "), problem
    assert f"matplotlib {MINE} draws here" in problem and "edited" not in problem, problem
    if recorded:
        assert f"results.json says matplotlib {OTHER_FAMILY} drew it" in problem, problem
        assert f"matplotlib=={OTHER_FAMILY}" in problem, problem
    else:
        assert "results.json does not say which matplotlib drew it" in problem, problem


def test_the_same_matplotlib_with_other_pixels_is_not_the_plot(tmp_path):
    """Recorded as this matplotlib, another family's drawing is no longer explained by a release."""
    folder = sealed_copy(
        tmp_path, MINE, (FIXTURES / f"training_loss_matplotlib_{OTHER_FAMILY}.png").read_bytes()
    )
    [problem] = card_problems(read_results(folder), folder)
    assert not isinstance(problem, OtherMatplotlibProblem)
    assert problem.startswith(f"{LOSS} is not the plot results.json draws: a 32-pixel tile of it is "), (
        problem
    )


@pytest.mark.slow
@pytest.mark.parametrize("delta", [0.05, -0.05])
def test_a_step_loss_moved_and_resealed_is_refused(tmp_path, delta):
    forged = loss_plot(tmp_path, delta)
    difference = plot_difference(forged, loss_plot(tmp_path))
    assert PLOT_TILE_RMS_TOLERANCE < difference.worst_tile_rms < 20, difference  # small, and still seen
    folder = sealed_copy(tmp_path, MINE, forged)
    [problem] = card_problems(read_results(folder), folder)
    assert problem.startswith(f"{LOSS} is not the plot results.json draws: "), problem
    assert not isinstance(problem, OtherMatplotlibProblem)


def test_a_forged_plot_of_a_run_of_another_matplotlib_is_still_a_problem(tmp_path):
    """Pixels cannot tell it from another release's drawing, so it is named so; it is never accepted."""
    folder = sealed_copy(tmp_path, "3.10.9", loss_plot(tmp_path, 0.05))
    [problem] = card_problems(read_results(folder), folder)
    assert isinstance(problem, OtherMatplotlibProblem) and "3.10.9" in problem


@pytest.mark.parametrize(
    "shipped",
    [
        lambda png: png + b"\0",  # bytes after the image's end
        lambda png: png[:-12] + b"\0\0\0\x04zTXtpayl\0\0\0\0" + png[-12:],  # a chunk matplotlib writes not
        lambda png: png[: len(png) // 2],  # cut short
        lambda png: png[:30] + bytes([png[30] ^ 1]) + png[31:],  # the header chunk's CRC wrong
        lambda png: b"GIF89a" + png[6:],
    ],
    ids=["trailing-byte", "extra-chunk", "truncated", "bad-crc", "not-png"],
)
@pytest.mark.slow
def test_a_png_as_matplotlib_does_not_write_it_is_not_the_plot(tmp_path, shipped):
    folder = sealed_copy(tmp_path, MINE, shipped(loss_plot(tmp_path)))
    problems = card_problems(read_results(folder), folder)
    assert problems == [
        f"{LOSS} is not the plot results.json draws (no PNG of its size as matplotlib writes it)"
    ]


def test_a_plot_at_another_dpi_is_not_the_plot(tmp_path):
    """Another dpi is no honest difference: no matplotlib release changes the figure's pixel size."""
    figure = Figure(figsize=(6, 3.5))
    figure.add_subplot().plot(Results.load(RUN / RESULTS_FILE).training.losses)
    figure.savefig(tmp_path / "small.png", dpi=90)
    assert plot_difference((tmp_path / "small.png").read_bytes(), (RUN / LOSS).read_bytes()) is None
    folder = sealed_copy(tmp_path, "3.10.9", (tmp_path / "small.png").read_bytes())
    problems = card_problems(read_results(folder), folder)
    assert problems == [
        f"{LOSS} is not the plot results.json draws (no PNG of its size as matplotlib writes it)"
    ]


def test_runs_record_their_matplotlib_and_older_runs_still_read(tmp_path):
    assert EnvironmentRecord.capture().packages["matplotlib"] == MINE
    assert "matplotlib" not in Results.load(RUN / RESULTS_FILE).environment.packages  # published before
    folder = sealed_copy(tmp_path, "3.10.9")
    assert (
        json.loads((folder / RESULTS_FILE).read_text())["environment"]["packages"]["matplotlib"] == "3.10.9"
    )
    assert read_results(folder).environment.packages["matplotlib"] == "3.10.9"


def test_download_names_both_matplotlibs_and_says_no_edit(tiny_gpt2_run, tmp_path):
    """A run recorded as drawn by a matplotlib its plot style was not measured with (3.7.5), whose loss plot
    this one draws otherwise (the first drawing with text without antialiasing stands for that release):
    download names both and does not call it edited."""
    run = tmp_path / "run"
    shutil.copytree(tiny_gpt2_run[0], run)
    results = Results.load(run)
    assert results.environment.packages["matplotlib"] == MINE  # publish recorded it
    packages = {**results.environment.packages, "matplotlib": "3.7.5"}
    results.environment = dataclasses.replace(results.environment, packages=packages)
    assert results.plot_style == PLOT_STYLE  # publish recorded it: no rcParams in force change it
    with matplotlib.rc_context({"text.antialiased": False}):
        plots = write_plots(dataclasses.replace(results, plot_style=None), run)
    results.manifest = {k: v for k, v in build_manifest(run).items() if k != CARD_FILE}
    (run / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = build_manifest(run)
    results.save(run)
    with pytest.raises(IntegrityError) as caught:
        download_verified(run)
    message = str(caught.value)
    assert f"{LOSS} differs from the plot results.json draws: " in message, message
    assert f"matplotlib {MINE} draws here" in message and "matplotlib 3.7.5 drew it" in message, message
    assert "edited" not in message and message.endswith("until then, do not use this checkpoint"), message


@pytest.mark.slow
def test_lint_takes_a_leaderboard_plot_of_the_same_pixels_and_names_its_matplotlib_otherwise(tmp_path):
    cards = tmp_path / "cards"
    shutil.copytree(ROOT / "cards", cards)
    plot = cards / "leaderboard.png"
    assert not [f for f in lint_leaderboard(cards) if f.path == "leaderboard.png"]
    same = (FIXTURES / "leaderboard_style2_matplotlib_3.10.9.png").read_bytes()
    assert same != plot.read_bytes()
    plot.write_bytes(same)
    assert not [f for f in lint_leaderboard(cards) if f.path == "leaderboard.png"]
    plot.write_bytes(forged_leaderboard(cards))
    [finding] = [str(f) for f in lint_leaderboard(cards) if f.path == "leaderboard.png"]
    assert finding.startswith(
        f"leaderboard.png: is not the plot the cards draw with matplotlib {MINE} (a 32-"
    )
    assert finding.endswith(f"write it again with `attncard summary {cards}`"), finding


def forged_leaderboard(cards: Path) -> bytes:
    """The leaderboard drawn here without one of its groups: a plot of the same size that shows less."""
    from attncard.pipeline.card.groups import read_cards
    from attncard.pipeline.card.leaderboard_plot import draw_leaderboard

    return draw_leaderboard(read_cards(cards)[:-1], cards.parent / "forged.png").read_bytes()
