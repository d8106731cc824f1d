"""The leaderboard never says "yes" for runs that learned nothing (issue 44, items 1 and 14).

The issue's study: a short sweep where the dense run and the adaptive_span run both FAIL at chance on SST-2.
Both predict the majority class on every row, so their paired comparison is 0.00 points [0.00, 0.00], a
NON_INFERIOR verdict, and the headline said `adaptive_span | yes: 0.00 points [0.00, 0.00] … | 25.05× faster`.
A module keeps dense accuracy only where the dense runs PASS (and a yes needs the module's runs to PASS too);
otherwise the cell says why there is no answer, and the plot draws the point hollow and crossed, with a
legend entry.

The runs are the committed study's SST-2 cards copies of seed 0 (`cards/`), their verification and
comparison computed again, with the functions publish uses, from the counts of runs at chance.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from attncard.pipeline.card.groups import no_answer, read_cards
from attncard.pipeline.card.leaderboard_plot import draw_leaderboard, leaderboard_points
from attncard.pipeline.cli import main
from attncard.pipeline.record.results import Results, Status
from attncard.pipeline.scoring.gate import verification_from_counts
from attncard.pipeline.scoring.paired import baseline_record, comparison_from_counts
from conftest import REPO_ROOT

CARDS = REPO_ROOT / "cards"
DENSE, MODULE = "minilm-none-sst2-seed0", "minilm-adaptive_span-sst2-seed0"
LABELS = ["negative", "positive"]
CLASS_COUNTS = [428, 444]  # SST-2 validation
MAJORITY = CLASS_COUNTS[1]  # every row predicted positive: the rows a run at chance gets right


def _score(folder: Path, correct: int) -> Results:
    """The cards copy's results as if its run got `correct` rows of SST-2 validation right."""
    results = Results.load(folder)
    results.metrics.accuracy = correct / sum(CLASS_COUNTS)
    results.verification = verification_from_counts(
        CLASS_COUNTS, correct, LABELS, results.parameters.compression_factor, True
    )
    results.save(folder)
    return results


def _compare(cards: Path, both_correct: int, module_only: int, baseline_only: int) -> None:
    """Records the module run's comparison with the dense run from its counts, as publish does."""
    dense = Results.load(cards / DENSE)
    module = Results.load(cards / MODULE)
    both_wrong = sum(CLASS_COUNTS) - both_correct - module_only - baseline_only
    module.comparison = comparison_from_counts(
        both_correct,
        module_only,
        baseline_only,
        both_wrong,
        baselines=[baseline_record(cards / DENSE, dense)],
    )
    module.save(cards / MODULE)


@pytest.fixture
def at_chance(tmp_path: Path) -> Path:
    """The issue's study: a dense and an adaptive_span run, both predicting the majority class on every row:
    both FAIL, and their comparison is NON_INFERIOR at 0.00 points."""
    cards = tmp_path / "cards"
    for name in (DENSE, MODULE):
        shutil.copytree(CARDS / name, cards / name)
        _score(cards / name, MAJORITY)
    _compare(cards, MAJORITY, 0, 0)
    return cards


def _summary(cards: Path) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["summary", str(cards)]) == 0, err.getvalue()
    return (cards / "README.md").read_text(encoding="utf-8")


def _answer(readme: str) -> dict[str, str]:
    """The first table's rows by module: module -> its "Keeps dense accuracy" cell."""
    answer = readme.split("## Which module keeps", 1)[1].split("## Every group", 1)[0]
    rows = [line.strip("|").split(" | ") for line in answer.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): cells[1].strip() for cells in rows[1:]}


def test_two_runs_at_chance_get_no_answer_and_say_why(at_chance: Path) -> None:
    module = Results.load(at_chance / MODULE)
    assert module.verification.status == Status.FAIL and module.comparison.verdict.value == "NON_INFERIOR"
    assert module.comparison.difference == 0.0  # the "yes: 0.00 points [0.00, 0.00]" of the issue

    readme = _summary(at_chance)

    threshold = f"{100 * module.verification.threshold:.2f}%"
    assert _answer(readme) == {
        "adaptive_span": f"no answer: the dense run of seed 0 FAILs (50.92%, below the threshold {threshold})"
    }
    headline = readme.split("## Every group", 1)[0]
    assert "yes" not in headline.split("Keeps dense accuracy: the pooled", 1)[0]
    # The wide table keeps the statistical verdict, and says at once that it answers nothing.
    row = next(
        line
        for line in readme.splitlines()
        if line.startswith("| sentence-transformers/all-MiniLM-L6-v2 | adaptive_span |")
    )
    assert "NON_INFERIOR: 0.00 points [0.00, 0.00]" in row
    assert "; no answer: the dense run of seed 0 FAILs" in row


def test_the_dense_run_is_judged_by_its_recorded_accuracy_when_its_copy_is_not_there(at_chance: Path) -> None:
    shutil.rmtree(at_chance / DENSE)
    readme = _summary(at_chance)
    assert _answer(readme)["adaptive_span"].startswith("no answer: the dense run of seed 0 FAILs (50.92%, ")


def test_a_module_that_fails_beside_a_dense_run_that_passes_is_no_yes(at_chance: Path) -> None:
    """The dense run just above the threshold (490 rows right, 56.19% ≥ 55.99%), the module just below (487,
    55.85%: FAIL), on the same rows but three: a NON_INFERIOR verdict at the margin of 1 point, but no yes
    while the module's run FAILs."""
    _score(at_chance / DENSE, 490)
    module = _score(at_chance / MODULE, 487)
    _compare(at_chance, 487, 0, 3)
    assert Results.load(at_chance / DENSE).verification.status == Status.PASS_NO_COMPRESSION
    assert module.verification.status == Status.FAIL
    assert Results.load(at_chance / MODULE).comparison.verdict.value == "NON_INFERIOR"

    assert _answer(_summary(at_chance)) == {
        "adaptive_span": "no answer: the module's run of seed 0 FAILs (55.85%, below the threshold 56.00%)"
    }


def test_runs_that_pass_keep_their_yes(at_chance: Path) -> None:
    _score(at_chance / DENSE, 741)
    _score(at_chance / MODULE, 739)
    _compare(at_chance, 735, 4, 6)

    assert _answer(_summary(at_chance))["adaptive_span"].startswith("yes: −0.23 points [")
    groups = read_cards(at_chance)
    assert no_answer(groups[1], groups) is None
    assert [point.fails for point in leaderboard_points(groups)] == [False]


def test_the_committed_study_keeps_its_answers_and_marks_its_failing_modules() -> None:
    """A module whose runs FAIL beside dense runs that PASS is still a "no" when it is worse (svd_lowrank on
    MRPC, every seed FAIL), and its point is marked FAIL; so is adaptive_span on MRPC (seed 1 FAILs)."""
    readme = (CARDS / "README.md").read_text(encoding="utf-8")
    answers = _answer(readme)
    assert answers["svd_lowrank (mrpc)"].startswith("no: −8.91 points")
    assert answers["adaptive_span (sst2)"].startswith("yes: ")
    groups = read_cards(CARDS)
    failing = {
        point.group.name + " " + point.group.task for point in leaderboard_points(groups) if point.fails
    }
    assert failing == {"svd_lowrank mrpc", "adaptive_span mrpc"}


def test_the_plot_draws_a_point_that_fails_otherwise(at_chance: Path, tmp_path: Path) -> None:
    """The same point (0.00 points, the same speed-up), drawn from runs at chance and from runs that pass at
    the same difference: only the FAIL marking differs, and it is drawn."""
    [point] = leaderboard_points(read_cards(at_chance))
    assert point.fails and point.difference == 0.0
    failing = draw_leaderboard(read_cards(at_chance), tmp_path / "failing.png").read_bytes()

    _score(at_chance / DENSE, 741)
    _score(at_chance / MODULE, 741)
    _compare(at_chance, 741, 0, 0)  # the same rows right: 0.00 points [0.00, 0.00] again
    [passing] = leaderboard_points(read_cards(at_chance))
    assert not passing.fails
    assert (passing.speedup, passing.difference, passing.ci_low, passing.ci_high) == (
        point.speedup,
        point.difference,
        point.ci_low,
        point.ci_high,
    )
    assert draw_leaderboard(read_cards(at_chance), tmp_path / "passing.png").read_bytes() != failing


def test_the_headline_names_the_base_model_once_and_the_wide_table_folds() -> None:
    readme = (CARDS / "README.md").read_text(encoding="utf-8")
    headline = readme.split("## Which module keeps", 1)[1].split("## Every group", 1)[0]
    assert headline.count("sentence-transformers/all-MiniLM-L6-v2") == 1
    assert "Base model: `sentence-transformers/all-MiniLM-L6-v2`, on the task of each row." in headline
    every = readme.split("## Every group", 1)[1].split("![", 1)[0]
    assert every.startswith("\n\n<details>\n<summary>Every figure of each row: 16 columns")
    assert every.rstrip().endswith("</details>")


def test_each_base_model_is_named_once_above_its_rows(at_chance: Path) -> None:
    """Two base models: a table each, under its model's name; a row names its module alone (one task)."""
    for name in (DENSE, MODULE):
        shutil.copytree(at_chance / name, at_chance / f"other-{name}")
        results = Results.load(at_chance / f"other-{name}")
        results.model.model_id = "other/base-model"
        results.save(at_chance / f"other-{name}")
    module = Results.load(at_chance / f"other-{MODULE}")
    dense = Results.load(at_chance / f"other-{DENSE}")
    module.comparison = comparison_from_counts(
        MAJORITY,
        0,
        0,
        sum(CLASS_COUNTS) - MAJORITY,
        baselines=[baseline_record(at_chance / f"other-{DENSE}", dense)],
    )
    module.save(at_chance / f"other-{MODULE}")

    readme = _summary(at_chance)

    headline = readme.split("## Which module keeps", 1)[1].split("## Every group", 1)[0]
    assert [line for line in headline.splitlines() if line.startswith("Base model")] == [
        "Base model: `other/base-model`, on sst2.",
        "Base model: `sentence-transformers/all-MiniLM-L6-v2`, on sst2.",
    ]
    assert [line.split(" | ")[0] for line in headline.splitlines() if line.startswith("| adaptive_span")] == [
        "| adaptive_span",
        "| adaptive_span",
    ]
    assert headline.count("other/base-model") == 1
