"""Opening the next card template version is one command (`make freeze-template`,
tests/scripts/freeze_card_template.py), run here on a copy of the files it edits: the new card is a copy of
the newest one, registered, recorded by publish and pinned by its sha256; the released versions are kept."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from freeze_card_template import (
    GOLDEN_RESULTS,
    PINS,
    RENDER,
    RESULTS,
    TEMPLATES,
    main,
    released_pins,
    template_files,
)

from attncard.pipeline.card.render import CARD_TEMPLATE_FILES
from attncard.pipeline.record.results import CARD_TEMPLATE, SCHEMA_VERSION
from conftest import REPO_ROOT

NEXT = CARD_TEMPLATE + 1


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A copy of the repository's files that the script reads and edits."""
    shutil.copytree(REPO_ROOT / TEMPLATES, tmp_path / TEMPLATES)
    for path in (RENDER, RESULTS, PINS, GOLDEN_RESULTS):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / path, tmp_path / path)
    (tmp_path / "cards").mkdir()
    return tmp_path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_copy_reads_as_the_repository_does(repository: Path):
    files = template_files(repository)
    assert {version: (f.cards, f.license) for version, f in CARD_TEMPLATE_FILES.items()} == {
        version: (f["cards"], f["license"]) for version, f in files.items()
    }
    assert set(released_pins(repository)) == set(CARD_TEMPLATE_FILES)


def test_the_next_version_is_opened_registered_recorded_and_pinned(repository: Path):
    before = released_pins(repository)
    assert main(["--root", str(repository)]) == 0
    name = f"model_card_t{NEXT}.md.j2"
    newest = CARD_TEMPLATE_FILES[CARD_TEMPLATE]
    new_card = repository / TEMPLATES / name
    # The copy of the newest card, in its place among the newest version's files.
    assert new_card.read_bytes() == (REPO_ROOT / TEMPLATES / newest.cards[SCHEMA_VERSION]).read_bytes()
    files = template_files(repository)
    assert files[NEXT]["cards"][SCHEMA_VERSION] == name
    assert files[NEXT]["license"] == newest.license
    assert {v: f for v, f in files.items() if v != NEXT} == template_files(REPO_ROOT)
    # Recorded by publish and by the golden run.
    source = (repository / RESULTS).read_text(encoding="utf-8")
    assert f"\nCARD_TEMPLATE = {NEXT}\n" in source
    assert f"\nCARD_TEMPLATES = ({', '.join(map(str, range(1, NEXT)))}, CARD_TEMPLATE)\n" in source
    assert json.loads((repository / GOLDEN_RESULTS).read_text(encoding="utf-8"))["card_template"] == NEXT
    # Pinned: every file of the new version by its sha256, the released versions' pins as they were.
    pins = released_pins(repository)
    assert {v: p for v, p in pins.items() if v != NEXT} == before
    names = {*files[NEXT]["cards"].values(), files[NEXT]["license"]}
    assert pins[NEXT] == {name: sha256(repository / TEMPLATES / name) for name in sorted(names)}


def test_an_edit_of_the_new_card_is_pinned_with_pin_until_a_run_records_it(
    repository: Path, capsys: pytest.CaptureFixture
):
    assert main(["--root", str(repository)]) == 0
    new_card = repository / TEMPLATES / f"model_card_t{NEXT}.md.j2"
    new_card.write_text(new_card.read_text(encoding="utf-8") + "New wording.\n", encoding="utf-8")
    assert released_pins(repository)[NEXT][new_card.name] != sha256(new_card)  # the pin catches the edit
    assert main(["--root", str(repository), "--pin"]) == 0
    assert released_pins(repository)[NEXT][new_card.name] == sha256(new_card)
    # Once a run records it, the version is released: its pins stay.
    run = repository / "cards" / "tiny-gpt2-none-sst2"
    run.mkdir()
    shutil.copyfile(repository / GOLDEN_RESULTS, run / "results.json")  # records NEXT now
    capsys.readouterr()
    assert main(["--root", str(repository), "--pin"]) == 1
    refusal = capsys.readouterr().err
    assert f"card template {NEXT} is released: cards/tiny-gpt2-none-sst2 records it" in refusal
