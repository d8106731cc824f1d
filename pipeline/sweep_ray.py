"""`attncard sweep MATRIX.yaml --executor ray`: every (row, seed) of a sweep as one Ray task, on a cluster or
on this machine.

Each run is one call of the local executor's own step (`run_sweep([run], settings)`: skipped when its folder
holds it finished, else trained, evaluated and written by `run_publish`, pushed with `--push`) inside a Ray
task that asks for the run's resources (`RunResources`, from the matrix). A module run takes its dense run's
task as an argument (an `ObjectRef`), so Ray starts it once that dense run is done; nothing polls. A run lost
with its worker (the process killed, the node gone) is started again up to `retries` times (Ray's
`max_retries`, for system failures only: a run that fails by itself is not retried), then reported failed
while the others go on.

Every node must see the driver's current folder at the same path (a shared file system): a task works there,
so that the matrix's and the options' relative paths mean what they mean to the driver. Each run's progress,
as the local executor shows it on stderr, goes to `<output>/<run name>.sweep.log`, beside the run folder (not
in it: a run folder holds exactly the files its manifest lists), each attempt appended.

`ray` is imported when the sweep starts (`pip install 'attncard[ray]'`).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import AttncardError, first_line
from .sweep import BASELINE_MODULE, RunOutcome, SweepRun, SweepSettings, run_sweep

logger = logging.getLogger(__name__)

# Ray's max_retries: how often a run lost with its worker or node is started again.
DEFAULT_RETRIES = 2
LOG_SUFFIX = ".sweep.log"
# The driver's environment that the runs read (the GLUE folder, the Hub's token, endpoint and cache), given to
# every task: on a cluster the workers otherwise have the environment of `ray start`.
FORWARDED_PREFIXES = ("GLUE_DIR", "HF_", "HUGGINGFACE_", "TRANSFORMERS_")


def run_log(run: SweepRun, settings: SweepSettings) -> Path:
    """The log of one run of a Ray sweep, `<output>/<run name>.sweep.log`.

    Example:
        >>> run = SweepRun("minilm", "minilm", "none", "sst2", steps=2, seed=0, name="minilm-none-sst2-seed0")
        >>> run_log(run, SweepSettings())
        PosixPath('runs/minilm-none-sst2-seed0.sweep.log')
    """
    return settings.output / f"{run.name}{LOG_SUFFIX}"


def dense_run_of(run: SweepRun, runs: list[SweepRun]) -> SweepRun | None:
    """The dense run of the sweep that `run` is compared with: the `none` run of its model, task, steps and
    seed; None for a dense run, or when the sweep has none.

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


def import_ray() -> Any:
    """Ray, imported now; without it, an error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise AttncardError(
            "--executor ray needs Ray: pip install 'attncard[ray]' (or make install), or use --executor local"
        ) from None
    return ray


def run_sweep_ray(
    runs: list[SweepRun],
    settings: SweepSettings,
    address: str | None = None,
    retries: int = DEFAULT_RETRIES,
) -> Iterator[RunOutcome]:
    """Starts Ray now, then runs every run of a sweep as a Ray task as the returned iterator is read, giving
    what became of each as it is done (not in order).

    Check the runs with `check_sweep` first. Connects to the cluster at `address`, else starts a Ray instance
    on this machine with its CPUs (and stops it at the end). The dense runs are submitted first; each module
    run waits on its dense run's task. Progress goes to each run's log ([`run_log`]); a failed run is also one
    line on this module's logger, `<run name>: <error>`, as with the local executor.

    Args:
        runs: from `plan_sweep`, in that order.
        settings: what applies to every run.
        address: a Ray cluster's address (`ray start --head` prints it), or `auto`; None: a local instance.
        retries: how often a run lost with its worker or node is started again.

    Returns:
        An iterator of a [`RunOutcome`] for each run, once it is done.

    Raises:
        [`AttncardError`]: Ray is not installed, or no cluster answers at `address`.

    Example (it trains every run of the matrix, on this machine):

        runs = plan_sweep(read_matrix("cards/matrix.yaml"), seeds=[0, 1])
        for outcome in run_sweep_ray(runs, SweepSettings(output=Path("runs")), retries=2):
            print(outcome.run.name, outcome.state)
    """
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        _start_ray(ray, address)
    return _run_tasks(ray, runs, settings, retries, started_here)


def _run_tasks(
    ray: Any, runs: list[SweepRun], settings: SweepSettings, retries: int, started_here: bool
) -> Iterator[RunOutcome]:
    cwd = os.getcwd()
    remote = ray.remote(_run_on_worker)
    submitted: dict[str, Any] = {}
    pending: dict[Any, SweepRun] = {}
    try:
        for run in runs:
            dense = dense_run_of(run, runs)
            # The dense run's ObjectRef as an argument: Ray starts this task once that one is done.
            dense_refs = [submitted[dense.name]] if dense is not None and dense.name in submitted else []
            ref = remote.options(
                name=f"sweep:{run.name}", max_retries=retries, **run.resources.ray_options()
            ).remote(run, settings, cwd, *dense_refs)
            submitted[run.name] = ref
            pending[ref] = run
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                run = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayError as error:
                    dense = dense_run_of(run, runs)
                    dense_ref = submitted.get(dense.name) if dense is not None else None
                    if dense_ref is not None and _failed(ray, dense_ref):
                        message = f"not started: its dense run {dense.name} was lost with its worker"
                    else:
                        message = _lost_message(ray, error, retries)
                    outcome = RunOutcome(run=run, state="failed", error=message)
                if outcome.state == "failed":
                    logger.error(f"{run.name}: {outcome.error}")
                yield outcome
    finally:
        for ref in pending:  # interrupted: the cluster must not go on training runs nobody waits for
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


def _start_ray(ray: Any, address: str | None) -> None:
    environment = {name: value for name, value in os.environ.items() if name.startswith(FORWARDED_PREFIXES)}
    options: dict[str, Any] = {"address": address} if address else {"num_cpus": os.cpu_count()}
    try:
        ray.init(
            **options,
            include_dashboard=False,
            # The runs' progress goes to their logs; the driver shows the progress bar and the failures.
            log_to_driver=False,
            logging_level=logging.WARNING,
            runtime_env={"env_vars": environment} if environment else None,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"--address {address}" if address else "a local Ray instance"
        raise AttncardError(
            f"{where}: Ray could not start ({first_line(error)}); pass the address `ray start --head` "
            "prints, or leave --address out"
        ) from None


def _failed(ray: Any, ref: Any) -> bool:
    """Whether the task of `ref` is done and raised (a task of this sweep raises only when it was lost)."""
    if not ray.wait([ref], timeout=0)[0]:
        return False
    try:
        ray.get(ref)
    except ray.exceptions.RayError:
        return True
    return False


def _lost_message(ray: Any, error: Exception, retries: int) -> str:
    lost = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError)
    if isinstance(error, lost):
        return f"lost with its worker, {retries} retries used: {first_line(error)}"
    return f"{type(error).__name__}: {first_line(error)}"


def _run_on_worker(
    run: SweepRun, settings: SweepSettings, cwd: str, *_dense_outcomes: RunOutcome
) -> RunOutcome:
    """One run, in a Ray worker: the local executor's step, its progress into the run's log."""
    os.chdir(cwd)  # the driver's folder, which every node sees: relative paths mean the same there
    log = run_log(run, settings)
    log.parent.mkdir(parents=True, exist_ok=True)
    # The handlers of the command line's progress (cli.common.progress_on_stderr), into the log.
    handlers = []
    for name, prefix in (("attncard.pipeline.push", "push: "), ("attncard.pipeline", "")):
        stage_logger = logging.getLogger(name)
        handler = logging.FileHandler(log, encoding="utf-8")
        handler.setFormatter(logging.Formatter(f"{prefix}%(message)s"))
        handlers.append((stage_logger, handler, stage_logger.level, stage_logger.propagate))
        stage_logger.addHandler(handler)
        stage_logger.setLevel(logging.INFO)
    logging.getLogger("attncard.pipeline.push").propagate = False
    try:
        logger.info(f"{run.name}: started on {socket.gethostname()}, process {os.getpid()}")
        return next(run_sweep([run], settings))
    finally:
        for stage_logger, handler, level, propagate in handlers:
            stage_logger.removeHandler(handler)
            handler.close()
            stage_logger.setLevel(level)
            stage_logger.propagate = propagate


__all__ = ["DEFAULT_RETRIES", "dense_run_of", "import_ray", "run_log", "run_sweep_ray"]
