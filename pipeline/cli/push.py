"""`attncard push RUN_DIR --repo-id ORG/NAME`: pushes a run folder written before, as one commit, tagged."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import positive_float, repo_id, run_command

DESCRIPTION = (
    "Push a run folder written by publish to a Hub model repository: one commit holding every file (and "
    "deleting the repository's other files), or none when the Hub already holds exactly these files; then "
    "tag it run-<started_at>-<results.json sha256[:32]>. Refused when `attncard lint` finds anything, when "
    "the card was rendered for another repository, and when the status is FAIL (unless --allow-fail). "
    "Token: $HF_TOKEN, else `hf auth login`."
)


EPILOG = "example: attncard push runs/minilm-none-sst2 --repo-id attncard/minilm-none-sst2"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard push RUN_DIR --repo-id ORG/NAME [--allow-fail] [--hub-endpoint URL]`."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run folder, e.g. runs/<repo-name>")
    parser.add_argument(
        "--repo-id",
        type=repo_id,
        required=True,
        help="the Hub repository ORG/NAME the card was rendered for (publish --repo-id)",
    )
    add_push_arguments(parser)


def add_push_arguments(group: argparse._ActionsContainer) -> None:
    """The options of a push, shared by `publish --push` and `attncard push`."""
    group.add_argument(
        "--allow-fail",
        action="store_true",
        help="push a run whose status is FAIL (its card says so at the top); refused otherwise",
    )
    group.add_argument(
        "--hub-endpoint",
        default=None,
        metavar="URL",
        help="the Hub to push to (default: $HF_ENDPOINT, else https://huggingface.co)",
    )
    group.add_argument(
        "--hub-timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="give up a Hub request (and retry it) after this long without progress (default: 60)",
    )
    group.add_argument(
        "--hub-deadline",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="give up the whole push after this long, however slowly the Hub answers (default: 1800)",
    )
    group.add_argument(
        "--sign-key",
        type=Path,
        default=None,
        metavar="PEM",
        help="sign the run folder with this elliptic-curve private key before pushing (OpenSSF model "
        "signing, model.sig); downloaders check it with --require-key and the public key",
    )


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: push(args))


def push(args: argparse.Namespace) -> None:
    # The stage is imported when the command runs: --help and argument errors need no torch.
    from ..publish.push import sign_and_push

    sign_and_push(
        args.run_dir,
        args.repo_id,
        allow_fail=args.allow_fail,
        endpoint=args.hub_endpoint,
        timeout=args.hub_timeout,
        deadline=args.hub_deadline,
        sign_key=args.sign_key,
    )
