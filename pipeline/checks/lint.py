"""`attncard lint DIR`: checks what it is given, a run folder, a cards copy or a cards folder with its
leaderboard ([`lint_folder`]), and says what is wrong, line by line; and the same rules applied to a module's
texts before it trains ([`card_text_problems`]).

- A **run folder** or a **cards copy** (`publish --cards`, `attncard sweep --cards`: the run folder without
  its weights): [`lint_run_folder`] (pipeline/checks/lint_run.py holds its checks: placeholders, files that
  do not parse, table figures not traceable to results.json, missing files, the manifest). A folder whose
  manifest lists weights of which none is there is taken for a cards copy ([`is_cards_copy`]).
- A **cards folder** with its leaderboard (`attncard summary`, see `pipeline.card.leaderboard`):
  [`lint_leaderboard`]: README.md and leaderboard.png must be what the cards copies' results.json files
  render now (each line or table cell that differs is one finding), and each cards copy must pass as above.
- A **module's texts**, before anything trains: [`card_text_problems`] finds what the card's lint would
  refuse in what the module puts in the card (its spec.md through [`markdown_problems`], its attention.py,
  its configuration table and its paper), so that a run stops before it trains rather than at the end.

Example:
    >>> lint_folder("runs/tiny-gpt2-none-sst2")
    ('run folder', [])
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import tempfile
from pathlib import Path

from ...modules.base import AttentionModule
from ..card.plots import PLOT_TILE, PLOT_TILE_RMS_TOLERANCE, plot_difference
from ..record.errors import AttncardError, first_line
from ..record.manifest import MAX_PLOT_BYTES, RESULTS_FILE
from ..record.placeholders import line_placeholders
from .lint_run import Finding, is_cards_copy, lint_run_folder
from .markdown import markdown_problems, split_row


def lint_folder(folder: str | Path) -> tuple[str, list[Finding]]:
    """Checks whatever `attncard lint DIR` is given: a run folder, a cards copy, or a cards folder with its
    leaderboard (a folder without results.json whose subfolders hold cards copies).

    Returns:
        `(kind, findings)`, kind one of `run folder`, `cards copy`, `cards folder`.

    Raises:
        `AttncardError`: `folder` is not a folder, or none of the three.

    Example:
        >>> lint_folder("runs/tiny-gpt2-none-sst2")
        ('run folder', [])
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise AttncardError(f"{folder}: not a folder; give a run folder, a cards copy or a cards folder")
    if (folder / RESULTS_FILE).is_file():
        if is_cards_copy(folder):
            return "cards copy", lint_run_folder(folder, cards_copy=True)
        return "run folder", lint_run_folder(folder)
    if any(folder.glob(f"*/{RESULTS_FILE}")):
        return "cards folder", lint_leaderboard(folder)
    raise AttncardError(
        f"{folder}: has no {RESULTS_FILE}, and no subfolder has one; give a run folder written by publish, a "
        "cards copy of one, or a cards folder (attncard summary)"
    )


# --- a cards folder and its leaderboard ---------------------------------------------------------------------


def lint_leaderboard(cards_dir: str | Path) -> list[Finding]:
    """Checks a cards folder with its leaderboard: every figure of README.md and the plot must be what the
    cards copies' results.json files render now, and every cards copy must pass [`lint_run_folder`] as one.

    The leaderboard is rendered again from the cards (`pipeline.card.leaderboard`) and compared line by line:
    a table row that differs is one finding per cell that differs, naming its column; any other line that
    differs, is missing or is extra is one finding. leaderboard.png must have the bytes the cards draw.

    Args:
        cards_dir: the cards folder, e.g. `cards`.

    Returns:
        The findings, paths relative to `cards_dir` (`README.md`, `<copy>/results.json`), sorted; empty when
        the leaderboard and every copy are clean.

    Raises:
        `AttncardError`: `cards_dir` is not a folder, or holds no cards copy.

    Example:
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> from attncard.pipeline.card.leaderboard import write_summary
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> readme, _ = write_summary("cards")
        >>> lint_leaderboard("cards")
        []
        >>> _ = readme.write_text(readme.read_text().replace("| 10 | 0 |", "| 20 | 0 |"))
        >>> for finding in lint_leaderboard("cards"):
        ...     print(finding)
        README.md:12: column 'Steps' of row 'gpt2, none, sst2' reads '20', the cards give '10'
    """
    # Imported here: the summary imports the statistics of the paired verdict, which lint needs nowhere else.
    from ..card.leaderboard import (
        LEADERBOARD_FILE,
        LEADERBOARD_PLOT,
        draw_leaderboard,
        read_cards,
        render_leaderboard,
    )

    cards_dir = Path(cards_dir)
    if not cards_dir.is_dir():
        raise AttncardError(f"{cards_dir}: not a folder; give a cards folder (attncard summary writes one)")
    copies = sorted(path.parent for path in cards_dir.glob(f"*/{RESULTS_FILE}"))
    if not copies:
        raise AttncardError(
            f"{cards_dir}: no cards copy (*/{RESULTS_FILE}) in it; give a run folder, a cards copy, or a "
            "cards folder"
        )
    findings: list[Finding] = []
    for copy in copies:
        findings += [
            dataclasses.replace(finding, path=f"{copy.name}/{finding.path}")
            for finding in lint_run_folder(copy, cards_copy=True)
        ]
    try:
        groups = read_cards(cards_dir)
        rendered = render_leaderboard(groups)
    except AttncardError as error:  # a copy that does not load, two copies of a seed, seeds that do not pool
        message = f"cannot be rendered again from the cards: {first_line(error)}"
        return sorted([*findings, Finding(LEADERBOARD_FILE, None, message)], key=_finding_order)
    findings += _compare_leaderboard(cards_dir / LEADERBOARD_FILE, rendered)
    plot = cards_dir / LEADERBOARD_PLOT
    with tempfile.TemporaryDirectory(prefix="attncard-leaderboard-") as scratch:
        drawn = draw_leaderboard(groups, Path(scratch) / LEADERBOARD_PLOT).read_bytes()
    redo = f"write it again with `attncard summary {cards_dir}`"
    if not plot.is_file():
        findings.append(Finding(LEADERBOARD_PLOT, None, f"missing; {redo}"))
    elif (problem := _leaderboard_plot_problem(plot, drawn)) is not None:
        findings.append(Finding(LEADERBOARD_PLOT, None, f"{problem}; {redo}"))
    return sorted(findings, key=_finding_order)


def _leaderboard_plot_problem(plot: Path, drawn: bytes) -> str | None:
    """What is wrong with the leaderboard's plot beside the one the cards draw here; None when it is that
    plot: the same bytes, or pixels within `PLOT_TILE_RMS_TOLERANCE` (another matplotlib patch release, as in
    `card_problems`). Only the check is tolerant: `attncard summary` writes the bytes its matplotlib draws."""
    from importlib import metadata

    with plot.open("rb") as handle:
        shipped = handle.read(MAX_PLOT_BYTES + 1)
    if shipped == drawn:
        return None
    difference = plot_difference(shipped, drawn)
    if difference is None:  # no PNG of its size as matplotlib writes it
        return "is not the plot the cards draw"
    if difference.worst_tile_rms <= PLOT_TILE_RMS_TOLERANCE:
        return None
    # The leaderboard records no matplotlib; redrawing it is always right, so the finding stays one.
    mine = metadata.version("matplotlib")
    return (
        f"is not the plot the cards draw with matplotlib {mine} (a {PLOT_TILE}-pixel tile of it is "
        f"{difference.worst_tile_rms:.1f} RMS of 255 from it, the tolerance {PLOT_TILE_RMS_TOLERANCE}; "
        "another matplotlib release may draw other pixels)"
    )


def _finding_order(finding: Finding) -> tuple[str, int]:
    return finding.path, finding.line or 0


def _compare_leaderboard(path: Path, rendered: str) -> list[Finding]:
    """Each difference between the leaderboard file and the one the cards render."""
    from ..card.leaderboard import COLUMNS

    name = path.name
    if not path.is_file():
        return [Finding(name, None, f"missing; write it with `attncard summary {path.parent}`")]
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        return [Finding(name, None, f"not UTF-8 text ({error.reason} at byte {error.start})")]
    if text == rendered:
        return []
    shown, expected = text.splitlines(), rendered.splitlines()
    findings = []
    opcodes = difflib.SequenceMatcher(a=shown, b=expected, autojunk=False).get_opcodes()
    for tag, start, end, expected_start, expected_end in opcodes:
        if tag == "equal":
            continue
        paired = min(end - start, expected_end - expected_start) if tag == "replace" else 0
        for offset in range(paired):
            findings += _line_differences(
                name, start + offset + 1, shown[start + offset], expected[expected_start + offset], COLUMNS
            )
        for number in range(start + paired, end):
            message = f"line {_clip(shown[number])} is not in the leaderboard the cards render"
            findings.append(Finding(name, number + 1, message))
        for line in expected[expected_start + paired : expected_end]:
            message = f"missing line {_clip(line)}, which the cards render here"
            findings.append(Finding(name, start + paired + 1, message))
    if not findings:  # the same lines: the line endings or the end of the file differ
        findings.append(
            Finding(name, None, "differs from the leaderboard the cards render in its line endings")
        )
    return findings


def _line_differences(
    name: str, number: int, shown: str, rendered: str, columns: tuple[tuple[str, str], ...]
) -> list[Finding]:
    """The findings of one line that differs: one per table cell when both are table rows of as many cells."""
    shown_cells, rendered_cells = split_row(shown), split_row(rendered)
    is_row = shown.lstrip().startswith("|") and rendered.lstrip().startswith("|")
    if not is_row or len(shown_cells) != len(rendered_cells) or len(rendered_cells) != len(columns):
        return [Finding(name, number, f"reads {_clip(shown)}, the cards render {_clip(rendered)}")]
    label = ", ".join(rendered_cells[:3])  # model, module, task
    return [
        Finding(
            name, number, f"column '{header}' of row '{label}' reads '{cell}', the cards give '{expected}'"
        )
        for (header, _), cell, expected in zip(columns, shown_cells, rendered_cells, strict=True)
        if cell != expected
    ]


def _clip(line: str, width: int = 80) -> str:
    return repr(line if len(line) <= width else line[: width - 1] + "…")


# --- a module's texts, before training ---------------------------------------------------------------------


def card_text_problems(module: AttentionModule) -> list[str]:
    """What the card's lint would refuse in the texts a module puts in the card,
    found before anything trains: a card that fails its lint is refused at the end of the run, after
    training, with nothing written.

    The card prints, as the module gives them: `spec.md` (Markdown), `attention.py` (in a Python code
    block), the configuration table (each field's name, its default as results.json records it, and its
    help), and the paper's citation and BibTeX. In them the lint refuses ([`line_placeholders`]) the
    marker words `TODO`, `TBD`, `FIXME`, `N/A`, `Pending`, `placeholder`, `lorem`, `coming soon` and `XXX`,
    and unrendered Jinja (`{{`, `{%`), everywhere; the value words `None`, `nan`, `NaN`, `inf`, `Infinity`
    everywhere but in Python code; in `spec.md` also links to files and figures in table cells
    ([`markdown_problems`]). A default must be strict JSON (results.json holds it): a number, a string, a
    bool, or a list or mapping of them; a default of `None` is allowed and shown as "not set", but not one
    inside a list or mapping, which the card would show as `None`.

    Args:
        module: a module whose config class is a dataclass of defaults and whose folder holds `spec.md` and
            `attention.py` (what `attncard.modules.contract_problems` checks first).

    Returns:
        One line per problem, naming the text and what to write instead; empty when the card's lint would
        pass them.

    Example:
        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class SigmoidConfig:
        ...     temperature: float | None = dataclasses.field(
        ...         default=None, metadata={"help": "divides q·kᵀ; None: the layer's own scaling"}
        ...     )
        >>> from attncard.modules import get_module
        >>> sigmoid = dataclasses.replace(get_module("none"), name="sigmoid", config_class=SigmoidConfig)
        >>> card_text_problems(sigmoid)
        ["the help of the config field 'temperature' holds placeholder 'None', which the card's lint refuses
        in the configuration table; say it in words (`not set`, `unset`, `the layer's own`)"]
    """
    problems = []
    for line, message in markdown_problems(module.spec):
        problems.append(
            f"its spec.md, line {line}: {message}; the card prints spec.md as it is, so write it out "
            "(no placeholder, no link to a file, figures in prose)"
        )
    source = (Path(module.folder) / "attention.py").read_text(encoding="utf-8")
    for number, line in enumerate(source.splitlines(), start=1):
        problems += [
            f"its attention.py, line {number}: {message}, which the card's lint refuses in the Python block "
            "that prints the file; remove it (None and nan are allowed there)"
            for message in line_placeholders(line, fence="python")
        ]
    problems += _config_text_problems(module.config_class)
    if module.paper is not None:
        problems += [
            f"its paper's citation holds {message}, which the card's lint refuses; write the citation out"
            for message in line_placeholders(module.paper.citation)
        ]
        problems += [
            f"its paper's BibTeX, line {number}: {message}, which the card's lint refuses; complete the entry"
            for number, line in enumerate(module.paper.bibtex.splitlines(), start=1)
            for message in line_placeholders(line, fence="bibtex")
        ]
    return problems


def _config_text_problems(config_class: type) -> list[str]:
    """[`card_text_problems`] of the configuration table: each field's name, default and help."""
    problems = []
    try:
        config = config_class()
    except Exception as error:  # publish builds the same config before training: say why it cannot
        return [f"its config_class() fails ({type(error).__name__}: {first_line(error)}); fix its defaults"]
    for field in dataclasses.fields(config_class):
        value = getattr(config, field.name)
        try:
            # As publish records it in results.json, which is strict JSON (no NaN, no infinity).
            recorded = json.loads(json.dumps(dataclasses.asdict(config)[field.name], allow_nan=False))
        except (TypeError, ValueError):
            problems.append(
                f"the config field '{field.name}' defaults to {value!r}, which results.json cannot hold "
                "(strict JSON); give a number, a string, a bool, None, or a list or mapping of them"
            )
            continue
        shown = "not set" if recorded is None else str(recorded)  # as the card's template shows it
        problems += [
            f"the config field '{field.name}' defaults to {value!r}, which the card's configuration table "
            f"shows as {shown!r}: {message}, which the card's lint refuses; give a default without it (a "
            "default of None itself is shown as 'not set')"
            for message in line_placeholders(shown)
        ]
        problems += [
            f"the config field named '{field.name}' is {message} in the card's configuration table, which "
            "the card's lint refuses; rename the field"
            for message in line_placeholders(field.name)
        ]
        problems += [
            f"the help of the config field '{field.name}' holds {message}, which the card's lint refuses in "
            "the configuration table; say it in words (`not set`, `unset`, `the layer's own`)"
            for message in line_placeholders(field.metadata["help"])
        ]
    return problems


__all__ = [
    "Finding",
    "card_text_problems",
    "is_cards_copy",
    "line_placeholders",
    "lint_folder",
    "lint_leaderboard",
    "lint_run_folder",
    "markdown_problems",
]
