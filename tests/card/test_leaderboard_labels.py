"""leaderboard.png's module names do not overprint (issue 46, item 7).

The committed study's plot (`cards/`, 30 MiniLM runs): several of its points sit close together at 1×, where
every name was drawn 5 points right of and 4 above its point, on top of each other. The names are now placed
from the data alone (`place_labels`); here they are measured as a renderer draws them.
"""

from __future__ import annotations

import itertools

import matplotlib
from matplotlib import pyplot

from attncard.pipeline.card.groups import read_cards
from attncard.pipeline.card.leaderboard_plot import (
    CHAR_WIDTH,
    LABEL_HEIGHT,
    leaderboard_figure,
    leaderboard_points,
    place_labels,
)
from attncard.pipeline.card.plots import plot_context
from attncard.pipeline.record.results import PLOT_STYLE
from conftest import REPO_ROOT

CARDS = REPO_ROOT / "cards"
MARKER_RADIUS = 3.0  # points: the errorbar markers' 6-point diameter


def _drawn(groups):
    """The labels' texts and extents, the markers' centres and the axes' extent, in pixels, as drawn."""
    matplotlib.use("Agg")
    with plot_context(PLOT_STYLE):
        figure = leaderboard_figure(groups)
        try:
            renderer = figure.canvas.get_renderer()
            [axis] = figure.axes
            labels = [
                (text.get_text(), text.get_window_extent(renderer)) for text in axis.texts if text.get_text()
            ]
            points = leaderboard_points(groups)
            centres = [axis.transData.transform((p.speedup, 100 * p.difference)) for p in points]
            radius = renderer.points_to_pixels(MARKER_RADIUS)
            return labels, centres, radius, axis.get_window_extent(renderer)
        finally:
            pyplot.close(figure)


def test_no_two_labels_of_the_committed_study_overlap():
    labels, centres, _, axes = _drawn(read_cards(CARDS))
    assert len(labels) == len(centres) == 8
    overlapping = [
        (first, second)
        for (first, one), (second, other) in itertools.combinations(labels, 2)
        if one.overlaps(other)
    ]
    assert overlapping == []
    assert all(axes.contains(box.x0, box.y0) and axes.contains(box.x1, box.y1) for _, box in labels)


def test_no_label_of_the_committed_study_covers_a_marker():
    labels, centres, radius, _ = _drawn(read_cards(CARDS))
    covered = [
        (name, index)
        for name, box in labels
        for index, (x, y) in enumerate(centres)
        if box.x0 - radius < x < box.x1 + radius and box.y0 - radius < y < box.y1 + radius
    ]
    assert covered == []


def test_every_name_is_drawn_and_none_needs_the_key():
    """Each point is named beside it (no number and key for the committed study)."""
    groups = read_cards(CARDS)
    labels, _, _, _ = _drawn(groups)
    names = [f"{p.group.name} (FAIL)" if p.fails else p.group.name for p in leaderboard_points(groups)]
    assert [text for text, _ in labels] == names


def test_the_placement_estimates_each_label_larger_than_drawn():
    """The boxes `place_labels` keeps apart (CHAR_WIDTH a character, LABEL_HEIGHT high) hold the drawn
    labels, so that keeping them apart keeps the drawn ones apart."""
    labels, _, _, _ = _drawn(read_cards(CARDS))
    to_pixels = 100 / 72  # the figure's dpi
    too_small = [
        (text, box.width, box.height)
        for text, box in labels
        if box.width > CHAR_WIDTH * len(text) * to_pixels or box.height > LABEL_HEIGHT * to_pixels
    ]
    assert too_small == []


def test_a_name_with_no_room_is_numbered_for_the_key():
    """Three names on one spot in axes just wide enough for one beside it: the first takes the place right of
    it, the others, with no place free, their numbers."""
    spot = [(30.0, 10.0)] * 3
    marker = [(26.0, 6.0, 34.0, 14.0)] * 3
    places, keyed = place_labels(["abcdefghij", "klmnopqrst", "uvwxyzabcd"], spot, marker, marker, [], 90, 20)
    assert [place.text for place in places] == ["abcdefghij", "1", "2"]
    assert keyed == ["klmnopqrst", "uvwxyzabcd"]
