"""The paired verdict against the dense baseline (pipeline.scoring.paired) and its place on the card.

The figures are checked against an independent computation (numpy on the explicit ±1/0 vector of per-row
differences, McNemar from the binomial CDF); the baseline is found among decoy run folders built from the
golden card's fixture; every recorded figure that is tampered with is caught; and each of the card's cases
renders and passes the card lint.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom, norm

from attncard.modules import get_module
from attncard.pipeline.card.plots import write_plots
from attncard.pipeline.card.render import render_card, render_license
from attncard.pipeline.checks.lint import lint_run_folder
from attncard.pipeline.record.comparison import BaselineRecord, Comparison, Verdict
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE, build_manifest, sha256_file
from attncard.pipeline.record.results import Results, TrainConfig
from attncard.pipeline.scoring.paired import (
    DEFAULT_MARGIN,
    ComparisonError,
    baseline_name,
    baseline_record,
    comparison_from_counts,
    comparison_problems,
    find_baseline,
    no_baseline,
    paired_comparison,
    pool_comparisons,
    setup_differences,
)
from conftest import FIXTURES

FIXTURE = FIXTURES / "tiny_results.json"
MODULE = "svd_lowrank"  # a built-in module that changes attention: the card renders its spec and source
# The recorded comparison of the fixture run as a module run: 40 rows, 20 of them right for the module (the
# fixture's verification.correct) and 24 right for the baseline (accuracy 60%).
COUNTS = (16, 4, 8, 12)  # both correct, module only, baseline only, both wrong


def dense_run() -> Results:
    """The fixture's run: the module `none`, seed 0, 40 rows."""
    return Results.load(FIXTURE)


def module_run() -> Results:
    """The fixture's run as if made with `svd_lowrank`: the same setup, another module."""
    results = dense_run()
    results.module.name = MODULE
    results.repo_name = f"tiny-gpt2-{MODULE}-sst2"
    results.command = results.command.replace("--module none", f"--module {MODULE}")
    module = get_module(MODULE)  # the card shows the installed module's own words
    results.module.citation, results.module.bibtex = module.paper.citation, module.paper.bibtex
    results.module.config_help = {field: help_text for field, _, help_text in module.config_fields()}
    return results


def baseline(accuracy: float = 0.6, seed: int = 0, name: str = "tiny-gpt2-none-sst2") -> BaselineRecord:
    return BaselineRecord(
        repo_name=name,
        repo_id=f"attncard-tests/{name}",
        results_sha256="a" * 64,
        predictions_sha256="b" * 64,
        accuracy=accuracy,
        seed=seed,
    )


def independent(both_correct: int, module_only: int, baseline_only: int, both_wrong: int, confidence: float):
    """`(difference, ci_low, ci_high, mcnemar_p)` computed without pipeline.scoring.paired: numpy on the
    explicit vector of per-row differences, and twice the binomial CDF of the rarer discordant kind."""
    differences = np.array(
        [1.0] * module_only + [-1.0] * baseline_only + [0.0] * (both_correct + both_wrong), dtype=np.float64
    )
    mean = differences.mean()
    half_width = norm.isf((1 - confidence) / 2) * differences.std(ddof=1) / math.sqrt(differences.size)
    discordant = module_only + baseline_only
    p = min(1.0, 2 * binom.cdf(min(module_only, baseline_only), discordant, 0.5)) if discordant else 1.0
    return mean, mean - half_width, mean + half_width, p


# --- the figures -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "confidence"),
    [
        ((700, 10, 13, 149), 0.95),  # SST-2 validation size, a small loss
        ((30, 12, 2, 6), 0.95),  # the module better
        ((5, 0, 9, 1), 0.9),  # only the baseline right on the discordant rows
        ((8000, 40, 70, 1882), 0.99),
        ((3, 1, 1, 0), 0.95),  # as many discordant rows of each kind: p = 1
    ],
)
def test_figures_match_an_independent_computation(counts, confidence):
    comparison = comparison_from_counts(*counts, baselines=[baseline()], confidence=confidence)
    difference, low, high, p = independent(*counts, confidence)
    assert comparison.n == sum(counts)
    assert (comparison.both_correct, comparison.module_only, comparison.baseline_only) == counts[:3]
    assert comparison.both_wrong == counts[3]
    for recorded, expected in zip(
        (comparison.difference, comparison.ci_low, comparison.ci_high, comparison.mcnemar_p),
        (difference, low, high, p),
        strict=True,
    ):
        assert math.isclose(recorded, expected, rel_tol=1e-9, abs_tol=1e-12), (recorded, expected)
    assert comparison.confidence == confidence and comparison.margin == DEFAULT_MARGIN == 0.01
    assert f"Each of the {sum(counts)} rows" in comparison.method
    assert f"{100 * confidence:g}% interval" in comparison.method


def test_no_discordant_row_has_p_one_and_a_zero_width_interval():
    comparison = comparison_from_counts(50, 0, 0, 50, baselines=[baseline()])
    assert (comparison.difference, comparison.ci_low, comparison.ci_high) == (0.0, 0.0, 0.0)
    assert comparison.mcnemar_p == 1.0
    assert comparison.verdict == Verdict.NON_INFERIOR


@pytest.mark.parametrize(
    ("counts", "margin", "verdict"),
    [
        ((800, 30, 20, 22), 0.01, Verdict.NON_INFERIOR),
        ((700, 5, 60, 107), 0.01, Verdict.INFERIOR),
        ((700, 10, 13, 149), 0.01, Verdict.INCONCLUSIVE),
        ((700, 10, 13, 149), 0.05, Verdict.NON_INFERIOR),  # the same rows at a wider margin
        ((700, 5, 60, 107), 0.07, Verdict.INCONCLUSIVE),
    ],
)
def test_the_three_verdicts(counts, margin, verdict):
    comparison = comparison_from_counts(*counts, baselines=[baseline()], margin=margin)
    assert comparison.verdict == verdict
    _, low, high, _ = independent(*counts, 0.95)
    if low > -margin:
        assert comparison.verdict == Verdict.NON_INFERIOR
    elif high < -margin:
        assert comparison.verdict == Verdict.INFERIOR
    else:
        assert comparison.verdict == Verdict.INCONCLUSIVE


def test_predictions_are_counted_row_by_row():
    rng = np.random.default_rng(0)
    labels, module, dense = (rng.integers(0, 3, size=500) for _ in range(3))
    comparison = paired_comparison(
        labels.tolist(), module.tolist(), dense.tolist(), baselines=[baseline()], margin=0.02
    )
    right, dense_right = module == labels, dense == labels
    assert comparison.both_correct == int(np.sum(right & dense_right))
    assert comparison.module_only == int(np.sum(right & ~dense_right))
    assert comparison.baseline_only == int(np.sum(~right & dense_right))
    assert comparison.both_wrong == int(np.sum(~right & ~dense_right))
    assert math.isclose(comparison.difference, right.mean() - dense_right.mean(), abs_tol=1e-12)
    assert comparison.margin == 0.02


def test_pooling_seeds_equals_counting_their_concatenated_rows():
    rng = np.random.default_rng(1)
    seeds = []
    for seed in range(3):
        labels = rng.integers(0, 2, size=120)
        module = np.where(rng.random(120) < 0.8, labels, 1 - labels)
        dense = np.where(rng.random(120) < 0.82, labels, 1 - labels)
        seeds.append((labels.tolist(), module.tolist(), dense.tolist(), baseline(seed=seed)))
    per_seed = [paired_comparison(*rows, baselines=[record]) for *rows, record in seeds]
    concatenated = paired_comparison(
        *([value for *rows, _ in seeds for value in rows[i]] for i in range(3)),
        baselines=[record for *_, record in seeds],
    )
    assert pool_comparisons(per_seed) == concatenated
    summed = [sum(getattr(c, name) for c in per_seed) for name in ("both_correct", "module_only")]
    summed += [sum(getattr(c, name) for c in per_seed) for name in ("baseline_only", "both_wrong")]
    assert comparison_from_counts(*summed, baselines=concatenated.baselines) == concatenated
    assert concatenated.n == 360 and "3 seeds are summed" in concatenated.method


def test_pooling_refuses_a_seed_without_baseline_or_another_margin():
    one = comparison_from_counts(30, 2, 1, 7, baselines=[baseline()])
    with pytest.raises(ComparisonError, match="without a dense baseline cannot be pooled"):
        pool_comparisons([one, no_baseline()])
    with pytest.raises(ComparisonError, match="different margins"):
        pool_comparisons([one, comparison_from_counts(30, 2, 1, 7, baselines=[baseline()], margin=0.02)])
    with pytest.raises(ComparisonError):
        pool_comparisons([])


@pytest.mark.parametrize(
    "lists",
    [([0, 1], [0, 1, 1], [0, 1]), ([0, 1, 1], [0, 1], [0, 1, 1]), ([0, 1], [0, 1], [0]), ([0], [], [])],
)
def test_lists_of_different_lengths_are_refused(lists):
    with pytest.raises(ComparisonError, match="same evaluated rows"):
        paired_comparison(*lists, baselines=[baseline()])


@pytest.mark.parametrize(
    ("counts", "options", "message"),
    [
        ((5, -1, 2, 3), {}, "cannot be negative"),
        ((1, 0, 0, 0), {}, "at least 2 rows"),
        ((5, 1, 2, 3), {"baselines": []}, "no_baseline"),
        ((5, 1, 2, 3), {"margin": 0.0}, "margin is 0.0"),
        ((5, 1, 2, 3), {"margin": 1.5}, "margin is 1.5"),
        ((5, 1, 2, 3), {"confidence": 1.0}, "confidence is 1.0"),
    ],
)
def test_impossible_counts_and_settings_are_refused(counts, options, message):
    with pytest.raises(ComparisonError, match=message):
        comparison_from_counts(*counts, **{"baselines": [baseline()], **options})


def test_no_baseline_has_no_rows_and_no_verdict():
    comparison = no_baseline(0.02)
    assert (comparison.baselines, comparison.n, comparison.verdict, comparison.margin) == ([], 0, None, 0.02)
    assert "No dense baseline was found" in comparison.method
    with pytest.raises(ComparisonError):
        no_baseline(0.0)


# --- the baseline ------------------------------------------------------------------------------------------


def test_the_dense_run_of_the_same_setup_is_the_baseline():
    assert setup_differences(module_run(), dense_run()) == []


_CHANGES = [
    ("model.model_id", "tiny-gpt2-other"),
    ("model.revision", "sha256:" + "1" * 64),
    ("dataset.task", "cola"),
    ("dataset.dataset_id", "nyu-mll/glue"),
    ("dataset.config", "cola"),
    ("dataset.revision", "2" * 40),
    ("dataset.split", "test"),
    ("dataset.files", {"train": {"path": "SST-2/train.tsv", "sha256": "3" * 64}}),
    ("dataset.validation_rows", 41),
    ("dataset.label_names", ["positive", "negative"]),
    *((f"training.hyperparameters.{f.name}", None) for f in dataclasses.fields(TrainConfig)),
]


@pytest.mark.parametrize(("path", "value"), _CHANGES, ids=[path for path, _ in _CHANGES])
def test_each_setup_difference_is_named(path, value):
    other = dense_run()
    *parents, name = path.split(".")
    holder = other
    for parent in parents:
        holder = getattr(holder, parent)
    if value is None:  # a hyperparameter: another value of its type
        old = getattr(holder, name)
        value = old + "_other" if isinstance(old, str) else old * 2 + 1
    setattr(holder, name, value)
    assert setup_differences(module_run(), other) == [
        f"{path} is {value!r}, the run has {getattr(_resolve(module_run(), parents), name)!r}"
    ]


def _resolve(results: Results, parents: list[str]):
    for parent in parents:
        results = getattr(results, parent)
    return results


def test_a_module_run_is_no_baseline():
    assert setup_differences(module_run(), module_run()) == [f"its module is '{MODULE}', not 'none'"]


def _write_run(folder: Path, results: Results) -> Path:
    folder.mkdir(parents=True)
    results.save(folder)
    return folder


def test_find_baseline_among_decoys(tmp_path):
    run = module_run()
    seed1 = copy.deepcopy(dense_run())
    seed1.training.hyperparameters.seed = 1
    other_rows = copy.deepcopy(dense_run())
    other_rows.model.revision = "sha256:" + "4" * 64
    decoys = [
        _write_run(tmp_path / "tiny-gpt2-none-sst2-seed1", seed1),
        _write_run(tmp_path / run.repo_name, run),  # the module run itself
        _write_run(tmp_path / "aaa-other-revision", other_rows),
    ]
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / RESULTS_FILE).write_text('{"schema_version": 2, "loss": NaN}', encoding="utf-8")
    (tmp_path / "empty").mkdir()
    (tmp_path / "not-json").mkdir()
    (tmp_path / "not-json" / RESULTS_FILE).write_bytes(b"\xff\xfe")
    decoys += [tmp_path / "broken", tmp_path / "empty", tmp_path / "not-json"]
    assert find_baseline(run, decoys) is None
    renamed = _write_run(tmp_path / "a-rerun", dense_run())  # a baseline, first by name
    assert find_baseline(run, [*decoys, renamed]) == renamed
    named = _write_run(tmp_path / "tiny-gpt2-none-sst2", dense_run())  # named like the run, with none
    assert find_baseline(run, [*decoys, renamed, named]) == named
    assert find_baseline(run, [named, *decoys, renamed]) == named
    assert find_baseline(dense_run(), [named, renamed]) is None  # `none` is the baseline itself


def test_baseline_name_puts_none_in_place_of_the_module():
    assert baseline_name("minilm-adaptive_span-sst2-seed2", "adaptive_span") == "minilm-none-sst2-seed2"
    assert baseline_name("span-minilm-span-sst2", "span") == "span-minilm-none-sst2"
    assert baseline_name("minilm-spanned-sst2", "span") == "minilm-spanned-sst2"


def test_baseline_record_hashes_the_results_file(tmp_path):
    folder = _write_run(tmp_path / "tiny-gpt2-none-sst2", dense_run())
    results = Results.load(folder)
    record = baseline_record(folder, results)
    assert record.results_sha256 == sha256_file(folder / RESULTS_FILE)
    assert record.predictions_sha256 == results.metrics.predictions_sha256
    assert (record.repo_name, record.repo_id) == (results.repo_name, results.repo_id)
    assert (record.accuracy, record.seed) == (results.metrics.accuracy, 0)


# --- checking a recorded comparison ------------------------------------------------------------------------


def recorded_run(comparison: Comparison | None = None) -> Results:
    run = module_run()
    run.comparison = comparison or comparison_from_counts(*COUNTS, baselines=[baseline()])
    return run


def test_a_recomputed_comparison_has_no_problems():
    assert recorded_run().comparison.verdict == Verdict.INCONCLUSIVE
    assert comparison_problems(recorded_run()) == []
    assert comparison_problems(recorded_run(no_baseline())) == []
    older = module_run()
    assert older.comparison is None and comparison_problems(older) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"difference": -0.05}, "comparison.difference is -0.05 but -0.1 when recomputed"),
        ({"ci_low": -0.2}, "comparison.ci_low is -0.2 but"),
        ({"ci_high": 0.01}, "comparison.ci_high is 0.01 but"),
        ({"mcnemar_p": 0.04}, "comparison.mcnemar_p is 0.04 but"),
        ({"verdict": Verdict.NON_INFERIOR}, "comparison.verdict is 'NON_INFERIOR' but 'INCONCLUSIVE'"),
        ({"verdict": None}, "comparison.verdict is None but 'INCONCLUSIVE'"),
        ({"method": "Trust us."}, "comparison.method is 'Trust us.' but"),
        ({"both_correct": 17, "both_wrong": 11}, "counts 21 rows the module gets right"),
        ({"module_only": 5, "both_wrong": 11}, "counts 21 rows the module gets right"),
        ({"baseline_only": 9, "both_wrong": 11}, "counts 25 rows the dense run(s) get right"),
        ({"n": 41}, "comparison counts 40 rows, comparison.n is 41"),
        ({"both_wrong": -1, "both_correct": 29}, "comparison.both_wrong is -1, a negative count"),
        ({"margin": 0.0}, "comparison.margin is 0.0, not a share"),
        ({"margin": 1.5}, "comparison.margin is 1.5, not a share"),
        ({"confidence": 1.0}, "comparison.confidence is 1.0, not a share"),
        ({"confidence": 0.9}, "comparison.ci_low is"),  # the interval of another confidence
        ({"baselines": [baseline(seed=1)]}, "comparison.baselines[0].seed is 1, the run's seed is 0"),
        ({"baselines": [baseline(accuracy=0.61)]}, "accuracy is 0.61, no share of the run's 40 rows"),
        ({"baselines": [baseline(accuracy=1.5)]}, "accuracy is 1.5, no share of the run's 40 rows"),
        ({"baselines": [baseline(accuracy=0.625)]}, "counts 24 rows the dense run(s) get right, their"),
        (
            {"baselines": [dataclasses.replace(baseline(), results_sha256="A" * 64)]},
            "comparison.baselines[0].results_sha256 is 'AAAA",
        ),
        (
            {"baselines": [dataclasses.replace(baseline(), predictions_sha256="TODO")]},
            "comparison.baselines[0].predictions_sha256 is 'TODO', not a sha256",
        ),
        (
            {"baselines": [dataclasses.replace(baseline(), repo_name="a` | **PASS**")]},
            "comparison.baselines[0] names the run 'a` | **PASS**', which is no Hub repository name",
        ),
        (
            {"baselines": [dataclasses.replace(baseline(), repo_id="../../etc")]},
            "comparison.baselines[0] names the run '../../etc', which is no Hub repository name",
        ),
        ({"baselines": []}, "comparison.n is 40 but 0 when recomputed"),
        ({"baselines": [baseline(), baseline(seed=1)]}, "2 baseline(s) of the run's 40 rows make 80"),
    ],
)
def test_each_tampered_figure_is_caught(change, problem):
    tampered = dataclasses.replace(recorded_run().comparison, **change)
    problems = comparison_problems(recorded_run(tampered))
    assert any(problem in found for found in problems), problems


def test_pooled_counts_must_match_the_accuracies_of_the_dense_runs():
    run = module_run()
    records = [baseline(0.6, 0), baseline(0.55, 1)]  # 24 and 22 of the 40 rows: 46 right
    run.comparison = comparison_from_counts(30, 8, 16, 26, baselines=records)
    assert comparison_problems(run) == []
    run.comparison = comparison_from_counts(30, 8, 17, 25, baselines=records)
    assert comparison_problems(run) == [
        "comparison counts 47 rows the dense run(s) get right, their accuracies of 40 rows make 46"
    ]
    run.comparison = comparison_from_counts(30, 8, 16, 26, baselines=[baseline(0.6, 0), baseline(0.55, 0)])
    assert comparison_problems(run) == ["comparison.baselines has the seeds [0, 0]; each seed is pooled once"]


def test_a_tampered_verdict_is_named_first():
    comparison = recorded_run().comparison
    tampered = dataclasses.replace(comparison, verdict=Verdict.NON_INFERIOR, mcnemar_p=0.01)
    problems = comparison_problems(recorded_run(tampered))
    assert problems[0].startswith("comparison.verdict is 'NON_INFERIOR'") and len(problems) == 2


def test_the_dense_baseline_records_no_comparison():
    run = dense_run()
    run.comparison = comparison_from_counts(*COUNTS, baselines=[baseline()])
    assert comparison_problems(run) == [
        "comparison is recorded, but the module 'none' is the dense baseline and has none"
    ]


# --- the card ----------------------------------------------------------------------------------------------

VERDICT_LINE = (
    "Against the dense model (tiny-gpt2-none-sst2, accuracy 60.00%): −10.00 points (95% CI −26.90 to "
    "+6.90), exact McNemar p = 0.39: **INCONCLUSIVE** at a non-inferiority margin of 1.0 point. These rows "
    f"cannot tell whether `{MODULE}` keeps the dense model's accuracy to within the margin."
)
NO_BASELINE_LINE = (
    "No dense baseline of the same setup (a run of the module `none` with the same base model and revision, "
    "task, data, seed and training settings) was found, so this card says nothing about whether "
    f"`{MODULE}` keeps the dense model's accuracy."
)
DENSE_LINE = (
    "This run is the dense baseline: the runs of the other attention modules with the same base model and "
    "revision, task, data, seed and training settings are compared with it, row by row."
)
STATUS_PREFIX = "**Status: FAIL** — "


def card_folder(folder: Path, results: Results) -> tuple[Path, str]:
    """A run folder holding the card, its plots, licence and results.json, sealed as publish seals one."""
    folder.mkdir()
    plots = write_plots(results, folder)
    licence = render_license(results)
    if licence is not None:
        (folder / "LICENSE").write_text(licence, encoding="utf-8")
    results.manifest = build_manifest(folder)
    card = render_card(results, plots)
    (folder / CARD_FILE).write_text(card, encoding="utf-8")
    results.manifest = build_manifest(folder)
    results.save(folder)
    return folder, card


def card_findings(folder: Path) -> list[str]:
    """The lint's findings on the card and results.json (the folder holds no config or adapter)."""
    return [str(f) for f in lint_run_folder(folder) if f.path in (CARD_FILE, RESULTS_FILE)]


def after_status(card: str) -> list[str]:
    lines = card.splitlines()
    status = next(i for i, line in enumerate(lines) if line.startswith(STATUS_PREFIX))
    return lines[status + 1 : status + 4]


def test_card_of_a_module_run_with_its_baseline(tmp_path):
    folder, card = card_folder(tmp_path / "run", recorded_run())
    assert after_status(card) == ["", VERDICT_LINE, ""]
    assert f"| **`{MODULE}` right** | 16 | 4 |\n| **`{MODULE}` wrong** | 8 | 12 |\n" in card
    assert "| `attncard-tests/tiny-gpt2-none-sst2` | 0 | 60.00% | `" + "a" * 64 + "` |\n" in card
    assert recorded_run().comparison.method in card
    assert card_findings(folder) == []
    # The counts are table figures: one that results.json does not hold is found.
    text = (folder / CARD_FILE).read_text(encoding="utf-8")
    forged = text.replace("right** | 16 | 4 |", "right** | 9973 | 4 |")
    (folder / CARD_FILE).write_text(forged, encoding="utf-8")
    assert any("figure 9973 in table" in finding for finding in card_findings(folder))


def test_card_of_a_module_run_without_baseline(tmp_path):
    folder, card = card_folder(tmp_path / "run", recorded_run(no_baseline()))
    assert after_status(card) == ["", NO_BASELINE_LINE, ""]
    assert "Dense right" not in card and VERDICT_LINE not in card
    assert card_findings(folder) == []


def test_card_of_the_dense_baseline(tmp_path):
    folder, card = card_folder(tmp_path / "run", dense_run())
    assert after_status(card) == ["", DENSE_LINE, ""]
    assert "Dense right" not in card
    assert card_findings(folder) == []


def test_card_of_an_older_module_run_says_nothing(tmp_path):
    folder, card = card_folder(tmp_path / "run", module_run())
    assert after_status(card)[1] != ""  # the next paragraph follows the status at once
    for line in (VERDICT_LINE, NO_BASELINE_LINE, DENSE_LINE, "Dense right"):
        assert line not in card
    assert card_findings(folder) == []


def test_card_of_pooled_seeds_names_each_dense_run(tmp_path):
    records = [baseline(0.6, 0, "tiny-gpt2-none-sst2-seed0"), baseline(0.575, 1, "tiny-gpt2-none-sst2-seed1")]
    pooled = comparison_from_counts(32, 8, 15, 25, baselines=records)
    _, card = card_folder(tmp_path / "run", recorded_run(pooled))
    assert (
        "Against the dense models of 2 seeds (tiny-gpt2-none-sst2-seed0, accuracy 60.00%; "
        "tiny-gpt2-none-sst2-seed1, accuracy 57.50%): −8.75 points" in card
    )
    assert "| `attncard-tests/tiny-gpt2-none-sst2-seed1` | 1 | 57.50% |" in card
