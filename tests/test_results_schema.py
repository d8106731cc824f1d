"""What results.json's reader refuses before any other check (issue 42): a run claiming a frozen older schema
that could not have written it, JSON that readers disagree on (duplicate keys) or that only looks finite."""

from __future__ import annotations

from attncard.pipeline.data import TASKS
from attncard.pipeline.results import FROZEN_SCHEMA_TASKS, SCHEMA_VERSION


def test_the_frozen_schemas_record_no_task_gated_on_a_second_split():
    assert set(FROZEN_SCHEMA_TASKS) == set(range(2, SCHEMA_VERSION))
    for version, tasks in FROZEN_SCHEMA_TASKS.items():
        assert set(tasks) <= set(TASKS), version
        assert [task for task in tasks if TASKS[task].second_split] == [], version
    assert "mnli" not in FROZEN_SCHEMA_TASKS[3] and TASKS["mnli"].second_split == "validation_mismatched"
