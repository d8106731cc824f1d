"""What the cluster executors (`sweep_ray`, `sweep_slurm`) share: one run in a worker process, its log
beside the run folder, and the Hub token handed to the workers in a file, never in their environment.

A cluster records the environment it hands its workers (Ray's runtime-env agent logs `env_vars` on every
node, slurmctld keeps a job's environment): the token stays out of it. The driver writes it to a file only
this user can read ([`hub_token_file`]) and starts the cluster without it ([`cluster_environment`]); a worker
reads it from that file for the time of its run ([`run_on_worker`]).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..record.errors import AttncardError, first_line
from .plan import RunOutcome, SweepRun, SweepSettings
from .sweep import run_sweep

logger = logging.getLogger(__name__)

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
    "LOG_SUFFIX",
    "SECRET_VARIABLES",
    "TOKEN_FILE_VARIABLE",
    "TOKEN_FOLDER_PREFIX",
    "cluster_environment",
    "hub_token_file",
    "run_log",
    "run_on_worker",
]
