"""Stage 7 — publish: the run folder, holding exactly what is pushed to the Hub.

    runs/<repo-name>/
        adapter_model.safetensors, adapter_config.json   the LoRA adapter and trained head (PEFT format)
        config.json                                      the base model's transformers config, with labels
        tokenizer files                                  as `save_pretrained` writes them
        README.md                                        the model card
        results.json                                     every figure, and the sha256 of every other file

The folder is assembled under a temporary name next to its destination and renamed into place only when
complete: a failed run leaves nothing half-written.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

from .data import TaskData
from .errors import AttncardError
from .evaluate import EvalResult
from .lint import lint_run_folder
from .render import render_card, run_usage_snippet, usage_snippet, write_eval_results, write_plots
from .results import (
    SCHEMA_VERSION,
    DatasetRecord,
    EnvironmentRecord,
    ModelRecord,
    ModuleRecord,
    Results,
    TrainingRecord,
    UsageRecord,
    build_manifest,
    utc_now,
)
from .verify import Verification

CARD_FILE = "README.md"


class CardLintError(AttncardError):
    """The rendered card has a finding of `attncard lint`: it is not written, let alone pushed."""


FINAL_LOSS_STEPS = 20  # the final training loss reported is the mean over this many last steps


def collect_results(
    *,
    repo_name: str,
    repo_id: str | None,
    command: str,
    started_at: str,
    data: TaskData,
    module: ModuleRecord,
    evaluation: EvalResult,
    verification: Verification,
) -> Results:
    """Gathers what the stages measured into one [`Results`] (its manifest is filled in by the writer)."""
    trained = evaluation.trained
    loaded = trained.loaded
    return Results(
        schema_version=SCHEMA_VERSION,
        repo_name=repo_name,
        command=command,
        started_at=started_at,
        finished_at=utc_now(),
        model=ModelRecord(
            name=loaded.name,
            model_id=loaded.model_id,
            revision=loaded.revision,
            family=loaded.family,
            license=loaded.license,
        ),
        module=module,
        dataset=DatasetRecord(
            task=data.spec.name,
            dataset_id=data.source.dataset_id,
            config=data.source.config,
            revision=data.source.revision,
            split=data.spec.validation_split,
            label_names=list(data.spec.label_names),
            train_rows=len(data.train),
            validation_rows=len(data.validation),
            files=data.source.files,
        ),
        training=TrainingRecord(
            hyperparameters=trained.config,
            lora_target_modules=trained.target_modules,
            losses=trained.losses,
            final_loss=sum(trained.losses[-FINAL_LOSS_STEPS:]) / len(trained.losses[-FINAL_LOSS_STEPS:]),
            final_loss_steps=len(trained.losses[-FINAL_LOSS_STEPS:]),
            seconds=trained.seconds,
            device=trained.device,
            penalties=trained.penalties,
            mixed_precision=trained.mixed_precision,
        ),
        metrics=evaluation.metrics,
        efficiency=evaluation.efficiency,
        parameters=evaluation.parameters,
        verification=verification,
        environment=EnvironmentRecord.capture(),
        repo_id=repo_id,
    )


def write_run_folder(evaluation: EvalResult, results: Results, run_dir: str | os.PathLike) -> Path:
    """Writes the run folder: adapter, config, tokenizer, model card and results.json, all or nothing.

    Args:
        evaluation: holds the trained model and tokenizer to save.
        results: the run's figures; its `manifest` is filled in here.
        run_dir: the folder to write, e.g. `runs/minilm-none-sst2`; an existing one is replaced.

    Returns:
        The run folder.

    Example:
        >>> write_run_folder(evaluation, results, "runs/minilm-none-sst2")
        PosixPath('runs/minilm-none-sst2')
    """
    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = run_dir.parent / f".{run_dir.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        trained = evaluation.trained
        # save_embedding_layers=False: peft would otherwise fetch the base config from the Hub to check
        # whether the vocabulary changed; it cannot have, nothing here resizes embeddings.
        trained.model.save_pretrained(partial, save_embedding_layers=False)
        base_model = trained.model.get_base_model()
        config = copy.deepcopy(base_model.config)
        config.architectures = [type(base_model).__name__]  # the checkpoint may name its bare encoder
        config.save_pretrained(partial)
        trained.loaded.tokenizer.save_pretrained(partial)
        # peft writes a boilerplate README.md of its own; ours replaces it.
        (partial / CARD_FILE).unlink(missing_ok=True)

        write_eval_results(results, partial)
        plots = write_plots(results, partial)
        # The usage snippet runs on the folder as it will be published, weights and manifest included; the
        # card shows the same code pointed at the Hub repository (or the final run folder).
        results.manifest = build_manifest(partial)
        results.save(partial)
        example = [evaluation.example[column] for column in evaluation.example]
        location = results.repo_id or run_dir.as_posix()
        output = run_usage_snippet(usage_snippet(results, partial.as_posix(), example))
        results.usage = UsageRecord(code=usage_snippet(results, location, example), output=output)
        (partial / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
        results.manifest = build_manifest(partial)
        results.save(partial)
        findings = lint_run_folder(partial)
        if findings:
            raise CardLintError(
                f"the card failed lint with {len(findings)} finding(s), first: {findings[0]}; nothing was "
                "written — fix the template or the module's texts, then run publish again"
            )

        if run_dir.exists():
            replaced = run_dir.parent / f".{run_dir.name}.replaced-{os.getpid()}"
            run_dir.rename(replaced)
            partial.rename(run_dir)
            shutil.rmtree(replaced)
        else:
            partial.rename(run_dir)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return run_dir


def copy_to_cards(run_dir: Path, cards_dir: Path) -> Path:
    """Copies a run's card, results.json, plots and `.eval_results` to `cards_dir/<repo-name>/`, so the card
    can be reviewed in a pull request; the weights stay out of git."""
    destination = Path(cards_dir) / Path(run_dir).name
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    for path in sorted(Path(run_dir).rglob("*")):
        relative = path.relative_to(run_dir)
        if path.is_file() and (path.suffix in (".md", ".png", ".yaml") or relative.name == "results.json"):
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination / relative)
    return destination
