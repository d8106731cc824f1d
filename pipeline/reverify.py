"""Re-verification: a downloaded run evaluated again on its recorded task, every figure of its card compared.

A self-consistent run — figures, card and manifest all agreeing — can still be invented by anyone with write
access. [`reverify`] catches it: it loads the run with [`pipeline.download.load_verified`] (every check of a
download), evaluates it on the recorded task's validation split (never data from the repository, and only
the recorded data: their sha256 or Hub commit must match), and compares every figure the card shows.
[`pipeline.reverify_predictions.reverify_predictions`] recomputes the quality figures from the run's
predictions.csv instead, in seconds, without the model or its weights (a `cards/` copy will do) and without
torch: it checks the figures, not the model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import typing
from pathlib import Path

import torch

from .data import TaskData, get_task, load_task, load_task_from_hub, sample_rows, task_statistics
from .download import (
    DownloadOptions,
    VerifiedModel,
    download_verified,
    load_files,
    predict_logits,
    stock_load_files,
)
from .errors import DataError
from .evaluate import count_deployed_parameters
from .hub_io import check_options
from .integrity import Figure, evaluated_figures, figures, official_metric_of
from .metrics import quality_metrics
from .results import Metrics, Results, Verification
from .reverify_predictions import Reverification, check_recorded_data, recorded_data_dir, reverification
from .verify import all_finite, both_gates, verification_from_counts


def reverify(
    repo_or_path: str | os.PathLike,
    revision: str | None = None,
    *,
    data_dir: str | os.PathLike | None = None,
    base_model: str | os.PathLike | None = None,
    **options: typing.Unpack[DownloadOptions],
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
    Each must equal the recorded figure exactly, but for the floats another scipy or numpy computes in other
    last bits, compared within their tolerance ([`pipeline.tolerances.FIGURE_TOLERANCES`]): CPU evaluation
    is deterministic (on the same kind of CPU; a run evaluated on a GPU may differ in a borderline row, which
    `note` then says). Efficiency figures (time, memory) depend on the machine and are not compared.

    The data never come from the repository: `data_dir` (else `GLUE_DIR`) when given, else, for a run
    evaluated on the Hub's nyu-mll/glue, that dataset at the recorded commit. The validation file's sha256
    (or the dataset commit) must be the recorded one, else a [`DataError`].

    Args:
        repo_or_path: a local run folder, or a Hub model repository `org/name`.
        revision: a branch, tag or commit sha of the Hub repository (default: `main`).
        data_dir: a folder of GLUE TSV files.
        base_model: the base model's folder, for a run trained on a local folder: see [`load_verified`].
        **options: where the run comes from and what it must be: the keys of [`DownloadOptions`]. Without
            `cache_dir` a Hub run is downloaded into a new temporary folder, so the server's current files
            are the ones checked.

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
    check_options(options, DownloadOptions, "reverify")
    with contextlib.ExitStack() as stack:
        if options.get("cache_dir") is None and not Path(os.fspath(repo_or_path)).expanduser().is_dir():
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="attncard-verify-"))
            options = {**options, "cache_dir": scratch}
        files = download_verified(repo_or_path, revision, allow_failed=True, **options)
        # The data first: they are checked against the record before any weight is loaded.
        data = recorded_task(files.results, data_dir, files.source)
        verified = load_files(files, base_model)
        results = verified.results
        # The stock-loader line of the card: the adapter with the model's own attention, measured again.
        stock = (
            None
            if results.stock is None
            else stock_load_files(files, data, base_model, batch_size=results.efficiency.batch_size)
        )
    compression = verified.base_parameters / count_deployed_parameters(verified.model)
    metrics, verification = _scored(verified, data, results, compression)
    second_figures = []
    if (second := results.second_split) is not None:  # MNLI's mismatched genres: evaluated and gated too
        second_data = data.second_split_data()
        if len(second_data.validation) != second.verification.n:
            raise DataError(
                f"the {second.split} data here have {len(second_data.validation)} rows, the run was "
                f"evaluated on {second.verification.n}; pass --data-dir with the same GLUE files"
            )
        second_metrics, second_verification = _scored(verified, second_data, results, compression)
        verification = both_gates(verification, second_verification, second.split)
        second_figures = evaluated_figures(second, second_metrics, second_verification)
    device = results.efficiency.device
    return reverification(
        results,
        metrics,
        verification,
        data.source,
        len(data.validation),
        source=verified.source,
        repo_id=verified.repo_id,
        revision=verified.revision,
        compared=[
            *evaluated_figures(results, metrics, verification),
            Figure("parameters.compression_factor", results.parameters.compression_factor, compression),
            Figure("dataset.revision", results.dataset.revision, data.source.revision),
            *(figures("stock", results.stock, stock) if stock is not None else []),
            *_data_figures(results, data, verified.tokenizer),
            *second_figures,
        ],
        note=""
        if device == "cpu"
        else (
            f"the run was evaluated on {device} ({results.efficiency.device_name}) and this check on the "
            "CPU: float rounding differs between them, which can move a borderline prediction"
        ),
    )


def _scored(
    verified: VerifiedModel, data: TaskData, results: Results, compression: float
) -> tuple[Metrics, Verification]:
    """The metrics of `data.validation` from the model's predictions now, and that split's own gate."""
    labels = list(data.validation["label"])
    logits = predict_logits(verified, data, batch_size=results.efficiency.batch_size)
    metrics = quality_metrics(logits.numpy(), labels, data.spec.label_names, *official_metric_of(results))
    counts = [labels.count(i) for i in range(len(data.spec.label_names))]
    correct = int((logits.argmax(dim=-1) == torch.tensor(labels)).sum())
    finite = all_finite(dataclasses.asdict(metrics))
    return metrics, verification_from_counts(counts, correct, data.spec.label_names, compression, finite)


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


def recorded_task(results: Results, data_dir: str | os.PathLike | None, where: str) -> TaskData:
    """The recorded task's data ([`pipeline.reverify_predictions.recorded_data_dir`]), when they are the
    recorded data ([`pipeline.reverify_predictions.check_recorded_data`])."""
    data_dir = recorded_data_dir(results, data_dir, where)
    if data_dir:
        data = load_task(results.dataset.task, data_dir)
    else:
        data = load_task_from_hub(get_task(results.dataset.task), revision=results.dataset.revision)
    check_recorded_data(results, data.source.revision, len(data.validation), where)
    return data
