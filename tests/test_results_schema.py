"""What results.json's reader refuses before any other check (issue 42): a run claiming a frozen older schema
that could not have written it, JSON that readers disagree on (duplicate keys) or that only looks finite."""

from __future__ import annotations

import pytest

from attncard.pipeline.data import TASKS
from attncard.pipeline.results import FROZEN_SCHEMA_TASKS, SCHEMA_VERSION, loads_strict


def test_the_frozen_schemas_record_no_task_gated_on_a_second_split():
    assert set(FROZEN_SCHEMA_TASKS) == set(range(2, SCHEMA_VERSION))
    for version, tasks in FROZEN_SCHEMA_TASKS.items():
        assert set(tasks) <= set(TASKS), version
        assert [task for task in tasks if TASKS[task].second_split] == [], version
    assert "mnli" not in FROZEN_SCHEMA_TASKS[3] and TASKS["mnli"].second_split == "validation_mismatched"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"loss": 1e999}', r"1e999 is too large for a number and reads as infinity"),
        ('{"loss": [0.5, -1.5E+400]}', r"-1\.5E\+400 is too large for a number and reads as infinity"),
        ('{"metrics": {"accuracy": 0.5}, "metrics": {"accuracy": 1.0}}', r"the key 'metrics' appears twice"),
        ('{"a": [{"b": 1, "c": 2, "b": 1}]}', r"the key 'b' appears twice"),
    ],
)
def test_loads_strict_refuses_infinity_and_duplicate_keys(text, message):
    with pytest.raises(ValueError, match=message):
        loads_strict(text)


def test_loads_strict_still_reads_what_publish_writes():
    assert loads_strict('{"loss": 1e-999, "n": 1e3, "big": 12345678901234567890, "x": -0.0}') == {
        "loss": 0.0,
        "n": 1000.0,
        "big": 12345678901234567890,
        "x": -0.0,
    }
