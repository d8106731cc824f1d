"""Re-verification: a downloaded run evaluated again on its recorded task, every figure of its card compared.

A self-consistent run — figures, card and manifest all agreeing — can still be invented by anyone with write
access. [`reverify`] catches it: it loads the run with [`pipeline.download.load_verified`] (every check of a
download), evaluates it on the recorded task's validation split (never data from the repository, and only
the recorded data: their sha256 or Hub commit must match), and compares every figure the card shows.
[`reverify_predictions`] recomputes the quality figures from the run's predictions.csv instead, in seconds and
without the model or its weights (a `cards/` copy will do): it checks the figures, not the model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .data import (
    HUB_DATASET_ID,
    TaskData,
    get_task,
    load_task,
    load_task_from_hub,
    sample_rows,
    task_statistics,
)

# The files every run folder must list in its manifest: without them there is nothing to rebuild or check.
from .download import (
    SHA_PREFIX,
    check_expected_sha256,
    download_verified,
    load_files,
    predict_logits,
    read_checked_files,
    read_results,
    refuse_contradictions,
    stock_load_files,
)
from .errors import (
    DataError,
    DownloadError,
    IntegrityError,
)
from .evaluate import count_deployed_parameters, predictions_sha256, quality_metrics
from .integrity import (
    Figure,
    figures,
    recorded_figure_problems,
)
from .paired import paired_comparison
from .predictions import Predictions, read_predictions, recompute
from .publish import baseline_predictions
from .results import (
    COMMIT_RE,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    Metrics,
    Results,
    Status,
    Verification,
    sha256_file,
)
from .verify import all_finite, verification_from_counts


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
        figures: every figure the card shows that can be recomputed (metrics, per-class scores, confusion
            matrix, verification, the accuracy with stock attention), recorded against recomputed.
        problems: one sentence per difference; empty when everything matches.
        matches: every figure equal.
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
    figures: list[Figure] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    matches: bool = False
    note: str = ""

    @property
    def data_matches(self) -> bool:
        return self.recorded_data_revision == self.data_revision and self.recorded_rows == self.rows


def reverify(
    repo_or_path: str | os.PathLike,
    revision: str | None = None,
    *,
    data_dir: str | os.PathLike | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    expected_sha256: str | None = None,
    base_model: str | os.PathLike | None = None,
    require_signer: str | None = None,
    signer_issuer: str | None = None,
    require_key: str | os.PathLike | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
) -> Reverification:
    """Reloads a published run, evaluates it again, and compares every figure its card shows.

    The run is loaded with [`load_verified`] (a FAIL run too) and its logits on the recorded task's
    validation split are computed again with the recorded batch size, on the CPU. From them every quality
    figure is recomputed as evaluation computes it (accuracy, F1, precision, recall, loss, confusion matrix,
    per-class scores, predictions hash), and the verification as [`pipeline.verify.verify`] decides it (p0,
    SE, threshold, p-value, Wilson interval, status, reasons), with the compression factor of the rebuilt
    model. For a module that changes attention, the adapter is also loaded as stock tools load it (peft on
    the base model, with its own attention) and its accuracy and predictions hash recomputed
    ([`pipeline.download.stock_load_files`]); a run recorded before that was measured has none to compare.
    Each must equal the recorded figure exactly: CPU evaluation is deterministic (on the same kind of
    CPU; a run evaluated on a GPU may differ in a borderline row, which `note` then says). Efficiency figures
    (time, memory) depend on the machine and are not compared.

    The data never come from the repository: `data_dir` (else `GLUE_DIR`) when given, else, for a run
    evaluated on the Hub's nyu-mll/glue, that dataset at the recorded commit. The validation file's sha256
    (or the dataset commit) must be the recorded one, else a [`DataError`].

    Args:
        repo_or_path: a local run folder, or a Hub model repository `org/name`.
        revision: a branch, tag or commit sha of the Hub repository (default: `main`).
        data_dir: a folder of GLUE TSV files.
        endpoint: the Hub to download the run from.
        token: a Hub token for a private or gated repository.
        cache_dir: the folder to download into. By default a Hub run is downloaded into a new temporary
            folder, so the server's current files are the ones checked.
        expected_sha256: the sha256 of the run's results.json: see [`download_verified`].
        base_model: the base model's folder, for a run trained on a local folder: see [`load_verified`].
        require_signer: the identity the run must be signed by: see [`download_verified`].
        signer_issuer: the OIDC issuer of `require_signer`: see [`download_verified`].
        require_key: the public key (PEM) the run must be signed with: see [`download_verified`].
        timeout: seconds each network operation may take: see [`download_verified`].
        deadline: seconds the whole download may take: see [`download_verified`].

    Returns:
        A [`Reverification`]; its `matches` says whether everything is equal, `problems` what is not.

    Raises:
        AttncardError: any error of [`load_verified`].
        DataError: the task's data cannot be had or are not the recorded data.

    Example:
        >>> check = reverify("loopback-user/tiny-gpt2-none-sst2", data_dir="glue", base_model="tiny-gpt2")
        >>> check.matches, check.recomputed_status, check.problems
        (True, <Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>, [])
    """
    with contextlib.ExitStack() as stack:
        if cache_dir is None and not Path(os.fspath(repo_or_path)).expanduser().is_dir():
            cache_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="attncard-verify-"))
        files = download_verified(
            repo_or_path,
            revision,
            allow_failed=True,
            endpoint=endpoint,
            token=token,
            cache_dir=cache_dir,
            expected_sha256=expected_sha256,
            require_signer=require_signer,
            signer_issuer=signer_issuer,
            require_key=require_key,
            timeout=timeout,
            deadline=deadline,
        )
        # The data first: they are checked against the record before any weight is loaded.
        data = _recorded_task(files.results, data_dir, files.source)
        verified = load_files(files, base_model)
        results = verified.results
        # The stock-loader line of the card: the adapter with the model's own attention, measured again.
        stock = (
            None
            if results.stock is None
            else stock_load_files(files, data, base_model, batch_size=results.efficiency.batch_size)
        )
    labels = list(data.validation["label"])
    logits = predict_logits(verified, data, batch_size=results.efficiency.batch_size)
    metrics = quality_metrics(logits, labels, data.spec.label_names)
    counts = [labels.count(i) for i in range(len(data.spec.label_names))]
    compression = verified.base_parameters / count_deployed_parameters(verified.model)
    correct = int((logits.argmax(dim=-1) == torch.tensor(labels)).sum())
    verification = verification_from_counts(
        counts, correct, data.spec.label_names, compression, all_finite(dataclasses.asdict(metrics))
    )
    device = results.efficiency.device
    check = _reverification(
        results,
        metrics,
        verification,
        data,
        source=verified.source,
        repo_id=verified.repo_id,
        revision=verified.revision,
        compared=[
            *figures("metrics", results.metrics, metrics),
            *figures("verification", results.verification, verification),
            Figure("parameters.compression_factor", results.parameters.compression_factor, compression),
            Figure("dataset.revision", results.dataset.revision, data.source.revision),
            *(figures("stock", results.stock, stock) if stock is not None else []),
            *_data_figures(results, data, verified.tokenizer),
        ],
        note=""
        if device == "cpu"
        else (
            f"the run was evaluated on {device} ({results.efficiency.device_name}) and this check on the "
            "CPU: float rounding differs between them, which can move a borderline prediction"
        ),
    )
    return settled(check)


def _reverification(
    results: Results,
    metrics: Metrics,
    verification: Verification,
    data: TaskData,
    *,
    source: str,
    repo_id: str | None,
    revision: str | None,
    compared: list[Figure],
    note: str = "",
) -> Reverification:
    """The check of a run's recorded figures against those recomputed now (`metrics` and `verification`,
    on `data`'s validation split), before [`settled`] compares them."""
    return Reverification(
        source=source,
        repo_id=repo_id,
        revision=revision,
        recorded_accuracy=results.metrics.accuracy,
        recomputed_accuracy=metrics.accuracy,
        recorded_status=results.verification.status,
        recomputed_status=verification.status,
        recorded_predictions_sha256=results.metrics.predictions_sha256,
        recomputed_predictions_sha256=metrics.predictions_sha256,
        recorded_compression_factor=results.parameters.compression_factor,
        recomputed_compression_factor=verification.compression_factor,
        recorded_data_revision=results.dataset.revision,
        data_revision=data.source.revision,
        recorded_rows=results.verification.n,
        rows=len(data.validation),
        threshold=verification.threshold,
        reasons=verification.reasons,
        figures=compared,
        note=note,
    )


def settled(check: Reverification) -> Reverification:
    """`check` with `problems` (each figure that differs, recomputed then recorded) and `matches` set."""
    check.problems = [
        f"{figure.name} {shown(figure.recomputed)} recomputed, {shown(figure.recorded)} recorded"
        for figure in check.figures
        if not figure.equal()
    ]
    check.matches = not check.problems
    return check


def reverify_predictions(
    run_dir: str | os.PathLike,
    *,
    data_dir: str | os.PathLike | None = None,
    expected_sha256: str | None = None,
    baselines: list[str | os.PathLike] | None = None,
) -> Reverification:
    """Recomputes every quality figure of a run from its predictions.csv, without its model or weights.

    For a local run folder, or its `cards/` copy (every file but the weights). The folder is checked as a
    download checks it, except that the weight files (`*.safetensors`) may be absent: results.json field by
    field (against `expected_sha256` when given) and its figures against each other, no pickle, every file
    that is there listed in the manifest with its sha256, only files a run folder holds, no remote code.
    Then predictions.csv is read line by line ([`pipeline.predictions.read_predictions`]) and its gold labels
    compared with the recorded task's evaluated split, read as [`reverify`] reads it (never from the
    repository). From the logits every quality figure is recomputed as evaluation computes it (accuracy, F1,
    precision, recall, loss, confusion matrix, per-class scores, predictions hash) and the verification as
    [`pipeline.verify.verify`] decides it (p0, SE, threshold, p-value, Wilson interval, status, reasons),
    with results.json's parameter counts (the deployed parameters need the model); also the dataset revision
    and sample rows. The paired verdict against the dense model, when the run records one, is recomputed
    from this predictions.csv and the dense run's ([`comparison_figures`]). It takes seconds.

    What it cannot tell: whether the model predicts these logits; [`reverify`] evaluates the model again.

    Args:
        run_dir: a local run folder, or its copy in `cards/`.
        data_dir: a folder of GLUE TSV files (default: `GLUE_DIR`, else the recorded Hub dataset).
        expected_sha256: the sha256 of the run's results.json (at least 32 hex digits), e.g. from git.
        baselines: folders holding the dense runs the verdict names (default: the run folder's parent, where
            a sweep or `cards/` puts them).

    Returns:
        A [`Reverification`]; its `matches` says whether everything is equal, `problems` what is not.

    Raises:
        DownloadError: `run_dir` is not a folder.
        IntegrityError: a file is missing, differs from its manifest sha256 or is not part of the run, a
            figure of results.json contradicts the others, or the manifest lists no predictions.csv (a run
            written before they were recorded: verify it with its model).
        ResultsError: its results.json cannot be read.
        UnsafeFormatError: the folder holds pickle weights, which attncard never loads.
        IncompatibleRunError: attncard has no such module, or the installed one has another source sha256.
        DataError: the task's data cannot be had or are not the recorded data.

    Example:
        >>> check = reverify_predictions("runs/tiny-gpt2-none-sst2", data_dir="glue")
        >>> check.matches, check.recomputed_status, check.problems
        (True, <Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>, [])
    """
    check_expected_sha256(expected_sha256)
    folder = Path(os.fspath(run_dir)).expanduser()
    if not os.fspath(run_dir).strip():  # Path("") is the current folder, which nobody means by an empty name
        raise DownloadError(
            f"{os.fspath(run_dir)!r} names no run folder; pass a local run folder or its cards/ copy"
        )
    if not folder.is_dir():
        raise DownloadError(
            f"{run_dir}: no such run folder; --predictions checks a local run folder or its cards/ copy "
            "(download a Hub run first: attncard download ORG/NAME --output DIR)"
        )
    where = str(folder)
    results = read_checked_files(folder, expected_sha256, where, weights_optional=True)
    refuse_contradictions(recorded_figure_problems(results), where)
    if PREDICTIONS_FILE not in results.manifest:
        raise IntegrityError(
            f"{where}: the manifest in {RESULTS_FILE} lists no {PREDICTIONS_FILE} (the run was written "
            "before attncard recorded predictions); verify it with its model: attncard verify RUN"
        )
    predictions = read_predictions(folder, results, where)
    data = _recorded_task(results, data_dir, where)
    metrics, verification = recompute(predictions, results)
    labels = list(data.validation["label"])
    # The file's gold labels against the data's (their hashes, as the predictions are hashed), first row off.
    pairs = zip(predictions.labels, labels, strict=True)
    differing = [row for row, (written, read) in enumerate(pairs) if written != read]
    label_check = Figure(
        f"{PREDICTIONS_FILE} gold labels" + (f" (first differing: row {differing[0]})" if differing else ""),
        predictions_sha256(predictions.labels),
        predictions_sha256(labels),
    )
    samples = sample_rows(data.validation, data.spec, count=len(results.dataset.samples))
    check = _reverification(
        results,
        metrics,
        verification,
        data,
        source=where,
        repo_id=None,
        revision=None,
        compared=[
            label_check,
            *figures("metrics", results.metrics, metrics),
            *figures("verification", results.verification, verification),
            Figure("dataset.revision", results.dataset.revision, data.source.revision),
            *figures("dataset.samples", results.dataset.samples, samples),
            *comparison_figures(results, predictions, [folder.parent] if baselines is None else baselines),
        ],
    )
    return settled(check)


def comparison_figures(
    results: Results, predictions: Predictions, folders: list[str | os.PathLike]
) -> list[Figure]:
    """The run's paired verdict recomputed from its predictions and its dense baselines' predictions.csv.

    Each baseline the verdict names is looked for by its folder name in `folders`; its results.json must
    have the recorded sha256, and its predictions.csv must check against it. With several baselines (pooled
    seeds) their predictions are compared in the recorded order, each against this run's rows.

    Raises:
        [`IntegrityError`]: a named baseline is missing, is not the recorded one, or its predictions do not
            check.
    """
    recorded = results.comparison
    if recorded is None or not recorded.baselines:
        return []
    module_predictions, dense_predictions, labels = [], [], []
    for baseline in recorded.baselines:
        candidates = [Path(os.fspath(root)) / baseline.repo_name for root in folders]
        found = [candidate for candidate in candidates if (candidate / RESULTS_FILE).is_file()]
        if not found:
            raise IntegrityError(
                f"the dense baseline {baseline.repo_name} of the paired verdict is not in "
                f"{', '.join(str(root) for root in folders)}; put its run folder or cards copy there, or "
                "pass --baseline DIR"
            )
        if sha256_file(found[0] / RESULTS_FILE) != baseline.results_sha256:
            raise IntegrityError(
                f"{found[0]}: its {RESULTS_FILE} is not the one the paired verdict names (sha256 "
                f"{baseline.results_sha256[:SHA_PREFIX]}…)"
            )
        dense = baseline_predictions(found[0], read_results(found[0], str(found[0])))
        labels += predictions.labels
        module_predictions += predictions.predictions
        dense_predictions += dense.predictions
    recomputed = paired_comparison(
        labels,
        module_predictions,
        dense_predictions,
        baselines=recorded.baselines,
        margin=recorded.margin,
        confidence=recorded.confidence,
    )
    return figures("comparison", recorded, recomputed)


def _data_figures(results: Results, data: TaskData, tokenizer) -> list[Figure]:
    """The card's dataset statistics and sample rows, computed again from the data with the run's tokenizer
    (when results.json has statistics)."""
    statistics = {}
    if results.dataset.statistics:  # none in a run written before they were recorded
        statistics = task_statistics(data, tokenizer, results.training.hyperparameters.max_length)
    samples = sample_rows(data.validation, data.spec, count=len(results.dataset.samples))
    return [
        *figures("dataset.statistics", results.dataset.statistics, statistics),
        *figures("dataset.samples", results.dataset.samples, samples),
    ]


def shown(value: object) -> str:
    """A figure as messages show it: hashes shortened, floats in full."""
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value):
        return f"{value[:SHA_PREFIX]}…"
    return repr(value) if isinstance(value, float) else str(value)


def _recorded_task(results: Results, data_dir: str | os.PathLike | None, where: str) -> TaskData:
    """The recorded task's data, never from the repository, and only when they are the recorded data."""
    record = results.dataset
    data_dir = data_dir or os.environ.get("GLUE_DIR") or None
    if data_dir:
        data = load_task(record.task, data_dir)
    elif record.dataset_id == HUB_DATASET_ID and COMMIT_RE.fullmatch(record.revision):
        data = load_task_from_hub(get_task(record.task), revision=record.revision)
    else:
        raise DataError(
            f"{where}: the run was evaluated on GLUE TSV files ({record.task}, validation "
            f"{record.revision[: 7 + SHA_PREFIX]}…); pass --data-dir (data_dir=) or set GLUE_DIR to a folder "
            "with the same files"
        )
    if data.source.revision != record.revision or len(data.validation) != results.verification.n:
        raise DataError(
            f"{where}: the {record.task} validation data here ({data.source.revision[: 7 + SHA_PREFIX]}…, "
            f"{len(data.validation)} rows) are not the data the run was evaluated on "
            f"({record.revision[: 7 + SHA_PREFIX]}…, {results.verification.n} rows); pass --data-dir with "
            "the same GLUE files"
        )
    return data
