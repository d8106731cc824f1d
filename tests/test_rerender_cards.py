"""`tests/rerender_cards.py` records a module's new source for a committed card only when the code that ran is
the code installed: comments, docstrings and a moved module of the same code may differ, nothing else."""

from __future__ import annotations

from rerender_cards import same_code

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
