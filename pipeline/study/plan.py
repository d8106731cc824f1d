"""The plan of a sweep: its runs, each (row, seed) of a matrix, in the order they run, checked before anything
runs; and the resume, finding a run finished before.

Each (row, seed) is one [`run_publish`] into `<output>/<model>-<module>-<task>-seed<seed>/`, the model being
the last part of its alias, Hub id or folder as publish names runs. The `none` runs go first, so that a
module run finds the dense run of its (model, task, steps, seed) on disk. A run whose folder is there, passes
the checks of a download (`download_verified`, its status FAIL included) and is that very run (model, module,
task, training settings and seed, named for the same Hub repository) is not trained again
([`previous_run`]). A module run that no dense run of its settings will be compared with
([`unpaired_warnings`]) is a warning before anything runs, not an error: a study of dense runs alone, or of a
module alone, is legal.

The matrix is read by `pipeline.study.matrix`; the runs are run by an executor: `pipeline.study.sweep` (one
after the other, in this process), `sweep_ray` or `sweep_slurm`.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ..publish.publish import PublishOptions, baseline_candidate, check_run_folders
from ..publish.push import check_push_only_options, check_push_setup
from ..record.errors import AttncardError, first_line
from ..record.results import Results, Status, TrainConfig
from ..run.data import check_data_dir
from ..run.models import resolve_model_name
from ..scoring.tasks import get_task
from ..verify.download import download_verified
from .matrix import Matrix, MatrixError, RunResources, checked_seeds, run_name

DEFAULT_SEEDS = (TrainConfig().seed,)
# The dense run, which every module run of the same (model, task, steps, seed) is set against.
BASELINE_MODULE = "none"


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
    resources: RunResources = dataclasses.field(default_factory=RunResources)


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


class StaleRunError(AttncardError):
    """A run folder of the sweep that is there but is not a finished run of its (row, seed): it fails the
    checks of a download, or it is another run. The sweep trains it again."""


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
        >>> from attncard.pipeline.study.matrix import read_matrix
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
        seeds = checked_seeds(list(seeds), "--seeds")
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
                    name=run_name(row.model, row.module, row.task, seed),
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
        >>> from attncard.pipeline.study.matrix import read_matrix
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
        >>> from attncard.pipeline.study.matrix import read_matrix
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
            rows.setdefault(run_name(run.model, run.module, run.task), []).append(run)
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
        row_name = run_name(first.model, first.module, first.task)
        subject, cards = (
            f"{row_name} ({_seeds_shown(seeds)}) has no dense runs at its settings",
            "their cards",
        )
    dense_rows: dict[str, list[SweepRun]] = {}  # the matrix's dense rows of this model and task, by name
    for run in planned:
        if run.module == BASELINE_MODULE and (run.model_id, run.task) == (first.model_id, first.task):
            dense_rows.setdefault(run_name(run.model, run.module, run.task), []).append(run)
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


# --- a run's options, and finding it finished ---------------------------------------------------------------


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
        attncard.pipeline.study.plan.StaleRunError: runs/tiny-gpt2-none-sst2 holds another run: its seed is
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


__all__ = [
    "BASELINE_MODULE",
    "DEFAULT_SEEDS",
    "RunOutcome",
    "StaleRunError",
    "SweepRun",
    "SweepSettings",
    "check_sweep",
    "dense_run_of",
    "plan_sweep",
    "previous_run",
    "publish_options",
    "unpaired_warnings",
]
