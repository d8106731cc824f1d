"""`tests/scripts/rerender_cards.py` records a module's new source for a committed card only when the code
that ran is the code installed: comments, docstrings and a moved module of the same code may differ, nothing
else; and a usage snippet that loads the run by a path of the publishing machine loads its cards copy,
`./<name>`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attncard.pipeline.card.snippet import card_usage_code, usage_location
from attncard.pipeline.checks.card_render import card_problems
from attncard.pipeline.record.manifest import RESULTS_FILE
from attncard.pipeline.record.results import CARD_TEMPLATE, PLOT_STYLE, Results
from rerender_cards import (
    CARDS,
    as_recorded,
    needs_rewriting,
    not_the_cards_copy,
    readers_location,
    rerender,
    same_code,
)

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
    [("/work/study/runs/{}", "./{}"), ("../study/runs/{}", "./{}"), ("runs/{}", "./{}"), ("./{}", "./{}")],
)
def test_every_location_but_the_cards_copy_becomes_the_cards_copy(recorded: str, loaded: str):
    results = Results.load(CARDS / "minilm-none-sst2-seed0")
    name = results.repo_name
    results.usage.code = results.usage.code.replace(
        f"'{usage_location(results)}'", f"'{recorded.format(name)}'"
    )
    assert not_the_cards_copy(recorded.format(name), name) == (loaded != recorded)
    readers_location(results)
    assert usage_location(results) == loaded.format(name)
    assert card_usage_code(results) == results.usage.code


def test_a_hub_id_stays():
    results = Results.load(CARDS / "minilm-none-mrpc-seed0")
    copy = usage_location(results)
    results.repo_id = f"someone/{results.repo_name}"
    results.usage.code = results.usage.code.replace(f"'{copy}'", f"'{results.repo_id}'")
    readers_location(results)
    assert usage_location(results) == results.repo_id


def test_null_fields_the_run_did_not_record_are_not_added():
    recorded = {"evaluation": {"accuracy": 0.8, "rows": [{"label": 0}]}, "comparison": None}
    written = {
        "evaluation": {"accuracy": 0.8, "official": None, "rows": [{"label": 0, "f1": None}]},
        "comparison": None,
        "second_split": None,
        "plot_style": 2,
    }
    assert as_recorded(written, recorded) == {**recorded, "plot_style": 2}


@pytest.mark.parametrize("name", sorted(path.parent.name for path in CARDS.glob("*/" + RESULTS_FILE)))
def test_every_committed_copy_needs_nothing_rewritten(name: str):
    """Each copy loads itself, records plot style 2 and names its dense run's current results.json."""
    assert needs_rewriting(Results.load(CARDS / name)) == []


def test_a_copy_of_the_first_drawing_that_loads_runs_is_rendered_in_plot_style_2(tmp_path: Path):
    """A dense MRPC copy as published before: no plot_style, its snippet loading `runs/<name>`. Rendered
    again, it loads `./<name>`, records plot style 2 and passes a download's check; its figures are as they
    were."""
    name = "minilm-none-mrpc-seed0"
    folder = tmp_path / name
    shutil.copytree(CARDS / name, folder)
    data = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
    del data["plot_style"]
    data["usage"]["code"] = data["usage"]["code"].replace(f"'./{name}'", f"'runs/{name}'")
    (folder / RESULTS_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    assert needs_rewriting(Results.load(folder)) == [
        f"its usage snippet loads runs/{name}",
        "its plots are drawn the first way, not in plot style 2",
    ]
    assert rerender(folder) == "rendered"
    results = Results.load(folder)
    assert (results.plot_style, usage_location(results)) == (PLOT_STYLE, f"./{name}")
    assert card_problems(results, folder) == []
    rendered = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
    assert {key: value for key, value in rendered.items() if key not in ("usage", "plot_style")} == {
        key: value for key, value in data.items() if key != "usage"
    }


def test_a_copy_of_card_template_1_is_rendered_in_the_current_template(tmp_path: Path):
    """A dense MRPC copy as published before card template 2: rendered again, it records the current
    template, its card leads with the speed and memory, and it passes a download's check."""
    name = "minilm-none-mrpc-seed0"
    folder = tmp_path / name
    shutil.copytree(CARDS / name, folder)
    data = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
    del data["card_template"]
    (folder / RESULTS_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    assert needs_rewriting(Results.load(folder)) == [
        f"its card is rendered with card template 1, not {CARD_TEMPLATE}"
    ]
    assert rerender(folder) == "rendered"
    results = Results.load(folder)
    assert results.card_template == CARD_TEMPLATE and card_problems(results, folder) == []
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "**Speed and memory**: `none` leaves attention" in card[: card.index("## Use it")]
