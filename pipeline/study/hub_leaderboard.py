"""`attncard summary --hub ORG`: the leaderboard of every attncard run an organisation published, read from
the Hub, every row verified.

[`write_hub_summary`] lists the organisation's models tagged `attncard` (`HfApi.list_models(author=ORG,
filter="attncard")`), and for each:

1. takes the run tag (`run-<started_at>-<results.json sha256[:32]>`, [`pipeline.publish.push.push_tag`]) that
names
   the commit `main` is at: a `main` no run tag names changed after its push;
2. fetches that commit without its weights ([`pipeline.hub.fetch.fetch_run`] with `without_weights`: the same
   caps, checks and per-endpoint cache as `attncard download`), and runs the checks of
   [`pipeline.checks.registry`] with the profile [`pipeline.checks.registry.SUMMARY_HUB`] up to the figures
   from predictions: results.json against the tag, field by field and against its own counts, every file
   against the manifest, only files a run holds, a card rendered for this repository, and predictions.csv read
   line by line;
3. copies it, a cards copy of the run, to `OUTPUT/<name>/`, then runs the rest of those checks on the copy:
   every quality figure recomputed from its predictions.csv and the recorded task's data, and the paired
   verdict from its predictions.csv and its dense baseline's, found among the other copies; the card, plots,
   `.eval_results/` entry and LICENSE against their rendering again (refused in a download's words); and its
   signature, verified when a signer or key is required.

Runs are fetched a few at once (`FETCHING_RUNS` processes), and the whole command has one deadline
(`total_deadline`, default `DEFAULT_SUMMARY_DEADLINE_S`) besides each run's: a run not fetched and checked by
then is listed as not reached within the deadline, so that a thousand trickling repositories cannot hold the
command for a thousand downloads' deadlines.

A run that fails a check is removed from `OUTPUT/` and listed below the table with the reason; the others
make the leaderboard, `OUTPUT/README.md` and `OUTPUT/leaderboard.png` as `attncard summary` writes them
([`pipeline.card.leaderboard`]), with one more column naming the checks each row passed. Every byte from the
Hub is treated as hostile: nothing in a repository is run or loaded as code, no weights are fetched, and the
token goes to the endpoint only. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import multiprocessing
import os
import re
import shutil
import time
import typing
from dataclasses import dataclass
from pathlib import Path

import httpx2
from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError, HFValidationError
from huggingface_hub.utils import validate_repo_id

from ..card.groups import read_cards
from ..card.leaderboard import LEADERBOARD_FILE, LEADERBOARD_PLOT, render_leaderboard
from ..card.leaderboard_plot import draw_leaderboard
from ..checks.registry import SUMMARY_HUB, CheckedRun, run_checks
from ..hub.endpoint import hub_endpoint, redacted
from ..hub.fetch import HubOptions, check_options, fetch_run, hub_options
from ..hub.http import DEFAULT_DEADLINE_S, DEFAULT_TIMEOUT_S, Deadline, hub_client_timeout
from ..hub.signing import SignerOptions, check_signer_identity, key_fingerprint, signer_options
from ..record.environment import git_commit
from ..record.errors import (
    AttncardError,
    DownloadError,
    HubDeadlineError,
    HubUnreachableError,
    IntegrityError,
    first_line,
)
from ..record.manifest import RESULTS_FILE, SIGNATURE_FILE, WEIGHTS_SUFFIX
from ..record.run_names import RUN_TAG_RE
from ..record.text import SHA_PREFIX

HUB_TAG = "attncard"  # every card attncard renders carries it (pipeline.card.render)
MAX_LISTED_RUNS = 1000  # more models than any study publishes: a longer listing is refused, not followed
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
DEFAULT_SUMMARY_DEADLINE_S = 2 * 60 * 60.0  # the whole command: a study of hundreds of runs, at a fair pace
# Runs fetched at once, each in a process of its own: huggingface_hub's calls block, and its shared client
# (with the timeouts and deadline `hub.http.hub_client_timeout` gives it) is one per process.
FETCHING_RUNS = 4
# The check of pipeline.checks.registry.CHECKS that needs every run's copy: a paired verdict reads its dense
# run's.
FIGURES_FROM_PREDICTIONS = "figures from predictions"
_STOP_GRACE_S = 2.0  # how long past the deadline a fetch may take to give up before its process is stopped


class HubSummaryOptions(HubOptions, SignerOptions, total=False):
    """What `attncard summary --hub` reads and what each run must be: the keys of [`HubOptions`] (endpoint,
    token, cache_dir, timeout, deadline: here the deadline of each run's download) and of [`SignerOptions`]
    (require_signer, signer_issuer, require_key), and:

    Keys:
        data_dir: a folder of GLUE TSV files for the runs evaluated on such files (default: `GLUE_DIR`, else
            the recorded Hub dataset at its recorded commit).
        total_deadline: seconds the whole leaderboard may take, listing, fetches and checks together
            (default: `DEFAULT_SUMMARY_DEADLINE_S`); a run not fetched and checked by then is refused as not
            reached within the deadline.
        memo: a JSON file of the runs verified before, which this writes (a file of this machine's, never of
            the Hub): a run whose run tag, the run tags of the dense runs its paired verdict names, and
            checking settings (attncard's version, data_dir, the signer or key required) are those of a
            verified run there is fetched (from the cache) and checked against its tag and manifest again, but
            its figures are not recomputed: the tag names its results.json and the manifest every file, so
            nothing it shows changed. A leaderboard checked on a schedule (`attncard space ORG`) re-checks
            only what changed: a changed dense run, itself and the runs compared with it.

    Example:
        >>> options: HubSummaryOptions = {"require_key": "signing-key.pub", "total_deadline": 600}
    """

    data_dir: str | os.PathLike | None
    total_deadline: float | None
    memo: str | os.PathLike | None


@dataclass(frozen=True)
class RefusedRun:
    """A listed run left out of the leaderboard: its repository and the first check it failed."""

    repo_id: str
    reason: str


@dataclass(frozen=True)
class HubSummary:
    """What [`write_hub_summary`] wrote and left out.

    Attributes:
        readme: `OUTPUT/README.md`, the leaderboard.
        plot: `OUTPUT/leaderboard.png`, or None when no run passed (nothing to plot).
        verified: the repositories of the runs in the table, by name.
        refused: the runs left out, with the reason, by name.
        runs: the runs in the table, each with the tag it was verified at and the checks it passed.
    """

    readme: Path
    plot: Path | None
    verified: list[str]
    refused: list[RefusedRun]
    runs: list[VerifiedRun] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class VerifiedRun:
    """A run of the leaderboard's table: its repository, its cards copy's folder in the output, the run tag it
    was fetched and verified at, and the checks it passed."""

    repo_id: str
    folder: str
    tag: str
    checks: tuple[str, ...]


@dataclass
class _Staged:
    """A run fetched, checked alone and copied to the output folder, before its figures are recomputed."""

    repo_id: str
    folder: Path
    tag: str
    checks: list[str]
    checked: CheckedRun  # what the checks read, its folder the copy


def list_runs(org: str, **options: typing.Unpack[HubOptions]) -> list[str]:
    """The model repositories of `org` tagged `attncard`, as the Hub lists them, by name.

    Each listed id is checked before it is used: a valid `ORG/NAME` of this organisation, its name a plain
    folder name. A listing that names a repository of another owner, or more than `MAX_LISTED_RUNS`, is
    refused: the server cannot be trusted.

    Raises:
        [`DownloadError`]: the organisation name is not one, or the listing is malformed or too long.
        [`HubUnreachableError`]: the Hub cannot be reached.
        [`InsecureEndpointError`]: the endpoint is refused; nothing was sent.

    Example:
        >>> list_runs("loopback-user")  # the Hub holds loopback-user/tiny-gpt2-none-sst2, its card tagged
        ['loopback-user/tiny-gpt2-none-sst2']
    """
    check_options(options, HubOptions, "list_runs")
    hub = hub_endpoint(options.get("endpoint"))
    if not _SAFE_NAME.fullmatch(org):
        raise DownloadError(f"{org!r} is not a Hub user or organisation name; pass ORG, e.g. attncard")
    token = options.get("token") or get_token()
    timeout = options.get("timeout") or DEFAULT_TIMEOUT_S
    limit = Deadline(options.get("deadline") or DEFAULT_DEADLINE_S)
    names: list[str] = []
    with redacted(token):
        try:
            with hub_client_timeout(timeout, limit, endpoint=hub):
                for model in HfApi(endpoint=hub, token=token).list_models(author=org, filter=HUB_TAG):
                    if len(names) == MAX_LISTED_RUNS:
                        raise DownloadError(
                            f"{hub} lists more than {MAX_LISTED_RUNS} models of {org} tagged {HUB_TAG}; "
                            "more than any study publishes: this server cannot be trusted"
                        )
                    names.append(_listed_id(model.id, org, hub))
        except (HfHubHTTPError, httpx2.HTTPError) as error:
            raise HubUnreachableError(
                f"could not list the models of {org} on {hub} ({type(error).__name__}: "
                f"{str(error).splitlines()[0][:200] if str(error) else ''}); check the name and the endpoint "
                "(--hub-endpoint, HF_ENDPOINT), and try again"
            ) from None
        except (KeyError, TypeError, ValueError) as error:  # an item without its fields, a body not JSON
            raise DownloadError(f"{hub} gave a malformed model listing ({error}); try again") from None
    return sorted(set(names))


def _listed_id(repo_id: object, org: str, hub: str) -> str:
    """A listed repository id, checked: `org/NAME`, NAME a plain folder name."""
    shown = str(repo_id)[:120]
    try:
        validate_repo_id(str(repo_id))
    except HFValidationError:
        raise DownloadError(
            f"{hub} listed {shown!r}, not a repository id: this server cannot be trusted"
        ) from None
    owner, _, name = str(repo_id).partition("/")
    if owner != org or not _SAFE_NAME.fullmatch(name):
        raise DownloadError(
            f"{hub} listed {shown!r} among the models of {org}: this server cannot be trusted, use another "
            "endpoint"
        )
    return str(repo_id)


def write_hub_summary(
    org: str, output: str | os.PathLike, **options: typing.Unpack[HubSummaryOptions]
) -> HubSummary:
    """Writes the leaderboard of every attncard run `org` published on the Hub, each row verified (see the
    module doc), into `output`: `README.md`, `leaderboard.png`, and a cards copy of each verified run.

    Args:
        org: the Hub user or organisation, e.g. `attncard`.
        output: a new (or empty) folder for the leaderboard.
        **options: the keys of [`HubSummaryOptions`] (endpoint, token, cache_dir, timeout, deadline: each
            run's download, total_deadline: the whole leaderboard, data_dir, require_signer, signer_issuer,
            require_key). Runs are fetched `FETCHING_RUNS` at once, each in a process of its own; a run not
            fetched and checked within `total_deadline` is refused as not reached within the deadline.

    Returns:
        [`HubSummary`]: the files written, the runs in the table and the runs refused with their reason.

    Raises:
        [`DownloadError`]: `output` holds files already, or the listing is refused (see [`list_runs`]).
        [`HubUnreachableError`]: the listing could not be had.
        [`HubDeadlineError`]: the listing ran past the deadline.
        [`SignatureError`]: `require_key` is not a readable public key.
        [`AttncardError`]: two verified runs clash in the table (see
        [`pipeline.card.leaderboard.read_cards`]).

    Example:
        >>> from attncard.pipeline.publish.push import push_run_folder
        >>> _ = push_run_folder("runs/tiny-gpt2-none-sst2", "loopback-user/tiny-gpt2-none-sst2")  # run-… tag
        >>> summary = write_hub_summary("loopback-user", "leaderboard", data_dir="glue")
        >>> summary.readme, summary.verified, summary.refused
        (PosixPath('leaderboard/README.md'), ['loopback-user/tiny-gpt2-none-sst2'], [])
    """
    check_options(options, HubSummaryOptions, "write_hub_summary")
    where_from = hub_options(options)
    check_signer_identity(options.get("require_signer"))
    if options.get("require_key") is not None:
        # Read once, before any run: an unreadable key is bad input, not a reason to refuse every run.
        key_fingerprint(options["require_key"])
    output = Path(output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise DownloadError(
            f"{output}: not a new folder; pass a new (or empty) folder for the leaderboard, e.g. --output "
            "leaderboard-new"
        )
    hub = hub_endpoint(options.get("endpoint"))
    total = Deadline(options.get("total_deadline") or DEFAULT_SUMMARY_DEADLINE_S)
    repos = list_runs(org, **{**where_from, "deadline": max(_run_deadline(where_from, total), 1e-3)})
    output.mkdir(parents=True, exist_ok=True)
    staged, refused = _stage_all(repos, output, hub, where_from, total)
    # Every copy is in place before any is checked: the paired verdicts read their dense runs among them.
    verified: list[_Staged] = []
    memo = _Memo(options)
    for run in staged:
        if total.left() <= 0:
            refused.append(RefusedRun(run.repo_id, _not_reached(total.seconds, "checked")))
            continue
        key = memo.key(run, staged)
        if key in memo.before:
            run.checks += memo.before[key]
            verified.append(run)
            memo.now[key] = memo.before[key]
            continue
        try:
            passed = _check(run, output, options)
        except AttncardError as error:
            refused.append(RefusedRun(run.repo_id, _reason(error, output)))
            continue
        run.checks += passed
        verified.append(run)
        memo.now[key] = passed
    memo.save()
    for run in staged:
        if run not in verified:
            shutil.rmtree(run.folder)
    refused.sort(key=lambda run: run.repo_id)
    readme = output / LEADERBOARD_FILE
    source = f"the Hub organisation `{org}` ({hub})"
    if not verified:
        readme.write_text(render_leaderboard([], source=source, refused=_refused_pairs(refused)), "utf-8")
        return HubSummary(readme, None, [], refused)
    groups = read_cards(output)
    checks = {run.folder.name: ", ".join(run.checks) for run in verified}
    readme.write_text(
        render_leaderboard(groups, source=source, checks=checks, refused=_refused_pairs(refused)),
        encoding="utf-8",
    )
    plot = draw_leaderboard(groups, output / LEADERBOARD_PLOT)
    runs = [VerifiedRun(run.repo_id, run.folder.name, run.tag, tuple(run.checks)) for run in verified]
    return HubSummary(readme, plot, sorted(run.repo_id for run in verified), refused, runs)


class _Memo:
    """The runs verified before (`HubSummaryOptions.memo`), by key: the checks each passed. `now` holds what
    this leaderboard verified, written back by `save`; a memo unreadable, or written under other settings, is
    as none."""

    def __init__(self, options: HubSummaryOptions) -> None:
        self.path = Path(options["memo"]) if options.get("memo") else None
        key = options.get("require_key")
        self.settings = {
            # attncard's code checks and renders: another commit may check otherwise.
            "attncard": f"{_attncard_version()} {git_commit(Path(__file__).resolve().parents[2])}",
            "data_dir": str(Path(options["data_dir"]).resolve()) if options.get("data_dir") else "",
            "require_signer": options.get("require_signer") or "",
            "signer_issuer": options.get("signer_issuer") or "",
            "require_key": key_fingerprint(key) if key is not None else "",
        }
        self.before: dict[str, list[str]] = {}
        self.now: dict[str, list[str]] = {}
        if self.path is None or not self.path.is_file():
            return
        try:
            memo = json.loads(self.path.read_text(encoding="utf-8"))
            if memo.get("settings") == self.settings:
                self.before = {
                    str(key): [str(check) for check in checks] for key, checks in memo["verified"].items()
                }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.before = {}  # ours, but damaged: everything is checked again

    def key(self, run: _Staged, staged: list[_Staged]) -> str:
        """The run's tag, with the tags of the dense runs its paired verdict reads: the copies named by its
        baselines (`_check` reads nothing else of another run), so that a changed dense run re-checks itself
        and the runs compared with it, not every run of its model and task."""
        comparison = run.checked.read().comparison
        baselines = comparison.baselines if comparison is not None else []
        # Any case: on a case-insensitive disk the verdict's name finds a copy whose name differs in case.
        named = {baseline.repo_name.casefold() for baseline in baselines}
        dense = sorted(
            f"{other.folder.name}@{other.tag}" for other in staged if other.folder.name.casefold() in named
        )
        return f"{run.repo_id}@{run.tag}:" + ",".join(dense)

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.path.with_name(self.path.name + ".new")
        scratch.write_text(json.dumps({"settings": self.settings, "verified": self.now}, indent=1), "utf-8")
        scratch.replace(self.path)  # whole or not at all


def _attncard_version() -> str:
    try:
        return importlib.metadata.version("attncard")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _stage_all(
    repos: list[str], output: Path, hub: str, options: HubOptions, total: Deadline
) -> tuple[list[_Staged], list[RefusedRun]]:
    """Stages every listed run, `FETCHING_RUNS` at once, each in a process of its own, by the whole
    command's deadline `total`: `(staged, refused)`, a run not staged by then refused as not reached."""
    if not repos:
        return [], []
    # fork: the workers start at once and inherit this process's settings (endpoint, cache, token); where the
    # platform has no fork, spawn them.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    staged: list[_Staged] = []
    refused: list[RefusedRun] = []
    stopped: list[str] = []
    stop = time.monotonic() + total.left() + _STOP_GRACE_S
    with multiprocessing.get_context(method).Pool(min(FETCHING_RUNS, len(repos))) as pool:  # then stopped
        pending = [
            (repo_id, pool.apply_async(_stage_by, (repo_id, output, hub, options, total)))
            for repo_id in repos
        ]
        for repo_id, result in pending:
            try:
                run, reason = result.get(timeout=max(0.0, stop - time.monotonic()))
            except multiprocessing.TimeoutError:  # a fetch that did not give up in time: its process stops
                run, reason = None, _not_reached(total.seconds, "reached")
                stopped.append(repo_id.split("/")[1])
            if run is not None:
                staged.append(run)
            else:
                refused.append(RefusedRun(repo_id, reason))
    # A stopped process may have left part of its copy; never remove the folder of a staged run (on a
    # case-insensitive disk, a name that differs only in case is that folder).
    kept = {run.folder.name.casefold() for run in staged}
    for name in stopped:
        if name.casefold() not in kept and name not in (LEADERBOARD_FILE, LEADERBOARD_PLOT):
            shutil.rmtree(output / name, ignore_errors=True)
    return staged, refused


def _stage_by(
    repo_id: str, output: Path, hub: str, options: HubOptions, total: Deadline
) -> tuple[_Staged | None, str]:
    """[`_stage`] in a worker process, by the whole command's deadline `total` (the monotonic clock is the
    machine's, the same in every process): `(the staged run, "")`, or `(None, the reason it was refused)` (an
    exception would have to cross the process boundary)."""
    deadline = _run_deadline(options, total)
    if deadline <= 0:
        return None, _not_reached(total.seconds, "reached")
    try:
        return _stage(repo_id, output, hub, {**options, "deadline": deadline}), ""
    except HubDeadlineError as error:
        if deadline < (options.get("deadline") or DEFAULT_DEADLINE_S):  # the whole command's deadline cut it
            return None, _not_reached(total.seconds, "reached")
        return None, _reason(error, output)
    except AttncardError as error:
        return None, _reason(error, output)


def _run_deadline(options: HubOptions, total: Deadline) -> float:
    """The deadline of one download: its own (`deadline`), cut to what the whole command has left."""
    return min(options.get("deadline") or DEFAULT_DEADLINE_S, total.left())


def _not_reached(seconds: float, what: str) -> str:
    return (
        f"not {what} within the deadline of {seconds:g} s of the whole leaderboard; run it again with a "
        "longer one (--deadline)"
    )


def _refused_pairs(refused: list[RefusedRun]) -> list[tuple[str, str]]:
    return [(run.repo_id, run.reason) for run in refused]


def _reason(error: AttncardError, output: Path) -> str:
    """The error's first line, without this machine's path to the output folder (the leaderboard has none):
    a path in it is made relative, and the folder itself named in words (a module run whose dense baseline
    was refused is told the baseline "is not in" the folder)."""
    text = first_line(error).replace(f"{output}{os.sep}", "").replace(str(output.resolve()) + os.sep, "")
    # Only an absolute path alone: a relative folder's name ("leaderboard") may be a word of the message too.
    for folder in {str(output.resolve()), str(output)} if output.is_absolute() else {str(output.resolve())}:
        text = text.replace(folder, "the verified runs")
    return text[:400]


def _run_tag(repo_id: str, hub: str, options: HubOptions) -> str:
    """The run tag that names the commit `main` is at."""
    token = options.get("token") or get_token()
    timeout = options.get("timeout") or DEFAULT_TIMEOUT_S
    limit = Deadline(options.get("deadline") or DEFAULT_DEADLINE_S)
    with redacted(token):
        try:
            with hub_client_timeout(timeout, limit, endpoint=hub):
                refs = HfApi(endpoint=hub, token=token).list_repo_refs(repo_id)
        except (HfHubHTTPError, httpx2.HTTPError) as error:
            raise HubUnreachableError(
                f"could not list the branches and tags of {repo_id} ({type(error).__name__}); try again"
            ) from None
        except (KeyError, TypeError, ValueError) as error:  # a ref without its fields, a body not JSON
            raise DownloadError(
                f"{hub} gave a malformed list of the branches and tags of {repo_id} ({error}); try again"
            ) from None
    heads = [branch.target_commit for branch in refs.branches if branch.name == "main"]
    tags = sorted(
        str(tag.name)
        for tag in refs.tags
        if heads and tag.target_commit == heads[0] and RUN_TAG_RE.match(str(tag.name))
    )
    if not tags:
        raise IntegrityError(
            f"{repo_id}: no run tag (run-<started>-<sha256>) names the commit main is at: main changed after "
            "attncard push tagged it, or it was never pushed by attncard push"
        )
    return tags[-1]


def _stage(repo_id: str, output: Path, hub: str, options: HubOptions) -> _Staged:
    """Fetches the tagged commit of `repo_id` without weights, checks its files as a download does, and copies
    them to `output/<name>/`."""
    name = repo_id.split("/")[1]
    copy = output / name
    if name in (LEADERBOARD_FILE, LEADERBOARD_PLOT) or copy.exists():  # on a case-insensitive disk too
        raise IntegrityError(
            f"{repo_id}: its name is that of the leaderboard's own file or of another run's copy here"
        )
    tag = _run_tag(repo_id, hub, options)
    fetched = fetch_run(repo_id, tag, without_weights=True, **options)
    where = f"{repo_id}@{fetched.commit[:SHA_PREFIX]}"
    run = CheckedRun(fetched.folder, where, repo_id=repo_id, revision=tag)
    # Each run alone, on the fetched files; the figures from predictions need the other runs' copies (_check).
    run_checks(SUMMARY_HUB, run, stop=FIGURES_FROM_PREDICTIONS)
    copy.mkdir()
    # Only the files the manifest lists (and results.json, the signature): no transport bookkeeping.
    for path in [*run.read().manifest, RESULTS_FILE, SIGNATURE_FILE]:
        if path.endswith(WEIGHTS_SUFFIX) or not (run.folder / path).is_file():
            continue
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run.folder / path, copy / path)
    return _Staged(repo_id, copy, tag, ["run tag", "manifest"], dataclasses.replace(run, folder=copy))


def _check(run: _Staged, output: Path, options: HubSummaryOptions) -> list[str]:
    """The rest of the staged run's checks, on its copy: its figures and paired verdict recomputed from the
    predictions (its dense baselines among the other copies in `output`), its card and plots, and its
    signature; the checks passed."""
    comparison = run.checked.read().comparison
    for baseline in comparison.baselines if comparison is not None else []:
        # Said in the Hub's terms: the copy a verdict reads is a run of this listing that was staged.
        if not (output / baseline.repo_name / RESULTS_FILE).is_file():
            raise IntegrityError(
                f"{run.repo_id}: its paired verdict names the dense run {baseline.repo_name}, which is not "
                "among the runs staged here (refused, or not published under this organisation), so the "
                "verdict cannot be recomputed"
            )
    checked = dataclasses.replace(
        run.checked,
        data_dir=options.get("data_dir"),
        baselines=[output],
        signer=signer_options(options),
    )
    run_checks(SUMMARY_HUB, checked, start=FIGURES_FROM_PREDICTIONS)
    check = checked.reverification
    if check is not None and not check.matches:
        raise IntegrityError(
            f"{run.repo_id}: its figures differ from their recomputation from its predictions.csv: "
            f"{check.problems[0]}"
            + (f" (and {len(check.problems) - 1} more)" if len(check.problems) > 1 else "")
        )
    results = checked.read()
    passed = ["card", "figures from predictions.csv"]
    if results.comparison is not None and results.comparison.baselines:
        passed.append("paired verdict from both runs' predictions")
    if checked.signature.verified:  # a required signer or key: verified; otherwise reported, not checked
        passed.append(f"signed by {checked.signature.who}")
    return passed


__all__ = [
    "DEFAULT_SUMMARY_DEADLINE_S",
    "FETCHING_RUNS",
    "HUB_TAG",
    "MAX_LISTED_RUNS",
    "HubSummary",
    "HubSummaryOptions",
    "RefusedRun",
    "VerifiedRun",
    "list_runs",
    "write_hub_summary",
]
