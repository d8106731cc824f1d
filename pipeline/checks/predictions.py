"""predictions.csv: each evaluated row's gold label, predicted label and logits, so that every quality figure
of a run can be recomputed without its model or weights.

The file is plain CSV (ASCII, `\\n` line ends), one header line and one line per row of the evaluated split,
in split order:

    index,label,prediction,logit_0,logit_1
    0,1,1,-0.5,0.625
    1,0,0,1.25,-0.75

- `index`: the row's position in the split, 0 to n − 1;
- `label`: its gold label id; `prediction`: the predicted label id, the first maximum of the logits (as
  numpy's and torch's `argmax`);
- `logit_<i>`: the float32 logit of label i, written as Python writes that value as a float (`repr`), so it
  reads back bit for bit.

[`write_predictions`] writes it at publish time. [`read_predictions`] reads a run's file as hostile input:
every line must be exactly what the writer writes, and the rows must be the run's (row count, class counts,
predictions hash, as results.json records them). [`prediction_figures`] recomputes every
quality figure and the verification from the rows, for `attncard verify --predictions`. Nothing here imports
torch: a run's figures are checked without it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..record.errors import IntegrityError
from ..record.manifest import (
    MAX_PREDICTIONS_BYTES,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    SECOND_PREDICTIONS_FILE,
    sha256_file,
)
from ..record.results import Metrics, Results, SplitResult, Verification
from ..record.text import SHA_PREFIX
from ..scoring.gate import all_finite, both_gates, verification_from_counts
from ..scoring.metrics import predictions_sha256, quality_metrics
from .figures import Figure, evaluated_figures, official_metric_of, recomputed_verification

# Bytes one line may take: three whole numbers of at most 20 digits and their commas, then per label a comma
# and a logit; Python writes a float in at most 24 characters (`-1.1754943508222875e-38`).
_LINE_BYTES = 3 * 21
_LOGIT_BYTES = 25
# Lines checked at a time: their texts and Python objects are all that is held besides the compact result.
_BLOCK_ROWS = 4096
_WHOLE_NUMBER = re.compile(r"0|[1-9][0-9]{0,18}")


@dataclass(frozen=True)
class Predictions:
    """The rows of a predictions.csv, in split order.

    Attributes:
        labels: each row's gold label id.
        predictions: each row's predicted label id (the first maximum of its logits).
        logits: float32 `(rows, labels)`.
    """

    labels: list[int]
    predictions: list[int]
    logits: np.ndarray


def header(label_count: int) -> str:
    """The header line of a predictions file for `label_count` labels (without its line end).

    Example:
        >>> header(3)
        'index,label,prediction,logit_0,logit_1,logit_2'
    """
    return ",".join(["index", "label", "prediction", *(f"logit_{i}" for i in range(label_count))])


def predictions_text(labels: Sequence[int], logits: np.ndarray) -> str:
    """The text of a predictions file: the header, then one line per row (see the module's docstring).

    Args:
        labels: the gold label ids of the evaluated split, in order.
        logits: `(rows, labels)` logits of the same rows (a CPU tensor converts too); written as float32.

    Raises:
        `ValueError`: the shapes disagree, a label is not a label id, or a logit is not finite (a run with
            such logits has a non-finite loss, which results.json cannot hold either).

    Example:
        >>> print(predictions_text([0, 1], np.array([[0.5, -1.25], [0.1, 0.2]], dtype=np.float32)), end="")
        index,label,prediction,logit_0,logit_1
        0,0,0,0.5,-1.25
        1,1,1,0.10000000149011612,0.20000000298023224
    """
    values = np.asarray(logits, dtype=np.float32)
    if values.ndim != 2 or values.shape[0] != len(labels) or values.shape[1] < 1:
        raise ValueError(f"logits of shape {tuple(values.shape)} do not fit {len(labels)} labelled rows")
    count = values.shape[1]
    if not all(isinstance(label, int) and 0 <= label < count for label in labels):
        raise ValueError(f"the gold labels must be label ids 0 to {count - 1}")
    if not np.isfinite(values).all():
        raise ValueError("a logit is not finite; the run is broken")
    predicted = values.argmax(axis=-1).tolist()
    lines = [header(count)]
    for index, (label, prediction, row) in enumerate(zip(labels, predicted, values.tolist(), strict=True)):
        lines.append(",".join([str(index), str(label), str(prediction), *map(repr, row)]))
    return "\n".join(lines) + "\n"


def write_predictions(path: str | Path, labels: Sequence[int], logits: np.ndarray) -> Path:
    """Writes a predictions file ([`predictions_text`]); returns its path.

    Example:
        >>> logits = np.array([[0.0, 2.0], [3.0, 3.0]], dtype=np.float32)
        >>> path = write_predictions(Path("predictions.csv"), [1, 0], logits)
        >>> path.read_text().splitlines()[1:]
        ['0,1,1,0.0,2.0', '1,0,0,3.0,3.0']
    """
    path = Path(path)
    path.write_text(predictions_text(labels, logits), encoding="ascii", newline="\n")
    return path


def max_predictions_bytes(rows: int, label_count: int) -> int:
    """The most bytes the predictions file of `rows` rows and `label_count` labels can take, capped at
    `MAX_PREDICTIONS_BYTES`.

    Example:
        >>> max_predictions_bytes(872, 2)
        99447
    """
    longest = len(header(label_count)) + 1 + max(rows, 0) * (_LINE_BYTES + label_count * _LOGIT_BYTES + 1)
    return min(longest, MAX_PREDICTIONS_BYTES)


def read_predictions(
    folder: str | Path, results: Results, where: str | None = None, split: SplitResult | None = None
) -> Predictions:
    """Reads a run folder's predictions.csv (or, given `split`, its second evaluated split's
    `predictions_<split>.csv`, checked against that split's records) and checks it line by line and against
    results.json.

    Every line must be what [`write_predictions`] writes for this run: the header for the run's label count;
    whole numbers without signs or leading zeros; indices 0 to n − 1 in order; label ids of the task;
    finite float32 logits in Python's own notation; each prediction the first maximum of its row's logits.
    Then the rows must be the run's: as many as `verification.n`, gold labels counted as
    `verification.class_counts`, predicted ids hashing to `metrics.predictions_sha256`. The figures computed
    from them (the confusion matrix, the correct rows, the loss, …) are compared by [`prediction_figures`],
    not here. The file's size is checked before it is read.

    The file is streamed: no line is read past the length a row can take, lines are checked `_BLOCK_ROWS` at
    a time, and only each block's compact result is kept (int64 label and prediction ids, float32 logits)
    until the counts and the hash are taken over all rows.

    Args:
        folder: the run folder.
        results: its results.json.
        where: the run, for messages (default: the folder).

    Returns:
        [`Predictions`].

    Raises:
        [`IntegrityError`]: one line naming the file, the line and what is wrong with it.

    Example:
        >>> predictions = read_predictions("runs/tiny-gpt2-none-sst2", results)
        >>> len(predictions.labels), predictions.logits.dtype, tuple(predictions.logits.shape)
        (40, dtype('float32'), (40, 2))
        >>> predictions_sha256(predictions.predictions) == results.metrics.predictions_sha256
        True
    """
    where = where or str(folder)
    file = SECOND_PREDICTIONS_FILE.format(split=split.split) if split else PREDICTIONS_FILE
    path = Path(folder) / file
    metrics, verification = (split or results).metrics, (split or results).verification
    prefix = "second_split." if split else ""

    def refuse(problem: str) -> IntegrityError:
        return IntegrityError(
            f"{where}: {file} {problem}; it is not the file publish wrote for this run: do not use this "
            "checkpoint"
        )

    names = list(results.dataset.label_names)
    count, rows = len(names), verification.n
    if path.is_symlink() or not path.is_file():
        raise refuse("is missing or not a plain file")
    limit = max_predictions_bytes(rows, count)
    size = path.stat().st_size
    if size > limit:
        raise refuse(f"holds {size} bytes, more than the {limit} that {rows} rows of {count} logits can take")
    longest_line = max(len(header(count)), _LINE_BYTES + count * _LOGIT_BYTES) + 1
    rows_read, offset, number = 0, 0, 0  # rows checked, bytes read, lines read
    label_blocks: list[np.ndarray] = []
    prediction_blocks: list[np.ndarray] = []
    logit_blocks: list[np.ndarray] = []
    block: list[str] = []
    with path.open("rb") as handle:
        while True:
            raw = handle.readline(longest_line + 1)
            if not raw:
                break
            if offset + len(raw) > limit:  # the file may grow after its size was read
                raise refuse(f"holds more than the {limit} bytes that {rows} rows of {count} logits can take")
            number += 1  # this line's, the header being line 1
            if not raw.isascii():
                position = next(i for i, byte in enumerate(raw) if byte > 127)
                raise refuse(f"has a byte that is not ASCII at offset {offset + position}")
            offset += len(raw)
            if not raw.endswith(b"\n"):
                if len(raw) > longest_line:
                    raise refuse(f"line {number} is longer than the {longest_line} bytes a line can take")
                raise refuse("does not end with a line end")
            line = raw[:-1].decode("ascii")
            if number == 1:
                if line != header(count):
                    raise refuse(
                        f"line 1 reads {line[:80]!r}, not the header {header(count)!r} for {count} labels"
                    )
                continue
            if number - 1 > rows:
                raise refuse(
                    f"holds more than {rows} rows, {RESULTS_FILE} records {prefix}verification.n = {rows}"
                )
            block.append(line)
            if len(block) == _BLOCK_ROWS:
                rows_read = _check_block(
                    block, rows_read, count, refuse, (label_blocks, prediction_blocks, logit_blocks)
                )
                block = []
    if offset == 0:
        raise refuse("does not end with a line end")
    if block:
        rows_read = _check_block(
            block, rows_read, count, refuse, (label_blocks, prediction_blocks, logit_blocks)
        )
    if rows_read != rows:
        raise refuse(f"holds {rows_read} rows, {RESULTS_FILE} records {prefix}verification.n = {rows}")
    if not rows_read:
        raise refuse("holds no rows")
    labels, predicted = np.concatenate(label_blocks), np.concatenate(prediction_blocks)
    del label_blocks, prediction_blocks  # copied into the two arrays
    digest = predictions_sha256(predicted)
    if digest != metrics.predictions_sha256:
        raise refuse(
            f"predictions hash to {digest[:SHA_PREFIX]}…, {RESULTS_FILE} records "
            f"{prefix}metrics.predictions_sha256 {metrics.predictions_sha256[:SHA_PREFIX]}…"
        )
    counted = dict(zip(names, np.bincount(labels, minlength=count).tolist(), strict=True))
    if counted != verification.class_counts:
        raise refuse(
            f"counts the gold labels {counted}, {RESULTS_FILE} records {prefix}verification.class_counts "
            f"{verification.class_counts}"
        )
    return Predictions(
        labels=labels.tolist(),
        predictions=predicted.tolist(),
        logits=np.concatenate(logit_blocks),
    )


def baseline_predictions(folder: Path, results: Results) -> Predictions:
    """The per-row predictions of a dense run, checked: listed in its manifest with the sha256 of the file
    read, and consistent with its results.json ([`read_predictions`]). The paired verdict reads nothing else
    of the baseline."""
    path = Path(folder) / PREDICTIONS_FILE
    recorded = results.manifest.get(PREDICTIONS_FILE)
    if recorded is None or not path.is_file():
        raise IntegrityError(
            f"{folder}: no {PREDICTIONS_FILE} in its manifest and folder; it was published before per-row "
            "predictions were kept"
        )
    if sha256_file(path) != recorded:
        raise IntegrityError(f"{path}: its sha256 is not the one its results.json manifest records")
    return read_predictions(folder, results)


def _check_block(
    lines: list[str],
    first_row: int,
    count: int,
    refuse: Callable[[str], IntegrityError],
    into: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]],
) -> int:
    """Checks consecutive data lines, the first being row `first_row`, and appends their gold labels,
    predictions and float32 logits to `into`'s three lists; returns the next row's index."""
    labels, predicted, logit_texts = _parse_rows(lines, first_row, count, refuse)
    logits = _logits(logit_texts, first_row, len(labels), count, refuse)
    argmax = logits.argmax(axis=-1)
    wrong = np.flatnonzero(argmax != predicted)
    if wrong.size:
        row = int(wrong[0])
        raise refuse(
            f"line {first_row + row + 2} predicts {int(predicted[row])}, but its logits' first maximum is "
            f"label {int(argmax[row])}"
        )
    for blocks, values in zip(into, (labels, predicted, logits), strict=True):
        blocks.append(values)
    return first_row + len(lines)


def _parse_rows(
    lines: list[str], first_row: int, count: int, refuse: Callable[[str], IntegrityError]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The gold labels, predictions (int64) and logit texts of data lines, each field checked for its form."""
    labels, predicted, logit_texts = [], [], []
    width = 3 + count
    for row, line in enumerate(lines, start=first_row):
        number = row + 2  # the header is line 1
        fields = line.split(",")
        if len(fields) != width:
            raise refuse(f"line {number} has {len(fields)} fields, the header {width}")
        for name, field in zip(("index", "label", "prediction"), fields, strict=False):
            if not _WHOLE_NUMBER.fullmatch(field):
                raise refuse(f"line {number} has {name} {field[:24]!r}, which is not a whole number")
        index, label, prediction = int(fields[0]), int(fields[1]), int(fields[2])
        if index != row:
            raise refuse(f"line {number} has index {index}, expected {row}: rows are missing, added or moved")
        for name, value in (("label", label), ("prediction", prediction)):
            if value >= count:
                raise refuse(f"line {number} has {name} {value}, the run has labels 0 to {count - 1}")
        labels.append(label)
        predicted.append(prediction)
        logit_texts += fields[3:]
    return np.asarray(labels, dtype=np.int64), np.asarray(predicted, dtype=np.int64), logit_texts


def _logits(
    texts: list[str], first_row: int, rows: int, count: int, refuse: Callable[[str], IntegrityError]
) -> np.ndarray:
    """The logit texts of rows from `first_row` as a float32 `(rows, count)` array; each must be a finite
    float32 value written as `repr` writes it."""

    def line(position: int) -> int:
        return first_row + position // count + 2

    values = []
    for position, text in enumerate(texts):
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value):
            what = "is not a number" if value is None else "is not finite"
            raise refuse(f"line {line(position)} has logit_{position % count} {text[:24]!r}, which {what}")
        values.append(value)
    wide = np.asarray(values, dtype=np.float64)
    narrow = wide.astype(np.float32)
    inexact = np.flatnonzero(narrow.astype(np.float64) != wide)
    if inexact.size:
        position = int(inexact[0])
        raise refuse(
            f"line {line(position)} has logit_{position % count} {texts[position][:24]!r}, which is not a "
            "float32 value"
        )
    for position, (text, value) in enumerate(zip(texts, narrow.tolist(), strict=True)):
        if repr(value) != text:
            raise refuse(
                f"line {line(position)} has logit_{position % count} {text[:24]!r}, which publish writes as "
                f"{value!r}"
            )
    return narrow.reshape(rows, count)


def recompute(
    predictions: Predictions, results: Results, split: SplitResult | None = None
) -> tuple[Metrics, Verification]:
    """Every quality figure and the verification, computed again from a run's predictions (given `split`, from
    its second evaluated split's, and that split's own gate).

    A run whose task has a second evaluated split fails when either gate fails: the run's verification takes
    the second split's gate as recomputed from its recorded counts
    ([`pipeline.checks.figures.recomputed_verification`]; `attncard verify --predictions` recomputes that
    one from its own predictions too).

    The metrics are [`pipeline.scoring.metrics.quality_metrics`] of the logits and gold labels, as evaluation
    computed them; the verification is [`pipeline.scoring.gate.verification_from_counts`] of the gold labels'
    counts and the rows predicted right. The compression factor needs the model: it is results.json's
    parameters before / after (which a download checks against its recorded factor).

    Raises:
        [`IntegrityError`]: results.json's parameter counts are impossible.

    Example:
        >>> metrics, verification = recompute(read_predictions("runs/tiny-gpt2-none-sst2", results), results)
        >>> metrics == results.metrics, verification == results.verification
        (True, True)
    """
    names = list(results.dataset.label_names)
    metrics = quality_metrics(predictions.logits, predictions.labels, names, *official_metric_of(results))
    parameters = results.parameters
    if parameters.before < 1 or parameters.after < 1:
        raise IntegrityError(
            f"{RESULTS_FILE}: parameters before/after {parameters.before}/{parameters.after}"
        )
    correct = sum(int(t == p) for t, p in zip(predictions.labels, predictions.predictions, strict=True))
    finite = all_finite(dataclasses.asdict(metrics)) and all_finite(dataclasses.asdict(results.efficiency))
    verification = verification_from_counts(
        [predictions.labels.count(i) for i in range(len(names))],
        correct,
        names,
        parameters.before / parameters.after,
        finite,
    )
    if split is None and (second := results.second_split) is not None:
        verification = both_gates(verification, recomputed_verification(results, second), second.split)
    return metrics, verification


def prediction_figures(
    predictions: Predictions, results: Results, split: SplitResult | None = None
) -> list[Figure]:
    """Each recorded quality figure and verification figure of a run against the same figure recomputed from
    its predictions ([`recompute`]); the loss is compared within [`pipeline.scoring.metrics.LOSS_REL_TOL`].

    Example:
        >>> pairs = prediction_figures(read_predictions("runs/tiny-gpt2-none-sst2", results), results)
        >>> [pair.name for pair in pairs][:3], all(pair.equal() for pair in pairs)
        (['metrics.accuracy', 'metrics.f1_macro', 'metrics.f1_weighted'], True)
    """
    return evaluated_figures(split or results, *recompute(predictions, results, split))


__all__ = [
    "MAX_PREDICTIONS_BYTES",
    "Predictions",
    "baseline_predictions",
    "header",
    "max_predictions_bytes",
    "prediction_figures",
    "predictions_text",
    "read_predictions",
    "recompute",
    "write_predictions",
]
