"""`attncard summary CARDS_DIR`: writes the leaderboard of a cards folder (`pipeline.card.leaderboard`);
`attncard summary --hub ORG`: of every run an organisation published on the Hub, each verified
(`pipeline.study.hub_leaderboard`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..card.groups import read_cards
from ..card.leaderboard import write_summary
from ..record.errors import AttncardError, visible
from .common import (
    EXIT_MISMATCH,
    EXIT_OK,
    add_data_dir_argument,
    add_hub_arguments,
    positive_float,
    run_command,
)

DESCRIPTION = (
    "Write the leaderboard of a cards folder (the copies publish --cards and attncard sweep --cards write): "
    "CARDS_DIR/README.md, one row per (model, module, task) with the accuracy's mean ± standard deviation "
    "over seeds, each seed's figure and status, the paired verdict against the dense runs pooled over seeds, "
    "the speed-up and memory ratio at the task's length and at the longest N, the compression, and a link "
    "to each seed's card; and CARDS_DIR/leaderboard.png, accuracy against speed-up. `attncard lint "
    "CARDS_DIR` checks them against the cards. With --hub ORG, the same leaderboard of every run ORG "
    "published on the Hub (its models tagged attncard), written to --output: each run is fetched without "
    "its weights and checked as `attncard download` checks it (run tag, manifest, card), its figures and "
    "paired verdict are recomputed from the predictions, and its signature is verified when --require-signer "
    "or --require-key is given; a column names the checks each row passed, and a run that fails one is "
    "listed below the table with the reason."
)
EPILOG = (
    "examples: attncard summary cards; attncard summary --hub attncard --output leaderboard "
    "--require-signer https://github.com/ORG/REPO/.github/workflows/publish.yml@refs/tags/v1"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard summary`."""
    parser.add_argument(
        "cards_dir", metavar="CARDS_DIR", nargs="?", default=None, help="the cards folder, e.g. cards"
    )
    group = parser.add_argument_group("the leaderboard of a Hub organisation")
    group.add_argument(
        "--hub",
        default=None,
        metavar="ORG",
        help="read every run of this Hub user or organisation (its models tagged attncard) instead of a "
        "cards folder",
    )
    group.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --hub: the new folder for README.md, leaderboard.png and the verified runs' cards copies "
        "(default: leaderboard)",
    )
    add_data_dir_argument(group)
    add_hub_arguments(group, "a run", "the download of one run")
    group.add_argument(
        "--deadline",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        # The numbers are hub_summary's DEFAULT_SUMMARY_DEADLINE_S and FETCHING_RUNS, not imported: --help
        # does not load the Hub stage.
        help="with --hub: give up the whole leaderboard after this long: listing, downloads (4 at once) and "
        "checks; a run not reached by then is listed as refused, not reached within the deadline "
        "(default: 7200)",
    )


def run(args: argparse.Namespace) -> int:
    """Writes the two files and says so on stdout; exit 0, or 2 with one line on stderr when the folder holds
    no cards copy, a results.json does not load, two copies of a group clash, or (--hub) the organisation's
    models cannot be listed or the output folder is not new. A run of --hub that fails a check is left out
    of the table, listed below it and named on stderr, and the command exits 1 once the leaderboard of the
    others is written: a forged or broken run on the organisation fails the job that reads it.

    Example:
        $ attncard summary cards
        wrote cards/README.md and cards/leaderboard.png: 10 runs in 5 groups
        $ attncard summary --hub attncard --output leaderboard
        refused attncard/bert-sliding_window-sst2-seed1: its figures differ from their recomputation …
        wrote leaderboard/README.md and leaderboard/leaderboard.png: 11 runs verified, 1 refused
    """
    return run_command(lambda: _hub_summary(args) if args.hub is not None else _summary(args))


def _summary(args: argparse.Namespace) -> None:
    if args.cards_dir is None:
        raise AttncardError("give the cards folder (attncard summary cards), or --hub ORG to read the Hub")
    hub_only = [
        option
        for option, value in (
            ("--output", args.output),
            ("--hub-endpoint", args.hub_endpoint),
            ("--require-signer", args.require_signer),
            ("--require-key", args.require_key),
            ("--signer-issuer", args.signer_issuer),
            ("--data-dir", args.data_dir),
            ("--hub-timeout", args.hub_timeout),
            ("--hub-deadline", args.hub_deadline),
            ("--deadline", args.deadline),
        )
        if value is not None
    ]
    if hub_only:
        raise AttncardError(f"{hub_only[0]} applies to --hub ORG only; drop it, or pass --hub ORG")
    groups = read_cards(args.cards_dir)
    readme, plot = write_summary(args.cards_dir)
    runs = sum(len(group.cards) for group in groups)
    print(
        f"wrote {readme.as_posix()} and {plot.as_posix()}: {runs} run{'s' if runs != 1 else ''} in "
        f"{len(groups)} group{'s' if len(groups) != 1 else ''}"
    )


def _hub_summary(args: argparse.Namespace) -> int:
    if args.cards_dir is not None:
        raise AttncardError(
            f"give a cards folder ({args.cards_dir}) or --hub {args.hub}, not both; --output names the "
            "folder the Hub's leaderboard is written to"
        )
    # Imported when it runs: signature checks load model_signing, which --help does not need.
    from ..study.hub_leaderboard import write_hub_summary

    summary = write_hub_summary(
        args.hub,
        args.output or Path("leaderboard"),
        endpoint=args.hub_endpoint,
        data_dir=args.data_dir,
        require_signer=args.require_signer,
        signer_issuer=args.signer_issuer,
        require_key=args.require_key,
        timeout=args.hub_timeout,
        deadline=args.hub_deadline,
        total_deadline=args.deadline,
    )
    for refused in summary.refused:
        # The reason may quote the run or the server: its escape sequences and bidi characters shown.
        print(f"refused {refused.repo_id}: {visible(refused.reason)}", file=sys.stderr)
    written = summary.readme.as_posix() + (f" and {summary.plot.as_posix()}" if summary.plot else "")
    print(f"wrote {written}: {len(summary.verified)} runs verified, {len(summary.refused)} refused")
    return EXIT_MISMATCH if summary.refused else EXIT_OK
