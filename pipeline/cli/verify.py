"""`attncard verify REPO|DIR [--data-dir D] [--base-model DIR] …`: reloads a published run, evaluates it again
on its recorded task and compares every figure of its card (`pipeline.verify.reverify`).

`attncard verify --predictions DIR [--data-dir D]`: recomputes every quality figure of a local run folder (or
its `cards/` copy) from its predictions.csv, without the model or its weights, in seconds, then checks its
card and plots as a download does (`pipeline.checks.registry`, profile VERIFY_PREDICTIONS)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..record.errors import AttncardError
from .common import EXIT_MISMATCH, EXIT_OK, run_command
from .download import add_run_arguments, run_options

DESCRIPTION = (
    "Reload a published run and evaluate it again on its task's validation split: exit 0 "
    "when every recomputed figure of its card (metrics, per-class scores, confusion matrix, p-value, "
    "Wilson interval, status) equals the recorded one, 1 when not, 2 on errors. With --predictions, the "
    "figures are recomputed from the run's predictions.csv instead, without the model or its weights, and "
    "the card and plots checked as a download checks them."
)
EPILOG = (
    "examples: attncard verify attncard/minilm-none-sst2 --data-dir ../shared/data/glue; "
    "attncard verify --predictions cards/minilm-none-sst2-seed0 --data-dir ../shared/data/glue"
)
# Options that name a Hub download, a signer or the base model: none applies to --predictions.
_MODEL_ONLY_OPTIONS = (
    ("revision", "--revision"),
    ("hub_endpoint", "--hub-endpoint"),
    ("require_signer", "--require-signer"),
    ("require_key", "--require-key"),
    ("signer_issuer", "--signer-issuer"),
    ("hub_timeout", "--hub-timeout"),
    ("hub_deadline", "--hub-deadline"),
    ("base_model", "--base-model"),
)


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
    parser.add_argument(
        "--predictions",
        action="store_true",
        help="recompute every quality figure and the verification from the run's predictions.csv, without "
        "the model or its weights: REPO is a local run folder or its cards/ copy (weights may be absent)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=None,
        metavar="DIR",
        help="with --predictions: a folder holding the dense run(s) the paired verdict names (repeatable; "
        "default: the run folder's parent)",
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
        $ attncard verify --predictions cards/minilm-none-sst2-seed0 --data-dir ../shared/data/glue
        cards/minilm-none-sst2-seed0
          predictions.csv gold labels             recorded 9a0e3b41c7d2…  recomputed 9a0e3b41c7d2…
          …
        MATCH: cards/minilm-none-sst2-seed0 reproduces all 48 recorded figures
    """
    return run_command(lambda: _verify(args))


def _verify(args: argparse.Namespace) -> int:
    # The stages are imported when the command runs: --help and argument errors need no torch, and neither
    # does --predictions (pipeline.verify.reverify_predictions imports none).
    from ..checks.reverification import shown
    from ..verify.reverify_predictions import reverify_predictions

    if args.baseline and not args.predictions:
        raise AttncardError("--baseline applies with --predictions; add --predictions, or drop --baseline")
    if args.predictions:
        given = [option for name, option in _MODEL_ONLY_OPTIONS if getattr(args, name) is not None]
        if given:
            raise AttncardError(
                f"{given[0]} does not apply to --predictions, which reads a local run folder and no model; "
                f"drop {given[0]}, or drop --predictions to evaluate the model again"
            )
        check = reverify_predictions(
            args.repo, data_dir=args.data_dir, expected_sha256=args.expect_sha256, baselines=args.baseline
        )
    else:
        from ..verify.reverify import reverify

        options = run_options(args)
        check = reverify(
            args.repo, args.revision, data_dir=args.data_dir, base_model=args.base_model, **options
        )
    print(f"{check.source}")
    within = []  # figures equal within their tolerance, not bit for bit (a loss recorded in float32)
    for figure in check.figures:
        mark = "  " if figure.recorded == figure.recomputed else "≈ " if figure.equal() else "≠ "
        if mark == "≈ ":
            within.append(f"{figure.name} within a relative {figure.rel_tol:g}")
        recorded, recomputed = shown(figure.recorded), shown(figure.recomputed)
        print(f"{mark}{figure.name:<40}recorded {recorded}  recomputed {recomputed}")
    if check.matches:
        print(
            f"MATCH: {check.source} reproduces all {len(check.figures)} recorded figures"
            + (f" ({'; '.join(within)})" if within else "")
            + (f" ({check.note})" if check.note else "")
        )
        return EXIT_OK
    print(f"MISMATCH: {'; '.join(check.problems)}" + (f" ({check.note})" if check.note else ""))
    return EXIT_MISMATCH
