"""Re-verification: a downloaded run evaluated again on its recorded task, every figure of its card compared.

A self-consistent run — figures, card and manifest all agreeing — can still be invented by anyone with write
access. [`reverify`] catches it: it loads the run with [`pipeline.verify.download.load_verified`] (every check
of a download), evaluates it on the recorded task's validation split (never data from the repository, and only
the recorded data: their sha256 or Hub commit must match), and compares every figure the card shows.
[`pipeline.verify.reverify_predictions.reverify_predictions`] recomputes the quality figures from the run's
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

import numpy as np
import torch

from ..checks.figures import Figure, evaluated_figures, figures, official_metric_of
from ..checks.predictions import Predictions
from ..checks.reverification import Reverification, check_recorded_data, recorded_data_dir, reverification
from ..hub.fetch import check_options
from ..record.errors import DataError
from ..record.results import Metrics, Results, Verification
from ..run.data import TaskData, load_task, load_task_from_hub, sample_rows, task_statistics
from ..run.evaluate import count_deployed_parameters
from ..scoring.gate import all_finite, both_gates, verification_from_counts
from ..scoring.metrics import quality_metrics
from ..scoring.tasks import get_task
from .download import (
    DownloadOptions,
    VerifiedModel,
    download_verified,
    load_files,
    predict_logits,
    stock_load_files,
)

# How far a logit evaluated again may be from the recorded one, absolutely: another CPU, thread count or torch
# version sums the same products in another order (float32), and a GPU rounds differently again. A row whose
# recorded margin (top logit minus the next) is within twice this can change its prediction honestly; any
# other row must predict what predictions.csv records. Measured (bench/logit_noise.py): the tests' tiny GPT-2
# run, 1 against 2 threads, batch size 1 against 8, at most 4.8e-7 (logits up to 2.4); a MiniLM-L6 SST-2 run
# (872 rows, logits up to 1.3, its smallest recorded margin 6.1e-5), 1 or 2 threads, batch size 1 or 64
# against the recorded batch of 64: at most 2.6e-6, no row flipped. A GPU against a CPU is not measured.
LOGIT_NOISE = 1e-4


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
    per-class scores, predictions hash), and the verification as [`pipeline.scoring.gate.verify`] decides it
    (p0, SE, threshold, p-value, Wilson interval, status, reasons), with the compression factor of the rebuilt
    model. For a module that changes attention, the adapter is also loaded as stock tools load it (peft on
    the base model, with its own attention) and its accuracy and predictions hash recomputed
    ([`pipeline.verify.download.stock_load_files`]); a run recorded before that was measured has none to
    compare. Each must equal the recorded figure exactly, but for the floats another scipy or numpy computes
    in other last bits, compared within their tolerance ([`pipeline.scoring.tolerances.FIGURE_TOLERANCES`]):
    CPU evaluation is deterministic (on the same kind of CPU; a run evaluated on a GPU may differ in a
    borderline row, which `note` then says). Efficiency figures (time, memory) depend on the machine and are
    not compared.

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
        stock_load = (
            None
            if results.stock is None
            else stock_load_files(files, data, base_model, batch_size=results.efficiency.batch_size)
        )
    compression = verified.base_parameters / count_deployed_parameters(verified.model)
    flips = Flips()
    metrics, verification = _scored(verified, data, results, compression, files.predictions, flips)
    second_figures = []
    if (second := results.second_split) is not None:  # MNLI's mismatched genres: evaluated and gated too
        second_data = data.second_split_data()
        if len(second_data.validation) != second.verification.n:
            raise DataError(
                f"the {second.split} data here have {len(second_data.validation)} rows, the run was "
                f"evaluated on {second.verification.n}; pass --data-dir with the same GLUE files"
            )
        second_metrics, second_verification = _scored(
            verified, second_data, results, compression, files.second_predictions, flips
        )
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
            *(figures("stock", results.stock, stock_load) if stock_load is not None else []),
            *_data_figures(results, data, verified.tokenizer),
            *second_figures,
        ],
        note="; ".join(
            note
            for note in (
                _flips_note(flips, device),
                ""
                if device == "cpu"
                else (
                    f"the run was evaluated on {device} ({results.efficiency.device_name}) and this check on "
                    "the CPU: float rounding differs between them, which can move a borderline prediction"
                ),
            )
            if note
        ),
    )


@dataclasses.dataclass
class Flips:
    """Rows whose prediction now differs from the one predictions.csv records ([`near_tie_flips`]).

    Attributes:
        allowed: rows whose recorded margin is within the noise of a recomputation (`2 · LOGIT_NOISE`) and
            whose logits are within `LOGIT_NOISE` of the recorded ones: their recorded prediction stands.
        refused: every other row that flipped: the model does not predict what was recorded.
    """

    allowed: list[int] = dataclasses.field(default_factory=list)
    refused: list[int] = dataclasses.field(default_factory=list)


def near_tie_flips(recorded: np.ndarray, logits: np.ndarray, noise: float = LOGIT_NOISE) -> Flips:
    """Which rows of `logits` (evaluated now) predict another label than the `recorded` logits, and which of
    those may: a row whose recorded top-1 minus top-2 logit is at most `2 · noise`, and whose logits now are
    each within `noise` of the recorded ones, is a near tie that another machine can break the other way.

    Example:
        >>> recorded = np.array([[0.5, 0.50005], [0.1, 0.4]], dtype=np.float32)
        >>> now = np.array([[0.50003, 0.50002], [0.4, 0.1]], dtype=np.float32)
        >>> near_tie_flips(recorded, now)
        Flips(allowed=[0], refused=[1])
    """
    recorded, logits = np.asarray(recorded, dtype=np.float64), np.asarray(logits, dtype=np.float64)
    flipped = np.flatnonzero(recorded.argmax(axis=-1) != logits.argmax(axis=-1))
    top = np.sort(recorded, axis=-1)
    margins = top[:, -1] - top[:, -2] if recorded.shape[1] > 1 else np.zeros(len(recorded))
    close = np.abs(recorded - logits).max(axis=-1) <= noise
    allowed = [int(row) for row in flipped if margins[row] <= 2 * noise and close[row]]
    return Flips(allowed=allowed, refused=[int(row) for row in flipped if int(row) not in allowed])


def _scored(
    verified: VerifiedModel,
    data: TaskData,
    results: Results,
    compression: float,
    recorded: Predictions | None,
    flips: Flips,
) -> tuple[Metrics, Verification]:
    """The metrics of `data.validation` from the model's predictions now, and that split's own gate. A near
    tie that flipped ([`near_tie_flips`]) keeps its recorded logits (so its recorded prediction); the rows
    are added to `flips`."""
    labels = list(data.validation["label"])
    logits = predict_logits(verified, data, batch_size=results.efficiency.batch_size).numpy()
    if recorded is not None and recorded.logits.shape == logits.shape:
        found = near_tie_flips(recorded.logits, logits, LOGIT_NOISE)
        if found.allowed:
            logits = logits.copy()
            logits[found.allowed] = recorded.logits[found.allowed]
        flips.allowed += found.allowed
        flips.refused += found.refused
    metrics = quality_metrics(logits, labels, data.spec.label_names, *official_metric_of(results))
    counts = [labels.count(i) for i in range(len(data.spec.label_names))]
    correct = int((torch.from_numpy(logits).argmax(dim=-1) == torch.tensor(labels)).sum())
    finite = all_finite(dataclasses.asdict(metrics))
    return metrics, verification_from_counts(counts, correct, data.spec.label_names, compression, finite)


def _flips_note(flips: Flips, device: str) -> str:
    """What the check says of rows that predict another label now: near ties kept as recorded, others."""
    notes = []
    if flips.allowed:
        shown = ", ".join(map(str, flips.allowed[:10])) + (" …" if len(flips.allowed) > 10 else "")
        notes.append(
            f"{len(flips.allowed)} near-tie row(s) ({shown}) predict the other label here, within the noise "
            f"of a recomputation ({LOGIT_NOISE:g} on a logit); their recorded predictions are kept"
        )
    if flips.refused:
        shown = ", ".join(map(str, flips.refused[:10])) + (" …" if len(flips.refused) > 10 else "")
        notes.append(
            f"{len(flips.refused)} row(s) ({shown}) predict another label than recorded, beyond the "
            f"{LOGIT_NOISE:g} a logit may differ by on another machine"
        )
    return "; ".join(notes)


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
    """The recorded task's data ([`pipeline.checks.reverification.recorded_data_dir`]), when they are the
    recorded data ([`pipeline.checks.reverification.check_recorded_data`])."""
    data_dir = recorded_data_dir(results, data_dir, where)
    if data_dir:
        data = load_task(results.dataset.task, data_dir)
    else:
        data = load_task_from_hub(get_task(results.dataset.task), revision=results.dataset.revision)
    check_recorded_data(results, data.source.revision, len(data.validation), where)
    return data
