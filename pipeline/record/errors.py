"""Errors a user can act on.

Every error raised on bad input derives from [`AttncardError`]; its message is one line that says what
is wrong and what to do. The CLI prints that line and exits with status 2, without a traceback.
"""

import unicodedata


def first_line(error: BaseException) -> str:
    """The first line of an error's message (its class name when it has none), for one-line messages.

    Example:
        >>> first_line(ValueError("bad header\\nmore detail"))
        'bad header'
    """
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


# Characters that are not text to a terminal or a Markdown reader: control characters (C0, DEL, C1), format
# characters (bidi overrides and isolates such as U+202E, zero-width spaces and joiners), surrogates, private
# use and unassigned code points (categories C*), and line and paragraph separators.
_INVISIBLE_CATEGORIES = ("C", "Zl", "Zp")


def visible(text: str, limit: int | None = None) -> str:
    r"""Text that came from a run or a server, as one line whose every character shows: each control, format
    or separator character (ESC, a line break, DEL, U+202E, U+200B, …) written as its escape (`\x1b`,
    `\n`, `\u202e`), so that no ANSI sequence, forged line or reversed text takes effect in a terminal.

    Args:
        text: the text, e.g. an error message that quotes a server's answer.
        limit: the most characters to show; a longer text is cut and ends with `…`. None: no limit.

    Returns:
        The text with every such character escaped; other text, `×` or `é` included, as it was.

    Example:
        >>> print(visible("\x1b[8mhidden\nPASS \u202etxt.exe"))
        \x1b[8mhidden\nPASS \u202etxt.exe
        >>> visible("a" * 10, limit=4)
        'aaa…'
    """
    shown = "".join(
        _escape(char) if unicodedata.category(char).startswith(_INVISIBLE_CATEGORIES) else char
        for char in text
    )
    if limit is not None and len(shown) > limit:
        return shown[: limit - 1] + "…"
    return shown


def _escape(char: str) -> str:
    code = ord(char)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if named:
        return named
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


# What Markdown (CommonMark, GFM) and the HTML it may hold would read as markup, each escaped to show as is.
_MARKDOWN_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "~": "\\~",
        "[": "\\[",
        "]": "\\]",
        "(": "\\(",
        ")": "\\)",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
    }
)


def markdown_text(text: str, limit: int | None = None) -> str:
    r"""Text that came from a run or a server, for a Markdown file (a list item or a table cell): made
    [`visible`] (one line, control characters escaped), then every character Markdown or HTML would read as
    markup escaped, so that no link, emphasis, tag, table-breaking `|` or line break of the text takes
    effect and a reader sees it as it was sent.

    Args:
        text: the text, e.g. the reason a run was refused.
        limit: the most characters of the text to show, before escaping (see [`visible`]).

    Returns:
        The escaped text.

    Example:
        >>> print(markdown_text("<a href=x>[click](http://evil)</a> | **x**\x1b[31m"))
        &lt;a href=x&gt;\[click\]\(http://evil\)&lt;/a&gt; \| \*\*x\*\*\\x1b\[31m
    """
    return visible(text, limit).translate(_MARKDOWN_ESCAPES)


class AttncardError(Exception):
    """Base class of the errors a user can fix: bad input, a missing file, a model that cannot be had.

    The message is the library's: its remedy names keyword arguments (`endpoint=`, `allow_failed=True`),
    never a command-line flag. The command line adds the flags: for each keyword in `options` it words the
    remedy with the flag that sets it (`pipeline.cli.common.cli_message`), as huggingface_hub's
    `cli/_errors.py` does for its own errors.

    Args:
        message: one line: what is wrong and what to do.
        options: the keyword arguments the remedy names, e.g. `("endpoint",)`; default: the class's.
        **fields: what the error is about, each kept as an attribute of the same name and in `fields`:
            `repo_id`, `revision`, `endpoint`, `file`, `figure`, ….

    Example:
        >>> error = AttncardError("no tag v2 on o/n; pass a revision it has", repo_id="o/n", revision="v2")
        >>> error.revision, error.fields
        ('v2', {'repo_id': 'o/n', 'revision': 'v2'})
    """

    options: tuple[str, ...] = ()

    def __init__(self, *args: object, options: tuple[str, ...] | None = None, **fields: object):
        super().__init__(*args)
        if options is not None:
            self.options = tuple(options)
        self.fields = fields
        for name, value in fields.items():
            setattr(self, name, value)


class UnknownNameError(AttncardError, ValueError):
    """An unknown model alias, module or task name was given.

    Example:
        >>> raise UnknownNameError("task", "sst3", ["cola", "sst2"])
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.UnknownNameError: unknown task 'sst3'; valid tasks: cola, sst2
    """

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind, self.name, self.valid = kind, name, list(valid)
        super().__init__(f"unknown {kind} '{name}'; valid {kind}s: {', '.join(valid)}")


class UnknownModuleError(UnknownNameError):
    """No installed attention module has this name (built in, or registered by a package through the
    `attncard.modules` entry-point group)."""

    def __init__(self, name: str, valid: list[str]):
        super().__init__("module", name, valid)


class ModulePluginError(AttncardError):
    """A module an installed package registers (entry-point group `attncard.modules`) cannot be used: it does
    not import, is not an [`AttentionModule`], is registered under another name than its own, breaks the
    module contract, or two packages register the same name. Raised only when that module is asked for."""


class UnsupportedModelError(AttncardError, ValueError):
    """The model's family has no known attention layout, so no attention module can be installed in it."""


class DataError(AttncardError):
    """A data set could not be read: missing file, missing column, unknown label, empty split."""


class ModelLoadError(AttncardError):
    """A model or tokenizer could not be loaded (offline, missing folder, unsupported architecture)."""


class ResultsError(AttncardError):
    """A results.json that cannot be read: invalid JSON, unknown schema version, missing fields."""


class NonFiniteNumberError(ResultsError):
    """A JSON file of a run holds NaN or an infinity, which strict JSON has no words for."""

    def __init__(self, name: str):
        super().__init__(f"{name} is not a number")
        self.name = name


# --- downloading a published run ---------------------------------------------------------------------------


class DownloadError(AttncardError):
    """A published run could not be downloaded, checked or loaded."""


class RepoNotFoundError(DownloadError):
    """The Hub has no such repository, or it is private or gated and the token cannot read it."""


class RevisionNotFoundError(DownloadError):
    """The repository has no such branch, tag or commit."""


class HubUnreachableError(DownloadError):
    """The Hub could not be reached (offline, no connection) and the run is not in the local cache."""


class IntegrityError(DownloadError):
    """A file of the run is missing, differs from its manifest sha256, or is not part of the run."""


class UnknownSchemaError(DownloadError, ResultsError):
    """results.json has a schema version this attncard cannot read."""


class FailedCheckpointError(DownloadError):
    """The run's status is FAIL and loading it anyway was not asked for (`allow_failed=True`)."""

    options = ("allow_failed",)


class UnsafeFormatError(DownloadError):
    """The run holds pickle weights (.bin, .pt, …), which attncard never loads."""


class IncompatibleRunError(DownloadError):
    """The run cannot be rebuilt here: its base model, module or adapter differ from what this machine has."""

    options = ("base_model",)


class ModuleNotInstalledError(IncompatibleRunError):
    """The run's attention module comes from a package that is not installed here; the message names the
    package and version to install. attncard never installs anything itself."""


# --- signing a run folder ----------------------------------------------------------------------------------


class SigningError(AttncardError):
    """A run folder could not be signed: the key is missing, unreadable or unsupported, or the folder is not
    a run folder."""


class SignatureError(DownloadError):
    """A run's signature (model.sig) is missing where one is required, does not verify, or was made by
    another key or identity than the one required."""


# --- talking to the Hub ------------------------------------------------------------------------------------


class InsecureEndpointError(AttncardError):
    """The Hub endpoint is not one attncard sends a token to: not an https URL (plain http only to loopback).

    Raised before any request is made.
    """


class HubDeadlineError(AttncardError):
    """A push or a download ran past its overall deadline: a stalled or trickling server, a long wait.

    Not an `OSError` or an `httpx2` error on purpose: neither huggingface_hub nor attncard retries it.
    """


class HubNoAnswerError(AttncardError):
    """The Hub endpoint gave no answer to a request (connection refused, or no status line in time) and is not
    asked again: a server that never answered is not worth retries, nor is a download's listing worth five
    timeouts.

    Not an `OSError` or an `httpx2` error on purpose: huggingface_hub does not retry it.
    """


class HubAnswerError(AttncardError):
    """A Hub answer attncard will not read: larger than its cap, or compressed although the client asked for
    `identity` (a compression bomb). Raised before the answer is parsed or a byte of it is written."""


# --- publishing and pushing --------------------------------------------------------------------------------


class BaselineError(AttncardError):
    """The dense baseline named or found for a paired verdict is not one: another setup, or files that do not
    check."""


class CardLintError(AttncardError):
    """The rendered card has a finding of `attncard lint`: it is not written, let alone pushed."""


class PushError(AttncardError):
    """A run folder could not be pushed to the Hub; the message says what happened and what to do."""


class PushRefusedError(PushError):
    """The folder is not fit to be pushed (not a run folder, lint findings, FAIL, another repository's card);
    nothing was sent to the Hub."""


class PushConflictError(PushError):
    """Someone else pushed to the repository while this push ran; this push committed nothing."""
