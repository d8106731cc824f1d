"""`attncard summary CARDS_DIR`: the leaderboard of a study, from the cards copies alone.

A cards folder holds one copy per run (`publish --cards`, `attncard sweep --cards`: every file of the run
folder but its weights). [`write_summary`] reads every `CARDS_DIR/*/results.json`, groups the runs by
(model, module, task), one group per row, its seeds pooled, and writes

    CARDS_DIR/README.md         the leaderboard: the answer (which module keeps dense accuracy, and is it
                                faster), a table of every group, the plot, how each column is computed
    CARDS_DIR/leaderboard.png   each module's accuracy difference against dense against its speed-up

Both are a function of the results.json files alone, with no date and no path of this machine in them, so
the same cards give the same bytes: `attncard lint CARDS_DIR` renders both again and reports every difference
(see [`pipeline.checks.lint`]).
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..record.errors import AttncardError, markdown_text
from ..record.manifest import RESULTS_FILE, sha256_file
from ..record.results import PLOT_STYLE, Comparison, Results, ScalingRow, Status, Verdict, Verification
from ..scoring.paired import DENSE_MODULE, pool_comparisons
from .plots import plot_context

LEADERBOARD_FILE = "README.md"
LEADERBOARD_PLOT = "leaderboard.png"
# The statuses in the order the Status column lists them.
STATUS_ORDER = (Status.PASS, Status.PASS_NO_COMPRESSION, Status.FAIL)
NOT_TIMED = "not timed: the model's own attention"

COLUMNS = (
    ("Model", "`model.model_id` of results.json: the Hub id of the base model, or its folder's name."),
    ("Module", "`module.name`: the attention module installed."),
    ("Task", "`dataset.task`: the GLUE task, evaluated on its whole validation split."),
    ("Steps", "`training.hyperparameters.steps`: every seed of a row is trained with the same settings."),
    ("Seeds", "`training.hyperparameters.seed` of each cards copy of the row."),
    (
        "GLUE metric (mean ± sd)",
        "the task's official GLUE metric, `metrics.official` (Matthews' correlation for CoLA, F1 of the "
        "positive class for MRPC and QQP, accuracy for the others): the mean of the seeds' ± their sample "
        "standard deviation. Runs written before results.json recorded it (schema 3) give their accuracy, "
        "and a row whose seeds record different metrics gives the accuracy of all. MNLI gives its "
        "mismatched split's after the matched split's.",
    ),
    (
        "Accuracy (mean ± sd)",
        "the mean of the seeds' `metrics.accuracy` ± their sample standard deviation (n − 1); one seed has "
        "no spread.",
    ),
    ("Accuracy by seed", "each seed's `metrics.accuracy`."),
    (
        "Status",
        "each seed's `verification.status` (PASS, PASS_NO_COMPRESSION or FAIL) and the seeds that have it.",
    ),
    (
        "Against dense (pooled)",
        "the paired verdict against the dense runs (module `none`), pooled over seeds: the four counts of "
        "each seed's `comparison` (both correct, module only, dense only, both wrong) are summed, and the "
        "difference (module − dense, in accuracy points), its interval, McNemar's exact p-value and the "
        # The published wording names the function by its module's name before pipeline/ held packages
        # (now pipeline/scoring/paired.py): `attncard summary cards` writes the committed leaderboard byte
        # for byte.
        "verdict are computed from the sums as for one run (`pipeline.paired.comparison_from_counts`, at the "
        "seeds' margin and confidence), with n the rows of all those seeds. Seeds with no dense baseline, or "
        "no comparison recorded, are left out of the pool and named. A verdict against dense runs that FAIL "
        "verification, or a NON_INFERIOR one of a module whose runs FAIL, is followed by `no answer` and why "
        "(as in the first table).",
    ),
    (
        "Speed-up at the task's length",
        "the whole model's `speedup`, dense time ÷ module time (above 1: the module is faster; the card's "
        "`scaling_timing_method` says how it was timed): in each seed, the row of `efficiency.scaling` whose "
        "N is the training `max_length` (else the nearest N, the shorter on a tie); the median over seeds, "
        "with that N.",
    ),
    (
        "Memory at the task's length",
        "the same row's `memory_ratio`, module peak ÷ dense peak (below 1: the module needs less); the "
        "median over the seeds where it was measurable.",
    ),
    (
        "Layer speed-up at the longest N",
        "attention layer 0 alone: the `speedup` of the last row of `efficiency.layer_scaling` (its longest "
        "N) in each seed; the median over seeds, with that N.",
    ),
    (
        "Layer memory at the longest N",
        "that row's `memory_ratio`; the median over the seeds where measurable.",
    ),
    ("Compression", "`parameters.compression_factor`, parameters before ÷ after; the median over seeds."),
    ("Cards", "each seed's card, `<folder>/README.md` of its cards copy."),
)
# The column `attncard summary --hub` adds before Cards: every row of that leaderboard was checked.
CHECKS_COLUMN = (
    "Checks passed",
    "what was checked of each seed's run, fetched from the Hub without its weights: `run tag` (results.json "
    "is the file the run tag on `main`'s commit was made for), `manifest` (every file has its sha256 in "
    "results.json, and only files a run holds), `card` (the card and plots are what results.json renders), "
    "`figures from predictions.csv` (every quality figure and the verification recomputed from the "
    "predictions and the recorded task's data), `paired verdict from both runs' predictions` (the verdict "
    "against dense recomputed from this run's and the dense run's predictions.csv), and `signed by …` when "
    "a signer or key was required.",
)


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


# --- the leaderboard ---------------------------------------------------------------------------------------


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
    failed_dense, failed_module = _failing_runs(group, groups)
    if failed_dense:
        return "no answer: " + _failed_runs("the dense", failed_dense)
    if failed_module and pooled.verdict == Verdict.NON_INFERIOR:
        return "no answer: " + _failed_runs("the module's", failed_module)
    return None


def _failing_runs(
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
    runs = f"{whose} run{'' if one else 's'} of {_seeds(seeds)} FAIL{'s' if one else ''}"
    below = [v for _, v in failed if v.accuracy < v.threshold]
    if len(below) < len(failed):
        other = next(v for _, v in failed if v.accuracy >= v.threshold)
        return f"{runs} ({other.reasons[0] if other.reasons else 'see its card'})"
    accuracies = ", ".join(dict.fromkeys(f"{100 * v.accuracy:.2f}%" for v in below))
    thresholds = "/".join(dict.fromkeys(f"{100 * v.threshold:.2f}%" for v in below))
    return f"{runs} ({accuracies}, below the threshold {thresholds})"


def render_leaderboard(
    groups: list[Group],
    *,
    source: str | None = None,
    checks: Mapping[str, str] | None = None,
    refused: Sequence[tuple[str, str]] = (),
) -> str:
    """The leaderboard, README.md of the cards folder: one table row per group, the plot, and how each column
    is computed.

    Args:
        groups: the groups, as [`read_cards`] gives them.
        source: where the cards copies came from, when not from this folder alone (`attncard summary --hub`:
            the Hub organisation).
        checks: the checks each cards copy passed, by folder: adds the column "Checks passed".
        refused: runs left out, each `(name, reason)`, listed below the table; the reason is shown as text
            (see [`pipeline.record.errors.markdown_text`]), whatever it quotes.

    Example:
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> text = render_leaderboard(read_cards("cards"))
        >>> print(next(line for line in text.splitlines() if line.startswith("| gpt2")))
        | gpt2 | none | sst2 | 10 | 0 | ... (one seed: no spread) | ... (seed 0)
        | PASS_NO_COMPRESSION: seed 0 | the dense baseline | not timed: the model's own attention | ...
        | [seed 0](tiny-gpt2-none-sst2/README.md) |
    """
    runs = sum(len(group.cards) for group in groups)
    columns = COLUMNS if checks is None else (*COLUMNS[:-1], CHECKS_COLUMN, COLUMNS[-1])
    counted = (
        f"{runs} run{'s' if runs != 1 else ''} in {len(groups)} group{'s' if len(groups) != 1 else ''}: one "
        "row per (model, module, task), its seeds pooled."
    )
    if source is None:
        written = (
            f"Written by `attncard summary` from the cards copies of this folder (`*/{RESULTS_FILE}`) alone; "
            "`attncard lint` on this folder renders it again and reports every figure that differs."
        )
    else:
        written = (
            f"Written by `attncard summary --hub` from every run of {source} tagged `attncard`; each row's "
            f"runs passed the checks its column names, and their cards copies are in this folder. "
            f"{len(refused)} run{'s' if len(refused) != 1 else ''} failed a check and "
            f"{'is' if len(refused) == 1 else 'are'} listed below the table, not in it."
        )
    lines = [
        "# Leaderboard",
        "",
        f"{counted} {written}",
        "",
        *_answer(groups),
        "## Every group",
        "",
        # Folded: its columns are wider than any page (docs/hooks.py has the site render the Markdown inside).
        "<details>",
        f"<summary>Every figure of each row: {len(columns)} columns, how each is computed below.</summary>",
        "",
        "| " + " | ".join(header for header, _ in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for group in groups:
        cells = _row(group, groups)
        if checks is not None:
            passed = sorted({checks.get(card.folder, "") for card in group.cards})
            cells.insert(len(cells) - 1, "; ".join(passed))
        lines.append("| " + " | ".join(_cell(text) for text in cells) + " |")
    lines += ["", "</details>"]
    if any(group.setting for group in groups):
        lines += [
            "",
            "A (model, module, task) whose seeds were compared with the dense runs at different margins or "
            "confidences has one row per setting, named in its Module cell (`compared at margin 2 points, "
            "95% interval`; `not compared` for its seeds without a comparison): a paired verdict pools only "
            "comparisons made at one margin and confidence, and one at a wider margin says less than one at "
            "a narrower. Publish the seeds again at one margin (`--margin`) to pool them.",
        ]
    if source is not None:
        lines += ["", "## Refused", ""]
        lines += (
            # A reason quotes what a run or a server sent (a results.json key, an HTTP error body): shown as
            # text, no markup or control character of it taking effect.
            [f"- `{_cell(name)}`: {markdown_text(reason)}" for name, reason in refused]
            if refused
            else ["No run failed a check."]
        )
    if groups:  # `summary --hub` with no verified run draws no plot
        lines += [
            "",
            f"![The accuracy difference against dense (pooled over seeds, with its interval) against "
            f"attention layer 0's speed-up at the longest N]({LEADERBOARD_PLOT})",
            "",
            "The plot shows each module at its pooled accuracy difference against the dense runs (bars: its "
            "interval; dashed: the non-inferiority margin) and at the median speed-up of attention layer 0 "
            "at the longest N, on a log axis. The shaded band spans the whole model's speed-up ranges at the "
            "task's length that contain 1, the differences its timing cannot tell from none. A hollow, "
            "crossed point, its name followed by (FAIL), is a module whose runs, or the dense runs it is "
            "compared with, FAIL verification. A module that was not timed, or not compared with dense runs, "
            "is left out.",
        ]
    lines += ["", "## How each column is computed", ""]
    lines += [f"- **{header}**: {meaning}" for header, meaning in columns]
    return "\n".join(lines) + "\n"


def _answer(groups: list[Group]) -> list[str]:
    """The leaderboard's first table: one line per module run against dense, answering whether the module
    keeps the dense model's accuracy and whether it is faster, where modules differ (attention alone at
    long N) and at the task's length, and with what memory. The base model is named once above its rows
    (a table per base model), the task in a row only when the model's rows have several. Empty without
    such a group."""
    compared = [group for group in groups if group.module != DENSE_MODULE]
    if not compared:
        return []
    lines = ["## Which module keeps the dense model's accuracy, and is it faster?", ""]
    for model in dict.fromkeys(group.model for group in compared):
        rows = [group for group in compared if group.model == model]
        tasks = {group.task for group in rows}
        lines += [
            f"Base model: `{_cell(model)}`"
            + (f", on {next(iter(tasks))}." if len(tasks) == 1 else ", on the task of each row."),
            "",
            "| Module | Keeps dense accuracy | Attention layer 0 at the longest N "
            "| Whole model at the task's length | Memory of layer 0 at the longest N |",
            "|---|---|---|---|---|",
        ]
        for group in rows:
            cells = [
                group.name if len(tasks) == 1 else f"{group.name} ({group.task})",
                _keeps_accuracy(group, groups),
                _speed(group, _longest_layer_row),
                _speed(group, task_length_row),
                _memory(group, _longest_layer_row),
            ]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        lines.append("")
    lines += [
        "Keeps dense accuracy: the pooled paired verdict (below) in words; its interval must lie above "
        "minus the margin for a yes. A yes also needs every run it pools, the module's and the dense ones, "
        "to PASS verification (accuracy at or above the majority-class threshold): where the dense runs "
        "FAIL there is no learned accuracy to keep, and a module run that FAILs kept none; the cell then "
        "says no answer, and why. Faster or slower: the median over seeds of dense time ÷ module time, said "
        "only where some seed's range of pairs (fastest and slowest passes) excludes 1; otherwise no "
        "measurable difference. A speed-up says nothing of accuracy: it recommends a module only beside a "
        "yes. Memory: module peak ÷ dense peak.",
        "",
    ]
    return lines


def _keeps_accuracy(group: Group, groups: Sequence[Group]) -> str:
    pooled, _ = pooled_comparison(group)
    if pooled is None or pooled.verdict is None:
        return "not compared with dense runs"
    reason = no_answer(group, groups)
    if reason is not None:
        return reason
    interval = f"{_points(pooled.difference)} points [{_points(pooled.ci_low)}, {_points(pooled.ci_high)}]"
    margin = f"−{100 * pooled.margin:g} point{'' if 100 * pooled.margin == 1 else 's'}"
    return {
        Verdict.NON_INFERIOR: f"yes: {interval}, above {margin}",
        Verdict.INFERIOR: f"no: {interval}, below {margin}",
        Verdict.INCONCLUSIVE: f"not shown: {interval} reaches below {margin}",
    }[pooled.verdict]


def _scaling_rows(group: Group, pick: Callable[[Results], ScalingRow | None]) -> list[ScalingRow]:
    """The scaling row `pick` chooses in each seed that has one."""
    return [row for row in (pick(card.results) for card in group.cards) if row is not None]


def _lengths(rows: list[ScalingRow]) -> str:
    """The rows' N, each once, for a cell: `4096`, or `2048/4096` when seeds differ."""
    return "/".join(str(n) for n in sorted({row.n for row in rows}))


def _speed(group: Group, pick: Callable[[Results], ScalingRow | None]) -> str:
    """The median speed-up over seeds in words: faster, slower, or no measurable difference."""
    rows = _scaling_rows(group, pick)
    if not rows:
        return NOT_TIMED
    lengths = _lengths(rows)
    median = statistics.median(row.speedup for row in rows)
    if all(row.speedup_low <= 1.0 <= row.speedup_high for row in rows):
        return f"no measurable difference ({median:.2f}×, N {lengths})"
    if median >= 1.0:
        return f"{median:.2f}× faster (N {lengths})"
    return f"{1 / median:.2f}× slower (N {lengths})"


def _memory(group: Group, pick: Callable[[Results], ScalingRow | None]) -> str:
    rows = _scaling_rows(group, pick)
    ratios = [row.memory_ratio for row in rows if row.memory_ratio is not None]
    if not rows:
        return NOT_TIMED
    if not ratios:
        return "not measurable"
    return f"{statistics.median(ratios):.2f} of dense (N {_lengths(rows)})"


def _row(group: Group, groups: Sequence[Group]) -> list[str]:
    """The cells of a group's table row, in the order of `COLUMNS`."""
    first = group.cards[0].results
    accuracy = _mean_sd(group.accuracies)
    metric, values = group.official
    quality = f"{metric} {_mean_sd(values)}"
    seconds = [card.results.second_split for card in group.cards]
    if all(second is not None and second.metrics.official for second in seconds):  # MNLI's mismatched
        quality += f"; {seconds[0].split}: {_mean_sd([second.metrics.official.value for second in seconds])}"
    by_seed = ", ".join(f"{card.results.metrics.accuracy:.4f} (seed {card.seed})" for card in group.cards)
    statuses = []
    for status in STATUS_ORDER:
        seeds = [card.seed for card in group.cards if card.results.verification.status == status]
        if seeds:
            statuses.append(f"{status.value}: {_seeds(seeds)}")
    return [
        group.model,
        group.name,
        group.task,
        str(first.training.hyperparameters.steps),
        ", ".join(str(seed) for seed in group.seeds),
        quality,
        accuracy,
        by_seed,
        "; ".join(statuses),
        _verdict(group, groups),
        _median_cell(group, task_length_row, "speedup", "×"),
        _median_cell(group, task_length_row, "memory_ratio", ""),
        _median_cell(group, _longest_layer_row, "speedup", "×"),
        _median_cell(group, _longest_layer_row, "memory_ratio", ""),
        f"{statistics.median(card.results.parameters.compression_factor for card in group.cards):.2f}×",
        ", ".join(f"[seed {card.seed}]({card.folder}/README.md)" for card in group.cards),
    ]


def _mean_sd(values: list[float]) -> str:
    """The mean of the seeds' values ± their sample standard deviation (n − 1), to 4 decimals."""
    if len(values) == 1:
        return f"{values[0]:.4f} (one seed: no spread)"
    return f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}"


def _seeds(seeds: list[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(seed) for seed in seeds)


def _points(share: float) -> str:
    """An accuracy difference in points, signed with a real minus; no sign when it rounds to zero."""
    text = f"{abs(100 * share):.2f}"
    return text if text == "0.00" else ("+" if share > 0 else "−") + text


def _verdict(group: Group, groups: Sequence[Group]) -> str:
    if group.module == DENSE_MODULE:
        return "the dense baseline"
    pooled, left_out = pooled_comparison(group)
    unrecorded = [card.seed for card in group.cards if card.results.comparison is None]
    reasons = [
        f"{_seeds(seeds)} ({reason})"
        for seeds, reason in (
            ([seed for seed in left_out if seed not in unrecorded], "no dense baseline found"),
            (unrecorded, "no comparison recorded"),
        )
        if seeds
    ]
    missing = f"not compared: {'; '.join(reasons)}" if reasons else ""
    if pooled is None:
        return missing
    text = (
        f"{pooled.verdict.value if pooled.verdict else 'no verdict'}: {_points(pooled.difference)} points "
        f"[{_points(pooled.ci_low)}, {_points(pooled.ci_high)}] ({100 * pooled.confidence:g}% interval), "
        f"margin {100 * pooled.margin:g} point{'' if 100 * pooled.margin == 1 else 's'}, "
        f"McNemar p {pooled.mcnemar_p:.2g}, n {pooled.n} "
        f"({_seeds([card.seed for card in group.cards if card.seed not in left_out])})"
    )
    reason = no_answer(group, groups)
    return "; ".join(part for part in (text, reason, missing) if part)


def _longest_layer_row(results: Results) -> ScalingRow | None:
    rows = results.efficiency.layer_scaling
    return rows[-1] if rows else None


def _median_cell(group: Group, pick: Callable[[Results], ScalingRow | None], field: str, unit: str) -> str:
    """The median over seeds of one figure of a scaling row, with the row's N."""
    rows = _scaling_rows(group, pick)
    if not rows:
        return NOT_TIMED
    values = [getattr(row, field) for row in rows if getattr(row, field) is not None]
    lengths = _lengths(rows)
    if not values:
        return f"not measurable (N {lengths})"
    counted = "" if len(values) == len(group.cards) else f", {len(values)} of {len(group.cards)} seeds"
    return f"{statistics.median(values):.2f}{unit} (N {lengths}{counted})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# --- the plot ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderboardPoint:
    """One module's point on leaderboard.png.

    Attributes:
        group: the module's group.
        speedup: attention layer 0's speed-up at the longest N, the median over seeds (the x axis).
        difference, ci_low, ci_high: the pooled accuracy difference against dense and its interval, in
            accuracy (the y axis shows points).
        margin: the comparison's non-inferiority margin, in accuracy (a dashed line at minus it).
        fails: a run of the pooled comparison FAILs verification, the module's or a dense one (see
            [`no_answer`]): drawn hollow, with a cross, and named "(FAIL)".
    """

    group: Group
    speedup: float
    difference: float
    ci_low: float
    ci_high: float
    margin: float
    fails: bool


def leaderboard_points(groups: list[Group]) -> list[LeaderboardPoint]:
    """The points leaderboard.png draws, one per module group timed and compared with dense runs, by
    (model, task) and then as the groups come.

    Example:
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> leaderboard_points(read_cards("cards"))  # a dense run alone: nothing compared with it
        []
    """
    points = []
    for model, task in sorted({(group.model, group.task) for group in groups}):
        for group in groups:
            if (group.model, group.task) != (model, task) or group.module == DENSE_MODULE:
                continue
            layer = [row.speedup for row in _scaling_rows(group, _longest_layer_row)]
            pooled, _ = pooled_comparison(group)
            if not layer or pooled is None:
                continue
            failed_dense, failed_module = _failing_runs(group, groups)
            points.append(
                LeaderboardPoint(
                    group=group,
                    speedup=statistics.median(layer),
                    difference=pooled.difference,
                    ci_low=pooled.ci_low,
                    ci_high=pooled.ci_high,
                    margin=pooled.margin,
                    fails=bool(failed_dense or failed_module),
                )
            )
    return points


def draw_leaderboard(groups: list[Group], path: str | Path, style: int | None = PLOT_STYLE) -> Path:
    """Draws each module's accuracy difference against dense (pooled over seeds, with its interval, in
    points) against attention layer 0's speed-up at the longest N (median over seeds, log axis), one point per
    group, to a PNG. A dashed line marks minus the non-inferiority margin; a shaded band the whole model's
    speed-up ranges at the task's length that contain 1 (no measurable difference there). A point whose
    comparison pools a run that FAILs verification is hollow and crossed, named "(FAIL)", with a legend
    entry (see [`leaderboard_points`]). The same groups give the same bytes (no date in the file, a fixed
    size and order).

    Example:
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> groups = read_cards("cards")
        >>> draw_leaderboard(groups, "a.png").read_bytes() == draw_leaderboard(groups, "b.png").read_bytes()
        True
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display

    path = Path(path)
    with plot_context(style):
        _draw_leaderboard(groups, path)
    return path


def _draw_leaderboard(groups: list[Group], path: Path) -> None:
    """`draw_leaderboard`'s drawing, under the rcParams of its style already in force."""
    from matplotlib import pyplot, ticker
    from matplotlib.lines import Line2D

    figure, axis = pyplot.subplots(figsize=(7, 4.5))
    settings = sorted({(group.model, group.task) for group in groups})
    colors = pyplot.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of = {setting: colors[index % len(colors)] for index, setting in enumerate(settings)}
    band = [
        (row.speedup_low, row.speedup_high)
        for group in groups
        if group.module != DENSE_MODULE
        for row in _scaling_rows(group, task_length_row)
        if row.speedup_low <= 1 <= row.speedup_high
    ]
    margins: set[float] = set()
    labelled: dict[tuple[str, str], None] = {}  # the settings drawn, in the order drawn
    points = leaderboard_points(groups)
    for point in points:
        setting = (point.group.model, point.group.task)
        margins.add(point.margin)
        x, y = point.speedup, 100 * point.difference
        low, high = y - 100 * point.ci_low, 100 * point.ci_high - y
        axis.errorbar(
            [x],
            [y],
            yerr=[[low], [high]],
            fmt="o",
            color=color_of[setting],
            # A run that FAILs: hollow, so that no reader takes the point for a module that kept accuracy.
            markerfacecolor="white" if point.fails else color_of[setting],
            capsize=3,
        )
        if point.fails:
            axis.plot([x], [y], marker="x", color=color_of[setting], markersize=4, linestyle="none")
        labelled[setting] = None
        name = f"{point.group.name} (FAIL)" if point.fails else point.group.name
        axis.annotate(name, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    if band:
        axis.axvspan(
            min(low for low, _ in band),
            max(high for _, high in band),
            color="0.85",
            zorder=0,
            label="whole model at the task's length: no measurable difference",
        )
    axis.axhline(0.0, color="0.6", linewidth=0.8)
    for margin in sorted(margins):
        axis.axhline(-100 * margin, color="0.4", linestyle="--", linewidth=0.8)
    axis.axvline(1.0, color="0.6", linestyle=":", linewidth=0.8)
    axis.set_xscale("log")
    # Speed-ups as read (0.5×, 1×, 2×, 5×, 10×, 20×), not powers of ten.
    axis.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}×"))
    axis.xaxis.set_minor_formatter(ticker.NullFormatter())
    axis.margins(x=0.3, y=0.15)  # room for the module names beside the points
    axis.set(
        xlabel="attention layer 0's speed-up at the longest N (median over seeds; log; dense = 1)",
        ylabel="accuracy − dense, points (pooled; interval)",
        title="accuracy kept against speed where modules differ",
    )
    handles, labels = axis.get_legend_handles_labels()  # the band's
    # Each setting by a filled marker of its colour, whether or not its first point is hollow (FAIL).
    for model, task in labelled:
        handles.append(Line2D([], [], marker="o", color=color_of[(model, task)], linestyle="none"))
        labels.append(f"{model}, {task}")
    if any(point.fails for point in points):
        hollow = Line2D([], [], marker="o", markerfacecolor="white", color="0.3", linestyle="none")
        cross = Line2D([], [], marker="x", markersize=4, color="0.3", linestyle="none")
        handles.append((hollow, cross))
        labels.append("FAIL: a run of the module or of its dense baseline")
    if handles:
        axis.legend(handles, labels, fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def write_summary(cards_dir: str | Path) -> tuple[Path, Path]:
    """Writes the leaderboard of a cards folder: `README.md` and `leaderboard.png` in it (see the module doc).

    Args:
        cards_dir: the cards folder.

    Returns:
        `(README.md, leaderboard.png)`.

    Raises:
        [`AttncardError`]: see [`read_cards`].

    Example:
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> write_summary("cards")
        (PosixPath('cards/README.md'), PosixPath('cards/leaderboard.png'))
    """
    cards_dir = Path(cards_dir)
    groups = read_cards(cards_dir)
    readme = cards_dir / LEADERBOARD_FILE
    readme.write_text(render_leaderboard(groups), encoding="utf-8")
    return readme, draw_leaderboard(groups, cards_dir / LEADERBOARD_PLOT)


__all__ = [
    "CHECKS_COLUMN",
    "COLUMNS",
    "LEADERBOARD_FILE",
    "LEADERBOARD_PLOT",
    "Card",
    "Group",
    "LeaderboardPoint",
    "draw_leaderboard",
    "leaderboard_points",
    "no_answer",
    "pooled_comparison",
    "read_cards",
    "render_leaderboard",
    "task_length_row",
    "write_summary",
]
