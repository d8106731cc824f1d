"""What every command shares: one-line argument errors, argument types, and how an error ends a command.

A command is a module of this package with `add_arguments(parser)` and `run(args) -> int`; the library
functions it calls know nothing of argv, stderr or exit codes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.machinery
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ..record.errors import AttncardError, visible
from ..record.results import TrainConfig

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 130


# How a command-line user is told to set what an error's remedy names: for each library keyword (an error's
# `options`), its words in the library's message and the words that name the flag instead.
CLI_REMEDIES: dict[str, tuple[tuple[str, str], ...]] = {
    "endpoint": (
        ("(endpoint=, HF_ENDPOINT)", "(--hub-endpoint, HF_ENDPOINT)"),
        ("(and endpoint=)", "(and --hub-endpoint)"),
    ),
    "deadline": (("(deadline=)", "(--hub-deadline)"),),
    "allow_fail": (("pass allow_fail=True to", "pass --allow-fail (allow_fail=True) to"),),
    "allow_failed": (("allow_failed=True to load", "allow_failed=True (CLI: --allow-fail) to load"),),
    "base_model": (("as base_model=", "as base_model= (CLI: --base-model DIR)"),),
    "repo_id": (
        ("rendered without a repo_id,", "rendered without --repo-id,"),
        ("publish with repo_id=", "publish with --repo-id "),
    ),
}


def cli_message(error: AttncardError) -> str:
    """The error's message for a command-line user: each remedy that names a keyword of the library
    (`endpoint=`, `allow_failed=True`) names the flag that sets it too, or instead ([`CLI_REMEDIES`]).

    Example:
        >>> cli_message(AttncardError("ran past its deadline (deadline=)", options=("deadline",)))
        'ran past its deadline (--hub-deadline)'
    """
    message = str(error)
    for option in error.options:
        for library_words, cli_words in CLI_REMEDIES.get(option, ()):
            message = message.replace(library_words, cli_words)
    return message


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, naming the fix, with exit status 2."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def add_batch_arguments(group: argparse._ArgumentGroup) -> None:
    """`--batch-size`, `--lr` and `--max-length`: the training settings `publish` and `sweep` share (the
    defaults of `TrainConfig`)."""
    defaults = TrainConfig()
    group.add_argument(
        "--batch-size",
        type=positive_int,
        default=defaults.batch_size,
        help="training rows per step (default: %(default)s)",
    )
    group.add_argument(
        "--lr", type=positive_float, default=defaults.lr, help="learning rate (default: %(default)s)"
    )
    group.add_argument(
        "--max-length",
        type=positive_int,
        default=defaults.max_length,
        help="tokens per row, longer rows are truncated (default: %(default)s)",
    )


def add_data_dir_argument(group: argparse._ArgumentGroup) -> None:
    """`--data-dir`, as `publish` and `sweep` read it."""
    group.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder of GLUE TSV files (SST-2/dev.tsv, …); default: $GLUE_DIR, else the Hub",
    )


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive finite number")
    return value


def repo_id(text: str) -> str:
    try:
        validate_repo_id(text)
    except HFValidationError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a Hub repo id; write it as ORG/NAME") from None
    if "/" not in text:
        raise argparse.ArgumentTypeError(f"'{text}' has no owner; write it as ORG/NAME")
    return text


def add_hub_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, run: str, download: str
) -> None:
    """The options that say where runs come from and who must have signed them, shared by download, verify
    and `summary --hub`: `run` names what a signature check refuses ("the run"), `download` what
    --hub-deadline bounds ("the whole download")."""
    parser.add_argument(
        "--hub-endpoint",
        default=None,
        metavar="URL",
        help="the Hub to download from (default: $HF_ENDPOINT, else https://huggingface.co)",
    )
    signer = parser.add_mutually_exclusive_group()
    signer.add_argument(
        "--require-signer",
        default=None,
        metavar="IDENTITY",
        help=f"refuse {run} unless model.sig is a Sigstore signature by IDENTITY, e.g. "
        "https://github.com/ORG/REPO/.github/workflows/publish.yml@refs/tags/v1; ending in @refs/tags/*, "
        "that workflow at any tag",
    )
    signer.add_argument(
        "--require-key",
        type=Path,
        default=None,
        metavar="PEM",
        help=f"refuse {run} unless model.sig is a signature by this public key",
    )
    parser.add_argument(
        "--signer-issuer",
        default=None,
        metavar="URL",
        help="the OIDC issuer of --require-signer (default: https://token.actions.githubusercontent.com)",
    )
    parser.add_argument(
        "--hub-timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="give up a Hub request after this long without progress (default: 60)",
    )
    parser.add_argument(
        "--hub-deadline",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help=f"give up {download} after this long, however the server trickles (default: 1800)",
    )


def run_name(text: str) -> str:
    """A run folder's name, which is also a Hub repository's NAME: letters, digits, '-', '_' and '.'."""
    try:
        validate_repo_id(text)
    except HFValidationError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a repository name; use letters, digits, '-', '_' and '.', "
            "e.g. minilm-none-sst2-seed1"
        ) from None
    if "/" in text:
        raise argparse.ArgumentTypeError(
            f"'{text}' names an owner; give the NAME alone, or use --repo-id ORG/NAME"
        )
    return text


class _VisibleFormatter(logging.Formatter):
    """A log line with its control characters shown as escapes ([`visible`]): a record may quote a server."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))


@contextlib.contextmanager
def progress_on_stderr() -> Iterator[None]:
    """Shows the library's progress (its `logging` INFO records) on stderr while a command runs, one line
    each, control characters shown as escapes; the push's lines are prefixed `push: `."""
    handlers = []
    for name, prefix in (("attncard.pipeline.publish.push", "push: "), ("attncard.pipeline", "")):
        logger = logging.getLogger(name)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_VisibleFormatter(f"{prefix}%(message)s"))
        handlers.append((logger, handler, logger.level, logger.propagate))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    logging.getLogger("attncard.pipeline.publish.push").propagate = False  # its own handler, not both
    try:
        yield
    finally:
        for logger, handler, level, propagate in handlers:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


def shadowing_folder_warning(folder: str | os.PathLike | None = None) -> str | None:
    """A warning when Python started in `folder` (default: the current one) would import a folder
    `attncard/` there in place of the attncard running this command; None when it would import this one.

    Python puts the folder it starts in first on `sys.path` (`python -c`, the REPL, `python script.py`
    beside it), and a folder `attncard/` there wins in two cases. With `__init__.py` it is a regular package,
    and comes first. Without, it is a namespace package: an install from a wheel (a regular package in
    site-packages) still wins over it, but an editable install (`pip install -e .`, `make install`) does not,
    since setuptools' editable finder is asked only after the path's (pypa/setuptools#3557). There,
    `from attncard import load_verified` fails with "cannot import name 'load_verified' from 'attncard'
    (unknown location)", typically in the folder that holds a clone named attncard. The console scripts
    themselves are not affected: their folder, not the current one, is first on their path.

    Example:
        $ mkdir -p work/attncard && cd work && attncard modules  # attncard installed by `make install`
        warning: ./attncard is a folder without __init__.py that Python started in this folder imports in …
    """
    folder = Path.cwd() if folder is None else Path(folder)
    if not (folder / "attncard").is_dir():
        return None
    # What `python` started in `folder` searches: that folder, then this process's path past its own first
    # entry (the console script's folder). None: nothing there, so the editable finder finds this attncard.
    spec = importlib.machinery.PathFinder.find_spec("attncard", [str(folder), *sys.path[1:]])
    running = Path(sys.modules["attncard"].__file__ or "").resolve()
    if spec is None or (spec.origin is not None and Path(spec.origin).resolve() == running):
        return None
    fix = "run Python from another folder, or rename that folder"
    if spec.origin is None:  # a namespace package
        return (
            "./attncard is a folder without __init__.py that Python started in this folder imports in place "
            "of the installed attncard (an editable install is found after it), so `from attncard import "
            "load_verified` there fails with \"cannot import name 'load_verified' from 'attncard' (unknown "
            f"location)\"; {fix}"
        )
    return (
        f"Python started in this folder imports {spec.origin} in place of the attncard running this command "
        f"({running}); {fix}"
    )


def run_command(action: Callable[[], int | None]) -> int:
    """Runs a command's action: an [`AttncardError`] becomes one line on stderr, its remedy naming the flags
    ([`cli_message`]), its control characters shown as escapes (see [`visible`]), and exit status 2; Ctrl-C
    exit status 130; otherwise the action's status (0 when it returns None). It first warns, on stderr, when
    Python started in the current folder would not import this attncard (see [`shadowing_folder_warning`]):
    the snippets it prints would fail there."""
    if (warning := shadowing_folder_warning()) is not None:
        print(f"warning: {visible(warning)}", file=sys.stderr)
    try:
        with progress_on_stderr():
            status = action()
    except AttncardError as error:
        # A message may quote a run or a server (an HTTP error body, a results.json key): one line, its
        # escape sequences and bidi characters shown, not obeyed.
        print(f"error: {visible(cli_message(error))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if status is None else status
