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

The cards are read and grouped in `groups`; the plot is drawn in `leaderboard_plot`; the tables are here.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..record.comparison import Verdict
from ..record.errors import markdown_text
from ..record.manifest import RESULTS_FILE
from ..record.results import Results, ScalingRow, Status
from ..scoring.paired import DENSE_MODULE
from .groups import (
    Group,
    longest_layer_row,
    named_seeds,
    no_answer,
    pooled_comparison,
    read_cards,
    scaling_rows,
    task_length_row,
)
from .leaderboard_plot import draw_leaderboard

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
        cells = group_cells(group, groups)
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
                keeps_accuracy(group, groups),
                speed_words(group, longest_layer_row),
                speed_words(group, task_length_row),
                memory_words(group, longest_layer_row),
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


def keeps_accuracy(group: Group, groups: Sequence[Group]) -> str:
    """Whether the module keeps the dense model's accuracy, in words: the pooled paired verdict, or why
    there is no answer (the cell "Keeps dense accuracy" of the leaderboard's first table)."""
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


def _lengths(rows: list[ScalingRow]) -> str:
    """The rows' N, each once, for a cell: `4096`, or `2048/4096` when seeds differ."""
    return "/".join(str(n) for n in sorted({row.n for row in rows}))


def speed_words(group: Group, pick: Callable[[Results], ScalingRow | None]) -> str:
    """The median speed-up over seeds in words: faster, slower, or no measurable difference."""
    rows = scaling_rows(group, pick)
    if not rows:
        return NOT_TIMED
    lengths = _lengths(rows)
    median = statistics.median(row.speedup for row in rows)
    if all(row.speedup_low <= 1.0 <= row.speedup_high for row in rows):
        return f"no measurable difference ({median:.2f}×, N {lengths})"
    if median >= 1.0:
        return f"{median:.2f}× faster (N {lengths})"
    return f"{1 / median:.2f}× slower (N {lengths})"


def memory_words(group: Group, pick: Callable[[Results], ScalingRow | None]) -> str:
    """The median memory ratio over seeds in words: `0.52 of dense (N 4096)`."""
    rows = scaling_rows(group, pick)
    ratios = [row.memory_ratio for row in rows if row.memory_ratio is not None]
    if not rows:
        return NOT_TIMED
    if not ratios:
        return "not measurable"
    return f"{statistics.median(ratios):.2f} of dense (N {_lengths(rows)})"


def group_cells(group: Group, groups: Sequence[Group]) -> list[str]:
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
            statuses.append(f"{status.value}: {named_seeds(seeds)}")
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
        _median_cell(group, longest_layer_row, "speedup", "×"),
        _median_cell(group, longest_layer_row, "memory_ratio", ""),
        f"{statistics.median(card.results.parameters.compression_factor for card in group.cards):.2f}×",
        ", ".join(f"[seed {card.seed}]({card.folder}/README.md)" for card in group.cards),
    ]


def _mean_sd(values: list[float]) -> str:
    """The mean of the seeds' values ± their sample standard deviation (n − 1), to 4 decimals."""
    if len(values) == 1:
        return f"{values[0]:.4f} (one seed: no spread)"
    return f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}"


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
        f"{named_seeds(seeds)} ({reason})"
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
        f"({named_seeds([card.seed for card in group.cards if card.seed not in left_out])})"
    )
    reason = no_answer(group, groups)
    return "; ".join(part for part in (text, reason, missing) if part)


def _median_cell(group: Group, pick: Callable[[Results], ScalingRow | None], field: str, unit: str) -> str:
    """The median over seeds of one figure of a scaling row, with the row's N."""
    rows = scaling_rows(group, pick)
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
    "group_cells",
    "keeps_accuracy",
    "memory_words",
    "render_leaderboard",
    "speed_words",
    "write_summary",
]
