"""`publish --model M --module A --task T [--push …]` (also `attncard publish`): runs every stage and writes
the run folder `runs/<repo-name>/`; with `--push` it then pushes it to the Hub.

Every input is checked before any work starts: bad input ends with one line on stderr saying what is wrong
and what to do, and exit status 2; nothing is written. The stages (and torch) are imported once the arguments
are parsed: `--help` and argument errors answer without them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ...modules import module_names
from ..record.errors import AttncardError, UnknownNameError
from ..record.results import TrainConfig
from ..run.data import check_data_dir
from ..run.models import MODEL_ALIASES, read_config, resolve_model_name
from ..scoring.paired import DEFAULT_MARGIN, DENSE_MODULE
from ..scoring.tasks import TASKS, get_task
from .common import (
    OneLineParser,
    add_batch_arguments,
    add_data_dir_argument,
    positive_int,
    repo_id,
    run_command,
    run_name,
)
from .push import add_push_arguments

if TYPE_CHECKING:
    from ..publish.publish import PublishOptions

DESCRIPTION = (
    "Fine-tune a model with LoRA and an attention module on a GLUE task, evaluate it on the full validation "
    "split, verify it against the majority-class baseline, and write the run folder runs/<repo-name>/ "
    "(adapter weights, config, tokenizer, results.json and the model card)."
)
EPILOG = "example: publish --model minilm --module none --task sst2 --steps 200"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `publish`."""
    defaults = TrainConfig()
    parser.add_argument(
        "--model",
        required=True,
        help=f"base model: an alias ({', '.join(MODEL_ALIASES)}), a Hub id (org/name) or a local folder; "
        "'minilm' is shipped with attncard and works offline",
    )
    parser.add_argument(
        "--module", required=True, help=f"attention module to install ({', '.join(module_names())})"
    )
    parser.add_argument(
        "--task", default="sst2", help=f"GLUE classification task ({', '.join(TASKS)}); default: sst2"
    )
    group = parser.add_argument_group("training")
    group.add_argument(
        "--steps", type=positive_int, default=defaults.steps, help="optimizer steps (default: %(default)s)"
    )
    add_batch_arguments(group)
    group.add_argument("--seed", type=int, default=defaults.seed, help="random seed (default: %(default)s)")
    group = parser.add_argument_group("input and output")
    add_data_dir_argument(group)
    group.add_argument(
        "--output",
        type=Path,
        default=Path("runs"),
        help="folder that receives the run folder <repo-name>/ (default: runs)",
    )
    group.add_argument(
        "--repo-id",
        type=repo_id,
        default=None,
        help="Hub repository ORG/NAME; its NAME names the run folder (default name: <model>-<module>-<task>)",
    )
    group.add_argument(
        "--name",
        type=run_name,
        default=None,
        help="the run folder's name when there is no --repo-id (default: <model>-<module>-<task>; "
        "`attncard sweep` names its runs <model>-<module>-<task>-seed<k>)",
    )
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run folder if it already holds a run (without it, publish refuses before training)",
    )
    group.add_argument(
        "--cards",
        type=Path,
        default=None,
        metavar="DIR",
        help="also copy the card, results.json and plots to DIR/<repo-name>/ for review (e.g. cards)",
    )
    group = parser.add_argument_group("the paired verdict against the dense model")
    group.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="RUN",
        help="the run folder of `none` with the same model, task, data, seed and training settings that this "
        "run is compared with, row by row (default: looked for in --output)",
    )
    group.add_argument(
        "--margin",
        type=margin_points,
        default=DEFAULT_MARGIN * 100,
        metavar="POINTS",
        help="non-inferiority margin of the verdict, in accuracy points (default: %(default)s)",
    )
    group = parser.add_argument_group("pushing to the Hub")
    group.add_argument(
        "--push",
        action="store_true",
        help="push the run folder to the Hub repository --repo-id, in one commit, tagged "
        "run-<started_at>-<results.json sha256[:32]>; token: $HF_TOKEN, else `hf auth login`",
    )
    add_push_arguments(group)


def margin_points(text: str) -> float:
    """A non-inferiority margin in accuracy points: a number in (0, 100)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of accuracy points") from None
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"{text} must be between 0 and 100 accuracy points, e.g. 1.0")
    return value


def options_from_args(args: argparse.Namespace) -> PublishOptions:
    """Checks every input before any work starts, so a typo costs nothing and nothing is written.

    Checked: the module, task and model names (a model folder must hold a config and weights), the data
    folder (`--data-dir`, else `GLUE_DIR`: a folder holding the task's folder), the folders written
    (`--output` and `--cards`: see [`check_run_folders`]; a run already in the run folder is kept unless
    `--overwrite`), `--max-length` against the model's positions (read from its config without the weights
    when the model is on this machine; a Hub model's once its config is loaded, still before training),
    `--baseline` (a run of `none` with the same task and training settings, whose predictions check), and
    with `--push` what a push needs.

    Raises:
        [`AttncardError`]: the first input found wrong; its message names the option and what to do.
    """
    if args.module not in module_names():
        raise UnknownNameError("module", args.module, module_names())
    spec = get_task(args.task)
    source, _ = resolve_model_name(args.model)
    data_dir = args.data_dir or os.environ.get("GLUE_DIR") or None
    if data_dir is not None:
        check_data_dir(spec, data_dir)
    if args.name is not None and args.repo_id is not None:
        raise AttncardError(
            f"--name {args.name} and --repo-id {args.repo_id} both name the run folder; give one of them"
        )
    # The stage (and torch) once the names are known good: a typo in them is answered at once.
    from ..publish.publish import PublishOptions, baseline_candidate, check_max_length, check_run_folders
    from ..publish.push import check_push_only_options, check_push_setup

    if Path(source).is_dir():  # `minilm` too; a Hub model's config is checked once loaded, before training
        check_max_length(args.model, args.max_length, read_config(source))
    if args.push:
        check_push_setup(args.repo_id, args.hub_endpoint, args.sign_key)
    else:
        check_push_only_options(args)
    options = PublishOptions(
        model=args.model,
        module=args.module,
        task=args.task,
        train=TrainConfig(
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            max_length=args.max_length,
            seed=args.seed,
        ),
        data_dir=args.data_dir,
        output=args.output,
        repo_id=args.repo_id,
        push=args.push,
        cards=args.cards,
        allow_fail=args.allow_fail,
        hub_endpoint=args.hub_endpoint,
        hub_timeout=args.hub_timeout,
        hub_deadline=args.hub_deadline,
        sign_key=args.sign_key,
        name=args.name,
        baseline=args.baseline,
        margin=args.margin / 100,
        overwrite=args.overwrite,
    )
    if options.baseline is not None and options.module == DENSE_MODULE:
        raise AttncardError("--baseline only applies to a module run; `none` is the dense baseline itself")
    check_run_folders(options.output, options.cards, options.repo_name, overwrite=options.overwrite)
    if options.baseline is not None:
        baseline_candidate(options)  # a dense run of this setup, whose predictions check
    return options


def run(args: argparse.Namespace) -> int:
    def publish() -> None:
        options = options_from_args(args)
        from ..publish.publish import run_publish

        run_publish(options)

    return run_command(publish)


def main(argv: list[str] | None = None) -> int:
    """The `publish` console script."""
    parser = OneLineParser(prog="publish", description=DESCRIPTION, epilog=EPILOG)
    add_arguments(parser)
    return run(parser.parse_args(argv))
