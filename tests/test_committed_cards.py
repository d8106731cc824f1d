"""The cards committed under cards/: the study of cards/matrix.yaml (`attncard sweep … --cards cards`, then
`attncard summary cards`). Its leaderboard and every cards copy pass `attncard lint`, and every copy's quality
figures and paired verdict are recomputed from its predictions.csv and the real GLUE files, as
`attncard verify --predictions` does. A change of code that the committed cards no longer pass shows here."""

from __future__ import annotations

from pathlib import Path

import pytest

from attncard.pipeline.cli import main
from attncard.pipeline.lint import lint_folder
from attncard.pipeline.results import Results
from attncard.pipeline.reverify_predictions import reverify_predictions
from attncard.pipeline.sweep import read_matrix
from conftest import REPO_ROOT

CARDS = REPO_ROOT / "cards"
COPIES = sorted(path.parent.name for path in CARDS.glob("*/results.json"))


def test_cards_holds_a_copy_of_every_run_of_the_matrix_and_no_weights():
    matrix = read_matrix(CARDS / "matrix.yaml")
    assert COPIES, "cards/ holds no cards copy: run the matrix (docs/study.md)"
    runs = {
        (results.module.name, results.dataset.task, results.training.hyperparameters.steps)
        for results in (Results.load(CARDS / name) for name in COPIES)
    }
    assert {(row.module, row.task, row.steps) for row in matrix.rows} <= runs
    assert list(CARDS.rglob("*.safetensors")) == []


def test_the_committed_leaderboard_and_cards_pass_lint(capsys):
    kind, findings = lint_folder(CARDS)
    assert (kind, [str(finding) for finding in findings]) == ("cards folder", [])
    assert main(["lint", str(CARDS)]) == 0


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
