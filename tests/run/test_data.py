from __future__ import annotations

import hashlib

import pytest

from attncard.pipeline.record.errors import DataError, UnknownNameError
from attncard.pipeline.run import data_check
from attncard.pipeline.run.data import check_data_dir, load_task, load_validation, read_glue_tsv
from attncard.pipeline.scoring.tasks import HUB_DATASET_ID, TASKS

MNLI_HEADER = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
)


def test_sst2_full_validation_and_train(glue):
    data = load_task("sst2", glue)
    assert len(data.validation) == 872
    assert len(data.train) == 67349
    assert data.validation.features["label"].names == ["negative", "positive"]
    assert data.validation[0] == {"sentence": "it 's a charming and often affecting journey . ", "label": 1}
    labels = data.validation["label"]
    assert (labels.count(0), labels.count(1)) == (428, 444)
    assert data.source.dataset_id == "glue-tsv"
    assert data.source.revision == "sha256:54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0"


@pytest.mark.parametrize(
    ("task", "train_rows", "validation_rows", "label_counts"),
    [
        ("cola", 8551, 1043, {0: 322, 1: 721}),
        ("mrpc", 3668, 408, {0: 129, 1: 279}),
        ("rte", 2490, 277, {0: 146, 1: 131}),  # 0 = entailment, as on the Hub
    ],
)
def test_other_glue_tasks(glue, task, train_rows, validation_rows, label_counts):
    data = load_task(task, glue)
    assert (len(data.train), len(data.validation)) == (train_rows, validation_rows)
    labels = data.validation["label"]
    assert {label: labels.count(label) for label in label_counts} == label_counts
    assert set(data.validation.column_names) == {*TASKS[task].text_columns, "label"}


@pytest.mark.parametrize("task", ["sst2", "mrpc", "rte"])
def test_the_validation_split_alone_is_load_tasks(glue, task):
    """What `attncard verify --predictions` reads, without `datasets`: the rows, labels and revision of the
    evaluated split that `load_task` gives."""
    data, split = load_task(task, glue), load_validation(task, glue)
    assert split.rows == list(data.validation)
    assert split.labels == list(data.validation["label"])
    assert split.source.revision == data.source.revision
    assert split.source.files == {"validation": data.source.files["validation"]}


def test_quoting_is_off(glue):
    """A field starting with a double quote stays as written (MRPC dev, first row)."""
    data = load_task("mrpc", glue)
    assert data.validation[0]["sentence2"].startswith('"The foodservice pie business')
    assert data.validation[0]["sentence1"].startswith("He said the foodservice pie business")


def test_qnli_dev_reads(glue):
    dataset = read_glue_tsv(glue / "qnli" / "dev.tsv", TASKS["qnli"])
    assert len(dataset) == 5463
    labels = dataset["label"]
    assert (labels.count(0), labels.count(1)) == (2702, 2761)


def test_mnli_fixture(tmp_path):
    folder = tmp_path / "MNLI"
    folder.mkdir()
    rows = [
        ("The cat sat.", "A cat sat.", "entailment"),
        ('"Quoted premise.', "Nobody sat.", "contradiction"),
        ("He left early.", "He was tired.", "neutral"),
    ]
    lines = [MNLI_HEADER] + [
        f"{i}\t1\t1e\tfiction\t( p )\t( h )\t(ROOT p)\t(ROOT h)\t{p}\t{h}\t{label}\t{label}"
        for i, (p, h, label) in enumerate(rows)
    ]
    for name in ("train.tsv", "dev_matched.tsv"):
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "dev_mismatched.tsv").write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    data = load_task("mnli", tmp_path)
    assert data.spec.validation_split == "validation_matched"
    assert data.validation.column_names == ["premise", "hypothesis", "label"]
    assert data.validation["label"] == [0, 2, 1]  # entailment, contradiction, neutral as on the Hub
    assert data.validation[1]["premise"] == '"Quoted premise.'
    # The mismatched genres: a second evaluated split, read alone as verify --predictions reads it.
    assert data.second["label"] == [0, 2]
    assert list(data.source.files) == ["train", "validation", "validation_mismatched"]
    second = load_validation("mnli", tmp_path, second=True)
    assert second.rows == list(data.second)
    assert second.source.revision == data.source.revision
    assert second.source.files == {"validation_mismatched": data.source.files["validation_mismatched"]}
    with pytest.raises(DataError, match="task sst2 has one evaluated split"):
        load_validation("sst2", tmp_path, second=True)


def test_mnli_needs_its_mismatched_file(tmp_path):
    folder = tmp_path / "MNLI"
    folder.mkdir()
    lines = [MNLI_HEADER, "0\t1\t1e\tfiction\t( p )\t( h )\t(ROOT p)\t(ROOT h)\tp\th\tneutral\tneutral"]
    for name in ("train.tsv", "dev_matched.tsv"):
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dev_mismatched\.tsv: file not found"):
        load_task("mnli", tmp_path)


def test_official_folder_names(small_glue):
    data = load_task("sst2", small_glue)  # SST-2/ rather than sst2/
    assert len(data.validation) == 40


def test_glue_dir_environment(small_glue, monkeypatch):
    monkeypatch.setenv("GLUE_DIR", str(small_glue))
    assert len(load_task("sst2").validation) == 40


def test_unknown_task():
    with pytest.raises(UnknownNameError, match="unknown task 'sst3'; valid tasks: cola, mnli, mrpc"):
        load_task("sst3")


def _sst2(tmp_path, dev_text: str, train_text: str = "sentence\tlabel\nfine .\t1\n"):
    folder = tmp_path / "sst2"
    folder.mkdir()
    (folder / "train.tsv").write_text(train_text, encoding="utf-8")
    if dev_text is not None:
        (folder / "dev.tsv").write_text(dev_text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("dev_text", "message"),
    [
        (None, r"sst2/dev.tsv: file not found"),
        ("text\tlabel\ngood .\t1\n", r"sst2/dev.tsv: missing column 'sentence'"),
        ("sentence\tlabel\ngood .\t1\nbad .\t7\n", r"sst2/dev.tsv:3: unknown label '7'; valid labels: 0, 1"),
        ("sentence\tlabel\n", r"sst2/dev.tsv: the split is empty"),
        ("", r"sst2/dev.tsv: file is empty"),
        ("sentence\tlabel\ngood . 1\n", r"sst2/dev.tsv:2: row has 1 fields, expected at least 2"),
    ],
)
def test_bad_data_names_file_and_problem(tmp_path, dev_text, message):
    with pytest.raises(DataError, match=message) as caught:
        load_task("sst2", _sst2(tmp_path, dev_text))
    assert "\n" not in str(caught.value)


def test_unknown_label_name(tmp_path):
    folder = tmp_path / "RTE"
    folder.mkdir()
    (folder / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    (folder / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tcontradiction\n")
    with pytest.raises(
        DataError, match="unknown label 'contradiction'; valid labels: entailment, not_entailment"
    ):
        load_task("rte", tmp_path)


def test_missing_folder(tmp_path):
    with pytest.raises(DataError, match="no folder 'SST-2' or 'sst2'"):
        load_task("sst2", tmp_path)
    with pytest.raises(DataError, match="data folder not found"):
        load_task("sst2", tmp_path / "nowhere")


def test_hub_unreachable_says_what_to_do(monkeypatch):
    """Without GLUE_DIR the Hub is tried; here it cannot be reached, and the error says to set GLUE_DIR."""
    monkeypatch.delenv("GLUE_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        DataError, match=r"could not load GLUE 'sst2' from the Hub .*set GLUE_DIR or pass --data-dir"
    ):
        load_task("sst2")


def test_local_files_are_recorded_relative_to_the_glue_folder(small_glue):
    """The recorded paths are published: they name a file within the GLUE folder, never where it was."""
    files = load_task("sst2", small_glue).source.files
    assert {split: record["path"] for split, record in files.items()} == {
        "train": "SST-2/train.tsv",
        "validation": "SST-2/dev.tsv",
    }
    assert (
        files["validation"]["sha256"]
        == hashlib.sha256((small_glue / "SST-2" / "dev.tsv").read_bytes()).hexdigest()
    )


def test_a_file_as_data_folder_is_named(tmp_path):
    (tmp_path / "glue").write_text("not a folder")
    with pytest.raises(DataError, match="glue: not a folder; point --data-dir \\(or GLUE_DIR\\) at a folder"):
        check_data_dir(TASKS["sst2"], tmp_path / "glue")


def test_the_demo_check_reads_the_hub_data_set_the_tasks_name():
    """pipeline/run/data_check.py imports nothing of attncard: its copy of the data set id must not drift."""
    assert data_check.HUB_DATASET_ID == HUB_DATASET_ID
