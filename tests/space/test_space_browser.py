"""The leaderboard page (`attncard space`) in a real browser: headless Chromium under Playwright reads the
page served over a loopback Hub's study, each of its runs checked by `check_hub` before it is shown.

The study, swept and pushed once for this module (about 40 s): the dense `none`, `svd_lowrank` and
`adaptive_span` on two tasks, SST-2 and MRPC, two seeds each, two training steps (most runs FAIL, pushed with
--allow-fail, as a leaderboard shows them), signed with a key the page requires. Then three runs are forged on
the Hub: one's results.json given a better accuracy, committed and tagged as a push tags a run (the tag
agrees, the figures do not); one's predictions.csv edited in place; a dense run's results.json given a task
name that is HTML (its module runs of that seed are refused with it: their paired verdict has no dense run).
The page must show the verified groups only, the refused runs under "Refused" with their reasons, as
text.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from space_page import DESKTOP, PHONE, browser, open_page, row_count, served_page, table_headers, table_rows

from attncard.pipeline.cli import main
from attncard.pipeline.record.manifest import sha256_file
from attncard.pipeline.record.run_names import run_tag
from attncard.pipeline.space.source import Checker, check_hub
from attncard.pipeline.space.table import Leaderboard, with_checked
from conftest import HUB_TOKEN, HUB_USER, quick_scaling, serve, write_sst2_folder
from hub_server import LoopbackHub
from run_folders import forge_predictions_on_hub
from signing_keys import make_key

# The module's fixture trains and pushes a sweep of 12 tiny runs; the page is read by Chromium.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODULES = ("none", "svd_lowrank", "adaptive_span")
TASKS = ("sst2", "mrpc")
SEEDS = (0, 1)
FIGURE_FORGED = f"{HUB_USER}/bert-svd_lowrank-sst2-seed1"  # results.json's accuracy edited, committed, tagged
PREDICTIONS_FORGED = f"{HUB_USER}/bert-svd_lowrank-mrpc-seed1"  # predictions.csv edited in place
HOSTILE_FORGED = f"{HUB_USER}/bert-none-mrpc-seed1"  # results.json's task made HTML, committed, tagged
HOSTILE_HTML = '<img src=x onerror="window.attncardHostile=1">'
FORGED = (FIGURE_FORGED, PREDICTIONS_FORGED, HOSTILE_FORGED)
LOAD_LIMIT_S = 5.0
SPEEDUP_COLUMN = "Speed-up at the task's length"

# A few MRPC rows in GLUE's layout (Microsoft's release: a byte order mark, the quality first); the sentences
# are MRPC's own (train.tsv's first rows).
MRPC_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"
MRPC_ROWS = [
    (
        1,
        "Amrozi accused his brother of deliberately distorting his evidence.",
        "Amrozi accused his brother of distorting his evidence on purpose.",
    ),
    (
        0,
        "Yucaipa owned Dominick's before selling the chain to Safeway in 1998.",
        "Yucaipa bought Dominick's in 1995 for $693 million.",
    ),
    (
        1,
        "They had published an advertisement on the Internet on June 10.",
        "On June 10, the ship's owners had published an advertisement on the Internet.",
    ),
    (
        0,
        "Around 0335 GMT, Tab shares were up 19 cents.",
        "Tab shares jumped 20 cents, or 4.6%, to set a record closing high.",
    ),
]


@dataclass
class Study:
    """What the module's fixture published and what `check_hub` made of it."""

    hub: LoopbackHub
    board: Leaderboard
    checker: Checker
    verified: Path  # the folder of the cards copies `check_hub` verified, the rows' source


def write_mrpc_folder(root: Path, train_repeats: int = 8, dev_repeats: int = 5) -> Path:
    """A small GLUE folder's MRPC (`MRPC/train.tsv`, `MRPC/dev.tsv`), as GLUE ships it."""
    folder = root / "MRPC"
    folder.mkdir(parents=True, exist_ok=True)
    for name, repeats in (("train.tsv", train_repeats), ("dev.tsv", dev_repeats)):
        rows = [
            f"{quality}\t{1000 + 2 * index}\t{1001 + 2 * index}\t{first}\t{second}"
            for index, (quality, first, second) in enumerate(MRPC_ROWS * repeats)
        ]
        (folder / name).write_text("\n".join([MRPC_HEADER, *rows]) + "\n", encoding="utf-8")
    return root


def _retag(hub: LoopbackHub, repo_id: str, results: dict, root: Path, message: str) -> None:
    """Commits `results` as results.json on main and tags it as a push tags a run: the tag agrees with it."""
    forged = root / f"forged-{repo_id.split('/')[1]}.json"
    forged.write_text(json.dumps(results, indent=2), encoding="utf-8")
    api = HfApi(endpoint=hub.endpoint, token=HUB_TOKEN)
    commit = api.create_commit(
        repo_id, [CommitOperationAdd("results.json", str(forged))], commit_message=message
    ).oid
    api.create_tag(repo_id, tag=run_tag(results["started_at"], sha256_file(forged)), revision=commit)


def _forge_figure(hub: LoopbackHub, repo_id: str, root: Path) -> None:
    """A better accuracy in results.json, committed and tagged: only its figures give it away."""
    results = json.loads(hub.read_file(repo_id, "results.json"))
    results["metrics"]["accuracy"] = min(1.0, results["metrics"]["accuracy"] + 0.1)
    _retag(hub, repo_id, results, root, "better accuracy")


def _forge_hostile(hub: LoopbackHub, repo_id: str, root: Path) -> None:
    """A task named in HTML in results.json, committed and tagged: its refusal quotes the name."""
    results = json.loads(hub.read_file(repo_id, "results.json"))
    results["dataset"]["task"] = HOSTILE_HTML
    _retag(hub, repo_id, results, root, "a task of HTML")


@pytest.fixture(scope="module")
def study(tiny_model_dir, tmp_path_factory) -> Iterator[Study]:
    """The twelve runs, pushed to a loopback Hub and signed, three of them forged afterwards, and checked by
    `check_hub` with the signing key required (the `Checker` the page is served over)."""
    root = tmp_path_factory.mktemp("space-browser")
    glue = write_mrpc_folder(write_sst2_folder(root / "glue"))
    private_key, public_key = make_key(root, "signer")
    model = tiny_model_dir("bert")
    matrix = root / "matrix.yaml"
    rows = [
        f"  - {{model: '{model}', module: {module}, task: {task}, steps: 2}}\n"
        for task in TASKS
        for module in MODULES
    ]
    matrix.write_text(f"seeds: [{', '.join(map(str, SEEDS))}]\nruns:\n{''.join(rows)}", encoding="utf-8")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.delenv("GLUE_DIR", raising=False)  # the tiny folders are the data
        server = LoopbackHub(root / "hub", token=HUB_TOKEN, user=HUB_USER)
        for hub in serve(server, root, HUB_TOKEN, monkeypatch):
            argv = [
                *("sweep", str(matrix), "--batch-size", "4", "--data-dir", str(glue)),
                *("--output", str(root / "runs"), "--hub-org", HUB_USER, "--push"),
                *("--hub-endpoint", hub.endpoint, "--sign-key", str(private_key), "--allow-fail"),
            ]
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), quick_scaling():
                assert main(argv) == 0, err.getvalue()[-3000:]
            _forge_figure(hub, FIGURE_FORGED, root)
            forge_predictions_on_hub(hub, PREDICTIONS_FORGED)
            _forge_hostile(hub, HOSTILE_FORGED, root)
            check = partial(
                check_hub,
                HUB_USER,
                work_dir=root / "page",
                endpoint=hub.endpoint,
                data_dir=glue,
                require_key=public_key,
            )
            checker = Checker(check, f"the Hub organisation {HUB_USER}")
            board = checker.refresh()
            [verified] = (root / "page").glob("hub-*")
            yield Study(hub, board, checker, verified)


def _repo_and_tag(endpoint: str, link: str) -> tuple[str, str]:
    """`(repo id, run tag)` of a card's link `{endpoint}/{repo id}/blob/{tag}/README.md`."""
    match = re.fullmatch(re.escape(endpoint) + r"/([^/]+/[^/]+)/blob/([^/]+)/README\.md", link)
    assert match is not None, link
    return match[1], match[2]


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """Headless Chromium for the module (asked for before `study`: no browser, no training)."""
    with browser() as launched:
        yield launched


@pytest.fixture(scope="module")
def page_url(chromium, study: Study) -> Iterator[str]:
    """The page over the study's checker, served on 127.0.0.1 for the module."""
    with served_page(study.checker, title="attncard leaderboard") as url:
        yield url


@contextlib.contextmanager
def opened(chromium, url: str, viewport: dict[str, int] | None = None) -> Iterator[tuple[object, float]]:
    """A tab showing the page's leaderboard, and the seconds from `goto` to the answer table shown."""
    page, seconds = open_page(chromium, url, **({"viewport": viewport} if viewport else {}))
    try:
        yield page, seconds
    finally:
        page.close()


def _eventually(read, expected, timeout_s: float = 10.0):
    """`read()` once it equals `expected`, or its last value after `timeout_s` (the page updates after an
    event's round trip to the server)."""
    deadline = time.monotonic() + timeout_s
    value = read()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        value = read()
    return value


def _show_tab(page, name: str, table_id: str) -> None:
    """Opens a tab; Gradio draws a tab's table once the tab is first shown."""
    page.get_by_role("tab", name=name, exact=True).click()
    page.wait_for_selector(f"#{table_id} [role=grid]", timeout=10_000)


def _choose(page, elem_id: str, option: str) -> None:
    """Picks `option` in a dropdown of the page, as a visitor does: open it, click the option, close it."""
    page.click(f"#{elem_id} input")
    page.get_by_role("option", name=option, exact=True).click()
    page.keyboard.press("Escape")


def _groups(page, table_id: str) -> list[tuple[str, str]]:
    """`(module, task)` of each row a table of the page shows (both tables start with those columns)."""
    return [(cells[0], cells[1]) for cells in table_rows(page, table_id)]


def _first_groups(page, table_id: str, count: int) -> list[tuple[str, str]]:
    return _groups(page, table_id)[:count]


def _column(page, table_id: str, name: str) -> list[str]:
    position = table_headers(page, table_id).index(name)
    return [cells[position] for cells in table_rows(page, table_id)]


def _card_links(page, table_id: str) -> list[list[tuple[str, str]]]:
    """`(text, href)` of the links of each row's Cards cell, row by row (only the rows drawn: a hidden copy
    of the table that Gradio measures widths with holds links too)."""
    return page.eval_on_selector(
        f"#{table_id} [role=grid]",
        """grid => {
            const position = Array.from(grid.querySelectorAll('thead th'))
                .findIndex(cell => cell.innerText.trim() === 'Cards');
            return Array.from(grid.querySelectorAll('.virtual-row')).map(row => Array.from(
                row.querySelectorAll('[role=gridcell]')[position].querySelectorAll('a')
            ).map(link => [link.innerText.trim(), link.getAttribute('href')]));
        }""",
    )


def _repo_id(module: str, task: str, seed: int) -> str:
    return f"{HUB_USER}/bert-{module}-{task}-seed{seed}"


def _group_and_seed(repo_id: str) -> tuple[str, str, int]:
    """`(module, task, seed)` of a run of the study by its repo id."""
    pattern = rf"{HUB_USER}/bert-(.+)-({'|'.join(TASKS)})-seed(\d+)"
    module, task, seed = re.fullmatch(pattern, repo_id).groups()
    return module, task, int(seed)


def _refused_with_its_dense_run() -> list[str]:
    """The runs of a module whose dense run of the same task and seed was forged: their paired verdict
    cannot be recomputed, so they are refused too."""
    return [
        _repo_id(module, task, seed)
        for module in MODULES[1:]
        for task in TASKS
        for seed in SEEDS
        if _repo_id("none", task, seed) in FORGED and _repo_id(module, task, seed) not in FORGED
    ]


def _expected_seeds() -> dict[tuple[str, str], tuple[int, ...]]:
    """The seeds each `(module, task)` group keeps once the forged runs, and those paired with a forged
    dense run, are refused."""
    refused = {*FORGED, *_refused_with_its_dense_run()}
    return {
        (module, task): tuple(seed for seed in SEEDS if _repo_id(module, task, seed) not in refused)
        for module in MODULES
        for task in TASKS
    }


def test_the_page_loads_within_5_s(chromium, study: Study, page_url: str) -> None:
    board = study.board
    with opened(chromium, page_url) as (page, seconds):
        assert seconds < LOAD_LIMIT_S, f"the answer table took {seconds:.2f} s to show"
        runs = sum(len(row.seeds) for row in board.rows)
        status = page.inner_text("#attncard-status")
        source = f"Runs of the Hub organisation {HUB_USER} ({study.hub.endpoint}), last checked"
        found = f"{runs} runs verified in {len(board.rows)} groups ({len(board.rows)} shown)"
        assert status.startswith(source) and f"{found}, {len(board.refused)} refused." in status, status
        # The Hub's address is text: Gradio's Markdown would link a bare address (it once took in a `\`).
        assert page.eval_on_selector_all("#attncard-status a", "links => links.length") == 0
        assert row_count(page, "attncard-answer") == len([row for row in board.rows if row.module != "none"])
    print(f"the page loaded in {seconds:.2f} s")


def test_every_group_shows_exactly_the_verified_groups(chromium, study: Study, page_url: str) -> None:
    board = study.board
    # The checker's groups are the study's, each without its forged seeds, and nothing more.
    expected = {group: seeds for group, seeds in _expected_seeds().items() if seeds}
    assert {(row.module, row.task): row.seeds for row in board.rows} == expected
    with opened(chromium, page_url) as (page, _):
        _show_tab(page, "Groups", "attncard-groups")
        assert row_count(page, "attncard-groups") == len(board.rows)
        shown = _groups(page, "attncard-groups")
        assert sorted(shown) == sorted(expected)
        seeds = dict(zip(shown, _column(page, "attncard-groups", "Seeds"), strict=True))
        assert seeds == {group: ", ".join(map(str, kept)) for group, kept in expected.items()}


def test_filtering_to_mrpc_leaves_the_mrpc_groups(chromium, study: Study, page_url: str) -> None:
    board = study.board
    mrpc = sorted((row.module, row.task) for row in board.rows if row.task == "mrpc")
    assert mrpc and len(mrpc) < len(board.rows)
    with opened(chromium, page_url) as (page, _):
        _choose(page, "attncard-task", "mrpc")
        answer = [group for group in mrpc if group[0] != "none"]
        assert sorted(_eventually(lambda: sorted(_groups(page, "attncard-answer")), answer)) == answer
        assert f"({len(mrpc)} shown)" in page.inner_text("#attncard-status")
        _show_tab(page, "Groups", "attncard-groups")
        assert sorted(_eventually(lambda: sorted(_groups(page, "attncard-groups")), mrpc)) == mrpc
        assert row_count(page, "attncard-groups") == len(mrpc)


def test_sorting_by_the_speed_up_orders_its_column_empty_cells_last(
    chromium, study: Study, page_url: str
) -> None:
    board = study.board
    figures = {(row.module, row.task): row.speedup for row in board.rows}
    timed = [group for group, figure in figures.items() if figure is not None]
    untimed = [group for group, figure in figures.items() if figure is None]
    assert len(timed) >= 2 and untimed  # something to order, and empty cells to put last
    with opened(chromium, page_url) as (page, _):
        _show_tab(page, "Groups", "attncard-groups")
        _choose(page, "attncard-sort", SPEEDUP_COLUMN)
        for order, descending in (("descending", True), ("ascending", False)):
            if order == "ascending":
                page.click("#attncard-order label:has-text('ascending')")
            by_figure = sorted(timed, key=figures.__getitem__, reverse=descending)
            first_groups = partial(_first_groups, page, "attncard-groups", len(timed))
            assert _eventually(first_groups, by_figure) == by_figure, order
            cells = _column(page, "attncard-groups", SPEEDUP_COLUMN)
            numbers = [float(cell) for cell in cells[: len(timed)]]
            assert numbers == sorted(numbers, reverse=descending), (order, cells)
            assert cells[len(timed) :] == [""] * len(untimed), (order, cells)
            assert sorted(_groups(page, "attncard-groups")[len(timed) :]) == sorted(untimed)


def test_a_forged_run_is_only_among_the_refused_runs_with_its_reason(
    chromium, study: Study, page_url: str
) -> None:
    board = study.board
    reasons = dict(board.refused)
    dependents = _refused_with_its_dense_run()
    assert sorted(reasons) == sorted([*FORGED, *dependents])
    assert "contradicts itself" in reasons[FIGURE_FORGED] and "predictions.csv" in reasons[PREDICTIONS_FORGED]
    for repo_id in dependents:
        _, task, seed = _group_and_seed(repo_id)
        dense = _repo_id("none", task, seed).split("/")[1]
        missing = f"its paired verdict names the dense run {dense}, which is not among the runs staged here"
        assert missing in reasons[repo_id], reasons[repo_id]
    with opened(chromium, page_url) as (page, _):
        shown = {}  # each table's text, and its rows' groups and card links
        for tab, table_id in (("Answer", "attncard-answer"), ("Groups", "attncard-groups")):
            _show_tab(page, tab, table_id)
            text = page.inner_text(f"#{table_id} [role=grid]")
            shown[table_id] = text, _groups(page, table_id), _card_links(page, table_id)
        _show_tab(page, "Refused", "attncard-refused")
        assert row_count(page, "attncard-refused") == len(board.refused)
        assert dict((run, reason) for run, reason in table_rows(page, "attncard-refused")) == reasons
        # A Space's page is public: no path of this machine (the checks' work folder) in it.
        assert str(study.verified.parent.parent) not in page.inner_text("body")
    for repo_id in [*FORGED, *dependents]:
        name = repo_id.split("/")[1]
        module, task, seed = _group_and_seed(repo_id)
        for table_id, (text, groups, links) in shown.items():
            assert name not in text, table_id
            for group, cells in zip(groups, links, strict=True):
                assert all(name not in href for _, href in cells), (table_id, cells)
                if group == (module, task):
                    assert f"seed {seed}" not in [words for words, _ in cells], (table_id, cells)


def test_a_rows_link_points_to_its_card_at_its_run_tag(chromium, study: Study, page_url: str) -> None:
    hub = study.hub
    with opened(chromium, page_url) as (page, _):
        _show_tab(page, "Groups", "attncard-groups")
        rows = list(zip(_groups(page, "attncard-groups"), _card_links(page, "attncard-groups"), strict=True))
    checked = 0
    for (module, task), links in rows:
        for text, href in links:
            seed = int(text.removeprefix("seed "))
            name = f"bert-{module}-{task}-seed{seed}"
            repo_id = f"{HUB_USER}/{name}"
            refs = hub.refs(repo_id)
            [tag] = [tag for tag, oid in refs["tags"].items() if oid == refs["branches"]["main"]]
            assert href == f"{hub.endpoint}/{repo_id}/blob/{tag}/README.md"
            # The loopback Hub serves no /blob/ page: the card is read where /blob/ shows it from.
            with urllib.request.urlopen(f"{hub.endpoint}/{repo_id}/resolve/{tag}/README.md") as answer:
                card = answer.read()
            assert card == (study.verified / name / "README.md").read_bytes()
            checked += 1
    assert checked == sum(len(row.cards) for row in study.board.rows)


def test_the_plot_draws_a_point_per_module_group_and_hovers_name_it(
    chromium, study: Study, page_url: str
) -> None:
    points = {(point.module, point.task): point for point in study.board.points}
    assert len(points) == len(study.board.points) >= 2
    with opened(chromium, page_url) as (page, _):
        page.get_by_role("tab", name="Plot", exact=True).click()
        marks = "#attncard-plot svg .mark-symbol.role-mark path"
        page.wait_for_selector(marks, timeout=10_000)
        drawn = page.query_selector_all(marks)
        assert len(drawn) == len(points)
        # What each point says to a screen reader (Vega's aria-label: "field: value; ..."), then a hover of
        # each: two points may sit on one another, so a hover shows one of the points there.
        labelled = {}
        for mark in drawn:
            fields = dict(part.split(": ", 1) for part in mark.get_attribute("aria-label").split("; "))
            labelled[(fields["module"].removesuffix(" (FAIL)"), fields["task"])] = fields
        hovered = {}
        for mark in drawn:
            mark.hover(force=True)  # a 5 px circle: Playwright's hit test may land beside its edge
            page.wait_for_selector("#vg-tooltip-element.visible", timeout=5_000)
            tooltip = page.eval_on_selector("#vg-tooltip-element", TOOLTIP_FIELDS)
            hovered[(tooltip["module"].removesuffix(" (FAIL)"), tooltip["task"])] = tooltip
            page.mouse.move(0, 0)  # the tooltip hides before the next point's shows
            page.wait_for_selector("#vg-tooltip-element.visible", state="detached", timeout=5_000)
    assert sorted(labelled) == sorted(points) and hovered and set(hovered) <= set(points)
    for group, fields in [*labelled.items(), *hovered.items()]:
        assert fields["seeds"] == points[group].seeds
        assert fields["module"].endswith(" (FAIL)") == points[group].fails
        assert fields["speed-up"] == f"{points[group].speedup:.2f}×"


TOOLTIP_FIELDS = """tip => Object.fromEntries(Array.from(tip.querySelectorAll('tr')).map(
    row => [row.querySelector('.key').innerText.trim(), row.querySelector('.value').innerText.trim()]))"""


def test_a_refused_reason_is_shown_as_text(chromium, study: Study, page_url: str) -> None:
    reason = dict(study.board.refused)[HOSTILE_FORGED]
    assert HOSTILE_HTML in reason  # the refusal quotes the forged field
    with opened(chromium, page_url) as (page, _):
        _show_tab(page, "Refused", "attncard-refused")
        assert dict(table_rows(page, "attncard-refused"))[HOSTILE_FORGED] == reason
        assert page.eval_on_selector_all("img", "images => images.map(image => image.outerHTML)") == []
        assert page.evaluate("() => document.querySelectorAll('[onerror]').length") == 0
        assert page.evaluate("() => window.attncardHostile") is None


def test_a_failed_checks_problem_is_shown_as_text(chromium, study: Study) -> None:
    """A check that could not be made keeps the last rows and says why; what a server sent stays text."""
    problem = f"the listing named https://evil.example/x, www.evil.example, a@evil.example and {HOSTILE_HTML}"
    failed = with_checked(study.board, study.board.checked_at, problem)
    checker = Checker(lambda: failed, "a failed check")
    checker.refresh()
    with served_page(checker) as url, opened(chromium, url) as (page, _):
        status = page.inner_text("#attncard-status")
        assert status.endswith(f"the rows of the one before: {problem}"), status
        markup = page.eval_on_selector_all("#attncard-status a, #attncard-status img", "all => all.length")
        assert markup == 0
        assert page.evaluate("() => window.attncardHostile") is None


PAGE_WIDTHS = "() => [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]"


def test_the_page_fits_a_desktop_and_a_phone(chromium, page_url: str, tmp_path: Path) -> None:
    folders = [tmp_path]
    if os.environ.get("ATTNCARD_SCREENSHOTS"):
        folders.append(Path(os.environ["ATTNCARD_SCREENSHOTS"]))
        folders[-1].mkdir(parents=True, exist_ok=True)
    for name, viewport in (("space-desktop.png", DESKTOP), ("space-phone.png", PHONE)):
        with opened(chromium, page_url, viewport) as (page, _):
            shot = page.screenshot(full_page=True)
            for folder in folders:
                (folder / name).write_bytes(shot)
            if viewport is PHONE:
                # The tables scroll inside their own frame; the document itself must not scroll sideways.
                widths = page.evaluate(PAGE_WIDTHS)
                assert max(widths[:2]) <= widths[2], widths
    assert (tmp_path / "space-phone.png").stat().st_size > 0
