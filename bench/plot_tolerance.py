"""Measures both sides of the plot tolerance in `pipeline/card/plots.py` (`PLOT_TILE_RMS_TOLERANCE`,
`plot_difference`): how far the same plots drawn by other matplotlib releases land from the locked one's
(honest), and how far a small forgery lands (forged). The figures it prints are the ones
docs/downloading.md ("Plots") and the comment on `PLOT_TILE_RMS_TOLERANCE` quote.

    # each matplotlib in a throwaway venv outside the repository, the rest from the locked one;
    # --style 2: plot style 2, as runs are published now; without it, the first drawing (cards/)
    python3 -m venv /tmp/mpl384 && /tmp/mpl384/bin/pip install matplotlib==3.8.4 numpy==1.26.4 pillow
    /tmp/mpl384/bin/python bench/plot_tolerance.py draw /tmp/plots/384 --style 2 \
        --site .venv/lib/python3.11/site-*
    .venv/bin/python bench/plot_tolerance.py draw /tmp/plots/locked --style 2
    .venv/bin/python bench/plot_tolerance.py forge /tmp/plots/forged --style 2
    .venv/bin/python bench/plot_tolerance.py compare /tmp/plots/locked /tmp/plots/384 /tmp/plots/forged ...

`draw` calls attncard's own `write_plots` and `draw_leaderboard` on every run of `cards/`, so the drawing
code is the one a verifier runs; only matplotlib (and numpy, pillow, freetype in its wheel) differ.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _import_attncard(site: str | None) -> None:
    if site:
        # After this venv's own matplotlib and numpy: only what they lack comes from the locked venv.
        sys.path.append(str(Path(site).resolve()))
        import __editable___attncard_0_1_0_finder as finder  # the locked venv's editable install

        finder.install()


def draw(out: Path, rc: dict[str, str], style: int | None) -> None:
    """Every plot of cards/ and its leaderboard, drawn by this matplotlib into `out` in plot style `style`
    (None: the first drawing, as cards/ was drawn), with `rc` (rcParams an environment could set otherwise,
    such as `text.hinting_factor`) in force."""
    import matplotlib

    from attncard.pipeline.card.groups import read_cards
    from attncard.pipeline.card.leaderboard_plot import draw_leaderboard
    from attncard.pipeline.card.plots import write_plots
    from attncard.pipeline.record.results import Results

    cards = REPO / "cards"
    with matplotlib.rc_context(rc):
        for results_file in sorted(cards.glob("*/results.json")):
            folder = out / results_file.parent.name
            folder.mkdir(parents=True, exist_ok=True)
            results = Results.load(results_file)
            write_plots(dataclasses.replace(results, plot_style=style), folder)
        draw_leaderboard(read_cards(cards), out / "leaderboard.png", style)
    settings = f" plot_style={style}" + "".join(f" {key}={value}" for key, value in rc.items())
    (out / "matplotlib.txt").write_text(matplotlib.__version__ + settings)
    print(f"matplotlib {matplotlib.__version__}: drew {out}")


def forge(out: Path, style: int | None) -> None:
    """Small forgeries of one run of each kind, drawn by this (the locked) matplotlib in plot style `style`,
    each in its own folder named after what changed; compare them with the locked plots of the same run."""
    from attncard.pipeline.card.groups import read_cards
    from attncard.pipeline.card.leaderboard_plot import draw_leaderboard
    from attncard.pipeline.card.plots import write_plots
    from attncard.pipeline.record.results import Results

    cards = REPO / "cards"
    run = "minilm-adaptive_span-mrpc-seed0"
    results = dataclasses.replace(Results.load(cards / run / "results.json"), plot_style=style)
    training, efficiency = results.training, results.efficiency

    def logged(index: int, delta: float) -> Results:
        log = list(training.log)
        log[index] = dataclasses.replace(log[index], loss=log[index].loss + delta)
        return dataclasses.replace(results, training=dataclasses.replace(training, log=log))

    def step(index: int, delta: float) -> Results:
        losses = list(training.losses)
        losses[index] += delta
        return dataclasses.replace(results, training=dataclasses.replace(training, losses=losses))

    def scaling(index: int, fields: tuple[str, ...], factor: float) -> Results:
        rows = list(efficiency.scaling)
        moved = {field: getattr(rows[index], field) * factor for field in fields}
        rows[index] = dataclasses.replace(rows[index], **moved)
        return dataclasses.replace(results, efficiency=dataclasses.replace(efficiency, scaling=rows))

    def span(delta: float) -> Results:
        stats = dict(results.module.stats)
        spans = [list(row) for row in stats["spans"]]
        spans[0][0] += delta
        stats["spans"] = spans
        return dataclasses.replace(results, module=dataclasses.replace(results.module, stats=stats))

    middle = len(training.log) // 2
    times = ("module_seconds", "module_seconds_min", "module_seconds_max")  # the point and its bars
    forgeries = {
        "log-point-0.01": logged(middle, 0.01),
        "log-point-0.03": logged(middle, 0.03),
        "log-point-0.1": logged(middle, 0.1),
        "step-loss-0.05": step(len(training.losses) // 2, 0.05),
        "step-loss-0.2": step(len(training.losses) // 2, 0.2),
        "scaling-time-x1.05": scaling(len(efficiency.scaling) - 1, times, 1.05),
        "scaling-time-x1.2": scaling(len(efficiency.scaling) - 1, times, 1.2),
        "scaling-memory-x1.05": scaling(len(efficiency.scaling) - 1, ("module_peak_mb",), 1.05),
        "span-0.5": span(0.5),
        "span-5": span(5.0),
    }
    for name, forged in forgeries.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        write_plots(forged, folder)
    groups = read_cards(cards)
    folder = out / "leaderboard-one-group-less"
    folder.mkdir(parents=True, exist_ok=True)
    draw_leaderboard(groups[:-1], folder / "leaderboard.png", style)
    print(f"forged {len(forgeries) + 1} plots of {run} and the leaderboard in {out}")


def compare(locked: Path, others: list[Path]) -> None:
    from attncard.pipeline.card.plots import plot_difference

    print("| what | matplotlib | file | RMS | worst tile RMS |")
    print("|---|---|---|---:|---:|")
    for other in others:
        version = (other / "matplotlib.txt").read_text() if (other / "matplotlib.txt").is_file() else "forged"
        pairs = []
        if version == "forged":
            run = "minilm-adaptive_span-mrpc-seed0"
            for png in sorted(other.glob("*/*.png")):
                reference = locked / ("." if png.name == "leaderboard.png" else run) / png.name
                pairs.append((png.parent.name, png, reference))
            # Another plot of the same size: one run's training loss shipped as another's.
            mine = sorted(locked.glob("*/training_loss.png"))
            pairs.append(("another run's loss curve", mine[1], mine[0]))
        else:
            for png in sorted(other.rglob("*.png")):
                pairs.append(("honest", png, locked / png.relative_to(other)))
        for what, png, reference in pairs:
            difference = plot_difference(png.read_bytes(), reference.read_bytes())
            rms = "size differs" if difference is None else f"{difference.rms:.3f}"
            tile = "" if difference is None else f"{difference.worst_tile_rms:.3f}"
            name = png.relative_to(other) if png.is_relative_to(other) else png.relative_to(png.parent.parent)
            print(f"| {what} | {version} | {name} | {rms} | {tile} |")


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("mode", choices=("draw", "forge", "compare"))
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--rc", action="append", default=[], help="key=value, an rcParam to draw with")
    parser.add_argument("--style", type=int, help="the plot style to draw (none: the first drawing)")
    parser.add_argument("--site", help="the locked venv's site-packages, for a venv holding only matplotlib")
    options = parser.parse_args()
    _import_attncard(options.site)
    if options.mode == "draw":
        draw(options.folders[0], dict(setting.split("=", 1) for setting in options.rc), options.style)
    elif options.mode == "forge":
        forge(options.folders[0], options.style)
    else:
        compare(options.folders[0], options.folders[1:])


if __name__ == "__main__":
    main()
