"""`tests/rerender_cards.py` records a module's new source for a committed card only when the code that ran is
the code installed: comments, docstrings and a moved module of the same code may differ, nothing else; and a
usage snippet that loads the run by a path of the publishing machine loads its cards copy, `./<name>`."""

from __future__ import annotations

import pytest
from rerender_cards import CARDS, outside_cards, readers_location, same_code

from attncard.pipeline.render import card_usage_code, usage_location
from attncard.pipeline.results import Results

RECORDED = {
    "modules/span/attention.py": '"""Spans."""\nfrom ..kernels.memory import peak  # old\nWIDTH = 8  # 12\n',
    "modules/kernels/memory.py": '"""Peak memory."""\ndef peak():  # the old comment\n    return 1\n',
}


def check(installed: dict[str, str]) -> bool:
    return same_code("modules/span/attention.py", RECORDED.get, {**RECORDED, **installed}.get)


def test_comments_and_docstrings_may_change():
    assert check({"modules/span/attention.py": '"""New."""\nfrom ..kernels.memory import peak\nWIDTH = 8\n'})


def test_a_constant_may_not():
    assert not check({"modules/span/attention.py": "from ..kernels.memory import peak\nWIDTH = 9\n"})


def test_a_module_moved_with_the_same_code_is_the_same_code():
    moved = {"modules/span/attention.py": "from ..measure import peak\nWIDTH = 8\n"}
    assert check({**moved, "modules/measure.py": "def peak():\n    return 1\n"})
    assert not check({**moved, "modules/measure.py": "def peak():\n    return 2\n"})
    assert not check({"modules/span/attention.py": "from ..measure import other\nWIDTH = 8\n"})


@pytest.mark.parametrize(
    ("recorded", "loaded"),
    [("/work/study/runs/{}", "./{}"), ("../study/runs/{}", "./{}"), ("runs/{}", "runs/{}"), ("./{}", "./{}")],
)
def test_a_path_of_the_publishing_machine_becomes_the_cards_copy(recorded: str, loaded: str):
    results = Results.load(CARDS / "minilm-none-mrpc-seed0")
    name = results.repo_name
    results.usage.code = results.usage.code.replace(
        f"'{usage_location(results)}'", f"'{recorded.format(name)}'"
    )
    assert outside_cards(recorded.format(name)) == (loaded != recorded)
    readers_location(results)
    assert usage_location(results) == loaded.format(name)
    assert card_usage_code(results) == results.usage.code
