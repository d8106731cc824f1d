"""Stage 1 — data: GLUE classification tasks as `datasets.Dataset`s.

A task comes either from the Hub (`nyu-mll/glue`, pinned to the commit it was read at) or from a folder
in the official GLUE TSV format (`--data-dir` or `GLUE_DIR`). Both give the same columns: the task's text
columns, named as on the Hub, and an integer `label` whose names are the Hub's `ClassLabel` names.

GLUE TSVs are read with quoting off: a sentence may start with `"` and must stay as written.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..hub.endpoint import hub_endpoint
from ..record.errors import DataError
from ..record.manifest import sha256_file
from ..record.results import SampleRow, SplitStatistics, TokenLengths
from ..scoring.tasks import HUB_DATASET_ID, TaskSpec, get_task
from .data_check import task_folder

# datasets (and numpy, pyarrow) is imported when a task is read: `publish --help` lists TASKS without it.
if TYPE_CHECKING:
    import datasets

# A sentence in SST-2 or QNLI can be longer than csv's default field limit allows.
csv.field_size_limit(1 << 24)


@dataclass
class DataSource:
    """Where a task's rows came from, recorded in results.json.

    `dataset_id` is `nyu-mll/glue` for the Hub or `glue-tsv` for a local folder; `revision` is the Hub
    commit, or `sha256:<hex>` of the validation file for a local folder. `files` is empty for the Hub; for
    a local folder it maps each split to its file's path relative to the GLUE folder (`--data-dir`), in
    POSIX form, and its sha256: nothing of the publisher's disk is published.

    Example:
        >>> load_task("sst2", "glue").source.files["validation"]["path"]
        'SST-2/dev.tsv'
    """

    dataset_id: str
    config: str
    revision: str
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # split -> {"path", "sha256"}


@dataclass
class TaskData:
    """A loaded task: its spec, its training and validation splits, and where they came from; `second` is the
    second evaluated split of a task that has one (`TaskSpec.second_split`, MNLI's mismatched), else None."""

    spec: TaskSpec
    train: datasets.Dataset
    validation: datasets.Dataset
    source: DataSource
    second: datasets.Dataset | None = None

    def second_split_data(self) -> TaskData:
        """The task with its second evaluated split as `validation`, to evaluate it as the first.

        Raises:
            ValueError: the task has no second evaluated split.
        """
        if self.second is None:
            raise ValueError(f"task {self.spec.name} has one evaluated split")
        return dataclasses.replace(self, validation=self.second, second=None)

    @property
    def num_labels(self) -> int:
        return len(self.spec.label_names)


def find_task_folder(spec: TaskSpec, data_dir: Path) -> Path:
    """The task's folder inside a GLUE download: `SST-2/` as GLUE ships it, or `sst2/`."""
    found = task_folder(data_dir, spec.folder, spec.name)
    if found is not None:
        return found
    raise DataError(
        f"{data_dir}: no folder '{spec.folder}' or '{spec.name}' for task {spec.name}; point --data-dir "
        "(or GLUE_DIR) at a folder holding the GLUE task folders"
    )


def read_glue_tsv(path: Path, spec: TaskSpec) -> datasets.Dataset:
    """Reads one GLUE TSV file into a `Dataset` with the task's text columns and an integer `label`.

    Args:
        path: the TSV file, e.g. `glue/SST-2/dev.tsv`.
        spec: the task's layout.

    Returns:
        A `datasets.Dataset` with a `ClassLabel` column `label`.

    Raises:
        [`DataError`]: the file is missing or empty, a column is missing, or a label is unknown. The message
        names the file (and the line for a bad row).

    Example:
        >>> ds = read_glue_tsv(Path("glue/SST-2/dev.tsv"), get_task("sst2"))
        >>> len(ds), ds.features["label"].names
        (40, ['negative', 'positive'])
    """
    columns = read_glue_columns(path, spec)
    import datasets

    features = datasets.Features(
        {column: datasets.Value("string") for column in spec.text_columns}
        | {"label": datasets.ClassLabel(names=list(spec.label_names))}
    )
    return datasets.Dataset.from_dict(columns, features=features)


def read_glue_columns(path: Path, spec: TaskSpec) -> dict[str, list]:
    """Reads one GLUE TSV file as plain columns, without `datasets`: the task's text columns and the integer
    `label`, each a list in file order. Checked as [`read_glue_tsv`] checks it.

    Example:
        >>> columns = read_glue_columns(Path("glue/SST-2/dev.tsv"), get_task("sst2"))
        >>> list(columns), len(columns["label"])
        (['sentence', 'label'], 40)
    """
    if not path.is_file():
        raise DataError(f"{path}: file not found; the {spec.name} folder needs {path.name}")
    # utf-8-sig: MRPC's files start with a byte order mark carried over from Microsoft's release.
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if spec.tsv_has_header:
        if not rows:
            raise DataError(f"{path}: file is empty; expected a header and rows")
        header, rows = rows[0], rows[1:]
        positions = {}
        for column, tsv_name in spec.tsv_columns.items():
            if tsv_name not in header:
                raise DataError(
                    f"{path}: missing column '{tsv_name}' (header has: {', '.join(header)}); "
                    f"is this the GLUE {spec.name} file?"
                )
            positions[column] = header.index(tsv_name)
    else:
        positions = dict(spec.tsv_columns)
    if not rows:
        raise DataError(f"{path}: the split is empty (no rows after the header)")

    label_index = {name: i for i, name in enumerate(spec.label_names)}
    columns: dict[str, list] = {column: [] for column in (*spec.text_columns, "label")}
    width = max(positions.values()) + 1
    first_line = 2 if spec.tsv_has_header else 1
    for line_number, row in enumerate(rows, start=first_line):
        if len(row) < width:
            raise DataError(
                f"{path}:{line_number}: row has {len(row)} fields, expected at least {width}; "
                "the file may be truncated or not tab-separated"
            )
        raw_label = row[positions["label"]].strip()
        if spec.tsv_labels_are_names:
            label = label_index.get(raw_label)
        else:
            label = int(raw_label) if raw_label.isdigit() and int(raw_label) < len(spec.label_names) else None
        if label is None:
            valid = ", ".join(
                spec.label_names if spec.tsv_labels_are_names else map(str, label_index.values())
            )
            raise DataError(f"{path}:{line_number}: unknown label '{raw_label}'; valid labels: {valid}")
        for column in spec.text_columns:
            columns[column].append(row[positions[column]])
        columns["label"].append(label)
    return columns


def check_data_dir(spec: TaskSpec, data_dir: str | os.PathLike) -> Path:
    """Checks that `data_dir` is a GLUE folder holding the task's folder; returns that task folder.

    Raises:
        [`DataError`]: `data_dir` is missing or not a folder, or has no folder for the task.

    Example:
        >>> check_data_dir(get_task("sst2"), "glue")
        PosixPath('.../glue/SST-2')
    """
    data_dir = Path(data_dir).expanduser().resolve()
    if not data_dir.is_dir():
        problem = "not a folder" if data_dir.exists() else "data folder not found"
        raise DataError(
            f"{data_dir}: {problem}; point --data-dir (or GLUE_DIR) at a folder holding the GLUE task "
            "folders (SST-2/, …)"
        )
    return find_task_folder(spec, data_dir)


def load_task_from_folder(spec: TaskSpec, data_dir: str | os.PathLike) -> TaskData:
    """Loads a task's train and validation splits from a folder in the GLUE TSV format."""
    data_dir = Path(data_dir).expanduser().resolve()
    folder = check_data_dir(spec, data_dir)
    splits, files = {}, {}
    named = [("train", spec.train_file), ("validation", spec.validation_file)]
    for split, file_name in named + ([(spec.second_split, spec.second_file)] if spec.second_file else []):
        path = folder / file_name
        splits[split] = read_glue_tsv(path, spec)
        files[split] = {"path": path.relative_to(data_dir).as_posix(), "sha256": sha256_file(path)}
    return TaskData(
        spec=spec,
        train=splits["train"],
        validation=splits["validation"],
        second=splits.get(spec.second_split),
        source=DataSource(
            dataset_id="glue-tsv",
            config=spec.name,
            revision=f"sha256:{files['validation']['sha256']}",
            files=files,
        ),
    )


def load_task_from_hub(spec: TaskSpec, revision: str | None = None) -> TaskData:
    """Loads a task from the Hub's `nyu-mll/glue`, pinned to one commit so the run can be reproduced.

    Raises:
        [`DataError`]: the data set cannot be had (offline, unreachable, an empty split).
        [`InsecureEndpointError`]: `HF_ENDPOINT` (as huggingface_hub or datasets read it) is plain http to a
            host other than this machine; nothing was sent, since both send the token along.
    """
    import datasets
    import httpx2  # huggingface_hub's HTTP client: its connection errors are not OSErrors
    import huggingface_hub

    hub_endpoint()
    hub_endpoint(datasets.config.HF_ENDPOINT)  # datasets reads HF_ENDPOINT itself, at its own import
    try:
        if revision is None:
            revision = huggingface_hub.HfApi().dataset_info(HUB_DATASET_ID).sha
        loaded = datasets.load_dataset(HUB_DATASET_ID, spec.name, revision=revision)
    except (OSError, ValueError, httpx2.HTTPError, huggingface_hub.errors.HfHubHTTPError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise DataError(
            f"could not load GLUE '{spec.name}' from the Hub ({HUB_DATASET_ID}): {reason}; "
            "without internet, set GLUE_DIR or pass --data-dir with the GLUE TSV files"
        ) from error
    train, validation = loaded["train"], loaded[spec.validation_split]
    second = loaded[spec.second_split] if spec.second_split else None
    named = [("train", train), (spec.validation_split, validation)]
    for split_name, split in named + ([(spec.second_split, second)] if second is not None else []):
        if len(split) == 0:
            raise DataError(f"{HUB_DATASET_ID}/{spec.name}: split '{split_name}' is empty")
    keep = [*spec.text_columns, "label"]
    return TaskData(
        spec=spec,
        train=train.select_columns(keep),
        validation=validation.select_columns(keep),
        second=second.select_columns(keep) if second is not None else None,
        source=DataSource(dataset_id=HUB_DATASET_ID, config=spec.name, revision=revision),
    )


def load_task(name: str, data_dir: str | os.PathLike | None = None) -> TaskData:
    """Loads a GLUE classification task: from `data_dir`, else from `GLUE_DIR`, else from the Hub.

    Args:
        name: task name, one of `TASKS` (`sst2`, `mnli`, `cola`, `mrpc`, `qnli`, `qqp`, `rte`).
        data_dir: a folder in the GLUE TSV format. Defaults to the `GLUE_DIR` environment variable.

    Returns:
        [`TaskData`] with `train` and `validation` datasets (the validation split is what is evaluated:
        SST-2's 872 rows, MNLI's `validation_matched`).

    Raises:
        [`UnknownNameError`]: the task is not a GLUE classification task.
        [`DataError`]: a file is missing or malformed, or the Hub cannot be reached.

    Example:
        >>> data = load_task("sst2", data_dir="glue")
        >>> len(data.train), len(data.validation)
        (64, 40)
    """
    spec = get_task(name)
    data_dir = data_dir or os.environ.get("GLUE_DIR") or None
    if data_dir:
        return load_task_from_folder(spec, data_dir)
    return load_task_from_hub(spec)


@dataclass
class ValidationSplit:
    """A task's evaluated split alone, as plain rows: what checking a run's predictions against the data needs
    ([`load_validation`]). From a GLUE folder it is read without `datasets`, whose import takes longer than
    the whole check.

    Attributes:
        spec: the task.
        rows: every row of the split, in order: its text columns and integer `label`.
        source: where the rows came from; its `revision` is [`TaskData`]'s, its `files` name the validation
            file alone.
    """

    spec: TaskSpec
    rows: list[dict[str, str | int]]
    source: DataSource

    @property
    def labels(self) -> list[int]:
        """The gold label ids, in split order."""
        return [row["label"] for row in self.rows]


def load_validation(
    name: str, data_dir: str | os.PathLike | None = None, revision: str | None = None, second: bool = False
) -> ValidationSplit:
    """Loads a task's evaluated split alone: from `data_dir`, else from `GLUE_DIR`, else from the Hub's
    nyu-mll/glue at `revision` (default: its latest commit).

    Its rows are those of [`load_task`]'s `validation` for the same data, and its `source.revision` the same;
    with `second`, those of its second evaluated split (`TaskData.second`: MNLI's mismatched), its file
    named in `source.files` by the split's Hub name.

    Raises:
        [`UnknownNameError`]: the task is not a GLUE classification task.
        [`DataError`]: a file is missing or malformed, or the Hub cannot be reached.

    Example:
        >>> split = load_validation("sst2", "glue")
        >>> len(split.rows), split.source.revision == load_task("sst2", "glue").source.revision
        (40, True)
    """
    spec = get_task(name)
    if second and not spec.second_split:
        raise DataError(f"task {spec.name} has one evaluated split, {spec.validation_split}")
    data_dir = data_dir or os.environ.get("GLUE_DIR") or None
    if not data_dir:
        task = load_task_from_hub(spec, revision)
        rows = list(task.second if second else task.validation)
        return ValidationSplit(spec=spec, rows=rows, source=task.source)
    data_dir = Path(data_dir).expanduser().resolve()
    folder = check_data_dir(spec, data_dir)
    path = folder / (spec.second_file if second else spec.validation_file)
    columns = read_glue_columns(path, spec)
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    sha256 = sha256_file(path)
    file = {"path": path.relative_to(data_dir).as_posix(), "sha256": sha256}
    # The revision is the first evaluated split's file's, as load_task records it.
    revision = sha256_file(folder / spec.validation_file) if second else sha256
    return ValidationSplit(
        spec=spec,
        rows=rows,
        source=DataSource(
            dataset_id="glue-tsv",
            config=spec.name,
            revision=f"sha256:{revision}",
            files={spec.second_split if second else "validation": file},
        ),
    )


SAMPLE_ROWS = 3  # rows of the evaluated split the card shows as read


def split_statistics(rows: datasets.Dataset, spec: TaskSpec, tokenizer, max_length: int) -> SplitStatistics:
    """Rows, rows per label and token lengths of one split, with the run's tokenizer.

    Lengths count special tokens and are taken before truncation, so `tokens.truncated` says how many rows
    training or evaluation cut to `max_length`.

    Example:
        >>> from transformers import AutoTokenizer
        >>> tokenizer = AutoTokenizer.from_pretrained("tiny-gpt2")
        >>> stats = split_statistics(load_task("sst2", "glue").validation, get_task("sst2"), tokenizer, 128)
        >>> stats.rows, sum(stats.label_counts.values()) == stats.rows, stats.tokens.min <= stats.tokens.max
        (40, True, True)
    """
    texts = [list(rows[column]) for column in spec.text_columns]
    lengths = [len(ids) for ids in tokenizer(*texts, truncation=False)["input_ids"]] if len(rows) else [0]
    counts = {name: 0 for name in spec.label_names}
    for label in rows["label"]:
        counts[spec.label_names[label]] += 1
    return SplitStatistics(
        rows=len(rows),
        label_counts=counts,
        tokens=TokenLengths(
            min=min(lengths),
            mean=sum(lengths) / len(lengths),
            max=max(lengths),
            truncated=sum(length > max_length for length in lengths),
        ),
    )


def task_statistics(data: TaskData, tokenizer, max_length: int) -> dict[str, SplitStatistics]:
    """[`split_statistics`] of the training split (as "train") and the evaluated split (by its Hub name), as
    results.json records them.

    Example:
        >>> from transformers import AutoTokenizer
        >>> list(task_statistics(load_task("sst2", "glue"), AutoTokenizer.from_pretrained("tiny-gpt2"), 128))
        ['train', 'validation']
    """
    statistics = {
        "train": split_statistics(data.train, data.spec, tokenizer, max_length),
        data.spec.validation_split: split_statistics(data.validation, data.spec, tokenizer, max_length),
    }
    if data.second is not None:
        statistics[data.spec.second_split] = split_statistics(data.second, data.spec, tokenizer, max_length)
    return statistics


def sample_rows(
    rows: datasets.Dataset | list[dict[str, str | int]], spec: TaskSpec, count: int = SAMPLE_ROWS
) -> list[SampleRow]:
    """The first `count` rows of a split, as read: each text column and the label's name.

    Example:
        >>> sample_rows(load_task("sst2", "glue").validation, get_task("sst2"), count=1)[0].label
        'positive'
    """
    return [
        SampleRow(
            index=index,
            texts={column: rows[index][column] for column in spec.text_columns},
            label=spec.label_names[rows[index]["label"]],
        )
        for index in range(min(count, len(rows)))
    ]
