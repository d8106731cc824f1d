"""leaderboard.png: each module's accuracy difference against dense against its speed-up, one point per
group of the leaderboard (`leaderboard.write_summary` writes it beside the README.md).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from ..record.results import PLOT_STYLE
from ..scoring.paired import DENSE_MODULE
from .groups import Group, failing_runs, longest_layer_row, pooled_comparison, scaling_rows, task_length_row
from .plots import plot_context


@dataclass(frozen=True)
class LeaderboardPoint:
    """One module's point on leaderboard.png.

    Attributes:
        group: the module's group.
        speedup: attention layer 0's speed-up at the longest N, the median over seeds (the x axis).
        difference, ci_low, ci_high: the pooled accuracy difference against dense and its interval, in
            accuracy (the y axis shows points).
        margin: the comparison's non-inferiority margin, in accuracy (a dashed line at minus it).
        fails: a run of the pooled comparison FAILs verification, the module's or a dense one (see
            [`no_answer`]): drawn hollow, with a cross, and named "(FAIL)".
    """

    group: Group
    speedup: float
    difference: float
    ci_low: float
    ci_high: float
    margin: float
    fails: bool


def leaderboard_points(groups: list[Group]) -> list[LeaderboardPoint]:
    """The points leaderboard.png draws, one per module group timed and compared with dense runs, by
    (model, task) and then as the groups come.

    Example:
        >>> from attncard.pipeline.card.groups import read_cards
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> leaderboard_points(read_cards("cards"))  # a dense run alone: nothing compared with it
        []
    """
    points = []
    for model, task in sorted({(group.model, group.task) for group in groups}):
        for group in groups:
            if (group.model, group.task) != (model, task) or group.module == DENSE_MODULE:
                continue
            layer = [row.speedup for row in scaling_rows(group, longest_layer_row)]
            pooled, _ = pooled_comparison(group)
            if not layer or pooled is None:
                continue
            failed_dense, failed_module = failing_runs(group, groups)
            points.append(
                LeaderboardPoint(
                    group=group,
                    speedup=statistics.median(layer),
                    difference=pooled.difference,
                    ci_low=pooled.ci_low,
                    ci_high=pooled.ci_high,
                    margin=pooled.margin,
                    fails=bool(failed_dense or failed_module),
                )
            )
    return points


def draw_leaderboard(groups: list[Group], path: str | Path, style: int | None = PLOT_STYLE) -> Path:
    """Draws each module's accuracy difference against dense (pooled over seeds, with its interval, in
    points) against attention layer 0's speed-up at the longest N (median over seeds, log axis), one point per
    group, to a PNG. A dashed line marks minus the non-inferiority margin; a shaded band the whole model's
    speed-up ranges at the task's length that contain 1 (no measurable difference there). A point whose
    comparison pools a run that FAILs verification is hollow and crossed, named "(FAIL)", with a legend
    entry (see [`leaderboard_points`]). The same groups give the same bytes (no date in the file, a fixed
    size and order).

    Example:
        >>> from attncard.pipeline.card.groups import read_cards
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> groups = read_cards("cards")
        >>> draw_leaderboard(groups, "a.png").read_bytes() == draw_leaderboard(groups, "b.png").read_bytes()
        True
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display

    path = Path(path)
    with plot_context(style):
        _draw_leaderboard(groups, path)
    return path


def _draw_leaderboard(groups: list[Group], path: Path) -> None:
    """`draw_leaderboard`'s drawing, under the rcParams of its style already in force."""
    from matplotlib import pyplot, ticker
    from matplotlib.lines import Line2D

    figure, axis = pyplot.subplots(figsize=(7, 4.5))
    settings = sorted({(group.model, group.task) for group in groups})
    colors = pyplot.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of = {setting: colors[index % len(colors)] for index, setting in enumerate(settings)}
    band = [
        (row.speedup_low, row.speedup_high)
        for group in groups
        if group.module != DENSE_MODULE
        for row in scaling_rows(group, task_length_row)
        if row.speedup_low <= 1 <= row.speedup_high
    ]
    margins: set[float] = set()
    labelled: dict[tuple[str, str], None] = {}  # the settings drawn, in the order drawn
    points = leaderboard_points(groups)
    for point in points:
        setting = (point.group.model, point.group.task)
        margins.add(point.margin)
        x, y = point.speedup, 100 * point.difference
        low, high = y - 100 * point.ci_low, 100 * point.ci_high - y
        axis.errorbar(
            [x],
            [y],
            yerr=[[low], [high]],
            fmt="o",
            color=color_of[setting],
            # A run that FAILs: hollow, so that no reader takes the point for a module that kept accuracy.
            markerfacecolor="white" if point.fails else color_of[setting],
            capsize=3,
        )
        if point.fails:
            axis.plot([x], [y], marker="x", color=color_of[setting], markersize=4, linestyle="none")
        labelled[setting] = None
        name = f"{point.group.name} (FAIL)" if point.fails else point.group.name
        axis.annotate(name, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    if band:
        axis.axvspan(
            min(low for low, _ in band),
            max(high for _, high in band),
            color="0.85",
            zorder=0,
            label="whole model at the task's length: no measurable difference",
        )
    axis.axhline(0.0, color="0.6", linewidth=0.8)
    for margin in sorted(margins):
        axis.axhline(-100 * margin, color="0.4", linestyle="--", linewidth=0.8)
    axis.axvline(1.0, color="0.6", linestyle=":", linewidth=0.8)
    axis.set_xscale("log")
    # Speed-ups as read (0.5×, 1×, 2×, 5×, 10×, 20×), not powers of ten.
    axis.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}×"))
    axis.xaxis.set_minor_formatter(ticker.NullFormatter())
    axis.margins(x=0.3, y=0.15)  # room for the module names beside the points
    axis.set(
        xlabel="attention layer 0's speed-up at the longest N (median over seeds; log; dense = 1)",
        ylabel="accuracy − dense, points (pooled; interval)",
        title="accuracy kept against speed where modules differ",
    )
    handles, labels = axis.get_legend_handles_labels()  # the band's
    # Each setting by a filled marker of its colour, whether or not its first point is hollow (FAIL).
    for model, task in labelled:
        handles.append(Line2D([], [], marker="o", color=color_of[(model, task)], linestyle="none"))
        labels.append(f"{model}, {task}")
    if any(point.fails for point in points):
        hollow = Line2D([], [], marker="o", markerfacecolor="white", color="0.3", linestyle="none")
        cross = Line2D([], [], marker="x", markersize=4, color="0.3", linestyle="none")
        handles.append((hollow, cross))
        labels.append("FAIL: a run of the module or of its dense baseline")
    if handles:
        axis.legend(handles, labels, fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
