"""The card check of [`pipeline.checks.registry`]: the card, its plots, its `.eval_results/` entry and its
LICENSE must be the ones results.json renders, so that the card cannot show a figure results.json does not
hold. Each is rendered again from results.json and compared: the card line by line, a plot by its bytes or,
drawn by another matplotlib, by its pixels ([`card_problems`]).
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from ..card.eval_results import EVAL_RESULTS_DIR, eval_results_file, render_eval_results
from ..card.model_index import LICENSE_FILE
from ..card.plots import (
    PLOT_RMS_BEYOND_ANY_RELEASE,
    PLOT_TILE,
    PLOT_TILE_RMS_TOLERANCE,
    draw_alike,
    plot_difference,
    write_plots,
)
from ..card.render import render_card, render_license, rendered_card_problems
from ..record.manifest import CARD_FILE, MAX_CARD_BYTES, MAX_PLOT_BYTES
from ..record.results import Results


def card_problems(results: Results, folder: Path) -> list[str]:
    """Every way the run's card and plots differ from the ones results.json renders; empty when equal.

    publish renders the card from results.json before the card itself is in the manifest, so the card is
    rendered again from results.json with the manifest it had then (all files but the card).
    """
    with (folder / CARD_FILE).open("rb") as handle:
        shipped = handle.read(MAX_CARD_BYTES + 1).decode("utf-8", errors="replace")
    if len(shipped) > MAX_CARD_BYTES:
        return [f"{CARD_FILE} is larger than {MAX_CARD_BYTES >> 20} MiB, which no card attncard renders is"]
    # The usage snippet and the command are attncard's, built again from the recorded names; one status line.
    problems = rendered_card_problems(results, shipped)
    if problems:
        return problems
    problems = eval_results_problems(results, folder)
    with tempfile.TemporaryDirectory(prefix="attncard-card-") as scratch:
        plots = write_plots(results, Path(scratch))
        recorded = results.environment.packages.get("matplotlib")
        for plot in plots:
            drawn, shipped_plot = Path(scratch) / plot["file"], folder / plot["file"]
            if not _same_bytes(shipped_plot, drawn.read_bytes()):  # the same bytes: the fast path
                problem = _plot_problem(
                    plot["file"], shipped_plot, drawn.read_bytes(), recorded, results.plot_style
                )
                if problem is not None:
                    problems.append(problem)
    licence = render_license(results)
    shipped_licence = folder / LICENSE_FILE
    if licence is None and shipped_licence.exists():
        problems.append(
            f"{LICENSE_FILE} is there, but results.json names the licence '{results.model.license}'"
        )
    elif licence is not None and not _same_bytes(shipped_licence, licence.encode("utf-8")):
        problems.append(f"{LICENSE_FILE} is not the licence file results.json renders")
    as_rendered = dataclasses.replace(
        results, manifest={name: digest for name, digest in results.manifest.items() if name != CARD_FILE}
    )
    expected, actual = render_card(as_rendered, plots).splitlines(), shipped.splitlines()
    for number, (shown, rendered) in enumerate(zip(actual, expected, strict=False), start=1):
        if shown != rendered:
            problems.append(
                f"{CARD_FILE} line {number} reads {shown[:80]!r}, results.json renders {rendered[:80]!r}"
            )
            break
    else:
        if len(actual) != len(expected):
            problems.append(f"{CARD_FILE} has {len(actual)} lines, results.json renders {len(expected)}")
    return problems


def _same_bytes(path: Path, expected: bytes) -> bool:
    """Whether the file holds exactly `expected`, reading no more of it than that (a shipped file may be
    huge)."""
    if not path.is_file() or path.stat().st_size != len(expected):
        return False
    with path.open("rb") as handle:
        return handle.read(len(expected) + 1) == expected


class OtherMatplotlibProblem(str):
    """A card problem that another matplotlib can explain: a plot differs from the one drawn here beyond
    PLOT_TILE_RMS_TOLERANCE, but results.json names another matplotlib than this one, or none. It is still a
    problem (the plot is not checked), never proof that the plot was edited."""


def _plot_problem(
    name: str, shipped: Path, drawn: bytes, recorded: str | None, style: int | None = None
) -> str | None:
    """What is wrong with the shipped plot `name` that differs in bytes from the `drawn` one; None when it
    shows the same pixels within PLOT_TILE_RMS_TOLERANCE. `recorded` is the matplotlib results.json says drew
    it (None for a run published before attncard recorded it), `style` the plot style it records: where both
    releases draw that style alike (plots.PLOT_STYLE_RELEASES), no release explains a difference."""
    from importlib import metadata

    with shipped.open("rb") as handle:
        difference = plot_difference(handle.read(MAX_PLOT_BYTES + 1), drawn)
    if difference is None:
        return f"{name} is not the plot results.json draws (no PNG of its size as matplotlib writes it)"
    if difference.worst_tile_rms <= PLOT_TILE_RMS_TOLERANCE:
        return None
    mine = metadata.version("matplotlib")
    measured = (
        f"a {PLOT_TILE}-pixel tile of it is {difference.worst_tile_rms:.1f} RMS of 255 from the plot "
        f"matplotlib {mine} draws here (the whole image {difference.rms:.1f}; the tolerance is "
        f"{PLOT_TILE_RMS_TOLERANCE})"
    )
    if recorded == mine or difference.rms > PLOT_RMS_BEYOND_ANY_RELEASE or draw_alike(style, recorded, mine):
        return f"{name} is not the plot results.json draws: {measured}"
    drew, where = f"results.json says matplotlib {recorded} drew it", f"with matplotlib=={recorded}"
    if recorded is None:
        drew = "results.json does not say which matplotlib drew it (published before attncard recorded it)"
        where = "with the matplotlib the run was published with"
    return OtherMatplotlibProblem(
        f"{name} differs from the plot results.json draws: {measured}, and {drew}; another matplotlib "
        "release draws other pixels, so this one cannot tell whether the plot is results.json's: check it "
        f"{where}"
    )


def eval_results_problems(results: Results, folder: Path) -> list[str]:
    """Every way the run's `.eval_results/` differs from the one entry results.json renders (its accuracy is
    results.json's); empty when equal."""
    expected = eval_results_file(results)
    listed = sorted(name for name in results.manifest if name.startswith(f"{EVAL_RESULTS_DIR}/"))
    problems = [f"{name} is not the run's entry {expected}" for name in listed if name != expected]
    path = folder / expected
    if expected in listed and not _same_bytes(path, render_eval_results(results).encode("utf-8")):
        problems.append(
            f"{expected} is not the entry results.json renders (accuracy {results.metrics.accuracy})"
        )
    return problems


__all__ = ["OtherMatplotlibProblem", "card_problems", "eval_results_problems"]
