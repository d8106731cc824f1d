"""The Markdown of a card as the lint reads it: its lines with the code block each is in, its tables, its
links; and [`markdown_problems`], what the lint refuses in Markdown the card prints as it is (a module's
`spec.md`). Read by the lint of a run folder ([`pipeline.checks.lint_run`]) and of a module's texts
([`pipeline.checks.lint.card_text_problems`]).

Example:
    >>> lines = ["# Results", "", "| Task | Accuracy |", "|---|---|", "| sst2 | 0.5000 |"]
    >>> text = CardText(lines, None, front_matter_line=1, body_line=1)
    >>> [(heading, headers, rows) for heading, headers, rows in tables(text)]
    [('Results', ['Task', 'Accuracy'], [(5, ['sst2', '0.5000'])])]
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..record.placeholders import line_placeholders

# Table columns that describe rather than measure: their cells may hold any number ("Dropout on 2 of the 4
# layers"). Compared without case, `*` or backticks.
DESCRIPTIVE_HEADERS = frozenset({"meaning", "description", "help", "file", "package", "field"})

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_CELL_SEPARATOR = re.compile(r"(?<!\\)\|")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_WORD_SEPARATORS = re.compile(r"[\s()\[\]{}/–—=×<>]+")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?%?")
_LINK_TEXT = r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]"
_INLINE_LINK = re.compile(_LINK_TEXT + r"\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
_REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_IMAGE = re.compile(r"<img\b[^>]*?\bsrc\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass
class CardText:
    """README.md split into its front matter and body, with the line numbers of both."""

    lines: list[str]  # every line of the file, without line endings; line n is lines[n - 1]
    front_matter: str | None  # the YAML between the `---` lines; None when there is no such block
    front_matter_line: int  # line number of the first YAML line
    body_line: int  # line number of the first body line
    metadata: dict[str, Any] | None = None  # the parsed front matter, once it parsed


def card_lines(card: CardText, front_matter: bool) -> Iterator[tuple[int, str, str | None]]:
    """Yields `(line number, line, fence)` over the body (and the front matter if asked), where `fence` is
    None outside fenced code blocks and the block's lowercased info string ("" if none) inside, fence lines
    included."""
    if front_matter and card.front_matter is not None:
        for number in range(card.front_matter_line, card.body_line):
            yield number, card.lines[number - 1], None
    opening: str | None = None
    fence: str | None = None
    for number in range(card.body_line, len(card.lines) + 1):
        line = card.lines[number - 1]
        match = _FENCE.match(line)
        if opening is None and match:
            opening, fence = match.group(1), match.group(2).lower()
            yield number, line, fence
        elif opening is not None and match and match.group(1).startswith(opening) and not match.group(2):
            yield number, line, fence
            opening = fence = None
        else:
            yield number, line, fence


def tables(card: CardText) -> Iterator[tuple[str, list[str], list[tuple[int, list[str]]]]]:
    """Yields `(heading, header cells, [(line number, cells), ...])` for every table of the card body."""
    lines = list(card_lines(card, front_matter=False))
    heading = ""
    index = 0
    while index < len(lines):
        _, line, fence = lines[index]
        if fence is not None:
            index += 1
            continue
        match = _HEADING.match(line)
        if match:
            heading = match.group(2)
        is_table = (
            line.lstrip().startswith("|")
            and index + 1 < len(lines)
            and lines[index + 1][2] is None
            and _DELIMITER_ROW.match(lines[index + 1][1])
        )
        if not is_table:
            index += 1
            continue
        headers = split_row(line)
        rows = []
        index += 2
        while index < len(lines) and lines[index][2] is None and lines[index][1].lstrip().startswith("|"):
            rows.append((lines[index][0], split_row(lines[index][1])))
            index += 1
        yield heading, headers, rows


def split_row(line: str) -> list[str]:
    """The cells of a table row, split at `|` but not at an escaped `\\|`, stripped."""
    text = line.strip()
    text = text.removeprefix("|")
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return [cell.strip() for cell in _CELL_SEPARATOR.split(text)]


def cell_words(cell: str, recorded: list[str]) -> Iterator[tuple[str, str]]:
    """Yields `("number", word)` and `("unreadable", word)` for the digit-bearing words of a table cell."""
    text = _CODE_SPAN.sub(" ", cell)
    for value in recorded:
        if value in text:
            text = re.sub(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)", " ", text)
    for raw in _WORD_SEPARATORS.split(text):
        word = raw.lstrip("*_\"'").rstrip("*_\"',;:.!?")
        if not any(ch.isdigit() for ch in word):
            continue
        if _NUMBER.fullmatch(word):
            yield "number", word
        elif not any(ch.isalpha() or ch == "_" for ch in word):
            yield "unreadable", word


def link_targets(card: CardText) -> Iterator[tuple[int, str]]:
    """`(line, target)` of every link, reference definition and HTML image of the card body, outside code."""
    for number, line, fence in card_lines(card, front_matter=False):
        if fence is not None:
            continue
        text = _CODE_SPAN.sub(" ", line)
        for pattern in (_INLINE_LINK, _REFERENCE_DEFINITION, _HTML_IMAGE):
            yield from ((number, m.group(1)) for m in pattern.finditer(text))


def local_target(target: str) -> str | None:
    """The file path a link target names in the run folder; None for URLs, anchors and site paths."""
    target = target.strip().removeprefix("<").removesuffix(">")
    if not target or target.startswith(("#", "/")) or _URL_SCHEME.match(target):
        return None
    path = urllib.parse.unquote(re.split(r"[?#]", target, maxsplit=1)[0])
    return path or None


def plain(text: str) -> str:
    """A header or label without its emphasis or code marks (`**Accuracy**` is `Accuracy`)."""
    return text.strip().strip("*`_").strip()


def markdown_problems(text: str) -> list[tuple[int, str]]:
    """What the lint refuses in Markdown the card prints as it is, such as a module's `spec.md`:
    placeholders and unrendered Jinja ([`line_placeholders`], code blocks as the card has them), links and
    images to files (the run folder holds none of the module's), and figures in table cells, which the
    card's lint must find in results.json (a text written before the run cannot know them; a column headed
    by one of `DESCRIPTIVE_HEADERS` may hold any).

    Args:
        text: the Markdown.

    Returns:
        `(line, message)` for each problem, line 1-based in `text`; empty when the card's lint would pass it.

    Example:
        >>> spec = ["sigmoid(q·kᵀ). TODO: causal", "", "| Case | Passes |", "|---|---|", "| decoder | 2 |"]
        >>> for line, message in markdown_problems("\\n".join(spec)):
        ...     print(line, message)
        1 placeholder 'TODO'
        5 figure 2 in table row 'decoder', which the card's lint must find in results.json
    """
    card = CardText(text.split("\n"), None, front_matter_line=1, body_line=1)
    problems = [
        (number, message)
        for number, line, fence in card_lines(card, front_matter=False)
        for message in line_placeholders(line, fence)
    ]
    problems += [
        (number, f"link to the file {target!r}, which is not in the run folder; link a URL instead")
        for number, target in link_targets(card)
        if local_target(target) is not None
    ]
    for _, headers, rows in tables(card):
        descriptive = [plain(header).lower() in DESCRIPTIVE_HEADERS for header in headers]
        for number, cells in rows:
            label = plain(cells[0]) if cells else ""
            for index, cell in enumerate(cells[1:], start=1):
                if index < len(descriptive) and descriptive[index]:
                    continue
                for kind, word in cell_words(cell, []):
                    what = "figure" if kind == "number" else "unreadable figure"
                    where = f"in table row '{label}', which the card's lint must find in results.json"
                    problems.append((number, f"{what} {word} {where}"))
    return sorted(problems, key=lambda problem: problem[0])


__all__ = [
    "DESCRIPTIVE_HEADERS",
    "CardText",
    "card_lines",
    "cell_words",
    "link_targets",
    "local_target",
    "markdown_problems",
    "plain",
    "split_row",
    "tables",
]
