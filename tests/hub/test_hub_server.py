"""The real huggingface_hub client against `LoopbackHub`, over HTTP on 127.0.0.1.

These tests pin down both the server (it must answer like the Hub, or later tests built on it would
lie) and the client behaviour that publishing relies on: which calls the client retries by itself,
what surfaces as an error, and that a failed commit leaves the repository untouched.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    constants,
    hf_hub_download,
    snapshot_download,
)
from huggingface_hub.errors import (
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import http_backoff

from attncard.pipeline.hub.http import HUB_BACKOFF
from conftest import HUB_TOKEN, HUB_USER
from hub_server import CONFLICT_MESSAGE, LoopbackHub

# huggingface_hub 2.4.0 itself uploads LFS parts with httpx2's deprecated `data=<file>`.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = HUB_TOKEN
USER = HUB_USER
REPO = f"{USER}/attn-card"
CARD = b"---\nlicense: apache-2.0\ntags:\n- attention\n---\n# attn card\n"
CONFIG = b'{"hidden_size": 384, "num_heads": 12}\n'
WEIGHTS = random.Random(0).randbytes(3 * 1024 * 1024)  # a ~3 MB binary checkpoint


@pytest.fixture
def api(hub: LoopbackHub) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=TOKEN)


@pytest.fixture
def repo(api: HfApi) -> str:
    """An empty model repo (the Hub's initial commit holds `.gitattributes` only)."""
    api.create_repo(REPO)
    return REPO


def add(path: str, data: bytes) -> CommitOperationAdd:
    return CommitOperationAdd(path_in_repo=path, path_or_fileobj=data)


def first_version() -> dict[str, bytes]:
    return {
        "README.md": CARD,
        "config.json": CONFIG,
        "weights/model.bin": WEIGHTS,
        "notes/eval.txt": b"acc 0.91\n",
    }


def commit_files(api: HfApi, files: dict[str, bytes], message: str = "Publish", **kwargs: object) -> str:
    info = api.create_commit(REPO, [add(p, d) for p, d in files.items()], commit_message=message, **kwargs)
    return info.oid


def folder_files(folder: str | Path) -> dict[str, bytes]:
    root = Path(folder)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ------------------------------------------------------------------------------------------------
# Repositories, commits, listings


def test_create_repo_twice_with_exist_ok(hub: LoopbackHub, api: HfApi) -> None:
    url = api.create_repo(REPO)
    assert url.repo_id == REPO
    assert url == f"{hub.endpoint}/{REPO}"
    again = api.create_repo(REPO, exist_ok=True)
    assert again.repo_id == REPO
    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_repo(REPO)
    assert excinfo.value.response.status_code == 409
    # Like the Hub, a new repo has one system commit holding .gitattributes.
    (initial,) = hub.commits(REPO)
    assert initial.author == "system" and list(initial.files) == [".gitattributes"]
    assert hub.request_count("create_repo", status=409) == 2


def test_commit_several_files_and_read_them_back(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    files = first_version()
    info = api.create_commit(
        repo,
        [add(p, d) for p, d in files.items()],
        commit_message="Publish v1",
        commit_description="first card",
    )
    assert len(info.oid) == 40 and info.oid == hub.head(repo)
    assert info.commit_url == f"{hub.endpoint}/{repo}/commit/{info.oid}"

    model = api.model_info(repo, files_metadata=True)
    assert model.sha == info.oid
    siblings = {s.rfilename: s for s in model.siblings or []}
    assert set(siblings) == {".gitattributes", *files}
    for path, data in files.items():
        assert siblings[path].size == len(data)
        assert siblings[path].blob_id == git_blob_id(data)
        assert siblings[path].lfs is None  # no lfs_threshold: every file is a regular git blob
        assert hub.read_file(repo, path) == data

    assert sorted(api.list_repo_files(repo)) == sorted([".gitattributes", *files])
    top_level = {(type(e).__name__, e.path) for e in api.list_repo_tree(repo)}
    assert top_level == {
        ("RepoFile", ".gitattributes"),
        ("RepoFile", "README.md"),
        ("RepoFile", "config.json"),
        ("RepoFolder", "notes"),
        ("RepoFolder", "weights"),
    }
    assert [e.path for e in api.list_repo_tree(repo, "weights")] == ["weights/model.bin"]
    commits = api.list_repo_commits(repo)
    assert [c.commit_id for c in commits] == [c.oid for c in hub.commits(repo)]
    assert (commits[0].title, commits[0].message) == ("Publish v1", "first card")
    assert api.file_exists(repo, "weights/model.bin") and not api.file_exists(repo, "weights/other.bin")
    paths = {p.path: p for p in api.get_paths_info(repo, ["config.json", "weights", "missing"])}
    assert set(paths) == {"config.json", "weights"}
    # The client validates the model card before uploading it.
    assert hub.request_count("validate_yaml") == 1


def test_tags_refs_and_downloads_by_branch_tag_and_sha(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    v1 = first_version()
    c1 = commit_files(api, v1, "Publish v1")
    api.create_tag(repo, tag="v1", revision=c1)
    v2_changes = {"config.json": b'{"hidden_size": 384, "num_heads": 6}\n', "weights/extra.bin": b"\x00\x01"}
    c2 = api.create_commit(
        repo,
        [add(p, d) for p, d in v2_changes.items()] + [CommitOperationDelete("notes/eval.txt")],
        commit_message="Publish v2",
    ).oid
    gitattributes = hub.read_file(repo, ".gitattributes")
    expected_v1 = {".gitattributes": gitattributes, **v1}
    expected_v2 = {".gitattributes": gitattributes, **{p: d for p, d in v1.items() if p != "notes/eval.txt"}}
    expected_v2.update(v2_changes)

    refs = api.list_repo_refs(repo)
    assert [(b.name, b.ref, b.target_commit) for b in refs.branches] == [("main", "refs/heads/main", c2)]
    assert [(t.name, t.ref, t.target_commit) for t in refs.tags] == [("v1", "refs/tags/v1", c1)]
    assert refs.converts == []

    assert folder_files(snapshot_download(repo, endpoint=hub.endpoint)) == expected_v2
    assert folder_files(snapshot_download(repo, revision="v1", endpoint=hub.endpoint)) == expected_v1
    assert folder_files(snapshot_download(repo, revision=c1, endpoint=hub.endpoint)) == expected_v1
    one = hf_hub_download(repo, "weights/model.bin", revision="v1", endpoint=hub.endpoint)
    assert Path(one).read_bytes() == WEIGHTS
    assert api.model_info(repo, revision="v1").sha == c1

    api.delete_tag(repo, tag="v1")
    assert api.list_repo_refs(repo).tags == []
    with pytest.raises(RevisionNotFoundError):
        api.model_info(repo, revision="v1")


def test_branches(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    c1 = commit_files(api, {"config.json": CONFIG})
    api.create_branch(repo, branch="staging")
    c2 = commit_files(api, {"config.json": b"{}"}, revision="staging")
    assert hub.refs(repo)["branches"] == {"main": c1, "staging": c2}
    assert hub.read_file(repo, "config.json") == CONFIG
    assert hub.read_file(repo, "config.json", revision="staging") == b"{}"
    api.delete_branch(repo, branch="staging")
    assert hub.refs(repo)["branches"] == {"main": c1}


def test_commits_are_all_or_nothing(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    head = commit_files(api, {"config.json": CONFIG})
    with pytest.raises(RemoteEntryNotFoundError):
        api.create_commit(
            repo,
            [add("new.txt", b"new"), CommitOperationDelete("not-there.txt")],
            commit_message="half valid",
        )
    assert hub.head(repo) == head
    assert "new.txt" not in hub.snapshot(repo)


def test_upload_folder_with_delete_patterns(hub: LoopbackHub, api: HfApi, repo: str, tmp_path: Path) -> None:
    commit_files(api, {"old.txt": b"old", "keep.json": b"{}"})
    folder = tmp_path / "card"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "new.txt").write_bytes(b"new")
    api.upload_folder(repo_id=repo, folder_path=folder, delete_patterns="*.txt", commit_message="Replace")
    assert set(hub.snapshot(repo)) == {".gitattributes", "keep.json", "sub/new.txt"}
    assert len(hub.commits(repo)) == 3  # one commit: Xet is off, so upload_folder does not split commits


def test_unchanged_files_make_no_commit(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    head = commit_files(api, {"config.json": CONFIG})
    # preupload reports the remote oid of each path; the client drops files that did not change.
    assert commit_files(api, {"config.json": CONFIG}) == head
    assert hub.head(repo) == head
    assert hub.request_count("commit") == 1


def test_state_survives_a_restart(hub: LoopbackHub, api: HfApi, repo: str, tmp_path: Path) -> None:
    head = commit_files(api, {"config.json": CONFIG})
    hub.stop()
    with LoopbackHub(tmp_path / "hub", token=TOKEN) as again:
        assert HfApi(endpoint=again.endpoint, token=TOKEN).model_info(repo).sha == head
        assert again.read_file(repo, "config.json") == CONFIG


def test_spaces_are_served_apart_from_models(hub: LoopbackHub, api: HfApi, repo: str, tmp_path: Path) -> None:
    """A Space is created with its SDK, committed to, listed, downloaded and faulted through its own routes
    (`/api/spaces/…`, `/spaces/…/resolve/…`) under the models' route names; a model of the same id is another
    repository, and both survive a restart."""
    url = api.create_repo(REPO, repo_type="space", space_sdk="gradio")
    assert url == f"{hub.endpoint}/spaces/{REPO}" and hub.space_sdk(REPO) == "gradio"
    assert api.create_repo(REPO, repo_type="space", space_sdk="gradio", exist_ok=True) == url
    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_repo(REPO, repo_type="space", space_sdk="gradio")
    assert excinfo.value.response.status_code == 409
    # Like the Hub, a new Space has one system commit: .gitattributes and a README.md naming its SDK.
    (initial,) = hub.commits(REPO, repo_type="space")
    assert initial.author == "system" and set(initial.files) == {".gitattributes", "README.md"}
    assert "sdk: gradio" in hub.read_file(REPO, "README.md", repo_type="space").decode()

    hub.faults.add("commit", "status", status=500)
    with pytest.raises(HfHubHTTPError):
        api.upload_file(path_or_fileobj=b"print(1)\n", path_in_repo="app.py", repo_id=REPO, repo_type="space")
    assert [r.path for r in hub.requests if r.fault] == [f"/api/spaces/{REPO}/commit/main"]
    head = api.upload_file(
        path_or_fileobj=b"print(1)\n", path_in_repo="app.py", repo_id=REPO, repo_type="space"
    ).oid
    assert api.space_info(REPO).sha == head == hub.head(REPO, repo_type="space")
    assert [c.oid for c in hub.commits(REPO, repo_type="space")] == [head, initial.oid]
    assert sorted(api.list_repo_files(REPO, repo_type="space")) == [".gitattributes", "README.md", "app.py"]
    path = hf_hub_download(REPO, "app.py", repo_type="space", cache_dir=tmp_path / "cache")
    assert Path(path).read_bytes() == b"print(1)\n"
    assert hub.request_count("resolve", method="GET") == 1

    # The model of the same id is untouched, and listed alone among the models.
    assert set(hub.snapshot(repo)) == {".gitattributes"} and hub.repo_ids() == [repo]
    assert [model.id for model in api.list_models(author=USER)] == [repo]
    hub.stop()
    with LoopbackHub(tmp_path / "hub", token=TOKEN) as again:
        assert again.repo_ids("space") == [REPO] and again.space_sdk(REPO) == "gradio"
        assert again.read_file(REPO, "app.py", repo_type="space") == b"print(1)\n"
        assert again.head(repo) != again.head(REPO, repo_type="space")


def test_resolve_headers_and_ranges(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    hub.lfs_threshold = 1024 * 1024
    head = commit_files(api, {"config.json": CONFIG, "weights/model.bin": WEIGHTS})
    base = f"{hub.endpoint}/{repo}/resolve"
    with httpx2.Client() as client:
        regular = client.head(f"{base}/main/config.json")
        assert regular.headers["ETag"] == f'"{git_blob_id(CONFIG)}"'
        assert regular.headers["X-Repo-Commit"] == head
        assert int(regular.headers["Content-Length"]) == len(CONFIG)
        assert "X-Linked-Etag" not in regular.headers
        lfs = client.head(f"{base}/{head}/weights/model.bin")
        sha256 = hashlib.sha256(WEIGHTS).hexdigest()
        assert lfs.headers["ETag"] == lfs.headers["X-Linked-Etag"] == f'"{sha256}"'
        assert int(lfs.headers["X-Linked-Size"]) == len(WEIGHTS)
        part = client.get(f"{base}/main/weights/model.bin", headers={"Range": "bytes=100-199"})
        assert part.status_code == 206 and part.content == WEIGHTS[100:200]
        assert part.headers["Content-Range"] == f"bytes 100-199/{len(WEIGHTS)}"
        tail = client.get(f"{base}/main/weights/model.bin", headers={"Range": "bytes=-10"})
        assert tail.content == WEIGHTS[-10:]
        beyond = client.get(f"{base}/main/config.json", headers={"Range": f"bytes={len(CONFIG)}-"})
        assert beyond.status_code == 416
        missing = client.head(f"{base}/main/nope.txt")
        assert missing.status_code == 404 and missing.headers["X-Error-Code"] == "EntryNotFound"
        assert missing.headers["X-Repo-Commit"] == head


# ------------------------------------------------------------------------------------------------
# Concurrency and parent_commit


def test_stale_parent_commit_is_rejected_and_repo_unchanged(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    parent = commit_files(api, {"config.json": CONFIG})
    newer = commit_files(api, {"notes/eval.txt": b"acc 0.91\n"})
    with pytest.raises(HfHubHTTPError) as excinfo:
        commit_files(api, {"config.json": b"{}"}, parent_commit=parent)
    assert excinfo.value.response.status_code == 412
    assert CONFLICT_MESSAGE in str(excinfo.value)
    assert hub.head(repo) == newer
    assert hub.read_file(repo, "config.json") == CONFIG
    # With the right parent (also as a short sha) the commit goes through.
    assert commit_files(api, {"config.json": b"{}"}, parent_commit=newer[:7]) == hub.head(repo)


def test_concurrent_publishes_from_the_same_parent_do_not_interleave(
    hub: LoopbackHub, api: HfApi, repo: str
) -> None:
    parent = hub.head(repo)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def publish(name: str) -> None:
        files = {
            f"{name}/a.txt": name.encode(),
            f"{name}/b.txt": name.encode() * 2,
            "owner.txt": name.encode(),
        }
        barrier.wait()
        try:
            outcomes[name] = commit_files(api, files, f"publish {name}", parent_commit=parent)
        except HfHubHTTPError as exc:
            outcomes[name] = exc.response.status_code

    threads = [threading.Thread(target=publish, args=(name,)) for name in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    (winner,) = [name for name, outcome in outcomes.items() if isinstance(outcome, str)]
    assert [outcome for outcome in outcomes.values() if not isinstance(outcome, str)] == [412]
    assert hub.head(repo) == outcomes[winner]
    snapshot = hub.snapshot(repo)
    assert snapshot["owner.txt"] == winner.encode()
    assert {p.split("/")[0] for p in snapshot if "/" in p} == {winner}


# ------------------------------------------------------------------------------------------------
# Errors and authentication


def test_missing_repo_and_revision(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    commit_files(api, {"config.json": CONFIG})
    with pytest.raises(RepositoryNotFoundError):
        api.model_info(f"{USER}/missing")
    with pytest.raises(RevisionNotFoundError):
        api.model_info(repo, revision="no-such-branch")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(f"{USER}/missing", "config.json", endpoint=hub.endpoint)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(repo, "config.json", revision="no-such-branch", endpoint=hub.endpoint)
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(repo, "missing.json", endpoint=hub.endpoint)
    with pytest.raises(RepositoryNotFoundError):
        api.create_commit(f"{USER}/missing", [add("x.txt", b"x")], commit_message="x")


def test_writes_need_the_token(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    head = commit_files(api, {"config.json": CONFIG})
    anonymous = HfApi(endpoint=hub.endpoint, token=False)
    wrong = HfApi(endpoint=hub.endpoint, token="hf_wrong")
    for client in (anonymous, wrong):
        with pytest.raises(HfHubHTTPError) as excinfo:
            client.create_repo(f"{USER}/other")
        assert excinfo.value.response.status_code == 401
        with pytest.raises(HfHubHTTPError) as excinfo:
            client.create_commit(repo, [add("x.txt", b"x")], commit_message="sneaky")
        assert excinfo.value.response.status_code == 401
    assert hub.head(repo) == head and hub.repo_ids() == [repo]
    # Reads may be anonymous; a wrong token is refused everywhere, as on the Hub.
    assert anonymous.model_info(repo).sha == head
    with pytest.raises(HfHubHTTPError):
        wrong.model_info(repo)
    assert api.whoami()["name"] == USER
    with pytest.raises(HfHubHTTPError, match="Invalid user token"):
        wrong.whoami()


def test_fixture_points_the_default_client_at_the_hub(hub: LoopbackHub, repo: str) -> None:
    """No explicit endpoint or token: the fixture's patched constants and HF_TOKEN are enough."""
    assert constants.is_offline_mode() is False
    assert os.environ["HF_HUB_OFFLINE"] == "0" and os.environ["HF_ENDPOINT"] == hub.endpoint
    head = HfApi().create_commit(repo, [add("config.json", CONFIG)], commit_message="x").oid
    assert Path(hf_hub_download(repo, "config.json")).read_bytes() == CONFIG
    assert Path(hf_hub_download(repo, "config.json")).is_relative_to(constants.HF_HUB_CACHE)
    # A subprocess (e.g. a CLI under test) gets the same settings from the environment alone.
    script = f"from huggingface_hub import HfApi; print(HfApi().model_info({repo!r}).sha)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == head


# ------------------------------------------------------------------------------------------------
# Faults


@pytest.mark.slow
def test_preupload_503_burst_is_retried_by_the_client(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    hub.faults.add("preupload", "status", status=503, times=2)
    head = commit_files(api, {"config.json": CONFIG})
    assert hub.read_file(repo, "config.json") == CONFIG and hub.head(repo) == head
    assert [r.status for r in hub.requests if r.route == "preupload"] == [503, 503, 200]


def test_commit_500_surfaces_and_leaves_the_repo_unchanged(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    head = commit_files(api, {"config.json": CONFIG})
    fault = hub.faults.add("commit", "status", status=500)
    with pytest.raises(HfHubHTTPError) as excinfo:
        commit_files(api, {"config.json": b"{}", "weights/model.bin": WEIGHTS})
    assert excinfo.value.response.status_code == 500
    assert fault.fired == 1 and hub.request_count("commit", status=500) == 1  # the commit POST is not retried
    assert hub.head(repo) == head and hub.read_file(repo, "config.json") == CONFIG
    assert commit_files(api, {"config.json": b"{}"}) == hub.head(repo) != head


@pytest.mark.slow
def test_rate_limit_with_retry_after_is_honoured(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    hub.faults.add("tree", "rate_limit", retry_after=1)
    started = time.monotonic()
    assert api.list_repo_files(repo) == [".gitattributes"]
    assert time.monotonic() - started >= 1.5  # the client waits Retry-After + 1 s
    assert [r.status for r in hub.requests if r.route == "tree"] == [429, 200]


def test_hub_backoff_is_the_clients_own_schedule() -> None:
    """HUB_BACKOFF, which a push follows and a download's deadline checks against, is what
    huggingface_hub's http_backoff does by default: an upgrade that changes it fails here."""
    defaults = {name: p.default for name, p in inspect.signature(http_backoff).parameters.items()}
    assert HUB_BACKOFF.retries == defaults["max_retries"]
    assert (HUB_BACKOFF.base_wait_s, HUB_BACKOFF.max_wait_s) == (
        defaults["base_wait_time"],
        defaults["max_wait_time"],
    )
    assert HUB_BACKOFF.statuses == frozenset(defaults["retry_on_status_codes"])
    # http_backoff reads Retry-After in seconds only; a push's own retries read an HTTP date too.
    dated = httpx2.Response(503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert HUB_BACKOFF.asked_wait_s(dated) is None and HUB_BACKOFF.asked_wait_s(dated, http_date=True) == 0.0
    assert HUB_BACKOFF.asked_wait_s(httpx2.Response(404, headers={"Retry-After": "3"})) is None


def test_connection_dropped_mid_commit_upload(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    head = hub.head(repo)
    hub.faults.add("commit", "drop", after_bytes=64 * 1024)
    with pytest.raises(httpx2.TransportError):
        commit_files(api, first_version())
    assert hub.head(repo) == head and set(hub.snapshot(repo)) == {".gitattributes"}
    assert [r.status for r in hub.requests if r.route == "commit"] == [None]


def test_lost_commit_response_means_the_commit_landed(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    head = hub.head(repo)
    hub.faults.add("commit", "lose_response")
    with pytest.raises(httpx2.TransportError):
        commit_files(api, {"config.json": CONFIG}, parent_commit=head)
    landed = hub.head(repo)
    assert landed != head and hub.read_file(repo, "config.json") == CONFIG
    # Retrying the same files is a no-op: preupload reports them unchanged, so the client sends no
    # commit at all (and therefore never checks parent_commit) and returns the current head.
    assert commit_files(api, {"config.json": CONFIG}, parent_commit=head) == landed
    assert hub.request_count("commit") == 1 and len(hub.commits(repo)) == 2
    # Anything that differs does reach the server, where the stale parent is refused.
    with pytest.raises(HfHubHTTPError) as excinfo:
        commit_files(api, {"config.json": CONFIG, "extra.txt": b"x"}, parent_commit=head)
    assert excinfo.value.response.status_code == 412


@pytest.mark.parametrize("status", [412, 409])
def test_commit_conflict_fault(hub: LoopbackHub, api: HfApi, repo: str, status: int) -> None:
    head = hub.head(repo)
    hub.faults.add("commit", "conflict", status=status)
    with pytest.raises(HfHubHTTPError) as excinfo:
        commit_files(api, {"config.json": CONFIG})
    assert excinfo.value.response.status_code == status
    assert CONFLICT_MESSAGE in str(excinfo.value)
    assert hub.head(repo) == head


def test_slow_responses_time_out(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    commit_files(api, {"config.json": CONFIG})
    hub.faults.add("repo_info", "delay", delay=5)
    with pytest.raises(httpx2.TimeoutException):
        api.model_info(repo, timeout=0.5)
    # hf_hub_download: the HEAD times out after etag_timeout, then the client tries again (with
    # backoff and a 60 s timeout) before giving up.
    hub.faults.add("resolve", "delay", delay=5, method="HEAD")
    started = time.monotonic()
    path = hf_hub_download(repo, "config.json", endpoint=hub.endpoint, etag_timeout=0.5)
    assert Path(path).read_bytes() == CONFIG and time.monotonic() - started < 4
    assert hub.request_count("resolve", method="HEAD") == 2


def test_download_recovers_from_errors(hub: LoopbackHub, api: HfApi, repo: str, tmp_path: Path) -> None:
    commit_files(api, {"weights/model.bin": WEIGHTS})
    # A dropped GET is resumed by the client; a 503 on the HEAD is retried (only when nothing is cached).
    hub.faults.add("resolve", "drop", method="GET")
    hub.faults.add("resolve", "status", status=503, method="HEAD")
    path = hf_hub_download(repo, "weights/model.bin", endpoint=hub.endpoint, cache_dir=tmp_path / "c")
    assert Path(path).read_bytes() == WEIGHTS
    assert [(r.method, r.status) for r in hub.requests if r.route == "resolve"] == [
        ("HEAD", 503),
        ("HEAD", 200),
        ("GET", None),
        ("GET", 200),
    ]


def test_dropped_lfs_upload_is_retried(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    hub.lfs_threshold = 1024 * 1024
    hub.faults.add("lfs_upload", "drop")
    head = commit_files(api, first_version())
    assert hub.read_file(repo, "weights/model.bin") == WEIGHTS and hub.head(repo) == head
    assert [r.status for r in hub.requests if r.route == "lfs_upload"] == [None, 200]


def test_fault_plan_rejects_unknown_routes_and_kinds(hub: LoopbackHub) -> None:
    with pytest.raises(ValueError, match="matches none"):
        hub.faults.add("comit", "status")
    with pytest.raises(ValueError, match="Unknown fault kind"):
        hub.faults.add("commit", "explode")  # type: ignore[arg-type]
    hub.faults.add("lfs_*", "status", times=None)
    assert len(hub.faults.pending()) == 1
    hub.faults.clear()
    assert hub.faults.pending() == []


# ------------------------------------------------------------------------------------------------
# LFS and server-side corruption


def test_lfs_upload_path(hub: LoopbackHub, api: HfApi, repo: str) -> None:
    hub.lfs_threshold = 1024 * 1024
    head = commit_files(api, first_version())
    assert [r.route for r in hub.requests if r.route.startswith("lfs_")] == [
        "lfs_batch",
        "lfs_upload",
        "lfs_verify",
    ]
    (weights,) = [s for s in api.model_info(repo, files_metadata=True).siblings or [] if s.lfs]
    assert weights.rfilename == "weights/model.bin"
    assert weights.lfs is not None and weights.lfs.sha256 == hashlib.sha256(WEIGHTS).hexdigest()
    assert weights.lfs.size == len(WEIGHTS)
    assert Path(hf_hub_download(repo, "weights/model.bin", endpoint=hub.endpoint)).read_bytes() == WEIGHTS
    # The same content again: preupload reports the sha256 and the client drops the unchanged file
    # (after asking the batch API, which answers "already uploaded"): no upload, no commit.
    assert commit_files(api, {"weights/model.bin": WEIGHTS}) == head
    assert hub.request_count("lfs_upload") == 1 and hub.request_count("commit") == 1


def test_tamper_changes_what_downloads_return(
    hub: LoopbackHub, api: HfApi, repo: str, tmp_path: Path
) -> None:
    head = commit_files(api, {"config.json": CONFIG, "weights/model.bin": WEIGHTS})
    cached = hf_hub_download(repo, "config.json", endpoint=hub.endpoint)
    assert Path(cached).read_bytes() == CONFIG

    corrupted = b'{"corrupted": true}\n'
    hub.tamper(repo, "config.json", corrupted)
    assert hub.head(repo) == head and len(hub.commits(repo)) == 2  # no commit was made
    fresh = hf_hub_download(repo, "config.json", endpoint=hub.endpoint, cache_dir=tmp_path / "fresh")
    assert Path(fresh).read_bytes() == corrupted
    # The cache keeps one file per (commit, path): a cache that already holds this commit keeps
    # answering the old bytes, even with force_download (2.4.0 fetches the new blob but leaves the
    # snapshot link alone; a local_dir download copies from that cache too). Verifying a publish
    # must download into a fresh cache_dir.
    assert Path(hf_hub_download(repo, "config.json", endpoint=hub.endpoint)).read_bytes() == CONFIG
    forced = hf_hub_download(repo, "config.json", endpoint=hub.endpoint, force_download=True)
    assert Path(forced).read_bytes() == CONFIG
    siblings = {s.rfilename: s for s in api.model_info(repo, files_metadata=True).siblings or []}
    assert siblings["config.json"].blob_id == git_blob_id(corrupted)

    hub.delete_file_silently(repo, "weights/model.bin")
    assert hub.head(repo) == head
    assert "weights/model.bin" not in api.list_repo_files(repo)
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(repo, "weights/model.bin", endpoint=hub.endpoint, cache_dir=tmp_path / "fresh2")
