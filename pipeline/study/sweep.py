"""`attncard sweep MATRIX.yaml`: every (row, seed) of a matrix as one publish run, resumable, as a study.

A matrix (`cards/matrix.yaml`) lists runs, one row per (model, module, task), and the seeds to train each
with:

    seeds: [0, 1, 2]          # optional: every row's seeds, unless the row has its own (default: [0])
    runs:
      - {model: minilm, module: none, task: sst2, steps: 1000}
      - {model: minilm, module: sliding_window, task: sst2, steps: 1000, seeds: [0, 1]}

`model` is an alias, a Hub id or a local folder (as `publish --model` takes it, a folder relative to the
current folder); `module` and `task` are names `publish` knows; `steps` (optional, default that of
`publish`) is a whole number of at least 1; `seeds` are whole numbers of at least 0, each once. A row is
named at most once (a second row of the same model, module and task would write the same folders).

`resources` (optional, at the top for every run and in a row for its runs, key by key over the top's) is
what one run asks of a cluster (`attncard sweep --executor ray` or `slurm`): `cpus` (default 1), `gpus`
(default 0) and `memory_gib` (default: none reserved); Slurm grants only whole CPUs and GPUs. `cpus` is also
the number of torch threads the run trains and evaluates with (its whole part, at least 1), whichever
executor runs it, the local one (one run at a time) included: so a run gives the same predictions.csv, byte
for byte, on any executor of the same machine:

    resources: {cpus: 2, memory_gib: 8}
    runs:
      - {model: minilm, module: sliding_window, task: sst2, resources: {gpus: 1}}

Each (row, seed) is one [`run_publish`] into `<output>/<model>-<module>-<task>-seed<seed>/`, the model being
the last part of its alias, Hub id or folder as publish names runs. The `none` runs go first, so that a
module run finds the dense run of its (model, task, steps, seed) on disk. A run whose folder is there, passes
the checks of a download (`download_verified`, its status FAIL included) and is that very run (model, module,
task, training settings and seed, named for the same Hub repository) is not trained again. A run that fails
is reported in one line and the sweep goes on with the next. A module run that no dense run of its settings
will be compared with ([`unpaired_warnings`]) is a warning before anything runs, not an error: a study of
dense runs alone, or of a module alone, is legal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import logging
import math
import os
import reprlib
import shutil
import socket
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import yaml
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ...modules import get_module
from ..publish.publish import (
    PublishOptions,
    baseline_candidate,
    check_run_folders,
    copy_to_cards,
    run_publish,
)
from ..publish.push import check_push_only_options, check_push_setup, sign_and_push
from ..record.errors import AttncardError, first_line, visible
from ..record.results import Results, Status, TrainConfig
from ..record.run_names import default_repo_name
from ..run.data import check_data_dir, get_task
from ..run.models import MODEL_ALIASES, resolve_model_name
from ..verify.download import download_verified

logger = logging.getLogger(__name__)

DEFAULT_SEEDS = (TrainConfig().seed,)
# The dense run, which every module run of the same (model, task, steps, seed) is set against.
BASELINE_MODULE = "none"
ROW_KEYS = ("model", "module", "task", "steps", "seeds", "resources")
MATRIX_KEYS = ("runs", "seeds", "resources")
RESOURCE_KEYS = ("cpus", "gpus", "memory_gib")
# The most of each resource one run may ask for: more than any node has (a finite bound, so that 1e300 GiB
# is refused here, not by an OverflowError in Ray or a job Slurm holds forever).
RESOURCE_LIMITS = {"cpus": 4096, "gpus": 64, "memory_gib": 65536}
# A matrix file is a few kilobytes; the cap keeps a hostile one from costing time and memory to parse.
MAX_MATRIX_BYTES = 2**20
# How deep a matrix nests (the top, `runs`, a row, its `resources`: 4); deeper is refused before PyYAML's
# recursion goes that deep.
MAX_MATRIX_DEPTH = 16
# The longest model, module or task name (a model folder's path included).
MAX_NAME_CHARACTERS = 512
# How much of a value an error quotes: a hostile value must not make the message long.
SHOWN_CHARACTERS = 60
# How an error quotes a value of the matrix (see `_shown`): nested lists and long texts cut short, not built.
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxlist, _SHORT_REPR.maxdict = 2, 4, 4
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = SHOWN_CHARACTERS
# A run's log on a cluster (`--executor ray` or `slurm`), beside its folder: `<output>/<run name>.sweep.log`.
LOG_SUFFIX = ".sweep.log"
# The variables that hold the Hub token (huggingface_hub reads HF_TOKEN, then HUGGING_FACE_HUB_TOKEN). A
# cluster records the environment it hands its workers (Ray's runtime-env agent logs `env_vars` on every
# node, slurmctld keeps a job's environment): these never go into it, the workers read the token from a file
# (`hub_token_file`).
SECRET_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# The variable that gives a worker the path of that file, and the prefix of its folder under --output.
TOKEN_FILE_VARIABLE = "ATTNCARD_HF_TOKEN_FILE"
TOKEN_FOLDER_PREFIX = ".attncard-token-"


class MatrixError(AttncardError):
    """A matrix file that cannot be run: unreadable, or a row that names something unknown or is given twice.

    The message names the file, the line and the row, and says what to write instead.
    """


class StaleRunError(AttncardError):
    """A run folder of the sweep that is there but is not a finished run of its (row, seed): it fails the
    checks of a download, or it is another run. The sweep trains it again."""


def resource_problem(key: str, value: Any) -> str | None:
    """What is wrong with one resource of a run, or None: a finite number, more than 0 (`gpus`: 0 or more),
    at most `RESOURCE_LIMITS[key]`.

    Example:
        >>> resource_problem("memory_gib", 1e300)
        'memory_gib 1e+300 is more than a node has (at most 65536); write e.g. memory_gib: 16'
        >>> resource_problem("gpus", 0) is None
        True
    """
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or value < 0 or (value == 0 and key != "gpus"):
        least = "0 or more" if key == "gpus" else "more than 0"
        return f"{key} {_shown(value)} is not a number {least}; write e.g. {key}: 1"
    if value > RESOURCE_LIMITS[key]:
        example = {"cpus": 8, "gpus": 1, "memory_gib": 16}[key]
        return (
            f"{key} {_shown(value)} is more than a node has (at most {RESOURCE_LIMITS[key]}); write e.g. "
            f"{key}: {example}"
        )
    return None


@dataclass(frozen=True)
class RunResources:
    """What one run asks of a cluster: the scheduler (Ray's, or Slurm's) starts it on a node with that much
    free.

    Attributes:
        cpus: CPU cores (Ray's `num_cpus`, Slurm's `--cpus-per-task`), more than 0; whole for Slurm. Its
            whole part (at least 1) is also the run's torch threads (`torch_threads`), on every executor.
        gpus: GPUs (`num_gpus`, `--gpus-per-node`), 0 or more; a fraction shares one on Ray, and is refused
            by Slurm.
        memory_gib: memory in GiB (`memory`, `--mem`), more than 0; None reserves none (Slurm: the
            partition's default).

    Each is at most its `RESOURCE_LIMITS` (more than any node has).

    Raises:
        [`AttncardError`]: a value that is not a finite number in its range (see [`resource_problem`]).

    Example:
        >>> RunResources(cpus=2).ray_options()
        {'num_cpus': 2, 'num_gpus': 0}
        >>> RunResources(cpus=2.5).torch_threads, RunResources(cpus=0.5).torch_threads
        (2, 1)
    """

    cpus: float = 1
    gpus: float = 0
    memory_gib: float | None = None

    def __post_init__(self) -> None:
        for key in RESOURCE_KEYS:
            value = getattr(self, key)
            problem = resource_problem(key, value) if value is not None else None
            if problem is not None:
                raise AttncardError(f"resources {problem}")

    @property
    def torch_threads(self) -> int:
        """The torch threads the run trains and evaluates with, whichever executor runs it: its whole CPUs,
        at least 1. Logits of float32 sums split over another number of threads differ in their last digits,
        so a run's predictions.csv is the same, byte for byte, only at the same thread count."""
        return max(1, int(self.cpus))

    def ray_options(self) -> dict[str, float | int]:
        """The resources as options of a Ray task (`.options(**...)`)."""
        options: dict[str, float | int] = {"num_cpus": self.cpus, "num_gpus": self.gpus}
        if self.memory_gib is not None:
            options["memory"] = int(self.memory_gib * 2**30)
        return options


@dataclass(frozen=True)
class MatrixRow:
    """One row of a matrix, as written.

    Attributes:
        line: the row's line in the matrix file, for messages.
        model, module, task: as `publish --model/--module/--task` take them.
        steps: optimizer steps; None for publish's default.
        seeds: the row's own seeds; None when the row has none (the matrix's apply).
        resources: the resources the row sets, by key (over the matrix's); empty when it sets none.
    """

    line: int
    model: str
    module: str
    task: str
    steps: int | None
    seeds: tuple[int, ...] | None
    resources: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Matrix:
    """A matrix file: its rows, the seeds of the rows that have none of their own, and the resources of every
    run (by key, as written; `RunResources` fills in the rest)."""

    path: Path
    rows: tuple[MatrixRow, ...]
    seeds: tuple[int, ...] | None
    resources: dict[str, float] = dataclasses.field(default_factory=dict)

    def run_resources(self, row: MatrixRow) -> RunResources:
        """The resources of each run of `row`: the row's keys over the matrix's over the defaults."""
        return RunResources(**{**self.resources, **row.resources})


@dataclass(frozen=True)
class SweepRun:
    """One (row, seed) of a sweep: what it trains and where its folder goes.

    Attributes:
        model: as the matrix gives it (an alias, a Hub id or a folder).
        model_id: the model id publish records for it (a folder's name, an alias's Hub id).
        module, task: the attention module and the GLUE task.
        steps: optimizer steps.
        seed: the training seed.
        name: the run folder's name, `<model>-<module>-<task>-seed<seed>`.
        resources: what it asks of a cluster (`--executor ray` or `slurm`).
    """

    model: str
    model_id: str
    module: str
    task: str
    steps: int
    seed: int
    name: str
    resources: RunResources = RunResources()


@dataclass(frozen=True)
class SweepSettings:
    """What applies to every run of a sweep: where runs go, the training settings the matrix does not set, and
    the push.

    Attributes:
        output: the folder that receives the run folders.
        cards: copy each finished run there for review (`copy_to_cards`); None: no copy.
        data_dir: the GLUE folder; None: `GLUE_DIR`, else the Hub.
        hub_org: the Hub owner of the runs' repositories, `<hub_org>/<run name>`; the cards are rendered for
            them. None: the runs name no repository.
        push: push each finished run to its repository (needs `hub_org`).
        batch_size, lr, max_length: training settings of every run (publish's defaults).
        allow_fail, hub_endpoint, hub_timeout, hub_deadline, sign_key: as `publish --push` takes them.
    """

    output: Path = Path("runs")
    cards: Path | None = None
    data_dir: Path | None = None
    hub_org: str | None = None
    push: bool = False
    batch_size: int = TrainConfig().batch_size
    lr: float = TrainConfig().lr
    max_length: int = TrainConfig().max_length
    allow_fail: bool = False
    hub_endpoint: str | None = None
    hub_timeout: float | None = None
    hub_deadline: float | None = None
    sign_key: Path | None = None

    def train_config(self, run: SweepRun) -> TrainConfig:
        """The training settings of one run."""
        return TrainConfig(
            steps=run.steps, batch_size=self.batch_size, lr=self.lr, max_length=self.max_length, seed=run.seed
        )

    def repo_id(self, run: SweepRun) -> str | None:
        """The Hub repository of one run, `<hub_org>/<run name>`; None without `hub_org`."""
        return f"{self.hub_org}/{run.name}" if self.hub_org else None


@dataclass
class RunOutcome:
    """What became of one run of a sweep.

    Attributes:
        run: the run.
        state: `ran` (trained and written now), `skipped` (finished before) or `failed`.
        folder: the run folder, when there is one.
        status: its verification status, when it finished.
        accuracy: its accuracy, when it finished.
        error: the first line of the error, when it failed.
    """

    run: SweepRun
    state: Literal["ran", "skipped", "failed"]
    folder: Path | None = None
    status: Status | None = None
    accuracy: float | None = None
    error: str = ""


# --- the matrix --------------------------------------------------------------------------------------------


def read_matrix(path: str | os.PathLike) -> Matrix:
    """Reads and checks a matrix file: every row's keys, names and numbers, before anything runs.

    Checked: the file is at most `MAX_MATRIX_BYTES`, YAML without anchors or aliases (a matrix never needs
    them, and an alias bomb of a few hundred bytes expands to gigabytes) nor nesting deeper than
    `MAX_MATRIX_DEPTH`, holding a mapping with a `runs`
    list (and an optional `seeds` list); each row is a mapping of the keys `ROW_KEYS`, with `model`,
    `module` and `task` one line of printable text of at most `MAX_NAME_CHARACTERS` (a model alias, Hub id
    or model folder; a module [`get_module`] knows; a GLUE task), `steps` a whole number of at least 1,
    `seeds` a non-empty list of distinct whole numbers of at least 0, `resources` finite and within
    `RESOURCE_LIMITS`; no two rows name the same run. A value an error quotes is shown as Python writes it
    (control characters escaped), cut at `SHOWN_CHARACTERS`.

    Args:
        path: the matrix file, e.g. `cards/matrix.yaml`.

    Returns:
        The [`Matrix`].

    Raises:
        [`MatrixError`]: the first problem found, naming the file, the line and what to write instead.

    Example:
        >>> _ = Path("matrix.yaml").write_text(  # with examples/sliding_window installed
        ...     "seeds: [0, 1]\\nruns:\\n"
        ...     "  - {model: tiny-gpt2, module: none, task: sst2, steps: 2}\\n"
        ...     "  - {model: tiny-gpt2, module: sliding_window, task: sst2, steps: 2, seeds: [3]}\\n"
        ... )
        >>> matrix = read_matrix("matrix.yaml")
        >>> [(row.module, row.steps, row.seeds) for row in matrix.rows], matrix.seeds
        ([('none', 2, None), ('sliding_window', 2, (3,))], (0, 1))
        >>> bad_row = "{model: tiny-gpt2, module: adaptive_spam, task: sst2}"
        >>> _ = Path("bad.yaml").write_text(f"runs:\\n  - {bad_row}\\n")
        >>> read_matrix("bad.yaml")
        Traceback (most recent call last):
        ...
        attncard.pipeline.study.sweep.MatrixError: bad.yaml:2: row 1: unknown module 'adaptive_spam'; ...
    """
    path = Path(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_MATRIX_BYTES + 1)  # no more: a hostile file must not fill the memory
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise MatrixError(f"{path}: no such matrix file; pass a YAML file like cards/matrix.yaml") from None
    except (OSError, UnicodeDecodeError) as error:
        raise MatrixError(f"{path}: cannot be read ({first_line(error)}); pass a UTF-8 YAML file") from None
    if len(raw) > MAX_MATRIX_BYTES:
        raise MatrixError(
            f"{path}: is larger than {MAX_MATRIX_BYTES // 2**20} MiB; a matrix lists its rows in a few "
            "kilobytes: pass the matrix file itself"
        )
    try:
        root, data = _load_yaml(text)
    except _AliasError as error:
        raise MatrixError(
            f"{path}:{error.line}: YAML anchors and aliases (&name, *name) are not accepted in a matrix; "
            "write each value out"
        ) from None
    except _DepthError as error:
        raise MatrixError(
            f"{path}:{error.line}: nests deeper than {MAX_MATRIX_DEPTH} levels of lists and mappings; a "
            "matrix has 4 (the top, runs, a row, its resources): see cards/matrix.yaml"
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(error, "problem", None) or first_line(error)
        raise MatrixError(
            f"{where}: not valid YAML: {visible(problem, SHOWN_CHARACTERS)}; fix the file"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or not data["runs"]:
        raise MatrixError(
            f"{path}: must be a mapping with a non-empty list 'runs' of rows (see cards/matrix.yaml)"
        )
    unknown = sorted((key for key in data if key not in MATRIX_KEYS), key=str)
    if unknown:
        raise MatrixError(
            f"{path}: unknown key {_shown(unknown[0])}; a matrix has the keys {', '.join(MATRIX_KEYS)}"
        )
    seeds = _seeds(data["seeds"], f"{path}:{_line(root, 'seeds')}: seeds") if "seeds" in data else None
    resources = (
        _resources(data["resources"], f"{path}:{_line(root, 'resources')}: resources")
        if "resources" in data
        else {}
    )
    row_nodes = _mapping_value(root, "runs")
    lines = [node.start_mark.line + 1 for node in row_nodes.value] if row_nodes is not None else []
    rows: list[MatrixRow] = []
    named: dict[str, int] = {}
    for number, (item, line) in enumerate(zip(data["runs"], lines, strict=True), start=1):
        row = _row(item, f"{path}:{line}: row {number}", line)
        name = _run_name(row.model, row.module, row.task)
        if name in named:
            raise MatrixError(
                f"{path}:{line}: row {number} names {name} again (row {named[name]}); list each model, "
                "module and task once, with all its seeds"
            )
        named[name] = number
        rows.append(row)
    return Matrix(path=path, rows=tuple(rows), seeds=seeds, resources=resources)


def _row(item: Any, where: str, line: int) -> MatrixRow:
    """One row of the matrix, checked; `where` starts every message."""
    if not isinstance(item, dict):
        raise MatrixError(f"{where}: a row is a mapping {{model: …, module: …, task: …}}, not {_kind(item)}")
    unknown = sorted((key for key in item if key not in ROW_KEYS), key=str)
    if unknown:
        raise MatrixError(
            f"{where}: unknown key {_shown(unknown[0])}; a row has the keys {', '.join(ROW_KEYS)}"
        )
    for key in ("model", "module", "task"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            given = "no" if key not in item else _kind(item[key]) + " as"
            raise MatrixError(f"{where}: {given} {key}; write {key}: <name>")
        # A name goes into run names, folders and the sweep's report, one line per run: a line break in it
        # would forge a line of that report, another control character rewrite the terminal.
        if not item[key].isprintable():
            raise MatrixError(
                f"{where}: {key} {_shown(item[key])} is not one line of printable text; write the {key} "
                "on one line, without control characters"
            )
        if len(item[key]) > MAX_NAME_CHARACTERS:
            raise MatrixError(
                f"{where}: {key} {_shown(item[key])} is longer than {MAX_NAME_CHARACTERS} characters; "
                f"write a shorter {key} (a model folder: a shorter path to it)"
            )
    try:
        get_module(item["module"])
        get_task(item["task"])
        resolve_model_name(item["model"])
    except AttncardError as error:
        raise MatrixError(f"{where}: {error}") from None
    steps = item.get("steps")
    if steps is not None and (not _is_whole(steps) or steps < 1):
        raise MatrixError(
            f"{where}: steps {_shown(steps)} is not a whole number of at least 1; write e.g. steps: 200"
        )
    seeds = _seeds(item["seeds"], f"{where}: seeds") if "seeds" in item else None
    resources = _resources(item["resources"], f"{where}: resources") if "resources" in item else {}
    return MatrixRow(
        line=line,
        model=item["model"],
        module=item["module"],
        task=item["task"],
        steps=steps,
        seeds=seeds,
        resources=resources,
    )


def _resources(value: Any, where: str) -> dict[str, float]:
    """Checked resources: keys of `RESOURCE_KEYS`, each a number in its range ([`resource_problem`])."""
    if not isinstance(value, dict) or not value:
        raise MatrixError(
            f"{where}: write a mapping of {', '.join(RESOURCE_KEYS)}, e.g. {{cpus: 2, gpus: 1}}"
        )
    unknown = sorted((key for key in value if key not in RESOURCE_KEYS), key=str)
    if unknown:
        raise MatrixError(
            f"{where}: unknown key {_shown(unknown[0])}; resources are {', '.join(RESOURCE_KEYS)}"
        )
    for key, number in value.items():
        problem = resource_problem(key, number)
        if problem is not None:
            raise MatrixError(f"{where}: {problem}")
    return dict(value)


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    """A checked list of seeds: non-empty, whole numbers of at least 0, each once."""
    if not isinstance(value, list) or not value:
        raise MatrixError(f"{where}: write a non-empty list of whole numbers, e.g. [0, 1, 2]")
    for seed in value:
        if not _is_whole(seed) or seed < 0:
            raise MatrixError(f"{where}: {_shown(seed)} is not a whole number of at least 0")
    repeated = sorted({seed for seed in value if value.count(seed) > 1})
    if repeated:
        raise MatrixError(f"{where}: seed {repeated[0]} is listed twice; list each seed once")
    return tuple(value)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a text"}.get(type(value), f"the value {_shown(value)}")


def _shown(value: Any) -> str:
    """A value of the matrix as an error quotes it: as Python writes it (a text quoted, its control
    characters escaped: `'a\\nb'`), cut at `SHOWN_CHARACTERS`, so that a hostile value can neither forge a
    line nor make the message long.

    Example:
        >>> _shown("org/model\\nran      forged-run")
        "'org/model\\\\nran      forged-run'"
    """
    return visible(_SHORT_REPR.repr(value), SHOWN_CHARACTERS)


class _AliasError(yaml.YAMLError):
    """An anchor or alias in a matrix file, at a line (from 1)."""

    def __init__(self, line: int) -> None:
        super().__init__(f"an anchor or alias at line {line}")
        self.line = line


class _DepthError(yaml.YAMLError):
    """A matrix file nested deeper than `MAX_MATRIX_DEPTH`, at a line (from 1)."""

    def __init__(self, line: int) -> None:
        super().__init__(f"nested too deep at line {line}")
        self.line = line


class _MatrixLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing anchors and aliases where it meets them, before any node is built from
    them (an alias bomb costs nothing), and nodes nested deeper than `MAX_MATRIX_DEPTH` (PyYAML builds nodes
    by recursion: a file of brackets would end in a RecursionError)."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _AliasError(event.start_mark.line + 1)
        if self.depth >= MAX_MATRIX_DEPTH:
            raise _DepthError(event.start_mark.line + 1)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _load_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """The matrix's node tree (for the lines of messages) and its data, from one parse without aliases."""
    loader = _MatrixLoader(text)
    try:
        root = loader.get_single_node()
        return root, loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()


def _mapping_value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value_node
    return None


def _line(root: yaml.Node, key: str) -> int:
    node = _mapping_value(root, key)
    return node.start_mark.line + 1 if node is not None else 1


def _run_name(model: str, module: str, task: str, seed: int | None = None) -> str:
    """`<model>-<module>-<task>` as publish names a run (see `PublishOptions.repo_name`), `-seed<seed>`
    appended when a seed is given."""
    named = model if model in MODEL_ALIASES else resolve_model_name(model)[1]
    name = default_repo_name(named, module, task)
    return name if seed is None else f"{name}-seed{seed}"


# --- the plan ----------------------------------------------------------------------------------------------


def plan_sweep(
    matrix: Matrix, seeds: list[int] | tuple[int, ...] | None = None, only: list[str] | None = None
) -> list[SweepRun]:
    """The runs of a matrix, in the order they run: every (row, seed), the `none` runs first.

    Args:
        matrix: from [`read_matrix`].
        seeds: the seeds of every row, overriding the matrix's (`--seeds`); None: each row's `seeds`, else the
            matrix's, else `DEFAULT_SEEDS`.
        only: keep the runs whose name matches one of these shell patterns (`fnmatch`, e.g. `*-seed0`).

    Returns:
        The runs: the dense (`none`) runs first, then the others, each part in the matrix's order of rows and,
        within a row, of seeds.

    Raises:
        [`MatrixError`]: a seed is negative or given twice, or a pattern of `only` matches no run.

    Example:
        >>> _ = Path("matrix.yaml").write_text(  # with examples/sliding_window installed
        ...     "runs:\\n  - {model: tiny-gpt2, module: sliding_window, task: sst2, steps: 2}\\n"
        ...     "  - {model: tiny-gpt2, module: none, task: sst2, steps: 2}\\n"
        ... )
        >>> for run in plan_sweep(read_matrix("matrix.yaml"), seeds=[0, 1]):
        ...     print(run.name)
        tiny-gpt2-none-sst2-seed0
        tiny-gpt2-none-sst2-seed1
        tiny-gpt2-sliding_window-sst2-seed0
        tiny-gpt2-sliding_window-sst2-seed1
    """
    if seeds is not None:
        seeds = _seeds(list(seeds), "--seeds")
    default_steps = TrainConfig().steps
    runs = []
    for row in matrix.rows:
        model_id = resolve_model_name(row.model)[1]
        resources = matrix.run_resources(row)
        for seed in seeds or row.seeds or matrix.seeds or DEFAULT_SEEDS:
            runs.append(
                SweepRun(
                    model=row.model,
                    model_id=model_id,
                    module=row.module,
                    task=row.task,
                    steps=row.steps if row.steps is not None else default_steps,
                    seed=seed,
                    name=_run_name(row.model, row.module, row.task, seed),
                    resources=resources,
                )
            )
    if only:
        for pattern in only:
            if not any(fnmatch.fnmatchcase(run.name, pattern) for run in runs):
                shown = ", ".join(run.name for run in runs[:4]) + (", …" if len(runs) > 4 else "")
                raise MatrixError(f"--only {pattern} matches no run of {matrix.path} (runs: {shown})")
        runs = [run for run in runs if any(fnmatch.fnmatchcase(run.name, pattern) for pattern in only)]
    # Stable: the matrix's order within each part.
    return sorted(runs, key=lambda run: run.module != BASELINE_MODULE)


def check_sweep(runs: list[SweepRun], settings: SweepSettings) -> None:
    """Checks, before any training, what every run needs: its data, the folders it writes, and its push.

    Checked: the GLUE folder holds every task's folder (`settings.data_dir`, else `GLUE_DIR`, when either is
    set); every run folder and cards folder can be written and is not a file; `--cards` and `--output` do not
    overlap; `hub_org` makes a valid repository id with every run's name; with `push`, a token, the network
    and the signing key (`check_push_setup`); the push options are only given with `push`.

    Raises:
        [`AttncardError`]: the first problem, naming the option and what to do.

    Example:
        >>> _ = Path("matrix.yaml").write_text("runs:\\n  - {model: tiny-gpt2, module: none, task: sst2}\\n")
        >>> runs = plan_sweep(read_matrix("matrix.yaml"))
        >>> check_sweep(runs, SweepSettings(data_dir=Path("glue"), push=True))
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.AttncardError: --push needs --hub-org ORG: ...
    """
    data_dir = settings.data_dir or os.environ.get("GLUE_DIR") or None
    if data_dir is not None:
        for task in sorted({run.task for run in runs}):
            check_data_dir(get_task(task), data_dir)
    if settings.push and not settings.hub_org:
        raise AttncardError(
            "--push needs --hub-org ORG: each run goes to ORG/<run name>; add --hub-org, or drop --push"
        )
    if not settings.push:
        check_push_only_options(settings)
    for run in runs:
        repo_id = settings.repo_id(run)
        if repo_id is not None:
            try:
                validate_repo_id(repo_id)
            except HFValidationError:
                raise AttncardError(
                    f"--hub-org {settings.hub_org}: '{repo_id}' is not a Hub repository id; pass the name "
                    "of a Hub user or organisation"
                ) from None
        check_run_folders(settings.output, settings.cards, run.name)
    if settings.push and runs:
        check_push_setup(settings.repo_id(runs[0]), settings.hub_endpoint, settings.sign_key)


def unpaired_warnings(
    runs: list[SweepRun], settings: SweepSettings, planned: list[SweepRun] | None = None
) -> list[str]:
    """What to warn of before a sweep runs: each module row whose runs no dense run will be compared with, so
    that their cards have no paired verdict ("No dense baseline ... was found"), naming the closest dense row
    and the settings that differ. Legal (a study of one module, a dense run trained elsewhere), but mostly a
    slip of the matrix, better said now than after the training.

    A module run has its dense run when a `none` run of its model, task, steps and seed is one of `runs` (it
    runs first, [`dense_run_of`]) or is in `settings.output` already, found as publish finds it
    ([`baseline_candidate`]).

    Args:
        runs: the sweep's runs, from [`plan_sweep`] (`--only` applied).
        settings: what applies to every run.
        planned: every run of the matrix (`plan_sweep` without `only`), where the closest dense row is looked
            for; None: `runs`.

    Returns:
        One message per module row with such runs, without the `warning: ` the command line puts before it.

    Example:
        >>> _ = Path("matrix.yaml").write_text(  # with examples/sliding_window installed
        ...     "runs:\\n  - {model: tiny-gpt2, module: none, task: sst2, steps: 30}\\n"
        ...     "  - {model: tiny-gpt2, module: sliding_window, task: sst2, steps: 40}\\n"
        ... )
        >>> print(*unpaired_warnings(plan_sweep(read_matrix("matrix.yaml")), SweepSettings()))
        tiny-gpt2-sliding_window-sst2-seed0 has no dense run at its settings (steps 40; the dense row
        tiny-gpt2-none-sst2 has steps 30): its card will have no paired verdict; give both rows the same steps
    """
    planned = runs if planned is None else planned
    rows: dict[str, list[SweepRun]] = {}  # each module row's runs of this sweep, by the row's name
    for run in runs:
        if run.module != BASELINE_MODULE:
            rows.setdefault(_run_name(run.model, run.module, run.task), []).append(run)
    warnings = []
    for row_runs in rows.values():
        unpaired = [
            run
            for run in row_runs
            if dense_run_of(run, runs) is None and not _dense_run_on_disk(run, settings)
        ]
        if unpaired:
            warnings.append(_unpaired_message(unpaired, planned, settings))
    return warnings


def _dense_run_on_disk(run: SweepRun, settings: SweepSettings) -> bool:
    """Whether `settings.output` holds the dense run publish would compare `run` with."""
    try:
        candidate = baseline_candidate(publish_options(run, settings))
    except AttncardError:
        return True  # a candidate is there but does not check: the run stops on it, saying so
    return candidate is not None and Results.load(candidate).model.model_id == run.model_id


def _unpaired_message(unpaired: list[SweepRun], planned: list[SweepRun], settings: SweepSettings) -> str:
    """The warning for module runs of one row that have no dense run: which, the closest dense row of the
    matrix (the same model and task, the same steps if one has them) and what differs."""
    first = unpaired[0]
    seeds = [run.seed for run in unpaired]
    if len(unpaired) == 1:
        subject, cards = f"{first.name} has no dense run at its settings", "its card"
    else:
        row_name = _run_name(first.model, first.module, first.task)
        subject, cards = (
            f"{row_name} ({_seeds_shown(seeds)}) has no dense runs at its settings",
            "their cards",
        )
    dense_rows: dict[str, list[SweepRun]] = {}  # the matrix's dense rows of this model and task, by name
    for run in planned:
        if run.module == BASELINE_MODULE and (run.model_id, run.task) == (first.model_id, first.task):
            dense_rows.setdefault(_run_name(run.model, run.module, run.task), []).append(run)
    if not dense_rows:
        reason = f"the matrix has no dense row of {first.model} on {first.task}"
        advice = (
            f"add the row {{model: {first.model}, module: {BASELINE_MODULE}, task: {first.task}, steps: "
            f"{first.steps}}}"
        )
    else:
        name, dense = min(dense_rows.items(), key=lambda item: item[1][0].steps != first.steps)
        dense_seeds = sorted(run.seed for run in dense)
        missing = [seed for seed in seeds if seed not in dense_seeds]
        if dense[0].steps != first.steps:
            reason = f"steps {first.steps}; the dense row {name} has steps {dense[0].steps}"
            advice = "give both rows the same steps"
        elif missing:
            reason = f"{_seeds_shown(missing)}; the dense row {name} has {_seeds_shown(dense_seeds)}"
            advice = "give both rows the same seeds"
        else:
            reason = f"the dense row {name} is left out by --only, and {settings.output} does not hold it"
            advice = f"add {name}-seed* to --only, or run it first"
    return f"{subject} ({reason}): {cards} will have no paired verdict; {advice}"


def _seeds_shown(seeds: list[int]) -> str:
    """`seed 0`, `seeds 0 and 1`, `seeds 0, 1 and 2`."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return f"seeds {', '.join(map(str, seeds[:-1]))} and {seeds[-1]}"


# --- running -----------------------------------------------------------------------------------------------


def publish_options(run: SweepRun, settings: SweepSettings) -> PublishOptions:
    """The options of publish for one run of a sweep: its folder is `<output>/<run name>/`.

    Example:
        >>> name = "tiny-gpt2-none-sst2-seed1"
        >>> run = SweepRun("tiny-gpt2", "tiny-gpt2", "none", "sst2", steps=2, seed=1, name=name)
        >>> options = publish_options(run, SweepSettings(hub_org="loopback-user"))
        >>> options.run_dir, options.repo_id, options.train.seed
        (PosixPath('runs/tiny-gpt2-none-sst2-seed1'), 'loopback-user/tiny-gpt2-none-sst2-seed1', 1)
    """
    return PublishOptions(
        model=run.model,
        module=run.module,
        task=run.task,
        train=settings.train_config(run),
        data_dir=settings.data_dir,
        output=settings.output,
        repo_id=settings.repo_id(run),
        push=settings.push,
        cards=settings.cards,
        allow_fail=settings.allow_fail,
        hub_endpoint=settings.hub_endpoint,
        hub_timeout=settings.hub_timeout,
        hub_deadline=settings.hub_deadline,
        sign_key=settings.sign_key,
        name=run.name,
    )


def previous_run(run: SweepRun, settings: SweepSettings) -> Results | None:
    """The results of a run finished before: its folder is there, passes the checks of a download
    (`download_verified`, a FAIL status accepted: that run is finished too) and is this very run.

    This very run: the same model id, module, task, training settings (steps, seed, batch size, learning rate,
    length and the rest of `TrainConfig`), run name and Hub repository.

    Returns:
        Its results; None when there is no folder.

    Raises:
        [`StaleRunError`]: the folder is there but fails a check or holds another run; the message says which.

    Example:
        >>> name = "tiny-gpt2-none-sst2"  # trained from a model folder named gpt2, since copied to tiny-gpt2/
        >>> run = SweepRun("tiny-gpt2", "gpt2", "none", "sst2", steps=10, seed=0, name=name)
        >>> settings = SweepSettings(batch_size=8, lr=3e-2, hub_org="loopback-user")
        >>> previous_run(run, settings).verification.status
        <Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>
        >>> previous_run(dataclasses.replace(run, seed=1), settings)
        Traceback (most recent call last):
        ...
        attncard.pipeline.study.sweep.StaleRunError: runs/tiny-gpt2-none-sst2 holds another run: its seed is
        0, ...
    """
    folder = settings.output / run.name
    if not folder.exists():
        return None
    try:
        results = download_verified(folder, allow_failed=True).results
    except AttncardError as error:
        raise StaleRunError(f"{folder} fails its checks: {first_line(error)}") from None
    recorded: list[tuple[str, Any, Any]] = [
        ("model", results.model.model_id, run.model_id),
        ("module", results.module.name, run.module),
        ("task", results.dataset.task, run.task),
        ("name", results.repo_name, run.name),
        ("Hub repository", results.repo_id, settings.repo_id(run)),
    ]
    expected_config, config = settings.train_config(run), results.training.hyperparameters
    recorded += [
        (field.name.replace("_", " "), getattr(config, field.name), getattr(expected_config, field.name))
        for field in dataclasses.fields(TrainConfig)
    ]
    for what, found, wanted in recorded:
        if found != wanted:
            raise StaleRunError(f"{folder} holds another run: its {what} is {found}, not {wanted}")
    return results


def run_sweep(runs: list[SweepRun], settings: SweepSettings) -> Iterator[RunOutcome]:
    """Runs each run of a sweep in turn, yielding what became of it; a failure does not stop the sweep.

    A run finished before (see [`previous_run`]) is not trained again: it is copied to `settings.cards` and,
    with `settings.push`, pushed again (a push of what the Hub already holds commits nothing). Any other run
    is trained, evaluated and written by [`run_publish`], which copies and pushes it. A run that raises is
    reported in one line, `<run name>: <first line of the error>`, and the next one starts. Progress goes to
    this module's logger.

    Check the runs with [`check_sweep`] first.

    Args:
        runs: from [`plan_sweep`], in that order.
        settings: what applies to every run.

    Yields:
        A [`RunOutcome`] for each run, once it is done.
    """
    for run in runs:
        try:
            outcome = _run_one(run, settings)
        except KeyboardInterrupt:
            raise
        except Exception as error:  # one run's failure, whatever it is, must not end the study
            message = first_line(error)
            if not isinstance(error, AttncardError):
                message = f"{type(error).__name__}: {message}"
            logger.error(f"{run.name}: {message}")
            outcome = RunOutcome(run=run, state="failed", error=message)
        yield outcome


def _run_one(run: SweepRun, settings: SweepSettings) -> RunOutcome:
    try:
        results = previous_run(run, settings)
    except StaleRunError as error:
        logger.info(f"{run.name}: training it again: {error}")
        results = None
    folder = settings.output / run.name
    if results is not None:
        logger.info(
            f"{run.name}: skipped, finished before ({results.verification.status.value}, accuracy "
            f"{results.metrics.accuracy:.4f}): {folder}/"
        )
        if settings.cards is not None:
            copy_to_cards(folder, settings.cards)
        repo_id = settings.repo_id(run)
        if settings.push and repo_id is not None:
            sign_and_push(
                folder,
                repo_id,
                settings.allow_fail,
                settings.hub_endpoint,
                settings.hub_timeout,
                settings.hub_deadline,
                settings.sign_key,
            )
        state: Literal["ran", "skipped"] = "skipped"
    else:
        threads = run.resources.torch_threads
        logger.info(
            f"{run.name}: training ({run.module}, {run.task}, {run.steps} steps, seed {run.seed}, {threads} "
            f"torch thread{'s' if threads != 1 else ''})"
        )
        with torch_threads(threads):
            folder = run_publish(publish_options(run, settings))
        results = Results.load(folder)
        state = "ran"
    return RunOutcome(
        run=run,
        state=state,
        folder=folder,
        status=results.verification.status,
        accuracy=results.metrics.accuracy,
    )


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """While the block runs, torch runs its operators on `count` threads (`torch.set_num_threads`), then on
    as many as before: a sweep's run trains and evaluates on its own thread count
    ([`RunResources.torch_threads`]) in whichever process runs it, and its results.json records that count
    (`efficiency.torch_threads`).

    Example:
        >>> with torch_threads(1):
        ...     torch.get_num_threads()
        1
    """
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# --- on a cluster ------------------------------------------------------------------------------------------


def run_log(run: SweepRun, settings: SweepSettings) -> Path:
    """The log of one run of a sweep on a cluster (`--executor ray` or `slurm`),
    `<output>/<run name>.sweep.log`: beside the run folder, not in it (a run folder holds exactly the files
    its manifest lists).

    Example:
        >>> run = SweepRun("minilm", "minilm", "none", "sst2", steps=2, seed=0, name="minilm-none-sst2-seed0")
        >>> run_log(run, SweepSettings())
        PosixPath('runs/minilm-none-sst2-seed0.sweep.log')
    """
    return settings.output / f"{run.name}{LOG_SUFFIX}"


def dense_run_of(run: SweepRun, runs: list[SweepRun]) -> SweepRun | None:
    """The dense run of the sweep that `run` is compared with: the `none` run of its model, task, steps and
    seed; None for a dense run, or when the sweep has none.

    A cluster executor starts a module run once this run is done, so that it finds its baseline on disk.

    Example:
        >>> dense = SweepRun("m", "m", "none", "sst2", steps=2, seed=0, name="m-none-sst2-seed0")
        >>> module = SweepRun("m", "m", "sliding_window", "sst2", steps=2, seed=0, name="m-window-sst2-seed0")
        >>> dense_run_of(module, [dense, module]).name, dense_run_of(dense, [dense, module])
        ('m-none-sst2-seed0', None)
    """
    if run.module == BASELINE_MODULE:
        return None
    return next(
        (
            other
            for other in runs
            if other.module == BASELINE_MODULE
            and (other.model_id, other.task, other.steps, other.seed)
            == (run.model_id, run.task, run.steps, run.seed)
        ),
        None,
    )


def run_on_worker(run: SweepRun, settings: SweepSettings, cwd: str) -> RunOutcome:
    """One run in a process of a cluster (a Ray worker, a Slurm job): the local executor's step
    ([`run_sweep`] of this one run) in the driver's folder `cwd`, its progress appended to [`run_log`].

    The log starts with `<run name>: started on <host>, process <pid>`, then the lines the local executor
    prints on stderr. When the environment names the Hub token's file (`TOKEN_FILE_VARIABLE`, see
    [`hub_token_file`]), the token read from it is `HF_TOKEN` while the run runs, and only then. A run that
    fails is a failed [`RunOutcome`], as with [`run_sweep`]: this raises only when the run cannot start
    (`cwd` is not there, the token's file cannot be read, the log cannot be written).

    Example (what a Ray task or a Slurm job calls, in the folder every node sees):

        outcome = run_on_worker(run, SweepSettings(output=Path("runs")), cwd="/shared/study")
    """
    os.chdir(cwd)  # the driver's folder, which every node sees: relative paths mean the same there
    token = _read_token_file()
    log = run_log(run, settings)
    log.parent.mkdir(parents=True, exist_ok=True)
    # The handlers of the command line's progress (cli.common.progress_on_stderr), into the log.
    handlers = []
    for name, prefix in (("attncard.pipeline.publish.push", "push: "), ("attncard.pipeline", "")):
        stage_logger = logging.getLogger(name)
        handler = logging.FileHandler(log, encoding="utf-8")
        handler.setFormatter(logging.Formatter(f"{prefix}%(message)s"))
        handlers.append((stage_logger, handler, stage_logger.level, stage_logger.propagate))
        stage_logger.addHandler(handler)
        stage_logger.setLevel(logging.INFO)
    logging.getLogger("attncard.pipeline.publish.push").propagate = False
    try:
        logger.info(f"{run.name}: started on {socket.gethostname()}, process {os.getpid()}")
        with _environment({"HF_TOKEN": token} if token else {}):
            return next(run_sweep([run], settings))
    finally:
        for stage_logger, handler, level, propagate in handlers:
            stage_logger.removeHandler(handler)
            handler.close()
            stage_logger.setLevel(level)
            stage_logger.propagate = propagate


# --- the Hub token, on a cluster ---------------------------------------------------------------------------


@contextlib.contextmanager
def hub_token_file(folder: str | os.PathLike) -> Iterator[dict[str, str]]:
    """While the block runs, the Hub token of this environment (`HF_TOKEN`, else `HUGGING_FACE_HUB_TOKEN`) in
    a file only this user can read, for the workers of a cluster to read: what to add to their environment
    is its path, never the token.

    The file is `<folder>/.attncard-token-<random>/token`, mode 0600 in a folder of mode 0700 (whatever the
    umask); `folder` must be on the file system every node sees (the sweep's `--output`). The folder is
    removed when the block ends, however it ends (a driver killed outright leaves it: delete it by hand).

    Args:
        folder: where to create the token's folder (created if missing).

    Returns:
        A context manager giving `{TOKEN_FILE_VARIABLE: <absolute path of the file>}`, or `{}` when this
        environment has no token (nothing is written then).

    Example:
        >>> os.environ["HF_TOKEN"] = "hf_example"
        >>> with hub_token_file("runs") as environment:
        ...     path = Path(environment[TOKEN_FILE_VARIABLE])
        ...     modes = [oct(file.stat().st_mode & 0o777) for file in (path, path.parent)]
        ...     print(path.read_text(), *modes)
        hf_example 0o600 0o700
        >>> path.parent.exists()
        False
        >>> del os.environ["HF_TOKEN"]
    """
    token = next((os.environ[name] for name in SECRET_VARIABLES if os.environ.get(name)), None)
    if token is None:
        yield {}
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    secret_folder = Path(tempfile.mkdtemp(prefix=TOKEN_FOLDER_PREFIX, dir=folder)).resolve()
    try:
        os.chmod(secret_folder, 0o700)  # mkdtemp's mode already, said here: the folder is the user's alone
        path = secret_folder / "token"
        # Created with its mode: no moment when another user could open it.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(token)
        os.chmod(path, 0o600)  # os.open's mode is cut by the umask, never widened: this is what it is
        yield {TOKEN_FILE_VARIABLE: str(path)}
    finally:
        shutil.rmtree(secret_folder, ignore_errors=True)


@contextlib.contextmanager
def cluster_environment(extra: Mapping[str, str]) -> Iterator[None]:
    """While the block runs, this process's environment without `SECRET_VARIABLES` and with `extra`, then as
    it was: what the block starts (`sbatch`, which exports its environment into a job; a Ray instance, whose
    workers inherit its environment) does not have the token.

    Example:
        >>> os.environ["HF_TOKEN"] = "hf_example"
        >>> with cluster_environment({TOKEN_FILE_VARIABLE: "/shared/runs/.attncard-token-x/token"}):
        ...     "HF_TOKEN" in os.environ, os.environ[TOKEN_FILE_VARIABLE]
        (False, '/shared/runs/.attncard-token-x/token')
        >>> os.environ.pop("HF_TOKEN")
        'hf_example'
    """
    with _environment({**dict.fromkeys(SECRET_VARIABLES), **extra}):
        yield


@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    """Sets each variable of `changes` (None: unsets it) while the block runs, then puts back what was."""
    before = {name: os.environ.get(name) for name in changes}
    try:
        _set_environment(changes)
        yield
    finally:
        _set_environment(before)


def _set_environment(values: Mapping[str, str | None]) -> None:
    """Sets each variable of `values` in this process's environment; None unsets it."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _read_token_file() -> str | None:
    """The Hub token from the file `TOKEN_FILE_VARIABLE` names, in a worker; None when it names none."""
    path = os.environ.get(TOKEN_FILE_VARIABLE)
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise AttncardError(
            f"the Hub token's file {path} cannot be read on {socket.gethostname()} ({first_line(error)}); "
            "run the sweep with --output on a shared file system every node sees at the same path"
        ) from None


__all__ = [
    "BASELINE_MODULE",
    "DEFAULT_SEEDS",
    "LOG_SUFFIX",
    "RESOURCE_KEYS",
    "SECRET_VARIABLES",
    "TOKEN_FILE_VARIABLE",
    "Matrix",
    "MatrixError",
    "MatrixRow",
    "RunOutcome",
    "RunResources",
    "StaleRunError",
    "SweepRun",
    "SweepSettings",
    "check_sweep",
    "cluster_environment",
    "dense_run_of",
    "hub_token_file",
    "plan_sweep",
    "previous_run",
    "publish_options",
    "read_matrix",
    "run_log",
    "run_on_worker",
    "run_sweep",
    "torch_threads",
    "unpaired_warnings",
]
