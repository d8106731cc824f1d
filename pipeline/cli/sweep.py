"""`attncard sweep MATRIX.yaml`: every (row, seed) of a matrix as one publish run (`pipeline.study.sweep`),
with one progress bar over all of them.

The whole matrix and every option are checked before the first run: bad input ends with one line on stderr
and exit status 2, and nothing is trained or written. A module run that no dense run of its settings will be
compared with is one line `warning: ...` on stderr then, naming the closest dense row and what differs, and
runs all the same. Then each run is trained, or skipped when its folder
holds it finished; a run that fails is one line on stderr, `<run name>: <error>`, and the sweep goes on. The
exit status is 1 when any run failed, 0 otherwise. The stage (and torch) is imported when the command runs:
`--help` and argument errors answer without it.

`--executor ray` runs each (row, seed) as a Ray task (`pipeline.study.sweep_ray`) on the cluster at
`--address`, or on a Ray instance it starts on this machine; `--executor slurm` as a Slurm job
(`pipeline.study.sweep_slurm`) in `--partition`, for at most `--time-limit` minutes; Ray and submitit too are
imported only then.

Each executor is one entry of `EXECUTORS` (a `pipeline.study.executors.SweepExecutor`: its name, its help,
its options and the function that runs the runs); `--executor`'s choices and help, the executors' options and
the refusal of an option given with another executor all come from there. A new executor is its file in
pipeline/study/, its registration below (`EXECUTORS.register(...)`), and its extra in pyproject.toml if it
needs a package.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from ..record.results import TrainConfig
from ..study.executors import ExecutorOption, SweepExecutor, SweepExecutors
from .common import (
    EXIT_INTERRUPTED,
    EXIT_MISMATCH,
    EXIT_OK,
    add_batch_arguments,
    add_data_dir_argument,
    non_negative_int,
    positive_int,
    run_command,
)
from .push import add_push_arguments

if TYPE_CHECKING:
    from ..study.plan import RunOutcome, SweepRun, SweepSettings

DESCRIPTION = (
    "Run every (row, seed) of a matrix file (cards/matrix.yaml: rows of model, module, task, steps and "
    "seeds) as one publish run into <output>/<model>-<module>-<task>-seed<seed>/, the dense (none) runs "
    "first. A run whose folder holds it finished and checked is skipped; a run that fails is reported in one "
    "line and the others go on (exit status 1)."
)
EPILOG = (
    "example: attncard sweep cards/matrix.yaml --seeds 0 1 2 --cards cards; on a Ray cluster: attncard sweep "
    "cards/matrix.yaml --executor ray --address HEAD:6379 --output /shared/runs; on a Slurm cluster: "
    "attncard sweep cards/matrix.yaml --executor slurm --partition gpu --time-limit 60 --output /shared/runs"
)
# How often --executor ray or slurm starts a run again that was lost with its worker, node or job.
DEFAULT_RETRIES = 2
# A Slurm job's time limit, in minutes (pipeline.study.sweep_slurm.DEFAULT_TIME_LIMIT_MINUTES, not imported
# here).
DEFAULT_TIME_LIMIT_MINUTES = 240


def hub_owner(text: str) -> str:
    if not text or "/" in text:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a Hub user or organisation; write ORG, without /NAME"
        )
    return text


def slurm_partition(text: str) -> str:
    if not text or any(character.isspace() for character in text):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a Slurm partition name; write e.g. --partition gpu"
        )
    return text


# --- the executors -----------------------------------------------------------------------------------------


def _run_local(
    runs: list[SweepRun], settings: SweepSettings, options: dict[str, Any]
) -> Iterable[RunOutcome]:
    from ..study.sweep import run_sweep

    return run_sweep(runs, settings)


def _run_ray(runs: list[SweepRun], settings: SweepSettings, options: dict[str, Any]) -> Iterable[RunOutcome]:
    from ..study.sweep_ray import run_sweep_ray

    # Ray starts (or connects) now: without Ray, or without a cluster there, one line and exit 2.
    return run_sweep_ray(runs, settings, address=options["address"], retries=options["retries"])


def _run_slurm(
    runs: list[SweepRun], settings: SweepSettings, options: dict[str, Any]
) -> Iterable[RunOutcome]:
    from ..study.sweep_slurm import run_sweep_slurm

    # Slurm is asked now whether it takes every job (sbatch --test-only): if not, one line and exit 2.
    return run_sweep_slurm(
        runs,
        settings,
        partition=options["partition"],
        time_limit_minutes=options["time_limit"],
        retries=options["retries"],
    )


RETRIES = ExecutorOption(
    "--retries",
    "start a run lost with its worker, node or job (killed, timed out, cancelled) again up to N times, then "
    f"report it failed (default: {DEFAULT_RETRIES})",
    metavar="N",
    type=non_negative_int,
    default=DEFAULT_RETRIES,
)
EXECUTORS = SweepExecutors()
EXECUTORS.register(
    SweepExecutor("local", "one run after the other in this process (default)", run=_run_local)
)
EXECUTORS.register(
    SweepExecutor(
        "ray",
        "each run a Ray task with the resources the matrix asks for, the module runs waiting on their dense "
        "runs (pip install 'attncard[ray]')",
        run=_run_ray,
        options=(
            ExecutorOption(
                "--address",
                "the Ray cluster's address (HOST:PORT, as `ray start --head` prints it, or auto); every node "
                "must see --output and the current folder at the same path (default: start Ray on this "
                "machine, with its CPUs)",
                metavar="ADDR",
            ),
            RETRIES,
        ),
    )
)
EXECUTORS.register(
    SweepExecutor(
        "slurm",
        "each run a Slurm job with those resources, submitted from this node, the module runs depending on "
        "their dense runs' jobs (pip install 'attncard[slurm]')",
        run=_run_slurm,
        options=(
            RETRIES,
            ExecutorOption(
                "--partition",
                "the partition of every job (default: the cluster's default partition)",
                metavar="NAME",
                type=slurm_partition,
            ),
            ExecutorOption(
                "--time-limit",
                "each job's time limit in minutes; a job past it is submitted again as --retries allows "
                f"(default: {DEFAULT_TIME_LIMIT_MINUTES})",
                metavar="MINUTES",
                type=positive_int,
                default=DEFAULT_TIME_LIMIT_MINUTES,
            ),
        ),
    )
)


def executor_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of the executor `args.executor`, by `dest`: each given value, else its default.

    Raises:
        [`AttncardError`]: an option of other executors only was given; the message says which to add or drop.
    """
    from ..record.errors import AttncardError

    for flag, (option, executors) in EXECUTORS.options().items():
        if getattr(args, option.dest) is not None and args.executor not in executors:
            named = " or ".join(f"--executor {executor}" for executor in executors)
            raise AttncardError(
                f"{flag} only applies with {named}; add --executor {executors[-1]}, or drop {flag}"
            )
    options = {}
    for option in EXECUTORS[args.executor].options:
        value = getattr(args, option.dest)
        options[option.dest] = option.default if value is None else value
    return options


# --- the command -------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard sweep`."""
    defaults = TrainConfig()
    parser.add_argument(
        "matrix", type=Path, metavar="MATRIX.yaml", help="the matrix file, e.g. cards/matrix.yaml"
    )
    parser.add_argument(
        "--seeds",
        type=non_negative_int,
        nargs="+",
        default=None,
        metavar="SEED",
        help="train every row with these seeds, whatever the matrix says (default: each row's seeds, else "
        f"the matrix's, else {defaults.seed})",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=None,
        metavar="PATTERN",
        help="run only the runs whose name matches this shell pattern (e.g. '*-seed0'); may be repeated",
    )
    group = parser.add_argument_group("executor")
    group.add_argument(
        "--executor",
        choices=tuple(EXECUTORS),
        default="local",
        help="; ".join(f"{name}: {executor.help}" for name, executor in EXECUTORS.items()),
    )
    for flag, (option, executors) in EXECUTORS.options().items():
        # None when not given: given with another executor, it is refused (`executor_options`).
        group.add_argument(
            flag,
            type=option.type,
            default=None,
            metavar=option.metavar,
            help=f"with --executor {' or '.join(executors)}: {option.help}",
        )
    group = parser.add_argument_group("training (every run)")
    add_batch_arguments(group)
    group = parser.add_argument_group("input and output")
    add_data_dir_argument(group)
    group.add_argument(
        "--output",
        type=Path,
        default=Path("runs"),
        help="folder that receives the run folders (default: runs)",
    )
    group.add_argument(
        "--cards",
        type=Path,
        default=None,
        metavar="DIR",
        help="also copy each finished run, weights left out, to DIR/<run name>/ (then: attncard summary DIR)",
    )
    group = parser.add_argument_group("pushing to the Hub")
    group.add_argument(
        "--hub-org",
        type=hub_owner,
        default=None,
        metavar="ORG",
        help="the Hub user or organisation of the runs: run <name> is rendered for the repository ORG/<name>",
    )
    group.add_argument(
        "--push",
        action="store_true",
        help="push each finished run to ORG/<run name> (needs --hub-org), as publish --push does; token: "
        "$HF_TOKEN, else `hf auth login`",
    )
    add_push_arguments(group)


def settings_from_args(args: argparse.Namespace) -> SweepSettings:
    """The settings of every run, from the command line."""
    from ..study.plan import SweepSettings

    return SweepSettings(
        output=args.output,
        cards=args.cards,
        data_dir=args.data_dir,
        hub_org=args.hub_org,
        push=args.push,
        batch_size=args.batch_size,
        lr=args.lr,
        max_length=args.max_length,
        allow_fail=args.allow_fail,
        hub_endpoint=args.hub_endpoint,
        hub_timeout=args.hub_timeout,
        hub_deadline=args.hub_deadline,
        sign_key=args.sign_key,
    )


def run(args: argparse.Namespace) -> int:
    """Checks the matrix and the options, runs the sweep with a progress bar, then prints one line per run
    (`ran`, `skipped` or `failed`) and the counts on stdout; exit 0 when no run failed, 1 when one did, 2 with
    one line on stderr on bad input (nothing is trained then).

    Example:
        $ attncard sweep cards/matrix.yaml --seeds 0 1 --cards cards
        ran      minilm-none-sst2-seed0: PASS_NO_COMPRESSION, accuracy 0.9002
        …
        10 runs: 10 ran, 0 skipped, 0 failed
    """
    return run_command(lambda: _sweep(args))


def _sweep(args: argparse.Namespace) -> int:
    from ..record.errors import visible
    from ..study.matrix import read_matrix
    from ..study.plan import check_sweep, plan_sweep, unpaired_warnings

    options = executor_options(args)
    matrix = read_matrix(args.matrix)
    runs = plan_sweep(matrix, seeds=args.seeds, only=args.only)
    settings = settings_from_args(args)
    check_sweep(runs, settings)
    # Legal, yet mostly a slip of the matrix: said before the first run, not found in the cards hours later.
    for warning in unpaired_warnings(runs, settings, planned=plan_sweep(matrix, seeds=args.seeds)):
        print(f"warning: {visible(warning)}", file=sys.stderr)
    executed = EXECUTORS[args.executor].run(runs, settings, options)
    outcomes: list[RunOutcome] = []
    loggers = [logging.getLogger("attncard.pipeline"), logging.getLogger("attncard.pipeline.publish.push")]
    try:
        with (
            tqdm(total=len(runs), desc="sweep", unit="run", file=sys.stderr) as bar,
            logging_redirect_tqdm(loggers=loggers),
        ):
            for outcome in executed:
                outcomes.append(outcome)
                bar.set_postfix_str(f"{outcome.run.name}: {outcome.state}", refresh=False)
                bar.update(1)
    except KeyboardInterrupt:
        print(
            f"interrupted after {len(outcomes)} of {len(runs)} runs; the finished run folders are kept: run "
            "the same sweep again to go on",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    # Ray's and Slurm's runs finish in any order; the report lists them in the plan's order, as the local
    # executor does.
    order = {run.name: index for index, run in enumerate(runs)}
    for outcome in sorted(outcomes, key=lambda outcome: order[outcome.run.name]):
        print(_outcome_line(outcome))
    counts = {state: sum(o.state == state for o in outcomes) for state in ("ran", "skipped", "failed")}
    print(
        f"{len(outcomes)} run{'s' if len(outcomes) != 1 else ''}: "
        + ", ".join(f"{count} {state}" for state, count in counts.items())
    )
    return EXIT_MISMATCH if counts["failed"] else EXIT_OK


def _outcome_line(outcome: RunOutcome) -> str:
    if outcome.state == "failed":
        return f"failed   {outcome.run.name}: {outcome.error}"
    status = outcome.status.value if outcome.status is not None else ""
    return f"{outcome.state:<8} {outcome.run.name}: {status}, accuracy {outcome.accuracy:.4f}"
