"""The local executor of `attncard sweep MATRIX.yaml` (`--executor local`, the default): the runs of a plan
one after the other in this process, each skipped when finished before, else trained.

Each run is one [`run_publish`] into `<output>/<run name>/`, on the torch threads its resources ask for
([`torch_threads`]). A run finished before ([`previous_run`]) is not trained again. A run that fails is
reported in one line and the sweep goes on with the next. The cluster executors (`sweep_ray`, `sweep_slurm`)
run this same step, one run per worker (`cluster.run_on_worker`).

The matrix is read by `pipeline.study.matrix`, the runs planned and checked by `pipeline.study.plan`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Literal

import torch

from ..publish.publish import copy_to_cards, run_publish
from ..publish.push import sign_and_push
from ..record.errors import AttncardError, first_line
from ..record.results import Results
from .plan import RunOutcome, StaleRunError, SweepRun, SweepSettings, previous_run, publish_options

logger = logging.getLogger(__name__)


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


__all__ = ["run_sweep", "torch_threads"]
