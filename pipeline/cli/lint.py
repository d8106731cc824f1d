"""`attncard lint DIR`: checks a run folder before it is pushed, a cards copy of one, or a cards folder and
its leaderboard (`pipeline.checks.lint`), one finding per line."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from .common import EXIT_MISMATCH, EXIT_OK, run_command

DESCRIPTION = (
    "Check a run folder before pushing it: placeholders in the card, files that do not "
    "parse, card figures that are not in results.json, missing linked files, and the sha256 manifest. "
    "A cards copy (publish --cards) is checked the same way, its weights (*.safetensors) left out; a cards "
    "folder with its leaderboard (attncard summary) is checked figure by figure against the cards' "
    "results.json, and each cards copy in it as one."
)
EPILOG = "examples: attncard lint runs/minilm-none-sst2; attncard lint cards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard lint`."""
    parser.add_argument(
        "run_dir",
        metavar="DIR",
        help="the run folder written by publish, a cards copy of one, or a cards folder with its leaderboard",
    )


def run(args: argparse.Namespace) -> int:
    """Prints each finding as `DIR/path:line: message`, then `N findings` (`1 finding`) or `clean: DIR` (for
    a cards copy or a cards folder, with what was checked), all on stdout; exit 0 when clean, 1 with findings,
    2 with one line on stderr on bad input (not a folder, no results.json here nor in a subfolder).

    Example:
        $ attncard lint runs/minilm-none-sst2
        clean: runs/minilm-none-sst2
        $ attncard lint cards
        clean: cards (the leaderboard, and each cards copy without its weights)
    """
    return run_command(lambda: _lint(args))


def _lint(args: argparse.Namespace) -> int:
    # The stage is imported when the command runs: --help and argument errors need no torch.
    from ..checks.lint import lint_folder

    kind, findings = lint_folder(args.run_dir)
    for finding in findings:
        # Paths from where the command was run, so that editors and terminals can open them.
        print(dataclasses.replace(finding, path=(Path(args.run_dir) / finding.path).as_posix()))
    if findings:
        print(f"{len(findings)} finding{'s' if len(findings) != 1 else ''}")
        return EXIT_MISMATCH
    print(f"clean: {args.run_dir}{_CHECKED[kind]}")
    return EXIT_OK


# What `clean:` adds for each kind of folder: what was checked.
_CHECKED = {
    "run folder": "",
    "cards copy": " (a cards copy: every file but the weights, which are not there)",
    "cards folder": " (the leaderboard, and each cards copy without its weights)",
}
