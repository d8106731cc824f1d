"""The matrix of a sweep (`cards/matrix.yaml`): reading it, and checking every row before anything runs.

A matrix lists runs, one row per (model, module, task), and the seeds to train each with:

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

What the rows become, the runs in their order, is `pipeline.study.plan`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...modules import get_module
from ..record.errors import AttncardError, first_line, visible
from ..record.run_names import default_repo_name
from ..run.models import MODEL_ALIASES, resolve_model_name
from ..scoring.tasks import get_task

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


class MatrixError(AttncardError):
    """A matrix file that cannot be run: unreadable, or a row that names something unknown or is given twice.

    The message names the file, the line and the row, and says what to write instead.
    """


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


# --- reading the file ---------------------------------------------------------------------------------------


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
        attncard.pipeline.study.matrix.MatrixError: bad.yaml:2: row 1: unknown module 'adaptive_spam'; ...
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
    seeds = checked_seeds(data["seeds"], f"{path}:{_line(root, 'seeds')}: seeds") if "seeds" in data else None
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
        name = run_name(row.model, row.module, row.task)
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
    seeds = checked_seeds(item["seeds"], f"{where}: seeds") if "seeds" in item else None
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


def checked_seeds(value: Any, where: str) -> tuple[int, ...]:
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


def run_name(model: str, module: str, task: str, seed: int | None = None) -> str:
    """`<model>-<module>-<task>` as publish names a run (see `PublishOptions.repo_name`), `-seed<seed>`
    appended when a seed is given."""
    named = model if model in MODEL_ALIASES else resolve_model_name(model)[1]
    name = default_repo_name(named, module, task)
    return name if seed is None else f"{name}-seed{seed}"


__all__ = [
    "MATRIX_KEYS",
    "RESOURCE_KEYS",
    "RESOURCE_LIMITS",
    "ROW_KEYS",
    "Matrix",
    "MatrixError",
    "MatrixRow",
    "RunResources",
    "checked_seeds",
    "read_matrix",
    "resource_problem",
    "run_name",
]
