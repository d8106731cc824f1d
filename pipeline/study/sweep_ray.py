"""`attncard sweep MATRIX.yaml --executor ray`: every (row, seed) of a sweep as one Ray task, on a cluster or
on this machine.

Each run is one call of the local executor's own step (`run_sweep([run], settings)`: skipped when its folder
holds it finished, else trained, evaluated and written by `run_publish`, pushed with `--push`) inside a Ray
task that asks for the run's resources (`RunResources`, from the matrix); the step trains on `cpus` torch
threads, as it does in any executor (`RunResources.torch_threads`), so the run writes the same predictions.csv
as with the local executor. A module run takes its dense run's task as an argument (an `ObjectRef`), so Ray
starts it once that dense run is done; nothing polls. A run lost with its worker (the process killed, the node
gone) is started again up to `retries` times (Ray's `max_retries`, for system failures only: a run that fails
by itself is not retried), then reported failed while the others go on.

Every node must see the driver's current folder at the same path (a shared file system): a task works there,
so that the matrix's and the options' relative paths mean what they mean to the driver. A task has the
driver's `GLUE_DIR`, `HF_*`, `HUGGINGFACE_*` and `TRANSFORMERS_*` variables (Ray's runtime env), except the
Hub token: Ray's runtime-env agent logs a runtime env's variables on every node, so the token goes in a file
under `--output` only this user can read, removed when the sweep ends, and a task gets its path
(`hub_token_file`). A Ray instance the sweep starts is started without the token in its environment.

Each run's progress, as the local executor shows it on stderr, goes to `<output>/<run name>.sweep.log`, beside
the run folder (not in it: a run folder holds exactly the files its manifest lists), each attempt appended.

`ray` is imported when the sweep starts (`pip install 'attncard[ray]'`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

from ..record.errors import AttncardError, first_line
from .cluster import LOG_SUFFIX, SECRET_VARIABLES, cluster_environment, hub_token_file, run_log, run_on_worker
from .plan import RunOutcome, SweepRun, SweepSettings, dense_run_of

logger = logging.getLogger(__name__)

# Ray's max_retries: how often a run lost with its worker or node is started again.
DEFAULT_RETRIES = 2
# The driver's environment that the runs read (the GLUE folder, the Hub's endpoint and cache), given to every
# task: on a cluster the workers otherwise have the environment of `ray start`. Not the token
# (`SECRET_VARIABLES`): a task gets the path of a file that holds it.
FORWARDED_PREFIXES = ("GLUE_DIR", "HF_", "HUGGINGFACE_", "TRANSFORMERS_")


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
    try:
        # Ray would hold a task no node can hold forever, waiting for one to join: refuse it now.
        check_nodes_hold(runs, [node["Resources"] for node in ray.nodes() if node.get("Alive")])
    except BaseException:
        if started_here:
            ray.shutdown()
        raise
    return _run_tasks(ray, runs, settings, retries, started_here)


def check_nodes_hold(runs: list[SweepRun], nodes: list[dict[str, float]]) -> None:
    """Checks that some single node of the cluster has what each run asks for (its CPUs, GPUs and memory
    together), as `sbatch --test-only` does for `--executor slurm`.

    Args:
        runs: the sweep's runs.
        nodes: the resources of each live node, as `ray.nodes()` gives them (`{"CPU": 16.0, "GPU": 1.0,
            "memory": <bytes>, ...}`).

    Raises:
        [`AttncardError`]: the first run no node can hold, naming it, what it asks for and what the largest
            node has.

    Example:
        >>> from attncard.pipeline.study.matrix import RunResources
        >>> run = SweepRun("m", "m", "none", "sst2", 2, 0, "m-none-sst2-seed0", RunResources(cpus=32))
        >>> check_nodes_hold([run], [{"CPU": 16.0, "memory": 2**34}])
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.AttncardError: m-none-sst2-seed0: asks for 32 CPUs, 0 GPUs, more than
        any ...
    """
    for run in runs:
        asked = _ray_amounts(run.resources.ray_options())
        if any(all(node.get(key, 0) >= amount for key, amount in asked.items()) for node in nodes):
            continue
        largest = {
            key: max((node.get(key, 0) for node in nodes), default=0) for key in ("CPU", "GPU", "memory")
        }
        raise AttncardError(
            f"{run.name}: asks for {_amounts(asked)}, more than any one node of the Ray cluster has (at most "
            f"{_amounts(largest)} each); lower its resources in the matrix, or add a node that has them"
        )


def _ray_amounts(options: dict[str, float]) -> dict[str, float]:
    """A task's options (`num_cpus`, `num_gpus`, `memory`) as the names of a node's resources."""
    names = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}
    return {names[key]: amount for key, amount in options.items()}


def _amounts(resources: dict[str, float]) -> str:
    """`8 CPUs, 1 GPUs, 32 GiB of memory` (memory left out when absent)."""
    shown = [f"{resources.get('CPU', 0):g} CPUs", f"{resources.get('GPU', 0):g} GPUs"]
    if "memory" in resources:
        shown.append(f"{resources['memory'] / 2**30:.3g} GiB of memory")
    return ", ".join(shown)


def task_environment(extra: dict[str, str]) -> dict[str, str]:
    """The environment variables of every task of the sweep (Ray's `runtime_env["env_vars"]`): the driver's
    that start with `FORWARDED_PREFIXES`, never `SECRET_VARIABLES`, and `extra` (the token file's path).

    Example:
        >>> os.environ["HF_TOKEN"], os.environ["HF_ENDPOINT"] = "hf_example", "https://hub.example"
        >>> environment = task_environment({"ATTNCARD_HF_TOKEN_FILE": "/shared/runs/.attncard-token-x/token"})
        >>> "HF_TOKEN" in environment, environment["HF_ENDPOINT"]
        (False, 'https://hub.example')
        >>> del os.environ["HF_TOKEN"], os.environ["HF_ENDPOINT"]
    """
    forwarded = {
        name: value
        for name, value in os.environ.items()
        if name.startswith(FORWARDED_PREFIXES) and name not in SECRET_VARIABLES
    }
    return {**forwarded, **extra}


def _run_tasks(
    ray: Any, runs: list[SweepRun], settings: SweepSettings, retries: int, started_here: bool
) -> Iterator[RunOutcome]:
    # The token's file lives as long as the sweep (a task retried late reads it too), and past Ray's shutdown.
    with hub_token_file(settings.output) as token_environment:
        yield from _submit_and_wait(ray, runs, settings, retries, started_here, token_environment)


def _submit_and_wait(
    ray: Any,
    runs: list[SweepRun],
    settings: SweepSettings,
    retries: int,
    started_here: bool,
    token_environment: dict[str, str],
) -> Iterator[RunOutcome]:
    cwd = os.getcwd()
    remote = ray.remote(_run_on_worker)
    submitted: dict[str, Any] = {}
    pending: dict[Any, SweepRun] = {}
    environment = task_environment(token_environment)
    # Each task's own runtime env (not the job's, at ray.init): so also on a Ray instance the caller started.
    runtime_env = {"env_vars": environment} if environment else None
    try:
        for run in runs:
            dense = dense_run_of(run, runs)
            # The dense run's ObjectRef as an argument: Ray starts this task once that one is done.
            dense_refs = [submitted[dense.name]] if dense is not None and dense.name in submitted else []
            ref = remote.options(
                name=f"sweep:{run.name}",
                max_retries=retries,
                runtime_env=runtime_env,
                **run.resources.ray_options(),
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
    options: dict[str, Any] = {"address": address} if address else {"num_cpus": os.cpu_count()}
    try:
        # A local instance's processes, and so its workers, inherit this environment: not the token.
        with cluster_environment({}):
            ray.init(
                **options,
                include_dashboard=False,
                # The runs' progress goes to their logs; the driver shows the progress bar and the failures.
                log_to_driver=False,
                logging_level=logging.WARNING,
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
    """One run, in a Ray worker (started once the dense runs given as arguments are done)."""
    return run_on_worker(run, settings, cwd)


# dense_run_of (pipeline.study.plan's), run_log and LOG_SUFFIX (pipeline.study.cluster's, shared with
# --executor slurm): named here too.
__all__ = [
    "DEFAULT_RETRIES",
    "LOG_SUFFIX",
    "check_nodes_hold",
    "dense_run_of",
    "import_ray",
    "run_log",
    "run_sweep_ray",
    "task_environment",
]
