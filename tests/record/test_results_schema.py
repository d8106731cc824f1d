"""What results.json's reader refuses before any other check (issue 42): a run claiming a frozen older schema
that could not have written it, JSON that readers disagree on (duplicate keys) or that only looks finite."""

from __future__ import annotations

import re
import subprocess

import pytest

from attncard.pipeline.record.frozen_schemas import (
    FROZEN_SCHEMA_ATTNCARD_VERSIONS,
    FROZEN_SCHEMA_COMMITS,
    FROZEN_SCHEMA_TASKS,
)
from attncard.pipeline.record.json_strict import loads_strict
from attncard.pipeline.record.results import SCHEMA_VERSION
from attncard.pipeline.scoring.tasks import TASKS
from conftest import REPO_ROOT


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


# Where SCHEMA_VERSION has been defined, oldest first: a commit's schema is read from the first that it holds.
SCHEMA_FILES = ("pipeline/results.py", "pipeline/record/results.py")


def _schema_of_each_commit() -> dict[str, int | None]:
    """The schema each commit of this repository's history wrote (`SCHEMA_VERSION` in its results module,
    at any path of SCHEMA_FILES; None before there was one), from `git cat-file`."""
    commits = subprocess.run(
        ["git", "rev-list", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    wanted = "".join(f"{commit}:{path}\n" for commit in commits for path in SCHEMA_FILES)
    batch = subprocess.run(
        ["git", "cat-file", "--batch"], cwd=REPO_ROOT, input=wanted.encode(), capture_output=True, check=True
    ).stdout
    schemas, position = {}, 0
    for commit in commits:
        schemas[commit] = None
        for _ in SCHEMA_FILES:
            header_end = batch.index(b"\n", position)
            header = batch[position:header_end].split()
            if header[-1] == b"missing":
                position = header_end + 1
                continue
            size = int(header[2])
            text = batch[header_end + 1 : header_end + 1 + size].decode("utf-8")
            position = header_end + 1 + size + 1
            match = re.search(r"^SCHEMA_VERSION = (\d+)", text, re.MULTILINE)
            if match:
                schemas[commit] = int(match.group(1))
    return schemas


def _in_git_history() -> bool:
    try:
        shallow = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"], cwd=REPO_ROOT, capture_output=True, text=True
        )
    except OSError:
        return False
    return shallow.returncode == 0 and shallow.stdout.strip() == "false"


@pytest.mark.skipif(not _in_git_history(), reason="needs the repository's whole git history")
def test_the_frozen_schema_commits_are_those_of_the_history():
    """FROZEN_SCHEMA_COMMITS lists exactly the commits that wrote schemas 1 to 3, and no commit that wrote a
    later schema shares their first 12 hex digits; every one of them is attncard 0.1.0."""
    schemas = _schema_of_each_commit()
    for version, listed in FROZEN_SCHEMA_COMMITS.items():
        assert {commit[:12] for commit, schema in schemas.items() if schema == version} == listed, version
    frozen = set().union(*FROZEN_SCHEMA_COMMITS.values())
    assert not [commit for commit, schema in schemas.items() if (schema or 0) > 3 and commit[:12] in frozen]
    assert max(FROZEN_SCHEMA_COMMITS) == max(FROZEN_SCHEMA_TASKS) == SCHEMA_VERSION - 1
    versions = {
        re.search(r'^version = "(.+)"', show, re.MULTILINE).group(1)
        for commit in sorted(frozen)
        if (show := _git_show(f"{commit}:pyproject.toml")) is not None
    }
    assert versions == set(FROZEN_SCHEMA_ATTNCARD_VERSIONS)


def _git_show(spec: str) -> str | None:
    shown = subprocess.run(["git", "show", spec], cwd=REPO_ROOT, capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else None
