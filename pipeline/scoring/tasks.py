"""The tasks attncard trains and scores on: each GLUE classification task declared as data, in one registry.

A task is a [`TaskSpec`]: its columns and labels on the Hub and in the GLUE TSV files, its official metric
(one of [`pipeline.scoring.metrics.OFFICIAL_METRICS`]), its second evaluated split if any, its title and
its citation. [`register_task`] adds one to [`TASKS`]; loading its rows is `pipeline.run.data`'s, which
reads them as the spec says. Nothing here imports `datasets` or torch: `publish --help`, the card and the
checks list and read the tasks without them.

Example:
    >>> sorted(TASKS)
    ['cola', 'mnli', 'mrpc', 'qnli', 'qqp', 'rte', 'sst2']
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..record.errors import UnknownNameError
from .metrics import get_official_metric

HUB_DATASET_ID = "nyu-mll/glue"  # where every task's rows are on the Hub, one config per task
GLUE_LANGUAGE = "en"  # every GLUE task is English (ISO 639-1, as the Hub's `language` metadata wants)
# A task's name is a part of run names (`minilm-none-sst2`) and of `.eval_results/<task>.yaml`.
TASK_NAME_RE = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class TaskSpec:
    """One classification task: how it is laid out on the Hub and in the GLUE TSV files, how it is scored
    and how its card names and cites it. A task is this declaration alone ([`register_task`]).

    Example:
        >>> spec = get_task("mrpc")
        >>> spec.title, spec.official_metric, spec.positive_label_name
        ('GLUE MRPC', 'f1', 'equivalent')
    """

    name: str  # its name on the command line, in run names and as the Hub's config ("sst2")
    title: str  # as the card names it ("GLUE SST-2")
    text_columns: tuple[str, ...]
    label_names: tuple[str, ...]
    folder: str  # folder name in the official GLUE download ("SST-2"); its lower-case form is accepted too
    # TSV column of each text column and of the label: a header name, or a position for header-less files
    tsv_columns: dict[str, str | int]
    train_file: str = "train.tsv"
    validation_file: str = "dev.tsv"
    validation_split: str = "validation"  # the split evaluated on the Hub
    tsv_has_header: bool = True
    tsv_labels_are_names: bool = False  # "entailment" rather than "0"
    citation: str = ""
    bibtex: str = ""  # the BibTeX entries of `citation`
    # GLUE's official metric of the task, one of OFFICIAL_METRICS (pipeline.scoring.metrics), as the
    # model-index names it: "matthews_correlation" (CoLA), "f1" of the label `positive_label` (MRPC, QQP;
    # accuracy is reported beside it) or "accuracy" (the others). The pass gate is on accuracy for every
    # task, whatever this is.
    official_metric: str = "accuracy"
    positive_label: int = 1  # the label id of the class the official metric is of, for an F1
    # A second evaluated split, scored and gated as the first (MNLI's mismatched genres): its name on the Hub
    # and its TSV file; "" for a task with one evaluated split.
    second_split: str = ""
    second_file: str = ""

    @property
    def positive_label_name(self) -> str:
        """The name of `positive_label` ("equivalent" for MRPC)."""
        return self.label_names[self.positive_label]


GLUE_CITATION = (
    "Wang et al., GLUE: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding, "
    "ICLR 2019, https://arxiv.org/abs/1804.07461"
)
GLUE_BIBTEX = """@inproceedings{wang2019glue,
  title = "{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding",
  author = {Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer
    and Bowman, Samuel R.},
  booktitle = {International Conference on Learning Representations},
  year = {2019},
  url = {https://arxiv.org/abs/1804.07461}
}"""

# Every task, by name. A task is added with `register_task`.
TASKS: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec, replace: bool = False) -> TaskSpec:
    """Adds a task to [`TASKS`], after checking that its declaration holds together.

    Args:
        spec: the task.
        replace: replace a task of the same name; without it, that name is refused.

    Returns:
        `spec`.

    Raises:
        ValueError: the name is taken (and `replace` is not given) or is not lower-case letters, digits and
            `_`; the official metric is not registered; the class its metric is of is not one of its labels;
            or `tsv_columns` does not place every text column and the label.

    Example:
        >>> import dataclasses
        >>> wnli = dataclasses.replace(get_task("rte"), name="wnli", title="GLUE WNLI", folder="WNLI")
        >>> register_task(wnli).name in TASKS
        True
        >>> register_task(wnli)
        Traceback (most recent call last):
        ...
        ValueError: a task named 'wnli' is registered already; give another name, or replace=True
        >>> del TASKS["wnli"]
    """
    if spec.name in TASKS and not replace:
        raise ValueError(
            f"a task named {spec.name!r} is registered already; give another name, or replace=True"
        )
    if not TASK_NAME_RE.fullmatch(spec.name):
        raise ValueError(
            f"task name {spec.name!r}: use lower-case letters, digits and _ alone (it is part of run names)"
        )
    official = get_official_metric(spec.official_metric)
    if official.of_one_class and not 0 <= spec.positive_label < len(spec.label_names):
        raise ValueError(
            f"task {spec.name}: positive_label {spec.positive_label} is not a label id of "
            f"{', '.join(spec.label_names)}; give the id of the class its {official.name} is of"
        )
    missing = [column for column in (*spec.text_columns, "label") if column not in spec.tsv_columns]
    if missing:
        raise ValueError(
            f"task {spec.name}: tsv_columns places no {', '.join(missing)}; give the TSV column of each text "
            "column and of the label"
        )
    TASKS[spec.name] = spec
    return spec


def get_task(name: str) -> TaskSpec:
    """The spec of a registered task; raises [`UnknownNameError`] listing the valid ones.

    Example:
        >>> get_task("sst2").label_names
        ('negative', 'positive')
    """
    if name not in TASKS:
        raise UnknownNameError("task", name, sorted(TASKS))
    return TASKS[name]


def title_of_task(name: str) -> str:
    """The title a card gives the task ("GLUE SST-2"); the name itself for a task not registered here (a run
    read from a folder may name one).

    Example:
        >>> title_of_task("cola"), title_of_task("wnli")
        ('GLUE CoLA', 'wnli')
    """
    return TASKS[name].title if name in TASKS else name


# GLUE's tasks. The order is the one `publish --help` lists.
register_task(
    TaskSpec(
        name="sst2",
        title="GLUE SST-2",
        text_columns=("sentence",),
        label_names=("negative", "positive"),
        folder="SST-2",
        tsv_columns={"sentence": "sentence", "label": "label"},
        citation="Socher et al., Recursive Deep Models for Semantic Compositionality Over a Sentiment "
        "Treebank, EMNLP 2013",
        bibtex="""@inproceedings{socher2013recursive,
  title = {Recursive Deep Models for Semantic Compositionality Over a Sentiment Treebank},
  author = {Socher, Richard and Perelygin, Alex and Wu, Jean and Chuang, Jason
    and Manning, Christopher D. and Ng, Andrew and Potts, Christopher},
  booktitle = {Proceedings of the 2013 Conference on Empirical Methods in Natural Language Processing},
  pages = {1631--1642},
  year = {2013}
}""",
    )
)

register_task(
    TaskSpec(
        name="cola",
        title="GLUE CoLA",
        text_columns=("sentence",),
        label_names=("unacceptable", "acceptable"),
        folder="CoLA",
        tsv_columns={"sentence": 3, "label": 1},
        tsv_has_header=False,
        official_metric="matthews_correlation",
        citation=(
            "Warstadt, Singh and Bowman, Neural Network Acceptability Judgments, TACL 2019, "
            "https://arxiv.org/abs/1805.12471"
        ),
        bibtex="""@article{warstadt2019neural,
  title = {Neural Network Acceptability Judgments},
  author = {Warstadt, Alex and Singh, Amanpreet and Bowman, Samuel R.},
  journal = {Transactions of the Association for Computational Linguistics},
  volume = {7},
  pages = {625--641},
  year = {2019},
  url = {https://arxiv.org/abs/1805.12471}
}""",
    )
)

register_task(
    TaskSpec(
        name="mrpc",
        title="GLUE MRPC",
        text_columns=("sentence1", "sentence2"),
        label_names=("not_equivalent", "equivalent"),
        folder="MRPC",
        tsv_columns={"sentence1": "#1 String", "sentence2": "#2 String", "label": "Quality"},
        official_metric="f1",
        citation="Dolan and Brockett, Automatically Constructing a Corpus of Sentential Paraphrases, "
        "IWP 2005",
        bibtex="""@inproceedings{dolan2005automatically,
  title = {Automatically Constructing a Corpus of Sentential Paraphrases},
  author = {Dolan, William B. and Brockett, Chris},
  booktitle = {Proceedings of the Third International Workshop on Paraphrasing ({IWP}2005)},
  year = {2005}
}""",
    )
)

register_task(
    TaskSpec(
        name="qqp",
        title="GLUE QQP",
        text_columns=("question1", "question2"),
        label_names=("not_duplicate", "duplicate"),
        folder="QQP",
        tsv_columns={"question1": "question1", "question2": "question2", "label": "is_duplicate"},
        official_metric="f1",
        citation="Iyer, Dandekar and Csernai, First Quora Dataset Release: Question Pairs, 2017",
        bibtex="""@misc{iyer2017quora,
  title = {First Quora Dataset Release: Question Pairs},
  author = {Iyer, Shankar and Dandekar, Nikhil and Csernai, Korn{\\'e}l},
  year = {2017},
  howpublished = {https://quoradata.quora.com/First-Quora-Dataset-Release-Question-Pairs}
}""",
    )
)

register_task(
    TaskSpec(
        name="rte",
        title="GLUE RTE",
        text_columns=("sentence1", "sentence2"),
        label_names=("entailment", "not_entailment"),
        folder="RTE",
        tsv_columns={"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"},
        tsv_labels_are_names=True,
        citation="Dagan et al. 2006; Bar Haim et al. 2006; Giampiccolo et al. 2007; Bentivogli et al. "
        "2009 (PASCAL RTE challenges)",
        bibtex="""@inproceedings{dagan2006pascal,
  title = {The {PASCAL} Recognising Textual Entailment Challenge},
  author = {Dagan, Ido and Glickman, Oren and Magnini, Bernardo},
  booktitle = {Machine Learning Challenges Workshop},
  pages = {177--190},
  year = {2006}
}
@inproceedings{barhaim2006second,
  title = {The Second {PASCAL} Recognising Textual Entailment Challenge},
  author = {Bar Haim, Roy and Dagan, Ido and Dolan, Bill and Ferro, Lisa and Giampiccolo, Danilo
    and Magnini, Bernardo and Szpektor, Idan},
  booktitle = {Proceedings of the Second PASCAL Challenges Workshop on Recognising Textual Entailment},
  year = {2006}
}
@inproceedings{giampiccolo2007third,
  title = {The Third {PASCAL} Recognizing Textual Entailment Challenge},
  author = {Giampiccolo, Danilo and Magnini, Bernardo and Dagan, Ido and Dolan, Bill},
  booktitle = {Proceedings of the ACL-PASCAL Workshop on Textual Entailment and Paraphrasing},
  pages = {1--9},
  year = {2007}
}
@inproceedings{bentivogli2009fifth,
  title = {The Fifth {PASCAL} Recognizing Textual Entailment Challenge},
  author = {Bentivogli, Luisa and Clark, Peter and Dagan, Ido and Giampiccolo, Danilo},
  booktitle = {Text Analysis Conference},
  year = {2009}
}""",
    )
)

register_task(
    TaskSpec(
        name="qnli",
        title="GLUE QNLI",
        text_columns=("question", "sentence"),
        label_names=("entailment", "not_entailment"),
        folder="QNLI",
        tsv_columns={"question": "question", "sentence": "sentence", "label": "label"},
        tsv_labels_are_names=True,
        citation="Rajpurkar et al., SQuAD: 100,000+ Questions for Machine Comprehension of Text, EMNLP 2016",
        bibtex="""@inproceedings{rajpurkar2016squad,
  title = "{SQuAD}: 100,000+ Questions for Machine Comprehension of Text",
  author = {Rajpurkar, Pranav and Zhang, Jian and Lopyrev, Konstantin and Liang, Percy},
  booktitle = {Proceedings of the 2016 Conference on Empirical Methods in Natural Language Processing},
  pages = {2383--2392},
  year = {2016},
  url = {https://arxiv.org/abs/1606.05250}
}""",
    )
)

register_task(
    TaskSpec(
        name="mnli",
        title="GLUE MNLI",
        text_columns=("premise", "hypothesis"),
        label_names=("entailment", "neutral", "contradiction"),
        folder="MNLI",
        validation_file="dev_matched.tsv",
        validation_split="validation_matched",
        second_split="validation_mismatched",
        second_file="dev_mismatched.tsv",
        tsv_columns={"premise": "sentence1", "hypothesis": "sentence2", "label": "gold_label"},
        tsv_labels_are_names=True,
        citation="Williams, Nangia and Bowman, A Broad-Coverage Challenge Corpus for Sentence "
        "Understanding through Inference, NAACL 2018",
        bibtex="""@inproceedings{williams2018broad,
  title = {A Broad-Coverage Challenge Corpus for Sentence Understanding through Inference},
  author = {Williams, Adina and Nangia, Nikita and Bowman, Samuel},
  booktitle = {Proceedings of the 2018 Conference of the North American Chapter of the Association for
    Computational Linguistics},
  pages = {1112--1122},
  year = {2018},
  url = {https://arxiv.org/abs/1704.05426}
}""",
    )
)


__all__ = [
    "GLUE_BIBTEX",
    "GLUE_CITATION",
    "GLUE_LANGUAGE",
    "HUB_DATASET_ID",
    "TASKS",
    "TaskSpec",
    "get_task",
    "register_task",
    "title_of_task",
]
