"""`attncard download REPO [--revision R] [--expect-sha256 H] [--allow-fail] [--output DIR] …`: downloads
a published run and checks it (`pipeline.verify.download`); prints its status and where the checked files
are."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..record.errors import visible
from .common import EXIT_OK, add_hub_arguments, run_command

if TYPE_CHECKING:  # the stage imports torch: the command imports it when it runs
    from ..verify.download import DownloadOptions

DESCRIPTION = (
    "Download a published run from the Hub and check it: every file against its manifest "
    "(sha256), only files a run folder holds, its results.json field by field, its verification and card "
    "against their recomputation, and its status; no weights are loaded and no code is run."
)
EPILOG = "example: attncard download attncard/minilm-none-sst2 --revision v1 --output runs/minilm"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard download`."""
    parser.add_argument("repo", help="Hub repository ORG/NAME (or a local run folder, to check it)")
    add_run_arguments(parser)
    parser.add_argument("--allow-fail", action="store_true", help="accept a run whose status is FAIL")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="copy the checked files into this new folder (default: leave them in the download folder)",
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say which run to fetch and what it must be, shared by download and verify."""
    parser.add_argument("--revision", default=None, help="branch, tag or commit sha (default: main)")
    parser.add_argument(
        "--expect-sha256",
        default=None,
        metavar="SHA256",
        help="refuse any results.json but this one: its sha256 (at least 32 hex digits), e.g. from "
        "cards/<run>/results.json; a run tag run-…-<digest> carries it already",
    )
    add_hub_arguments(parser, "the run", "the whole download")


def run_options(args: argparse.Namespace) -> DownloadOptions:
    """The [`DownloadOptions`] of download_verified / reverify that `add_run_arguments` parsed."""
    return {
        "endpoint": args.hub_endpoint,
        "expected_sha256": args.expect_sha256,
        "require_signer": args.require_signer,
        "signer_issuer": args.signer_issuer,
        "require_key": args.require_key,
        "timeout": args.hub_timeout,
        "deadline": args.hub_deadline,
    }


def run(args: argparse.Namespace) -> int:
    """Prints the run's status on stderr and the folder of its checked files on stdout; exit 0, or 2 with one
    line on an error.

    Example:
        $ attncard download attncard/minilm-none-sst2 --output runs/minilm
        PASS_NO_COMPRESSION: attncard/minilm-none-sst2@3f1c2a9e0b7d, accuracy 0.7913 on 872 rows; …
        runs/minilm
    """
    return run_command(lambda: _download(args))


def _download(args: argparse.Namespace) -> int:
    # The stage is imported when the command runs: --help and argument errors need no torch.
    from ..verify.download import download_to, download_verified

    options = run_options(args)
    if args.output is None:
        files = download_verified(args.repo, args.revision, args.allow_fail, **options)
        location = files.folder
    else:
        files, location = download_to(args.repo, args.revision, args.allow_fail, args.output, options)
    verification = files.results.verification
    line = (
        f"{verification.status.value}: {files.source}, accuracy {verification.accuracy:.4f} on "
        f"{verification.n} rows; every file matches its manifest, and its figures and card their "
        f"recomputation; {files.signature}"
    )
    print(visible(line), file=sys.stderr)  # model.sig's claims and the source come from the run
    print(location)
    return EXIT_OK
