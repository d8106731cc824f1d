"""Run folders the tests edit as an attacker would: a copy of a tiny run, its manifest and card sealed again
around an edit, and the one line a refusal prints."""

from __future__ import annotations

import dataclasses
import json
import shutil
from importlib import metadata
from pathlib import Path

import torch

from attncard.pipeline.card.eval_results import write_eval_results
from attncard.pipeline.card.plots import write_plots
from attncard.pipeline.card.render import render_card
from attncard.pipeline.card.snippet import card_usage_code
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE, build_manifest, sha256_file
from attncard.pipeline.record.results import Results
from attncard.pipeline.scoring.metrics import label_metrics, predictions_sha256
from conftest import REPO_ROOT

# A committed run of cards/ and its training-loss plot, which the plot forgeries edit.
RUN = REPO_ROOT / "cards" / "minilm-adaptive_span-mrpc-seed0"
LOSS = "training_loss.png"


def copy_run(tiny_gpt2_run, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(tiny_gpt2_run[0], copy)
    return copy


def refresh_manifest(run_dir: Path) -> None:
    """What an attacker does after editing files: make the manifest list the new digests."""
    data = json.loads((run_dir / RESULTS_FILE).read_text())
    data["manifest"] = build_manifest(run_dir)
    (run_dir / RESULTS_FILE).write_text(json.dumps(data, indent=2))


def reseal(run_dir: Path, results: Results, eval_results: bool = True, usage: bool = True) -> None:
    """Writes every file derived from the (edited) results again, as publish writes them: the usage snippet
    (it names the status and the first row), `.eval_results/`, the plots, the card, the manifest. With
    `eval_results` or `usage` False, a test's own edit of that file or snippet is kept."""
    if usage:
        results.usage = dataclasses.replace(results.usage, code=card_usage_code(results))
    if eval_results:
        write_eval_results(results, run_dir)
    plots = write_plots(results, run_dir)
    results.manifest = {k: v for k, v in build_manifest(run_dir).items() if k != CARD_FILE}
    (run_dir / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = build_manifest(run_dir)
    results.save(run_dir)


def forge_predictions_on_hub(hub, repo_id: str) -> None:
    """Flips the first prediction of a run's predictions.csv on a `LoopbackHub`, in place in the tagged
    commit: what a tampered mirror serves (the manifest no longer matches)."""
    lines = hub.read_file(repo_id, "predictions.csv").decode().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    cells = lines[1].rstrip("\n").split(",")
    column = header.index("prediction")
    cells[column] = "1" if cells[column] == "0" else "0"
    lines[1] = ",".join(cells) + "\n"
    hub.tamper(repo_id, "predictions.csv", "".join(lines).encode())


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def consistent_results(
    results: Results, labels: list[int], logits: torch.Tensor, names: list[str]
) -> Results:
    """`results` with the records read_predictions checks rows against made to agree with these rows."""
    predicted = logits.argmax(dim=-1).tolist()
    counts = {name: labels.count(i) for i, name in enumerate(names)}
    metrics = label_metrics(labels, predicted, names)
    return dataclasses.replace(
        results,
        dataset=dataclasses.replace(results.dataset, label_names=names),
        metrics=dataclasses.replace(
            results.metrics,
            confusion_matrix=metrics.confusion_matrix,
            predictions_sha256=predictions_sha256(predicted),
        ),
        verification=dataclasses.replace(
            results.verification,
            n=len(labels),
            class_counts=counts,
            correct=sum(int(t == p) for t, p in zip(labels, predicted, strict=True)),
        ),
    )


MINE = metadata.version("matplotlib")


def sealed_copy(
    tmp_path: Path, matplotlib_version: str | None, plot: bytes | None = None, plot_style: int | None = None
) -> Path:
    """The committed run copied, results.json recording `matplotlib_version` (none when None) and
    `plot_style`, its plots drawn here in that style (None: the first way; the committed ones are of style
    2), its training-loss plot replaced by `plot`, and the card and manifest written again: what a run
    published that way holds."""
    folder = tmp_path / RUN.name
    shutil.copytree(RUN, folder)
    results = dataclasses.replace(Results.load(folder / RESULTS_FILE), plot_style=plot_style)
    packages = {name: v for name, v in results.environment.packages.items() if name != "matplotlib"}
    if matplotlib_version is not None:
        packages["matplotlib"] = matplotlib_version
    results.environment = dataclasses.replace(results.environment, packages=packages)
    results.manifest = {name: d for name, d in results.manifest.items() if name != CARD_FILE}
    for drawn_plot in write_plots(results, folder):
        results.manifest[drawn_plot["file"]] = sha256_file(folder / drawn_plot["file"])
    if plot is not None:
        (folder / LOSS).write_bytes(plot)
    results.manifest[LOSS] = sha256_file(folder / LOSS)
    with_card = dict(results.manifest)
    drawn = tmp_path / "drawn"
    drawn.mkdir(exist_ok=True)
    plots = write_plots(results, drawn)  # their files and titles, as the card names them
    (folder / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = {**with_card, CARD_FILE: sha256_file(folder / CARD_FILE)}
    results.save(folder)
    return folder


def loss_plot(tmp_path: Path, delta: float = 0.0, plot_style: int | None = None) -> bytes:
    """The run's training-loss plot, drawn here in `plot_style` (None: the first way, as runs published
    before plot style 2 are), with one step's loss moved by `delta`."""
    results = dataclasses.replace(Results.load(RUN / RESULTS_FILE), plot_style=plot_style)
    losses = list(results.training.losses)
    losses[len(losses) // 2] += delta
    forged = dataclasses.replace(results, training=dataclasses.replace(results.training, losses=losses))
    folder = tmp_path / f"loss{delta:+}"
    folder.mkdir()
    write_plots(forged, folder)
    return (folder / LOSS).read_bytes()
