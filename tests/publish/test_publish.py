"""End to end: `publish` writes a complete run folder that the Hub's and transformers' own loaders accept."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import re
import shlex
import shutil
from importlib import metadata
from pathlib import Path

import pytest
import torch
import yaml
from huggingface_hub import ModelCard
from peft import PeftModel
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from attncard.modules import get_module, module_names, module_provenance
from attncard.pipeline.card.model_index import card_data
from attncard.pipeline.checks.lint import lint_run_folder
from attncard.pipeline.cli import publish_main
from attncard.pipeline.publish import publish as publish_stage
from attncard.pipeline.publish.publish import copy_to_cards
from attncard.pipeline.record.environment import EnvironmentRecord
from attncard.pipeline.record.manifest import build_manifest, check_manifest
from attncard.pipeline.record.results import Results, Status, TrainConfig
from attncard.pipeline.run.data import load_task
from attncard.pipeline.run.models import folder_revision, load_model, minilm_folder, tokenize
from attncard.pipeline.run.scaling import MODEL_REPEATS, REPEATS
from attncard.pipeline.run.train import add_lora
from conftest import FIXTURES

RUN_FILES = {
    "README.md",
    "results.json",
    "adapter_model.safetensors",
    "adapter_config.json",
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
}
PLACEHOLDERS = re.compile(r"\b(TODO|TBD|Pending|N/A|None|nan|NaN|inf|placeholder|XXX)\b")


@pytest.fixture(scope="module")
def tiny_run(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-run")
    from conftest import write_sst2_folder

    glue = write_sst2_folder(root / "glue")
    argv = [
        "--model",
        str(tiny_model_dir("gpt2")),
        "--module",
        "none",
        "--task",
        "sst2",
        "--steps",
        "4",
        "--batch-size",
        "4",
        "--data-dir",
        str(glue),
        "--output",
        str(root / "runs"),
        "--repo-id",
        "attncard-tests/tiny-gpt2-none-sst2",
    ]
    assert publish_main(argv) == 0
    return root / "runs" / "tiny-gpt2-none-sst2", argv


def _predict(model, tokenizer, data, max_length):
    predictions = []
    with torch.no_grad():
        for start in range(0, len(data.validation), 64):
            rows = data.validation[start : start + 64]
            batch = tokenize(tokenizer, rows, data.spec.text_columns, max_length)
            predictions += model(**batch).logits.argmax(-1).tolist()
    return predictions


def test_run_folder_holds_exactly_what_is_pushed(tiny_run):
    run_dir, _ = tiny_run
    files = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}
    # `none` keeps the model's own attention: nothing to time against dense attention, so no scaling plot;
    # the tiny model's folder declares no licence, so LICENSE says so.
    assert files == RUN_FILES | {".eval_results/sst2.yaml", "training_loss.png", "LICENSE", "predictions.csv"}
    assert not list(run_dir.parent.glob(".*partial*"))
    results = Results.load(run_dir)
    assert results.efficiency.scaling == [] and results.efficiency.layer_scaling == []
    assert results.efficiency.flops  # the FLOPs estimate is counted, not timed: still there
    assert set(results.manifest) == files - {"results.json"}
    entries = yaml.safe_load((run_dir / ".eval_results" / "sst2.yaml").read_text())
    assert entries[0]["dataset"] == {"id": "nyu-mll/glue", "task_id": "sst2"}  # a local TSV: no Hub commit
    assert entries[0]["value"] == results.metrics.accuracy
    assert entries[0]["notes"] == "attention none"  # a setup label, not a sentence
    assert check_manifest(run_dir, results.manifest) == []


def test_results_record_the_run(tiny_run):
    run_dir, _ = tiny_run
    results = Results.load(run_dir)
    assert results.repo_name == "tiny-gpt2-none-sst2"
    assert results.model.family == "gpt2"
    assert results.module.name == "none"
    assert results.dataset.validation_rows == results.verification.n == 40
    assert results.dataset.revision.startswith("sha256:")
    assert results.training.hyperparameters.steps == 4
    assert len(results.training.losses) == 4
    assert results.parameters.compression_factor == 1.0  # LoRA merges away: nothing is compressed
    assert results.parameters.after == results.parameters.before
    assert results.parameters.lora_layers == 2  # c_attn in each of the two layers
    assert results.parameters.attention_layers_changed == 0  # `none` keeps the model's own attention
    assert results.efficiency.tokens > 0 and results.efficiency.throughput_tokens_per_s > 0
    assert "peak RSS" in results.efficiency.peak_memory_method
    assert sum(map(sum, results.metrics.confusion_matrix)) == 40
    assert results.environment.packages["torch"] == metadata.version("torch")  # the torch that ran
    assert results.command.startswith("publish --model ")
    assert "--steps 4 --batch-size 4" in results.command


def test_the_card_installs_once_pinned_to_the_recorded_commit_and_then_shows_the_snippet(tiny_run):
    run_dir, _ = tiny_run
    results = Results.load(run_dir)
    environment = results.environment
    assert environment.attncard_repository == "https://github.com/attncard/attncard"
    commit = environment.git_commit.removesuffix("+dirty")
    assert re.fullmatch(r"[0-9a-f]{40}", commit)  # the suite runs in a git checkout
    assert results.usage.code.splitlines()[0] == "from attncard import load_verified"
    card = (run_dir / "README.md").read_text()
    install = f'pip install "attncard @ git+https://github.com/attncard/attncard@{commit}"'
    assert card.count("pip install") == 1 and card.count(install) == 1, card
    use_it = card.index("\n## Use it\n")
    assert use_it < card.index(install) < card.index(results.usage.code) < card.index("\n## Results on ")


def test_results_json_is_strict_and_round_trips(tiny_run):
    run_dir, _ = tiny_run
    text = (run_dir / "results.json").read_text()
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in results.json"))
    results = Results.from_dict(data)
    assert results.to_dict() == data
    assert isinstance(results.verification.status, Status)
    assert results.to_json() == text


def test_a_hub_base_model_is_named_as_the_adapter_s_base_to_the_hub_spec():
    """base_model, base_model_relation and the base_model:adapter tag for a Hub base model; no `verified`,
    macro averaging as metric args, and a dataset revision only when it is a commit of the Hub dataset."""
    results = Results.load(FIXTURES / "tiny_results.json")
    results.model.model_id, results.model.revision = "openai-community/gpt2", "a" * 40
    results.dataset.revision = "b" * 40
    data = card_data(results).to_dict()
    assert data["base_model"] == "openai-community/gpt2" and data["base_model_relation"] == "adapter"
    assert "base_model:adapter:openai-community/gpt2" in data["tags"]
    assert {"peft", "lora", "transformers"} <= set(data["tags"])
    assert (data["language"], data["metrics"]) == (["en"], ["accuracy", "f1"])
    accuracy, f1 = data["model-index"][0]["results"][0]["metrics"]
    assert "verified" not in accuracy and f1["args"] == {"average": "macro"} and "config" not in f1
    assert data["model-index"][0]["results"][0]["dataset"]["revision"] == "b" * 40


def test_card_parses_and_shows_only_recorded_figures(tiny_run):
    run_dir, _ = tiny_run
    results = Results.load(run_dir)
    card = ModelCard.load(run_dir / "README.md")
    assert card.data.base_model is None  # a local folder: no Hub repository to name
    assert card.data.library_name == "peft"
    assert card.data.pipeline_tag == "text-classification"
    accuracy, f1 = card.data.eval_results
    assert (accuracy.metric_type, accuracy.metric_value) == ("accuracy", results.metrics.accuracy)
    assert (f1.metric_type, f1.metric_value) == ("f1", results.metrics.f1_macro)
    assert accuracy.dataset_split == "validation"
    body = card.text
    assert f"**Status: {results.verification.status.value}**" in body
    assert f"| Threshold (p0 + 3·SE) | {100 * results.verification.threshold:.2f}% |" in body
    assert f"| Accuracy | {100 * results.metrics.accuracy:.2f}% |" in body
    assert results.command in body
    prose = re.sub(r"```.*?```", "", body, flags=re.DOTALL)  # the module's source may say `None`
    assert not PLACEHOLDERS.findall(prose), PLACEHOLDERS.findall(prose)
    yaml.safe_load(card.content.split("---")[1])


def test_config_is_a_transformers_config(tiny_run):
    run_dir, _ = tiny_run
    config = AutoConfig.from_pretrained(run_dir)
    assert config.model_type == "gpt2"
    assert config.architectures == ["GPT2ForSequenceClassification"]
    assert config.id2label == {0: "negative", 1: "positive"}


def test_cards_copy_leaves_the_weights_out(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    destination = copy_to_cards(run_dir, tmp_path / "cards")
    copied = {p.relative_to(destination).as_posix() for p in destination.rglob("*") if p.is_file()}
    run_files = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}
    # Everything but the weights: a cards copy checks against the manifest without them.
    assert copied == run_files - {"adapter_model.safetensors"}
    assert {"predictions.csv", "config.json", "adapter_config.json", "README.md", "results.json"} <= copied
    assert (destination / "README.md").read_bytes() == (run_dir / "README.md").read_bytes()


@pytest.mark.slow
def test_same_seed_same_run(tiny_run, tmp_path):
    """On the CPU a seed fixes everything: losses and predictions repeat exactly."""
    run_dir, argv = tiny_run
    assert publish_main([*argv[:-4], "--output", str(tmp_path)]) == 0
    first = Results.load(run_dir)
    second = Results.load(tmp_path / "gpt2-none-sst2")
    assert second.training.losses == first.training.losses
    assert second.metrics.predictions_sha256 == first.metrics.predictions_sha256


def test_the_adapter_names_its_targets_in_sorted_order(tiny_model_dir, tmp_path):
    """peft holds LoRA's targets as a set, saved in the set's order, which follows the process's hash seed:
    the same command wrote ["query", "value"] into adapter_config.json in one run, ["value", "query"] in
    another."""
    loaded = load_model(str(tiny_model_dir("bert")), ["negative", "positive"])
    model = add_lora(loaded, TrainConfig())
    assert model.peft_config["default"].target_modules == ["query", "value"]
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "adapter_config.json").read_text())["target_modules"] == ["query", "value"]


def test_failed_render_leaves_nothing(tiny_model_dir, small_glue, tmp_path, monkeypatch):
    def broken_render(results, plots):
        raise ValueError("render failed")

    monkeypatch.setattr(publish_stage, "render_card", broken_render)
    with pytest.raises(ValueError, match="render failed"):
        publish_main(
            [
                "--model",
                str(tiny_model_dir("gpt2")),
                "--module",
                "none",
                "--steps",
                "1",
                "--data-dir",
                str(small_glue),
                "--output",
                str(tmp_path / "runs"),
            ]
        )
    assert list((tmp_path / "runs").iterdir()) == []


def test_the_commit_and_module_source_are_those_at_the_start(
    tiny_model_dir, small_glue, tmp_path, monkeypatch, capsys
):
    """A commit made, or a module edited, while a run trains is not claimed for it."""
    captured = iter(["a" * 40, "b" * 40])  # the commit at the start, then a later one
    real_capture = EnvironmentRecord.capture

    def capture(project_dir=None):
        return dataclasses.replace(real_capture(project_dir), git_commit=next(captured))

    monkeypatch.setattr(publish_stage.EnvironmentRecord, "capture", capture)
    argv = ["--model", str(tiny_model_dir("gpt2")), "--module", "none", "--steps", "1"]
    argv += ["--data-dir", str(small_glue), "--output", str(tmp_path / "runs")]
    assert publish_main(argv) == 0
    (results,) = (tmp_path / "runs").glob("*/results.json")
    assert json.loads(results.read_text())["environment"]["git_commit"] == "a" * 40

    real_provenance = publish_stage.module_provenance
    calls = iter(range(100))

    def provenance(name):
        found = real_provenance(name)
        return found if next(calls) == 0 else dataclasses.replace(found, source_sha256="0" * 64)

    monkeypatch.setattr(publish_stage, "module_provenance", provenance)
    capsys.readouterr()
    assert publish_main([*argv[:-1], str(tmp_path / "second")]) == 2
    assert "the source of the module none changed while the run trained" in capsys.readouterr().err
    assert not (tmp_path / "second").exists() or list((tmp_path / "second").iterdir()) == []


def test_manifest_finds_tampering(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    manifest = build_manifest(run_dir)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in manifest:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes((run_dir / name).read_bytes())
    (copy / "config.json").write_text("{}")
    (copy / "tokenizer.json").unlink()
    (copy / "extra.bin").write_bytes(b"x")
    differences = check_manifest(copy, manifest)
    assert [(d.path, d.kind) for d in differences] == [
        ("config.json", "changed"),
        ("tokenizer.json", "missing"),
        ("extra.bin", "unlisted"),
    ]
    assert differences[0].expected == manifest["config.json"]
    assert differences[0].actual == hashlib.sha256(b"{}").hexdigest()


@pytest.mark.slow
def test_minilm_on_real_sst2_reloads_with_peft(glue, minilm_sst2_run):
    """The real model on all 872 SST-2 validation rows; PeftModel.from_pretrained on the folder reproduces the
    recorded predictions exactly. The run is the session's shared `publish` of MiniLM on the real SST-2
    (conftest's `minilm_sst2_run`): training it again here would only repeat it."""
    run_dir, _ = minilm_sst2_run
    results = Results.load(run_dir)
    assert results.verification.n == 872
    assert results.verification.class_counts == {"negative": 428, "positive": 444}
    assert round(100 * results.verification.threshold, 3) == 55.996
    assert results.model.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert json.loads((run_dir / "adapter_config.json").read_text())["base_model_name_or_path"] == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )

    config = AutoConfig.from_pretrained(run_dir)
    base = AutoModelForSequenceClassification.from_pretrained(minilm_folder(), config=config)
    model = PeftModel.from_pretrained(base, run_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(run_dir)
    data = load_task("sst2", glue)
    predictions = _predict(model, tokenizer, data, results.training.hyperparameters.max_length)
    accuracy = sum(p == t for p, t in zip(predictions, data.validation["label"], strict=True)) / 872
    assert accuracy == results.metrics.accuracy
    import hashlib

    import numpy as np

    digest = hashlib.sha256(np.asarray(predictions, dtype="<i8").tobytes()).hexdigest()
    assert digest == results.metrics.predictions_sha256


@pytest.mark.slow
@pytest.mark.parametrize("module_name", module_names())
def test_every_module_publishes_a_lint_clean_run(tiny_model_dir, small_glue, tmp_path, capsys, module_name):
    family = "llama" if module_name == "span_expanded" else "bert"  # one decoder with grouped-query heads
    argv = [
        "--model",
        str(tiny_model_dir(family)),
        "--module",
        module_name,
        "--steps",
        "3",
        "--batch-size",
        "4",
        "--data-dir",
        str(small_glue),
        "--output",
        str(tmp_path / "runs"),
    ]
    assert publish_main(argv) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert lint_run_folder(run_dir) == []
    results = Results.load(run_dir)
    assert results.module.name == module_name
    assert results.module.trace and results.module.trace[-1].stage == "output projection"
    # model.py only where the module has its own apply or hooks (`none` has neither).
    assert set(results.module.source) == {path.name for path in get_module(module_name).source_files}
    assert set(results.module.source) >= {"attention.py", "config.py", "__init__.py"}
    provenance = module_provenance(module_name)
    assert (results.module.package, results.module.package_version) == ("attncard", provenance.version)
    assert results.module.source_sha256 == provenance.source_sha256
    efficiency = results.efficiency
    # Every long stage shows its progress: training, evaluation, stock peft and the two scaling tables.
    shown = capsys.readouterr().err
    stages = ["train", "evaluate"]
    if get_module(module_name).claims.changes_attention:
        stages += ["stock peft", "scaling: whole model", "scaling: attention layer 0"]
    assert [stage for stage in stages if f"{stage}: " not in shown] == []
    if get_module(module_name).claims.changes_attention:
        assert efficiency.scaling and efficiency.layer_scaling and (run_dir / "scaling.png").is_file()
        assert {row.repeats for row in efficiency.scaling} == {MODEL_REPEATS}
        assert {row.repeats for row in efficiency.layer_scaling} == {REPEATS}
        for row in efficiency.scaling + efficiency.layer_scaling:
            assert row.module_seconds_min <= row.module_seconds <= row.module_seconds_max
            assert row.dense_seconds_min <= row.dense_seconds <= row.dense_seconds_max
            assert row.speedup_low <= row.speedup <= row.speedup_high
    else:  # the model's own attention: timing it against itself would show noise, so nothing is timed
        assert efficiency.scaling == efficiency.layer_scaling == [] and not (run_dir / "scaling.png").exists()
        assert "there is no module to time against dense" in (run_dir / "README.md").read_text()
    if module_name != "none":
        assert results.module.stats
        assert set(results.module.config) == set(results.module.config_help)
    if module_name == "adaptive_span":
        assert (run_dir / "spans.png").is_file()
        assert len(results.training.penalties) == 3
        assert results.module.stats["mean_span"] > 0


def test_a_card_with_a_lint_finding_is_not_written(tiny_model_dir, small_glue, tmp_path, monkeypatch, capsys):
    real_render = publish_stage.render_card
    # The template itself leaves a marker: the loader (which renders the card again) sees the same card.
    with_marker = lambda results, plots: real_render(results, plots) + "TODO\n"  # noqa: E731
    monkeypatch.setattr(publish_stage, "render_card", with_marker)
    monkeypatch.setattr("attncard.pipeline.checks.card_render.render_card", with_marker)
    argv = [
        "--model",
        str(tiny_model_dir("gpt2")),
        "--module",
        "none",
        "--steps",
        "1",
        "--data-dir",
        str(small_glue),
        "--output",
        str(tmp_path / "runs"),
    ]
    assert publish_main(argv) == 2
    assert "the card failed lint with 1 finding(s), first: README.md:" in capsys.readouterr().err
    assert list((tmp_path / "runs").iterdir()) == []


# --- nothing of the publisher's disk is published ----------------------------------------------------------

PATHLESS_REPO = "attncard-tests/tiny-gpt2-none-sst2"


@pytest.fixture(scope="module")
def pathless_run(tiny_model_dir, tmp_path_factory):
    """`(run folder, cards copy, the absolute paths used to make them)`: a tiny run from a model folder
    `…/models/tiny-gpt2` and a GLUE folder, both under pytest's temporary folder."""
    from conftest import write_sst2_folder

    root = tmp_path_factory.mktemp("publisher")
    model = root / "models" / "tiny-gpt2"
    shutil.copytree(tiny_model_dir("gpt2"), model)
    glue = write_sst2_folder(root / "glue")
    output, cards = root / "runs", root / "cards"
    argv = [
        *("--model", str(model), "--module", "none", "--steps", "3", "--batch-size", "8"),
        *(
            "--data-dir",
            str(glue),
            "--output",
            str(output),
            "--cards",
            str(cards),
            "--repo-id",
            PATHLESS_REPO,
        ),
    ]
    assert publish_main(argv) == 0
    used = [model, glue, output, cards, root, tmp_path_factory.getbasetemp(), Path.home(), Path.cwd()]
    return output / "tiny-gpt2-none-sst2", cards / "tiny-gpt2-none-sst2", used


def test_no_published_file_holds_a_local_path(pathless_run):
    """Every file of the run folder and of its --cards copy, weights and plots included, is searched byte by
    byte for the folders used to make it, as given and resolved, and for the home and working folders."""
    run_dir, cards_dir, used = pathless_run
    forbidden = {
        text
        for path in used
        for text in (str(path), str(path.resolve()), path.as_posix())
        if len(Path(text).parts) > 1  # a home of "/" would match every path
    }
    files = [path for folder in (run_dir, cards_dir) for path in folder.rglob("*") if path.is_file()]
    names = {path.relative_to(run_dir).as_posix() for path in files if run_dir in path.parents}
    assert names >= RUN_FILES | {".eval_results/sst2.yaml"}
    found = sorted(
        f"{path}: {text}" for path in files for text in forbidden if text.encode() in path.read_bytes()
    )
    assert found == []


def test_model_data_and_command_are_recorded_by_name_and_hash(pathless_run):
    run_dir, _, _ = pathless_run
    results = Results.load(run_dir)
    assert (results.model.name, results.model.model_id) == ("tiny-gpt2", "tiny-gpt2")
    assert results.model.revision == folder_revision(pathless_run[2][0])
    assert json.loads((run_dir / "adapter_config.json").read_text())["base_model_name_or_path"] == "tiny-gpt2"
    assert {split: record["path"] for split, record in results.dataset.files.items()} == {
        "train": "SST-2/train.tsv",
        "validation": "SST-2/dev.tsv",
    }
    assert results.dataset.revision == f"sha256:{results.dataset.files['validation']['sha256']}"
    assert results.command == (
        "publish --model ./tiny-gpt2 --module none --task sst2 --steps 3 --batch-size 8 --lr 0.0002 "
        f'--max-length 128 --seed 0 --data-dir "$GLUE_DIR" --repo-id {PATHLESS_REPO}'
    )
    card = (run_dir / "README.md").read_text()
    assert "base_model" not in card.split("\n---\n")[0]  # the front matter names no local folder
    assert f"load_verified('{PATHLESS_REPO}', base_model='./tiny-gpt2'" in card


def test_the_recorded_command_reproduces_the_run_elsewhere(pathless_run, tmp_path, monkeypatch):
    """A reader with copies of the model folder and the GLUE files, anywhere on their disk, runs the card's
    command as written (beside the model folder, GLUE_DIR set) and gets the same run."""
    run_dir, _, (model, glue, *_) = pathless_run
    recorded = Results.load(run_dir)
    reader = tmp_path / "reader"
    shutil.copytree(model, reader / "tiny-gpt2")
    shutil.copytree(glue, tmp_path / "their-glue")
    monkeypatch.chdir(reader)
    monkeypatch.setenv("GLUE_DIR", str(tmp_path / "their-glue"))
    program, *argv = shlex.split(os.path.expandvars(recorded.command))
    assert program == "publish"
    assert publish_main([*argv, "--output", str(tmp_path / "runs")]) == 0
    again = Results.load(tmp_path / "runs" / "tiny-gpt2-none-sst2")
    assert again.command == recorded.command
    assert again.model == recorded.model
    assert again.dataset == recorded.dataset
    assert again.training.losses == recorded.training.losses
    assert again.metrics.predictions_sha256 == recorded.metrics.predictions_sha256


def test_an_unpublished_run_names_no_local_path_and_its_snippet_runs_beside_it(
    tiny_model_dir, tmp_path, monkeypatch
):
    """Without --repo-id the card's snippet loads the run folder by its name, `./<name>`, never by the path
    --output gave: no file of the run holds the publisher's folders (an absolute --output was written into
    the card twice and into results.json). The snippet runs in the folder that holds the run folder."""
    from conftest import write_sst2_folder

    model = tiny_model_dir("gpt2")
    output = tmp_path / "alice-secret" / "study" / "runs"
    argv = [
        *("--model", str(model), "--module", "none", "--steps", "2", "--batch-size", "4"),
        *("--data-dir", str(write_sst2_folder(tmp_path / "glue")), "--output", str(output)),
    ]
    assert publish_main(argv) == 0
    run_dir = output / f"{model.name}-none-sst2"
    holding = sorted(
        path.relative_to(run_dir).as_posix()
        for path in run_dir.rglob("*")
        if path.is_file() and b"alice-secret" in path.read_bytes()
    )
    assert holding == []
    card = (run_dir / "README.md").read_text(encoding="utf-8")
    assert f"the snippet loads its run folder `./{run_dir.name}`: run it in the folder that holds" in card
    code = re.search(r"\n```python\n(.*?)```\n", card, re.DOTALL).group(1)
    assert f"load_verified('./{run_dir.name}', base_model='./{model.name}'" in code
    assert lint_run_folder(run_dir) == []
    (output / model.name).symlink_to(model)  # the base model folder the card asks the reader to bring
    monkeypatch.chdir(output)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "<card snippet>", "exec"), {"__name__": "__card__"})
    assert printed.getvalue() == Results.load(run_dir).usage.output


def test_any_output_folder_publishes_as_the_snippet_does_not_name_it(tiny_model_dir, tmp_path):
    """An --output the card's snippet could not quote (a space) was refused before training while the snippet
    named the run by that path; it names it `./<name>` now, so the folder is the publisher's own business."""
    from conftest import write_sst2_folder

    model, glue = tiny_model_dir("gpt2"), write_sst2_folder(tmp_path / "glue")
    argv = ["--model", str(model), "--module", "none", "--steps", "2", "--batch-size", "4"]
    assert publish_main([*argv, "--output", str(tmp_path / "my runs"), "--data-dir", str(glue)]) == 0
    results = Results.load(tmp_path / "my runs" / f"{model.name}-none-sst2")
    assert f"load_verified('./{results.repo_name}'" in results.usage.code


# --- a run already in the run folder; --max-length beyond the model ---------------------------------------


def test_a_second_publish_keeps_the_first_run_unless_overwrite(tiny_model_dir, small_glue, tmp_path, capsys):
    runs = tmp_path / "runs"
    argv = [*("--model", str(tiny_model_dir("gpt2")), "--module", "none", "--steps", "1")]
    argv += ["--data-dir", str(small_glue), "--output", str(runs)]
    assert publish_main(argv) == 0
    (run_dir,) = runs.iterdir()
    first = (run_dir / "results.json").read_bytes()
    started_at = json.loads(first)["started_at"]
    capsys.readouterr()

    assert publish_main(argv) == 2
    assert capsys.readouterr().err == (
        f"error: {run_dir} already holds a run (results.json of {started_at}); pass --overwrite to replace "
        "it, or --output another folder\n"
    )
    assert (run_dir / "results.json").read_bytes() == first

    assert publish_main([*argv, "--overwrite"]) == 0
    assert (run_dir / "results.json").read_bytes() != first
    assert Results.load(run_dir).manifest == build_manifest(run_dir)  # the new run, whole
    assert list(runs.iterdir()) == [run_dir]  # nothing left beside it


def test_a_run_that_appears_while_one_trains_is_kept(tiny_model_dir, small_glue, tmp_path, monkeypatch):
    """Without `overwrite`, the folder is checked again when the run is written: a run another process wrote
    there meanwhile is kept, and nothing of this one is left."""
    options = publish_stage.PublishOptions(
        model=str(tiny_model_dir("gpt2")),
        module="none",
        task="sst2",
        train=TrainConfig(steps=1, batch_size=4),
        data_dir=small_glue,
        output=tmp_path / "runs",
        repo_id=None,
        push=False,
        overwrite=False,
    )
    real_train = publish_stage.train

    def train_while_another_run_is_written(*args, **kwargs):
        options.run_dir.mkdir(parents=True)
        (options.run_dir / "results.json").write_text('{"started_at": "2026-12-07T05:00:00Z"}')
        return real_train(*args, **kwargs)

    monkeypatch.setattr(publish_stage, "train", train_while_another_run_is_written)
    with pytest.raises(publish_stage.AttncardError, match=r"holds a run \(results.json of 2026-12-07"):
        publish_stage.run_publish(options)
    assert list(options.output.iterdir()) == [options.run_dir]
    assert [path.name for path in options.run_dir.iterdir()] == ["results.json"]


def test_a_max_length_beyond_a_loaded_model_s_positions_stops_before_training(
    tiny_model_dir, small_glue, tmp_path, monkeypatch
):
    """A Hub model's config is read when it is loaded: the library checks the length there, before training
    (for a model on this machine the command line has checked it already)."""
    monkeypatch.setattr(publish_stage, "train", lambda *args, **kwargs: pytest.fail("trained on bad input"))
    folder = tiny_model_dir("bert")
    options = publish_stage.PublishOptions(
        model=str(folder),
        module="none",
        task="sst2",
        train=TrainConfig(steps=1, batch_size=4, max_length=161),
        data_dir=small_glue,
        output=tmp_path / "runs",
        repo_id=None,
        push=False,
    )
    message = f"--max-length 161 is more than {folder}'s 160 positions; use --max-length 160 or less"
    with pytest.raises(publish_stage.AttncardError, match=re.escape(message)):
        publish_stage.run_publish(options)
    assert not (tmp_path / "runs").exists()
