"""The command line, one module per command: `attncard <command>` and the `publish` shortcut.

Each command module has `DESCRIPTION`, `add_arguments(parser)` and `run(args) -> int`; it parses, calls the
library and turns an [`AttncardError`] into one line on stderr with exit status 2 (`common.run_command`).
The library knows nothing of argv, stderr or exit codes.

Example:
    $ attncard modules
    $ publish --model minilm --module none --task sst2
    $ attncard verify runs/minilm-none-sst2 --data-dir ../shared/data/glue
    $ attncard sweep cards/matrix.yaml --seeds 0 1 2 --cards cards && attncard summary cards
"""

from __future__ import annotations

import importlib
import sys

from .common import OneLineParser

DESCRIPTION = "Verified model cards for efficient-attention modules."
# command -> (its module in this package, the one-line help of `attncard --help`)
COMMANDS = {
    "publish": ("publish", "train, evaluate, verify and write a run folder"),
    "modules": ("modules", "list the attention modules and what they support"),
    "push": ("push", "push a run folder to the Hub: one commit, tagged; refused on lint findings or FAIL"),
    "download": ("download", "download a published run, check every file, refuse FAIL"),
    "verify": ("verify", "re-evaluate a published run and compare with its card"),
    "sweep": ("sweep", "publish every (row, seed) of a matrix file, resumable; the dense runs first"),
    "summary": ("summary", "write a cards folder's leaderboard: accuracy over seeds, verdicts, speed-ups"),
    "space": ("space", "the leaderboard as a web page: serve it here, or write and push a Hub Space"),
    "lint": ("lint", "check a run folder, a cards copy, or a cards folder's leaderboard and its cards"),
    "bench": ("bench", "benchmarks: `attncard bench attention [--json FILE]`"),
}


def main(argv: list[str] | None = None) -> int:
    """The `attncard` console script. Only the command asked for is imported, and each command imports its
    stage only when it runs: `--help` and argument errors need no torch (publish lists the modules, models and
    tasks from the registry and tables, which import none)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = OneLineParser(prog="attncard", description=DESCRIPTION)
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name, (module_name, help_text) in COMMANDS.items():
        if argv and argv[0] == name:
            command = importlib.import_module(f"{__name__}.{module_name}")
            subparser = subparsers.add_parser(
                name, help=help_text, description=command.DESCRIPTION, epilog=getattr(command, "EPILOG", None)
            )
            command.add_arguments(subparser)
            subparser.set_defaults(run=command.run)
        else:
            subparsers.add_parser(name, help=help_text)
    args = parser.parse_args(argv)
    return args.run(args)


def publish_main(argv: list[str] | None = None) -> int:
    """The `publish` console script: `attncard publish` under its own name."""
    from . import publish

    return publish.main(argv)


if __name__ == "__main__":
    sys.exit(main())
