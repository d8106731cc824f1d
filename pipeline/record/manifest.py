"""A run folder's files: their names, the most bytes each may have, their sha256, and the manifest of them
that results.json holds (every file but results.json itself and the signature).
"""

from __future__ import annotations

import hashlib
import re
import typing
from dataclasses import dataclass
from pathlib import Path

RESULTS_FILE = "results.json"
CARD_FILE = "README.md"
# Each evaluated row's index, gold label, predicted label and logits, in split order
# (pipeline.checks.predictions): every quality figure of the card can be recomputed from it without the model.
PREDICTIONS_FILE = "predictions.csv"
# The predictions of a second evaluated split (MNLI's mismatched): predictions_<split>.csv, the same format.
SECOND_PREDICTIONS_FILE = "predictions_{split}.csv"
WEIGHTS_SUFFIX = ".safetensors"  # the files a cards copy leaves out
# The OpenSSF model-signing signature of a run folder (see pipeline.hub.signing): it signs every other file,
# results.json included, so no manifest can list it.
SIGNATURE_FILE = "model.sig"
# Bookkeeping a transport adds to a run folder, never part of the run and never read by a loader: the Hub's
# own `.gitattributes` (in every repository), a git clone's `.git/`, huggingface_hub's `local_dir` metadata.
TRANSPORT_FILES = (".gitattributes",)
TRANSPORT_FOLDERS = (".git", ".cache/huggingface")
# The most bytes each file of a run folder may have, whatever results.json or a server says; what publish
# writes is far smaller: results.json a few hundred KB (a 16-layer printout is its largest part), a config or
# the `.eval_results` entry a few KB, the card some 20–100 KB, a plot some 100 KB, a tokenizer a few MB,
# predictions.csv (QQP's 40,430 rows) about 2 MB. A download refuses a listing over them before it fetches a
# byte, and the readers read no further. The adapter's weights have only the download's overall budget.
MAX_RESULTS_BYTES = 16 << 20
MAX_CONFIG_BYTES = 1 << 20  # config.json, tokenizer_config.json, adapter_config.json, LICENSE, model.sig, …
MAX_CARD_BYTES = 4 << 20
MAX_PLOT_BYTES = 16 << 20
MAX_TOKENIZER_BYTES = 64 << 20
MAX_PREDICTIONS_BYTES = 256 << 20


def hash_file(path: Path, *digests: typing.Any) -> None:
    """Feeds the bytes of a file to each of `digests` (hashlib objects), a MiB at a time.

    Example:
        >>> sha256, sha1 = hashlib.sha256(), hashlib.sha1()
        >>> hash_file(Path("runs/tiny-gpt2-none-sst2/results.json"), sha256, sha1)
        >>> sha256.hexdigest() == sha256_file(Path("runs/tiny-gpt2-none-sst2/results.json"))
        True
    """
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            for digest in digests:
                digest.update(block)


def max_file_bytes(path: str) -> int | None:
    """The most bytes the file `path` of a run folder may have; None for the adapter's weights, which only a
    download's overall budget bounds.

    Example:
        >>> max_file_bytes("config.json"), max_file_bytes("adapter_model.safetensors")
        (1048576, None)
    """
    if path.endswith(".safetensors"):
        return None
    if path.endswith(".png"):
        return MAX_PLOT_BYTES
    if re.fullmatch(r"predictions_[a-z_]+\.csv", path):  # a second split's (SECOND_PREDICTIONS_FILE)
        return MAX_PREDICTIONS_BYTES
    named = {
        RESULTS_FILE: MAX_RESULTS_BYTES,
        CARD_FILE: MAX_CARD_BYTES,
        PREDICTIONS_FILE: MAX_PREDICTIONS_BYTES,
        "tokenizer.json": MAX_TOKENIZER_BYTES,
    }
    return named.get(path, MAX_CONFIG_BYTES)


def sha256_file(path: Path) -> str:
    """The sha256 of a file, as 64 lowercase hex digits."""
    digest = hashlib.sha256()
    hash_file(path, digest)
    return digest.hexdigest()


def build_manifest(run_dir: Path) -> dict[str, str]:
    """sha256 of every file in a run folder except results.json and the signature, keyed by POSIX path
    relative to it."""
    run_dir = Path(run_dir)
    return {
        path.relative_to(run_dir).as_posix(): sha256_file(path)
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and path.relative_to(run_dir).as_posix() not in (RESULTS_FILE, SIGNATURE_FILE)
    }


@dataclass(frozen=True)
class ManifestDifference:
    """A file of a run folder that differs from the manifest: `missing`, `changed` or `unlisted`."""

    path: str
    kind: typing.Literal["missing", "changed", "unlisted"]
    expected: str | None = None  # the manifest's sha256, for a missing or changed file
    actual: str | None = None  # the file's sha256, for a changed file


def is_transport_path(relative: str) -> bool:
    """Whether a POSIX path of a run folder is a transport's bookkeeping (`TRANSPORT_FILES`/`_FOLDERS`)."""
    return relative in TRANSPORT_FILES or relative.startswith(tuple(f"{f}/" for f in TRANSPORT_FOLDERS))


def check_manifest(
    run_dir: Path, manifest: dict[str, str], ignore_transport: bool = False
) -> list[ManifestDifference]:
    """Each difference between a run folder and its manifest: listed files missing or with another sha256 (in
    path order), then files the manifest does not list. results.json and the signature are never listed.

    Args:
        run_dir: the run folder.
        manifest: path -> sha256, as results.json holds it.
        ignore_transport: leave out the transport's bookkeeping (a download's `.gitattributes`, `.git/`, …).

    Example:
        >>> run_dir = Path("runs/tiny-gpt2-none-sst2")
        >>> check_manifest(run_dir, results.manifest)
        []
        >>> _ = (run_dir / "config.json").write_text("{}")  # an edit after publishing
        >>> check_manifest(run_dir, results.manifest)
        [ManifestDifference(path='config.json', kind='changed', expected='...', actual='44136fa3...')]
    """
    run_dir = Path(run_dir)
    files = (path.relative_to(run_dir).as_posix() for path in run_dir.rglob("*") if path.is_file())
    present = {
        relative
        for relative in files
        if relative not in (RESULTS_FILE, SIGNATURE_FILE)
        and not (ignore_transport and is_transport_path(relative))
    }
    differences = []
    for path in sorted(manifest):
        if path not in present:
            differences.append(ManifestDifference(path, "missing", expected=manifest[path]))
        elif (actual := sha256_file(run_dir / path)) != manifest[path]:
            differences.append(ManifestDifference(path, "changed", expected=manifest[path], actual=actual))
    differences += [ManifestDifference(path, "unlisted") for path in sorted(present - set(manifest))]
    return differences


def is_weights(path: str) -> bool:
    """Whether a file of a run is model weights (`*.safetensors`), which a cards copy leaves out.

    Example:
        >>> is_weights("adapter_model.safetensors"), is_weights("results.json")
        (True, False)
    """
    return path.endswith(WEIGHTS_SUFFIX)


__all__ = [
    "CARD_FILE",
    "PREDICTIONS_FILE",
    "RESULTS_FILE",
    "SECOND_PREDICTIONS_FILE",
    "SIGNATURE_FILE",
    "TRANSPORT_FILES",
    "TRANSPORT_FOLDERS",
    "WEIGHTS_SUFFIX",
    "ManifestDifference",
    "build_manifest",
    "check_manifest",
    "hash_file",
    "is_transport_path",
    "is_weights",
    "max_file_bytes",
    "sha256_file",
]
