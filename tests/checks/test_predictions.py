"""predictions.csv: written by publish, covered by the manifest, read back bit for bit and as hostile input;
and `attncard verify --predictions`, which recomputes every quality figure from it without model or weights.

The run is the session's tiny GPT-2 run (tests/conftest.py). A tampering test edits a copy as someone with
write access to the run could, refreshing the manifest after the edit (unless the test is about not
refreshing it), so that only the checks of what predictions.csv says stand between the edit and the user.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from attncard.pipeline.card.plots import write_plots
from attncard.pipeline.card.render import render_card
from attncard.pipeline.checks.integrity import check_safe_formats
from attncard.pipeline.checks.predictions import (
    MAX_PREDICTIONS_BYTES,
    header,
    max_predictions_bytes,
    prediction_figures,
    predictions_text,
    read_predictions,
    write_predictions,
)
from attncard.pipeline.cli import main
from attncard.pipeline.publish.publish import copy_to_cards
from attncard.pipeline.record.errors import IntegrityError
from attncard.pipeline.record.manifest import (
    CARD_FILE,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    build_manifest,
    sha256_file,
)
from attncard.pipeline.record.results import Results, Status
from attncard.pipeline.run.data import load_task
from attncard.pipeline.scoring.gate import verification_from_counts
from attncard.pipeline.scoring.metrics import label_metrics, quality_metrics
from attncard.pipeline.verify.download import download_verified
from attncard.pipeline.verify.reverify_predictions import reverify_predictions
from run_folders import consistent_results, copy_run, refresh_manifest, reseal


def edit_lines(run_dir: Path, edit: Callable[[list[str]], list[str]], refresh: bool = True) -> None:
    """Rewrites predictions.csv line by line (the header is line 0), then refreshes the manifest."""
    path = run_dir / PREDICTIONS_FILE
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    if refresh:
        refresh_manifest(run_dir)


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def verify_predictions(run_dir: Path, glue: Path) -> int:
    return main(["verify", "--predictions", str(run_dir), "--data-dir", str(glue)])




# --- the file ----------------------------------------------------------------------------------------------


def test_the_file_round_trips_bit_for_bit(tiny_gpt2_run, tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    scales = torch.tensor([1e-40, 1e-30, 1e-3, 1.0, 1e3, 1e30]).repeat_interleave(50)
    logits = torch.randn(len(scales), 3, generator=generator) * scales[:, None]
    special = torch.tensor(
        [
            [-0.0, 0.0, -1.0],  # signed zeros; the first maximum is -0.0, equal to 0.0
            [1.0, 1.0, 0.5],  # a tie: the first maximum
            [1.4e-45, -1.4e-45, 0.0],  # the smallest subnormals
            [3.4028235e38, -3.4028235e38, 1.0],  # the largest finite float32
            [0.1, 0.2, 0.3],  # no exact decimal
        ]
    )
    logits = torch.cat([logits, special]).to(torch.float32)
    labels = torch.randint(0, 3, (len(logits),), generator=generator).tolist()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_predictions(run_dir / PREDICTIONS_FILE, labels, logits)
    results = consistent_results(Results.load(tiny_gpt2_run[0]), labels, logits, ["a", "b", "c"])

    read = read_predictions(run_dir, results)
    assert read.logits.dtype == np.float32
    assert np.array_equal(read.logits.view(np.int32), logits.numpy().view(np.int32))  # every bit, -0.0 too
    assert read.labels == labels
    assert read.predictions == logits.argmax(dim=-1).tolist()
    assert read.predictions[-5:-3] == [0, 0]  # first maximum on ties
    assert (run_dir / PREDICTIONS_FILE).read_text().splitlines()[0] == header(3)
    # Written again from what was read, the file is the same bytes.
    assert predictions_text(read.labels, read.logits) == (run_dir / PREDICTIONS_FILE).read_text()


def test_the_writer_refuses_what_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="not finite"):
        predictions_text([0], torch.tensor([[float("nan"), 0.0]]))
    with pytest.raises(ValueError, match="do not fit 2 labelled rows"):
        predictions_text([0, 1], torch.zeros(3, 2))
    with pytest.raises(ValueError, match="label ids 0 to 1"):
        predictions_text([2], torch.zeros(1, 2))


def test_the_size_limit_bounds_every_line() -> None:
    assert max_predictions_bytes(40, 2) < 5_000
    assert max_predictions_bytes(10**7, 3) == MAX_PREDICTIONS_BYTES
    # The longest float32 written as Python writes floats fits the per-logit allowance.
    longest = len(repr(float(torch.tensor(-1.1754942e-38, dtype=torch.float32))))
    assert longest + 1 <= 25


# --- publish and download ----------------------------------------------------------------------------------


def test_publish_writes_predictions_that_the_manifest_covers(tiny_gpt2_run) -> None:
    run_dir, glue = tiny_gpt2_run
    results = Results.load(run_dir)
    assert results.manifest[PREDICTIONS_FILE] == sha256_file(run_dir / PREDICTIONS_FILE)
    predictions = read_predictions(run_dir, results)
    data = load_task("sst2", glue)
    assert predictions.labels == list(data.validation["label"])
    # Every quality figure of the card comes back exactly from the file.
    assert (
        quality_metrics(predictions.logits, predictions.labels, results.dataset.label_names, "accuracy")
        == results.metrics
    )
    assert all(figure.equal() for figure in prediction_figures(predictions, results))
    check_safe_formats(run_dir)  # a .csv is no pickle
    download_verified(run_dir)


def test_a_run_without_predictions_still_downloads(tiny_gpt2_run, tmp_path: Path, capsys) -> None:
    """A run written before predictions were recorded: no file, none in the manifest or the card."""
    _, glue = tiny_gpt2_run
    old = copy_run(tiny_gpt2_run, tmp_path)
    (old / PREDICTIONS_FILE).unlink()
    results = Results.load(old)
    plots = write_plots(results, old)
    results.manifest = {k: v for k, v in build_manifest(old).items() if k != CARD_FILE}
    (old / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = build_manifest(old)
    results.save(old)
    assert PREDICTIONS_FILE not in Results.load(old).manifest
    assert download_verified(old).results.verification.status == Status.PASS_NO_COMPRESSION
    assert verify_predictions(old, glue) == 2
    assert f"lists no {PREDICTIONS_FILE}" in one_line(capsys)


# --- verify --predictions ----------------------------------------------------------------------------------


def test_verify_predictions_matches_without_the_model_in_seconds(
    tiny_gpt2_run, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, glue = tiny_gpt2_run

    def no_model(*args, **kwargs):
        raise AssertionError("verify --predictions loaded a model")

    monkeypatch.setattr("attncard.pipeline.verify.download.load_base_model", no_model)
    started = time.perf_counter()
    assert verify_predictions(run_dir, glue) == 0
    seconds = time.perf_counter() - started
    assert seconds < 30, f"verify --predictions took {seconds:.1f} s"
    out = capsys.readouterr().out
    for name in (
        f"{PREDICTIONS_FILE} gold labels",
        "metrics.loss",
        "metrics.per_class[1].f1",
        "metrics.confusion_matrix[1][1]",
        "metrics.predictions_sha256",
        "verification.p_value",
        "verification.wilson_low",
        "verification.threshold",
        "verification.status",
        "dataset.samples[0].texts.sentence",
    ):
        assert f"  {name} " in out, name
    assert "≠" not in out
    assert out.splitlines()[-1].startswith(f"MATCH: {run_dir} reproduces all ")
    check = reverify_predictions(run_dir, data_dir=glue)
    assert check.matches and check.recomputed_status == Status.PASS_NO_COMPRESSION
    assert check.recomputed_accuracy == Results.load(run_dir).metrics.accuracy


def test_a_cards_copy_verifies_without_weights(tiny_gpt2_run, tmp_path: Path, capsys) -> None:
    run_dir, glue = tiny_gpt2_run
    copy = copy_to_cards(run_dir, tmp_path / "cards")
    files = {path.relative_to(copy).as_posix() for path in copy.rglob("*") if path.is_file()}
    manifest = Results.load(run_dir).manifest
    assert files == {*manifest, RESULTS_FILE} - {"adapter_model.safetensors"}
    for name in ("config.json", "adapter_config.json", "tokenizer.json", PREDICTIONS_FILE, "LICENSE"):
        assert name in files
    assert verify_predictions(copy, glue) == 0
    assert "MATCH: " in capsys.readouterr().out
    # Loading needs the weights: a download of the copy is refused.
    with pytest.raises(IntegrityError, match=r"adapter_model\.safetensors is missing"):
        download_verified(copy)
    # Only the weights may be absent.
    (copy / "config.json").unlink()
    assert verify_predictions(copy, glue) == 2
    assert "config.json is missing" in one_line(capsys)


def test_verify_predictions_refuses_model_options(tiny_gpt2_run, tmp_path: Path, capsys) -> None:
    run_dir, glue = tiny_gpt2_run
    argv = ["verify", "--predictions", str(run_dir), "--data-dir", str(glue), "--base-model", str(tmp_path)]
    assert main(argv) == 2
    assert "--base-model does not apply to --predictions" in one_line(capsys)
    assert main(["verify", "--predictions", "loopback-user/tiny-gpt2-none-sst2"]) == 2
    assert "no such run folder" in one_line(capsys)
    argv = ["verify", "--predictions", str(run_dir), "--data-dir", str(glue), "--expect-sha256", "0" * 64]
    assert main(argv) == 2
    assert "not the expected" in one_line(capsys)


# --- tampering ---------------------------------------------------------------------------------------------


def _set_field(lines: list[str], line: int, field: int, value: str) -> list[str]:
    fields = lines[line].split(",")
    fields[field] = value
    return [*lines[:line], ",".join(fields), *lines[line + 1 :]]


def _nudge_logit(lines: list[str]) -> list[str]:
    """A logit of row 0 moved by a little, not enough to change the prediction: the loss moves."""
    fields = lines[1].split(",")
    prediction = int(fields[2])
    value = float(torch.tensor(float(fields[3 + prediction]) + 0.25, dtype=torch.float32))
    return _set_field(lines, 1, 3 + prediction, repr(value))


def _flip_logits(lines: list[str]) -> list[str]:
    """Row 0's two logits swapped: its first maximum is the other label, its prediction unchanged."""
    fields = lines[1].split(",")
    fields[3], fields[4] = fields[4], fields[3]
    return [lines[0], ",".join(fields), *lines[2:]]


def _flip_prediction_and_logits(lines: list[str]) -> list[str]:
    """Row 0 predicted the other label, its logits swapped to agree: the predictions hash differs."""
    fields = _flip_logits(lines)[1].split(",")
    fields[2] = str(1 - int(fields[2]))
    return [lines[0], ",".join(fields), *lines[2:]]


def _relabel(lines: list[str]) -> list[str]:
    fields = lines[1].split(",")
    return _set_field(lines, 1, 1, str(1 - int(fields[1])))


def _swap_rows(lines: list[str]) -> list[str]:
    return [lines[0], lines[2], lines[1], *lines[3:]]


def _swap_rows_renumbered(lines: list[str]) -> list[str]:
    """Row 0 and the first row predicted otherwise swapped, then numbered again: the predictions hash
    differs."""
    rows = [line.split(",") for line in lines[1:]]
    other = next(i for i, row in enumerate(rows) if row[2] != rows[0][2])
    rows[0], rows[other] = rows[other], rows[0]
    rows[0][0], rows[other][0] = "0", str(other)
    return [lines[0], *(",".join(row) for row in rows)]


def _predict_other(lines: list[str]) -> list[str]:
    return _set_field(lines, 1, 2, str(1 - int(lines[1].split(",")[2])))


def _leading_zero(lines: list[str]) -> list[str]:
    """The same value with a leading zero (01.5, -01.5): not how publish writes it."""
    text = lines[1].split(",")[3]
    return _set_field(lines, 1, 3, f"-0{text[1:]}" if text.startswith("-") else f"0{text}")


def _with_three_labels(lines: list[str]) -> list[str]:
    return [header(3), *(f"{line},-10.0" for line in lines[1:])]


def _huge(lines: list[str]) -> list[str]:
    return lines + [f"{i},0,0,1.0,0.0" for i in range(len(lines) - 1, 100_000)]


TAMPERING = [
    pytest.param(_nudge_logit, None, id="a logit changed"),  # consistent: only recomputing the loss tells
    pytest.param(_flip_logits, r"line 2 predicts \d, but its logits' first maximum", id="logits flipped"),
    pytest.param(_predict_other, r"line 2 predicts \d, but", id="a predicted label changed"),
    pytest.param(
        _flip_prediction_and_logits, r"predictions hash to [0-9a-f]{12}…", id="prediction and logits"
    ),
    pytest.param(_relabel, r"counts the gold labels \{", id="a gold label changed"),
    pytest.param(
        _swap_rows, r"line 2 has index 1, expected 0: rows are missing, added or moved", id="reordered"
    ),
    pytest.param(_swap_rows_renumbered, r"predictions hash to", id="reordered and renumbered"),
    pytest.param(
        lambda ls: ls[:-1], r"holds 39 rows, results\.json records verification\.n = 40", id="last row"
    ),
    pytest.param(lambda ls: [*ls[:5], *ls[6:]], r"line 6 has index 5, expected 4", id="a middle row"),
    pytest.param(
        lambda ls: _set_field(ls, 3, 3, "inf"), r"line 4 has logit_0 'inf', which is not finite", id="inf"
    ),
    pytest.param(
        lambda ls: _set_field(ls, 3, 4, "nan"), r"line 4 has logit_1 'nan', which is not finite", id="nan"
    ),
    pytest.param(
        _leading_zero, r"line 2 has logit_0 '-?01?.*', which publish writes as", id="another notation"
    ),
    pytest.param(lambda ls: _set_field(ls, 1, 3, "0.1"), "is not a float32 value", id="not a float32"),
    # float() reads other scripts' digits; the file is ASCII.
    pytest.param(lambda ls: _set_field(ls, 1, 3, "\u0661.5"), r"a byte that is not ASCII", id="non-ASCII"),
    pytest.param(
        lambda ls: _set_field(ls, 1, 0, "+0"), r"index '\+0', which is not a whole number", id="signed index"
    ),
    pytest.param(
        lambda ls: _set_field(ls, 1, 1, "2"), r"label 2, the run has labels 0 to 1", id="label out of range"
    ),
    pytest.param(_huge, r"holds \d+ bytes, more than the \d+ that 40 rows of 2 logits can take", id="huge"),
    pytest.param(_with_three_labels, r"line 1 reads .*, not the header", id="three labels"),
    pytest.param(lambda ls: [line + "\r" for line in ls], r"line 1 reads", id="CRLF line ends"),
]


@pytest.mark.parametrize(("edit", "message"), TAMPERING)
def test_tampered_predictions_are_refused_or_differ(tiny_gpt2_run, tmp_path: Path, capsys, edit, message):
    _, glue = tiny_gpt2_run
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    edit_lines(run_dir, edit)
    if message is None:  # the file is consistent with itself and results.json: the figures tell
        assert verify_predictions(run_dir, glue) == 1
        out = capsys.readouterr().out
        assert "≠ metrics.loss " in out
        beyond = r"\(differs by \S+ relative, beyond the 1e-06 float32 against float64 can give\)"
        last = out.splitlines()[-1]
        assert re.fullmatch(rf"MISMATCH: metrics\.loss \S+ recomputed, \S+ recorded {beyond}", last)
        return
    with pytest.raises(IntegrityError, match=message):
        reverify_predictions(run_dir, data_dir=glue)
    assert verify_predictions(run_dir, glue) == 2
    assert PREDICTIONS_FILE in one_line(capsys)
    # A download reads the file too, before it renders the card again.
    with pytest.raises(IntegrityError, match=message):
        download_verified(run_dir)


def test_relabelled_rows_with_the_same_counts_differ_from_the_data(tiny_gpt2_run, tmp_path: Path, capsys):
    """Two rows with the same prediction and different gold labels swap their labels: counts, confusion matrix
    and correct rows stay; only the task's own labels (and the loss) tell. The run is not perfect (accuracy
    0.875), so a wrong row and a right row of the other label are such a pair."""
    _, glue = tiny_gpt2_run
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    rows = [line.split(",") for line in (run_dir / PREDICTIONS_FILE).read_text().splitlines()[1:]]
    first, second = next(
        (i, j)
        for i, row in enumerate(rows)
        for j, other in enumerate(rows)
        if (row[1], other[1]) == ("0", "1") and row[2] == other[2]
    )

    def swap(lines: list[str]) -> list[str]:
        lines = _set_field(lines, first + 1, 1, "1")
        return _set_field(lines, second + 1, 1, "0")

    edit_lines(run_dir, swap)
    assert verify_predictions(run_dir, glue) == 1
    out = capsys.readouterr().out
    assert f"≠ {PREDICTIONS_FILE} gold labels (first differing: row {min(first, second)})" in out
    check = reverify_predictions(run_dir, data_dir=glue)
    assert check.problems[0].startswith(f"{PREDICTIONS_FILE} gold labels")


def test_predictions_edited_but_not_the_manifest_are_refused(tiny_gpt2_run, tmp_path: Path, capsys) -> None:
    _, glue = tiny_gpt2_run
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    edit_lines(run_dir, _nudge_logit, refresh=False)
    message = r"predictions\.csv has sha256 [0-9a-f]{12}… but the manifest expects"
    with pytest.raises(IntegrityError, match=message):
        reverify_predictions(run_dir, data_dir=glue)
    assert verify_predictions(run_dir, glue) == 2
    assert "the file changed after publishing" in one_line(capsys)
    with pytest.raises(IntegrityError, match=message):
        download_verified(run_dir)


def test_an_unlisted_predictions_file_is_refused(tiny_gpt2_run, tmp_path: Path) -> None:
    """Added to a run whose manifest does not list it: loaders must not see a file the manifest does not."""
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    data = json.loads((run_dir / RESULTS_FILE).read_text())
    del data["manifest"][PREDICTIONS_FILE]
    (run_dir / RESULTS_FILE).write_text(json.dumps(data, indent=2))
    with pytest.raises(IntegrityError, match=r"predictions\.csv is not in the manifest"):
        download_verified(run_dir)


def test_a_consistently_forged_run_differs_from_its_predictions(
    tiny_gpt2_run, tmp_path: Path, capsys
) -> None:
    """results.json, plots, card and manifest rewritten to claim every row right, all consistent: a download
    accepts it; its predictions.csv, recomputed without the model, does not agree."""
    _, glue = tiny_gpt2_run
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = Results.load(run_dir)
    names = list(results.dataset.label_names)
    labels = read_predictions(run_dir, results).labels
    claimed = label_metrics(labels, labels, names, "accuracy")  # every row predicted right
    results.metrics = dataclasses.replace(
        claimed, loss=results.metrics.loss, predictions_sha256=results.metrics.predictions_sha256
    )
    results.verification = verification_from_counts(
        [labels.count(i) for i in range(len(names))],
        len(labels),
        names,
        results.parameters.compression_factor,
        True,
    )
    reseal(run_dir, results)
    assert download_verified(run_dir).results.metrics.accuracy == 1.0

    assert verify_predictions(run_dir, glue) == 1
    out = capsys.readouterr().out
    for name in (
        "metrics.accuracy",
        "metrics.confusion_matrix[0][1]",
        "verification.correct",
        "verification.p_value",
    ):
        assert f"≠ {name} " in out, name
    assert out.splitlines()[-1].startswith("MISMATCH: metrics.accuracy 0.875 recomputed, 1.0 recorded")
