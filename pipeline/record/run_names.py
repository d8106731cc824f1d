"""How a run is named: its folder and Hub repository, the tag of its push, and the command that reproduces it,
as results.json records them and a download builds them again. Standard library only: the publish
workflow names its runs with `default_repo_name` before any of attncard's dependencies is installed.
"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import TrainConfig

# A push tags its commit run-<started_at, YYYYMMDDTHHMMSSZ>-<first 32 hex digits of results.json's sha256>:
# 128 bits, so no other results.json can be made to carry the same tag.
TAG_PREFIX = "run-"
RUN_TAG_DIGEST_HEX = 32
RUN_TAG_RE = re.compile(rf"^{TAG_PREFIX}\d{{8}}T\d{{6}}Z-[0-9a-f]{{{RUN_TAG_DIGEST_HEX}}}$")


def run_tag(started_at: str, results_sha256: str) -> str:
    """The run tag of a run started at `started_at` (ISO 8601) whose results.json has this sha256.

    Example:
        >>> run_tag("2025-01-14T09:30:12+00:00", "3f1c2a9e0b7d4c6a8e5f1b2c3d4e5f60" * 2)
        'run-20250114T093012Z-3f1c2a9e0b7d4c6a8e5f1b2c3d4e5f60'
    """
    started = datetime.fromisoformat(started_at)
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{TAG_PREFIX}{stamp}-{results_sha256[:RUN_TAG_DIGEST_HEX]}"


def default_repo_name(model: str, module: str, task: str) -> str:
    """The name of a run's folder and Hub repository when none is given: `<model>-<module>-<task>`, the model
    being the last part of its alias, Hub id or folder, lowercased. publish and the publish workflow's matrix
    both name runs with it.

    Example:
        >>> default_repo_name("FacebookAI/roberta-base", "none", "sst2")
        'roberta-base-none-sst2'
    """
    return f"{PurePosixPath(model.rstrip('/')).name.lower()}-{module}-{task}"


# How the recorded command names the GLUE folder a run read: a shell variable the reader sets, not a path.
GLUE_DIR_PLACEHOLDER = '"$GLUE_DIR"'


def reproduce_command(
    model: str,
    module: str,
    task: str,
    train: TrainConfig,
    data_from_folder: bool,
    repo_id: str | None = None,
    name: str | None = None,
) -> str:
    """The `publish` command that reproduces a run, as results.json records it and the card shows it: the
    training options in full, `--data-dir "$GLUE_DIR"` when the rows came from a GLUE folder, and `--repo-id`
    or `--name` when given. publish writes it; a download builds it again from the recorded names and
    refuses any other.

    Example:
        >>> from attncard.pipeline.record.results import TrainConfig
        >>> reproduce_command("minilm", "none", "sst2", TrainConfig(steps=60), data_from_folder=True)
        'publish --model minilm --module none --task sst2 --steps 60 --batch-size 16 --lr 0.0002 --max-length
         128 --seed 0 --data-dir "$GLUE_DIR"'
    """
    words = ["publish", "--model", model, "--module", module, "--task", task]
    words += ["--steps", str(train.steps), "--batch-size", str(train.batch_size), "--lr", str(train.lr)]
    words += ["--max-length", str(train.max_length), "--seed", str(train.seed)]
    command = shlex.join(words)
    if data_from_folder:
        command += f" --data-dir {GLUE_DIR_PLACEHOLDER}"  # unquoted by shlex: the shell expands it
    if repo_id:
        command += f" --repo-id {shlex.quote(repo_id)}"
    elif name:
        command += f" --name {shlex.quote(name)}"  # the folder a reader's rerun writes
    return command


__all__ = [
    "GLUE_DIR_PLACEHOLDER",
    "RUN_TAG_DIGEST_HEX",
    "RUN_TAG_RE",
    "TAG_PREFIX",
    "default_repo_name",
    "reproduce_command",
    "run_tag",
]
