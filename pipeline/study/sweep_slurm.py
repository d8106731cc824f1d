"""`attncard sweep MATRIX.yaml --executor slurm`: every (row, seed) of a sweep as one Slurm job, submitted
with submitit from a node of the cluster.

Each run is one call of the local executor's own step (`run_sweep([run], settings)`: skipped when its folder
holds it finished, else trained, evaluated and written by `run_publish`, pushed with `--push`) inside a Slurm
job that asks for the run's resources (`RunResources`, from the matrix: `cpus` → `--cpus-per-task`, `gpus` →
`--gpus-per-node`, `memory_gib` → `--mem`; Slurm grants whole CPUs and GPUs), in `--partition` for at most
`--time-limit` minutes. The step trains on `cpus` torch threads, as it does in any executor
(`RunResources.torch_threads`): the run writes the same predictions.csv as with the local executor. The dense
runs (and any run whose dense run is not in the sweep) are submitted first, as one job array; each module run
is then submitted with `--dependency=afterok:<its dense run's job>` and `--kill-on-invalid-dep=yes`, so that
Slurm starts it once its dense run is done; the driver only watches (`squeue`, and the result file submitit
writes when a job's function returns).

A job that ends without a result (killed, its node lost, past its time limit, cancelled) is submitted again
up to `retries` times, then reported failed while the others go on; a dense run submitted again takes its
module runs with it (their jobs, which depended on the old one, are cancelled and submitted again after the
new one), and a dense run that failed for good leaves its module runs "not started". A run that fails by
itself (bad weights, a FAIL without `--allow-fail`) is a result, not a lost job: it is not submitted again.
Interrupted (Ctrl-C, or the iterator closed), the sweep cancels the jobs it still waits for.

Every node must see the driver's current folder and `--output` at the same path (a shared file system): a
job works in the driver's folder, so that the matrix's and the options' relative paths mean what they mean
to the driver, and submitit's files (the pickled call, its result, the job's stdout and stderr) go to
`<output>/.slurm/<job id>/`. Each run's progress, as the local executor shows it on stderr, goes to
`<output>/<run name>.sweep.log`, each attempt appended. A job has the driver's environment (`--export=ALL`:
`GLUE_DIR`, `HF_ENDPOINT` and the rest, as with `--executor ray`) except the Hub token: sbatch exports its
environment into the job and slurmctld keeps it, so sbatch is run without `HF_TOKEN` and
`HUGGING_FACE_HUB_TOKEN`; the token goes in a file under `--output` only this user can read, removed when the
sweep ends, and a job gets its path (`hub_token_file`).

`submitit` is imported when the sweep starts (`pip install 'attncard[slurm]'`).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..record.errors import AttncardError, first_line
from .cluster import cluster_environment, hub_token_file, run_on_worker
from .plan import RunOutcome, SweepRun, SweepSettings, dense_run_of

logger = logging.getLogger(__name__)

# How often a run whose job ended without a result is submitted again.
DEFAULT_RETRIES = 2
# A job's time limit (sbatch --time), in minutes, unless --time-limit says otherwise.
DEFAULT_TIME_LIMIT_MINUTES = 240
# How often the driver asks squeue, and looks for the jobs' results, in seconds.
POLL_SECONDS = 2.0
# How long a job may be seen ended before its result file shows (a shared file system's caches), in seconds.
RESULT_GRACE_SECONDS = 10.0
# submitit's files, under --output: one folder per job.
JOBS_FOLDER = ".slurm"
# The states of a job that may still write its result (squeue's long names); any other has ended.
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "RESV_DEL_HOLD",
        "SPECIAL_EXIT",
    }
)
# What every job is submitted with: the driver's environment (sbatch's default, said so here).
ALWAYS = {"export": "ALL"}


def import_submitit() -> Any:
    """submitit, imported now; without it, an error that says how to install it."""
    try:
        import submitit
    except ImportError:
        raise AttncardError(
            "--executor slurm needs submitit: pip install 'attncard[slurm]' (or make install), or use "
            "--executor local"
        ) from None
    return submitit


def slurm_parameters(
    run: SweepRun, partition: str | None = None, time_limit_minutes: int = DEFAULT_TIME_LIMIT_MINUTES
) -> dict[str, Any]:
    """The parameters of one run's job, as `submitit.AutoExecutor.update_parameters` takes them.

    `cpus` is `cpus_per_task`, `gpus` `gpus_per_node` (left out when 0), `memory_gib` `mem_gb` (left out
    when None: the partition's default); `partition` is `slurm_partition` (None: the cluster's default
    partition) and `time_limit_minutes` `timeout_min`.

    Raises:
        [`AttncardError`]: `cpus` or `gpus` is not a whole number (Slurm grants whole CPUs and GPUs), or the
            time limit is not a whole number of at least 1.

    Example:
        >>> from attncard.pipeline.study.matrix import RunResources
        >>> run = SweepRun("m", "m", "none", "sst2", 2, 0, "m-none-sst2-seed0", RunResources(cpus=2, gpus=1))
        >>> slurm_parameters(run, partition="gpu", time_limit_minutes=30)
        {'timeout_min': 30, 'cpus_per_task': 2, 'gpus_per_node': 1, 'slurm_partition': 'gpu'}
        >>> shared_gpu = RunResources(gpus=0.5)  # as --executor ray takes it
        >>> slurm_parameters(SweepRun("m", "m", "none", "sst2", 2, 0, "m-none-sst2-seed0", shared_gpu))
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.AttncardError: m-none-sst2-seed0: resources gpus 0.5 is not a whole
        number...
    """
    _check_whole("--time-limit", time_limit_minutes, 1, "60")
    resources = run.resources
    for key, least in (("cpus", 1), ("gpus", 0)):
        number = getattr(resources, key)
        if number < least or not math.isclose(number, round(number)):
            raise AttncardError(
                f"{run.name}: resources {key} {number:g} is not a whole number{' of at least 1' * least}, "
                f"and Slurm grants whole {key.upper()[:-1]}s: write e.g. {key}: "
                f"{max(least, math.ceil(number))} in the matrix, or use --executor ray"
            )
    parameters: dict[str, Any] = {"timeout_min": time_limit_minutes, "cpus_per_task": round(resources.cpus)}
    if resources.gpus:
        parameters["gpus_per_node"] = round(resources.gpus)
    if resources.memory_gib is not None:
        parameters["mem_gb"] = resources.memory_gib
    if partition:
        parameters["slurm_partition"] = partition
    return parameters


def sbatch_options(parameters: dict[str, Any]) -> list[str]:
    """The `sbatch` options of a job's parameters (from [`slurm_parameters`]), for `sbatch --test-only`.

    Example:
        >>> sbatch_options({"timeout_min": 30, "cpus_per_task": 2, "mem_gb": 1.5, "slurm_partition": "gpu"})
        ['--time=30', '--cpus-per-task=2', '--mem=1536M', '--partition=gpu']
    """
    options = [f"--time={parameters['timeout_min']}", f"--cpus-per-task={parameters['cpus_per_task']}"]
    if "gpus_per_node" in parameters:
        options.append(f"--gpus-per-node={parameters['gpus_per_node']}")
    if "mem_gb" in parameters:
        options.append(f"--mem={math.ceil(parameters['mem_gb'] * 1024)}M")
    if "slurm_partition" in parameters:
        options.append(f"--partition={parameters['slurm_partition']}")
    return options


def check_slurm(
    runs: list[SweepRun],
    partition: str | None = None,
    time_limit_minutes: int = DEFAULT_TIME_LIMIT_MINUTES,
    retries: int = DEFAULT_RETRIES,
) -> None:
    """Checks, before anything is submitted, that Slurm can run every job of the sweep.

    Checked: submitit is installed; `SBATCH_EXPORT`, when set, lets the jobs have this environment (`ALL`);
    every run's resources are whole CPUs and GPUs ([`slurm_parameters`]); `retries` is at least 0; `sbatch`
    is on `PATH`; and, for each distinct set of parameters, Slurm accepts
    such a job (`sbatch --test-only`, which submits nothing): the partition is there, the time limit within
    its limit, a node has the CPUs, GPUs and memory.

    Raises:
        [`AttncardError`]: the first problem, naming the option or the run and what to do.

    Example:
        >>> check_slurm([], time_limit_minutes=0)
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.AttncardError: --time-limit 0 is not a whole number of at least 1; ...
    """
    _check_whole("--time-limit", time_limit_minutes, 1, "60")
    _check_whole("--retries", retries, 0, "2")
    if partition is not None and (not partition.strip() or any(c.isspace() for c in partition)):
        raise AttncardError(f"--partition {partition!r} is not a partition name; write e.g. --partition gpu")
    import_submitit()
    exported = os.environ.get("SBATCH_EXPORT", "ALL")
    if exported.split(",")[0].upper() != "ALL":  # it overrides the jobs' --export=ALL
        raise AttncardError(
            f"SBATCH_EXPORT={exported} would keep this environment (GLUE_DIR, HF_ENDPOINT, ...) from the "
            "jobs; unset SBATCH_EXPORT for the sweep, or set it to ALL"
        )
    tried: dict[tuple[str, ...], SweepRun] = {}
    for run in runs:
        tried.setdefault(tuple(sbatch_options(slurm_parameters(run, partition, time_limit_minutes))), run)
    if shutil.which("sbatch") is None:
        raise AttncardError(
            "--executor slurm: sbatch is not on PATH; run the sweep on a node of the Slurm cluster (a login "
            "node), or use --executor local"
        )
    for options, run in tried.items():
        try:
            with cluster_environment({}):  # sbatch sends its environment to slurmctld: not the token
                shown = subprocess.run(
                    ["sbatch", "--test-only", *options, "--wrap=true"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
        except subprocess.TimeoutExpired:
            raise AttncardError(
                "--executor slurm: sbatch --test-only did not answer in 60 s; is the Slurm controller up "
                "(sinfo, and SLURM_CONF)?"
            ) from None
        if shown.returncode != 0:
            raise AttncardError(
                f"{run.name}: Slurm refuses its job ({' '.join(options)}): {_sbatch_error(shown.stderr)}; "
                "check --partition and --time-limit against sinfo, and the run's resources"
            )


def run_sweep_slurm(
    runs: list[SweepRun],
    settings: SweepSettings,
    partition: str | None = None,
    time_limit_minutes: int = DEFAULT_TIME_LIMIT_MINUTES,
    retries: int = DEFAULT_RETRIES,
) -> Iterator[RunOutcome]:
    """Checks the jobs now ([`check_slurm`]), then submits every run of a sweep as a Slurm job as the
    returned iterator is read, giving what became of each as it is done (not in order).

    Check the runs with `check_sweep` first. The dense runs go first, as one job array; each module run
    depends on its dense run's job (`afterok`). A job that ends without a result is submitted again up to
    `retries` times, its module runs with it. Progress goes to each run's log (`run_log`); a failed run and a
    job submitted again are also one line on this module's logger, `<run name>: ...`.

    Args:
        runs: from `plan_sweep`, in that order.
        settings: what applies to every run; `settings.output` must be on a file system every node sees.
        partition: the Slurm partition of every job; None: the cluster's default.
        time_limit_minutes: each job's time limit.
        retries: how often a run whose job ended without a result is submitted again.

    Returns:
        An iterator of a [`RunOutcome`] for each run, once it is done.

    Raises:
        [`AttncardError`]: submitit is not installed, or Slurm refuses a job (see [`check_slurm`]); while
            the iterator is read, sbatch fails (the jobs submitted until then are cancelled).

    Example (on a login node of the cluster; the runs go to a shared folder):

        runs = plan_sweep(read_matrix("cards/matrix.yaml"), seeds=[0, 1])
        settings = SweepSettings(output=Path("/shared/runs"))
        for outcome in run_sweep_slurm(runs, settings, partition="gpu", time_limit_minutes=60):
            print(outcome.run.name, outcome.state)
    """
    check_slurm(runs, partition, time_limit_minutes, retries)
    return _submit_and_watch(import_submitit(), runs, settings, partition, time_limit_minutes, retries)


def _submit_and_watch(
    submitit: Any,
    runs: list[SweepRun],
    settings: SweepSettings,
    partition: str | None,
    time_limit_minutes: int,
    retries: int,
) -> Iterator[RunOutcome]:
    # The token's file lives as long as the sweep: a job submitted again late reads it too.
    with hub_token_file(settings.output) as token_environment:
        cluster = SubmititCluster(submitit, settings, partition, time_limit_minutes, token_environment)
        yield from drive_jobs(runs, cluster, retries)


# --- the jobs ----------------------------------------------------------------------------------------------


class Cluster(Protocol):
    """What [`drive_jobs`] asks of Slurm: a fake one stands in for it in the tests."""

    def submit(self, runs: list[SweepRun], after: str | None = None) -> list[str]:
        """Submits one job per run (several as a job array), after the job `after` succeeded; their ids."""
        ...

    def states(self) -> dict[str, str] | None:
        """The state of every job Slurm still lists, by job id; None when Slurm does not answer."""
        ...

    def result(self, job_id: str) -> tuple[str, Any] | None:
        """What the job's function gave, `("success", outcome)` or `("error", traceback)`; None: none yet."""
        ...

    def cancel(self, job_ids: list[str]) -> None:
        """Cancels these jobs (those that ended already are left as they are)."""
        ...

    def describe(self, job_id: str) -> str:
        """Where to read what a job printed."""
        ...


@dataclass
class _Book:
    """The sweep's jobs: the one each unfinished run waits on, the retries each used, when each was seen
    ended without a result."""

    runs: list[SweepRun]
    job: dict[str, str] = field(default_factory=dict)  # run name -> its job now
    used: dict[str, int] = field(default_factory=dict)  # run name -> retries used
    ended_at: dict[str, float] = field(default_factory=dict)  # job id -> when first seen ended, no result

    def dense_of(self, run: SweepRun) -> SweepRun | None:
        return dense_run_of(run, self.runs)

    def modules_of(self, dense: SweepRun) -> list[SweepRun]:
        return [run for run in self.runs if run.name in self.job and self.dense_of(run) == dense]


def drive_jobs(
    runs: list[SweepRun],
    cluster: Cluster,
    retries: int = DEFAULT_RETRIES,
    poll_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[RunOutcome]:
    """Submits every run to `cluster` and yields each one's [`RunOutcome`] as its job is done; cancels the
    jobs still waited on when interrupted or closed.

    The runs without a dense run in the sweep (the dense runs) are submitted first, together (a job array);
    then each module run, after its dense run's job. A job that ends without a result (or is no longer
    listed) for `RESULT_GRACE_SECONDS` is submitted again while the run has retries left, its waiting module
    runs with it (their old jobs cancelled), else its run fails, `job <id> <STATE> without a result, <n>
    retries used`, and so do its module runs, `not started: its dense run <name> failed`. A job whose function
    raised (outside the run: the run's own failure is a failed outcome) fails its run, not retried.

    Args:
        runs: from `plan_sweep`.
        cluster: Slurm ([`SubmititCluster`]) or a stand-in.
        retries: how often a run whose job ended without a result is submitted again.
        poll_seconds: between two looks at the jobs; None: `POLL_SECONDS`.
        clock, sleep: time, for the tests.
    """
    book = _Book(runs)
    try:
        first = [run for run in runs if book.dense_of(run) is None]
        book.job.update(zip((run.name for run in first), cluster.submit(first), strict=True))
        for run in runs:
            dense = book.dense_of(run)
            if dense is not None:
                (book.job[run.name],) = cluster.submit([run], after=book.job[dense.name])
        for run in runs:
            logger.info(f"{run.name}: submitted as job {book.job[run.name]}")
        while book.job:
            sleep(POLL_SECONDS if poll_seconds is None else poll_seconds)
            states = cluster.states()
            if states is None:  # squeue did not answer: look again
                continue
            # The plan's order, the dense runs first: a dense run submitted again takes its module runs along.
            for run in [run for run in runs if run.name in book.job]:
                if run.name in book.job:
                    yield from _look_at(run, states, book, cluster, retries, clock())
    finally:
        if book.job:  # interrupted: the cluster must not go on training runs nobody waits for
            cluster.cancel(list(book.job.values()))


def _look_at(
    run: SweepRun, states: dict[str, str], book: _Book, cluster: Cluster, retries: int, now: float
) -> Iterator[RunOutcome]:
    """What became of `run`'s job: nothing yet, a result, or an end without one (submitted again, failed)."""
    job_id = book.job[run.name]
    state = states.get(job_id)
    if state in ACTIVE_STATES:
        return
    result = cluster.result(job_id)
    job_failed = result is None or result[0] != "success"
    if result is None:
        dense = book.dense_of(run)
        if dense is not None and dense.name in book.job:  # its dense run's end decides what becomes of it
            return
        seen = book.ended_at.setdefault(job_id, now)
        if now - seen < RESULT_GRACE_SECONDS:  # a shared file system may show the result file late
            return
        ended = f"job {job_id} {state or 'ended'} without a result"
        used = book.used.get(run.name, 0)
        if used < retries:
            book.used[run.name] = used + 1
            (book.job[run.name],) = cluster.submit([run])  # its dense run, if any, is done
            logger.warning(
                f"{run.name}: {ended}; submitted again as job {book.job[run.name]} (retry {used + 1} of "
                f"{retries}); see {cluster.describe(job_id)}"
            )
            for module in book.modules_of(run):  # their jobs depend on the old one: after the new one now
                cluster.cancel([book.job[module.name]])
                (book.job[module.name],) = cluster.submit([module], after=book.job[run.name])
                logger.info(
                    f"{module.name}: submitted again as job {book.job[module.name]}, after {run.name}'s"
                )
            return
        outcome = RunOutcome(run=run, state="failed", error=f"{ended}, {used} retries used")
    elif result[0] == "success":
        outcome = result[1]
    else:  # the job's function raised: the run could not start (its folder, its log), not a lost job
        outcome = RunOutcome(
            run=run,
            state="failed",
            error=f"job {job_id} raised {_last_line(str(result[1]))}; see {cluster.describe(job_id)}",
        )
    del book.job[run.name]
    if outcome.state == "failed":
        logger.error(f"{run.name}: {outcome.error}")
    yield outcome
    if job_failed:  # afterok never holds: Slurm cancels the module runs' jobs, if not done already
        for module in book.modules_of(run):
            cluster.cancel([book.job.pop(module.name)])
            message = f"not started: its dense run {run.name} failed"
            logger.error(f"{module.name}: {message}")
            yield RunOutcome(run=module, state="failed", error=message)


class SubmititCluster:
    """Slurm through submitit: each run a job of `run_on_worker` in the driver's folder, its files in
    `<output>/.slurm/<job id>/`; job states from `squeue` (no accounting needed).

    Args:
        submitit: the module ([`import_submitit`]).
        settings: the sweep's settings, given to every job.
        partition, time_limit_minutes: as [`slurm_parameters`] takes them.
        environment: variables every job gets besides the driver's (the token file's path, from
            `hub_token_file`); sbatch runs without `SECRET_VARIABLES`.
    """

    def __init__(
        self,
        submitit: Any,
        settings: SweepSettings,
        partition: str | None,
        time_limit_minutes: int,
        environment: dict[str, str] | None = None,
    ) -> None:
        self.submitit = submitit
        self.settings = settings
        self.partition = partition
        self.time_limit_minutes = time_limit_minutes
        self.environment = dict(environment or {})
        self.cwd = os.getcwd()
        self.folder = Path(self.cwd) / settings.output / JOBS_FOLDER
        self.jobs: dict[str, Any] = {}

    def submit(self, runs: list[SweepRun], after: str | None = None) -> list[str]:
        """One job per run; runs of the same parameters as one job array. Their ids, in the runs' order."""
        groups: dict[tuple[tuple[str, Any], ...], list[SweepRun]] = {}
        for run in runs:
            parameters = slurm_parameters(run, self.partition, self.time_limit_minutes)
            groups.setdefault(tuple(sorted(parameters.items())), []).append(run)
        ids: dict[str, str] = {}
        for key, group in groups.items():
            executor = self.submitit.AutoExecutor(folder=self.folder / "%j", cluster="slurm")
            additional = dict(ALWAYS)
            if after is not None:
                additional["kill-on-invalid-dep"] = "yes"
            name = group[0].name if len(group) == 1 else "dense"
            executor.update_parameters(
                **dict(key),
                name=f"attncard-sweep:{name}",
                slurm_additional_parameters=additional,
                **({"slurm_dependency": f"afterok:{after}"} if after is not None else {}),
            )
            try:
                # submitit runs sbatch with this process's environment, which sbatch exports into the job and
                # sends to slurmctld: the token's file path, not the token.
                with cluster_environment(self.environment), executor.batch():
                    jobs = [executor.submit(run_on_worker, run, self.settings, self.cwd) for run in group]
            except Exception as error:  # sbatch's refusal, whatever submitit wraps it in
                raise AttncardError(
                    f"{group[0].name}: sbatch failed: {_sbatch_error(str(error))}; check the cluster (sinfo) "
                    "and --partition, then run the same sweep again"
                ) from None
            for run, job in zip(group, jobs, strict=True):
                ids[run.name] = job.job_id
                self.jobs[job.job_id] = job
        return [ids[run.name] for run in runs]

    def states(self) -> dict[str, str] | None:
        """Every job of this user Slurm lists, finished ones included (for `MinJobAge`), array tasks apart."""
        try:
            shown = subprocess.run(
                ["squeue", "--me", "--states=all", "--array", "--noheader", "--format=%i|%T"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except subprocess.TimeoutExpired:
            shown = None
        if shown is None or shown.returncode != 0:
            logger.warning(f"squeue did not answer ({_sbatch_error(shown.stderr if shown else 'timeout')})")
            return None
        rows = (line.split("|", 1) for line in shown.stdout.splitlines() if "|" in line)
        return {job_id.strip(): state.strip() for job_id, state in rows}

    def result(self, job_id: str) -> tuple[str, Any] | None:
        path = self.jobs[job_id].paths.result_pickle
        if not path.exists():
            return None
        return self.submitit.core.utils.pickle_load(path)

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            subprocess.run(["scancel", *job_ids], capture_output=True, timeout=60, check=False)

    def describe(self, job_id: str) -> str:
        return str(self.jobs[job_id].paths.stderr)


def _check_whole(option: str, value: Any, least: int, example: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise AttncardError(
            f"{option} {value!r} is not a whole number of at least {least}; write e.g. {option} {example}"
        )


def _sbatch_error(text: str) -> str:
    """The line of sbatch's (or squeue's) output that says what is wrong."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "failure" in line.lower()]
    return first_line((errors or lines or ["no message"])[0])


def _last_line(traceback: str) -> str:
    lines = [line.strip() for line in traceback.splitlines() if line.strip()]
    return lines[-1] if lines else "an error"


__all__ = [
    "DEFAULT_RETRIES",
    "DEFAULT_TIME_LIMIT_MINUTES",
    "Cluster",
    "SubmititCluster",
    "check_slurm",
    "drive_jobs",
    "import_submitit",
    "run_sweep_slurm",
    "sbatch_options",
    "slurm_parameters",
]
