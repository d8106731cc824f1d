"""Downloading and re-verifying through a Hub server this project did not write: olah (see olah_hub.py).

A run is pushed to `LoopbackHub` the way `publish --push` pushes it, then its commit is copied into olah's
mirror folder as a git repository. Git recomputes there the blob and tree ids our loopback server had
reported, and `load_verified`, `attncard download` and `attncard verify` read the run back through olah's
implementation of the Hub API. Tampered and missing files are made as new git commits on olah's side.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFile

from attncard.pipeline.cli import main
from attncard.pipeline.publish.push import push_run_folder
from attncard.pipeline.record.errors import IntegrityError, RepoNotFoundError, RevisionNotFoundError
from attncard.pipeline.record.results import Results
from attncard.pipeline.run.data import load_task
from attncard.pipeline.scoring.metrics import predictions_sha256
from attncard.pipeline.verify.download import load_verified, predict
from conftest import HUB_USER, LFS_THRESHOLD, MINILM_REPO, TINY_GPT2_REPO, serve
from hub_server import LoopbackHub
from olah_hub import OlahHub

# huggingface_hub 2.4.0 itself uploads LFS parts with httpx2's deprecated `data=<file>`.
pytestmark = [
    # olah runs in its own environment (.tools/olah), a server we did not write: `make test-all` runs these.
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning"),
]

REPO = TINY_GPT2_REPO


def serve_with_lfs(root: Path, tmp_path: Path, hub_token: str, monkeypatch) -> Iterator[LoopbackHub]:
    """conftest's `serve` of a loopback Hub on `root` that stores files over 4 KB in LFS, so that olah serves
    both kinds: the weights, the tokenizer, results.json and the card go to LFS, the small configs stay
    regular git blobs."""
    server = LoopbackHub(root, token=hub_token, user=HUB_USER, lfs_threshold=LFS_THRESHOLD)
    yield from serve(server, tmp_path, hub_token, monkeypatch)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_token: str) -> Iterator[LoopbackHub]:
    """conftest's `hub`, storing files over 4 KB in LFS (see `serve_with_lfs`)."""
    yield from serve_with_lfs(tmp_path / "hub", tmp_path, hub_token, monkeypatch)


@pytest.fixture
def minilm_hub(
    minilm_sst2_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_token: str
) -> Iterator[LoopbackHub]:
    """Like `hub`, holding the shared real MiniLM run as its `publish --push` left it (conftest's
    `minilm_sst2_run`, pushed with the same LFS threshold): a copy of that Hub's folder, served."""
    _, hub_root = minilm_sst2_run
    root = Path(shutil.copytree(hub_root, tmp_path / "hub"))
    yield from serve_with_lfs(root, tmp_path, hub_token, monkeypatch)


@pytest.fixture(scope="module")
def olah_server(tmp_path_factory) -> Iterator[OlahHub]:
    with OlahHub(tmp_path_factory.mktemp("olah")) as server:
        yield server


@pytest.fixture
def olah(olah_server: OlahHub) -> Iterator[OlahHub]:
    """The module's olah server, its mirror folder emptied after each test."""
    yield olah_server
    olah_server.delete_all()


def mirror(hub: LoopbackHub, olah: OlahHub, repo_id: str) -> tuple[str, set[str]]:
    """Copies the head of `repo_id`'s main from `hub` into `olah` as one git commit; returns its sha and the
    paths stored in LFS.

    What is in LFS and every id are read from the loopback server's tree API through the client; the ids
    must equal the ones git computes for the same files.
    """
    entries = list(HfApi(endpoint=hub.endpoint).list_repo_tree(repo_id, recursive=True))
    lfs = {entry.path for entry in entries if isinstance(entry, RepoFile) and entry.lfs is not None}
    assert "adapter_model.safetensors" in lfs and "config.json" not in lfs
    commit = olah.commit(repo_id, hub.snapshot(repo_id), lfs=lfs, message=f"copy of {hub.head(repo_id)}")
    reported = {
        entry.path: entry.blob_id if isinstance(entry, RepoFile) else entry.tree_id for entry in entries
    }
    assert reported == olah.git_ids(repo_id)
    return commit, lfs


def run_files(run_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line of the error, after huggingface_hub's progress bar (which redraws itself with \\r)."""
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if line.strip() and "\rFetching " not in line]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


def test_a_pushed_run_loads_and_reverifies_through_olah(
    hub, olah, tiny_gpt2_run, gpt2_base, fresh_cache, tmp_path: Path, capsys
) -> None:
    run_dir, glue = tiny_gpt2_run
    pushed = push_run_folder(run_dir, REPO, endpoint=hub.endpoint)
    commit, _ = mirror(hub, olah, REPO)
    olah.tag(REPO, pushed.tag)
    results = Results.load(run_dir)
    data = load_task("sst2", glue)
    for revision in (None, "main", pushed.tag, commit):
        verified = load_verified(
            REPO, revision, endpoint=olah.endpoint, cache_dir=fresh_cache(), base_model=gpt2_base
        )
        assert (verified.repo_id, verified.revision) == (REPO, commit)
        assert predictions_sha256(predict(verified, data)) == results.metrics.predictions_sha256

    output = tmp_path / "downloaded"
    assert main(["download", REPO, "--hub-endpoint", olah.endpoint, "--output", str(output)]) == 0
    assert capsys.readouterr().out.strip() == str(output)
    assert run_files(output) == run_files(run_dir)

    verify = [REPO, "--revision", pushed.tag, "--hub-endpoint", olah.endpoint, "--data-dir", str(glue)]
    verify += ["--base-model", str(gpt2_base)]
    assert main(["verify", *verify]) == 0
    assert f"{results.metrics.predictions_sha256[:12]}" in capsys.readouterr().out


def test_tampered_and_missing_files_on_olah_are_refused(
    hub, olah, tiny_gpt2_run, fresh_cache, capsys
) -> None:
    run_dir, _ = tiny_gpt2_run
    push_run_folder(run_dir, REPO, endpoint=hub.endpoint)
    _, lfs = mirror(hub, olah, REPO)
    published = hub.snapshot(REPO)

    weights = bytearray(published["adapter_model.safetensors"])
    weights[-1] ^= 0x01  # one bit of the last tensor
    changes = {
        "adapter_model.safetensors": bytes(weights),
        "config.json": published["config.json"].replace(b'"n_layer": 2', b'"n_layer": 1'),
    }
    for path, tampered in changes.items():
        commit = olah.commit(REPO, {**published, path: tampered}, lfs=lfs, message=f"tamper with {path}")
        expected = hashlib.sha256(published[path]).hexdigest()
        with pytest.raises(IntegrityError) as caught:
            load_verified(REPO, endpoint=olah.endpoint, cache_dir=fresh_cache())
        actual = hashlib.sha256(tampered).hexdigest()
        assert str(caught.value).startswith(
            f"{REPO}@{commit[:12]}: {path} has sha256 {actual[:12]}… but the manifest expects "
            f"{expected[:12]}…: the file changed after publishing; do not use this checkpoint"
        )

    without = {path: data for path, data in published.items() if path != "tokenizer.json"}
    olah.commit(REPO, without, lfs=lfs, message="remove tokenizer.json")
    with pytest.raises(IntegrityError, match=r"tokenizer\.json is missing \(the manifest expects sha256 "):
        load_verified(REPO, endpoint=olah.endpoint, cache_dir=fresh_cache())
    capsys.readouterr()
    assert main(["download", REPO, "--hub-endpoint", olah.endpoint]) == 2
    assert "tokenizer.json is missing" in one_line_error(capsys)


def test_missing_repo_and_revision_on_olah(hub, olah, tiny_gpt2_run, fresh_cache) -> None:
    run_dir, _ = tiny_gpt2_run
    push_run_folder(run_dir, REPO, endpoint=hub.endpoint)
    mirror(hub, olah, REPO)
    with pytest.raises(RepoNotFoundError, match=f"no repository '{HUB_USER}/missing' on {olah.endpoint}"):
        load_verified(f"{HUB_USER}/missing", endpoint=olah.endpoint, cache_dir=fresh_cache())
    # olah answers "repository not found" for a tag it lacks; load_verified still names the revision.
    with pytest.raises(RevisionNotFoundError, match=f"on {olah.endpoint} has no branch, tag or commit 'v9'"):
        load_verified(REPO, "v9", endpoint=olah.endpoint, cache_dir=fresh_cache())


@pytest.mark.slow
def test_minilm_publish_push_then_download_through_olah(
    glue, minilm_sst2_run, minilm_hub, olah, tmp_path: Path, capsys
) -> None:
    """The acceptance path with the real model: `publish --push` makes one commit holding every file, an
    identical push makes none, and the run downloaded through olah predicts exactly as recorded; a file
    tampered on the server is refused. The `publish --push` of MiniLM on the real SST-2 is the session's
    shared one (conftest's `minilm_sst2_run`); `minilm_hub` serves a copy of the Hub it pushed to."""
    hub, repo = minilm_hub, MINILM_REPO
    run_dir, _ = minilm_sst2_run
    assert Results.load(run_dir).command.endswith(f"--repo-id {repo}")  # the run was published for `repo`
    initial, published = hub.commits(repo)[::-1]
    assert published.parent == initial.oid
    assert {path: data for path, data in hub.snapshot(repo).items() if path != ".gitattributes"} == run_files(
        run_dir
    )
    assert main(["push", str(run_dir), "--repo-id", repo, "--hub-endpoint", hub.endpoint]) == 0
    assert [c.oid for c in hub.commits(repo)] == [published.oid, initial.oid]

    commit, lfs = mirror(hub, olah, repo)
    # `attncard download` as a user runs it, the Hub named by HF_ENDPOINT (read when huggingface_hub loads).
    output = tmp_path / "downloaded"
    env = {**os.environ, "HF_ENDPOINT": olah.endpoint, "HF_HOME": str(tmp_path / "hf-home")}
    attncard = Path(sys.executable).with_name("attncard")
    done = subprocess.run(
        [str(attncard), "download", repo, "--output", str(output)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(output)
    assert f"PASS_NO_COMPRESSION: {repo}@{commit[:12]}" in done.stderr
    assert run_files(output) == run_files(run_dir)
    results = Results.load(run_dir)
    verified = load_verified(repo, endpoint=olah.endpoint, cache_dir=tmp_path / "cache")
    assert verified.revision == commit
    data = load_task("sst2", glue)
    predictions = predict(verified, data)
    assert predictions_sha256(predictions) == results.metrics.predictions_sha256
    correct = sum(p == t for p, t in zip(predictions, data.validation["label"], strict=True))
    assert correct / len(predictions) == results.metrics.accuracy
    capsys.readouterr()
    assert main(["verify", repo, "--hub-endpoint", olah.endpoint, "--data-dir", str(glue)]) == 0

    snapshot = hub.snapshot(repo)
    weights = bytearray(snapshot["adapter_model.safetensors"])
    weights[-1] ^= 0x01
    olah.commit(repo, {**snapshot, "adapter_model.safetensors": bytes(weights)}, lfs=lfs)
    with pytest.raises(IntegrityError, match=r"adapter_model\.safetensors has sha256 .* the file changed"):
        load_verified(repo, endpoint=olah.endpoint, cache_dir=tmp_path / "cache-2")
