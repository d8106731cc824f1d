"""Checks every copy of cards/ as a download does, under the matplotlib this runs with, and measures how far
each committed plot (and the leaderboard, which `attncard lint` checks) lands from the one that matplotlib
draws; then forges one plot and shows it refused. The figures it prints are the ones docs/downloading.md
("Plots") and the comment on the plot styles in pipeline/card/plots.py quote for cards/ (issue 43: the copies'
plots checked under matplotlib 3.8 to 3.11).

    # each release in a folder of its own; the rest (numpy, pyparsing, kiwisolver, ...) from the locked venv
    .venv/bin/python -m pip install --no-deps --target /tmp/mpl-3.8.4 matplotlib==3.8.4
    PYTHONPATH=/tmp/mpl-3.8.4 .venv/bin/python bench/cards_plots_anywhere.py
    .venv/bin/python bench/cards_plots_anywhere.py  # the locked matplotlib

For each copy: `card_problems(results, folder)`, the whole check of the card, its plots, licence and
`.eval_results` a download runs, and the worst-tile RMS (`plot_difference`) of each shipped plot against
the one drawn here. The forgery: the training-loss plot of one copy drawn here with one step's loss moved
by +0.05, the card and manifest written again around it (what a publisher who edited a plot would ship);
it must be refused. Exit 0 when no copy is refused and the forgery is.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from attncard.pipeline.card.groups import read_cards
from attncard.pipeline.card.leaderboard_plot import draw_leaderboard
from attncard.pipeline.card.plots import plot_difference, write_plots
from attncard.pipeline.card.render import render_card
from attncard.pipeline.checks.card_render import OtherMatplotlibProblem, card_problems
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE, sha256_file
from attncard.pipeline.record.results import Results

CARDS = Path(__file__).resolve().parent.parent / "cards"
FORGED_RUN = "minilm-adaptive_span-mrpc-seed0"  # a module run: a card with every kind of plot
LOSS = "training_loss.png"
STEP_DELTA = 0.05  # added to the loss of the middle step


def check_copies(scratch: Path) -> tuple[int, list[tuple[float, str]]]:
    """The number of copies with a card problem (each printed), and every plot's worst-tile RMS against
    the one drawn here, with its path."""
    refused, distances = 0, []
    for folder in sorted(path.parent for path in CARDS.glob(f"*/{RESULTS_FILE}")):
        results = Results.load(folder)
        problems = card_problems(results, folder)
        if problems:
            refused += 1
            print(f"REFUSED {folder.name}: {problems[0]}")
        drawn = scratch / folder.name
        drawn.mkdir()
        for plot in write_plots(results, drawn):
            name = plot["file"]
            difference = plot_difference((folder / name).read_bytes(), (drawn / name).read_bytes())
            tile = float("inf") if difference is None else difference.worst_tile_rms
            distances.append((tile, f"{folder.name}/{name}"))
    return refused, distances


def leaderboard_distance(scratch: Path) -> float:
    """The committed leaderboard's worst-tile RMS against the one drawn here (what `attncard lint` checks)."""
    drawn = draw_leaderboard(read_cards(CARDS), scratch / "leaderboard.png")
    difference = plot_difference((CARDS / "leaderboard.png").read_bytes(), drawn.read_bytes())
    return float("inf") if difference is None else difference.worst_tile_rms


def forged_copy(scratch: Path) -> tuple[Path, float]:
    """A copy of FORGED_RUN whose training-loss plot shows one step's loss moved by STEP_DELTA, drawn here,
    its card and manifest written again around it; and that plot's worst-tile RMS from the honest one drawn
    here."""
    folder = scratch / "forged" / FORGED_RUN
    shutil.copytree(CARDS / FORGED_RUN, folder)
    results = Results.load(folder)
    losses = list(results.training.losses)
    losses[len(losses) // 2] += STEP_DELTA
    forged = dataclasses.replace(results, training=dataclasses.replace(results.training, losses=losses))
    drawn = {"forged": scratch / "forged-plots", "honest": scratch / "honest-plots"}
    for what, source in (("forged", forged), ("honest", results)):
        drawn[what].mkdir()
        plots = write_plots(source, drawn[what])
    shutil.copyfile(drawn["forged"] / LOSS, folder / LOSS)
    # Resealed: the plot's new digest, then the card (whose file table names it) and the card's digest.
    results.manifest = {name: digest for name, digest in results.manifest.items() if name != CARD_FILE}
    results.manifest[LOSS] = sha256_file(folder / LOSS)
    (folder / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = {**results.manifest, CARD_FILE: sha256_file(folder / CARD_FILE)}
    results.save(folder)
    difference = plot_difference((folder / LOSS).read_bytes(), (drawn["honest"] / LOSS).read_bytes())
    return folder, difference.worst_tile_rms


def main() -> int:
    import matplotlib

    release = metadata.version("matplotlib")
    print(f"matplotlib {release} ({Path(matplotlib.__file__).parent})")
    with tempfile.TemporaryDirectory(prefix="cards-plots-") as scratch:
        refused, distances = check_copies(Path(scratch))
        worst, where = max(distances)
        honest = sum(tile == 0.0 for tile, _ in distances)
        print(
            f"copies: {refused} of {len({path.split('/')[0] for _, path in distances})} refused; plots: "
            f"{len(distances)}, {honest} of the same pixels; worst tile RMS at most {worst:.3f} ({where})"
        )
        print(f"leaderboard.png: worst tile RMS {leaderboard_distance(Path(scratch)):.3f}")
        folder, forged_rms = forged_copy(Path(scratch))
        problems = card_problems(Results.load(folder), folder)
        about_loss = [problem for problem in problems if problem.startswith(LOSS)]
        # Named an edit when results.json records the matplotlib that drew the plots; the copies record
        # none (published before attncard recorded it), so a download cannot rule out another release and
        # refuses the plot as one it cannot check (OtherMatplotlibProblem): refused all the same.
        verdict = "refused" if about_loss and len(problems) == 1 else "NOT REFUSED"
        other = any(isinstance(problem, OtherMatplotlibProblem) for problem in about_loss)
        named = "as another matplotlib's" if other else "as an edit" if about_loss else "at all"
        print(
            f"forged {LOSS} of {FORGED_RUN} (one step's loss +{STEP_DELTA}): worst tile RMS {forged_rms:.2f}"
        )
        print(f"  {verdict} {named}: {problems}")
    return 0 if refused == 0 and verdict == "refused" else 1


if __name__ == "__main__":
    sys.exit(main())
