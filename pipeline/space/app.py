"""The leaderboard page, a Gradio app over a [`Checker`]'s leaderboard: what a Hub Space of attncard runs
serves, and `attncard space --serve` on this machine.

The page, top to bottom: when the runs were last checked and what was found; filters by task, model and
module, a search and a sort; then tabs: the answer (which module keeps dense accuracy, and how much faster
or leaner it is), every group (the official GLUE metric and every figure, each row's checks and links to its
cards), the plot (accuracy difference against speed-up, a hover naming module, task and seeds), and the
refused runs with their reasons. Every cell is shown as text but the links, which attncard writes itself:
a reason may quote what a hostile server sent.

The page asks the checker for its leaderboard when it loads and every `POLL_S` seconds; the checks
themselves run on the checker's schedule, never per visitor.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ..card.leaderboard import CHECKS_COLUMN
from ..card.leaderboard import COLUMNS as README_COLUMNS
from ..record.errors import markdown_text
from .source import Checker
from .table import ANSWER_COLUMNS, COLUMNS, NUMBER_COLUMNS, Leaderboard, answer_rows, select_rows, table

POLL_S = 60.0  # how often an open page asks for the checker's latest leaderboard
SORT_DEFAULT = "Layer speed-up at the longest N"
# The plot: speed-ups on a log scale, as leaderboard.png draws them (Gradio's plots have no log axis: the x
# value is its base-2 logarithm, 0 the dense model's speed, and a hover names the speed-up itself).
PLOT_X = "log₂ speed-up of layer 0 (0: as fast as dense; 1: 2×)"
PLOT_Y = "accuracy − dense (points)"
PLOT_NOTE = (
    "Each point is a module against the dense runs of its model and task: the accuracy difference pooled "
    "over seeds (up), against attention layer 0's speed-up at the longest N (right; log₂, so 1 is twice as "
    "fast, 4.6 is 25×), as leaderboard.png draws them. A hover names the module, task, seeds, speed-up and "
    "interval; (FAIL) marks a module whose runs, or the dense runs it is compared with, FAIL verification."
)
PLOT_TOOLTIP = ("module", "task", "model", "seeds", "speed-up", "interval (points)")
# A page fits a phone: the tables scroll sideways inside their frame, the filters stack.
CSS = """
#attncard-leaderboard .table-wrap { overflow-x: auto; }
@media (max-width: 640px) { #attncard-filters { flex-direction: column; } }
"""
# The meaning of the page's columns: those of the README's table, and of the page's own.
MEANINGS = {
    **dict(README_COLUMNS),
    CHECKS_COLUMN[0]: CHECKS_COLUMN[1],
    "Accuracy − dense (points)": "the pooled accuracy difference against the dense runs (module − dense), in "
    "accuracy points; its interval and verdict are in Keeps dense accuracy.",
    "Speed-up at the task's length": dict(README_COLUMNS)["Speed-up at the task's length"],
}


def build_page(checker: Checker, *, title: str):
    """The Gradio page over `checker`'s leaderboard (see the module doc); not yet served.

    Example:
        >>> from functools import partial
        >>> from pathlib import Path
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> from attncard.pipeline.space.source import check_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> checker = Checker(partial(check_cards, "cards", data_dir="glue", work_dir="page"), "the cards")
        >>> page = build_page(checker, title="A study")
        >>> type(page).__name__
        'Blocks'
    """
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # nothing leaves the machine but the page
    import gradio as gr
    import pandas

    def shown(tasks, models, modules, search, sort_by, order):
        board = checker.current
        rows = select_rows(
            board.rows,
            tasks=tasks or (),
            models=models or (),
            modules=modules or (),
            search=search or "",
            sort_by=sort_by or None,
            descending=order != "ascending",
        )
        answer = answer_rows(rows)
        kept = {(row.model, row.module, row.task) for row in rows}
        points = [point for point in board.points if (point.model, point.module, point.task) in kept]
        plot = pandas.DataFrame(
            [
                {
                    PLOT_X: round(math.log2(point.speedup), 3),
                    PLOT_Y: round(point.difference, 2),
                    "module": point.module + (" (FAIL)" if point.fails else ""),
                    "task": point.task,
                    "model": point.model,
                    "seeds": point.seeds,
                    "speed-up": f"{point.speedup:.2f}×",
                    "interval (points)": f"[{point.ci_low:.2f}, {point.ci_high:.2f}]",
                }
                for point in points
            ],
            columns=[PLOT_X, PLOT_Y, *PLOT_TOOLTIP],
        )
        choices = _choices(board)
        return (
            _status(board, len(rows)),
            gr.update(choices=choices["tasks"]),
            gr.update(choices=choices["models"]),
            gr.update(choices=choices["modules"]),
            pandas.DataFrame(table(answer, ANSWER_COLUMNS), columns=list(ANSWER_COLUMNS)),
            pandas.DataFrame(table(rows, COLUMNS), columns=list(COLUMNS)),
            plot,
            pandas.DataFrame(list(board.refused), columns=["Run", "Reason"]),
        )

    with gr.Blocks(title=title, analytics_enabled=False, elem_id="attncard-leaderboard") as page:
        gr.Markdown(f"# {_page_text(title)}")
        status = gr.Markdown(elem_id="attncard-status")
        with gr.Row(elem_id="attncard-filters"):
            tasks = gr.Dropdown(label="Task", multiselect=True, elem_id="attncard-task")
            models = gr.Dropdown(label="Model", multiselect=True, elem_id="attncard-model")
            modules = gr.Dropdown(label="Module", multiselect=True, elem_id="attncard-module")
        with gr.Row():
            search = gr.Textbox(label="Search", placeholder="any words of a row", elem_id="attncard-search")
            sort_by = gr.Dropdown(
                label="Sort by", choices=list(COLUMNS), value=SORT_DEFAULT, elem_id="attncard-sort"
            )
            order = gr.Radio(
                ["descending", "ascending"], value="descending", label="Order", elem_id="attncard-order"
            )
        with gr.Tabs():
            with gr.Tab("Answer", elem_id="attncard-answer-tab"):
                gr.Markdown(
                    "Which module keeps the dense model's accuracy, and is it faster? A yes needs the pooled "
                    "paired verdict's interval above minus the margin and every run it pools to PASS."
                )
                answer = _table(gr, ANSWER_COLUMNS, "attncard-answer")
            with gr.Tab("Groups", elem_id="attncard-groups-tab"):
                groups = _table(gr, COLUMNS, "attncard-groups")
            with gr.Tab("Plot", elem_id="attncard-plot-tab"):
                plot = gr.ScatterPlot(
                    x=PLOT_X,
                    y=PLOT_Y,
                    color="task",
                    tooltip=list(PLOT_TOOLTIP),
                    title="accuracy kept against speed where modules differ",
                    elem_id="attncard-plot",
                )
                gr.Markdown(PLOT_NOTE)
            with gr.Tab("Refused", elem_id="attncard-refused-tab"):
                refused = _table(gr, ["Run", "Reason"], "attncard-refused")
        with gr.Accordion("How each column is computed", open=False):
            gr.Markdown("\n".join(f"- **{name}**: {meaning}" for name, meaning in MEANINGS.items()))
        inputs = [tasks, models, modules, search, sort_by, order]
        outputs = [status, tasks, models, modules, answer, groups, plot, refused]
        page.load(shown, inputs, outputs)
        for control in inputs:
            control.change(shown, inputs, outputs)
        gr.Timer(POLL_S).tick(shown, inputs, outputs)
    return page


def serve(
    checker: Checker,
    *,
    title: str,
    host: str = "127.0.0.1",
    port: int = 7860,
    cards_dir: str | os.PathLike | None = None,
):
    """The page as a web server on `host:port` (uvicorn's `Server`; `.run()` serves until stopped). With
    `cards_dir`, the cards of a local cards folder are served under `/cards/<folder>/` (their README.md as
    text, their PNG plots), where the rows link.

    Example:
        >>> from functools import partial
        >>> from pathlib import Path
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> from attncard.pipeline.space.source import check_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> checker = Checker(partial(check_cards, "cards", data_dir="glue", work_dir="page"), "the cards")
        >>> server = serve(checker, title="A study", port=0, cards_dir="cards")
        >>> server.config.host
        '127.0.0.1'
    """
    import fastapi
    import gradio as gr
    import uvicorn
    from fastapi.responses import FileResponse, PlainTextResponse

    app = fastapi.FastAPI()
    if cards_dir is not None:
        cards = Path(cards_dir).resolve()

        @app.get("/cards/{folder}/{name}")
        def card_file(folder: str, name: str):
            # Only a card or a plot of a row on the page: never another file, never a path out of the folder.
            served = {link.split("/")[1] for row in checker.current.rows for _, link in row.cards}
            path = cards / folder / name
            card_or_plot = name == "README.md" or name.endswith(".png")
            if folder not in served or not card_or_plot or not path.is_file():
                raise fastapi.HTTPException(status_code=404, detail="no such card")
            if name == "README.md":
                return PlainTextResponse(path.read_text(encoding="utf-8"))
            return FileResponse(path, media_type="image/png")

    page = build_page(checker, title=title)
    app = gr.mount_gradio_app(app, page, path="/", css=CSS, ssr_mode=False, footer_links=[])
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))


def _status(board: Leaderboard, shown: int) -> str:
    """The line above the tables: where the runs came from, when they were last checked, what was found."""
    if not board.checked_at:
        return f"Checking the runs of {_page_text(board.source)}…" + (
            f" The check failed: {_page_text(board.problem)}" if board.problem else ""
        )
    if not board.rows and not board.refused and not board.problem:
        source = markdown_text(board.source)
        return f"No attncard run of {source} was found (last checked {board.checked_at})."
    runs = sum(len(row.seeds) for row in board.rows)
    groups = len(board.rows)
    line = (
        f"Runs of {_page_text(board.source)}, last checked {board.checked_at}: {runs} run"
        f"{'s' if runs != 1 else ''} verified in {groups} group{'s' if groups != 1 else ''} ({shown} shown), "
        f"{len(board.refused)} refused."
    )
    if board.problem:
        problem = _page_text(board.problem)
        line += f" The last check failed, so these are the rows of the one before: {problem}"
    return line


def _page_text(text: str) -> str:
    """Text from a run, a server or the command line, for the page's Markdown: escaped as `markdown_text`
    escapes it, and no bare address in it made a link. The page's Markdown links `http://…`, `www.…` and
    e-mail addresses by themselves (GFM's autolinks), escapes or not: the status line showed the Hub's
    address as a link to `http://…\\`, and a check's problem could carry a link from a server."""
    return markdown_text(text).replace("://", "\\://").replace("www.", "www\\.").replace("@", "\\@")


def _choices(board: Leaderboard) -> dict[str, list[str]]:
    return {
        "tasks": sorted({row.task for row in board.rows}),
        "models": sorted({row.model for row in board.rows}),
        "modules": sorted({row.module for row in board.rows}),
    }


def _table(gr, columns, elem_id: str):
    """A read-only table of the page with these columns, each cell text but the Cards links."""
    return gr.Dataframe(
        headers=list(columns),
        datatype=[_kind(name) for name in columns],
        interactive=False,
        wrap=True,
        elem_id=elem_id,
    )


def _kind(column: str) -> str:
    if column == "Cards":
        return "markdown"  # links attncard writes: repository names checked, run tags of one pattern
    return "number" if column in NUMBER_COLUMNS else "str"


__all__ = ["POLL_S", "build_page", "serve"]
