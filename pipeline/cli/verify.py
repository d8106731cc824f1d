"""`attncard verify REPO|DIR [--data-dir D] [--base-model DIR] …`: reloads a published run, evaluates it again
on its recorded task and compares every figure of its card (`pipeline.reverify`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..reverify import reverify, shown
from .common import EXIT_MISMATCH, EXIT_OK, run_command
from .download import add_run_arguments, run_options

DESCRIPTION = (
    "Reload a published run and evaluate it again on its task's validation split: exit 0 "
    "when every recomputed figure of its card (metrics, per-class scores, confusion matrix, p-value, "
    "Wilson interval, status) equals the recorded one, 1 when not, 2 on errors."
)
EPILOG = "example: attncard verify attncard/minilm-none-sst2 --data-dir ../shared/data/glue"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard verify`."""
    parser.add_argument("repo", help="Hub repository ORG/NAME, or a local run folder")
    add_run_arguments(parser)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder of GLUE TSV files, never the repository's (default: $GLUE_DIR, else the recorded Hub "
        "dataset at its recorded commit)",
    )
    parser.add_argument(
        "--base-model",
        type=Path,
        default=None,
        metavar="DIR",
        help="the base model's folder, for a run trained on a local folder (its weights sha256 is checked)",
    )


def run(args: argparse.Namespace) -> int:
    """Prints every recorded and recomputed figure; exit 0 when all match, 1 when not, 2 with one line on an
    error.

    Example:
        $ attncard verify runs/minilm-none-sst2 --data-dir ../shared/data/glue
        runs/minilm-none-sst2
          metrics.accuracy                        recorded 0.7912844036697247  recomputed 0.7912844036697247
          …
        MATCH: runs/minilm-none-sst2 reproduces all 41 recorded figures
    """
    return run_command(lambda: _verify(args))


def _verify(args: argparse.Namespace) -> int:
    options = run_options(args)
    check = reverify(args.repo, args.revision, data_dir=args.data_dir, base_model=args.base_model, **options)
    print(f"{check.source}")
    for figure in check.figures:
        mark = "  " if figure.equal() else "≠ "
        recorded, recomputed = shown(figure.recorded), shown(figure.recomputed)
        print(f"{mark}{figure.name:<40}recorded {recorded}  recomputed {recomputed}")
    if check.matches:
        print(f"MATCH: {check.source} reproduces all {len(check.figures)} recorded figures")
        return EXIT_OK
    print(f"MISMATCH: {'; '.join(check.problems)}" + (f" ({check.note})" if check.note else ""))
    return EXIT_MISMATCH
