"""The text formats of results.json: what each text a run records may hold, and the check of them all.

Each text field of the schema declares its format where it is defined, as peft declares a field's help:
`field(metadata={"text": SHA256})` (the format of a text, of each text of a list, of each value of a dict),
`"text_keys"` (of each key of a dict), or `"text_walk"` (a function that yields the texts of a value of no
fixed shape, such as a module's config). `"text"` may also be a function of the whole record that returns
the format, for a format that depends on another field or on this install. [`check_text_formats`] walks the
record and checks every declared text, so that a forger's markup, HTML, link or shell stops there, before
anything shows it; [`check_names`] then checks that the names it holds agree (labels, a module's package).

Not declared: the texts attncard derives again and compares (the usage snippet, the command, the
verification's reasons, the module's citation, BibTeX and config help, the paired verdict's method), which
pipeline.checks.integrity and pipeline.verify.download check.
"""

from __future__ import annotations

import dataclasses
import re
import typing
import unicodedata
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from .errors import ResultsError
from .json_strict import MAX_INT, json_kind

# The characters of a sha (a commit, a sha256) a message shows: enough to tell any two apart.
SHA_PREFIX = 12
# A git commit (or blob) id: 40 lowercase hex digits; match with `fullmatch`.
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
MAX_PROSE_CHARS = 2048


@dataclass(frozen=True)
class TextFormat:
    """A format a text field of results.json must have: what it is, in words, and the check.

    Example:
        >>> HUB_ID.check("org/name"), HUB_ID.check("org/name/../x"), HUB_ID.name
        (True, False, 'a Hub repository id ORG/NAME')
    """

    name: str
    check: typing.Callable[[str], bool]


_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_REVISION_RE = re.compile(r"^(sha256:[0-9a-f]{64}|[0-9a-f]{40})$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_GIT_COMMIT_RE = re.compile(r"^([0-9a-f]{40}(\+dirty)?|unknown)$")
_OPTIONAL_SHA256_RE = re.compile(r"^([0-9a-f]{64})?$")
# A distribution name (PEP 508), or "" when not recorded.
_PACKAGE_RE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?)?$")
# A file of a run folder: a relative POSIX path of at most four plain names (no `.`, `..`, empty or absolute
# part); which files a run may hold is pipeline.checks.integrity's to say.
_PATH_PART = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
_RUN_PATH_RE = re.compile(rf"^(?:\.?{_PATH_PART}/){{0,3}}{_PATH_PART}$")
# A Hub repository name, and an id `org/name` (huggingface_hub's rules, 96 characters each).
_HUB_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_HUB_NAME_RE = re.compile(rf"^{_HUB_NAME}$")
_HUB_ID_RE = re.compile(rf"^{_HUB_NAME}/{_HUB_NAME}$")
_MODEL_NAME_RE = re.compile(rf"^(?:{_HUB_NAME}/)?{_HUB_NAME}$")  # an alias, a Hub id or a folder's name
_LABEL_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?$")
_TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)?$")
_DEVICE_RE = re.compile(r"^(cpu|cuda|mps|xpu|npu|hpu)(:\d{1,2})?$")
# A CPU's or GPU's name as the kernel or the driver give it: "Intel(R) Xeon(R) CPU @ 2.20GHz", "NVIDIA H200".
_MACHINE_NAME_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9 ().,@+_-]{0,127})?$")
_PLATFORM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_PYTHON_RE = re.compile(r"^\d{1,2}\.\d{1,3}\.\d{1,3}([a-z]{1,5}\d{0,3})?\+?$")
_LICENSE_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,63}$")
_LICENSE_NAME_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._+-]{0,63})?$")
_LINK_RE = re.compile(r"^(https://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~%/+-]*)?)?$")
_SCHEDULE_RE = re.compile(r"^[a-z][a-z_]{0,63}$")
_MIXED_PRECISION_RE = re.compile(r"^(no|fp16|bf16|fp8)$")
_TARGET_MODULE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.]{0,127}$")
_DTYPE_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_STAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ()_-]{0,63}$")
_DATASET_ID_RE = re.compile(r"^(nyu-mll/glue|glue-tsv)$")
# A word of a module's config or stats ("q", "output.dense", "Linear"), or a key of them.
_WORD_RE = re.compile(r"^[A-Za-z0-9_.+-]{0,64}$")
# The trained model as torch prints it, shown in a fenced code block: no backtick can close the fence, and
# nothing else of Markdown or HTML takes effect there.
_PRINTOUT_RE = re.compile(r"^[A-Za-z0-9 \n(),.:=_\[\]'\"+/-]{0,262144}$")
# Prose a run records that is neither a name nor attncard's own text (a formula, a traced operation, the
# error stock peft raised): printable characters on one line, without the characters that make Markdown or
# HTML markup (`<>&*\`|$~!#\\`), a link (`](`, `]:`, `://`, `www.`) or emphasis (`_` outside a word).
_PROSE_FORBIDDEN_RE = re.compile(r"[<>&*`|$~!#\\]|\]\(|\]:|\]\[|://|www\.|(?<![^\W_])_|_(?![^\W_])")
# In a name, `_` must stand inside a word, as in `max_length`: `-_x_-` would be emphasis in Markdown.
_LOOSE_UNDERSCORE_RE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")


def _pattern(name: str, pattern: re.Pattern) -> TextFormat:
    return TextFormat(
        name, lambda value: bool(pattern.match(value)) and not _LOOSE_UNDERSCORE_RE.search(value)
    )


def is_prose(value: str) -> bool:
    """Whether a text is one line of plain prose: printable, at most `MAX_PROSE_CHARS` characters, nothing of
    Markdown's or HTML's (see `PROSE`)."""
    return (
        len(value) <= MAX_PROSE_CHARS
        and value.isprintable()
        and not any(unicodedata.category(char).startswith(("C", "Z")) and char != " " for char in value)
        and not _PROSE_FORBIDDEN_RE.search(value)
    )


def is_version(value: str) -> bool:
    """A version as PEP 440 has it (what pip installs), written as such: no spaces, options or shell.

    Example:
        >>> is_version("2.5.1+cu121"), is_version("2.5; rm -rf ~")
        (True, False)
    """
    try:
        Version(value)
    except InvalidVersion:
        return False
    return bool(re.fullmatch(r"[A-Za-z0-9.+!_-]{1,64}", value))


def empty_or(text_format: TextFormat) -> TextFormat:
    """`text_format` for a field left empty where it does not apply: "" passes, and a message names the
    format alone (an empty field is not checked, as if absent)."""
    return TextFormat(text_format.name, lambda value: value == "" or text_format.check(value))


# Hashes, revisions and commits.
SHA256 = TextFormat("a sha256 (64 lowercase hex digits)", _SHA256_RE.match)
OPTIONAL_SHA256 = TextFormat("a sha256 (64 lowercase hex digits) or empty", _OPTIONAL_SHA256_RE.match)
REVISION = TextFormat("a commit sha or sha256:<64 hex digits>", _REVISION_RE.match)
GIT_COMMIT = TextFormat("a commit sha (with +dirty) or unknown", _GIT_COMMIT_RE.match)
# Names.
LOWERCASE_NAME = _pattern("a lowercase name", _NAME_RE)
HUB_NAME = _pattern("a Hub repository name (letters, digits, . _ -)", _HUB_NAME_RE)
HUB_ID = _pattern("a Hub repository id ORG/NAME", _HUB_ID_RE)
MODEL_NAME = _pattern("an alias, a Hub id or a folder's name", _MODEL_NAME_RE)
MODEL_ID = _pattern("a Hub id or a folder's name", _MODEL_NAME_RE)
LABEL = _pattern("a label name (letters, digits, _ -)", _LABEL_RE)
WORD = _pattern("a word (letters, digits, . _ + -)", _WORD_RE)
STAGE = _pattern("a stage name", _STAGE_RE)
DTYPE = _pattern("a dtype", _DTYPE_RE)
SCHEDULE = _pattern("a schedule's name", _SCHEDULE_RE)
TARGET_MODULE = TextFormat("a module name", _TARGET_MODULE_RE.match)
DATASET_ID = TextFormat("nyu-mll/glue or glue-tsv", _DATASET_ID_RE.match)
MODULE_PACKAGE = TextFormat("a package name (letters, digits, . _ -)", _PACKAGE_RE.match)
PACKAGE_NAME = TextFormat("a package name", _PACKAGE_RE.match)
LICENSE = TextFormat("a licence id (a-z 0-9 . + -)", _LICENSE_RE.match)
LICENSE_NAME = _pattern("a licence name", _LICENSE_NAME_RE)
HTTPS_URL = TextFormat("an https URL", _LINK_RE.match)
# Files.
FILE_NAME = TextFormat("a file name", _RUN_PATH_RE.match)
RUN_FILE = TextFormat("a file of a run folder", _RUN_PATH_RE.match)
GLUE_FILE = TextFormat("a file in a GLUE folder", _RUN_PATH_RE.match)
# Versions, times and machines.
VERSION = TextFormat("a PEP 440 version", is_version)
OPTIONAL_VERSION = TextFormat("a PEP 440 version or empty", lambda value: value == "" or is_version(value))
ATTNCARD_VERSION = TextFormat(
    "a PEP 440 version or unknown", lambda value: value == "unknown" or is_version(value)
)
PYTHON_VERSION = TextFormat("a Python version", _PYTHON_RE.match)
PLATFORM = TextFormat("a platform name", _PLATFORM_RE.match)
TIME = TextFormat("an ISO 8601 time", _TIME_RE.match)
DEVICE = TextFormat("a torch device", _DEVICE_RE.match)
MIXED_PRECISION = TextFormat("no, fp16, bf16 or fp8", _MIXED_PRECISION_RE.match)
MACHINE_NAME = TextFormat(
    "a CPU's or GPU's name (letters, digits, spaces and ( ) . , @ + _ -)", _MACHINE_NAME_RE.match
)
GPU_NAME = TextFormat("a GPU's name", _MACHINE_NAME_RE.match)
# Free text.
PRINTOUT = TextFormat("a torch module printout", _PRINTOUT_RE.match)
PROSE = TextFormat(
    f"one line of plain text (at most {MAX_PROSE_CHARS} characters, none of Markdown's or HTML's)", is_prose
)
OPTIONAL_PROSE = TextFormat(PROSE.name + " or empty", lambda value: value == "" or is_prose(value))

TextItem = tuple[str, str, TextFormat]  # where in results.json, the text, the format it must have


def value_words(where: str, value: typing.Any, depth: int = 0) -> typing.Iterator[TextItem]:
    """The words of a module's config or stats (numbers, flags, short words, lists and objects of them,
    six levels deep at most), each checked as a word; anything else is refused (a `"text_walk"`).

    Example:
        >>> [(where, word) for where, word, _ in value_words("config", {"target": ["q"], "r": 8})]
        [("config key 'target'", 'target'), ('config.target[0]', 'q'), ("config key 'r'", 'r')]
    """
    if isinstance(value, str):
        yield where, value, WORD
    elif isinstance(value, dict) and depth < 6:
        for key, item in value.items():
            yield f"{where} key {key!r}", key, WORD
            yield from value_words(f"{where}.{key}", item, depth + 1)
    elif isinstance(value, list) and depth < 6:
        for i, item in enumerate(value):
            yield from value_words(f"{where}[{i}]", item, depth + 1)
    elif (
        value is None or isinstance(value, bool | float) or (isinstance(value, int) and abs(value) <= MAX_INT)
    ):
        return
    else:
        raise ResultsError(f"results.json: {where} holds {json_kind(value)}, which is no figure or word")


def text_fields(record: typing.Any, root: typing.Any = None, where: str = "") -> typing.Iterator[TextItem]:
    """Every text of a record (a dataclass of the schema, and those it holds) that its fields declare a
    format for, in the order of the fields, with where it is (`module.trace[0].op`, `manifest key 'x'`).

    Args:
        record: the dataclass to walk.
        root: the whole record, which a format that is a function is given; `record` itself when None.
        where: the path of `record` in results.json; "" for the whole record.

    Example:
        >>> from attncard.pipeline.record.results import OfficialMetric
        >>> [(where, value) for where, value, _ in text_fields(OfficialMetric("f1", 0.8, "equivalent"))]
        [('name', 'f1'), ('positive_label', 'equivalent')]
    """
    root = record if root is None else root
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        path = f"{where}.{f.name}" if where else f.name
        if value is None:
            continue
        if (walk := f.metadata.get("text_walk")) is not None:
            yield from walk(path, value)
            continue
        text_format = f.metadata.get("text")
        if callable(text_format):
            text_format = text_format(root)
        key_format = f.metadata.get("text_keys")
        if isinstance(value, dict):
            for key, item in value.items():
                if key_format is not None:
                    yield f"{path} key {key!r}", key, key_format
                yield from _item_texts(item, f"{path}.{key}", text_format, root)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                # A list of texts is named as a whole (`dataset.label_names`), of records item by item.
                yield from _item_texts(item, f"{path}[{i}]" if _is_record(item) else path, text_format, root)
        else:
            yield from _item_texts(value, path, text_format, root)


def _is_record(value: typing.Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _item_texts(
    item: typing.Any, where: str, text_format: TextFormat | None, root: typing.Any
) -> typing.Iterator[TextItem]:
    if _is_record(item):
        yield from text_fields(item, root, where)
    elif text_format is not None and isinstance(item, str):
        yield where, item, text_format


def check_text_formats(record: typing.Any) -> None:
    """Raises [`ResultsError`] on the first text of `record` (in `text_fields`' order) that does not have its
    declared format, naming where it is, what it holds (80 characters at most) and the format.

    Example:
        >>> from attncard.pipeline.record.results import OfficialMetric
        >>> check_text_formats(OfficialMetric("f1", 0.8, "<b>equivalent</b>"))
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.ResultsError: results.json: positive_label is '<b>equivalent</b>', ...
    """
    for where, value, text_format in text_fields(record):
        if not text_format.check(value):
            raise ResultsError(f"results.json: {where} is {value[:80]!r}, which is not {text_format.name}")


__all__ = [
    "COMMIT_RE",
    "MAX_PROSE_CHARS",
    "SHA_PREFIX",
    "TextFormat",
    "check_text_formats",
    "empty_or",
    "is_prose",
    "is_version",
    "text_fields",
    "value_words",
]
