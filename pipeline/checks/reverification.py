"""The figures of a run recomputed from its predictions.csv and the task's data, against the recorded ones: a
[`Reverification`], what `attncard verify --predictions` answers and what the `figures from predictions`
check of [`pipeline.checks.registry`] records; [`pipeline.verify.reverify`] compares a model evaluated again
against the same [`Reverification`]. Imports no torch: `verify --predictions` runs without it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..record.errors import DataError, IntegrityError
from ..record.manifest import PREDICTIONS_FILE, RESULTS_FILE, SECOND_PREDICTIONS_FILE, sha256_file
from ..record.results import Metrics, Results, SplitResult, Status, Verification
from ..record.text import COMMIT_RE, SHA_PREFIX
from ..run.data import DataSource, ValidationSplit, load_validation, sample_rows
from ..scoring.metrics import get_official_metric, mcc_difference, predictions_sha256
from ..scoring.paired import paired_comparison
from ..scoring.tasks import HUB_DATASET_ID
from ..scoring.tolerances import difference_note
from .figures import Figure, evaluated_figures, figures
from .integrity import read_results
from .predictions import Predictions, baseline_predictions, prediction_figures, recompute


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
            int64 little-endian, in split order (as [`pipeline.run.evaluate.evaluate`] hashes them).
        recorded_compression_factor, recomputed_compression_factor: parameters before / after (LoRA merged).
        recorded_data_revision, data_revision: `results.dataset.revision` and that of the data evaluated now
            (`sha256:<hex>` of the validation file, or the Hub commit of nyu-mll/glue).
        recorded_rows, rows: rows of the evaluated split.
        threshold: the recomputed majority share + 3 SE the accuracy is held against.
        reasons: the reasons for the recomputed status, as [`pipeline.scoring.gate.decide_status`] gives them.
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


def reverification(
    results: Results,
    metrics: Metrics,
    verification: Verification,
    data: DataSource,
    rows: int,
    *,
    source: str,
    repo_id: str | None,
    revision: str | None,
    compared: list[Figure],
    note: str = "",
) -> Reverification:
    """The check of a run's recorded figures against those recomputed now (`metrics` and `verification`, on
    the `rows` of the validation split from `data`), each of `compared` told equal or not ([`settled`])."""
    check = Reverification(
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
        data_revision=data.revision,
        recorded_rows=results.verification.n,
        rows=rows,
        threshold=verification.threshold,
        reasons=verification.reasons,
        figures=compared,
        note=note,
    )
    return settled(check)


def settled(check: Reverification) -> Reverification:
    """`check` with `problems` (each figure that differs, recomputed then recorded) and `matches` set."""
    check.problems = [
        f"{figure.name} {shown(figure.recomputed)} recomputed, {shown(figure.recorded)} recorded"
        + (f" ({note})" if (note := difference_note(figure.name, figure.recorded, figure.recomputed)) else "")
        for figure in check.figures
        if not figure.equal()
    ]
    check.matches = not check.problems
    return check


def shown(value: object) -> str:
    """A figure as messages show it: hashes shortened, floats in full."""
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value):
        return f"{value[:SHA_PREFIX]}…"
    return repr(value) if isinstance(value, float) else str(value)


def predictions_reverification(
    results: Results,
    predictions: Predictions,
    second_predictions: Predictions | None,
    folder: Path,
    where: str,
    data_dir: str | os.PathLike | None,
    baselines: list[str | os.PathLike],
) -> Reverification:
    """Every quality figure of a checked run recomputed from its predictions.csv and the recorded task's data,
    and its paired verdict from its dense baselines' predictions.csv (see
    [`pipeline.verify.reverify_predictions.reverify_predictions`]).

    Args:
        results: the run's results.json, checked.
        predictions, second_predictions: its predictions.csv as read and checked (and its second split's, or
            None for a task with one).
        folder: the run folder.
        where: the run, for messages.
        data_dir: a folder of GLUE TSV files (default: `GLUE_DIR`, else the recorded Hub dataset).
        baselines: folders holding the dense runs the paired verdict names.

    Returns:
        A [`Reverification`]: every figure recorded against recomputed.

    Raises:
        [`DataError`]: the task's data cannot be had or are not the recorded data.
        [`IntegrityError`]: a dense baseline the verdict names is missing or not the recorded one.
    """
    split = recorded_validation(results, data_dir, where)
    metrics, verification = recompute(predictions, results)
    label_check = _gold_label_figure(predictions, split.labels, PREDICTIONS_FILE)
    samples = sample_rows(split.rows, split.spec, count=len(results.dataset.samples))
    second_figures = []
    if (second := results.second_split) is not None and second_predictions is not None:
        second_data = recorded_validation(results, data_dir, where, second=True)  # its own rows and gate
        recorded_file = results.dataset.files.get(second.split, {}).get("sha256")
        second_figures = [
            _gold_label_figure(
                second_predictions, second_data.labels, SECOND_PREDICTIONS_FILE.format(split=second.split)
            ),
            *prediction_figures(second_predictions, results, second),
        ]
        if second_data.source.files:  # a GLUE folder: its file must be the one evaluated
            read = second_data.source.files[second.split]["sha256"]
            second_figures.append(Figure(f"dataset.files.{second.split}.sha256", recorded_file, read))
    return reverification(
        results,
        metrics,
        verification,
        split.source,
        len(split.rows),
        source=where,
        repo_id=None,
        revision=None,
        compared=[
            label_check,
            *evaluated_figures(results, metrics, verification),
            Figure("dataset.revision", results.dataset.revision, split.source.revision),
            *figures("dataset.samples", results.dataset.samples, samples),
            *comparison_figures(results, predictions, baselines),
            *second_figures,
        ],
    )


def _gold_label_figure(predictions: Predictions, labels: list[int], file: str) -> Figure:
    """The file's gold labels against the data's (their hashes, as the predictions are hashed), the first row
    where they differ named."""
    pairs = zip(predictions.labels, labels, strict=True)
    differing = [row for row, (written, read) in enumerate(pairs) if written != read]
    return Figure(
        f"{file} gold labels" + (f" (first differing: row {differing[0]})" if differing else ""),
        predictions_sha256(predictions.labels),
        predictions_sha256(labels),
    )


def comparison_figures(
    results: Results, predictions: Predictions, folders: list[str | os.PathLike]
) -> list[Figure]:
    """The run's paired verdict recomputed from its predictions and its dense baselines' predictions.csv.

    Each baseline the verdict names is looked for by its folder name in `folders`; its results.json must
    have the recorded sha256, and its predictions.csv must check against it. With several baselines (pooled
    seeds) their predictions are compared in the recorded order, each against this run's rows. A run scored
    by MCC (CoLA) also has its MCC difference and bootstrap interval recomputed, with the run's seed.

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
    official = results.metrics.official
    if official is not None and get_official_metric(official.name).records_mcc_difference:
        recomputed.mcc_difference = mcc_difference(
            labels,
            module_predictions,
            dense_predictions,
            len(results.dataset.label_names),
            seed=results.training.hyperparameters.seed,
            confidence=recorded.confidence,
        )
    return figures("comparison", recorded, recomputed)


def recorded_data_dir(
    results: Results, data_dir: str | os.PathLike | None, where: str
) -> str | os.PathLike | None:
    """Where the recorded task's data are read from, never the repository: `data_dir`, else `GLUE_DIR`, else
    (None) the Hub's nyu-mll/glue at the recorded commit.

    Raises:
        [`DataError`]: neither is given and the run was evaluated on GLUE TSV files.
    """
    record = results.dataset
    data_dir = data_dir or os.environ.get("GLUE_DIR") or None
    if data_dir or (record.dataset_id == HUB_DATASET_ID and COMMIT_RE.fullmatch(record.revision)):
        return data_dir
    raise DataError(
        f"{where}: the run was evaluated on GLUE TSV files ({record.task}, validation "
        f"{record.revision[: 7 + SHA_PREFIX]}…); pass --data-dir (data_dir=) or set GLUE_DIR to a folder "
        "with the same files"
    )


def check_recorded_data(
    results: Results, revision: str, rows: int, where: str, split: SplitResult | None = None
) -> None:
    """Refuses data other than those the run was evaluated on: another validation file or commit
    (`revision`), or another number of `rows` ([`DataError`]) than the run's evaluated split (given `split`,
    its second evaluated split) has."""
    record = results.dataset
    expected = (split or results).verification.n
    if revision != record.revision or rows != expected:
        raise DataError(
            f"{where}: the {record.task} {split.split if split else 'validation'} data here "
            f"({revision[: 7 + SHA_PREFIX]}…, {rows} rows) are not the data the run was evaluated on "
            f"({record.revision[: 7 + SHA_PREFIX]}…, {expected} rows); pass --data-dir with the same GLUE "
            "files"
        )


def recorded_validation(
    results: Results, data_dir: str | os.PathLike | None, where: str, second: bool = False
) -> ValidationSplit:
    """The evaluated split of the recorded task ([`recorded_data_dir`]), or with `second` its second evaluated
    split (MNLI's mismatched), when it is the recorded one ([`check_recorded_data`])."""
    data_dir = recorded_data_dir(results, data_dir, where)
    split = load_validation(results.dataset.task, data_dir, revision=results.dataset.revision, second=second)
    recorded_split = results.second_split if second else None
    check_recorded_data(results, split.source.revision, len(split.rows), where, recorded_split)
    return split


__all__ = [
    "Reverification",
    "check_recorded_data",
    "comparison_figures",
    "predictions_reverification",
    "recorded_data_dir",
    "recorded_validation",
    "reverification",
    "settled",
    "shown",
]
