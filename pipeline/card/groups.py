"""The cards of a cards folder, read and grouped into the leaderboard's rows: one [`Group`] per (model,
module, task), its seeds' cards copies, and what the leaderboard's tables and plot both read of a group (its
comparison with the dense runs pooled over seeds, the runs of it that FAIL, its scaling rows).
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..record.comparison import Comparison, Verdict
from ..record.errors import AttncardError
from ..record.manifest import RESULTS_FILE, sha256_file
from ..record.results import Results, ScalingRow, Status, Verification
from ..scoring.paired import DENSE_MODULE, pool_comparisons


@dataclass(frozen=True)
class Card:
    """One cards copy: its folder's name in the cards folder, its results.json, and that file's sha256 (how a
    module run's comparison names the dense run it was compared with; "" when not read from a file)."""

    folder: str
    results: Results
    results_sha256: str = ""

    @property
    def seed(self) -> int:
        return self.results.training.hyperparameters.seed


@dataclass(frozen=True)
class Group:
    """The cards copies of one (model, module, task), one per seed, in the order of their seeds.

    Attributes:
        setting: "" when the seeds' comparisons with the dense runs can be pooled (one margin and confidence,
            or none recorded). Otherwise the (model, module, task) is split into one group per setting, each
            named by it (`compared at margin 2 points, 95% interval`, or `not compared` for the seeds without
            a comparison): a verdict pools only comparisons made at one margin and confidence.
    """

    model: str
    module: str
    task: str
    cards: tuple[Card, ...]
    setting: str = ""

    @property
    def name(self) -> str:
        """The module as a row names it: with its setting when the (model, module, task) was split."""
        return f"{self.module} ({self.setting})" if self.setting else self.module

    @property
    def seeds(self) -> list[int]:
        return [card.seed for card in self.cards]

    @property
    def accuracies(self) -> list[float]:
        return [card.results.metrics.accuracy for card in self.cards]

    @property
    def official(self) -> tuple[str, list[float]]:
        """The official metric of the row's task as its seeds record it, `(name, values by seed)`: the F1 of
        one class is named by it ("F1 (equivalent)"). Accuracy when a seed records none (schema 3) or the
        seeds record different ones."""
        names = {
            (o.name, o.positive_label) if (o := card.results.metrics.official) else None
            for card in self.cards
        }
        if len(names) != 1 or None in names:
            return "accuracy", self.accuracies
        ((name, positive),) = names
        shown = {"f1": f"F1 ({positive})", "matthews_correlation": "MCC"}.get(name, name)
        return shown, [card.results.metrics.official.value for card in self.cards]

    @property
    def speedup(self) -> float | None:
        """The median over seeds of the whole model's speed-up at the task's length; 1 for the dense runs
        (by definition: they are the reference), None when no seed timed the module."""
        if self.module == DENSE_MODULE:
            return 1.0
        rows = [task_length_row(card.results) for card in self.cards]
        speedups = [row.speedup for row in rows if row is not None]
        return statistics.median(speedups) if speedups else None


def task_length_row(results: Results) -> ScalingRow | None:
    """The row of `efficiency.scaling` (the whole model) at the run's training length: N equal to
    `max_length`, else the nearest N (the shorter on a tie); None when nothing was timed.

    Example:
        >>> print(task_length_row(results))  # a run of `none`: the model's own attention, nothing timed
        None
        >>> row = ScalingRow(64, 3, 1.0, 0.9, 1.1, 2.0, 1.9, 2.1, None, None, 2.0, 1.7, 2.3, None)
        >>> results.efficiency.scaling = [dataclasses.replace(row, n=n) for n in (32, 64, 160)]
        >>> task_length_row(results).n  # max_length 128: 160 is nearer than 64
        160
    """
    rows = results.efficiency.scaling
    if not rows:
        return None
    length = results.training.hyperparameters.max_length
    return min(rows, key=lambda row: (abs(row.n - length), row.n))


def read_cards(cards_dir: str | Path) -> list[Group]:
    """Reads every cards copy of a cards folder (`*/results.json`) and groups them by (model, module, task).

    Args:
        cards_dir: the cards folder, e.g. `cards`.

    Returns:
        The groups, by model, task, the dense (`none`) group first, then module; each group's copies by seed.

    Raises:
        [`AttncardError`]: the folder is missing or holds no cards copy; a results.json does not load; two
            copies of a group have the same seed, or were trained with other settings than their seeds.

    Example:
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> [(group.model, group.module, group.task, group.seeds) for group in read_cards("cards")]
        [('gpt2', 'none', 'sst2', [0])]
    """
    cards_dir = Path(cards_dir)
    if not cards_dir.is_dir():
        raise AttncardError(
            f"{cards_dir}: not a folder; give the cards folder that publish --cards or attncard sweep "
            "--cards wrote"
        )
    paths = sorted(cards_dir.glob(f"*/{RESULTS_FILE}"))
    if not paths:
        raise AttncardError(
            f"{cards_dir}: no cards copy (*/{RESULTS_FILE}) in it; copy runs there with publish --cards "
            f"{cards_dir} or attncard sweep --cards {cards_dir}"
        )
    grouped: dict[tuple[str, str, str], list[Card]] = {}
    for path in paths:
        try:
            results = Results.load(path)
        except AttncardError as error:
            raise AttncardError(f"{error}; fix or remove the cards copy {path.parent}") from None
        key = (results.model.model_id, results.module.name, results.dataset.task)
        card = Card(folder=path.parent.name, results=results, results_sha256=sha256_file(path))
        grouped.setdefault(key, []).append(card)
    groups = []
    for (model, module, task), cards in grouped.items():
        for setting, part in _by_setting(cards):
            part.sort(key=lambda card: (card.seed, card.folder))
            _check_group(cards_dir, part)
            groups.append(Group(model=model, module=module, task=task, cards=tuple(part), setting=setting))
    return sorted(groups, key=lambda g: (g.model, g.task, g.module != DENSE_MODULE, g.module, g.setting))


def _by_setting(cards: list[Card]) -> list[tuple[str, list[Card]]]:
    """The cards of a (model, module, task) by the margin and confidence of their comparisons with the dense
    runs: `[("", cards)]` when those can be pooled (one setting, or none), else one part per setting, named
    (see [`Group`]), the seeds without a comparison a part of their own."""
    parts: dict[tuple[float, float] | None, list[Card]] = {}
    for card in cards:
        comparison = card.results.comparison
        compared = comparison is not None and bool(comparison.baselines)
        parts.setdefault((comparison.margin, comparison.confidence) if compared else None, []).append(card)
    if len([setting for setting in parts if setting is not None]) <= 1:
        return [("", cards)]
    return [
        ("not compared" if setting is None else f"compared at {_setting(*setting)}", part)
        for setting, part in parts.items()
    ]


def _setting(margin: float, confidence: float) -> str:
    """`margin 1 point, 95% interval`."""
    return f"margin {100 * margin:g} point{'' if 100 * margin == 1 else 's'}, {100 * confidence:g}% interval"


def _check_group(cards_dir: Path, cards: list[Card]) -> None:
    """The copies of a group are one study: one per seed, trained alike but for the seed."""
    first = cards[0]
    settings = dataclasses.replace(first.results.training.hyperparameters, seed=0)
    for previous, card in itertools.pairwise(cards):  # sorted by seed: a repeated seed is adjacent
        if card.seed == previous.seed:
            raise AttncardError(
                f"{cards_dir}: {previous.folder} and {card.folder} are the same model, module, task and seed "
                f"{card.seed}; keep one of them in the cards folder"
            )
        differs = [
            field.name
            for field in dataclasses.fields(settings)
            if field.name != "seed"
            and getattr(settings, field.name) != getattr(card.results.training.hyperparameters, field.name)
        ]
        if differs:
            name = differs[0]
            raise AttncardError(
                f"{cards_dir}: {first.folder} and {card.folder} are the same model, module and task trained "
                f"with another {name} ({getattr(settings, name)} and "
                f"{getattr(card.results.training.hyperparameters, name)}); a leaderboard pools seeds of one "
                "setting: keep one setting in the cards folder"
            )


def pooled_comparison(group: Group) -> tuple[Comparison | None, list[int]]:
    """The group's comparison with the dense runs, pooled over the seeds that have one (see
    [`pool_comparisons`]), and the seeds left out (no dense baseline found, or no comparison recorded).

    Returns:
        `(pooled or None, seeds left out)`; `(None, [])` for the dense group itself.

    Example:
        >>> from attncard.pipeline.scoring.paired import baseline_record, comparison_from_counts
        >>> pooled_comparison(Group("tiny-gpt2", "none", "sst2", (Card("tiny-gpt2-none-sst2", results),)))
        (None, [])
        >>> seed0, seed1 = Results.load("runs/tiny-gpt2-none-sst2"), Results.load("runs/tiny-gpt2-none-sst2")
        >>> seed1.training.hyperparameters.seed = 1
        >>> dense = baseline_record(Path("runs/tiny-gpt2-none-sst2"), results)
        >>> seed0.comparison = comparison_from_counts(30, 2, 1, 7, baselines=[dense])
        >>> group = Group("tiny-gpt2", "sliding_window", "sst2", (Card("s0", seed0), Card("s1", seed1)))
        >>> pooled, left_out = pooled_comparison(group)
        >>> pooled.n, pooled.verdict, left_out
        (40, <Verdict.INCONCLUSIVE: 'INCONCLUSIVE'>, [1])
    """
    if group.module == DENSE_MODULE:
        return None, []
    compared = [
        card.results.comparison is not None and bool(card.results.comparison.baselines)
        for card in group.cards
    ]
    left_out = [card.seed for card, kept in zip(group.cards, compared, strict=True) if not kept]
    pooled = [card.results.comparison for card, kept in zip(group.cards, compared, strict=True) if kept]
    return (pool_comparisons(pooled) if pooled else None), left_out


def no_answer(group: Group, groups: Sequence[Group]) -> str | None:
    """Why the group's paired verdict cannot say that the module keeps the dense model's accuracy, in one
    phrase (`no answer: …`); None when it can, or when there is no verdict.

    A module keeps an accuracy only where there is one to keep. The verdict answers nothing when a dense run
    it was compared with FAILs verification (below the majority-class threshold: it learned nothing; two runs
    that both predict the majority class agree on every row, a "non-inferior" difference of 0.00 points).
    And a NON_INFERIOR verdict is no yes while one of the module's own runs FAILs. A dense run is judged by
    its cards copy among `groups` (found by the results.json sha256 its comparison records), else by the
    accuracy the comparison records against the module run's threshold (the same split, the same threshold).

    Args:
        group: a module's group.
        groups: every group of the leaderboard, the dense ones among them.

    Example:
        >>> from attncard.pipeline.scoring.paired import baseline_record, comparison_from_counts
        >>> dense = Results.load("runs/tiny-gpt2-none-sst2")
        >>> record = baseline_record(Path("runs/tiny-gpt2-none-sst2"), dense)
        >>> module = Results.load("runs/tiny-gpt2-none-sst2")
        >>> module.comparison = comparison_from_counts(30, 0, 0, 10, baselines=[record])
        >>> dense.verification.status, module.comparison.verdict.value  # the same 30 rows of 40 right
        (<Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>, 'NON_INFERIOR')
        >>> groups = [
        ...     Group("tiny-gpt2", "none", "sst2", (Card("dense", dense, record.results_sha256),)),
        ...     Group("tiny-gpt2", "sliding_window", "sst2", (Card("module", module),)),
        ... ]
        >>> print(no_answer(groups[1], groups))
        None
        >>> dense.verification.status = Status.FAIL  # as if it scored below its threshold
        >>> dense.verification.accuracy, dense.verification.threshold = 0.5, 0.56
        >>> no_answer(groups[1], groups)
        'no answer: the dense run of seed 0 FAILs (50.00%, below the threshold 56.00%)'
    """
    pooled, _ = pooled_comparison(group)
    if pooled is None or pooled.verdict is None:
        return None
    failed_dense, failed_module = failing_runs(group, groups)
    if failed_dense:
        return "no answer: " + _failed_runs("the dense", failed_dense)
    if failed_module and pooled.verdict == Verdict.NON_INFERIOR:
        return "no answer: " + _failed_runs("the module's", failed_module)
    return None


def failing_runs(
    group: Group, groups: Sequence[Group]
) -> tuple[list[tuple[int, Verification]], list[tuple[int, Verification]]]:
    """The runs of the group's pooled comparison that FAIL verification, `(dense runs, module runs)`, each
    `(seed, verification)`; a dense run not among the copies judged by its recorded accuracy (see
    [`no_answer`])."""
    _, left_out = pooled_comparison(group)
    pooled = [card for card in group.cards if card.seed not in left_out]
    copies = {card.results_sha256: card for g in groups if g.module == DENSE_MODULE for card in g.cards}
    failed_dense: list[tuple[int, Verification]] = []
    for card in pooled:
        for baseline in card.results.comparison.baselines:
            copy = copies.get(baseline.results_sha256)
            if copy is not None:
                verification = copy.results.verification
            else:  # not among these copies: what the comparison recorded, against the module's threshold
                verification = dataclasses.replace(
                    card.results.verification,
                    accuracy=baseline.accuracy,
                    status=Status.FAIL
                    if baseline.accuracy < card.results.verification.threshold
                    else Status.PASS_NO_COMPRESSION,
                    reasons=[],
                )
            if verification.status == Status.FAIL:
                failed_dense.append((baseline.seed, verification))
    failed_module = [
        (card.seed, card.results.verification)
        for card in pooled
        if card.results.verification.status == Status.FAIL
    ]
    return failed_dense, failed_module


def _failed_runs(whose: str, failed: list[tuple[int, Verification]]) -> str:
    """`the dense runs of seeds 0, 1 FAIL (50.92%, below the threshold 56.00%)`: the runs that FAIL, by
    seed, with their accuracies, or the first reason of a run that FAILs otherwise (a metric not finite,
    MNLI's mismatched split)."""
    failed = sorted({seed: verification for seed, verification in failed}.items())
    seeds = [seed for seed, _ in failed]
    one = len(seeds) == 1
    runs = f"{whose} run{'' if one else 's'} of {named_seeds(seeds)} FAIL{'s' if one else ''}"
    below = [v for _, v in failed if v.accuracy < v.threshold]
    if len(below) < len(failed):
        other = next(v for _, v in failed if v.accuracy >= v.threshold)
        return f"{runs} ({other.reasons[0] if other.reasons else 'see its card'})"
    accuracies = ", ".join(dict.fromkeys(f"{100 * v.accuracy:.2f}%" for v in below))
    thresholds = "/".join(dict.fromkeys(f"{100 * v.threshold:.2f}%" for v in below))
    return f"{runs} ({accuracies}, below the threshold {thresholds})"


def scaling_rows(group: Group, pick: Callable[[Results], ScalingRow | None]) -> list[ScalingRow]:
    """The scaling row `pick` chooses in each seed that has one."""
    return [row for row in (pick(card.results) for card in group.cards) if row is not None]


def longest_layer_row(results: Results) -> ScalingRow | None:
    rows = results.efficiency.layer_scaling
    return rows[-1] if rows else None


def named_seeds(seeds: list[int]) -> str:
    """`seed 0`, `seeds 0, 1`."""
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(seed) for seed in seeds)
