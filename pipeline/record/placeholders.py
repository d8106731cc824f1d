"""What the card's lint refuses in a line of a card: placeholder words and unrendered Jinja (rule 1 of
`attncard.pipeline.checks.lint`). One table, read by the lint on a card and, before anything trains, by the
checks of a module's texts (`attncard.pipeline.checks.lint.card_text_problems`,
`attncard.modules.checks.traced_text_problems`), so the two cannot drift. Standard library only: the
modules' layer reads it, below the stages.
"""

from __future__ import annotations

import re

# Info strings of the fenced code blocks where Python's value words are code.
PYTHON_FENCES = frozenset({"python", "py", "python3", "pycon", "ipython"})
# How Python, numpy and JSON print a missing or broken figure: case-sensitive (the module `none` is a name),
# and code in a Python block.
VALUE_WORDS = ("None", "nan", "NaN", "inf", "Infinity")
# Words that mark unfinished text, in any case, everywhere ("coming soon" with any space between).
MARKER_WORDS = ("TODO", "TBD", "FIXME", "N/A", "Pending", "placeholder", "lorem", "coming soon")
# Marked in uppercase only: "xxx" is a word in some texts.
UPPERCASE_MARKERS = ("XXX",)

_VALUE_WORDS = re.compile(rf"(?<!\w)({'|'.join(VALUE_WORDS)})(?!\w)")
_MARKER_ALTERNATIVES = "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in MARKER_WORDS)
_MARKER_WORDS = re.compile(rf"(?<![\w/])({_MARKER_ALTERNATIVES})(?![\w/])", re.IGNORECASE)
_UPPERCASE_MARKERS = re.compile(rf"(?<!\w)({'|'.join(UPPERCASE_MARKERS)})(?!\w)")
_JINJA = re.compile(r"\{\{|\{%")


def line_placeholders(line: str, fence: str | None = None) -> list[str]:
    """What the lint refuses in one line of a card (rule 1 of the module doc): placeholder words and
    unrendered Jinja, one message each. The one table of these rules: the card's lint and a module's check
    before training ([`attncard.pipeline.checks.lint.card_text_problems`],
    [`attncard.modules.checks.traced_text_problems`]) both read it.

    Args:
        line: the line, as the card holds it.
        fence: the info string of the fenced code block the line is in (lowercased, "" when it has none),
            or None outside code blocks; in a Python block (`PYTHON_FENCES`) `None` and `nan` are code.

    Returns:
        `placeholder 'WORD'` or `unrendered Jinja '{{'` for each occurrence, in the order of the rules.

    Example:
        >>> line_placeholders("| `temperature` | 1.0 | None uses the layer's scaling |")
        ["placeholder 'None'"]
        >>> line_placeholders("    if temperature is None:  # TODO: fuse", fence="python")
        ["placeholder 'TODO'"]
    """
    patterns = [_MARKER_WORDS, _UPPERCASE_MARKERS]
    if fence not in PYTHON_FENCES:
        patterns.append(_VALUE_WORDS)
    messages = [f"placeholder {m.group(0)!r}" for pattern in patterns for m in pattern.finditer(line)]
    return messages + [f"unrendered Jinja {m.group(0)!r}" for m in _JINJA.finditer(line)]


__all__ = ["MARKER_WORDS", "PYTHON_FENCES", "UPPERCASE_MARKERS", "VALUE_WORDS", "line_placeholders"]
