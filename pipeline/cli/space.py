"""`attncard space`: the leaderboard as a web page (`pipeline.space`): served here (`--serve`), or written
as a Hub Space folder (`--output`) and pushed (`--push`)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import tempfile
from pathlib import Path

from ..record.errors import AttncardError
from .common import (
    add_data_dir_argument,
    add_hub_arguments,
    positive_float,
    positive_int,
    repo_id,
    run_command,
)

DESCRIPTION = (
    "The leaderboard as a web page: a Gradio app that shows the runs of a Hub organisation (ORG: its models "
    "tagged attncard, each checked as `attncard summary --hub` checks it, again every --interval seconds, "
    "re-checking only what changed) or of a local cards folder (--cards: each copy's figures recomputed from "
    "its predictions, as `attncard verify --predictions` does). The page has the answer (which module keeps "
    "dense accuracy, and how much faster or leaner it is), every group with the official GLUE metric, "
    "filters by task, model and module, search, sort, an interactive plot, and the refused runs with their "
    "reasons. --serve serves it on this machine; --output writes a Hub Space folder (app.py, "
    "requirements.txt, README.md with the Space metadata) that serves the same page; --push pushes that "
    "folder to a Space as one commit."
)
EPILOG = (
    "examples: attncard space --cards cards --serve --port 7860; "
    "attncard space --cards cards --output space; "
    "attncard space attncard --output space --push attncard/leaderboard --require-signer "
    "https://github.com/ORG/REPO/.github/workflows/publish.yml@refs/tags/*"
)
DEFAULT_PORT = 7860


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard space`."""
    parser.add_argument(
        "org", metavar="ORG", nargs="?", default=None, help="the Hub user or organisation, e.g. attncard"
    )
    parser.add_argument(
        "--cards",
        type=Path,
        default=None,
        metavar="DIR",
        help="a local cards folder instead of ORG, e.g. cards",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="DIR",
        help="write a Hub Space folder here (a new folder)",
    )
    parser.add_argument(
        "--push",
        type=repo_id,
        default=None,
        metavar="SPACE",
        help="with --output: push the folder to this Hub Space, e.g. attncard/leaderboard, as one commit "
        "(HF_TOKEN: a token with write access to its owner)",
    )
    parser.add_argument("--serve", action="store_true", help="serve the page on this machine until stopped")
    parser.add_argument(
        "--host", default="127.0.0.1", help="with --serve: the address to listen on (default: 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=positive_int,
        default=DEFAULT_PORT,
        help=f"with --serve: the port (default: {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--title", default=None, help="the page's title (default: attncard leaderboard of ORG, or of DIR)"
    )
    parser.add_argument(
        "--interval",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="with --serve and ORG: check the Hub again this often (default: 3600)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --serve: the folder of the page's checks and download cache (default: a temporary one)",
    )
    add_data_dir_argument(parser)
    add_hub_arguments(parser, "a run", "the download of one run")
    parser.add_argument(
        "--deadline",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="with ORG: give up one check of every run after this long (default: 7200)",
    )


def run(args: argparse.Namespace) -> int:
    """Serves the page, or writes (and pushes) the Space folder; exit 0, or 2 with one line on stderr when the
    arguments do not go together, the cards folder holds no copy, the output folder is not new, or the push
    fails (the Space then holds its previous commit).

    Example:
        $ attncard space --cards cards --serve
        checked the cards folder cards: 30 runs verified in 10 groups, 0 refused
        serving http://127.0.0.1:7860 (Ctrl-C stops)
        $ attncard space --cards cards --output space
        wrote space/: app.py, requirements.txt, README.md and cards/ (30 cards copies)
    """
    return run_command(lambda: _space(args))


def _space(args: argparse.Namespace) -> int | None:
    _check_arguments(args)
    title = args.title or (
        f"attncard leaderboard of {args.org}" if args.org else f"attncard leaderboard of {args.cards.name}"
    )
    if args.output is not None:
        _write(args, title)
    if args.serve:
        _serve(args, title)
    return None


def _check_arguments(args: argparse.Namespace) -> None:
    """Every combination that cannot work, refused before anything is checked, written or served."""
    if (args.org is None) == (args.cards is None):
        raise AttncardError(
            "give a Hub organisation (attncard space ORG) or a local cards folder (--cards DIR), one of them"
        )
    if not args.serve and args.output is None:
        raise AttncardError(
            "say what to do: --serve (serve the page here) or --output DIR (write a Space folder)"
        )
    if args.push is not None and args.output is None:
        raise AttncardError("--push pushes the Space folder --output writes; add --output DIR")
    if args.cards is not None:
        for option, value in (
            ("--require-signer", args.require_signer),
            ("--require-key", args.require_key),
            ("--signer-issuer", args.signer_issuer),
            ("--deadline", args.deadline),
            ("--interval", args.interval),
        ):
            if value is not None:
                raise AttncardError(f"{option} applies to ORG only; drop it, or give ORG instead of --cards")
        for option, value in (
            ("--hub-endpoint", args.hub_endpoint),
            ("--hub-timeout", args.hub_timeout),
            ("--hub-deadline", args.hub_deadline),
        ):
            if value is not None and args.push is None:
                raise AttncardError(f"{option} applies to ORG or --push only; drop it, or add --push SPACE")
        if not args.cards.is_dir():
            raise AttncardError(f"{args.cards}: no such folder; pass the cards folder, e.g. --cards cards")
    if args.push is not None:
        from ..publish.push import check_push_setup

        check_push_setup(args.push, args.hub_endpoint)


def _serve_args(args: argparse.Namespace) -> list[str]:
    """What the Space's own `attncard space --serve` is given: where its runs come from and who must have
    signed them (never a token or a path of this machine)."""
    if args.cards is not None:
        return ["--cards", "cards"]
    served = [args.org]
    for option, value in (
        ("--hub-endpoint", args.hub_endpoint),
        ("--require-signer", args.require_signer),
        ("--signer-issuer", args.signer_issuer),
        ("--interval", args.interval),
    ):
        if value is not None:
            served += [option, str(value)]
    if args.require_key is not None:
        raise AttncardError(
            "--require-key names a file of this machine, which a Space does not have; use --require-signer "
            "for a Space, or --serve to serve the page here"
        )
    return served


def _write(args: argparse.Namespace, title: str) -> None:
    from ..space.folder import write_space_folder

    folder = write_space_folder(args.output, title=title, serve_args=_serve_args(args), cards_dir=args.cards)
    copies = len(list((folder / "cards").glob("*/results.json"))) if args.cards is not None else 0
    listed = "app.py, requirements.txt, README.md" + (
        f" and cards/ ({copies} cards copies)" if copies else ""
    )
    print(f"wrote {folder.as_posix()}/: {listed}")
    if args.push is not None:
        from ..space.push import push_space

        commit = push_space(
            folder,
            args.push,
            endpoint=args.hub_endpoint,
            timeout=args.hub_timeout,
            deadline=args.hub_deadline,
        )
        print(f"pushed {folder.as_posix()}/ to the Space {args.push} as commit {commit[:12]}")


def _serve(args: argparse.Namespace, title: str) -> None:
    with contextlib.ExitStack() as stack:
        work_dir = args.work_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="attncard-space-"))
        )
        _serve_from(args, title, work_dir)


def _serve_from(args: argparse.Namespace, title: str, work_dir: Path) -> None:
    from ..space.app import serve
    from ..space.source import DEFAULT_INTERVAL_S, Checker, check_cards, check_hub

    if args.cards is not None:
        check = functools.partial(check_cards, args.cards, data_dir=args.data_dir, work_dir=work_dir)
        checker = Checker(check, f"the cards folder {args.cards.as_posix()}")
    else:
        options = {
            key: value
            for key, value in {
                "endpoint": args.hub_endpoint,
                "data_dir": args.data_dir,
                "require_signer": args.require_signer,
                "signer_issuer": args.signer_issuer,
                "require_key": args.require_key,
                "timeout": args.hub_timeout,
                "deadline": args.hub_deadline,
                "total_deadline": args.deadline,
            }.items()
            if value is not None
        }
        check = functools.partial(check_hub, args.org, work_dir=work_dir, **options)
        checker = Checker(
            check, f"the Hub organisation {args.org}", interval=args.interval or DEFAULT_INTERVAL_S
        )
    board = checker.refresh()
    if board.problem:
        print(f"warning: the first check failed: {board.problem}; the page says so", file=sys.stderr)
    else:
        runs = sum(len(row.seeds) for row in board.rows)
        print(
            f"checked {board.source}: {runs} runs verified in {len(board.rows)} groups, "
            f"{len(board.refused)} refused"
        )
    checker.start()
    server = serve(checker, title=title, host=args.host, port=args.port, cards_dir=args.cards)
    print(f"serving http://{args.host}:{args.port} (Ctrl-C stops)", flush=True)
    try:
        server.run()
    finally:
        checker.stop()
