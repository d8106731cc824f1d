"""The run's `.eval_results/<task>.yaml`: its official metric in huggingface_hub's `EvalResultEntry` format,
the figure the card's model-index gives first.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

from ..record.manifest import RESULTS_FILE
from ..record.results import Results
from ..record.text import COMMIT_RE
from ..run.data import HUB_DATASET_ID
from .model_index import model_index_metrics

EVAL_RESULTS_DIR = ".eval_results"


def eval_results_file(results: Results) -> str:
    """The path of the run's `.eval_results` entry in its folder: `.eval_results/<task>.yaml`."""
    return f"{EVAL_RESULTS_DIR}/{results.dataset.task}.yaml"


def render_eval_results(results: Results) -> str:
    """The run's `.eval_results/<task>.yaml`, in huggingface_hub's `EvalResultEntry` format (see
    [`write_eval_results`]): its value is results.json's official metric of the task, as GLUE's leaderboard
    reports it (Matthews' correlation for CoLA, F1 of the positive class for MRPC and QQP, accuracy
    otherwise; accuracy before schema 4), as the card's figures are.

    Example:
        >>> print(render_eval_results(results).splitlines()[3])
          value: 0.875
    """
    # A local TSV has a file hash, not a commit of the Hub dataset.
    hub_revision = COMMIT_RE.fullmatch(results.dataset.revision) is not None
    source = {}
    if results.repo_id:
        source = {"source_url": f"https://huggingface.co/{results.repo_id}/blob/main/{RESULTS_FILE}"}
        source["source_name"] = "attncard results.json"
    entry = EvalResultEntry(
        dataset_id=HUB_DATASET_ID,
        task_id=results.dataset.task,
        value=model_index_metrics(results)[0].value,
        dataset_revision=results.dataset.revision if hub_revision else None,
        date=results.finished_at,
        notes=f"attention {results.module.name}",  # a setup label, as the Hub's own examples
        **source,
    )
    return yaml.safe_dump(eval_result_entries_to_yaml([entry]), sort_keys=False)


def write_eval_results(results: Results, run_dir: Path) -> Path:
    """Writes `.eval_results/<task>.yaml` in huggingface_hub's `EvalResultEntry` format.

    The Hub shows such an entry on the model page and the benchmark's leaderboard only when the dataset is a
    registered benchmark (an `eval.yaml` in its repository, allow-listed by the Hub) and `task_id` one of its
    tasks; otherwise the card's model-index is what it reads. The source is the run's results.json on the Hub,
    when the run names its repository: the run tag cannot be named here, since it is taken over this file.
    """
    path = run_dir / eval_results_file(results)
    path.parent.mkdir(exist_ok=True)
    path.write_text(render_eval_results(results), encoding="utf-8")
    return path
