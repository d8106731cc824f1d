"""How attncard draws a run's plots and compares a shipped plot with one drawn again: the run's figures
(`write_plots`: the training loss, the scaling, the module's own), the plot style a run records
(`Results.plot_style`) and the drawing it stands for, and the pixel comparison every check of a plot uses (the
card check of [`pipeline.checks.registry`], which a download, `verify --predictions` and `summary --hub` run,
and `lint`'s check of the leaderboard).

Below the card and the leaderboard, which both draw under `plot_context`; matplotlib, numpy and Pillow are
imported inside the functions that use them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...modules import get_module
from ..record.results import PLOT_STYLES, Results

SCALING_PLOT = "scaling.png"
LOSS_PLOT = "training_loss.png"

# How a run's plots are drawn is recorded with it (`Results.plot_style`), and a check draws them so again.
# None, every run published before the field: under whatever rcParams are in force, with matplotlib's own
# text, legend places and path simplification; matplotlib 3.8-3.10 and 3.11 draw those 71-102 worst tile RMS
# apart. PLOT_STYLE (2), every run published since and every copy of cards/ (drawn again so for issue 43):
# `plot_context`, which 3.8.4, 3.9.4, 3.10.9, 3.11.0-3.11.2 draw at most 0.14 apart (bench/plot_tolerance.py,
# docs/downloading.md "Plots"). On cards/ (bench/cards_plots_anywhere.py): under 3.8.4, 3.9.4 and 3.10.9 a
# download's check passes all 30 copies, their 60 plots 0.0 from the ones each draws, the leaderboard 0.0
# (0.14 before issue 44 drew FAIL runs hollow); one step's loss moved by +0.05 and resealed is refused under
# each (6.83).
# Style 2 starts from matplotlib's own defaults (never a user's matplotlibrc or style: `text.hinting: none`
# there moved a plot by 64-88) and sets over them:
PLOT_RC = {
    # Every point drawn: 3.8-3.10 and 3.11 simplify a long line (the per-step loss) to other vertices.
    "path.simplify": False,
    # The font every matplotlib wheel bundles, at a fixed size; its glyphs drawn as outlines (_text_as_paths).
    "font.family": ["sans-serif"],
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 10.0,
    "text.hinting": "no_hinting",  # math text only: other text is drawn from unhinted outlines
    # Images come unsampled, each cell drawn as a rectangle (_text_as_paths): 3.8-3.10 and 3.11 resample
    # an image to the screen's pixels with other roundings at the cells' edges.
    "image.interpolation": "none",
    # The rest as the defaults are, named so that no default another release changes moves a plot.
    "text.antialiased": True,
    "lines.antialiased": True,
    "patch.antialiased": True,
    "figure.dpi": 100.0,
    "savefig.dpi": 100.0,
    "savefig.bbox": None,
    "savefig.facecolor": "white",
    "savefig.transparent": False,
    "axes.formatter.useoffset": True,
    "axes.formatter.use_mathtext": False,
}


# The matplotlib releases each plot style was measured to draw alike (within PLOT_TILE_RMS_TOLERANCE): from
# the first to before the last (3.8.4, 3.9.4, 3.10.9, 3.11.0-3.11.2 for style 2). Between two of them a
# plot that differs is not results.json's, whichever drew it.
PLOT_STYLE_RELEASES = {2: ("3.8", "3.12")}


def draw_alike(style: int | None, release: str | None, other: str) -> bool:
    """Whether matplotlib `release` and `other` draw plots of `style` alike (PLOT_STYLE_RELEASES)."""
    from packaging.version import InvalidVersion, Version

    if style not in PLOT_STYLE_RELEASES or release is None:
        return False
    first, beyond = (Version(v) for v in PLOT_STYLE_RELEASES[style])
    try:
        return all(first <= Version(v) < beyond for v in (release, other))
    except InvalidVersion:
        return False


@contextlib.contextmanager
def plot_context(style: int | None) -> Iterator[None]:
    """The drawing a plot of `style` is made under (see PLOT_STYLE). For style 2: matplotlib's defaults with
    PLOT_RC over them, whatever rcParams are in force, and text measured and drawn as the outlines of its
    glyphs (`_text_as_paths`). For None: the rcParams in force and matplotlib's own text, as before."""
    import matplotlib

    if style is None:
        yield
        return
    if style not in PLOT_STYLES:
        raise ValueError(f"unknown plot style {style!r}; this attncard draws {PLOT_STYLES}")
    defaults = {
        key: value
        for key, value in matplotlib.rcParamsDefault.items()
        if not key.startswith("backend") and key not in ("interactive", "toolbar", "timezone")
    }
    with matplotlib.rc_context(rc={**defaults, **PLOT_RC}), _text_as_paths():
        yield


@contextlib.contextmanager
def _text_as_paths() -> Iterator[None]:
    """While in force, every Agg renderer draws as matplotlib 3.8 to 3.11 all do (style 2):
    - text (but math text) as the font's unhinted glyph outlines side by side, each by its own advance, and
      measured from them: 3.11 bundles FreeType 2.14 and kerns by the font's GPOS table, 3.8-3.10 bundle
      FreeType 2.6.1 and kern by its kern table, so their rasters and extents differ by a fraction of a
      pixel, which moves every label and, through `tight_layout`, the axes (71-108 worst tile RMS);
    - a line of text as high as "lp" (3.11 uses the font's OS/2 ascent and descent where a renderer gives
      none, 3.8-3.10 "lp"'s);
    - an image of interpolation "none" cell by cell, each a rectangle filled without antialiasing."""
    import numpy
    from matplotlib import ft2font
    from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
    from matplotlib.path import Path as Outline
    from matplotlib.transforms import Affine2D

    unhinted = ft2font.LoadFlags.NO_HINTING if hasattr(ft2font, "LoadFlags") else ft2font.LOAD_NO_HINTING

    class PathTextRenderer(RendererAgg):
        def _outline(self, s, prop):
            """The text's glyph outlines side by side, each by its own unhinted advance (no kerning: 3.11
            kerns by the font's GPOS table, 3.8-3.10 by its kern table), at TextToPath.FONT_SCALE; and the
            pen's last position, the text's width there."""
            font = self._text2path._get_font(prop)  # the font's size set to FONT_SCALE points
            verts, codes, pen = [numpy.empty((0, 2))], [], 0.0
            for char in s:
                glyph = font.load_char(ord(char), flags=unhinted)
                glyph_verts, glyph_codes = font.get_path()
                verts.append(numpy.asarray(glyph_verts) + numpy.array([pen, 0.0]))
                codes.extend(glyph_codes)
                pen += glyph.linearHoriAdvance / 65536
            return numpy.concatenate(verts), codes, pen

        def _scale(self, prop):
            return self.points_to_pixels(prop.get_size_in_points()) / self._text2path.FONT_SCALE

        def get_text_width_height_descent(self, s, prop, ismath):
            if ismath:
                return super().get_text_width_height_descent(s, prop, ismath)
            # The height and descent of the outlines, which kerning does not change, as TextToPath measures
            # them; the width of the laid-out glyphs.
            _, height, descent = self._text2path.get_text_width_height_descent(s, prop, ismath)
            to_pixels = self.points_to_pixels(1.0)
            return self._outline(s, prop)[2] * self._scale(prop), height * to_pixels, descent * to_pixels

        def option_scale_image(self):
            return True  # images of interpolation "none" come unsampled, to draw_image below

        def draw_image(self, gc, x, y, im, transform=None):
            if transform is None:
                return self._renderer.draw_image(gc, x, y, im)
            # Each pixel of the image as a rectangle, filled by Agg without antialiasing, so that cells meet:
            # 3.8-3.10 and 3.11 resample an image to the screen's pixels with other roundings at the edges.
            rows, columns = im.shape[:2]
            place = Affine2D().scale(1 / columns, 1 / rows) + transform + Affine2D().translate(x, y)
            gc.set_antialiased(False)
            gc.set_linewidth(0.0)  # filled, not outlined
            for row in range(rows):
                for column in range(columns):
                    cell = Outline.unit_rectangle().transformed(Affine2D().translate(column, row))
                    self.draw_path(gc, cell, place, rgbFace=tuple(im[row, column] / 255))
            return None

        def _get_font_height_metrics(self, prop):
            # 3.11 sizes a line of text by the font's OS/2 ascent and descent where a renderer gives none;
            # 3.8-3.10 by those of "lp". This gives 3.11 the latter (3.8-3.10 never ask).
            _, height, descent = self.get_text_width_height_descent("lp", prop, False)
            return height - descent, descent, 0.0

        def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
            if ismath:
                return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
            # As RendererBase._draw_text_as_path does with TextToPath's outlines; Agg's y grows downwards.
            verts, codes, _ = self._outline(s, prop)
            _, height = self.get_canvas_width_height()
            place = Affine2D().scale(self._scale(prop)).rotate_deg(angle).translate(x, height - y)
            gc.set_linewidth(0.0)
            if codes:
                self.draw_path(gc, Outline(verts, codes), place, rgbFace=gc.get_rgb())
            return None

    own = FigureCanvasAgg.get_renderer

    def get_renderer(canvas, *args, **kwargs):
        renderer = own(canvas, *args, **kwargs)
        if type(renderer) is RendererAgg:
            renderer.__class__ = PathTextRenderer  # the same object, its text drawn otherwise
            vars(renderer).pop("draw_image", None)  # RendererAgg binds its C++ one to the object
        return renderer

    FigureCanvasAgg.get_renderer = get_renderer
    try:
        yield
    finally:
        FigureCanvasAgg.get_renderer = own


PLOT_TILE = 32  # pixels a side of the tiles `plot_difference` measures one by one
# How far (worst tile RMS, 0–255) a shipped plot may be from the one drawn here and still be the same plot.
# Measured with bench/plot_tolerance.py on every plot of cards/ (docs/downloading.md, "Plots"):
# - plot style 2 (runs published now), honest, largest: 0.14 (the leaderboard as drawn before issue 44; now
#   0.0 like every other plot) between
#   the locked 3.11.2 and 3.8.4, 3.9.4, 3.10.9, 3.11.0, 3.11.1; a matplotlibrc changes nothing.
# - style 2, forged, smallest: 1.91, one learned span moved by half a token in spans.png (whole-image RMS
#   0.18); a per-step loss moved by 0.05: 6.8; a logged loss by 0.01: 19.9; a scaling time by 5%: 52.3.
# - the first drawing (runs without plot_style; cards/ until issue 43): 3.11.0 and 3.11.1 draw the locked
#   3.11.2's pixels (only the Software text chunk differs), so do `text.hinting_factor` 1 and 8. Another
#   family does not: 3.8.4, 3.9.4 and 3.10.9 (pixel-identical to each other) land 71-102 from 3.11.2
#   (whole-image RMS 22-39): the legend is placed elsewhere and the per-step loss line is simplified
#   otherwise. Its smallest forgery: 1.94 (the same span).
# 1.0 passes any antialiasing difference of one level in 255 everywhere, is seven times style 2's largest
# honest difference and half the smallest forgery. In the first drawing the two sides overlap between
# families (another run's loss curve: 64.8, the whole-image RMS 29.2), so no pixel measure tells another
# matplotlib's drawing from an edit there: the message names both versions instead (integrity._plot_problem).
PLOT_TILE_RMS_TOLERANCE = 1.0
# Twice the largest whole-image RMS another matplotlib gave (39.3, the leaderboard): beyond it, no release
# explains the difference.
PLOT_RMS_BEYOND_ANY_RELEASE = 80.0
# The chunks matplotlib's Agg writes (IHDR, its Software tEXt, pHYs, the IDATs, IEND), in its order.
_PNG_CHUNKS = re.compile(r"IHDR(tEXt)*(pHYs)?(IDAT)+IEND")


def _written_as_matplotlib_does(png: bytes) -> bool:
    """Whether the PNG holds only the chunks matplotlib writes, and nothing after its end: no text or data
    where no viewer shows it."""
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        return False
    kinds, at = [], 8
    while at + 12 <= len(png):
        length, kind = int.from_bytes(png[at : at + 4], "big"), png[at + 4 : at + 8]
        kinds.append(kind.decode("latin-1"))
        at += 12 + length
    return at == len(png) and _PNG_CHUNKS.fullmatch("".join(kinds)) is not None


@dataclass(frozen=True)
class PlotDifference:
    """How far one PNG's pixels are from another's of the same size, on matplotlib's 0–255 scale.

    Attributes:
        rms: the root mean square of the difference over every pixel and channel (RGBA), as
            `matplotlib.testing.compare.calculate_rms` computes it.
        worst_tile_rms: the same over the PLOT_TILE × PLOT_TILE tile where it is largest: a moved point
            changes a few pixels of a large image, which the whole image's mean dilutes; one tile does not.
    """

    rms: float
    worst_tile_rms: float


def plot_difference(shipped: bytes, drawn: bytes) -> PlotDifference | None:
    """How far the shipped PNG is from the one drawn here, decoded (matplotlib.testing.compare's approach);
    None when it is no PNG of the drawn one's size (no matplotlib release changes a figure's pixel size), or
    holds more than the chunks matplotlib writes.

    The shipped image's size is read from its header before anything is decoded, so a hostile PNG (up to
    MAX_PLOT_BYTES, a decompression bomb) is never decoded beyond the drawn image's pixel count.

    Example:
        >>> from pathlib import Path
        >>> drawn = Path("runs/tiny-gpt2-none-sst2/training_loss.png").read_bytes()
        >>> plot_difference(drawn, drawn)
        PlotDifference(rms=0.0, worst_tile_rms=0.0)
    """
    import io

    import numpy
    from PIL import Image

    expected = Image.open(io.BytesIO(drawn))
    if not _written_as_matplotlib_does(shipped):
        return None
    try:
        actual = Image.open(io.BytesIO(shipped), formats=["PNG"])
        if actual.size != expected.size:
            return None
        # RGBA, not RGB: a pixel made transparent shows the page behind it, not its colour.
        pixels = [numpy.asarray(image.convert("RGBA"), dtype=numpy.float64) for image in (actual, expected)]
    # Pillow reports a wrong CRC, a broken or short stream as OSError (UnidentifiedImageError at open);
    # SyntaxError and EOFError, which its chunk readers raise, too in case one escapes.
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError):
        return None
    squared = ((pixels[0] - pixels[1]) ** 2).mean(axis=2)
    rows, columns = (-(-side // PLOT_TILE) for side in squared.shape)  # the last tiles may be narrower
    edges = (numpy.arange(rows) * PLOT_TILE, numpy.arange(columns) * PLOT_TILE)
    sums = numpy.add.reduceat(numpy.add.reduceat(squared, edges[0], axis=0), edges[1], axis=1)
    counts = numpy.outer(numpy.diff([*edges[0], squared.shape[0]]), numpy.diff([*edges[1], squared.shape[1]]))
    return PlotDifference(float(numpy.sqrt(squared.mean())), float(numpy.sqrt((sums / counts).max())))


def _legend(axis, loc: str | None) -> None:
    """The axis's legend at `loc`; None: `axis.legend()` with no argument, as the first drawing called it."""
    if loc is None:
        axis.legend()
    else:
        axis.legend(loc=loc)


def write_plots(results: Results, run_dir: Path) -> list[dict[str, str]]:
    """Draws the run's figures as PNG files in the run folder; returns `{"file", "title"}` for each.

    The training-loss curve is drawn here, each step's loss with the logged averages over it; the scaling
    figure too, medians with the fastest and slowest pass as error bars, and only when results.json holds
    scaling rows (none for a module that keeps the model's own attention); the
    module's own figures by its `plots`, from its statistics as results.json holds them.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot
    from matplotlib.ticker import NullLocator

    plots = []
    plot_style = results.plot_style
    with plot_context(plot_style):
        plots += _draw_plots(results, run_dir, plot_style, pyplot, NullLocator)
    return plots


def _draw_plots(
    results: Results, run_dir: Path, plot_style: int | None, pyplot, NullLocator
) -> list[dict[str, str]]:
    """`write_plots`' drawing, under the rcParams of `plot_style` already in force."""
    plots = []
    losses = results.training.losses
    if losses:
        figure, axis = pyplot.subplots(figsize=(6, 3.5))
        axis.plot(range(1, len(losses) + 1), losses, color="0.75", linewidth=0.8, label="each step")
        log = results.training.log
        axis.plot([s.step for s in log], [s.loss for s in log], "o-", label="mean since the previous point")
        axis.set(xlabel="optimizer step", ylabel="training loss", title="training loss")
        # Style 2 names the place: "best" is decided otherwise by 3.8-3.10 and 3.11. A loss falls, so the
        # upper right is mostly free. The first drawing calls legend() bare: an explicit loc=None places it
        # otherwise in matplotlib 3.11, and runs already published must be drawn as they were.
        _legend(axis, None if plot_style is None else "upper right")
        figure.tight_layout()
        figure.savefig(run_dir / LOSS_PLOT, dpi=100)
        pyplot.close(figure)
        plots.append({"file": LOSS_PLOT, "title": "Training loss at each step and averaged as logged"})
    scaling = results.efficiency.scaling
    if scaling:
        figure, (time_axis, memory_axis) = pyplot.subplots(1, 2, figsize=(9, 3.5))
        n = [row.n for row in scaling]
        for side, line_format, label in (("module", "o-", results.module.name), ("dense", "s--", "dense")):
            times = [[getattr(row, f"{side}_seconds{e}") for e in ("", "_min", "_max")] for row in scaling]
            medians = [median for median, _, _ in times]
            spread = [[mid - low for mid, low, _ in times], [high - mid for mid, _, high in times]]
            # Error bars from the fastest to the slowest pass.
            time_axis.errorbar(n, medians, yerr=spread, fmt=line_format, capsize=3, label=label)
        time_axis.set(xlabel="sequence length N", ylabel="seconds per pass", title="time", xscale="log")
        measured = [
            row for row in scaling if row.module_peak_mb is not None and row.dense_peak_mb is not None
        ]
        memory_axis.plot(
            [r.n for r in measured], [r.module_peak_mb for r in measured], "o-", label=results.module.name
        )
        memory_axis.plot([r.n for r in measured], [r.dense_peak_mb for r in measured], "s--", label="dense")
        memory_axis.set(xlabel="sequence length N", ylabel="peak MB", title="peak memory", xscale="log")
        for axis in (time_axis, memory_axis):
            # The measured lengths as ticks: a log axis's own (2×10², 3×10², …) name none of them.
            axis.set_xticks(n, [str(length) for length in n])
            axis.xaxis.set_minor_locator(NullLocator())
            # Times and memory grow with N: the upper left is free (style 2; "best" before).
            _legend(axis, None if plot_style is None else "upper left")
        figure.tight_layout()
        figure.savefig(run_dir / SCALING_PLOT, dpi=100)
        pyplot.close(figure)
        title = "Time (median, bars from the fastest to the slowest pass) and peak memory against N"
        plots.append({"file": SCALING_PLOT, "title": title})
    module = get_module(results.module.name)
    if module.measurement.plots is not None:
        plots += module.measurement.plots(results.module.stats, run_dir)
    return plots
