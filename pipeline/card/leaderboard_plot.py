"""leaderboard.png: each module's accuracy difference against dense against its speed-up, one point per
group of the leaderboard (`leaderboard.write_summary` writes it beside the README.md).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..record.results import PLOT_STYLE
from ..scoring.paired import DENSE_MODULE
from .groups import Group, failing_runs, longest_layer_row, pooled_comparison, scaling_rows, task_length_row
from .plots import plot_context

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
    from matplotlib import pyplot

    path = Path(path)
    with plot_context(style):
        figure = leaderboard_figure(groups)
        figure.savefig(path, dpi=100)
        pyplot.close(figure)
    return path


# The figure's size and where its axes sit in it (left, bottom, right, top, as fractions of the figure):
# fixed, not `tight_layout`'s, so that the label placement knows the axes' size in points from these alone,
# never from text a renderer measures (font metrics differ across matplotlib releases, and the plot is
# compared by pixels across them).
FIGURE_SIZE = (7.0, 4.5)  # inches
AXES_BOX = (0.125, 0.13, 0.95, 0.92)
LABEL_FONTSIZE = 8.0  # points
# A label's box as the placement estimates it: 0.65 em a character by 1.25 em, over-estimates, so that boxes
# apart here are apart drawn. The committed study's names measure 0.52-0.61 em a character as drawn (0.6 was
# short for the longest module name there) and 1.0 em high.
CHAR_WIDTH = 0.65 * LABEL_FONTSIZE
LABEL_HEIGHT = 1.25 * LABEL_FONTSIZE
MARKER_RADIUS = 4.0  # points: the marker's 6-point diameter, its edge and a little room
CAP_HALF_WIDTH = 3.5  # points: the error bar's 3-point caps, and a little room
# The places a label may take, tried in this order: its anchor's offset from the point (points) and the
# label's alignment there. The first four touch the point; the rest stand further out, with a thin leader line
# back to it.
NEAR_PLACES = [(6.0, 0.0, "left", "center"), (-6.0, 0.0, "right", "center")]
NEAR_PLACES += [(0.0, 7.0, "center", "bottom"), (0.0, -7.0, "center", "top")]
LEADER_PLACES = [
    (side * 16.0, rise * 12.0, "left" if side > 0 else "right", "center")
    for rise in (1, -1, 2, -2, 3, -3)
    for side in (1, -1)
]

Box = tuple[float, float, float, float]  # x0, y0, x1, y1: points from the axes' lower-left corner
Segment = tuple[tuple[float, float], tuple[float, float]]  # a line's two ends, in the same points


@dataclass(frozen=True)
class LabelPlace:
    """Where a point's label is drawn: `text` (its name, or its number in the key beside the plot when no
    place was free for the name) at (dx, dy) points from the point, aligned `ha`, `va` there; `leader`: joined
    to the point by a thin line."""

    text: str
    dx: float
    dy: float
    ha: str
    va: str
    leader: bool


def place_labels(
    names: list[str],
    spots: list[tuple[float, float]],
    markers: list[Box],
    intervals: list[Box],
    fixed: list[Box],
    width: float,
    height: float,
) -> tuple[list[LabelPlace], list[str]]:
    """Each name's place beside its spot (points from the corner of axes `width` × `height` points), in
    order: the first of NEAR_PLACES and LEADER_PLACES whose estimated box stays in the axes, clear of every
    point's marker and of its own interval, of the `fixed` boxes (the legend), and of the labels and leader
    lines placed before it, and whose leader line crosses none of those but its own point's. Places clear of
    the other points' intervals too are taken first; a label across another's interval (a thin line) only
    where none is. A name with no place free is drawn as its number (1, 2, ...) the same way (at the first
    place when none is free either); the second list is those names, in number order, for the key."""
    labels: list[Box] = []
    leaders: list[Segment] = []
    places, keyed = [], []
    for index, (name, spot) in enumerate(zip(names, spots, strict=True)):
        own = [markers[index], intervals[index]]
        crossing = [*fixed, *labels, *(box for other, box in enumerate(markers) if other != index)]
        other_intervals = [box for other, box in enumerate(intervals) if other != index]
        # A leader line may cross another point's interval (two thin lines); a label only where no place
        # clear of them is free.
        room = ([[*crossing, *other_intervals], crossing], crossing, leaders, width, height)
        found = _first_free(name, spot, own, *room)
        if found is None:
            keyed.append(name)
            number = str(len(keyed))
            dx, dy, ha, va = NEAR_PLACES[0]
            first = LabelPlace(number, dx, dy, ha, va, leader=False)
            found = _first_free(number, spot, own, *room) or (first, _label_box(*spot, first), None)
        place, box, leader = found
        places.append(place)
        labels.append(box)
        if leader is not None:
            leaders.append(leader)
    return places, keyed


def _first_free(
    text: str,
    spot: tuple[float, float],
    own: list[Box],
    coverings: list[list[Box]],
    crossing: list[Box],
    leaders: list[Segment],
    width: float,
    height: float,
) -> tuple[LabelPlace, Box, Segment | None] | None:
    """The first place for `text` beside `spot` whose box stays in the axes, covers none of `own` (its point's
    marker and interval), of the first of `coverings` (then, failing all places, of the next) or of `leaders`,
    and whose leader line crosses none of `crossing`; with its box and leader line."""
    x, y = spot
    for covering, (dx, dy, ha, va) in itertools.product(coverings, NEAR_PLACES + LEADER_PLACES):
        place = LabelPlace(text, dx, dy, ha, va, leader=(dx, dy, ha, va) in LEADER_PLACES)
        box = _label_box(x, y, place)
        if not (box[0] >= 0 and box[1] >= 0 and box[2] <= width and box[3] <= height):
            continue
        if any(_overlaps(box, other) for other in [*own, *covering]):
            continue
        if any(_crosses(line, box) for line in leaders):
            continue
        # The leader runs from the marker's edge to the label's anchor.
        reach = math.hypot(dx, dy)
        leader = ((x + dx * MARKER_RADIUS / reach, y + dy * MARKER_RADIUS / reach), (x + dx, y + dy))
        if place.leader and any(_crosses(leader, other) for other in crossing):
            continue
        return place, box, leader if place.leader else None
    return None


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crosses(line: Segment, box: Box) -> bool:
    """Whether a leader line crosses a box: one of 17 points along it, at most 2.5 points apart on the
    longest leader (39 points), lies inside; every box is wider and higher than that."""
    (x0, y0), (x1, y1) = line
    along = [(x0 + (x1 - x0) * step / 16, y0 + (y1 - y0) * step / 16) for step in range(17)]
    return any(box[0] < x < box[2] and box[1] < y < box[3] for x, y in along)


def _label_box(x: float, y: float, place: LabelPlace) -> Box:
    """The estimated box of a label placed so beside the point at (x, y) points."""
    width = CHAR_WIDTH * len(place.text)
    left = x + place.dx
    left -= {"left": 0.0, "right": width, "center": width / 2}[place.ha]
    bottom = y + place.dy
    bottom -= {"bottom": 0.0, "top": LABEL_HEIGHT, "center": LABEL_HEIGHT / 2}[place.va]
    return (left, bottom, left + width, bottom + LABEL_HEIGHT)


def _limits(values: list[float], pad: float, log: bool = False) -> tuple[float, float]:
    """An axis' limits: the values' range and `pad` of it either side (as `Axes.margins`), on a log scale
    in decades; one decade or one unit either side of a single value."""
    ends = [math.log10(v) for v in values] if log else values
    low, high = min(ends), max(ends)
    room = pad * (high - low) if high > low else 1.0
    low, high = low - room, high + room
    return (10**low, 10**high) if log else (low, high)


def leaderboard_figure(groups: list[Group]) -> Figure:
    """`draw_leaderboard`'s figure, under the rcParams of its style already in force (`plot_context`); the
    caller closes it (`pyplot.close`). Each point's label goes where `place_labels` finds room for it,
    decided from the data, the axis limits set from them and the figure's fixed size alone."""
    from matplotlib import pyplot, ticker
    from matplotlib.lines import Line2D

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
    points = leaderboard_points(groups)
    margins = sorted({point.margin for point in points})
    drawn_settings = list(dict.fromkeys((point.group.model, point.group.task) for point in points))
    band_label = "whole model at the task's length: no measurable difference"
    fail_label = "FAIL: a run of the module or of its dense baseline"
    legend_labels = [band_label] if band else []
    legend_labels += [f"{model}, {task}" for model, task in drawn_settings]
    legend_labels += [fail_label] if any(point.fails for point in points) else []

    # The limits, from the data as `Axes.margins(x=0.3, y=0.15)` would take them (the points with their
    # intervals, the band, and the lines at 1×, 0 and the margins): room for the names beside the points.
    xlim = _limits(
        [point.speedup for point in points] + [edge for span in band for edge in span] + [1.0], 0.3, log=True
    )
    yvalues = [100 * value for point in points for value in (point.ci_low, point.ci_high)]
    ylim = _limits(yvalues + [0.0] + [-100 * margin for margin in margins], 0.15)
    names = [f"{point.group.name} (FAIL)" if point.fails else point.group.name for point in points]
    right = AXES_BOX[2]
    places, keyed = _layout(points, names, xlim, ylim, legend_labels, right)
    if keyed:  # room at the right for the key, as wide as the widest name could need; placed again in less
        widest_entry = len(f"{len(names)}  ") + max(map(len, names))
        right -= (CHAR_WIDTH * widest_entry + 12.0) / (72 * FIGURE_SIZE[0])
        places, keyed = _layout(points, names, xlim, ylim, legend_labels, right)

    figure, axis = pyplot.subplots(figsize=FIGURE_SIZE)
    left, bottom, _, top = AXES_BOX
    figure.subplots_adjust(left=left, bottom=bottom, right=right, top=top)
    for point, place in zip(points, places, strict=True):
        setting = (point.group.model, point.group.task)
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
        if place.leader:  # an empty annotation: a line from the label's anchor to the marker's edge
            line = dict(
                arrowstyle="-", color=color_of[setting], linewidth=0.6, shrinkA=1.5, shrinkB=MARKER_RADIUS
            )
            axis.annotate(
                "", (x, y), textcoords="offset points", xytext=(place.dx, place.dy), arrowprops=line
            )
        axis.annotate(
            place.text,
            (x, y),
            textcoords="offset points",
            xytext=(place.dx, place.dy),
            ha=place.ha,
            va=place.va,
            fontsize=LABEL_FONTSIZE,
        )
    if keyed:  # beside the axes' top right corner, 6 points out
        key = "\n".join(f"{number}  {name}" for number, name in enumerate(keyed, start=1))
        figure.text(right + 6 / (72 * FIGURE_SIZE[0]), top, key, ha="left", va="top", fontsize=LABEL_FONTSIZE)
    handles = []
    if band:
        band_low, band_high = min(low for low, _ in band), max(high for _, high in band)
        handles.append(axis.axvspan(band_low, band_high, color="0.85", zorder=0))
    axis.axhline(0.0, color="0.6", linewidth=0.8)
    for margin in margins:
        axis.axhline(-100 * margin, color="0.4", linestyle="--", linewidth=0.8)
    axis.axvline(1.0, color="0.6", linestyle=":", linewidth=0.8)
    axis.set_xscale("log")
    axis.set_xlim(xlim)
    axis.set_ylim(ylim)
    # Speed-ups as read (0.5×, 1×, 2×, 5×, 10×, 20×), not powers of ten.
    axis.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}×"))
    axis.xaxis.set_minor_formatter(ticker.NullFormatter())
    axis.set(
        xlabel="attention layer 0's speed-up at the longest N (median over seeds; log; dense = 1)",
        ylabel="accuracy − dense, points (pooled; interval)",
        title="accuracy kept against speed where modules differ",
    )
    # Each setting by a filled marker of its colour, whether or not its first point is hollow (FAIL).
    for setting in drawn_settings:
        handles.append(Line2D([], [], marker="o", color=color_of[setting], linestyle="none"))
    if fail_label in legend_labels:
        hollow = Line2D([], [], marker="o", markerfacecolor="white", color="0.3", linestyle="none")
        cross = Line2D([], [], marker="x", markersize=4, color="0.3", linestyle="none")
        handles.append((hollow, cross))
    if handles:
        axis.legend(handles, legend_labels, fontsize=LABEL_FONTSIZE, loc="lower right")
    return figure


def _layout(
    points: list[LeaderboardPoint],
    names: list[str],
    xlim: tuple[float, float],
    ylim: tuple[float, float],
    legend_labels: list[str],
    right: float,
) -> tuple[list[LabelPlace], list[str]]:
    """`place_labels` for the points in axes of these limits, reaching `right` of the figure: the points,
    their intervals and the legend (lower right, matplotlib's default spacings in em) are the obstacles."""
    left, bottom, _, top = AXES_BOX
    width, height = 72 * FIGURE_SIZE[0] * (right - left), 72 * FIGURE_SIZE[1] * (top - bottom)
    (x0, x1), (y0, y1) = (math.log10(v) for v in xlim), ylim

    def to_points(x: float, y: float) -> tuple[float, float]:
        return (math.log10(x) - x0) / (x1 - x0) * width, (y - y0) / (y1 - y0) * height

    spots = [to_points(point.speedup, 100 * point.difference) for point in points]
    markers, intervals = [], []
    for point, (x, y) in zip(points, spots, strict=True):
        _, low = to_points(point.speedup, 100 * point.ci_low)
        _, high = to_points(point.speedup, 100 * point.ci_high)
        markers.append((x - MARKER_RADIUS, y - MARKER_RADIUS, x + MARKER_RADIUS, y + MARKER_RADIUS))
        intervals.append((x - CAP_HALF_WIDTH, low - 1.0, x + CAP_HALF_WIDTH, high + 1.0))
    legend = []
    if legend_labels:
        em = LABEL_FONTSIZE  # the frame's 0.4 em inside, a 2-em handle and 0.8 em after it, 0.5 between rows
        legend_width = CHAR_WIDTH * max(map(len, legend_labels)) + (0.4 + 2.0 + 0.8 + 0.4) * em
        rows = len(legend_labels)
        legend_height = rows * LABEL_HEIGHT + (rows - 1) * 0.5 * em + 2 * 0.4 * em
        corner = 0.5 * em  # from the axes' lower right corner
        legend.append((width - corner - legend_width, corner, width - corner, corner + legend_height))
    return place_labels(names, spots, markers, intervals, legend, width, height)
