"""The leaderboard page's rows (pipeline/space/table.py): the committed study's groups as the page shows them,
in the README's words, and the page's filters, search and sort.

The rows are read from cards/ alone (`read_cards`), so that these tests need no data; what a page shows
is checked first (tests/space/test_space_sources.py).
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from attncard.pipeline.card.groups import read_cards
from attncard.pipeline.space.table import (
    ANSWER_COLUMNS,
    COLUMNS,
    NUMBER_COLUMNS,
    answer_rows,
    page_rows,
    plot_points,
    select_rows,
    table,
)
from conftest import REPO_ROOT

CARDS = REPO_ROOT / "cards"


@pytest.fixture(scope="module")
def rows():
    groups = read_cards(CARDS)
    return page_rows(groups, {}, lambda name: f"https://huggingface.co/attncard/{name}")


def _readme_answer() -> dict[tuple[str, str], list[str]]:
    """The first table of cards/README.md, by (module, task): its cells after the module."""
    answer: dict[tuple[str, str], list[str]] = {}
    for line in (CARDS / "README.md").read_text(encoding="utf-8").split("## Every group")[0].splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        named = re.fullmatch(r"(\S+) \((\w+)\)", cells[0]) if len(cells) == 5 else None
        if named:
            answer[(named.group(1), named.group(2))] = cells[1:]
    return answer


def test_every_group_of_the_study_is_a_row_in_the_readmes_words(rows) -> None:
    assert len(rows) == 10 and {row.task for row in rows} == {"sst2", "mrpc"}
    readme = _readme_answer()
    answered = {(row.module, row.task): row for row in answer_rows(rows)}
    assert answered.keys() == readme.keys()
    for key, row in answered.items():
        assert [row.keeps, row.layer_words, row.model_words, row.memory_words] == readme[key], key
    dense = [row for row in rows if row.module == "none"]
    assert len(dense) == 2 and all(
        row.keeps == "the dense baseline" and row.difference is None for row in dense
    )


def test_figures_are_numbers_that_agree_with_the_words(rows) -> None:
    for row in answer_rows(rows):
        points = re.search(r"([+−]?\d+\.\d\d) points", row.keeps)
        assert points is not None and math.isclose(
            float(points.group(1).replace("−", "-").replace("+", "")), row.difference, abs_tol=0.005
        ), row
        layer = re.search(r"\((\d+\.\d\d)×|(\d+\.\d\d)× (?:faster|slower)", row.layer_words)
        assert layer is not None and f"{row.layer_speedup:.2f}" in row.layer_words
    cells = table(rows, COLUMNS)
    for column in NUMBER_COLUMNS:
        index = list(COLUMNS).index(column)
        assert all(cell[index] is None or isinstance(cell[index], float | int) for cell in cells), column


def test_each_row_links_every_seed_to_its_card(rows) -> None:
    for row in rows:
        assert [seed for seed, _ in row.cards] == list(row.seeds) == [0, 1, 2]
        for seed, link in row.cards:
            assert link == f"https://huggingface.co/attncard/minilm-{row.module}-{row.task}-seed{seed}"
    cell = table(rows[:1], COLUMNS)[0][list(COLUMNS).index("Cards")]
    assert cell.startswith("[seed 0](https://huggingface.co/attncard/minilm-")


def test_filters_search_and_sort(rows) -> None:
    mrpc = select_rows(rows, tasks=["mrpc"])
    assert len(mrpc) == 5 and {row.task for row in mrpc} == {"mrpc"}
    assert [row.module for row in select_rows(rows, modules=["svd_lowrank"], tasks=["sst2"])] == [
        "svd_lowrank"
    ]
    assert select_rows(rows, models=["another/model"]) == []
    # Search: every word, any case, in any cell.
    assert {(row.module, row.task) for row in select_rows(rows, search="ADAPTIVE_span MRPC")} == {
        ("adaptive_span", "mrpc")
    }
    by_layer = select_rows(rows, sort_by="Layer speed-up at the longest N")
    timed = [row.layer_speedup for row in by_layer if row.layer_speedup is not None]
    assert timed == sorted(timed, reverse=True) and len(timed) == 8
    assert [row.module for row in by_layer[-2:]] == ["none", "none"]  # not timed: last either way
    ascending = select_rows(rows, sort_by="Layer speed-up at the longest N", descending=False)
    assert [row.layer_speedup for row in ascending][:8] == sorted(timed)
    assert [row.module for row in ascending[-2:]] == ["none", "none"]
    assert [row.module for row in select_rows(rows, sort_by="Module", descending=False)][:3] == [
        "adaptive_span",
        "adaptive_span",
        "adaptive_sparse",
    ]
    with pytest.raises(ValueError, match="no column 'speed'; sort by one of Module, "):
        select_rows(rows, sort_by="speed")


def test_the_answer_table_and_the_plot_leave_the_dense_runs_out(rows) -> None:
    assert all(row.module != "none" for row in answer_rows(rows)) and len(answer_rows(rows)) == 8
    assert list(ANSWER_COLUMNS)[:3] == ["Module", "Task", "Keeps dense accuracy"]  # what a phone shows first
    points = plot_points(read_cards(CARDS))
    assert {(point.module, point.task) for point in points} == {
        (row.module, row.task) for row in answer_rows(rows)
    }
    for point in points:
        assert point.ci_low <= point.difference <= point.ci_high and point.seeds == "0, 1, 2"


def test_a_row_without_a_figure_shows_an_empty_cell(rows) -> None:
    untimed = dataclasses.replace(rows[0], speedup=None, accuracy_sd=float("nan"))
    cells = dict(zip(COLUMNS, table([untimed], COLUMNS)[0], strict=True))
    assert cells["Speed-up at the task's length"] is None and cells["Accuracy (sd)"] is None
