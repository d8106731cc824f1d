"""The card's formats: how a figure or a text read from results.json is printed on the card, each one a Jinja
filter of the card's templates (`render.template_environment`) and used by the sentences built in Python
(`context`).

A published card is rendered again byte for byte by every check, so a format here never changes its output
for a value a published run holds.
"""

from __future__ import annotations


def pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def num(value: float, digits: int = 4) -> str:
    return f"{value:.{digits}f}"


def sci(value: float) -> str:
    return f"{value:.3e}"


def mb(value: float | None) -> str:
    return "not measurable" if value is None else f"{value:.1f}"


def ratio(value: float | None) -> str:
    return "not measurable" if value is None else f"{value:.2f}"


def seconds(row, side: str) -> str:
    """One side's time of a scaling row: its median, then its fastest and slowest pass in brackets."""
    median, fastest, slowest = (getattr(row, f"{side}_seconds{end}") for end in ("", "_min", "_max"))
    return f"{sci(median)} ({sci(fastest)} – {sci(slowest)})"


def speedup(row) -> str:
    """A scaling row's speed-up and its range; "no measurable difference" when the range contains 1.

    Example:
        >>> from types import SimpleNamespace as Row
        >>> speedup(Row(speedup=1.52, speedup_low=1.4, speedup_high=1.61))
        '1.52 (1.40 – 1.61)'
        >>> speedup(Row(speedup=0.93, speedup_low=0.81, speedup_high=1.07))
        'no measurable difference (0.81 – 1.07)'
    """
    figure = "no measurable difference" if row.speedup_low <= 1 <= row.speedup_high else num(row.speedup, 2)
    return f"{figure} ({num(row.speedup_low, 2)} – {num(row.speedup_high, 2)})"


def tensor(spec) -> str:
    return f"{spec.dtype}[{', '.join(map(str, spec.shape))}]"


def capitalize_first(text: str) -> str:
    return text[:1].upper() + text[1:]


# Not errors.markdown_text: a published card is rendered again byte for byte, so its cells keep this table
# (no `~` escaped, a line break made a space) for every run that has one.
_CELL_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "(": "\\(",
        ")": "\\)",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "\n": " ",
        "\r": " ",
        "\t": " ",
    }
)


def cell(text: str) -> str:
    r"""Text read from a data file, as one Markdown table cell that shows it as written: no markup, link,
    HTML or line break of the text takes effect.

    Example:
        >>> print(cell("a | b <i>[x](y)</i>"))
        a \| b &lt;i&gt;\[x\]\(y\)&lt;/i&gt;
    """
    return text.translate(_CELL_ESCAPES)


def distinct_percentages(first: float, second: float) -> tuple[str, str]:
    """Two shares in percent with two decimals, or as many more as it takes to print two different shares
    differently (40,430 QQP rows are 0.0025% apiece); equal shares print alike.

    Example:
        >>> distinct_percentages(0.7647, 0.8260), distinct_percentages(20215 / 40430, 20216 / 40430)
        (('76.47%', '82.60%'), ('50.000%', '50.002%'))
    """
    for digits in range(2, 17):
        texts = f"{100 * first:.{digits}f}%", f"{100 * second:.{digits}f}%"
        if texts[0] != texts[1] or first == second:
            return texts
    return texts


def signed_points(share: float) -> str:
    """An accuracy difference in points, signed with a real minus; no sign when it rounds to zero.

    Example:
        >>> signed_points(-0.0034), signed_points(0.0052), signed_points(-0.00001)
        ('−0.34', '+0.52', '0.00')
    """
    return signed(100 * share, 2)


def p_value(value: float) -> str:
    """A p-value to two significant digits, as a sentence quotes it.

    Example:
        >>> p_value(0.6776), p_value(1.0), p_value(3.1e-07)
        ('0.68', '1', '3.1e-07')
    """
    return f"{value:.2g}"


def signed(value: float, digits: int = 4) -> str:
    """A difference to `digits` decimals, signed with a real minus; no sign when it rounds to zero.

    Example:
        >>> signed(-0.01234), signed(0.5), signed(-0.00001)
        ('−0.0123', '+0.5000', '0.0000')
    """
    text = f"{abs(value):.{digits}f}"
    if float(text) == 0:
        return text
    return ("+" if value > 0 else "−") + text
