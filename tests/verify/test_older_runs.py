"""Older runs keep verifying (issue 43, item 8): a run published by an earlier attncard of the same results
schema still verifies with this one, and new wording in the card template does not make it an edited run.

The older run is a real one: tests/support/fixtures/older-run-67310c1/, published by attncard at commit
67310c1 (its README says how), before results.json recorded `card_template`, so it renders with card template
1. Card template 2 (issue 44) is the first real wording change; a further one is simulated as the next version
would be added: its own file beside the released ones, registered in `render.CARD_TEMPLATE_FILES`, and the
version publish records.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from attncard.pipeline.card import render
from attncard.pipeline.card.plots import write_plots
from attncard.pipeline.card.render import CARD_TEMPLATE_FILES, TEMPLATES_DIR, render_card
from attncard.pipeline.cli import main
from attncard.pipeline.publish import publish
from attncard.pipeline.record import results as results_module
from attncard.pipeline.record.errors import IntegrityError, ResultsError, UnknownSchemaError
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE, build_manifest, sha256_file
from attncard.pipeline.record.results import (
    CARD_TEMPLATE,
    CARD_TEMPLATES,
    READABLE_SCHEMA_VERSIONS,
    Results,
    Status,
)
from attncard.pipeline.verify.download import download_verified
from conftest import FIXTURES

OLDER = FIXTURES / "older-run-67310c1"
OLDER_COMMIT = "67310c13c7f90524f487b2adcf90305ff9417c6e"

# The sha256 of every file of each released card template version. A run records the version its card was
# rendered with, and every check renders it again with that version's files: changing one would turn every
# run published with it into an "edited" one.
RELEASED_TEMPLATE_SHA256 = {
    1: {
        "model_card_v2.md.j2": "c29b40ad4a7d18b40d7a566f16a9c780f1de9196b13b80464986211cfbfaba0f",
        "model_card_v3.md.j2": "882df8ed856a98c4009e55514a0c8109b7b1ba5997926d9900651364c925b305",
        "model_card.md.j2": "06182e92311a1347727e0ace78b40dd09cafa2547ab1ff6336fd0531383dc9a5",
        "license.txt.j2": "e72b409d660a56da756872ea85d4e8a8424b340f829f0075c16c84b9f5c85b16",
    },
    2: {
        "model_card_v2.md.j2": "c29b40ad4a7d18b40d7a566f16a9c780f1de9196b13b80464986211cfbfaba0f",
        "model_card_t2.md.j2": "3dca106eda3d71598e5a37f93dbf69159a566950c599efaf7443fa8d7a413560",
        "license.txt.j2": "e72b409d660a56da756872ea85d4e8a8424b340f829f0075c16c84b9f5c85b16",
    },
}

# A sentence of card templates 1 and 2 for schema 4, and the words the simulated next version says it in.
OLD_WORDING = "Every figure on\nthis card is measured by that run"
NEW_WORDING = "Each figure of\nthis card was measured by the run"
NEXT_TEMPLATE = max(CARD_TEMPLATES) + 1
# What card template 2's summary (above "Use it") shows and template 1's did not: the speed and memory.
SPEED_HEADLINE = "**Speed and memory**"


def older_run(tmp_path: Path) -> Path:
    """A copy of the older run folder (the checks below edit some copies)."""
    copy = tmp_path / "tiny-gpt2-none-sst2"
    shutil.copytree(OLDER / "tiny-gpt2-none-sst2", copy)
    return copy


def edit_results_json(run_dir: Path, key: str, value: object) -> None:
    """Sets one field of results.json in place, every other byte of it kept as recorded."""
    path = run_dir / RESULTS_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    data[key] = value
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


@pytest.fixture
def wording_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next card template, as a wording change is made: the released versions' files kept, the newest
    version's schema 4 card copied into a new file with `NEW_WORDING`, registered as `NEXT_TEMPLATE` and made
    the version publish records."""
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, templates)
    newest = CARD_TEMPLATE_FILES[CARD_TEMPLATE]
    text = (templates / newest.cards[4]).read_text(encoding="utf-8")
    assert OLD_WORDING in text, f"pick another sentence of {newest.cards[4]} for the simulated wording change"
    name = f"model_card_t{NEXT_TEMPLATE}.md.j2"
    (templates / name).write_text(text.replace(OLD_WORDING, NEW_WORDING), encoding="utf-8")
    next_version = dataclasses.replace(newest, cards={**newest.cards, 4: name})
    monkeypatch.setattr(render, "TEMPLATES_DIR", templates)
    monkeypatch.setattr(render, "CARD_TEMPLATE_FILES", {**CARD_TEMPLATE_FILES, NEXT_TEMPLATE: next_version})
    monkeypatch.setattr(results_module, "CARD_TEMPLATES", (*CARD_TEMPLATES, NEXT_TEMPLATE))
    monkeypatch.setattr(results_module, "CARD_TEMPLATE", NEXT_TEMPLATE)
    monkeypatch.setattr(publish, "CARD_TEMPLATE", NEXT_TEMPLATE)


def test_released_card_templates_never_change():
    assert set(CARD_TEMPLATE_FILES) == set(CARD_TEMPLATES) == set(RELEASED_TEMPLATE_SHA256), (
        "every card template version this attncard renders has its files here, with their sha256"
    )
    assert max(CARD_TEMPLATES) == CARD_TEMPLATE
    for version, files in CARD_TEMPLATE_FILES.items():
        # A run of any readable schema may record any version (a frozen schema's card keeps its file).
        assert set(files.cards) == set(READABLE_SCHEMA_VERSIONS), f"card template {version}: {files.cards}"
        names = {*files.cards.values(), files.license}
        assert names == set(RELEASED_TEMPLATE_SHA256[version]), f"card template {version}: {sorted(names)}"
        for name in sorted(names):
            digest = sha256_file(TEMPLATES_DIR / name)
            assert digest == RELEASED_TEMPLATE_SHA256[version][name], (
                f"templates/{name} of card template {version} changed (sha256 {digest}): a released card "
                f"template must not change; add version {max(CARD_TEMPLATES) + 1} instead (a new file, in "
                "pipeline/card/render.py's CARD_TEMPLATE_FILES and results.py's CARD_TEMPLATES)"
            )


def test_the_older_run_was_made_by_the_earlier_commit():
    raw = (OLDER / "tiny-gpt2-none-sst2" / RESULTS_FILE).read_text(encoding="utf-8")
    assert "card_template" not in json.loads(raw)  # as every run published before it was recorded
    results = Results.load(OLDER / "tiny-gpt2-none-sst2")
    assert results.environment.git_commit == OLDER_COMMIT
    assert results.schema_version == results_module.SCHEMA_VERSION
    assert results.card_template is None
    assert render.card_template_files(results) is CARD_TEMPLATE_FILES[1]


def test_the_older_run_downloads_as_verified(tmp_path: Path):
    run_dir = older_run(tmp_path)
    files = download_verified(run_dir)
    assert files.results.verification.status == Status.PASS_NO_COMPRESSION
    assert files.results.environment.git_commit == OLDER_COMMIT


def test_the_older_run_verifies_from_its_predictions(tmp_path: Path, capsys: pytest.CaptureFixture):
    run_dir = older_run(tmp_path)
    code = main(["verify", "--predictions", str(run_dir), "--data-dir", str(OLDER / "glue")])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    assert re.search(r"^MATCH: .* reproduces all \d+ recorded figures$", out, re.MULTILINE), out[-2000:]


def test_new_wording_leaves_the_older_run_verified(wording_changed, tmp_path: Path):
    older = older_run(tmp_path / "older")
    files = download_verified(older)  # rendered again with card template 1, which it is
    assert files.results.card_template is None
    card = (older / CARD_FILE).read_text(encoding="utf-8")
    assert OLD_WORDING in card and NEW_WORDING not in card
    # The same run published with the new template: its card in the new words, which verify as well.
    newer = older_run(tmp_path / "newer")
    results = Results.load(newer)
    results.card_template = results_module.CARD_TEMPLATE
    plots = write_plots(results, newer)
    results.manifest = {name: digest for name, digest in build_manifest(newer).items() if name != CARD_FILE}
    (newer / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = build_manifest(newer)
    results.save(newer)
    assert download_verified(newer).results.card_template == NEXT_TEMPLATE
    card = (newer / CARD_FILE).read_text(encoding="utf-8")
    assert NEW_WORDING in card and OLD_WORDING not in card


def test_the_older_run_keeps_card_template_1_and_renders_template_2_when_it_records_it(tmp_path: Path):
    """Card template 1 is what the older run's card was published in, byte for byte (a download renders it
    again and compares); the same run recording card template 2 renders the new card, which verifies too."""
    older = older_run(tmp_path / "older")
    assert download_verified(older).results.card_template is None
    card_1 = (older / CARD_FILE).read_text(encoding="utf-8")
    assert SPEED_HEADLINE not in card_1[: card_1.index("## Use it")]
    assert "## Source and printouts" not in card_1
    newer = older_run(tmp_path / "newer")
    results = Results.load(newer)
    results.card_template = 2
    plots = write_plots(results, newer)
    results.manifest = {name: digest for name, digest in build_manifest(newer).items() if name != CARD_FILE}
    (newer / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = build_manifest(newer)
    results.save(newer)
    assert download_verified(newer).results.card_template == 2
    card_2 = (newer / CARD_FILE).read_text(encoding="utf-8")
    headings = [line for line in card_2.splitlines() if line.startswith("## ")]
    assert headings.index("## Efficiency") < headings.index("## Model details") and headings[-1] == (
        "## Source and printouts"
    ), headings
    summary = card_2[: card_2.index("## Use it")]
    assert f"{SPEED_HEADLINE}: `none` leaves attention as the model's own" in summary


@pytest.mark.parametrize("new_template", [False, True], ids=["released-templates", "next-template-added"])
def test_an_edit_of_the_older_card_resealed_is_refused(new_template: bool, request, tmp_path: Path):
    """An older card put in other words, even those of a newer template, its sha256 put in the manifest so
    that every file matches: the card is not the one its recorded template renders."""
    if new_template:
        request.getfixturevalue("wording_changed")
    run_dir = older_run(tmp_path)
    card = run_dir / CARD_FILE
    card.write_text(card.read_text(encoding="utf-8").replace(OLD_WORDING, NEW_WORDING), encoding="utf-8")
    manifest = json.loads((run_dir / RESULTS_FILE).read_text(encoding="utf-8"))["manifest"]
    edit_results_json(run_dir, "manifest", {**manifest, CARD_FILE: sha256_file(card)})
    shown = rf"{CARD_FILE} line \d+ reads '[^']*Each figure of', results\.json renders '[^']*Every figure on'"
    with pytest.raises(IntegrityError, match=shown):
        download_verified(run_dir)


def test_an_unknown_card_template_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture):
    run_dir = older_run(tmp_path)
    edit_results_json(run_dir, "card_template", NEXT_TEMPLATE)
    expected = (
        f"results.json: card_template is {NEXT_TEMPLATE}; this attncard renders card templates 1, 2: upgrade "
        "attncard (pip install -U attncard)"
    )
    with pytest.raises(UnknownSchemaError) as refused:
        download_verified(run_dir)
    assert str(refused.value).endswith(expected) and "\n" not in str(refused.value), str(refused.value)
    capsys.readouterr()
    assert main(["download", str(run_dir)]) == 2
    refused_lines = [line for line in capsys.readouterr().err.splitlines() if "card_template" in line]
    assert len(refused_lines) == 1 and refused_lines[0].endswith(expected), refused_lines


@pytest.mark.parametrize("value", [True, "1", 1.0, [1]])
def test_card_template_is_a_whole_number(value: object):
    data = json.loads((OLDER / "tiny-gpt2-none-sst2" / RESULTS_FILE).read_text(encoding="utf-8"))
    with pytest.raises(ResultsError, match=r"results\.card_template should be a whole number"):
        Results.from_dict({**data, "card_template": value})
    assert Results.from_dict({**data, "card_template": 1}).card_template == 1


def test_a_card_template_built_in_code_but_not_rendered_here_is_refused():
    results = dataclasses.replace(Results.load(OLDER / "tiny-gpt2-none-sst2"), card_template=7)
    with pytest.raises(ValueError, match=r"^card_template is 7; this attncard renders card templates 1, 2: "):
        render_card(results)


def test_a_run_published_now_records_the_card_template(tiny_gpt2_run):
    run_dir, _ = tiny_gpt2_run
    assert json.loads((run_dir / RESULTS_FILE).read_text(encoding="utf-8"))["card_template"] == CARD_TEMPLATE
