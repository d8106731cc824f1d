"""A LoRA training step of a whole model with a module against the dense model (`none`): time, interleaved.

Run: `.venv/bin/python tests/bench/bench_training_step.py [--module adaptive_sparse] [--batch 16] [--length
48] [--padded 0.5] [--steps 80]`. Both models are built as `publish` builds them (`load_model`, the module's
default config, `add_lora`), with AdamW at the default learning rate, from MiniLM (the `minilm` alias,
offline), and take the same synthetic batch: `--batch` rows of `--length` real token ids, the last
`--padded` share of the rows padded from two thirds of the length on, as in a padded SST-2 batch. A step is
forward, loss, backward, optimizer step. After `--warmup` steps each, the two models alternate, one step
each, `--steps` times, so that a busy spell of the machine falls on both. Prints each side's median
(min–max) in milliseconds, the ratio of the medians, module over dense (the figure of the issue's "training
time stays ≤ 1.05× of none"), and the median (min–max) of the ratio within each round.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attncard.modules import get_module
from attncard.pipeline.record.results import TrainConfig
from attncard.pipeline.run.models import load_model
from attncard.pipeline.run.scaling import synthetic_input_ids
from attncard.pipeline.run.train import add_lora

LABELS = ["negative", "positive"]


def build(module_name: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """MiniLM with `module_name` installed (nothing for `none`) and LoRA, in train mode, and its optimizer."""
    loaded = load_model("minilm", LABELS)
    module = config = None
    if module_name != "none":
        module = get_module(module_name)
        config = module.config_class()
        module.apply(loaded.model, config)
    model = add_lora(loaded, TrainConfig(), module, config).train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=TrainConfig().lr)
    return model, optimizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default="adaptive_sparse")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=48)
    parser.add_argument("--padded", type=float, default=0.5, help="share of the rows padded (0 to 1)")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    sides = {"none": build("none"), args.module: build(args.module)}
    config = next(iter(sides.values()))[0].config
    input_ids = synthetic_input_ids(config, args.batch, args.length)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[args.batch - round(args.batch * args.padded) :, 2 * args.length // 3 :] = 0
    labels = torch.arange(args.batch) % 2

    def step(name: str) -> float:
        model, optimizer = sides[name]
        start = time.perf_counter()
        model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return time.perf_counter() - start

    for name in sides:
        for _ in range(args.warmup):
            step(name)
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.steps):
        for name in sides:
            times[name].append(step(name))
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    print(
        f"training step, MiniLM + LoRA, B={args.batch} N={args.length} padded rows {args.padded:.0%}, "
        f"{args.steps} interleaved steps, threads={torch.get_num_threads()}"
    )
    for name, seconds in times.items():
        print(f"{name:<16} {medians[name] * 1e3:8.1f} ms ({min(seconds) * 1e3:.1f}–{max(seconds) * 1e3:.1f})")
    rounds = [module / dense for module, dense in zip(times[args.module], times["none"], strict=True)]
    print(
        f"{args.module} / none: {medians[args.module] / medians['none']:.3f} (medians); per round "
        f"{statistics.median(rounds):.3f} ({min(rounds):.2f}–{max(rounds):.2f})"
    )


if __name__ == "__main__":
    main()
