"""Download a published run, check every file against its manifest, and load it ready to predict.

A run is a run folder as [`pipeline.publish`] writes it, on local disk or in a Hub model repository:
`adapter_model.safetensors`, `adapter_config.json`, `config.json`, the tokenizer files, `README.md`, and
`results.json`, whose `manifest` holds the sha256 of every other file.

Loading a run:

1. fetches it (a local folder is used as is; a Hub repository goes through `snapshot_download`);
2. reads `results.json` (an unknown schema version is refused);
3. refuses pickle files (`*.bin`, `*.pt`, `*.pth`, `*.ckpt`, `*.pkl`, `*.pickle`) without opening them;
4. checks the files against the manifest: every listed file must be there with its sha256, and every
   other file is an error, except the transport's own bookkeeping, which no loader reads: the
   `.gitattributes` at the top (the Hub creates it in every repository), a `.git/` folder (a git clone)
   and `.cache/huggingface/` (a `local_dir` download). An unlisted file is refused because loaders pick
   up optional files by name (`special_tokens_map.json`, `added_tokens.json`, `chat_template.jinja`, …),
   so an extra file could change the model without changing any listed one;
5. refuses a run whose status is FAIL, unless asked to load it anyway;
6. rebuilds the model: the recorded base weights (their recorded revision is checked or pinned) with the
   run's `config.json`, the recorded attention module installed with its recorded config, then the LoRA
   adapter and the trained head and module parameters (`modules_to_save`) from the safetensors file.

Loading seeds nothing and is deterministic: every weight that is initialised at random on the way (the new
classification head, LoRA's factors) is overwritten from the adapter file, which is checked to hold every
weight the rebuilt model expects. The caller's random state is left as it was.

`results.json` cannot hold its own hash, so the manifest does not protect it: an edited results.json (a
better accuracy, say) passes the file checks. [`reverify`] catches it, by evaluating the reloaded model on
the recorded task again and comparing accuracy, status and the hash of the predictions.

A Hub download goes through the huggingface_hub cache, which keeps one copy per (commit, file): files
already cached are not downloaded again, so a copy that changed on the server after it was cached goes
unnoticed. What is loaded is still checked against the manifest. To check what the server holds now, pass
a fresh `cache_dir` ([`reverify`] does so by default).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import numpy as np
import torch
from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    IncompleteSnapshotError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id
from peft import PeftModel
from peft.utils import get_peft_model_state_dict
from safetensors import SafetensorError, safe_open
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as transformers_logging

from modules import AttentionModule, UnknownModuleError, get_module, module_names

from .data import HUB_DATASET_ID, TaskData, get_task, load_task, load_task_from_hub
from .errors import (
    AttncardError,
    DataError,
    DownloadError,
    FailedCheckpointError,
    HubUnreachable,
    IncompatibleRunError,
    IntegrityError,
    ModelLoadError,
    RepoNotFound,
    ResultsError,
    RevisionNotFound,
    UnknownSchemaError,
    UnsafeFormatError,
)
from .evaluate import count_deployed_parameters
from .models import folder_revision, minilm_folder, tokenize
from .results import RESULTS_FILE, RUN_TAG_RE, SCHEMA_VERSION, Results, run_tag, sha256_file
from .verify import Status, decide_status, majority_threshold

ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG_FILE = "adapter_config.json"
CONFIG_FILE = "config.json"
# The files every run folder must list in its manifest: without them there is nothing to rebuild.
REQUIRED_FILES = (ADAPTER_WEIGHTS_FILE, ADAPTER_CONFIG_FILE, CONFIG_FILE)
# Pickle-based weight formats: torch.load on them can run arbitrary code. They are refused unopened.
UNSAFE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# Bookkeeping of the transport, never read by any loader: the Hub's own `.gitattributes` (created in every
# repository), a git clone's `.git/` and huggingface_hub's `local_dir` metadata under `.cache/huggingface/`.
TRANSPORT_FILES = frozenset({".gitattributes"})
TRANSPORT_FOLDERS = (".git/", ".cache/huggingface/")
SHA_PREFIX = 12  # characters of a sha256 shown in messages
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


@dataclass
class VerifiedFiles:
    """A run folder whose files match its manifest.

    Attributes:
        folder: the checked folder (for a Hub repository, its snapshot in the huggingface_hub cache).
        results: its results.json.
        repo_id: the Hub repository, or `None` for a local folder.
        revision: the commit sha of the snapshot for a Hub repository, or `None` for a local folder.
    """

    folder: Path
    results: Results
    repo_id: str | None
    revision: str | None

    @property
    def source(self) -> str:
        """Where the run came from, for messages: `org/name@<commit>` or the folder."""
        return _source(self.folder, self.repo_id, self.revision)


@dataclass
class VerifiedModel:
    """A checked run, rebuilt and ready to predict.

    Attributes:
        model: the PEFT model (base model, attention module, LoRA adapter and trained head) in eval mode,
            on the CPU.
        tokenizer: the run's tokenizer, padding on the right (with EOS as pad token when it had none).
        results: the run's results.json.
        folder: the checked run folder.
        repo_id: the Hub repository, or `None` for a local folder.
        revision: the commit sha the files came from, or `None` for a local folder.
        base_parameters: parameters of the rebuilt base model with its classification head, before the
            module and the adapter, as `results.parameters.before` counts them.
    """

    model: PeftModel
    tokenizer: PreTrainedTokenizerBase
    results: Results
    folder: Path
    repo_id: str | None
    revision: str | None
    base_parameters: int

    @property
    def source(self) -> str:
        """Where the run came from, for messages: `org/name@<commit>` or the folder."""
        return _source(self.folder, self.repo_id, self.revision)


def _source(folder: Path, repo_id: str | None, revision: str | None) -> str:
    if repo_id is None:
        return str(folder)
    return f"{repo_id}@{revision[:SHA_PREFIX]}" if revision else repo_id


@dataclass
class Reverification:
    """A run's recorded figures against the same figures recomputed from its files.

    Attributes:
        source: the run, as `org/name@<commit>` or its folder.
        repo_id: the Hub repository, or `None` for a local folder.
        revision: the commit sha evaluated, or `None` for a local folder.
        recorded_accuracy, recomputed_accuracy: on the task's validation split.
        recorded_status, recomputed_status: the verification status.
        recorded_predictions_sha256, recomputed_predictions_sha256: sha256 of the predicted label ids,
            int64 little-endian, in split order (as [`pipeline.evaluate.evaluate`] hashes them).
        recorded_compression_factor, recomputed_compression_factor: parameters before / after (LoRA merged).
        recorded_data_revision, data_revision: `results.dataset.revision` and that of the data evaluated now
            (`sha256:<hex>` of the validation file, or the Hub commit of nyu-mll/glue).
        recorded_rows, rows: rows of the evaluated split.
        threshold: the recomputed majority share + 3 SE the accuracy is held against.
        reasons: the reasons for the recomputed status, as [`pipeline.verify.decide_status`] gives them.
        problems: one sentence per difference; empty when everything matches.
        matches: accuracy, status, predictions hash, compression factor, data and rows all equal.
        note: when the run was evaluated on another device than this check (a GPU), a sentence saying that
            float rounding may differ; empty otherwise.
    """

    source: str
    repo_id: str | None
    revision: str | None
    recorded_accuracy: float
    recomputed_accuracy: float
    recorded_status: Status
    recomputed_status: Status
    recorded_predictions_sha256: str
    recomputed_predictions_sha256: str
    recorded_compression_factor: float
    recomputed_compression_factor: float
    recorded_data_revision: str
    data_revision: str
    recorded_rows: int
    rows: int
    threshold: float
    reasons: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    matches: bool = False
    note: str = ""

    @property
    def data_matches(self) -> bool:
        return self.recorded_data_revision == self.data_revision and self.recorded_rows == self.rows


# ------------------------------------------------------------------------------------------------------------
# Fetching and checking


def download_verified(
    repo_or_path: str | os.PathLike,
    revision: str | None = None,
    allow_failed: bool = False,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> VerifiedFiles:
    """Fetches a run and checks its files, without loading any weights.

    Args:
        repo_or_path: a local run folder, or a Hub model repository `org/name`. An existing folder wins over
            a repository of the same name.
        revision: a branch, tag or commit sha of the Hub repository (default: `main`). Not for a folder.
        allow_failed: accept a run whose status is FAIL.
        endpoint: the Hub to download from (default: `HF_ENDPOINT`, else https://huggingface.co).
        token: a Hub token for private or gated repositories (default: the logged-in token, or `HF_TOKEN`).
        cache_dir: the huggingface_hub cache to download into (default: its usual cache). Pass a new
            folder to check what the server holds now rather than a copy cached earlier.

    Returns:
        [`VerifiedFiles`]: the folder, its results and, for a Hub repository, the commit sha.

    Raises:
        [`RepoNotFound`], [`RevisionNotFound`], [`HubUnreachable`], [`DownloadError`]: the download failed.
        [`UnknownSchemaError`], [`ResultsError`]: results.json is missing or unreadable.
        [`UnsafeFormatError`]: the run holds pickle weights.
        [`IntegrityError`]: a file is missing, changed, or not in the manifest.
        [`FailedCheckpointError`]: the status is FAIL and `allow_failed` is False.

    Example:
        >>> files = download_verified("attncard/minilm-none-sst2", revision="v1")
        >>> files.results.verification.status, len(files.revision)
        (<Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>, 40)
    """
    folder, repo_id, commit = _fetch(repo_or_path, revision, endpoint, token, cache_dir)
    where = _source(folder, repo_id, commit)
    results = read_results(folder, where)
    check_safe_formats(folder, where)
    check_files(folder, results.manifest, where, repo_id is not None)
    check_run_tag(folder, revision, where)
    verification = results.verification
    if verification.status == Status.FAIL and not allow_failed:
        raise FailedCheckpointError(
            f"{where}: the run's status is FAIL (accuracy {verification.accuracy:.4f} is below the threshold "
            f"{verification.threshold:.4f}, the majority-class baseline + 3 SE); pass allow_failed=True "
            "(CLI: --allow-fail) to load it anyway"
        )
    return VerifiedFiles(folder=folder, results=results, repo_id=repo_id, revision=commit)


def _fetch(
    repo_or_path: str | os.PathLike,
    revision: str | None,
    endpoint: str | None,
    token: str | None,
    cache_dir: str | os.PathLike | None,
) -> tuple[Path, str | None, str | None]:
    """`(folder, repo_id, commit)`: a local folder as is, or the snapshot of a Hub repository."""
    text = os.fspath(repo_or_path)
    local = Path(text).expanduser()
    if local.is_dir():
        if revision is not None:
            raise DownloadError(
                f"{local} is a local folder; a revision only applies to a Hub repository: drop the revision, "
                "or pass the repository as ORG/NAME"
            )
        return local.resolve(), None, None
    if isinstance(repo_or_path, os.PathLike) or text.startswith((".", "/", "~")) or local.exists():
        raise DownloadError(f"{text}: no such run folder; pass a folder written by publish, or ORG/NAME")
    try:
        validate_repo_id(text)
    except HFValidationError:
        raise DownloadError(
            f"'{text}' is neither a run folder nor a Hub repository id; pass a folder, or ORG/NAME"
        ) from None
    if "/" not in text:
        raise DownloadError(
            f"'{text}' is not a folder here, nor a Hub repository id ORG/NAME (it has no ORG)"
        )
    snapshot = _snapshot(text, revision, endpoint, token, cache_dir)
    commit = snapshot.name if _COMMIT_RE.match(snapshot.name) else None
    return snapshot, text, commit


def _snapshot(
    repo_id: str,
    revision: str | None,
    endpoint: str | None,
    token: str | None,
    cache_dir: str | os.PathLike | None,
) -> Path:
    """Downloads a repository snapshot, mapping huggingface_hub's errors to one-line ones."""
    hub = (endpoint or constants.ENDPOINT).rstrip("/")
    where = f"{repo_id}@{revision}" if revision else repo_id
    try:
        return Path(
            snapshot_download(
                repo_id,
                revision=revision,
                endpoint=endpoint,
                token=token,
                cache_dir=os.fspath(cache_dir) if cache_dir is not None else None,
            )
        )
    except RevisionNotFoundError:
        raise _revision_not_found(repo_id, revision, hub) from None
    except GatedRepoError:
        raise RepoNotFound(
            f"{repo_id} on {hub} is gated: accept its conditions on its Hub page, then pass a token that "
            "has access (token=, HF_TOKEN or `hf auth login`)"
        ) from None
    except RepositoryNotFoundError:
        # Some Hub servers (olah, a mirror) answer "repository not found" for a revision they lack.
        if revision is not None and _repo_exists(repo_id, endpoint, token):
            raise _revision_not_found(repo_id, revision, hub) from None
        raise RepoNotFound(
            f"no repository '{repo_id}' on {hub} (nor a local folder of that name), or it is private and "
            "the token cannot read it: check the id (and --hub-endpoint), or log in with `hf auth login` / "
            "pass a token"
        ) from None
    except DisabledRepoError:
        raise RepoNotFound(f"{repo_id} on {hub} is disabled by the Hub; it cannot be downloaded") from None
    except IncompleteSnapshotError as error:
        raise HubUnreachable(
            f"could not reach {hub} and the cached copy of {where} is incomplete ({_first_line(error)}); "
            "connect to the network and try again"
        ) from error
    except LocalEntryNotFoundError as error:
        if constants.HF_HUB_OFFLINE:
            raise HubUnreachable(
                f"HF_HUB_OFFLINE is set and {where} is not in the local cache: set HF_HUB_OFFLINE=0 to "
                "download it, or pass a local run folder"
            ) from error
        cause = error.__cause__ or error
        raise HubUnreachable(
            f"could not reach {hub} ({type(cause).__name__}) and {where} is not in the local cache: check "
            "the network and the endpoint (--hub-endpoint, HF_ENDPOINT), or pass a local run folder"
        ) from error
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else "error"
        raise DownloadError(
            f"{hub} answered HTTP {status} while downloading {where} ({_first_line(error)}); try again later"
        ) from error
    except httpx2.HTTPError as error:  # huggingface_hub's HTTP client: its errors are not OSErrors
        raise HubUnreachable(
            f"the connection to {hub} failed while downloading {where} ({type(error).__name__}: "
            f"{_first_line(error)}); try again"
        ) from error
    except OSError as error:
        raise DownloadError(
            f"could not store {where} in the cache ({error}); free disk space or pass another cache_dir"
        ) from error


def _revision_not_found(repo_id: str, revision: str | None, hub: str) -> RevisionNotFound:
    return RevisionNotFound(
        f"{repo_id} on {hub} has no branch, tag or commit '{revision}'; pass one it has "
        f"(HfApi().list_repo_refs('{repo_id}') lists its branches and tags), or leave it out for main"
    )


def _repo_exists(repo_id: str, endpoint: str | None, token: str | None) -> bool:
    """Whether the Hub lists the branches and tags of `repo_id` (False on any error)."""
    try:
        HfApi(endpoint=endpoint, token=token).list_repo_refs(repo_id)
    except (HfHubHTTPError, httpx2.HTTPError, OSError):
        return False
    return True


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def read_results(folder: Path, where: str | None = None) -> Results:
    """Reads a run folder's results.json, refusing an unknown schema version with [`UnknownSchemaError`]."""
    where = where or str(folder)
    path = Path(folder) / RESULTS_FILE
    if not path.is_file():
        raise ResultsError(f"{where}: no {RESULTS_FILE}; this is not a run folder written by publish")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsError(f"{where}: {RESULTS_FILE} is not valid JSON ({error})") from error
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise UnknownSchemaError(
            f"{where}: {RESULTS_FILE} has schema version {version!r}; this attncard reads version "
            f"{SCHEMA_VERSION}: upgrade attncard (pip install -U attncard), or use the attncard version that "
            "published the run"
        )
    try:
        return Results.load(path)
    except ResultsError as error:
        raise ResultsError(
            f"{where}: {error}; it was written by another attncard version: read it with that version, or "
            "publish the run again"
        ) from error


def check_safe_formats(folder: Path, where: str | None = None) -> None:
    """Refuses a run folder holding pickle files ([`UnsafeFormatError`]); nothing is opened."""
    where = where or str(folder)
    for path in sorted(Path(folder).rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.suffix.lower() in UNSAFE_SUFFIXES and not _is_transport(relative):
            raise UnsafeFormatError(
                f"{where}: {relative} is a pickle file, which can run code when loaded; attncard loads only "
                f"safetensors and did not open it: ask the publisher for {ADAPTER_WEIGHTS_FILE} (peft's "
                "save_pretrained writes it by default)"
            )


def _is_transport(relative: str) -> bool:
    return relative in TRANSPORT_FILES or relative.startswith(TRANSPORT_FOLDERS)


def check_files(folder: Path, manifest: dict[str, str], where: str | None = None, hub: bool = False) -> None:
    """Checks a run folder against its manifest, raising [`IntegrityError`] on the first difference.

    Every file listed must be there with its sha256; any other file is an error, except results.json and
    the transport's bookkeeping (the top `.gitattributes`, `.git/`, `.cache/huggingface/`).
    """
    where = where or str(folder)
    folder = Path(folder)
    missing_required = [name for name in REQUIRED_FILES if name not in manifest]
    if missing_required:
        raise IntegrityError(
            f"{where}: the manifest in {RESULTS_FILE} does not list {', '.join(missing_required)}; this is "
            "not a run folder written by publish"
        )
    present = {
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and not _is_transport(path.relative_to(folder).as_posix())
    }
    redownload = (
        "; if only your copy is damaged, download it again into a new cache_dir"
        if hub
        else "; get the run folder again from where it was published"
    )
    for name in sorted(manifest):
        if name not in present:
            raise IntegrityError(
                f"{where}: {name} is missing (the manifest expects sha256 {manifest[name][:SHA_PREFIX]}…); "
                f"the run is incomplete{redownload}"
            )
        actual = sha256_file(folder / name)
        if actual != manifest[name]:
            raise IntegrityError(
                f"{where}: {name} has sha256 {actual[:SHA_PREFIX]}… but the manifest expects "
                f"{manifest[name][:SHA_PREFIX]}…: the file changed after publishing; do not use this "
                f"checkpoint{redownload}"
            )
    extra = sorted(present - set(manifest) - {RESULTS_FILE})
    if extra:
        raise IntegrityError(
            f"{where}: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not in the manifest of "
            f"{RESULTS_FILE}: files were added after publishing, and loaders may read them; remove "
            f"{'it' if len(extra) == 1 else 'them'} (or ask the publisher to) before loading"
        )


def check_run_tag(folder: Path, revision: str | None, where: str) -> None:
    """Refuses a results.json that differs from the one a run tag names.

    The manifest in results.json covers every other file, but nothing in the folder covers results.json
    itself. A push tags its commit `run-<started_at>-<sha256 of results.json>[:32]`
    ([`pipeline.publish.push_tag`]), so when the revision asked for is such a tag, results.json must still be
    the file the tag was made for.
    """
    if revision is None or not RUN_TAG_RE.match(revision):
        return
    expected = run_tag(Results.load(folder).started_at, sha256_file(folder / RESULTS_FILE))
    if expected != revision:
        actual = sha256_file(folder / RESULTS_FILE)
        raise IntegrityError(
            f"{where}: results.json (sha256 {actual[:12]}…, so tag {expected}) is not the file the tag "
            f"{revision} was made for: it changed after publishing; do not use this checkpoint"
        )


# ------------------------------------------------------------------------------------------------------------
# Rebuilding the model


def load_verified(
    repo_or_path: str | os.PathLike,
    revision: str | None = None,
    allow_failed: bool = False,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> VerifiedModel:
    """Downloads a published run, checks it, and rebuilds its model, ready to predict.

    The checks are those of [`download_verified`]. The model is rebuilt from the recorded base weights (a
    Hub base is pinned to the recorded commit; a local or packaged base must have the recorded sha256) with
    the run's `config.json`, then the recorded attention module is installed with its recorded config, then
    the adapter (LoRA, classification head, module parameters) is loaded from `adapter_model.safetensors`.
    Nothing is seeded and the caller's random state is restored afterwards.

    Args:
        repo_or_path: a local run folder, or a Hub model repository `org/name`.
        revision: a branch, tag or commit sha of the Hub repository (default: `main`).
        allow_failed: load a run whose status is FAIL.
        endpoint: the Hub to download the run from (default: `HF_ENDPOINT`, else https://huggingface.co). A
            base model on the Hub is always read from the default endpoint.
        token: a Hub token for a private or gated repository.
        cache_dir: the huggingface_hub cache to download the run into; a new folder makes sure the files are
            the server's current copy.

    Returns:
        A [`VerifiedModel`]: the model in eval mode, its tokenizer, its results and where it came from.

    Raises:
        The errors of [`download_verified`], and
        [`IncompatibleRunError`]: the base model, module or adapter do not match the record (other weights,
        an unknown module, missing adapter weights).
        [`ModelLoadError`]: the base model cannot be had (offline and not cached).

    Example:
        >>> verified = load_verified("attncard/minilm-none-sst2")
        >>> predictions = predict(verified, load_task("sst2", "glue"))
        >>> predictions_sha256(predictions) == verified.results.metrics.predictions_sha256
        True
    """
    files = download_verified(
        repo_or_path, revision, allow_failed, endpoint=endpoint, token=token, cache_dir=cache_dir
    )
    # The new head and LoRA's factors draw random initial values, all overwritten from the adapter file; the
    # base model's load report lists the head as missing, by design.
    with torch.random.fork_rng(devices=[]), _transformers_errors_only():
        model, tokenizer, base_parameters = _rebuild(files)
    return VerifiedModel(
        model=model,
        tokenizer=tokenizer,
        results=files.results,
        folder=files.folder,
        repo_id=files.repo_id,
        revision=files.revision,
        base_parameters=base_parameters,
    )


@contextlib.contextmanager
def _transformers_errors_only() -> typing.Iterator[None]:
    """transformers logs errors only inside the block, and its previous verbosity afterwards."""
    previous = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(previous)


def _rebuild(files: VerifiedFiles) -> tuple[PeftModel, PreTrainedTokenizerBase, int]:
    results, folder, where = files.results, files.folder, files.source
    labels = list(results.dataset.label_names)
    module, module_config = _module_and_config(results, where)
    _check_adapter_config(folder, where, module)
    config = AutoConfig.from_pretrained(folder)
    if config.model_type != results.model.family:
        raise IncompatibleRunError(
            f"{where}: {CONFIG_FILE} is a '{config.model_type}' config but {RESULTS_FILE} records a "
            f"'{results.model.family}' model; the run folder is inconsistent, publish it again"
        )
    config_labels = [config.id2label.get(i) for i in range(config.num_labels)]
    if config_labels != labels:
        raise IncompatibleRunError(
            f"{where}: {CONFIG_FILE} has labels {config_labels} but {RESULTS_FILE} records {labels}; the run "
            "folder is inconsistent, publish it again"
        )
    model = _load_base_model(results, config, where)
    # As pipeline.models.load_model counts them: before the module (svd_lowrank replaces projections).
    base_parameters = sum(p.numel() for p in model.parameters())
    module.apply(model, module_config)
    stored = _adapter_weight_names(folder, where)
    with warnings.catch_warnings():
        # Library noise, as in pipeline.cli: peft asks transformers a deprecated question.
        warnings.filterwarnings(
            "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
        )
        try:
            model = PeftModel.from_pretrained(
                model, os.fspath(folder), is_trainable=False, torch_device="cpu"
            )
        except RuntimeError as error:  # torch's load_state_dict: a weight of another shape
            raise IncompatibleRunError(
                f"{where}: {ADAPTER_WEIGHTS_FILE} does not fit the rebuilt model ({_first_line(error)}); "
                "the base model or module differ from the ones it was trained with"
            ) from error
    _check_adapter_weights(model, stored, where)
    model.eval()

    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        # As pipeline.models.load_model: decoders pad with EOS, and pool the last non-pad token.
        if tokenizer.eos_token is None:
            raise IncompatibleRunError(
                f"{where}: the tokenizer has neither a pad nor an EOS token, so batches cannot be padded; "
                "the run folder is inconsistent, publish it again"
            )
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer, base_parameters


def _check_adapter_config(folder: Path, where: str, module: AttentionModule) -> None:
    """The adapter must be what publish writes: a LoRA adapter for sequence classification that saves the
    module's own trained submodules (`modules_to_save`), or they would keep their initial values."""
    try:
        adapter = json.loads((folder / ADAPTER_CONFIG_FILE).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise IncompatibleRunError(f"{where}: {ADAPTER_CONFIG_FILE} is not valid JSON ({error})") from error
    kind = (adapter.get("peft_type"), adapter.get("task_type")) if isinstance(adapter, dict) else None
    if kind != ("LORA", "SEQ_CLS"):
        raise IncompatibleRunError(
            f"{where}: {ADAPTER_CONFIG_FILE} describes a {kind} adapter; attncard runs are LoRA adapters for "
            "sequence classification (LORA, SEQ_CLS)"
        )
    saved = adapter.get("modules_to_save") or []
    unsaved = [name for name in module.trainable_modules if name not in saved]
    if unsaved:
        raise IncompatibleRunError(
            f"{where}: {ADAPTER_CONFIG_FILE} does not save {', '.join(unsaved)}, the trained parameters of "
            f"the module '{module.name}' that {RESULTS_FILE} records; the run folder is inconsistent, "
            "publish it again"
        )


def _module_and_config(results: Results, where: str) -> tuple[AttentionModule, object]:
    """The recorded attention module and its config, rebuilt from `results.module`."""
    name = results.module.name
    try:
        module = get_module(name)
    except UnknownModuleError:
        raise IncompatibleRunError(
            f"{where}: the run uses the attention module '{name}', which this attncard does not have "
            f"(it has {', '.join(module_names())}); install attncard {results.environment.attncard_version}"
        ) from None
    config_class = module.config_class
    hints = typing.get_type_hints(config_class)
    known = {f.name for f in dataclasses.fields(config_class)}
    recorded = dict(results.module.config)
    unknown = sorted(set(recorded) - known)
    if unknown:
        raise IncompatibleRunError(
            f"{where}: the run's '{name}' config has fields {unknown} that {config_class.__name__} of this "
            f"attncard does not know; install attncard {results.environment.attncard_version}"
        )
    values = {
        key: tuple(value) if isinstance(value, list) and typing.get_origin(hints[key]) is tuple else value
        for key, value in recorded.items()
    }
    return module, config_class(**values)


def _load_base_model(results: Results, config, where: str) -> torch.nn.Module:
    """The recorded base weights with the run's config (labels, pad token), as `load_model` loads them."""
    record = results.model
    revision: str | None = None
    if record.name == "minilm":
        source = minilm_folder()
    elif record.revision.startswith("sha256:"):
        source = Path(record.model_id)
        if not source.is_dir():
            raise IncompatibleRunError(
                f"{where}: the run was trained on the local model folder {source}, which is not on this "
                f"machine; copy that folder (weights {record.revision[: 7 + SHA_PREFIX]}…) to the same path"
            )
    else:
        source, revision = record.model_id, record.revision
    if isinstance(source, Path):
        if not list(source.glob("*.safetensors")):
            raise UnsafeFormatError(
                f"{where}: the base model folder {source} has no safetensors weights; attncard loads only "
                "safetensors: convert it (save_pretrained writes safetensors by default)"
            )
        actual = folder_revision(source)
        if actual != record.revision:
            raise IncompatibleRunError(
                f"{where}: the base model {record.name} here has weights {actual[: 7 + SHA_PREFIX]}… but the "
                f"run was trained on {record.revision[: 7 + SHA_PREFIX]}…; install the versions recorded in "
                f"{RESULTS_FILE} (environment.packages) or use the same model folder"
            )
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            os.fspath(source),
            config=config,
            revision=revision,
            attn_implementation="sdpa",
            dtype=torch.float32,
            use_safetensors=True,
        )
    except OSError as error:
        raise ModelLoadError(
            f"{where}: could not load the base model {record.model_id}"
            + (f" at revision {revision}" if revision else "")
            + f" ({_first_line(error)}); connect to the Hub, or make it available in the local cache"
        ) from error
    return model


def _adapter_weight_names(folder: Path, where: str) -> set[str]:
    """The names of the weights in the adapter file, read from its header (no tensor is loaded)."""
    try:
        with safe_open(folder / ADAPTER_WEIGHTS_FILE, framework="pt") as handle:
            return set(handle.keys())
    except SafetensorError as error:
        raise IncompatibleRunError(
            f"{where}: {ADAPTER_WEIGHTS_FILE} is not a valid safetensors file ({error}); publish the run "
            "again"
        ) from error


def _check_adapter_weights(model: PeftModel, stored: set[str], where: str) -> None:
    """The adapter file must hold exactly the weights the rebuilt model saves: none left at random."""
    expected = set(get_peft_model_state_dict(model, save_embedding_layers=False))
    missing, unexpected = sorted(expected - stored), sorted(stored - expected)
    if missing or unexpected:
        detail = "; ".join(
            part
            for part in (
                f"{len(missing)} weights the model needs are not in it (e.g. {missing[0]})"
                if missing
                else "",
                f"{len(unexpected)} weights fit nowhere (e.g. {unexpected[0]})" if unexpected else "",
            )
            if part
        )
        raise IncompatibleRunError(
            f"{where}: {ADAPTER_WEIGHTS_FILE} does not fit the rebuilt model: {detail}; the base model or "
            "module differ from the ones it was trained with"
        )


# ------------------------------------------------------------------------------------------------------------
# Predicting and re-verifying


def predict(verified: VerifiedModel, data: TaskData, batch_size: int = 64) -> list[int]:
    """Predicts the label id of every row of `data.validation`, in order.

    Rows are tokenized as in training and evaluation (truncated to the run's `max_length`, padded on the
    right to the longest row of the batch). On the CPU the predictions are deterministic.

    Args:
        verified: a run from [`load_verified`].
        data: a task whose labels are the run's, e.g. from [`pipeline.data.load_task`].
        batch_size: rows per forward pass.

    Returns:
        The predicted label ids.

    Raises:
        [`DataError`]: the task's labels are not the run's.

    Example:
        >>> verified = load_verified("runs/minilm-none-sst2")
        >>> predict(verified, load_task("sst2", "glue"))[:5]
        [1, 0, 1, 1, 0]
    """
    labels = list(verified.results.dataset.label_names)
    if list(data.spec.label_names) != labels:
        raise DataError(
            f"task {data.spec.name} has labels {list(data.spec.label_names)}, the model predicts {labels}; "
            f"pass the task it was trained on ({verified.results.dataset.task})"
        )
    model, tokenizer = verified.model, verified.tokenizer
    max_length = verified.results.training.hyperparameters.max_length
    device = next(model.parameters()).device
    model.eval()
    predictions: list[int] = []
    with torch.inference_mode():
        for start in range(0, len(data.validation), batch_size):
            rows = data.validation[start : start + batch_size]
            batch = tokenize(tokenizer, rows, data.spec.text_columns, max_length).to(device)
            predictions += model(**batch).logits.float().argmax(dim=-1).tolist()
    return predictions


def predictions_sha256(predictions: list[int]) -> str:
    """sha256 of predicted label ids as int64 little-endian bytes, as `Metrics.predictions_sha256` records."""
    return hashlib.sha256(np.asarray(predictions, dtype="<i8").tobytes()).hexdigest()


def reverify(
    repo_or_path: str | os.PathLike,
    revision: str | None = None,
    *,
    data_dir: str | os.PathLike | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Reverification:
    """Reloads a published run, evaluates it again, and compares the figures with the recorded ones.

    The run is loaded with [`load_verified`] (a FAIL run too) and its predictions on the recorded task's
    validation split are computed again with the recorded batch size, on the CPU. The status is recomputed
    from them as [`pipeline.verify.verify`] decides it: the accuracy against the majority share + 3 SE of
    the split, and the compression factor of the rebuilt model. Accuracy, status, predictions hash and
    compression factor must be equal exactly: CPU evaluation is deterministic (on the same kind of CPU; a
    run evaluated on a GPU may differ in a borderline row, which `note` then says).

    The data: `data_dir` (else `GLUE_DIR`) when given; else, for a run evaluated on the Hub's nyu-mll/glue,
    that dataset at the recorded commit; else the recorded TSV folder when it exists on this machine.

    Args:
        repo_or_path: a local run folder, or a Hub model repository `org/name`.
        revision: a branch, tag or commit sha of the Hub repository (default: `main`).
        data_dir: a folder of GLUE TSV files.
        endpoint: the Hub to download the run from.
        token: a Hub token for a private or gated repository.
        cache_dir: the huggingface_hub cache to use. By default a Hub run is downloaded into a new temporary
            cache, so the server's current files are the ones checked.

    Returns:
        A [`Reverification`]; its `matches` says whether everything is equal, `problems` what is not.

    Raises:
        The errors of [`load_verified`], and [`DataError`] when the task's data cannot be had.

    Example:
        >>> check = reverify("attncard/minilm-none-sst2", data_dir="glue")
        >>> check.matches, check.recomputed_accuracy
        (True, 0.7912844036697247)
    """
    with contextlib.ExitStack() as stack:
        if cache_dir is None and not Path(os.fspath(repo_or_path)).expanduser().is_dir():
            cache_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="attncard-verify-"))
        verified = load_verified(
            repo_or_path, revision, allow_failed=True, endpoint=endpoint, token=token, cache_dir=cache_dir
        )
    results = verified.results
    data = _recorded_task(results, data_dir, verified.source)
    predictions = predict(verified, data, batch_size=results.efficiency.batch_size)
    labels = list(data.validation["label"])
    # As pipeline.evaluate and pipeline.verify compute them.
    accuracy = float(np.mean(np.asarray(labels) == np.asarray(predictions)))
    _, _, threshold = majority_threshold([labels.count(i) for i in range(len(data.spec.label_names))])
    compression = verified.base_parameters / count_deployed_parameters(verified.model)
    status, reasons = decide_status(accuracy, threshold, compression, math.isfinite(accuracy))

    device = results.efficiency.device
    check = Reverification(
        source=verified.source,
        repo_id=verified.repo_id,
        revision=verified.revision,
        recorded_accuracy=results.metrics.accuracy,
        recomputed_accuracy=accuracy,
        recorded_status=results.verification.status,
        recomputed_status=status,
        recorded_predictions_sha256=results.metrics.predictions_sha256,
        recomputed_predictions_sha256=predictions_sha256(predictions),
        recorded_compression_factor=results.parameters.compression_factor,
        recomputed_compression_factor=compression,
        recorded_data_revision=results.dataset.revision,
        data_revision=data.source.revision,
        recorded_rows=results.verification.n,
        rows=len(labels),
        threshold=threshold,
        reasons=reasons,
        note=""
        if device == "cpu"
        else (
            f"the run was evaluated on {device} ({results.efficiency.device_name}) and this check on the "
            "CPU: float rounding differs between them, which can move a borderline prediction"
        ),
    )
    check.problems = _differences(check)
    check.matches = not check.problems
    return check


def _recorded_task(results: Results, data_dir: str | os.PathLike | None, where: str) -> TaskData:
    record = results.dataset
    data_dir = data_dir or os.environ.get("GLUE_DIR") or None
    if data_dir:
        return load_task(record.task, data_dir)
    if record.dataset_id == HUB_DATASET_ID:
        return load_task_from_hub(get_task(record.task), revision=record.revision)
    recorded_file = record.files.get("validation", {}).get("path")
    if recorded_file and Path(recorded_file).is_file():
        return load_task(record.task, Path(recorded_file).parent.parent)
    raise DataError(
        f"{where}: the run was evaluated on local GLUE TSV files ({record.task}, validation "
        f"{record.revision[: 7 + SHA_PREFIX]}…) that are not on this machine; pass --data-dir (data_dir=) "
        "with the same files"
    )


def _differences(check: Reverification) -> list[str]:
    problems = []
    if check.recorded_data_revision != check.data_revision:
        problems.append(
            f"the data differ: the run was evaluated on {check.recorded_data_revision}, this check on "
            f"{check.data_revision}"
        )
    if check.recorded_rows != check.rows:
        problems.append(f"the split has {check.rows} rows, the run recorded {check.recorded_rows}")
    if check.recomputed_accuracy != check.recorded_accuracy:
        problems.append(
            f"accuracy {check.recomputed_accuracy!r} recomputed, {check.recorded_accuracy!r} recorded"
        )
    if check.recomputed_status != check.recorded_status:
        problems.append(
            f"status {check.recomputed_status.value} recomputed, {check.recorded_status.value} recorded"
        )
    if check.recomputed_predictions_sha256 != check.recorded_predictions_sha256:
        problems.append(
            f"predictions sha256 {check.recomputed_predictions_sha256[:SHA_PREFIX]}… recomputed, "
            f"{check.recorded_predictions_sha256[:SHA_PREFIX]}… recorded"
        )
    if check.recomputed_compression_factor != check.recorded_compression_factor:
        problems.append(
            f"compression factor {check.recomputed_compression_factor!r} recomputed, "
            f"{check.recorded_compression_factor!r} recorded"
        )
    return problems


# ------------------------------------------------------------------------------------------------------------
# Command line


class _Parser(argparse.ArgumentParser):
    """One-line argument errors with exit status 2, as `pipeline.cli.OneLineParser`."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def build_download_parser(prog: str = "attncard download") -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        description="Download a published run from the Hub and check every file against its manifest "
        "(sha256), its results.json schema and its status; no weights are loaded.",
        epilog="example: attncard download attncard/minilm-none-sst2 --revision v1 --output runs/minilm",
    )
    parser.add_argument("repo", help="Hub repository ORG/NAME (or a local run folder, to check it)")
    parser.add_argument("--revision", default=None, help="branch, tag or commit sha (default: main)")
    parser.add_argument("--allow-fail", action="store_true", help="accept a run whose status is FAIL")
    parser.add_argument(
        "--hub-endpoint",
        default=None,
        help="the Hub to download from (default: $HF_ENDPOINT, else huggingface.co)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="copy the checked files into this new folder (default: leave them in the huggingface_hub cache)",
    )
    return parser


def build_verify_parser(prog: str = "attncard verify") -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        description="Reload a published run and evaluate it again on its task's validation split: exit 0 "
        "when the recomputed accuracy, status and predictions hash equal the recorded ones, 1 when not, 2 on "
        "errors.",
        epilog="example: attncard verify attncard/minilm-none-sst2 --data-dir ../shared/data/glue",
    )
    parser.add_argument("repo", help="Hub repository ORG/NAME, or a local run folder")
    parser.add_argument("--revision", default=None, help="branch, tag or commit sha (default: main)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder of GLUE TSV files (default: $GLUE_DIR, else the recorded Hub dataset or folder)",
    )
    parser.add_argument(
        "--hub-endpoint",
        default=None,
        help="the Hub to download from (default: $HF_ENDPOINT, else huggingface.co)",
    )
    return parser


def main_download(argv: list[str] | None = None) -> int:
    """`attncard download REPO [--revision R] [--allow-fail] [--hub-endpoint URL] [--output DIR]`.

    Prints where the checked files are and the run's status; exit 0, or 2 with one line on an error.

    Example:
        >>> main_download(["attncard/minilm-none-sst2", "--output", "runs/minilm"])
        PASS_NO_COMPRESSION: attncard/minilm-none-sst2@3f1c2a9e0b7d, accuracy 0.7913 on 872 rows
        runs/minilm
        0
    """
    args = build_download_parser().parse_args(argv)
    try:
        if args.output is None:
            files = download_verified(args.repo, args.revision, args.allow_fail, endpoint=args.hub_endpoint)
            location = files.folder
        else:
            files, location = _download_to(
                args.repo, args.revision, args.allow_fail, args.hub_endpoint, args.output
            )
    except AttncardError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    verification = files.results.verification
    print(
        f"{verification.status.value}: {files.source}, accuracy {verification.accuracy:.4f} on "
        f"{verification.n} rows; every file matches its manifest",
        file=sys.stderr,
    )
    print(location)
    return EXIT_OK


def _download_to(
    repo: str, revision: str | None, allow_failed: bool, endpoint: str | None, output: Path
) -> tuple[VerifiedFiles, Path]:
    """Downloads into a new temporary cache, checks, and copies the run's files into the new folder."""
    output = output.expanduser()
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise DownloadError(f"{output} exists and is not an empty folder; pass a new folder as --output")
    with tempfile.TemporaryDirectory(prefix="attncard-download-") as cache:
        files = download_verified(repo, revision, allow_failed, endpoint=endpoint, cache_dir=cache)
        output.parent.mkdir(parents=True, exist_ok=True)
        partial = output.parent / f".{output.name}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            partial.mkdir()
            for name in [*files.results.manifest, RESULTS_FILE]:
                (partial / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(files.folder / name, partial / name)
            check_files(partial, files.results.manifest, files.source, hub=files.repo_id is not None)
            if output.exists():
                output.rmdir()
            partial.rename(output)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    files = VerifiedFiles(
        folder=output.resolve(), results=files.results, repo_id=files.repo_id, revision=files.revision
    )
    return files, output


def main_verify(argv: list[str] | None = None) -> int:
    """`attncard verify REPO|DIR [--revision R] [--data-dir D] [--hub-endpoint URL]`.

    Prints the recorded and recomputed accuracy, status and predictions hash; exit 0 when all match, 1 when
    not, 2 with one line on an error.

    Example:
        >>> main_verify(["runs/minilm-none-sst2", "--data-dir", "../shared/data/glue"])
        runs/minilm-none-sst2
          accuracy            recorded 0.7912844036697247  recomputed 0.7912844036697247
          status              recorded PASS_NO_COMPRESSION  recomputed PASS_NO_COMPRESSION
          predictions sha256  recorded 1b2c…  recomputed 1b2c…
          compression factor  recorded 1.0  recomputed 1.0
          data                recorded sha256:54a9…  recomputed sha256:54a9…
          rows                recorded 872  recomputed 872
        MATCH: runs/minilm-none-sst2 reproduces its recorded figures
        0
    """
    args = build_verify_parser().parse_args(argv)
    try:
        check = reverify(args.repo, args.revision, data_dir=args.data_dir, endpoint=args.hub_endpoint)
    except AttncardError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    rows = [
        ("accuracy", repr(check.recorded_accuracy), repr(check.recomputed_accuracy)),
        ("status", check.recorded_status.value, check.recomputed_status.value),
        ("predictions sha256", check.recorded_predictions_sha256, check.recomputed_predictions_sha256),
        (
            "compression factor",
            repr(check.recorded_compression_factor),
            repr(check.recomputed_compression_factor),
        ),
        ("data", check.recorded_data_revision, check.data_revision),
        ("rows", str(check.recorded_rows), str(check.rows)),
    ]
    print(f"{check.source}")
    for name, recorded, recomputed in rows:
        mark = "  " if recorded == recomputed else "≠ "
        print(f"{mark}{name:<20}recorded {recorded}  recomputed {recomputed}")
    if check.matches:
        print(f"MATCH: {check.source} reproduces its recorded figures")
        return EXIT_OK
    print(f"MISMATCH: {'; '.join(check.problems)}" + (f" ({check.note})" if check.note else ""))
    return EXIT_MISMATCH


__all__ = [
    "DownloadError",
    "FailedCheckpointError",
    "HubUnreachable",
    "IncompatibleRunError",
    "IntegrityError",
    "RepoNotFound",
    "Reverification",
    "RevisionNotFound",
    "UnknownSchemaError",
    "UnsafeFormatError",
    "VerifiedFiles",
    "VerifiedModel",
    "build_download_parser",
    "build_verify_parser",
    "check_files",
    "check_safe_formats",
    "download_verified",
    "load_verified",
    "main_download",
    "main_verify",
    "predict",
    "predictions_sha256",
    "read_results",
    "reverify",
]
