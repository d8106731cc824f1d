"""`attncard lint`: a fresh run folder is clean, and each defect injected into a copy is found, precisely."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest
import yaml

from attncard.pipeline.card.model_index import TASK_TITLES
from attncard.pipeline.card.snippet import card_usage_code
from attncard.pipeline.checks.lint import Finding, line_placeholders, lint_run_folder, markdown_problems
from attncard.pipeline.checks.lint_run import renderings
from attncard.pipeline.cli import main, publish_main
from attncard.pipeline.record.errors import AttncardError
from attncard.pipeline.record.manifest import build_manifest
from attncard.pipeline.record.results import Results


@pytest.fixture(scope="module")
def tiny_run(tiny_model_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lint-run")
    from conftest import write_sst2_folder

    glue = write_sst2_folder(root / "glue")
    argv = ["--model", str(tiny_model_dir("gpt2")), "--module", "none", "--task", "sst2", "--steps", "2"]
    argv += ["--batch-size", "4", "--data-dir", str(glue), "--output", str(root / "runs")]
    assert publish_main(argv) == 0
    return root / "runs" / "gpt2-none-sst2"


@pytest.fixture
def run(tiny_run, tmp_path) -> Path:
    """A copy of the tiny run folder, to damage."""
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


def _reseal(run_dir: Path) -> None:
    """Rewrites the manifest, so that only the injected defect remains."""
    results = Results.load(run_dir)
    results.manifest = build_manifest(run_dir)
    results.save(run_dir)


def _edit_card(run_dir: Path, old: str, new: str) -> int:
    """Replaces the first `old` in README.md and reseals; returns the line where the text of `new` starts."""
    card = run_dir / "README.md"
    text = card.read_text(encoding="utf-8")
    assert old in text, old
    card.write_text(text.replace(old, new, 1), encoding="utf-8")
    _reseal(run_dir)
    start = text.index(old) + len(new) - len(new.lstrip("\n"))
    return text[:start].count("\n") + 1


def _line_of(run_dir: Path, fragment: str) -> int:
    lines = (run_dir / "README.md").read_text(encoding="utf-8").split("\n")
    return next(number for number, line in enumerate(lines, start=1) if fragment in line)


def _results_heading(results: Results) -> str:
    title = TASK_TITLES[results.dataset.task]
    return f"Results on {title} ({results.dataset.split}, all {results.verification.n} rows)"


def test_fresh_run_folder_is_clean(tiny_run):
    assert lint_run_folder(tiny_run) == []


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("\n## Verification\n", "\nMore results are TBD.\n\n## Verification\n", "placeholder 'TBD'"),
        (
            "\n## Verification\n",
            "\nTest split: coming soon.\n\n## Verification\n",
            "placeholder 'coming soon'",
        ),
        ("| Majority class | ", "| Majority class | N/A and ", "placeholder 'N/A'"),
        ("| Training device | ", "| Training device | None ", "placeholder 'None'"),
        ("| Training device | ", "| Training device | nan ", "placeholder 'nan'"),
        ("\n## Data\n", "\nF1: {{ r.metrics.mcc | pct }}\n\n## Data\n", "unrendered Jinja '{{'"),
        ("\n## Data\n", "\n{% if r.push %}pushed{% endif %}\n\n## Data\n", "unrendered Jinja '{%'"),
    ],
)
def test_placeholders_and_jinja_leftovers(run, old, new, message):
    line = _edit_card(run, old, new)
    found = lint_run_folder(run)
    assert found[0] == Finding("README.md", line, message)
    assert all(f.message == message for f in found), found


def test_value_words_are_code_only_in_python_blocks(run):
    snippet = 'if label is None:\n    batch = tokenizer(text, return_tensors="pt")\n'
    _edit_card(run, "\n## Data\n", f"\n```python\n{snippet}```\n\n## Data\n")
    assert lint_run_folder(run) == []
    line = _edit_card(run, "\n## Data\n", "\n```bash\npublish --model None\n```\n\n## Data\n") + 1
    assert lint_run_folder(run) == [Finding("README.md", line, "placeholder 'None'")]


def test_broken_front_matter_yaml(run):
    line = _edit_card(run, "library_name: peft", "library_name: [peft")
    [finding] = lint_run_folder(run)
    assert (finding.path, finding.line) == ("README.md", line + 1)
    assert finding.message.startswith("front matter is not valid YAML: while parsing a flow sequence")


def test_front_matter_without_model_index(run):
    _edit_card(run, "model-index:", "model-indices:")
    assert lint_run_folder(run) == [Finding("README.md", 2, "front matter has no model-index")]


def test_model_index_that_huggingface_hub_cannot_read(run):
    _edit_card(run, "model-index:\n- name:", "model-index:\n- title:")
    [finding] = lint_run_folder(run)
    assert (finding.path, finding.line) == ("README.md", 2)
    assert finding.message.startswith("huggingface_hub cannot read the front matter: Invalid `model_index`")


def test_model_index_accuracy_edited(run):
    accuracy = Results.load(run).metrics.accuracy
    line = _edit_card(
        run, f"- type: accuracy\n      value: {accuracy!r}", "- type: accuracy\n      value: 0.99"
    )
    assert lint_run_folder(run) == [
        Finding(
            "README.md",
            line + 1,
            f"model-index accuracy is 0.99; results.json metrics.accuracy is {accuracy!r}",
        )
    ]


def test_table_figure_edited_in_card(run):
    results = Results.load(run)
    shown = f"{100 * results.metrics.accuracy:.2f}%"
    edited = f"{100 * results.metrics.accuracy + 0.01:.2f}%"
    line = _edit_card(run, f"| Accuracy | {shown} |", f"| Accuracy | {edited} |")
    assert lint_run_folder(run) == [
        Finding(
            "README.md",
            line,
            f"figure {edited} in table '{_results_heading(results)}', row 'Accuracy', cell '{edited}', "
            "is not a figure of results.json",
        )
    ]


def test_table_figure_edited_in_results_json(run):
    results = Results.load(run)
    shown = f"{results.metrics.loss:.4f}"
    results.metrics.loss += 0.01
    results.save(run)  # the manifest does not cover results.json: only the figures disagree
    assert lint_run_folder(run) == [
        Finding(
            "README.md",
            _line_of(run, "| Loss (cross-entropy) |"),
            f"figure {shown} in table '{_results_heading(results)}', row 'Loss (cross-entropy)', "
            f"cell '{shown}', is not a figure of results.json",
        )
    ]


def test_accuracy_edited_in_results_json(run):
    """The card's accuracy rows may still match another leaf (in the tiny run, p0 = accuracy = 0.5); the
    model-index, compared exactly with metrics.accuracy, does not."""
    results = Results.load(run)
    shown = results.metrics.accuracy
    results.metrics.accuracy = 0.51
    results.save(run)
    line = _line_of(run, "- type: accuracy") + 1
    assert Finding(
        "README.md", line, f"model-index accuracy is {shown!r}; results.json metrics.accuracy is 0.51"
    ) in lint_run_folder(run)


def test_missing_card(run):
    (run / "README.md").unlink()
    assert lint_run_folder(run) == [
        Finding("README.md", None, "missing"),
        Finding("README.md", None, "missing, but listed in results.json's manifest"),
    ]


def test_unreadable_figure_in_table(run):
    recorded = Results.load(run).environment.packages["transformers"]  # the version this run recorded
    line = _edit_card(run, f"| transformers | {recorded} |", "| transformers | 99.0.1 |")
    [finding] = lint_run_folder(run)
    assert (finding.line, finding.message) == (
        line,
        "'99.0.1' in table 'Reproduce', row 'transformers', cell '99.0.1', is neither a number nor a value "
        "recorded in results.json",
    )


def test_descriptive_columns_and_row_labels_are_not_figures(run):
    table = "\n### Notes\n\n| Setting | Meaning |\n|---|---|\n| Top 5 | Keeps 5 of 77 heads |\n"
    _edit_card(run, "\n## Data\n", f"{table}\n## Data\n")
    assert lint_run_folder(run) == []
    line = _edit_card(run, "| Setting | Meaning |", "| Setting | Value |") + 2
    assert [f.message for f in lint_run_folder(run)] == [
        f"figure {figure} in table 'Notes', row 'Top 5', cell 'Keeps 5 of 77 heads', is not a figure of "
        "results.json"
        for figure in (5, 77)
    ]
    assert {f.line for f in lint_run_folder(run)} == {line}


def test_invalid_config_json(run):
    (run / "config.json").write_text('{"model_type": "gpt2",\n  "n_layer": }\n')
    _reseal(run)
    [finding] = lint_run_folder(run)
    assert finding == Finding("config.json", 2, "not valid JSON: Expecting value (column 14)")


def test_config_json_of_a_family_attncard_does_not_load(run):
    (run / "config.json").write_text('{"model_type": "no-such-model"}\n')
    _reseal(run)
    [finding] = lint_run_folder(run)
    assert (finding.path, finding.line) == ("config.json", None)
    assert finding.message.startswith("model_type 'no-such-model' is not a model family attncard loads (bert")


def test_adapter_config_must_be_an_object(run):
    (run / "adapter_config.json").write_text("[1, 2]\n")
    _reseal(run)
    assert lint_run_folder(run) == [Finding("adapter_config.json", None, "must be a JSON object, not list")]


def test_nan_in_results_json(run):
    text = (run / "results.json").read_text()
    text, count = re.subn(r'"loss": [-0-9.e]+', '"loss": NaN', text, count=1)
    assert count == 1
    line = text[: text.index('"loss": NaN')].count("\n") + 1
    (run / "results.json").write_text(text)
    assert lint_run_folder(run) == [
        Finding(
            "results.json",
            line,
            "not strict JSON: NaN is not a number; the card's figures and the manifest were not checked",
        )
    ]


def test_unknown_schema_version(run):
    path = run / "results.json"
    path.write_text(path.read_text().replace('"schema_version": 4', '"schema_version": 5', 1))
    [finding] = lint_run_folder(run)
    assert finding.path == "results.json"
    assert finding.message.startswith("has schema version 5; this attncard reads versions 2, 3 and 4")


def test_referenced_image_missing(run):
    line = _edit_card(run, "\n## Data\n", "\n![Training loss](plots/loss.png)\n\n## Data\n")
    assert lint_run_folder(run) == [
        Finding("README.md", line, "link target 'plots/loss.png' is not in the run folder")
    ]
    (run / "plots").mkdir()
    (run / "plots" / "loss.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    _reseal(run)
    assert lint_run_folder(run) == []


def test_links_that_are_not_files_are_not_checked(run):
    links = (
        "[GLUE](https://gluebenchmark.com), [results](#results), [Hub](/datasets/nyu-mll/glue), `[x](y.md)`"
    )
    _edit_card(run, "\n## Data\n", f"\n{links}\n\n## Data\n")
    assert lint_run_folder(run) == []


def test_link_outside_the_run_folder(run):
    line = _edit_card(run, "\n## Data\n", "\n[notes](../notes.md)\n\n## Data\n")
    assert lint_run_folder(run) == [
        Finding("README.md", line, "link target '../notes.md' is outside the run folder")
    ]


def test_file_tampered_after_the_manifest(run):
    with (run / "adapter_model.safetensors").open("ab") as handle:
        handle.write(b"\0")
    assert lint_run_folder(run) == [
        Finding("adapter_model.safetensors", None, "sha256 differs from results.json's manifest")
    ]


def test_files_missing_from_or_unlisted_in_the_manifest(run):
    (run / "notes.txt").write_text("hello\n")
    (run / "tokenizer_config.json").unlink()
    assert lint_run_folder(run) == [
        Finding("notes.txt", None, "not in results.json's manifest"),
        Finding("tokenizer_config.json", None, "missing, but listed in results.json's manifest"),
    ]


def test_eval_results_yaml(run):
    folder = run / ".eval_results"
    folder.mkdir(exist_ok=True)  # publish may already have written its own entries there
    good = "- dataset:\n    id: nyu-mll/glue\n    task_id: sst2\n  value: 0.5\n  notes: attention none\n"
    (folder / "good.yaml").write_text(good)
    (folder / "x.yaml").write_text("- dataset: nyu-mll/glue\n  value: [0.5\n")
    (folder / "y.yaml").write_text("just text\n")
    _reseal(run)
    found = lint_run_folder(run)
    assert [(f.path, f.line) for f in found] == [(".eval_results/x.yaml", 3), (".eval_results/y.yaml", None)]
    assert found[0].message.startswith("not valid YAML: while parsing a flow sequence")
    assert found[1].message == "must hold a list of results, not str"


def test_eval_results_the_hub_would_not_show(run):
    """Each rule of the Hub's `.eval_results` format, broken once: no task id, a source without its url, a
    value that is no number, a dataset revision that is no commit, and a sentence as notes."""
    folder = run / ".eval_results"
    folder.mkdir(exist_ok=True)
    sst2 = {"id": "nyu-mll/glue", "task_id": "sst2"}
    entries = [
        {"dataset": {"id": "nyu-mll/glue"}, "value": 0.5},
        {"dataset": sst2, "value": 0.5, "source": {"name": "attncard"}},
        {"dataset": sst2, "value": "high"},
        {"dataset": {**sst2, "revision": "sha256:" + "0" * 64}, "value": 0.5},
        {"dataset": sst2, "value": 0.5, "notes": "accuracy on all rows " * 3},
    ]
    (folder / "bad.yaml").write_text(yaml.safe_dump(entries))
    _reseal(run)
    messages = [f.message for f in lint_run_folder(run) if f.path == ".eval_results/bad.yaml"]
    assert messages == [
        "entry 1 does not parse: 'task_id'",
        "entry 2 does not parse: If `source_name`, `source_user`, or `source_org` is provided, `source_url` "
        "must also be provided.",
        "entry 3: value 'high' is not a number",
        f"entry 4: dataset revision {'sha256:' + '0' * 64!r} is not a commit sha",
        "entry 5: notes of 63 characters, not a short label",
    ]


def test_renderings_follow_the_card_formats():
    assert {"79.13%", "0.7913", "7.913e-01", "0.79"} <= renderings(0.79128440366972)
    assert {"1.374e-66"} <= renderings(1.3741e-66)
    assert {"22713986", "22,713,986"} <= renderings(22713986)
    assert "1e-05" in renderings(1e-05)


def test_bad_input_raises(tmp_path):
    with pytest.raises(AttncardError, match="not a folder"):
        lint_run_folder(tmp_path / "nowhere")
    with pytest.raises(AttncardError, match=r"has no results\.json"):
        lint_run_folder(tmp_path)


def test_main_exit_codes_and_output(run, tmp_path, capsys):
    assert main(["lint", str(run)]) == 0
    assert capsys.readouterr().out == f"clean: {run}\n"

    line = _edit_card(run, "\n## Data\n", "\nTODO: plots\n\n## Data\n")
    (run / "extra.txt").write_text("x\n")
    assert main(["lint", str(run)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{run.as_posix()}/README.md:{line}: placeholder 'TODO'",
        f"{run.as_posix()}/extra.txt: not in results.json's manifest",
        "2 findings",
    ]

    assert main(["lint", str(tmp_path / "nowhere")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err.count("\n") == 1
        and captured.err.startswith("error: ")
        and "not a folder" in captured.err
    )


# --- front matter the Hub refuses or computes itself (hub-docs modelcard.md) --------------------------------


def test_a_local_path_as_base_model_is_refused_like_the_hub_does(run):
    line = _edit_card(run, "datasets:\n", "base_model: /home/me/models/tiny-gpt2\ndatasets:\n")
    path = "/home/me/models/tiny-gpt2"
    message = f"base_model {path!r} is not a Hub repository ORG/NAME; the Hub refuses the card"
    assert lint_run_folder(run) == [Finding("README.md", line, message)]


def test_a_hub_id_as_base_model_passes(run):
    _edit_card(run, "datasets:\n", "base_model: openai-community/gpt2\ndatasets:\n")
    assert lint_run_folder(run) == []


def test_a_model_index_metric_must_not_set_verified(run):
    line = _edit_card(run, "      name: Accuracy\n", "      name: Accuracy\n      verified: false\n")
    assert lint_run_folder(run) == [
        Finding("README.md", line + 1, "model-index metric sets 'verified', which the Hub computes")
    ]


def test_a_model_index_dataset_revision_must_be_a_commit(run):
    digest = Results.load(run).dataset.revision
    assert digest.startswith("sha256:")  # a local TSV: the card gives no revision at all
    split = "      split: validation\n"
    line = _edit_card(run, split, f"{split}      revision: {digest}\n")
    assert lint_run_folder(run) == [
        Finding("README.md", line + 1, f"model-index dataset revision {digest!r} is not a git commit sha")
    ]


# --- the licence (hub-docs modelcard.md: `other` needs `license_name` and `license_link`) ----------------


def test_a_fresh_run_of_a_folder_without_a_licence_links_its_license_file(run):
    metadata = yaml.safe_load((run / "README.md").read_text(encoding="utf-8").split("---")[1])
    assert (metadata["license"], metadata["license_name"], metadata["license_link"]) == (
        "other",
        "unknown",
        "LICENSE",
    )
    assert "declared no licence" in (run / "LICENSE").read_text(encoding="utf-8")


def test_license_other_needs_a_license_name(run):
    _edit_card(run, "license_name: unknown\n", "")
    assert lint_run_folder(run) == [
        Finding("README.md", 2, "license 'other' needs a license_name (an id of the licence)")
    ]


def test_license_other_needs_a_license_link(run):
    _edit_card(run, "license_link: LICENSE\n", "")
    assert lint_run_folder(run) == [
        Finding("README.md", 2, "license 'other' needs a license_link (LICENSE, or a URL)")
    ]


def test_license_link_must_be_a_file_of_the_run_folder(run):
    (run / "LICENSE").unlink()
    _reseal(run)
    assert lint_run_folder(run) == [
        Finding("README.md", 2, "license_link 'LICENSE' is not a file of the run folder"),
        Finding("README.md", _line_of(run, "(LICENSE)"), "link target 'LICENSE' is not in the run folder"),
    ]


def test_a_card_without_a_license(run):
    _edit_card(run, "license: other\nlicense_name: unknown\nlicense_link: LICENSE\n", "")
    message = "front matter has no license; the Hub shows no licence for the model"
    assert lint_run_folder(run) == [Finding("README.md", 2, message)]


def test_a_licence_the_hub_names_needs_no_file(run):
    _edit_card(run, "license: other\nlicense_name: unknown\nlicense_link: LICENSE\n", "license: apache-2.0\n")
    assert lint_run_folder(run) == []


# --- text the card quotes as recorded ---------------------------------------------------------------------


def test_quoted_data_may_hold_placeholder_words_but_the_card_may_not(run):
    """A sample row that says "pending" or starts with "None" is the data, not a missing figure; the same
    words elsewhere in the card still are."""
    results = Results.load(run)
    sentence = "None of it | is <b>pending</b> , TODO [x](missing.png) 1234567 ."
    results.dataset.samples[0].texts["sentence"] = sentence
    results.usage = dataclasses.replace(results.usage, code=card_usage_code(results))  # it quotes the row
    results.save(run)
    from attncard.pipeline.card.render import render_card

    card = (run / "README.md").read_text(encoding="utf-8")
    shown = render_card(Results.load(run)).split("### Samples")[1].split("## Use it")[0]
    assert r"None of it \| is &lt;b&gt;pending&lt;/b&gt; , TODO \[x\]\(missing.png\) 1234567 ." in shown
    text = card.split("### Samples")[0] + "### Samples" + shown + "## Use it" + card.split("## Use it")[1]
    (run / "README.md").write_text(text, encoding="utf-8")
    _reseal(run)
    assert lint_run_folder(run) == []
    line = _edit_card(run, "## Use it\n", "Results on the test split: pending\n\n## Use it\n")
    assert lint_run_folder(run) == [Finding("README.md", line, "placeholder 'pending'")]


# ------------------------------------------------------------------------------------------------------------
# The same rules, for a module's texts before training (`contract_problems` reads them here)


@pytest.mark.parametrize(
    ("line", "fence", "messages"),
    [
        ("temperature: None uses the layer's scaling", None, ["placeholder 'None'"]),
        ("if temperature is None: return nan", "python", []),  # code in a Python block
        ("publish --module None", "bash", ["placeholder 'None'"]),
        ("# TODO: fuse the kernel, XXX", "python", ["placeholder 'TODO'", "placeholder 'XXX'"]),
        ("the `none` module, N/A elsewhere", None, ["placeholder 'N/A'"]),
        ("a {{ value }} of {% if %}", None, ["unrendered Jinja '{{'", "unrendered Jinja '{%'"]),
        ("tbd_rate and a todo_list, Nonempty", None, []),  # words of their own
    ],
)
def test_line_placeholders(line, fence, messages):
    assert line_placeholders(line, fence) == messages


def test_a_spec_the_module_check_passes_or_refuses_the_card_lint_passes_or_refuses_alike(run):
    """`markdown_problems` on a spec.md and the card's lint on a card printing it find the same lines: the
    placeholders with the same messages, the links to files and the figures in tables too."""
    spec = (
        "### `sigmoid`: sigmoid(q·kᵀ)\n\n"
        "A temperature of None uses the layer's scaling. TODO: decoders.\n\n"
        "```python\nif temperature is None:\n    temperature = 1.0\n```\n\n"
        "Timings: [bench](bench/sigmoid.md), the paper: [arXiv](https://arxiv.org/abs/2409.04431).\n\n"
        "| Case | Passes | Meaning |\n|---|---|---|\n| decoder | 7919 | 2 passes each |\n"
    )
    found = markdown_problems(spec)
    assert found == [
        (3, "placeholder 'TODO'"),  # the marker words first on a line, then the value words
        (3, "placeholder 'None'"),
        (10, "link to the file 'bench/sigmoid.md', which is not in the run folder; link a URL instead"),
        (14, "figure 7919 in table row 'decoder', which the card's lint must find in results.json"),
    ]
    first = _edit_card(run, "\n## Data\n", f"\n{spec}\n## Data\n")
    findings = lint_run_folder(run)
    assert [(finding.line - first + 1) for finding in findings] == [line for line, _ in found]
    assert [finding.message for finding in findings[:2]] == [message for _, message in found[:2]]
    assert findings[2].message == "link target 'bench/sigmoid.md' is not in the run folder"
    assert findings[3].message.startswith("figure 7919 in table '`sigmoid`: sigmoid(q·kᵀ)', row 'decoder'")
    _edit_card(run, spec, "### `sigmoid`: sigmoid(q·kᵀ)\n\nRows do not sum to 1.\n")
    assert markdown_problems("### `sigmoid`: sigmoid(q·kᵀ)\n\nRows do not sum to 1.\n") == []
    assert lint_run_folder(run) == []
