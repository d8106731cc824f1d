"""Where the page's rows come from, each run checked before it is shown: [`check_cards`] reads a local cards
folder (a study before it is published), [`check_hub`] an organisation's runs on the Hub, as `attncard
summary --hub` verifies them. Either gives a [`Leaderboard`]: a run that fails a check is among its refused
runs with the reason, never among its rows.

[`Checker`] keeps the page's leaderboard: checked once before the page is served, then again every
`interval` seconds in a thread of its own; a check that cannot be made (the Hub unreachable, stalling or
lying about its listing) keeps the rows of the last one and says why, in one line, beside when it last
checked.
"""

from __future__ import annotations

import datetime
import os
import shutil
import threading
import typing
from collections.abc import Callable
from pathlib import Path

from ..card.groups import read_cards
from ..hub.endpoint import hub_endpoint
from ..record.errors import AttncardError, DownloadError, first_line
from ..record.manifest import RESULTS_FILE, WEIGHTS_SUFFIX
from ..record.results import Results
from ..study.hub_leaderboard import HubSummaryOptions, write_hub_summary
from ..verify.reverify_predictions import reverify_predictions
from .table import Leaderboard, page_rows, plot_points, with_checked

# The checks a local cards copy passes (`attncard verify --predictions`'s), as the rows name them.
LOCAL_CHECKS = "manifest, figures from predictions.csv, card"
PAIRED_CHECK = "paired verdict from both runs' predictions"
DEFAULT_INTERVAL_S = 60 * 60.0  # the Hub again every hour: runs are published a tag at a time


def check_cards(
    cards_dir: str | os.PathLike, *, data_dir: str | os.PathLike | None = None, work_dir: str | os.PathLike
) -> Leaderboard:
    """The leaderboard of a local cards folder, each copy checked as `attncard verify --predictions` checks
    it: its files against its manifest, every quality figure and its paired verdict recomputed from its
    predictions.csv and the task's data, its card and plots rendered again. The copies that pass are copied
    to a new folder under `work_dir`, which the rows are read from, so that a refused copy cannot reach them.

    Args:
        cards_dir: the cards folder, e.g. `cards`.
        data_dir: a folder of GLUE TSV files (default: `GLUE_DIR`, else the recorded Hub dataset).
        work_dir: a folder of this page's own.

    Raises:
        [`DownloadError`]: `cards_dir` is not a folder or holds no cards copy.

    Example:
        >>> from pathlib import Path
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> board = check_cards("cards", data_dir="glue", work_dir="page")
        >>> [row.module for row in board.rows], board.refused, board.rows[0].cards
        (['none'], (), ((0, 'cards/tiny-gpt2-none-sst2/README.md'),))
    """
    cards_dir = Path(cards_dir)
    copies = sorted(path.parent for path in cards_dir.glob(f"*/{RESULTS_FILE}")) if cards_dir.is_dir() else []
    if not copies:
        raise DownloadError(
            f"{cards_dir}: no cards copy (*/{RESULTS_FILE}) in it; pass the folder publish --cards or "
            "attncard sweep --cards writes, e.g. --cards cards"
        )
    verified = _new_folder(Path(work_dir), "cards")
    checks: dict[str, str] = {}
    refused: list[tuple[str, str]] = []
    for copy in copies:
        try:
            check = reverify_predictions(copy, data_dir=data_dir, baselines=[cards_dir])
        except AttncardError as error:
            refused.append((copy.name, first_line(error)))
            continue
        if not check.matches:
            differs = "its figures differ from their recomputation from its predictions.csv"
            refused.append((copy.name, f"{differs}: {check.problems[0]}"))
            continue
        comparison = Results.load(copy).comparison
        compared = comparison is not None and bool(comparison.baselines)
        checks[copy.name] = LOCAL_CHECKS + (f", {PAIRED_CHECK}" if compared else "")
        shutil.copytree(copy, verified / copy.name, ignore=shutil.ignore_patterns(f"*{WEIGHTS_SUFFIX}"))
    groups = read_cards(verified) if checks else []
    board = Leaderboard(
        rows=page_rows(groups, checks, lambda name: f"cards/{name}/README.md"),
        refused=tuple(refused),
        points=plot_points(groups),
        source=f"the cards folder {cards_dir.as_posix()}",
    )
    return with_checked(board, _now())


def check_hub(
    org: str, *, work_dir: str | os.PathLike, **options: typing.Unpack[HubSummaryOptions]
) -> Leaderboard:
    """The leaderboard of every attncard run `org` published on the Hub, each verified as `attncard summary
    --hub` verifies it ([`write_hub_summary`]), into a new folder under `work_dir`. The downloads are cached
    in `work_dir/cache` and the runs verified are remembered in `work_dir/verified.json`, so that the next
    check fetches and recomputes only what changed. Each row links to its card on the Hub at the run tag it
    was verified at.

    Raises:
        [`AttncardError`]: the organisation's runs cannot be listed (see [`write_hub_summary`]).

    Example:
        >>> from attncard.pipeline.publish.push import push_run_folder
        >>> _ = push_run_folder("runs/tiny-gpt2-none-sst2", "loopback-user/tiny-gpt2-none-sst2")  # run-… tag
        >>> board = check_hub("loopback-user", work_dir="page", data_dir="glue")
        >>> [row.module for row in board.rows], board.refused
        (['none'], ())
        >>> board.rows[0].cards
        ((0, 'http://127.0.0.1:.../loopback-user/tiny-gpt2-none-sst2/blob/run-.../README.md'),)
    """
    work_dir = Path(work_dir)
    output = _new_folder(work_dir, "hub")
    summary = write_hub_summary(
        org,
        output,
        **{"cache_dir": work_dir / "cache", "memo": work_dir / "verified.json", **options},
    )
    hub = hub_endpoint(options.get("endpoint"))
    links = {run.folder: f"{hub}/{run.repo_id}/blob/{run.tag}/README.md" for run in summary.runs}
    checks = {run.folder: ", ".join(run.checks) for run in summary.runs}
    groups = read_cards(output) if summary.runs else []
    board = Leaderboard(
        rows=page_rows(groups, checks, lambda name: links[name]),
        refused=tuple((run.repo_id, run.reason) for run in summary.refused),
        points=plot_points(groups),
        source=f"the Hub organisation {org} ({hub})",
    )
    return with_checked(board, _now())


class Checker:
    """The page's leaderboard, checked by `check` now and then again every `interval` seconds.

    The checks after the first run in a thread of their own, so that the page stays responsive; a check of the
    Hub has its own deadline (`total_deadline` of [`check_hub`]'s options). A check that raises keeps the last
    rows, with `problem` saying why; the first check's failure leaves no rows.

    Example:
        >>> from functools import partial
        >>> from pathlib import Path
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> checker = Checker(partial(check_cards, "cards", data_dir="glue", work_dir="page"), "the cards")
        >>> checker.refresh().rows[0].module
        'none'
    """

    def __init__(
        self,
        check: Callable[[], Leaderboard],
        source: str,
        *,
        interval: float | None = None,
    ) -> None:
        self._check = check
        self.interval = interval
        self._lock = threading.Lock()
        self._current = Leaderboard(rows=(), refused=(), points=(), source=source)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def current(self) -> Leaderboard:
        with self._lock:
            return self._current

    def refresh(self) -> Leaderboard:
        """Checks the study again; keeps and returns the new leaderboard, or the last with the reason this one
        failed."""
        try:
            board = self._check()
        except AttncardError as error:
            board = with_checked(self.current, _now(), first_line(error))
        except Exception as error:  # a page that serves for weeks says what went wrong, and serves on
            board = with_checked(
                self.current, _now(), f"an unexpected {type(error).__name__}: {first_line(error)}"
            )
        with self._lock:
            self._current = board
        return board

    def start(self) -> None:
        """Checks again every `interval` seconds, in a daemon thread, until `stop`."""
        if self.interval is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="attncard-space-checks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()


def _new_folder(work_dir: Path, kind: str) -> Path:
    """A new folder `work_dir/<kind>-<n>` for one check; the older ones of that kind are removed (the page
    reads its rows, never the folder, once the check ends)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    older = sorted(work_dir.glob(f"{kind}-*"))
    numbers = [int(path.name.rsplit("-", 1)[1]) for path in older if path.name.rsplit("-", 1)[1].isdigit()]
    number = 1 + max(numbers, default=0)
    for path in older:
        shutil.rmtree(path, ignore_errors=True)
    folder = work_dir / f"{kind}-{number}"
    folder.mkdir()
    return folder


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


__all__ = ["DEFAULT_INTERVAL_S", "Checker", "check_cards", "check_hub"]
