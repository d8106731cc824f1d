"""`attncard verify --predictions`: every quality figure of a run recomputed from its predictions.csv, without
its model or weights, and without torch.

[`reverify_predictions`] runs the checks of [`pipeline.checks.registry`] with the profile
[`pipeline.checks.registry.VERIFY_PREDICTIONS`] on a local run folder, or its `cards/` copy: the checks of a
download but for the weights and the module, then the figures its card shows recomputed from predictions.csv
and the recorded task's data, and the paired verdict from its dense baseline's predictions.csv, then the card
and plots against their rendering again. [`pipeline.verify.reverify`] evaluates the model again and compares
the same figures: both give a [`pipeline.checks.reverification.Reverification`]. Nothing here imports torch,
transformers, peft or accelerate (an import-linter contract in pyproject.toml says so).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..checks.integrity import check_expected_sha256
from ..checks.registry import VERIFY_PREDICTIONS, CheckedRun, run_checks
from ..checks.reverification import Reverification
from ..record.errors import DownloadError


def reverify_predictions(
    run_dir: str | os.PathLike,
    *,
    data_dir: str | os.PathLike | None = None,
    expected_sha256: str | None = None,
    baselines: list[str | os.PathLike] | None = None,
) -> Reverification:
    """Recomputes every quality figure of a run from its predictions.csv, without its model or weights.

    For a local run folder, or its `cards/` copy (every file but the weights). The folder is checked as a
    download checks it, except that the weight files (`*.safetensors`) may be absent and the module is not
    loaded: results.json field by field (against `expected_sha256` when given) and its figures against each
    other, no pickle, every file that is there listed in the manifest with its sha256, only files a run
    folder holds, no remote code. Then predictions.csv is read line by line
    ([`pipeline.checks.predictions.read_predictions`]) and its gold labels compared with the recorded task's
    evaluated split, read as [`pipeline.verify.reverify.reverify`] reads it (never from the repository). From
    the logits every quality figure is recomputed as evaluation computes it (accuracy, F1, precision, recall,
    loss, confusion matrix, per-class scores, predictions hash; the loss is compared within
    [`pipeline.scoring.metrics.LOSS_REL_TOL`], every other figure bit for bit) and the verification as
    [`pipeline.scoring.gate.verify`] decides it (p0, SE, threshold, p-value, Wilson interval, status,
    reasons), with results.json's parameter counts (the deployed parameters need the model); also the dataset
    revision and sample rows. The paired verdict against the dense model, when the run records one, is
    recomputed from this predictions.csv and the dense run's
    ([`pipeline.checks.reverification.comparison_figures`]). When every figure matches, the card, its plots,
    its `.eval_results/` entry and LICENSE must be the ones results.json renders, as a download checks them.
    The checks, in order: [`pipeline.checks.registry.CHECKS`]. It takes a few seconds of CPU and imports no
    torch.

    What it cannot tell: whether the model predicts these logits; [`pipeline.verify.reverify.reverify`]
    evaluates the model again.

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
            figure of results.json contradicts the others, the manifest lists no predictions.csv (a run
            written before they were recorded: verify it with its model), or the card, a plot, the
            `.eval_results/` entry or LICENSE is not the one results.json renders.
        ResultsError: its results.json cannot be read.
        UnsafeFormatError: the folder holds pickle weights, which attncard never loads.
        IncompatibleRunError: config.json names a model type attncard does not load.
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
    run = CheckedRun(
        folder,
        str(folder),
        expected_sha256=expected_sha256,
        data_dir=data_dir,
        baselines=baselines,
    )
    check = run_checks(VERIFY_PREDICTIONS, run).reverification
    if check is None:  # the profile recomputes the figures: a registry without that check is a bug
        raise RuntimeError(f"{folder}: {VERIFY_PREDICTIONS.name} ran no check of the figures")
    return check


__all__ = ["reverify_predictions"]
