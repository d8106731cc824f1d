"""The cards committed under cards/: the study of cards/matrix.yaml (`attncard sweep … --cards cards`, then
`attncard summary cards`). Its leaderboard and every cards copy pass `attncard lint`, and every copy's quality
figures and paired verdict are recomputed from its predictions.csv and the real GLUE files, as
`attncard verify --predictions` does. A change of code that the committed cards no longer pass shows here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attncard.pipeline.card.snippet import usage_location
from attncard.pipeline.checks.card_render import card_problems
from attncard.pipeline.checks.lint import lint_folder
from attncard.pipeline.cli import main
from attncard.pipeline.record.results import PLOT_STYLE, Results
from attncard.pipeline.study.matrix import read_matrix
from attncard.pipeline.verify.reverify_predictions import reverify_predictions
from conftest import REPO_ROOT

CARDS = REPO_ROOT / "cards"
COPIES = sorted(path.parent.name for path in CARDS.glob("*/results.json"))
# A path of some machine: a home, root's home, a scratch or work folder, a Mac home, a Windows drive (its
# backslash escaped in JSON or not); and a run folder under `runs/`, relative to the folder publish ran in.
MACHINE_PATH = re.compile(r"/work/|/home/|/root/|/tmp/|/Users/|\b[A-Za-z]:\\|(?<![\w.-])runs/")
# The location a card's usage snippet loads, as the card shows it.
CARD_LOCATION = re.compile(r"load_verified\('([^']*)'")


def machine_paths(cards: Path) -> list[str]:
    """Every place a file of the cards folder `cards` (the PNGs aside) names a path of the machine that made
    it, and every usage snippet, of a card or a results.json, that loads anything but the copy itself,
    `./<name>`, or the Hub id its results.json records: a reader has only those. Empty when there is none."""
    found = []
    for path in sorted(file for file in cards.rglob("*") if file.is_file() and file.suffix != ".png"):
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{path.relative_to(cards)}: {match.group(0)}" for match in MACHINE_PATH.finditer(text)]
        locations = CARD_LOCATION.findall(text) if path.name == "README.md" else []
        if path.name == "results.json":
            locations.append(usage_location(Results.load(path.parent)) or "")
        readers = {f"./{path.parent.name}"}
        if (path.parent / "results.json").is_file():
            readers.add(Results.load(path.parent).repo_id)
        found += [
            f"{path.relative_to(cards)}: the usage snippet loads {location}"
            for location in locations
            if location not in readers
        ]
    return found


def test_cards_holds_a_copy_of_every_run_of_the_matrix_and_no_weights():
    matrix = read_matrix(CARDS / "matrix.yaml")
    assert COPIES, "cards/ holds no cards copy: run the matrix (docs/study.md)"
    runs = {
        (results.module.name, results.dataset.task, results.training.hyperparameters.steps)
        for results in (Results.load(CARDS / name) for name in COPIES)
    }
    assert {(row.module, row.task, row.steps) for row in matrix.rows} <= runs
    assert list(CARDS.rglob("*.safetensors")) == []


@pytest.mark.slow
def test_the_committed_leaderboard_and_cards_pass_lint(capsys):
    kind, findings = lint_folder(CARDS)
    assert (kind, [str(finding) for finding in findings]) == ("cards folder", [])
    assert main(["lint", str(CARDS)]) == 0


@pytest.mark.slow
def test_no_committed_file_names_a_path_of_the_machine_that_made_it():
    assert machine_paths(CARDS) == []


def test_a_machine_path_is_found(tmp_path):
    copy = tmp_path / "cards" / COPIES[0]
    copy.mkdir(parents=True)
    for text, found in (
        ("see /home/me/runs", 1),
        ("C:\\Users\\me", 1),
        ('"C:\\\\runs"', 1),
        ("written to runs/minilm-none-sst2-seed0", 1),
        ("load_verified('../x/y')", 1),
        ("load_verified('/srv/runs/x')", 2),  # its runs/, and a location other than the copy
        (f"load_verified('runs/{COPIES[0]}')", 2),  # the path, and a location other than the copy
        ("load_verified('someone/a-hub-id')", 1),  # no results.json records it
        (f"load_verified('./{COPIES[0]}') reruns/ and dry-runs/", 0),
    ):
        (copy / "README.md").write_text(text, encoding="utf-8")
        assert len(machine_paths(tmp_path / "cards")) == found, text


@pytest.mark.parametrize("name", COPIES)
def test_each_committed_cards_card_and_plots_are_what_todays_attncard_draws(name: str):
    """A download's check of the card, its plots, licence and `.eval_results`. Every copy records plot
    style 2, which matplotlib 3.8 to 3.11 draw alike (bench/cards_plots_anywhere.py), so a reader with any
    of them can check its plots."""
    results = Results.load(CARDS / name)
    assert results.plot_style == PLOT_STYLE
    assert card_problems(results, CARDS / name) == []


@pytest.mark.parametrize("name", COPIES)
def test_each_committed_card_is_recomputed_from_its_predictions(name: str, glue: Path):
    check = reverify_predictions(CARDS / name, data_dir=glue)
    assert check.matches, check.problems
    results = Results.load(CARDS / name)
    names = {figure.name for figure in check.figures}
    assert any(figure_name.endswith("accuracy") for figure_name in names), sorted(names)
    if results.module.name != "none":  # the paired verdict, recomputed from both predictions files
        assert results.comparison is not None and results.comparison.verdict is not None
        assert "comparison.verdict" in names, sorted(names)
