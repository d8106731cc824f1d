"""The card's YAML front matter: licence, base model, datasets, tags and the model-index of its measured
metrics, built with huggingface_hub's `ModelCardData` and `EvalResult`, so the Hub parses it as it parses
its own.

Example:
    >>> card_data(results).to_dict()["library_name"]
    'peft'
"""

from __future__ import annotations

from dataclasses import dataclass

from huggingface_hub import EvalResult, ModelCardData

from ..record.results import Results, SplitResult
from ..record.text import COMMIT_RE
from ..scoring.metrics import get_official_metric
from ..scoring.tasks import GLUE_LANGUAGE, HUB_DATASET_ID, TASKS, title_of_task
from .snippet import base_model_is_local

LICENSE_FILE = "LICENSE"
# The Hub's `license_name` for a base model whose card declared no licence (see `render.render_license`).
UNKNOWN_LICENSE_NAME = "unknown"

# The title of each registered task ([`pipeline.scoring.tasks.TaskSpec.title`]), as the card names it.
TASK_TITLES = {name: spec.title for name, spec in TASKS.items()}


def card_data(results: Results) -> ModelCardData:
    """The card's YAML metadata, to the Hub's model-card spec, with the model-index holding the measured
    accuracy and F1.

    - `base_model` (with `base_model_relation: adapter` and the tag `base_model:adapter:<id>`, on which the
      Hub and inference providers match adapters) only when the base model is a Hub id: a local folder is
      no repository, and the Hub refuses a path there.
    - The model-index sets no `verified` (the Hub computes it), passes macro averaging as the metric's `args`
      (`config` names a metric-loading configuration), and gives the dataset's `revision` only when it is a
      Hub commit (a local TSV is recorded by its sha256, which is no revision of `nyu-mll/glue`).
    """
    task_title = title_of_task(results.dataset.task)
    dataset = {
        "dataset_type": HUB_DATASET_ID,
        "dataset_name": task_title,
        "dataset_config": results.dataset.config,
        "dataset_split": results.dataset.split,
        # A local TSV is recorded by its sha256, which is no revision of the Hub dataset.
        "dataset_revision": revision if COMMIT_RE.fullmatch(revision := results.dataset.revision) else None,
    }
    task = {"task_type": "text-classification", "task_name": "Text Classification"}
    hub_base_model = None if base_model_is_local(results) else results.model.model_id
    adapter = {"base_model": hub_base_model, "base_model_relation": "adapter"} if hub_base_model else {}
    tags = ["attncard", "peft", "lora", "transformers", f"attention-{results.module.name}"]
    tags.append(results.dataset.task)
    if hub_base_model:
        tags.append(f"base_model:adapter:{hub_base_model}")
    licence = {"license": results.model.license}
    if results.model.license == "other":
        # The spec: `other` with an id of the licence and a link to it, here the LICENSE file of the run.
        licence["license_name"] = results.model.license_name or UNKNOWN_LICENSE_NAME
        licence["license_link"] = LICENSE_FILE
    index = model_index_results(results)
    return ModelCardData(
        model_name=results.repo_name,
        **licence,
        **adapter,
        datasets=[HUB_DATASET_ID],
        language=[GLUE_LANGUAGE],
        metrics=list(dict.fromkeys(metric.type for metric in index[0][1])),
        tags=tags,
        pipeline_tag="text-classification",
        library_name="peft",
        eval_results=[
            EvalResult(
                **task,
                **{**dataset, "dataset_split": split},
                metric_type=metric.type,
                metric_name=metric.name,
                metric_value=metric.value,
                **({"metric_args": metric.args} if metric.args else {}),
            )
            for split, metrics in index
            for metric in metrics
        ],
    )


@dataclass(frozen=True)
class IndexMetric:
    """One metric of the card's model-index.

    Attributes:
        type: the metric's id on the Hub ("accuracy", "f1", "matthews_correlation").
        name: as the Hub shows it ("F1 (equivalent)").
        value: results.json's figure.
        field: where results.json holds it ("metrics.official.value"), for messages.
        args: the metric's arguments (F1's averaging or positive class); None for none.
    """

    type: str
    name: str
    value: float
    field: str
    args: dict[str, str | int] | None = None


def model_index_metrics(results: Results, split: SplitResult | None = None) -> list[IndexMetric]:
    """The metrics of the card's model-index, in order: from schema 4 on, the task's official GLUE metric
    first (Matthews' correlation for CoLA, F1 of the positive class for MRPC and QQP), then accuracy, then
    macro F1 where F1 is not the official metric; before, accuracy and macro F1. Given `split`, those of the
    task's second evaluated split (MNLI's mismatched).

    Example:
        >>> [(metric.type, metric.name) for metric in model_index_metrics(results)]  # SST-2, schema 4
        [('accuracy', 'Accuracy'), ('f1', 'F1 (macro)')]
    """
    metrics = (split or results).metrics
    official, where = metrics.official, "second_split.metrics" if split else "metrics"
    accuracy = IndexMetric("accuracy", "Accuracy", metrics.accuracy, f"{where}.accuracy")
    macro_f1 = IndexMetric("f1", "F1 (macro)", metrics.f1_macro, f"{where}.f1_macro", {"average": "macro"})
    spec = get_official_metric(official.name) if official is not None else None
    if spec is None or spec.is_accuracy:
        return [accuracy, macro_f1]
    positive = results.dataset.label_names.index(official.positive_label) if spec.of_one_class else None
    first = IndexMetric(
        spec.name,
        spec.metric_name.format(positive=official.positive_label),
        official.value,
        f"{where}.official.value",
        spec.metric_args(positive) if spec.metric_args else None,
    )
    return [first, accuracy, macro_f1] if spec.keeps_macro_f1 else [first, accuracy]


def model_index_results(results: Results) -> list[tuple[str, list[IndexMetric]]]:
    """The model-index's results, `(dataset split, its metrics)`: the evaluated split's
    ([`model_index_metrics`]), then the second evaluated split's (MNLI's mismatched) when the task has one.

    Example:
        >>> [(split, len(metrics)) for split, metrics in model_index_results(results)]
        [('validation', 2)]
    """
    index = [(results.dataset.split, model_index_metrics(results))]
    if (second := results.second_split) is not None:
        index.append((second.split, model_index_metrics(results, second)))
    return index
