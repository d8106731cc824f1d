"""Stage 3 — train: LoRA recovery fine-tuning of a classification model on a task's training split.

LoRA (peft) on the attention projections, the classification head fully trained, AdamW with a
learning-rate schedule (constant by default: 200 steps are too few to decay from 2e-4), gradient
clipping. The loop runs on `accelerate`, so `accelerate launch publish …` trains data-parallel on several
GPUs without code changes. On the CPU it is deterministic for a seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from accelerate import Accelerator
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from peft.tuners.lora import LoraLayer
from peft.utils.constants import DUMMY_TARGET_MODULES
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import get_scheduler

from ...modules import AttentionModule
from ...modules.base import Training, attention_layers
from ..record.results import TrainConfig
from .data import TaskData
from .models import LoadedModel, tokenize


@dataclass
class TrainResult:
    """The fine-tuned model and what happened while training it."""

    model: PeftModel
    loaded: LoadedModel  # the base model's tokenizer, id, revision and family
    config: TrainConfig
    losses: list[float]  # task loss of every step
    penalties: list[float]  # the module's penalty of every step; empty when it has none
    seconds: float
    target_modules: list[str]
    base_parameters: int  # of the model as loaded, head included, before the module and LoRA
    trainable_parameters: int
    lora_layers: int  # layers with a LoRA adapter
    attention_layers_changed: int  # attention layers the module changes
    device: str
    mixed_precision: str  # "no", "bf16" or "fp16"
    module: AttentionModule | None = None  # the attention module installed, and its config
    module_config: object | None = None
    calibration: dict = field(default_factory=dict)  # what the module's `calibrate` measured after training


def adapted_module_names(model: PeftModel) -> list[str]:
    """The target-module names LoRA adapts in a peft model; empty when it has no LoRA layer."""
    targets = model.peft_config["default"].target_modules
    if targets == DUMMY_TARGET_MODULES:
        return []
    return [targets] if isinstance(targets, str) else sorted(targets)


def add_lora(
    loaded: LoadedModel,
    config: TrainConfig,
    module: AttentionModule | None = None,
    module_config: object | None = None,
) -> PeftModel:
    """Wraps the model with LoRA adapters on the module's `lora_targets` (by default the family's query and
    value projections). peft keeps the classification head trainable (`SEQ_CLS`) and trains and saves the
    installed attention module's own submodules (`modules_to_save`)."""
    training = module.training if module is not None else Training()
    lora_config = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=training.lora_targets(loaded.family, module_config),
        modules_to_save=list(training.trainable_modules) or None,
    )
    peft_model = get_peft_model(loaded.model, lora_config)
    # peft holds the targets as a set and saves them in its order, which follows the process's string hash
    # seed: adapter_config.json differed between two runs of the same command. A sorted list saves as is.
    saved_targets = peft_model.peft_config["default"].target_modules
    if isinstance(saved_targets, set):
        peft_model.peft_config["default"].target_modules = sorted(saved_targets)
    # The adapter's config must name the Hub weights, not the folder they were read from on this machine.
    peft_model.peft_config["default"].base_model_name_or_path = loaded.model_id
    peft_model.peft_config["default"].revision = (
        None if loaded.revision.startswith("sha256:") else loaded.revision
    )
    return peft_model


def train(
    loaded: LoadedModel,
    data: TaskData,
    config: TrainConfig,
    module: AttentionModule | None = None,
    module_config: object | None = None,
) -> TrainResult:
    """Fine-tunes `loaded.model` with LoRA on `data.train` for `config.steps` steps.

    Args:
        loaded: the model and tokenizer from [`pipeline.run.models.load_model`].
        data: the task, from [`pipeline.run.data.load_task`].
        config: hyperparameters.
        module: the attention module installed in `loaded.model`, if any: its parameters are trained too,
            at their own learning rates, and its penalty is added to the loss.
        module_config: that module's config.

    Returns:
        A [`TrainResult`] holding the peft model (in eval mode) and the loss of every step.

    Example:
        >>> from attncard.pipeline.run.data import load_task
        >>> from attncard.pipeline.run.models import load_model
        >>> data = load_task("sst2", "glue")
        >>> loaded = load_model("tiny-gpt2", data.spec.label_names)
        >>> result = train(loaded, data, TrainConfig(steps=2, batch_size=8))
        >>> len(result.losses), result.model.training
        (2, False)
    """
    torch.manual_seed(config.seed)
    # bf16 autocast on GPUs that have it; fp32 on the CPU, where the loop must be bit-for-bit repeatable.
    on_gpu = torch.cuda.is_available()
    mixed_precision = "bf16" if on_gpu and torch.cuda.is_bf16_supported() else ("fp16" if on_gpu else "no")
    accelerator = Accelerator(cpu=not on_gpu, mixed_precision=mixed_precision)
    model = add_lora(loaded, config, module, module_config)
    trainable = [p for p in model.parameters() if p.requires_grad]
    training = module.training if module else Training()
    rates = training.learning_rates(module_config) if training.learning_rates else {}
    groups: dict[float, list[torch.nn.Parameter]] = {}
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            lr = next((rate for fragment, rate in rates.items() if fragment in name), config.lr)
            groups.setdefault(lr, []).append(parameter)
    penalty = training.penalty

    text_columns = data.spec.text_columns

    def collate(rows: list[dict]) -> dict[str, torch.Tensor]:
        columns = {column: [row[column] for row in rows] for column in text_columns}
        batch = tokenize(loaded.tokenizer, columns, text_columns, config.max_length)
        batch["labels"] = torch.tensor([row["label"] for row in rows])
        return batch

    loader = DataLoader(
        data.train,
        batch_size=config.batch_size,
        shuffle=True,
        drop_last=len(data.train) >= config.batch_size,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(config.seed),
    )
    optimizer = torch.optim.AdamW(
        [{"params": params, "lr": lr} for lr, params in groups.items()], weight_decay=config.weight_decay
    )
    scheduler = get_scheduler(
        config.lr_schedule,
        optimizer,
        num_warmup_steps=int(config.warmup_ratio * config.steps),
        num_training_steps=config.steps,
    )
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    model.train()
    losses: list[float] = []
    penalties: list[float] = []
    started = time.perf_counter()
    progress = tqdm(total=config.steps, desc="train", unit="step", disable=not accelerator.is_main_process)
    while len(losses) < config.steps:
        for batch in loader:
            task_loss = model(**batch).loss
            loss = task_loss
            if penalty is not None:
                module_penalty = penalty(model, module_config, len(losses))
                penalties.append(module_penalty.item())
                loss = task_loss + module_penalty
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(trainable, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(task_loss.item())
            progress.update(1)
            progress.set_postfix(loss=f"{task_loss.item():.4f}")
            if len(losses) == config.steps:
                break
    progress.close()
    seconds = time.perf_counter() - started

    model = accelerator.unwrap_model(model)
    model.eval()
    # Measured on the trained model, before anything evaluates it: the module dispatches from it.
    calibration = training.calibrate(model, module_config) if training.calibrate else {}
    return TrainResult(
        model=model,
        loaded=loaded,
        config=config,
        losses=losses,
        penalties=penalties,
        seconds=seconds,
        target_modules=adapted_module_names(model),
        base_parameters=loaded.parameters,
        trainable_parameters=sum(p.numel() for p in trainable),
        lora_layers=sum(isinstance(layer, LoraLayer) for layer in model.modules()),
        attention_layers_changed=(
            len(attention_layers(model)) if module and module.claims.changes_attention else 0
        ),
        device=str(accelerator.device),
        mixed_precision=mixed_precision,
        module=module,
        module_config=module_config,
        calibration=calibration,
    )
