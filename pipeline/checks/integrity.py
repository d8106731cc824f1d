"""What a downloaded run folder's files must be before anything in it is loaded or read further.

A run folder from a Hub, a mirror or a disk is hostile until checked. This module checks its files and what
they *say*, and imports no torch, transformers or peft: `attncard verify --predictions` runs without them.

- [`read_checked_files`]: results.json (against an expected sha256, when given) field by field, no pickle,
  every file against the manifest in results.json ([`check_files`]), and [`check_run_files`]: the folder
  holds only files a run folder defines (no `.py`, nothing a loader would pick up by name), and
  `config.json` / `tokenizer_config.json` name no remote code (`auto_map`) and a model family attncard
  loads. No code from a repository ever runs. ([`pipeline.verify.download`] checks `adapter_config.json` with
  peft's `LoraConfig` before it loads the weights.)
- [`check_run_tag`]: results.json is the file the run tag asked for names (its 128-bit digest).

What the files *say* is checked next: the record's figures ([`pipeline.checks.figures`]), the card and its
plots ([`pipeline.checks.card_render`]).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...modules.base import FAMILIES
from ..card.model_index import LICENSE_FILE
from ..record.errors import (
    DownloadError,
    IncompatibleRunError,
    IntegrityError,
    ResultsError,
    UnknownSchemaError,
    UnsafeFormatError,
)
from ..record.manifest import (
    CARD_FILE,
    MAX_CONFIG_BYTES,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    SECOND_PREDICTIONS_FILE,
    SIGNATURE_FILE,
    WEIGHTS_SUFFIX,
    check_manifest,
    is_transport_path,
    sha256_file,
)
from ..record.results import Results
from ..record.run_names import RUN_TAG_DIGEST_HEX, RUN_TAG_RE, run_tag
from ..record.text import SHA_PREFIX
from ..scoring.tasks import TASKS

ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG_FILE = "adapter_config.json"
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# Every file a run folder may hold: what publish writes, nothing else. A loader picks up optional files by
# name (special_tokens_map.json, added_tokens.json, *.py through auto_map, …), so an unknown file is refused
# even when the manifest lists it.
RUN_FILES = frozenset(
    {
        ADAPTER_WEIGHTS_FILE,
        ADAPTER_CONFIG_FILE,
        CONFIG_FILE,
        CARD_FILE,
        RESULTS_FILE,
        SIGNATURE_FILE,
        LICENSE_FILE,
        # Checked by pipeline.checks.predictions; absent in runs written before it was recorded.
        PREDICTIONS_FILE,
        # The second evaluated split's predictions (MNLI's predictions_validation_mismatched.csv).
        *(
            SECOND_PREDICTIONS_FILE.format(split=spec.second_split)
            for spec in TASKS.values()
            if spec.second_split
        ),
        "tokenizer.json",
        TOKENIZER_CONFIG_FILE,
        "chat_template.jinja",
    }
)
# Plots at the top (scaling.png, spans.png, …) and the Hub's evaluation results, .eval_results/<task>.yaml.
RUN_FILE_PATTERNS = (re.compile(r"^[a-z0-9_]+\.png$"), re.compile(r"^\.eval_results/[a-z0-9_]+\.yaml$"))
# The files every run folder must list in its manifest: without them there is nothing to rebuild or check.
REQUIRED_FILES = (ADAPTER_WEIGHTS_FILE, ADAPTER_CONFIG_FILE, CONFIG_FILE, CARD_FILE)
# Pickle-based weight formats: torch.load on them can run arbitrary code. They are refused unopened.
UNSAFE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# An expected results.json digest: its full sha256, or at least the 128 bits a run tag carries.
_EXPECTED_SHA256_RE = re.compile(rf"^[0-9a-f]{{{RUN_TAG_DIGEST_HEX},64}}$")
# Keys that make transformers import code named by the repository.
REMOTE_CODE_KEYS = ("auto_map", "custom_pipelines")


def check_run_files(folder: Path, names: list[str], where: str) -> None:
    """Refuses a run folder holding a file publish does not write, or configs that name remote code.

    Args:
        folder: the run folder.
        names: its files, as POSIX paths relative to it (the manifest's keys and results.json).
        where: the run, for messages.

    Raises:
        [`IntegrityError`]: an unknown file, or `auto_map`.
        [`IncompatibleRunError`]: a model type outside [`FAMILIES`].
    """
    unknown = sorted(
        name for name in names if name not in RUN_FILES and not any(p.match(name) for p in RUN_FILE_PATTERNS)
    )
    if unknown:
        code = [name for name in unknown if name.endswith(".py")]
        what = f"{code[0]} is Python code" if code else f"{unknown[0]} is not a file a run folder holds"
        raise IntegrityError(
            f"{where}: {what}; attncard runs no code from a repository and loads only the files publish "
            f"writes ({', '.join(sorted(RUN_FILES))}, plots, .eval_results): do not use this checkpoint"
        )
    for name in (CONFIG_FILE, TOKENIZER_CONFIG_FILE):
        path = folder / name
        if not path.is_file():
            continue
        config = read_json_object(path, where)
        remote = [key for key in REMOTE_CODE_KEYS if key in config]
        if remote:
            raise IntegrityError(
                f"{where}: {name} has '{remote[0]}', which makes transformers import code from the "
                "repository; attncard never runs repository code: do not use this checkpoint"
            )
    model_type = read_json_object(folder / CONFIG_FILE, where).get("model_type")
    if model_type not in FAMILIES:
        raise IncompatibleRunError(
            f"{where}: {CONFIG_FILE} has model_type {model_type!r}; attncard loads only the families "
            f"{', '.join(FAMILIES)}, with transformers' own code"
        )


def read_json_object(path: Path, where: str) -> dict[str, Any]:
    """A run's JSON config file as a dict, refused in one line ([`IntegrityError`]) when it is larger than
    any config attncard writes, not JSON, nested too deep or not an object."""
    with path.open("rb") as handle:
        raw = handle.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise IntegrityError(
            f"{where}: {path.name} is larger than {MAX_CONFIG_BYTES >> 20} MiB, which no config attncard "
            "writes is; do not use this checkpoint"
        )
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise IntegrityError(f"{where}: {path.name} is not valid JSON ({error})") from error
    except RecursionError:
        raise IntegrityError(
            f"{where}: {path.name} is nested deeper than any config attncard writes; do not use this "
            "checkpoint"
        ) from None
    if not isinstance(value, dict):
        raise IntegrityError(f"{where}: {path.name} should hold a JSON object")
    return value


def read_checked_files(
    folder: Path,
    expected_sha256: str | None,
    where: str,
    *,
    hub: bool = False,
    weights_optional: bool = False,
) -> Results:
    """The checks of a run folder's files that come before anything reads them, and its results.json: the
    results sha256 when one is expected, results.json field by field, no unsafe format, every file against
    the manifest (only the weights may be absent with `weights_optional`), and only files a run holds."""
    check_results_sha256(folder, expected_sha256, where)
    results = read_results(folder, where)
    check_safe_formats(folder, where)
    check_files(folder, results.manifest, where, hub, weights_optional=weights_optional)
    check_run_files(folder, [*results.manifest, RESULTS_FILE], where)
    return results


def check_run_tag(folder: Path, revision: str | None, where: str) -> None:
    """Refuses a results.json that differs from the one a run tag names.

    The manifest in results.json covers every other file, but nothing in the folder covers results.json
    itself. A push tags its commit `run-<started_at>-<sha256 of results.json>[:32]`
    ([`pipeline.publish.publish.push_tag`]), so when the revision asked for is such a tag, results.json must
    still be the file the tag was made for.
    """
    if revision is None or not RUN_TAG_RE.match(revision):
        return
    if not (folder / RESULTS_FILE).is_file():
        raise ResultsError(f"{where}: no {RESULTS_FILE}; this is not a run folder written by publish")
    actual = sha256_file(folder / RESULTS_FILE)
    if not revision.endswith(f"-{actual[:RUN_TAG_DIGEST_HEX]}"):
        raise IntegrityError(
            f"{where}: results.json (sha256 {actual[:RUN_TAG_DIGEST_HEX]}…) is not the file the tag "
            f"{revision} was made for: it changed after publishing; do not use this checkpoint"
        )
    expected = run_tag(read_results(folder, where).started_at, actual)
    if expected != revision:
        raise IntegrityError(
            f"{where}: results.json was started at another time than the tag {revision} says (its tag would "
            f"be {expected}); do not use this checkpoint"
        )


def refuse_contradictions(problems: list[str], where: str) -> None:
    """Raises [`IntegrityError`] naming the first of results.json's figures that disagree with their
    recomputation from its own counts (and how many more), when there are any."""
    if problems:
        raise IntegrityError(
            f"{where}: {RESULTS_FILE} contradicts itself: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + "; its figures were edited after they were measured: do not use this checkpoint"
        )


def read_results(folder: Path, where: str | None = None) -> Results:
    """Reads a run folder's results.json, refusing an unknown schema version with [`UnknownSchemaError`]."""
    where = where or str(folder)
    path = Path(folder) / RESULTS_FILE
    if not path.is_file():
        raise ResultsError(f"{where}: no {RESULTS_FILE}; this is not a run folder written by publish")
    try:
        return Results.load(path)
    except UnknownSchemaError as error:
        raise UnknownSchemaError(f"{where}: {error}") from error
    except ResultsError as error:
        raise ResultsError(
            f"{where}: {error}: the file is malformed, do not use this checkpoint (if another attncard "
            "version wrote it, read it with that version)"
        ) from error


def check_safe_formats(folder: Path, where: str | None = None) -> None:
    """Refuses a run folder holding pickle files ([`UnsafeFormatError`]); nothing is opened."""
    where = where or str(folder)
    for path in sorted(Path(folder).rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.suffix.lower() in UNSAFE_SUFFIXES and not is_transport_path(relative):
            raise UnsafeFormatError(
                f"{where}: {relative} is a pickle file, which can run code when loaded; attncard loads only "
                f"safetensors and did not open it: ask the publisher for {ADAPTER_WEIGHTS_FILE} (peft's "
                "save_pretrained writes it by default)"
            )


def check_files(
    folder: Path,
    manifest: dict[str, str],
    where: str | None = None,
    hub: bool = False,
    weights_optional: bool = False,
) -> None:
    """Checks a run folder against its manifest, raising [`IntegrityError`] on the first difference.

    Every file listed must be there with its sha256; any other file is an error, except results.json and
    the transport's bookkeeping (the top `.gitattributes`, `.git/`, `.cache/huggingface/`). With
    `weights_optional`, a listed weight file (`*.safetensors`) may be absent, as in a `cards/` copy; every
    file that is there is still checked.

    Example:
        >>> import shutil
        >>> copy = Path("cards-copy")
        >>> weights = shutil.ignore_patterns("*.safetensors")
        >>> _ = shutil.copytree("runs/tiny-gpt2-none-sst2", copy, ignore=weights)
        >>> check_files(copy, read_results(copy).manifest, weights_optional=True)
        >>> check_files(copy, read_results(copy).manifest)
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.IntegrityError: cards-copy: adapter_model.safetensors is missing ...
    """
    where = where or str(folder)
    folder = Path(folder)
    missing_required = [name for name in REQUIRED_FILES if name not in manifest]
    if missing_required:
        raise IntegrityError(
            f"{where}: the manifest in {RESULTS_FILE} does not list {', '.join(missing_required)}; this is "
            "not a run folder written by publish"
        )
    differences = [
        difference
        for difference in check_manifest(folder, manifest, ignore_transport=True)
        if not (
            weights_optional and difference.kind == "missing" and difference.path.endswith(WEIGHTS_SUFFIX)
        )
    ]
    redownload = (
        "; if only your copy is damaged, download it again into a new cache_dir"
        if hub
        else "; get the run folder again from where it was published"
    )
    for difference in differences:
        name, expected = difference.path, (difference.expected or "")[:SHA_PREFIX]
        if difference.kind == "missing":
            raise IntegrityError(
                f"{where}: {name} is missing (the manifest expects sha256 {expected}…); the run is "
                f"incomplete{redownload}"
            )
        if difference.kind == "changed":
            raise IntegrityError(
                f"{where}: {name} has sha256 {difference.actual[:SHA_PREFIX]}… but the manifest expects "
                f"{expected}…: the file changed after publishing; do not use this checkpoint{redownload}"
            )
    extra = [difference.path for difference in differences]
    if extra:
        raise IntegrityError(
            f"{where}: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not in the manifest of "
            f"{RESULTS_FILE}: files were added after publishing, and loaders may read them; remove "
            f"{'it' if len(extra) == 1 else 'them'} (or ask the publisher to) before loading"
        )


def check_expected_sha256(expected: str | None) -> None:
    """Refuses an expected results.json digest that is not 32 to 64 lowercase hex digits (no check when None).

    Example:
        >>> check_expected_sha256("3f1c2a9e")
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.DownloadError: expected sha256 '3f1c2a9e' is not 32 to 64 lowercase
        hex ...
    """
    if expected is not None and not _EXPECTED_SHA256_RE.match(expected):
        raise DownloadError(
            f"expected sha256 '{expected}' is not {RUN_TAG_DIGEST_HEX} to 64 lowercase hex digits; "
            "pass the sha256 of the run's results.json (cards/<run>/results.json, or its run tag's digest)"
        )


def check_results_sha256(folder: Path, expected: str | None, where: str) -> None:
    """Refuses a results.json whose sha256 does not start with `expected` (no check when None)."""
    if expected is None:
        return
    if not (folder / RESULTS_FILE).is_file():
        raise ResultsError(f"{where}: no {RESULTS_FILE}; this is not a run folder written by publish")
    actual = sha256_file(folder / RESULTS_FILE)
    if not actual.startswith(expected):
        raise IntegrityError(
            f"{where}: results.json has sha256 {actual[:RUN_TAG_DIGEST_HEX]}…, not the expected "
            f"{expected[:RUN_TAG_DIGEST_HEX]}…: it is another run, or was changed after publishing; do not "
            "use this checkpoint"
        )


__all__ = [
    "RUN_FILES",
    "WEIGHTS_SUFFIX",
    "check_expected_sha256",
    "check_files",
    "check_run_files",
    "check_run_tag",
    "check_safe_formats",
    "read_checked_files",
    "read_json_object",
    "read_results",
    "refuse_contradictions",
]
