"""Pushing a run folder to a loopback Hub through the real huggingface_hub client, with injected faults.

Two tiny GPT-2 runs are built once for this module, both for `REPO`: a PASS run, which `publish --push`
writes and pushes to a loopback Hub of its own (the round trip), and a FAIL run. Each test gets a fresh
`LoopbackHub` (tests/support/hub_server.py) whose faults strike the requests of one push. After every failure
the repository must be at its previous commit, and no commit may ever hold a card without its weights.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, constants
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import close_session

from attncard.pipeline.cli import main, publish_main
from attncard.pipeline.hub.http import HUB_BACKOFF
from attncard.pipeline.publish import push as publish
from attncard.pipeline.publish.push import PushResult, push_run_folder, push_tag
from attncard.pipeline.record.errors import IntegrityError, PushConflictError, PushError, PushRefusedError
from attncard.pipeline.record.manifest import sha256_file
from attncard.pipeline.record.results import Results, Status
from attncard.pipeline.verify.download import load_verified
from attncard.pipeline.verify.reverify import reverify
from conftest import HUB_USER, point_client_at, write_sst2_folder
from hub_server import CONFLICT_MESSAGE, LoopbackHub

# huggingface_hub 2.4.0 itself uploads LFS parts with httpx2's deprecated `data=<file>`.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

# Distinctive, so that finding it anywhere it should not be is unambiguous.
TOKEN = "hf_attncardPushSecret_7Qz3Xv9KpL2m"
REPO = f"{HUB_USER}/tiny-gpt2-none-sst2"
WEIGHTS = "adapter_model.safetensors"
TAG = re.compile(r"^run-\d{8}T\d{6}Z-[0-9a-f]{32}$")


@pytest.fixture
def hub_token() -> str:
    return TOKEN


@pytest.fixture(autouse=True)
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries wait 0.05, 0.1, 0.2, 0.2, 0.2 s instead of 1, 2, 4, 8, 8 s, and Retry-After without the 1 s
    huggingface_hub adds."""
    monkeypatch.setattr(
        publish, "HUB_BACKOFF", replace(HUB_BACKOFF, base_wait_s=0.05, max_wait_s=0.2, asked_margin_s=0.0)
    )


def _train(tiny_model_dir, glue: Path, output: Path, *options: str) -> Path:
    argv = ["--model", str(tiny_model_dir("gpt2")), "--module", "none", "--batch-size", "8", *options]
    assert publish_main([*argv, "--data-dir", str(glue), "--output", str(output), "--repo-id", REPO]) == 0
    return output / "tiny-gpt2-none-sst2"


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory) -> Iterator[tuple[Path, Path, Path, LoopbackHub]]:
    """`(PASS run folder, FAIL run folder, GLUE folder, hub)`, both runs for `REPO`; the PASS run was
    written and pushed by `publish --push` to `hub`, a loopback Hub of its own kept for the round trip."""
    root = tmp_path_factory.mktemp("push-runs")
    glue = write_sst2_folder(root / "glue")
    with LoopbackHub(root / "hub", token=TOKEN, user=HUB_USER) as published_to:
        with pytest.MonkeyPatch.context() as patch:
            point_client_at(published_to, root / "hf_home", TOKEN, patch)
            passed = _train(tiny_model_dir, glue, root / "pass", "--steps", "10", "--lr", "3e-2", "--push")
        close_session()
        failed = _train(tiny_model_dir, glue, root / "fail", "--steps", "1", "--lr", "1e-6")
        assert Results.load(passed).verification.status == Status.PASS_NO_COMPRESSION
        assert Results.load(failed).verification.status == Status.FAIL
        yield passed, failed, glue, published_to
    assert published_to.internal_errors == []


@pytest.fixture
def passed(runs) -> Path:
    return runs[0]


@pytest.fixture
def failed(runs) -> Path:
    return runs[1]


@pytest.fixture
def api(hub: LoopbackHub) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=TOKEN)


@pytest.fixture
def previous(hub: LoopbackHub, api: HfApi) -> str:
    """The repository, created empty (the Hub's initial commit); returns its head."""
    api.create_repo(REPO)
    return hub.head(REPO)


def push(hub: LoopbackHub, run_dir: Path, **kwargs) -> PushResult:
    return push_run_folder(run_dir, kwargs.pop("repo_id", REPO), endpoint=hub.endpoint, **kwargs)


def files_of(run_dir: Path) -> dict[str, str]:
    """Path -> sha256 of every file of a folder, as `LoopbackHub.commits` gives a commit's files."""
    return {
        p.relative_to(run_dir).as_posix(): sha256_file(p) for p in sorted(run_dir.rglob("*")) if p.is_file()
    }


def holds(hub: LoopbackHub, run_dir: Path, revision: str = "main") -> bool:
    """Whether the repository at `revision` holds exactly the run folder (and the Hub's .gitattributes)."""
    files = dict(hub.commits(REPO, revision)[0].files)
    files.pop(".gitattributes")
    return files == files_of(run_dir)


def assert_never_a_card_without_weights(hub: LoopbackHub) -> None:
    for commit in hub.commits(REPO):
        if "README.md" in commit.files:
            assert {WEIGHTS, "adapter_config.json", "config.json", "results.json"} <= set(commit.files)


def assert_unchanged(hub: LoopbackHub, previous: str) -> None:
    assert hub.head(REPO) == previous
    assert_never_a_card_without_weights(hub)


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and TOKEN not in text, text
    return text


def commit_statuses(hub: LoopbackHub) -> list[int | None]:
    return [r.status for r in hub.requests if r.route == "commit"]


def copy_run(run_dir: Path, tmp_path: Path, edit: Callable[[Path], None]) -> Path:
    copy = tmp_path / "copy" / run_dir.name
    shutil.copytree(run_dir, copy)
    edit(copy)
    return copy


# ------------------------------------------------------------------------------------------------------------
# Commits and tags


@pytest.mark.slow
@pytest.mark.parametrize("lfs", [False, True], ids=["regular", "lfs"])
def test_first_push_is_one_commit_of_every_file_and_an_identical_push_makes_none(
    hub: LoopbackHub, passed: Path, lfs: bool
) -> None:
    if lfs:  # the weights go through the LFS batch API; the Hub then reports their sha256, not a blob id
        hub.lfs_threshold = 1024
    result = push(hub, passed)
    initial, commit = hub.commits(REPO)[1], hub.commits(REPO)[0]
    assert initial.author == "system" and commit.parent == initial.oid
    # none: no scaling plot; a loss curve, a LICENSE (the tiny model's folder declares no licence) and the
    # per-row predictions
    assert holds(hub, passed) and len(files_of(passed)) == 11
    assert commit.title == "Publish tiny-gpt2-none-sst2: PASS_NO_COMPRESSION"
    assert f"results.json sha256: {sha256_file(passed / 'results.json')}" in commit.description
    assert result == PushResult(
        repo_id=REPO,
        commit=commit.oid,
        tag=push_tag(passed),
        created_commit=True,
        created_tag=True,
        url=f"{hub.endpoint}/{REPO}",
    )
    assert TAG.match(result.tag) and result.tag == push_tag(passed)  # the same for the same folder
    assert hub.refs(REPO)["tags"] == {result.tag: commit.oid}
    assert hub.request_count("commit") == 1
    assert (hub.request_count("lfs_upload") > 0) == lfs

    again = push(hub, passed)
    assert (again.commit, again.tag, again.created_commit, again.created_tag) == (
        commit.oid,
        result.tag,
        False,
        False,
    )
    assert len(hub.commits(REPO)) == 2 and hub.request_count("commit") == 1
    assert hub.request_count("create_tag") == 1 and hub.request_count("preupload") == 1


def test_a_changed_folder_is_one_more_commit_that_also_deletes_other_files(
    hub: LoopbackHub, api: HfApi, passed: Path, failed: Path
) -> None:
    first = push(hub, passed)
    stale = api.create_commit(
        REPO, [CommitOperationAdd("notes/stale.txt", b"old")], commit_message="an older file"
    ).oid

    result = push(hub, failed, allow_fail=True)
    commit = hub.commits(REPO)[0]
    assert len(hub.commits(REPO)) == 4 and commit.parent == stale and result.commit == commit.oid
    assert holds(hub, failed) and "notes/stale.txt" not in commit.files
    assert commit.title == "Publish tiny-gpt2-none-sst2: FAIL"
    assert hub.refs(REPO)["tags"] == {first.tag: first.commit, result.tag: result.commit}

    # Back to the first run: a commit, and its tag stays where it is (that commit holds the same files).
    back = push(hub, passed)
    assert back.created_commit and not back.created_tag and holds(hub, passed)
    assert hub.refs(REPO)["tags"] == {first.tag: first.commit, result.tag: result.commit}
    assert len(hub.commits(REPO)) == 5
    assert_never_a_card_without_weights(hub)


# ------------------------------------------------------------------------------------------------------------
# Refusals: nothing is sent


def test_a_fail_run_is_refused_unless_allowed(hub: LoopbackHub, failed: Path) -> None:
    with pytest.raises(PushRefusedError, match=r"status is FAIL .*pass allow_fail=True to publish") as caught:
        push(hub, failed)
    one_line(caught.value)
    assert hub.requests == []
    card = (failed / "README.md").read_text()
    assert "\n# tiny-gpt2-none-sst2\n" in card and "\n\n**Status: FAIL** — " in card
    assert push(hub, failed, allow_fail=True).created_commit and holds(hub, failed)


def test_a_card_that_does_not_say_fail_is_refused_even_with_allow_fail(
    hub: LoopbackHub, passed: Path, tmp_path: Path
) -> None:
    def fail(folder: Path) -> None:
        data = json.loads((folder / "results.json").read_text())
        data["verification"]["status"] = "FAIL"
        (folder / "results.json").write_text(json.dumps(data, indent=2))

    copy = copy_run(passed, tmp_path, fail)
    with pytest.raises(
        PushRefusedError, match=r"results\.json says FAIL but the card's status line says PASS_NO"
    ):
        push(hub, copy, allow_fail=True)
    assert hub.requests == []


def test_a_lint_finding_is_refused(hub: LoopbackHub, passed: Path, tmp_path: Path) -> None:
    def placeholder(folder: Path) -> None:
        with (folder / "README.md").open("a") as card:
            card.write("\nAccuracy on the test split: TBD\n")

    copy = copy_run(passed, tmp_path, placeholder)
    with pytest.raises(
        PushRefusedError, match=r"`attncard lint` found 2 problem\(s\), first: README.md:"
    ) as caught:
        push(hub, copy)
    assert "nothing was pushed" in one_line(caught.value)
    assert hub.requests == []


def test_a_card_the_hub_refuses_is_not_pushed(hub: LoopbackHub, passed: Path, previous: str) -> None:
    """The Hub's own validation (`POST /api/validate-yaml`) is asked before anything is written; its refusal
    stops the push with the Hub's words, and nothing reaches the repository."""
    message = '"base_model" with value "/home/me/tiny-gpt2" is not valid'
    hub.faults.add("validate_yaml", "status", status=400, message=message, times=1)
    created = hub.request_count("create_repo")  # the fixture's own
    with pytest.raises(PushRefusedError) as caught:
        push(hub, passed)
    assert one_line(caught.value).startswith(f"{hub.endpoint} refuses the card of {passed}: ")
    assert "is not valid" in one_line(caught.value) and "nothing was pushed" in one_line(caught.value)
    assert hub.request_count("validate_yaml") == 1
    assert (hub.request_count("commit"), hub.request_count("create_repo")) == (0, created)
    assert_unchanged(hub, previous)


# huggingface_hub's own commit validates the README again and warns with the same words.
@pytest.mark.filterwarnings("ignore:Warnings while validating metadata in README.md")
def test_the_hub_s_card_warnings_are_reported(
    hub: LoopbackHub, passed: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hub.card_warnings = ["license_name is missing for license: other"]
    with caplog.at_level(logging.WARNING, logger="attncard.pipeline.publish.push"):
        push(hub, passed)
    assert f"the Hub warns about the card of {passed}: license_name is missing for license: other" in (
        caplog.messages
    )


def test_what_is_not_a_run_folder_is_refused(hub: LoopbackHub, passed: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(PushRefusedError, match=r"has no results\.json; is this a run folder"):
        push(hub, tmp_path / "empty")
    with pytest.raises(PushRefusedError, match="not a folder"):
        push(hub, tmp_path / "missing")
    with pytest.raises(
        PushRefusedError, match=f"rendered for {REPO}, .*push it to {REPO}, or re-run publish"
    ):
        push(hub, passed, repo_id=f"{HUB_USER}/another-name")
    assert hub.requests == []


# ------------------------------------------------------------------------------------------------------------
# Faults on the commit


def test_a_burst_of_5xx_on_the_commit_is_retried(hub: LoopbackHub, passed: Path, previous: str) -> None:
    hub.faults.add("commit", "status", status=503, times=2)
    hub.faults.add("commit", "status", status=500)
    result = push(hub, passed)
    assert commit_statuses(hub) == [503, 503, 500, 200]
    assert result.created_commit and holds(hub, passed) and len(hub.commits(REPO)) == 2
    assert_never_a_card_without_weights(hub)


@pytest.mark.slow
def test_a_commit_that_keeps_failing_gives_up_and_leaves_the_repo_as_it_was(
    hub: LoopbackHub, passed: Path, previous: str
) -> None:
    hub.faults.add("commit", "status", status=500, times=None)
    with pytest.raises(PushError) as caught:
        push(hub, passed)
    assert re.fullmatch(
        rf"gave up committing .* to {REPO} after 6 attempts \(last: HTTP 500: Injected HTTP 500\); {REPO} is "
        rf"still at its previous commit {previous[:12]}: re-run the push later",
        one_line(caught.value),
    )
    assert commit_statuses(hub) == [500] * 6
    assert_unchanged(hub, previous)


def test_a_rate_limit_waits_retry_after(hub: LoopbackHub, passed: Path, previous: str) -> None:
    hub.faults.add("commit", "rate_limit", retry_after=1)
    started = time.monotonic()
    assert push(hub, passed).created_commit
    assert time.monotonic() - started >= 1.0  # Retry-After, not the 0.05 s of the backoff
    assert commit_statuses(hub) == [429, 200] and len(hub.commits(REPO)) == 2
    assert_never_a_card_without_weights(hub)


def test_the_wait_before_a_retry_is_huggingface_hubs() -> None:
    # The schedule of huggingface_hub's http_backoff, which a push follows (short_waits shortens the push's).
    assert (HUB_BACKOFF.retries, sorted(HUB_BACKOFF.statuses)) == (5, [408, 429, 500, 502, 503, 504])
    assert [HUB_BACKOFF.wait_s(attempt) for attempt in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    answer = httpx2.Response(503, headers={"Retry-After": "3"})
    assert HUB_BACKOFF.wait_s(0, answer) == 4.0
    # A 429 whose rate-limit headers say when the window resets waits for that, as http_backoff does.
    limited = httpx2.Response(429, headers={"RateLimit": '"api";r=0;t=55', "Retry-After": "3"})
    assert HUB_BACKOFF.wait_s(0, limited) == 56.0
    assert HUB_BACKOFF.wait_s(0, httpx2.Response(429, headers={"RateLimit": '"api";r=7;t=55'})) == 1.0


@pytest.mark.parametrize("route", ["commit", "lfs_upload"])
def test_a_connection_dropped_mid_upload(hub: LoopbackHub, passed: Path, previous: str, route: str) -> None:
    hub.lfs_threshold = 1024
    hub.faults.add(route, "drop", after_bytes=1024)
    assert push(hub, passed).created_commit
    assert [r.status for r in hub.requests if r.route == route][:2] == [None, 200]
    assert holds(hub, passed) and len(hub.commits(REPO)) == 2
    assert_never_a_card_without_weights(hub)


def test_a_lost_answer_finds_the_commit_that_landed(hub: LoopbackHub, passed: Path, previous: str) -> None:
    hub.faults.add("commit", "lose_response")
    result = push(hub, passed)
    assert commit_statuses(hub) == [None]  # landed, the answer was lost, and it is not sent again
    assert result.created_commit and result.commit == hub.head(REPO) and len(hub.commits(REPO)) == 2
    assert hub.refs(REPO)["tags"] == {result.tag: result.commit}
    assert_never_a_card_without_weights(hub)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("delay", "first_wait", "lands"),
    [(1.5, 1.5, "before the retry"), (2.0, 0.05, "after the retry")],
    ids=["found-by-the-retry", "refused-after-the-retry"],
)
def test_a_commit_slower_than_the_timeout_is_made_once(
    hub: LoopbackHub,
    passed: Path,
    previous: str,
    monkeypatch: pytest.MonkeyPatch,
    delay: float,
    first_wait: float,
    lands: str,
) -> None:
    """The client gives up after 1 s; the server handles the commit `delay` s after it arrived."""
    monkeypatch.setattr(
        publish, "HUB_BACKOFF", replace(HUB_BACKOFF, base_wait_s=first_wait, max_wait_s=first_wait)
    )
    hub.faults.add("commit", "delay", delay=delay)
    started = time.monotonic()
    result = push(hub, passed, timeout=1.0)
    assert result.created_commit and holds(hub, passed)
    if lands == "before the retry":
        assert hub.request_count("commit") == 1  # the retry read the head, found the commit, sent nothing
    else:
        # The retry's commit landed first; the late one then finds its parent stale and is refused (its
        # answer goes nowhere: the client is gone).
        assert hub.request_count("commit") == 2
        time.sleep(max(0.0, started + delay + 0.5 - time.monotonic()))
    assert len(hub.commits(REPO)) == 2 and hub.head(REPO) == result.commit
    assert_never_a_card_without_weights(hub)


def test_a_commit_refused_for_good_is_not_retried(hub: LoopbackHub, passed: Path, previous: str) -> None:
    hub.faults.add("commit", "status", status=403, message="You don't have the rights to push here")
    with pytest.raises(PushError) as caught:
        push(hub, passed)
    assert one_line(caught.value) == (
        f"{hub.endpoint} refused the commit to {REPO} (HTTP 403: You don't have the rights to push here); "
        f"{REPO} is still at its previous commit {previous[:12]}: use a token with write access to "
        f"{HUB_USER} (HF_TOKEN, or `hf auth login`)"
    )
    assert commit_statuses(hub) == [403]
    assert_unchanged(hub, previous)


@pytest.mark.parametrize("status", [412, 409])
def test_a_conflict_stops_with_one_line(hub: LoopbackHub, passed: Path, previous: str, status: int) -> None:
    hub.faults.add("commit", "conflict", status=status)
    with pytest.raises(PushConflictError) as caught:
        push(hub, passed)
    message = one_line(caught.value)
    assert f"({hub.endpoint} refused the commit to {REPO} as a conflict (HTTP {status}" in f"({message}"
    assert CONFLICT_MESSAGE in message and message.endswith("re-run the push")
    assert commit_statuses(hub) == [status]  # not retried
    assert_unchanged(hub, previous)


def test_a_real_concurrent_push_between_read_and_commit(
    hub: LoopbackHub, api: HfApi, passed: Path, failed: Path, previous: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another publisher commits a whole run right after this push compared the files."""
    holds_run = publish._Pusher._holds_run
    other: list[str] = []

    def compare_then_someone_pushes(self, revision: str) -> bool:
        answer = holds_run(self, revision)
        if not other:
            operations = [CommitOperationAdd(path, str(failed / path)) for path in files_of(failed)]
            other.append(api.create_commit(REPO, operations, commit_message="someone else").oid)
        return answer

    monkeypatch.setattr(publish._Pusher, "_holds_run", compare_then_someone_pushes)
    with pytest.raises(PushConflictError) as caught:
        push(hub, passed)
    assert one_line(caught.value) == (
        f"someone else pushed to {REPO} while this push ran (main moved from {previous[:12]} to "
        f"{other[0][:12]}); nothing of {passed} was committed: re-run the push"
    )
    assert commit_statuses(hub) == [200, 412]
    assert hub.head(REPO) == other[0] and holds(hub, failed)  # theirs, whole; nothing of ours
    assert_never_a_card_without_weights(hub)


# ------------------------------------------------------------------------------------------------------------
# Faults on the other calls, and a stalled Hub


def test_transient_failures_of_the_other_calls_are_retried(hub: LoopbackHub, passed: Path) -> None:
    hub.faults.add("create_repo", "status", status=503, times=2)
    hub.faults.add("repo_info", "status", status=502)
    hub.faults.add("refs", "status", status=500)
    hub.faults.add("create_tag", "lose_response")  # tagged, but the answer is lost: the retry gets a 409
    result = push(hub, passed)
    assert [r.status for r in hub.requests if r.route == "create_repo"] == [503, 503, 200]
    assert [r.status for r in hub.requests if r.route == "create_tag"] == [None, 409]
    assert result.created_commit and result.created_tag
    assert hub.refs(REPO)["tags"] == {result.tag: result.commit} and holds(hub, passed)


@pytest.mark.slow
def test_a_stalled_hub_cannot_hang_a_push(hub: LoopbackHub, passed: Path, previous: str) -> None:
    hub.faults.add("repo_info", "delay", delay=60, times=None)
    started = time.monotonic()
    with pytest.raises(PushError) as caught:
        push(hub, passed, timeout=0.5)
    assert time.monotonic() - started < 15
    assert re.fullmatch(
        rf"could not reach {hub.endpoint} while reading the head of main of {REPO} after 6 attempts "
        r"\(last: ReadTimeout.*\); nothing more was pushed: check the network .*",
        one_line(caught.value),
    )
    assert hub.request_count("commit") == 0
    # The timeout was the push's own: the client's factory is huggingface_hub's again.
    assert hf_http._GLOBAL_CLIENT_FACTORY is hf_http.default_client_factory
    hub.faults.clear()
    assert_unchanged(hub, previous)


# ------------------------------------------------------------------------------------------------------------
# The command line, the round trip, the token


@pytest.mark.slow
def test_publish_push_round_trip_then_tampering_is_caught(
    hub: LoopbackHub, runs, gpt2_base, tmp_path: Path
) -> None:
    """`publish --push` (in the `runs` fixture) → `load_verified` → `reverify`, on the Hub it pushed to."""
    passed, _, glue, published_to = runs
    head = published_to.head(REPO)
    (commit, initial) = published_to.commits(REPO)
    assert commit.parent == initial.oid and commit.title == "Publish tiny-gpt2-none-sst2: PASS_NO_COMPRESSION"
    assert published_to.refs(REPO)["tags"] == {push_tag(passed): head}
    assert dict(commit.files) == {".gitattributes": initial.files[".gitattributes"], **files_of(passed)}

    endpoint = published_to.endpoint
    verified = load_verified(REPO, endpoint=endpoint, cache_dir=tmp_path / "cache-1", base_model=gpt2_base)
    assert verified.revision == head and verified.results.repo_id == REPO
    check = reverify(REPO, push_tag(passed), data_dir=glue, endpoint=endpoint, base_model=gpt2_base)
    assert check.matches and check.revision == head, check.problems

    good = published_to.read_file(REPO, "config.json")
    published_to.tamper(REPO, "config.json", good.replace(b'"n_layer": 2', b'"n_layer": 1'))
    with pytest.raises(IntegrityError, match=r"config\.json has sha256 .* but the manifest expects"):
        load_verified(REPO, endpoint=endpoint, cache_dir=tmp_path / "cache-2", base_model=gpt2_base)


def test_publish_push_checks_what_it_needs_before_training(
    hub: LoopbackHub, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["--model", "minilm", "--module", "none", "--output", str(tmp_path / "runs")]
    cases = [
        ([*base, "--push"], "--push needs --repo-id ORG/NAME"),
        ([*base, "--allow-fail"], "--allow-fail only applies with --push"),
        ([*base, "--repo-id", REPO, "--push"], "HF_HUB_OFFLINE is set: --push needs the network"),
        ([*base, "--repo-id", REPO, "--push"], "--push needs a Hub token with write access to loopback-user"),
    ]
    for number, (argv, message) in enumerate(cases):
        if number == 2:
            monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        if number == 3:
            monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
            monkeypatch.delenv("HF_TOKEN")
        assert publish_main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "runs").exists() and hub.requests == []


@pytest.mark.slow
def test_the_token_never_shows(
    hub: LoopbackHub, passed: Path, failed: Path, tmp_path: Path, capfd, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []

    # A server that echoes the token in an error message.
    hub.faults.add("create_repo", "status", status=400, message=f"token {TOKEN} may not create repositories")
    with pytest.raises(PushError) as caught:
        push(hub, passed)
    errors.append(caught.value)
    assert "token <token> may not create repositories" in str(caught.value)

    # The command line: retries, a push, a conflict and a refusal.
    hub.faults.add("commit", "status", status=503)
    hub.faults.add("create_tag", "lose_response")
    assert main(["push", str(passed), "--repo-id", REPO, "--hub-endpoint", hub.endpoint]) == 0
    hub.faults.add("commit", "conflict")
    assert main(["push", str(failed), "--repo-id", REPO, "--allow-fail"]) == 2
    assert main(["push", str(failed), "--repo-id", REPO]) == 2
    hub.faults.add("commit", "status", status=500, times=None)
    with pytest.raises(PushError) as caught:
        push(hub, failed, allow_fail=True)
    errors.append(caught.value)

    out, err = capfd.readouterr()
    assert "push: the commit to" in err and "retry 1 of 5" in err and f"pushed {passed}/ to {REPO}@" in err
    conflict, refusal = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "refused the commit" in conflict and "as a conflict" in conflict
    # The library's remedy names allow_fail=True; the command line's names the flag too.
    assert "the run's status is FAIL" in refusal
    assert "pass --allow-fail (allow_fail=True) to publish" in refusal
    shown = [out, err, caplog.text]
    shown += ["".join(traceback.format_exception(error)) + repr(error) for error in errors]
    for text in shown:
        assert TOKEN not in text
    for folder in (passed.parent.parent, tmp_path):  # both runs, their Hub and HF_HOME; this test's
        for path in folder.rglob("*"):
            assert not path.is_file() or TOKEN.encode() not in path.read_bytes(), path
