"""The leaderboard page's rows: one [`PageRow`] per group of the leaderboard (`pipeline.card.groups`), with
its figures as numbers, to sort and plot by, and its words as the leaderboard's README says them
(`pipeline.card.leaderboard`), so that the page and the README never disagree.

A [`Leaderboard`] is what one check of a study gave: the rows of the verified runs, the runs refused with
their reason, and when it was checked. The page filters, searches and sorts it ([`select_rows`]); nothing
here imports Gradio or torch.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..card.groups import Group, longest_layer_row, pooled_comparison, scaling_rows, task_length_row
from ..card.leaderboard import STATUS_ORDER, keeps_accuracy, memory_words, speed_words
from ..card.leaderboard_plot import leaderboard_points
from ..scoring.paired import DENSE_MODULE


@dataclass(frozen=True)
class PageRow:
    """One group of the leaderboard as the page shows it.

    Attributes:
        model, module, task: the group; `module` with its setting when the group was split.
        metric: the task's official GLUE metric as the row's seeds record it (`F1 (equivalent)`, `MCC`, …).
        metric_mean, accuracy_mean: the means over seeds.
        accuracy_sd: the sample standard deviation over seeds; None with one seed.
        difference: the pooled accuracy difference against the dense runs, in points; None for the dense
            group and a group not compared.
        keeps: whether the module keeps dense accuracy, in the leaderboard's words.
        speedup, memory: the whole model at the task's length (median over seeds); None when not timed.
        layer_speedup, layer_memory: attention layer 0 at the longest N; None when not timed.
        layer_words, model_words, memory_words: the answer table's words for those figures.
        compression: parameters before ÷ after, the median over seeds.
        seeds: the seeds, in order.
        status: each status and the seeds that have it.
        checks: what was checked of the row's runs.
        cards: `(seed, link to its card)`, in seed order.
    """

    model: str
    module: str
    task: str
    metric: str
    metric_mean: float
    accuracy_mean: float
    accuracy_sd: float | None
    difference: float | None
    keeps: str
    speedup: float | None
    memory: float | None
    layer_speedup: float | None
    layer_memory: float | None
    layer_words: str
    model_words: str
    memory_words: str
    compression: float
    seeds: tuple[int, ...]
    status: str
    checks: str
    cards: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class PlotPoint:
    """A module's point on the page's plot, as leaderboard.png draws it: attention layer 0's speed-up at the
    longest N against the pooled accuracy difference (points), with what a hover names."""

    model: str
    module: str
    task: str
    seeds: str
    speedup: float
    difference: float
    ci_low: float
    ci_high: float
    fails: bool


@dataclass(frozen=True)
class Leaderboard:
    """What one check of a study gave the page.

    Attributes:
        rows: one per group of verified runs.
        refused: `(run, reason)` of each run left out.
        points: the plot's points.
        source: where the runs came from, in words.
        checked_at: when the check ended, UTC, ISO 8601 to the second; "" before any.
        problem: why the last check could not be made (the rows are then those of the one before), or "".
    """

    rows: tuple[PageRow, ...]
    refused: tuple[tuple[str, str], ...]
    points: tuple[PlotPoint, ...]
    source: str
    checked_at: str = ""
    problem: str = ""


# The figures of the table of every group, by column: sorted by these, shown rounded (`COLUMNS`).
NUMBER_COLUMNS: dict[str, tuple[Callable[[PageRow], float | None], int]] = {
    "GLUE metric (mean)": (lambda row: row.metric_mean, 4),
    "Accuracy (mean)": (lambda row: row.accuracy_mean, 4),
    "Accuracy (sd)": (lambda row: row.accuracy_sd, 4),
    "Accuracy − dense (points)": (lambda row: row.difference, 2),
    "Speed-up at the task's length": (lambda row: row.speedup, 2),
    "Memory at the task's length": (lambda row: row.memory, 2),
    "Layer speed-up at the longest N": (lambda row: row.layer_speedup, 2),
    "Layer memory at the longest N": (lambda row: row.layer_memory, 2),
    "Compression": (lambda row: row.compression, 2),
}
# The columns of the table of every group, each with how its cell is shown (None: an empty cell). The
# module and task first: a phone shows the first column or two before the table scrolls sideways.
COLUMNS: dict[str, Callable[[PageRow], object]] = {
    "Module": lambda row: row.module,
    "Task": lambda row: row.task,
    "Model": lambda row: row.model,
    "GLUE metric": lambda row: row.metric,
    **{
        name: (lambda row, figure=figure, digits=digits: _number(figure(row), digits))
        for name, (figure, digits) in list(NUMBER_COLUMNS.items())[:4]
    },
    "Keeps dense accuracy": lambda row: row.keeps,
    **{
        name: (lambda row, figure=figure, digits=digits: _number(figure(row), digits))
        for name, (figure, digits) in list(NUMBER_COLUMNS.items())[4:]
    },
    "Seeds": lambda row: ", ".join(str(seed) for seed in row.seeds),
    "Status": lambda row: row.status,
    "Checks passed": lambda row: row.checks,
    "Cards": lambda row: ", ".join(f"[seed {seed}]({link})" for seed, link in row.cards),
}
# The answer: which module keeps dense accuracy, and how much faster or leaner it is.
ANSWER_COLUMNS: dict[str, Callable[[PageRow], object]] = {
    "Module": lambda row: row.module,
    "Task": lambda row: row.task,
    "Keeps dense accuracy": lambda row: row.keeps,
    "Attention layer 0 at the longest N": lambda row: row.layer_words,
    "Whole model at the task's length": lambda row: row.model_words,
    "Memory of layer 0 at the longest N": lambda row: row.memory_words,
    "Model": lambda row: row.model,
    "Cards": COLUMNS["Cards"],
}


def page_rows(
    groups: Sequence[Group], checks: Mapping[str, str], link: Callable[[str], str]
) -> tuple[PageRow, ...]:
    """The page's rows of the leaderboard's groups.

    Args:
        groups: the groups, as [`pipeline.card.groups.read_cards`] gives them.
        checks: what was checked of each cards copy, by folder.
        link: the address of a cards copy's card, from its folder's name.

    Example:
        >>> from pathlib import Path
        >>> from attncard.pipeline.card.groups import read_cards
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> [row] = page_rows(read_cards("cards"), {"tiny-gpt2-none-sst2": "card"}, lambda name: name)
        >>> row.module, row.keeps, row.speedup, row.cards
        ('none', 'the dense baseline', None, ((0, 'tiny-gpt2-none-sst2'),))
    """
    rows = []
    for group in groups:
        pooled, _ = pooled_comparison(group)
        metric, values = group.official
        whole = scaling_rows(group, task_length_row)
        layer = scaling_rows(group, longest_layer_row)
        statuses = []
        for status in STATUS_ORDER:
            seeds = [card.seed for card in group.cards if card.results.verification.status == status]
            if seeds:
                statuses.append(f"{status.value}: {', '.join(str(seed) for seed in seeds)}")
        dense = group.module == DENSE_MODULE
        rows.append(
            PageRow(
                model=group.model,
                module=group.name,
                task=group.task,
                metric=metric,
                metric_mean=statistics.fmean(values),
                accuracy_mean=statistics.fmean(group.accuracies),
                accuracy_sd=statistics.stdev(group.accuracies) if len(group.cards) > 1 else None,
                difference=None if pooled is None else 100 * pooled.difference,
                keeps="the dense baseline" if dense else keeps_accuracy(group, groups),
                speedup=_median([row.speedup for row in whole]),
                memory=_median([row.memory_ratio for row in whole]),
                layer_speedup=_median([row.speedup for row in layer]),
                layer_memory=_median([row.memory_ratio for row in layer]),
                layer_words=speed_words(group, longest_layer_row),
                model_words=speed_words(group, task_length_row),
                memory_words=memory_words(group, longest_layer_row),
                compression=statistics.median(
                    card.results.parameters.compression_factor for card in group.cards
                ),
                seeds=tuple(group.seeds),
                status="; ".join(statuses),
                checks="; ".join(sorted({checks.get(card.folder, "") for card in group.cards} - {""})),
                cards=tuple((card.seed, link(card.folder)) for card in group.cards),
            )
        )
    return tuple(rows)


def plot_points(groups: Sequence[Group]) -> tuple[PlotPoint, ...]:
    """The page plot's points: those of leaderboard.png ([`leaderboard_points`])."""
    return tuple(
        PlotPoint(
            model=point.group.model,
            module=point.group.name,
            task=point.group.task,
            seeds=", ".join(str(seed) for seed in point.group.seeds),
            speedup=point.speedup,
            difference=100 * point.difference,
            ci_low=100 * point.ci_low,
            ci_high=100 * point.ci_high,
            fails=point.fails,
        )
        for point in leaderboard_points(list(groups))
    )


def select_rows(
    rows: Sequence[PageRow],
    *,
    tasks: Sequence[str] = (),
    models: Sequence[str] = (),
    modules: Sequence[str] = (),
    search: str = "",
    sort_by: str | None = None,
    descending: bool = True,
) -> list[PageRow]:
    """The rows the page shows: those of the chosen tasks, models and modules (all when none is chosen),
    whose cells contain every word of `search` (any case), sorted by the column `sort_by` (numbers as
    numbers, a row without the figure last, either way; the leaderboard's order on a tie).

    Example:
        >>> import dataclasses
        >>> from pathlib import Path
        >>> from attncard.pipeline.card.groups import read_cards
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> [dense] = page_rows(read_cards("cards"), {}, lambda name: name)
        >>> rows = [dense, dataclasses.replace(dense, module="lowrank", task="mrpc", speedup=2.5)]
        >>> [row.module for row in select_rows(rows, tasks=["mrpc"])]
        ['lowrank']
        >>> [row.speedup for row in select_rows(rows, sort_by="Speed-up at the task's length")]
        [2.5, None]
        >>> [row.module for row in select_rows(rows, search="LOWRANK mrpc")]
        ['lowrank']
    """
    chosen = [
        row
        for row in rows
        if (not tasks or row.task in tasks)
        and (not models or row.model in models)
        and (not modules or row.module in modules)
    ]
    words = search.casefold().split()
    if words:
        chosen = [row for row in chosen if all(word in _text(row) for word in words)]
    if sort_by is None:
        return chosen
    if sort_by not in COLUMNS:
        raise ValueError(f"no column {sort_by!r}; sort by one of {', '.join(COLUMNS)}")
    if sort_by in NUMBER_COLUMNS:
        figure = NUMBER_COLUMNS[sort_by][0]
        present = [row for row in chosen if _number(figure(row), 12) is not None]
        missing = [row for row in chosen if _number(figure(row), 12) is None]
        return sorted(present, key=figure, reverse=descending) + missing
    return sorted(chosen, key=lambda row: str(COLUMNS[sort_by](row)).casefold(), reverse=descending)


def table(rows: Sequence[PageRow], columns: Mapping[str, Callable[[PageRow], object]]) -> list[list[object]]:
    """The cells of `rows` under `columns`, row by row (None where a figure is missing)."""
    return [[cell(row) for cell in columns.values()] for row in rows]


def answer_rows(rows: Sequence[PageRow]) -> list[PageRow]:
    """The rows of the answer: every module run against dense."""
    return [row for row in rows if row.module != DENSE_MODULE]


def with_checked(board: Leaderboard, checked_at: str, problem: str = "") -> Leaderboard:
    return dataclasses.replace(board, checked_at=checked_at, problem=problem)


def _text(row: PageRow) -> str:
    return " ".join(str(cell(row)) for cell in COLUMNS.values()).casefold()


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def _number(value: float | None, digits: int) -> float | None:
    """A figure rounded for its cell; None stays None (an empty cell, sorted last)."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


__all__ = [
    "ANSWER_COLUMNS",
    "COLUMNS",
    "NUMBER_COLUMNS",
    "Leaderboard",
    "PageRow",
    "PlotPoint",
    "answer_rows",
    "page_rows",
    "plot_points",
    "select_rows",
    "table",
    "with_checked",
]
