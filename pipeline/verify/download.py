"""Download a published run, check it as a hostile input, and load it ready to predict.

A run is a run folder as [`pipeline.publish.publish`] writes it, on local disk or in a Hub model repository:
`adapter_model.safetensors`, `adapter_config.json`, `config.json`, the tokenizer files, `README.md`, the
plots, `.eval_results/`, `results.json`, whose `manifest` holds the sha256 of every other file, and maybe a
signature `model.sig`. See SECURITY.md for what each check defends against.

Loading a run:

1. fetches it: a local folder is used as is; a Hub repository goes through [`pipeline.hub.fetch.fetch_run`],
   which pins the revision to a commit, writes only under names it checked into a folder attncard owns,
   checks every file against the commit's tree, and holds every request to a timeout and the whole download
   to a deadline;
2. runs the checks of [`pipeline.checks.registry`] with the profile [`pipeline.checks.registry.DOWNLOAD`]
(weights, torch, a
   Hub revision, a signature), in their order: results.json against a run tag's 128-bit digest or an
   expected sha256, when given, and field by field; no pickle files, every file against the manifest, only
   files publish writes, no remote code, a known model type; the recorded module installed, an
   `adapter_config.json` that is the LoRA config publish writes
   ([`pipeline.checks.module_and_adapter.lora_config`]);
   the verification and metrics recomputed from the recorded counts; `predictions.csv` read line by line when
   the manifest lists it; the card and plots rendered again; the signature when one is there (against a
   required key or identity, if given); and the (recomputed) status, a FAIL run refused unless asked to
   load it anyway;
3. rebuilds the model: first the run's tokenizer is read (a malformed `tokenizer.json` or
   `tokenizer_config.json` is one line) and the run's `config.json` compared with the base model's config,
   every field but those publish sets (labels, architecture, dtype, a missing pad token), so that no field
   sizes a weight before it is checked; then the recorded base weights (a Hub commit, the packaged MiniLM,
   or a local folder passed as `base_model` with the recorded sha256; [`pipeline.verify.base_model`]) with
   the run's `config.json`, the recorded attention module with its recorded config, then the LoRA adapter
   and the trained head and module parameters (`modules_to_save`) from the safetensors file. transformers
   and peft run with `trust_remote_code=False`.

Loading seeds nothing and is deterministic: every weight that is initialised at random on the way (the new
classification head, LoRA's factors) is overwritten from the adapter file, which is checked to hold every
weight the rebuilt model expects. The caller's random state is left as it was.

A self-consistent run — figures, card and manifest all agreeing — can still be invented by anyone with write
access: [`pipeline.verify.reverify`] catches it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import typing
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from peft import PeftModel
from peft.utils import get_peft_model_state_dict
from safetensors import SafetensorError, safe_open
from tokenizers import Tokenizer
from transformers import (
    CONFIG_MAPPING,
    AutoConfig,
    AutoTokenizer,
    PreTrainedTokenizerBase,
)
from transformers import __version__ as transformers_version
from transformers.utils import logging as transformers_logging

from ..checks.integrity import (
    ADAPTER_WEIGHTS_FILE,
    CONFIG_FILE,
    TOKENIZER_CONFIG_FILE,
    check_expected_sha256,
    check_files,
    read_json_object,
)
from ..checks.module_and_adapter import lora_config, module_and_config
from ..checks.predictions import Predictions
from ..checks.registry import DOWNLOAD, UNSIGNED, CheckedRun, run_checks
from ..hub.fetch import HubOptions, check_options, fetch_run, hub_options
from ..hub.signing import SignatureReport, SignerOptions, check_signer_identity, signer_options
from ..record.errors import (
    DataError,
    DownloadError,
    IncompatibleRunError,
    IntegrityError,
    first_line,
)
from ..record.manifest import MAX_TOKENIZER_BYTES, RESULTS_FILE, SIGNATURE_FILE
from ..record.results import Results, StockLoad
from ..record.text import SHA_PREFIX
from ..run.data import TaskData
from ..run.evaluate import classify, evaluate_stock
from ..run.models import pad_on_the_right
from .base_model import load_base_model

TOKENIZER_FILE = "tokenizer.json"


@dataclass
class VerifiedFiles:
    """A run folder whose files match its manifest.

    Attributes:
        folder: the checked folder (for a Hub repository, its snapshot in the huggingface_hub cache).
        results: its results.json.
        repo_id: the Hub repository, or `None` for a local folder.
        revision: the commit sha of the snapshot for a Hub repository, or `None` for a local folder.
        signature: what its model.sig says and whether it was verified (see [`pipeline.hub.signing`]).
        predictions: its predictions.csv as read and checked, None in a run written before predictions were
            recorded.
        second_predictions: its second evaluated split's (MNLI's mismatched), None for a task with one.
    """

    folder: Path
    results: Results
    repo_id: str | None
    revision: str | None
    signature: SignatureReport = UNSIGNED
    predictions: Predictions | None = None
    second_predictions: Predictions | None = None

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
        signature: what its model.sig says and whether it was verified (see [`pipeline.hub.signing`]).
    """

    model: PeftModel
    tokenizer: PreTrainedTokenizerBase
    results: Results
    folder: Path
    repo_id: str | None
    revision: str | None
    base_parameters: int
    signature: SignatureReport = UNSIGNED

    @property
    def source(self) -> str:
        """Where the run came from, for messages: `org/name@<commit>` or the folder."""
        return _source(self.folder, self.repo_id, self.revision)


def _source(folder: Path, repo_id: str | None, revision: str | None) -> str:
    if repo_id is None:
        return str(folder)
    return f"{repo_id}@{revision[:SHA_PREFIX]}" if revision else repo_id


# ------------------------------------------------------------------------------------------------------------
# Fetching and checking


class DownloadOptions(HubOptions, SignerOptions, total=False):
    """Where a run is fetched from and what it must be: the keyword arguments that [`download_verified`],
    [`load_verified`] and [`pipeline.verify.reverify.reverify`] share. Each defaults to None. The keys of
    [`HubOptions`] (endpoint, token, cache_dir, timeout, deadline) and of [`SignerOptions`] (require_signer,
    signer_issuer, require_key), and:

    Keys:
        expected_sha256: the sha256 of the run's results.json (at least its first 32 hex digits), as a run
            tag or `cards/` gives it: any other results.json is refused. By `main` or a commit sha nothing
            else can tell who wrote results.json (see SECURITY.md).

    Example:
        >>> options: DownloadOptions = {"timeout": 30, "require_signer": None}
        >>> download_verified("loopback-user/tiny-gpt2-none-sst2", "v1", **options).results.repo_name
        'tiny-gpt2-none-sst2'
    """

    expected_sha256: str | None


def download_verified(
    repo_or_path: str | os.PathLike,
    revision: str | None = None,
    allow_failed: bool = False,
    **options: typing.Unpack[DownloadOptions],
) -> VerifiedFiles:
    """Fetches a run and checks its files, without loading any weights.

    Args:
        repo_or_path: a local run folder, or a Hub model repository `org/name`. An existing folder wins over
            a repository of the same name.
        revision: a branch, tag or commit sha of the Hub repository (default: `main`). Not for a folder.
        allow_failed: accept a run whose status is FAIL.
        **options: where the run comes from and what it must be: the keys of [`DownloadOptions`] (endpoint,
            token, cache_dir, timeout, deadline, expected_sha256, require_signer, signer_issuer, require_key).

    Returns:
        [`VerifiedFiles`]: the folder, its results, for a Hub repository the commit sha, and its signature.

    Raises:
        [`RepoNotFoundError`], [`RevisionNotFoundError`], [`HubUnreachableError`], [`DownloadError`]: the
            download failed.
        [`UnknownSchemaError`], [`ResultsError`]: results.json is missing or unreadable.
        [`UnsafeFormatError`]: the run holds pickle weights.
        [`IntegrityError`]: a file is missing, changed, not in the manifest or not one a run folder holds;
            results.json is not the expected one; its figures disagree with their recomputation or the card.
        [`FailedCheckpointError`]: the recomputed status is FAIL and `allow_failed` is False.
        [`ModuleNotInstalledError`]: the run's attention module comes from a package that is not installed
            here; the message names the package and version (nothing is installed).
        [`IncompatibleRunError`]: attncard has no such module, or the installed one has another source sha256
            than the recorded one.
        [`SignatureError`]: a required signature is missing, by another signer, or does not match the files.
        [`InsecureEndpointError`]: the endpoint is plain http to a host other than this machine.
        [`HubDeadlineError`]: the download outlasted `deadline`.

    Example:
        >>> files = download_verified("loopback-user/tiny-gpt2-none-sst2", revision="v1")
        >>> files.results.verification.status, len(files.revision)
        (<Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>, 40)
    """
    check_options(options, DownloadOptions, "download_verified")
    expected_sha256 = options.get("expected_sha256")
    check_expected_sha256(expected_sha256)
    check_signer_identity(options.get("require_signer"))
    folder, repo_id, commit = _fetch(repo_or_path, revision, hub_options(options))
    run = CheckedRun(
        folder,
        _source(folder, repo_id, commit),
        repo_id=repo_id,
        revision=revision,
        expected_sha256=expected_sha256,
        allow_failed=allow_failed,
        signer=signer_options(options),
    )
    # Every check of pipeline.checks.registry.CHECKS a download has the needs of, in order.
    run_checks(DOWNLOAD, run)
    return VerifiedFiles(
        folder=folder,
        results=run.read(),
        repo_id=repo_id,
        revision=commit,
        signature=run.signature,
        predictions=run.predictions,
        second_predictions=run.second_predictions,
    )


def _fetch(
    repo_or_path: str | os.PathLike, revision: str | None, options: HubOptions
) -> tuple[Path, str | None, str | None]:
    """`(folder, repo_id, commit)`: a local folder as is, or the snapshot of a Hub repository."""
    text = os.fspath(repo_or_path)
    if not text.strip():  # Path("") is the current folder, which nobody means by an empty name
        raise DownloadError(
            f"{text!r} names no run: pass a run folder (./NAME for one here) or a Hub repository ORG/NAME"
        )
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
    fetched = fetch_run(text, revision, **options)
    return fetched.folder, text, fetched.commit


# ------------------------------------------------------------------------------------------------------------
# Rebuilding the model


def load_verified(
    repo_or_path: str | os.PathLike,
    revision: str | None = None,
    allow_failed: bool = False,
    *,
    base_model: str | os.PathLike | None = None,
    **options: typing.Unpack[DownloadOptions],
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
        base_model: the base model's folder, for a run trained on a local folder (results.json records it by
            name and weights sha256 only); its weights must have the recorded sha256.
        **options: where the run comes from and what it must be: the keys of [`DownloadOptions`]. A base
            model on the Hub is always read from the default endpoint, not `endpoint`.

    Returns:
        A [`VerifiedModel`]: the model in eval mode, its tokenizer, its results and where it came from.

    Raises:
        AttncardError: any error of [`download_verified`].
        IncompatibleRunError: the base model, module or adapter do not match the record (other weights, an
            unknown module, a module with other source, missing adapter weights), or the run's config.json
            differs from the base model's config in a field publish does not set (checked before any weight
            is allocated).
        IntegrityError: the run's tokenizer.json or tokenizer_config.json cannot be read.
        ModuleNotInstalledError: the module's package is not installed.
        ModelLoadError: the base model cannot be had (offline and not cached).

    Example:
        >>> from attncard.pipeline.run.data import load_task
        >>> from attncard.pipeline.scoring.metrics import predictions_sha256
        >>> verified = load_verified("loopback-user/tiny-gpt2-none-sst2", base_model="tiny-gpt2")
        >>> predictions = predict(verified, load_task("sst2", "glue"))
        >>> predictions_sha256(predictions) == verified.results.metrics.predictions_sha256
        True
    """
    check_options(options, DownloadOptions, "load_verified")
    return load_files(download_verified(repo_or_path, revision, allow_failed, **options), base_model)


def load_files(files: VerifiedFiles, base_model: str | os.PathLike | None) -> VerifiedModel:
    """Rebuilds the model of checked files; see [`load_verified`]."""
    # The new head and LoRA's factors draw random initial values, all overwritten from the adapter file; the
    # base model's load report lists the head as missing, by design.
    with torch.random.fork_rng(devices=[]), _transformers_errors_only():
        model, tokenizer, base_parameters = _rebuild(files, base_model)
    return VerifiedModel(
        model=model,
        tokenizer=tokenizer,
        results=files.results,
        folder=files.folder,
        repo_id=files.repo_id,
        revision=files.revision,
        base_parameters=base_parameters,
        signature=files.signature,
    )


@contextlib.contextmanager
def _transformers_errors_only() -> typing.Iterator[None]:
    """transformers logs errors only inside the block, and its previous verbosity afterwards; peft's
    deprecated question to transformers (library noise, as in pipeline.publish.publish) is not shown there."""
    previous = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
            )
            yield
    finally:
        transformers_logging.set_verbosity(previous)


def _rebuild(
    files: VerifiedFiles, base_model: str | os.PathLike | None
) -> tuple[PeftModel, PreTrainedTokenizerBase, int]:
    results, folder, where = files.results, files.folder, files.source
    labels = list(results.dataset.label_names)
    module, module_config = module_and_config(results, where)
    adapter_config = lora_config(
        folder, where, results.training.lora_target_modules, list(module.training.trainable_modules)
    )
    # No code from the repository: check_run_files refused auto_map and model types outside FAMILIES already.
    model_type = read_json_object(folder / CONFIG_FILE, where).get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise IncompatibleRunError(
            f"{where}: {CONFIG_FILE} has model_type {model_type!r}, which this transformers "
            f"({transformers_version}) does not know; install a newer transformers"
        )
    config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
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
    tokenizer = load_run_tokenizer(folder, where)  # before any weight: it is cheap, and may be malformed
    model = load_base_model(results, config, where, base_model)
    # As pipeline.run.models.load_model counts them: before the module, which may replace projections.
    base_parameters = sum(p.numel() for p in model.parameters())
    module.apply(model, module_config)
    stored = _adapter_weight_names(folder, where)
    try:  # inside `_transformers_errors_only` (load_files)
        model = PeftModel.from_pretrained(
            model, os.fspath(folder), config=adapter_config, is_trainable=False, torch_device="cpu"
        )
    except RuntimeError as error:  # torch's load_state_dict: a weight of another shape
        raise IncompatibleRunError(
            f"{where}: {ADAPTER_WEIGHTS_FILE} does not fit the rebuilt model ({first_line(error)}); "
            "the base model or module differ from the ones it was trained with"
        ) from error
    _check_adapter_weights(model, stored, where)
    model.eval()

    if not pad_on_the_right(tokenizer, model):  # as publish loaded it
        raise IncompatibleRunError(
            f"{where}: the tokenizer has neither a pad nor an EOS token, so batches cannot be padded; "
            "the run folder is inconsistent, publish it again"
        )
    return model, tokenizer, base_parameters


def load_run_tokenizer(folder: Path, where: str) -> PreTrainedTokenizerBase:
    """The run's tokenizer, as transformers loads it, with its files refused in one line when malformed.

    `tokenizer.json` is read by the `tokenizers` library first: for a file it cannot deserialize (invalid or
    truncated JSON, a field of the wrong type, an unknown model or normalizer type, nesting past its
    recursion limit) it raises a plain `Exception`. transformers then reads `tokenizer_config.json` and
    raises `TypeError` or `ValueError` for a field of the wrong type (a special token that is not a string,
    an `added_tokens_decoder` entry that is not a token).

    Args:
        folder: the checked run folder (no `auto_map`: [`pipeline.checks.integrity.check_run_files`]).
        where: the run, for messages.

    Returns:
        The tokenizer, as publish saved it.

    Raises:
        [`IntegrityError`]: one line naming the file and what the library said.

    Example:
        >>> load_run_tokenizer(Path("runs/tiny-gpt2-none-sst2"), "run").eos_token
        '<|endoftext|>'
    """
    path = folder / TOKENIZER_FILE
    if path.is_file():
        if path.stat().st_size > MAX_TOKENIZER_BYTES:
            raise IntegrityError(
                f"{where}: {TOKENIZER_FILE} is larger than {MAX_TOKENIZER_BYTES >> 20} MiB, which no "
                "tokenizer publish saves is; do not use this checkpoint"
            )
        try:
            Tokenizer.from_file(os.fspath(path))
        except Exception as error:
            if type(error) is not Exception:  # tokenizers' own error is exactly Exception; others are bugs
                raise
            raise IntegrityError(
                f"{where}: {TOKENIZER_FILE} is not a tokenizer the tokenizers library can read "
                f"({first_line(error)[:200]}); it is not the file publish wrote: do not use this checkpoint"
            ) from error
    try:
        return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except (TypeError, ValueError) as error:
        raise IntegrityError(
            f"{where}: transformers cannot build the tokenizer from {TOKENIZER_CONFIG_FILE} and "
            f"{TOKENIZER_FILE} ({first_line(error)[:200]}); they are not the files publish wrote: do not "
            "use this checkpoint"
        ) from error


def stock_load_files(
    files: VerifiedFiles,
    data: TaskData,
    base_model: str | os.PathLike | None = None,
    batch_size: int = 64,
) -> StockLoad:
    """The stock-loader fact of checked files, measured again: the adapter loaded by peft into the recorded
    base model with transformers' own attention, without the run's module, and evaluated on `data` (see
    [`pipeline.run.evaluate.stock_load`], which measured it at publish time).

    Args:
        files: a run from [`download_verified`].
        data: the recorded task, checked against the record by the caller.
        base_model: for a run trained on a local folder, that folder: see [`load_verified`].
        batch_size: rows per forward pass.

    Returns:
        A [`StockLoad`]: `same_model` for a module that keeps the model's own attention, else the accuracy
        and predictions hash with stock attention, or the error stock peft raised.
    """
    results, folder, where = files.results, files.folder, files.source
    module, _ = module_and_config(results, where)
    if not module.claims.changes_attention:
        return StockLoad(same_model=True)
    # adapter_config.json checked field by field, as the attncard loader reads it; stock peft reads the same.
    adapter_config = lora_config(
        folder, where, results.training.lora_target_modules, list(module.training.trainable_modules)
    )
    config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    with torch.random.fork_rng(devices=[]), _transformers_errors_only():
        tokenizer = load_run_tokenizer(folder, where)
        base = load_base_model(results, config, where, base_model)
        pad_on_the_right(tokenizer, base)
        max_length = results.training.hyperparameters.max_length
        return evaluate_stock(base.eval(), folder, tokenizer, data, max_length, batch_size, adapter_config)


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
        data: a task whose labels are the run's, e.g. from [`pipeline.run.data.load_task`].
        batch_size: rows per forward pass.

    Returns:
        The predicted label ids.

    Raises:
        [`DataError`]: the task's labels are not the run's.

    Example:
        >>> from attncard.pipeline.run.data import load_task
        >>> verified = load_verified("runs/tiny-gpt2-none-sst2", base_model="tiny-gpt2")
        >>> predictions = predict(verified, load_task("sst2", "glue"))
        >>> len(predictions), sorted(set(predictions))
        (40, [0, 1])
    """
    labels = list(verified.results.dataset.label_names)
    if list(data.spec.label_names) != labels:
        raise DataError(
            f"task {data.spec.name} has labels {list(data.spec.label_names)}, the model predicts {labels}; "
            f"pass the task it was trained on ({verified.results.dataset.task})"
        )
    return predict_logits(verified, data, batch_size).argmax(dim=-1).tolist()


def predict_logits(verified: VerifiedModel, data: TaskData, batch_size: int = 64) -> torch.Tensor:
    """The float logits of every row of `data.validation`, in order, `(rows, labels)`; see [`predict`]."""
    labels = list(verified.results.dataset.label_names)
    if list(data.spec.label_names) != labels:
        raise DataError(
            f"task {data.spec.name} has labels {list(data.spec.label_names)}, the model predicts {labels}; "
            f"pass the task it was trained on ({verified.results.dataset.task})"
        )
    max_length = verified.results.training.hyperparameters.max_length
    logits, _ = classify(verified.model, verified.tokenizer, data, max_length, batch_size)
    return logits


def check_output_folder(output: Path) -> None:
    """Refuses an output folder that cannot be made, before anything is fetched: one that is there and not an
    empty folder, one below a file, or one in a folder where nothing can be created (`/proc`, a read-only
    mount). Nothing is left behind: the check makes a scratch folder in the nearest existing folder and
    removes it.

    Args:
        output: the folder [`download_to`] will create.

    Raises:
        [`DownloadError`]: one line naming the path and what to pass instead.

    Example:
        >>> _ = Path("notes.txt").write_text("a file")
        >>> check_output_folder(Path("notes.txt/run"))
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.DownloadError: --output notes.txt/run: notes.txt is a file, not a
        folder, ...
    """
    nearest = output  # the nearest existing folder, once found
    try:
        nearest = next(folder for folder in (output, *output.parents) if folder.exists())
        if nearest == output and (not output.is_dir() or any(output.iterdir())):
            raise DownloadError(f"{output} exists and is not an empty folder; pass a new folder as --output")
        if not nearest.is_dir():
            raise DownloadError(
                f"--output {output}: {nearest} is a file, not a folder, so nothing can be created below it; "
                "pass a new folder as --output"
            )
        os.rmdir(tempfile.mkdtemp(prefix=".attncard-output-check-", dir=nearest))
    except OSError as error:
        raise DownloadError(
            f"--output {output}: no folder can be created in {nearest} "
            f"({error.strerror or first_line(error)}); pass a new folder in a place you can write to"
        ) from None


def download_to(
    repo: str, revision: str | None, allow_failed: bool, output: Path, options: DownloadOptions
) -> tuple[VerifiedFiles, Path]:
    """[`download_verified`] into a new temporary folder, then the run's checked files copied into `output`,
    a new (or empty) folder, and checked again there.

    Args:
        repo: Hub repository `ORG/NAME`, or a local run folder.
        revision: branch, tag or commit sha (default: main).
        allow_failed: accept a run whose status is FAIL.
        output: the folder to create.
        options: the [`DownloadOptions`] of the download; its `cache_dir` is the temporary folder.

    Returns:
        The checked files, with `folder` set to `output`, and `output`.

    Raises:
        [`DownloadError`]: `output` is there and not an empty folder, or any error of [`download_verified`].

    Example:
        >>> files, folder = download_to("loopback-user/tiny-gpt2-none-sst2", "v1", False, Path("my-run"), {})
        >>> folder, files.folder == folder.resolve(), (folder / "results.json").is_file()
        (PosixPath('my-run'), True, True)
    """
    output = output.expanduser()
    check_output_folder(output)
    with tempfile.TemporaryDirectory(prefix="attncard-download-") as cache:
        files = download_verified(repo, revision, allow_failed, **{**options, "cache_dir": cache})
        output.parent.mkdir(parents=True, exist_ok=True)
        partial = output.parent / f".{output.name}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        names = [*files.results.manifest, RESULTS_FILE]
        names += [SIGNATURE_FILE] if (files.folder / SIGNATURE_FILE).is_file() else []
        try:
            partial.mkdir()
            for name in names:
                (partial / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(files.folder / name, partial / name)
            check_files(partial, files.results.manifest, files.source, hub=files.repo_id is not None)
            if output.exists():
                output.rmdir()
            partial.rename(output)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    files = dataclasses.replace(files, folder=output.resolve())
    return files, output
