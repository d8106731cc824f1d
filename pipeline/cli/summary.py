"""`attncard summary CARDS_DIR`: writes the leaderboard of a cards folder (`pipeline.summary`)."""

from __future__ import annotations

import argparse

from ..summary import read_cards, write_summary
from .common import run_command

DESCRIPTION = (
    "Write the leaderboard of a cards folder (the copies publish --cards and attncard sweep --cards write): "
    "CARDS_DIR/README.md, one row per (model, module, task) with the accuracy's mean ± standard deviation "
    "over seeds, each seed's figure and status, the paired verdict against the dense runs pooled over seeds, "
    "the speed-up and memory ratio at the task's length and at the longest N, the compression, and a link "
    "to each seed's card; and CARDS_DIR/leaderboard.png, accuracy against speed-up. `attncard lint "
    "CARDS_DIR` checks them against the cards."
)
EPILOG = "example: attncard summary cards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard summary`."""
    parser.add_argument("cards_dir", metavar="CARDS_DIR", help="the cards folder, e.g. cards")


def run(args: argparse.Namespace) -> int:
    """Writes the two files and says so on stdout; exit 0, or 2 with one line on stderr when the folder holds
    no cards copy, a results.json does not load, or two copies of a group clash.

    Example:
        $ attncard summary cards
        wrote cards/README.md and cards/leaderboard.png: 10 runs in 5 groups
    """
    return run_command(lambda: _summary(args))


def _summary(args: argparse.Namespace) -> None:
    groups = read_cards(args.cards_dir)
    readme, plot = write_summary(args.cards_dir)
    runs = sum(len(group.cards) for group in groups)
    print(
        f"wrote {readme.as_posix()} and {plot.as_posix()}: {runs} run{'s' if runs != 1 else ''} in "
        f"{len(groups)} group{'s' if len(groups) != 1 else ''}"
    )
