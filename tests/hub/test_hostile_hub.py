"""Hub I/O against a Hub or mirror that lies (tests/support/hostile_hub.py): nothing it answers may choose a
path, see the token, or hang a download or a push.

The tiny GPT-2 run is committed to a `HostileHub` the way publishing pushes it; each test then makes the
server hostile in one way and downloads (`download_verified`, `attncard download`, `fetch_run`) or pushes.

Where each row of issue 9 (a verified download a hostile Hub cannot fool) is tested:

- 1, a path outside the cache (ETag, name, redirect, bytes): here, `test_a_hostile_etag_…`,
  `test_a_hostile_name_…`, `test_a_redirect_…`, `test_bytes_that_differ_…`;
- 2, repository code (`auto_map`, `.py`, peft fields): tests/checks/test_hostile_runs.py,
`test_remote_code_…`,
  `test_tokenizer_auto_map_…`, `test_adapter_config_…`;
- 3, another results.json under a run tag: tests/checks/test_hostile_runs.py,
`test_run_tag_and_expected_digest_…`;
- 4, a FAIL marked PASS, edited figures or card: tests/checks/test_hostile_runs.py,
`test_a_fail_marked_pass_…`,
  `test_edited_figures_…`, `test_an_edited_card_…`, `test_verify_recomputes_…`;
- 5, data the repository chose: tests/checks/test_hostile_runs.py, `test_verify_refuses_data_other_than_…`;
- 6, the token echoed or sent over plain http: here, `test_an_echoed_token_…`, `test_plain_http_…`;
- 7, a trickling server: here, `test_a_trickling_server_…`, `test_a_wait_asked_past_the_deadline_…`;
- 8, malformed records: tests/checks/test_hostile_runs.py, `test_malformed_results_json_…`,
`test_adapter_config_…`;
- 9, local paths published: tests/publish/test_publish.py, `test_no_published_file_holds_a_local_path`;
- 10, bad CLI input found late: tests/cli/test_cli.py, `test_an_empty_model_name_…` and the tests after it;
- 11, unsigned or wrongly signed runs: tests/checks/test_hostile_runs.py, `test_push_signs_and_download_…`,
and
  tests/hub/test_signing.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import socket
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import datasets
import pytest
from huggingface_hub import constants
from huggingface_hub.utils import _http as hf_http
from transformers import AutoConfig

from attncard.pipeline.cli import main
from attncard.pipeline.hub import fetch, http
from attncard.pipeline.hub.endpoint import endpoint_key, hub_endpoint
from attncard.pipeline.hub.fetch import fetch_run
from attncard.pipeline.hub.http import HUB_BACKOFF
from attncard.pipeline.publish import push
from attncard.pipeline.publish.push import push_run_folder
from attncard.pipeline.record.errors import (
    AttncardError,
    DownloadError,
    HubAnswerError,
    HubDeadlineError,
    HubNoAnswerError,
    HubUnreachableError,
    InsecureEndpointError,
    IntegrityError,
    PushError,
)
from attncard.pipeline.record.results import Results
from attncard.pipeline.run.data import load_task_from_hub
from attncard.pipeline.run.models import base_model_license, load_model
from attncard.pipeline.scoring.tasks import get_task
from attncard.pipeline.verify import download
from attncard.pipeline.verify.download import download_verified
from conftest import HUB_USER, TINY_GPT2_REPO, commit_run_folder, serve
from hostile_hub import HostileHub

# huggingface_hub 2.4.0 itself uploads LFS parts with httpx2's deprecated `data=<file>`.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_hostileHubSecret_V4rq8Zt2mN6w"  # distinctive, so that finding it anywhere is unambiguous
REPO = TINY_GPT2_REPO
FOLDER = REPO.replace("/", "--")
DEADLINE_S = 2.0


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostileHub]:
    """A `HostileHub` (honest until a test says otherwise), the client pointed at it with `TOKEN`."""
    yield from serve(HostileHub(tmp_path / "hub", token=TOKEN, user=HUB_USER), tmp_path, TOKEN, monkeypatch)


@pytest.fixture
def published(hostile: HostileHub, tiny_gpt2_run) -> str:
    """The tiny run committed to the hostile Hub; returns the commit."""
    run_dir, _ = tiny_gpt2_run
    return commit_run_folder(hostile.endpoint, REPO, run_dir, TOKEN)


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        push, "HUB_BACKOFF", dataclasses.replace(HUB_BACKOFF, base_wait_s=0.05, max_wait_s=0.2)
    )


def snapshot(cache: Path, hub: HostileHub, commit: str) -> Path:
    """Where `fetch_run` keeps `commit` of `REPO` fetched from `hub` into `cache`."""
    return cache / endpoint_key(hub.endpoint) / FOLDER / commit


def tree_state(root: Path, skip: Path) -> dict[str, str]:
    """Path -> sha256 (or "dir") of everything under `root` except `skip` and what is under it."""
    state = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents:
            continue
        state[path.relative_to(root).as_posix()] = (
            hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        )
    return state


def assert_one_line_without_token(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and TOKEN not in text, text
    assert TOKEN not in "".join(traceback.format_exception(error)) + repr(error)
    return text


# ------------------------------------------------------------------------------------------------------------
# Row 1: no server answer chooses a path; every byte is checked against the listing


@pytest.mark.parametrize(
    "etag",
    ["../../../../x", "{root}/absolute-x", "e" * 4096, "not-a-sha-zz"],
    ids=["traversal", "absolute", "over-long", "not-hex"],
)
def test_a_hostile_etag_cannot_choose_a_path(hostile, published: str, tmp_path: Path, etag: str) -> None:
    root = tmp_path / "root"
    cache = root / "a" / "b" / "cache"
    cache.mkdir(parents=True)
    hostile.etag = etag.format(root=root)
    before = tree_state(root, cache)
    try:
        files = download_verified(REPO, endpoint=hostile.endpoint, cache_dir=cache)
    except AttncardError as error:
        files = error
    assert tree_state(root, cache) == before  # nothing outside the cache was written, even on an error
    assert not isinstance(files, Exception), files
    assert (files.folder, files.revision) == (snapshot(cache, hostile, published), published)
    for path in cache.rglob("*"):
        assert etag[:20] not in path.name  # no header named a file


@pytest.mark.parametrize(
    "name", ["../x", "{root}/abs-x", "a/../../x", "..\\x", "a//b", "./x"], ids=lambda name: repr(name)
)
def test_a_hostile_name_in_the_listing_is_refused(hostile, published: str, tmp_path: Path, name: str) -> None:
    root = tmp_path / "root"
    cache = root / "a" / "b" / "cache"
    cache.mkdir(parents=True)
    hostile.extra_tree_paths = [name.format(root=root)]
    before = tree_state(root, cache)
    with pytest.raises(DownloadError, match=r"lists an unsafe path .*; nothing of it was written") as caught:
        download_verified(REPO, endpoint=hostile.endpoint, cache_dir=cache)
    assert_one_line_without_token(caught.value)
    assert tree_state(root, cache) == before
    assert not (snapshot(cache, hostile, published)).exists()
    assert hostile.request_count("resolve") == 0  # refused before any file was asked for


def test_a_redirect_to_another_origin_gets_no_token(hostile, published: str, tmp_path: Path) -> None:
    # The same server under another name: another origin, as a CDN is.
    port = hostile.endpoint.rsplit(":", 1)[1]
    hostile.redirect_to = f"http://localhost:{port}"
    files = download_verified(REPO, endpoint=hostile.endpoint, cache_dir=tmp_path / "cache")
    assert files.folder == snapshot(tmp_path / "cache", hostile, published)
    resolved = [(host, auth) for host, path, auth in hostile.requests_seen if "/resolve/" in path]
    assert {host for host, _ in resolved} == {f"127.0.0.1:{port}", f"localhost:{port}"}
    assert all(auth == f"Bearer {TOKEN}" for host, auth in resolved if host.startswith("127.0.0.1"))
    assert all(auth is None for host, auth in resolved if host.startswith("localhost"))


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            lambda data: data.replace(b'"n_layer": 2', b'"n_layer": 1'),
            IntegrityError,
            "is not the .* its listing",
        ),
        (lambda data: data + b"\n" * 64, IntegrityError, "sent more than the .* bytes its listing gives"),
        (lambda data: data[:-8], DownloadError, r"sent \d+ of the \d+ bytes of config\.json"),
    ],
    ids=["changed", "longer", "shorter"],
)
def test_bytes_that_differ_from_the_listing_are_not_kept(
    hostile, published: str, tmp_path: Path, change, error, message
) -> None:
    hostile.served["config.json"] = change(hostile.read_file(REPO, "config.json"))
    cache = tmp_path / "cache"
    with pytest.raises(error, match=message) as caught:
        download_verified(REPO, endpoint=hostile.endpoint, cache_dir=cache)
    assert_one_line_without_token(caught.value)
    assert not (snapshot(cache, hostile, published) / "config.json").exists()
    assert not [path for path in cache.rglob("*.partial")]


def test_cached_files_are_not_downloaded_again_and_offline_needs_a_complete_snapshot(
    hostile, published: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = fetch_run(REPO, endpoint=hostile.endpoint, cache_dir=cache)
    downloads = hostile.request_count("resolve")
    assert first.folder == snapshot(cache, hostile, published) and downloads == 12  # the tiny run's files
    assert fetch_run(REPO, published, endpoint=hostile.endpoint, cache_dir=cache) == first
    assert hostile.request_count("resolve") == downloads  # a complete commit is not fetched again
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hostile.clear_requests()
    assert fetch_run(REPO, published, cache_dir=cache) == first
    assert fetch_run(REPO, cache_dir=cache) == first  # main, as the last fetch recorded it
    assert hostile.requests == []
    (first.folder / "config.json").unlink()
    with pytest.raises(
        HubUnreachableError, match=f"HF_HUB_OFFLINE is set and {REPO}@{published} is not in the"
    ):
        fetch_run(REPO, published, cache_dir=cache)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert fetch_run(REPO, endpoint=hostile.endpoint, cache_dir=cache) == first
    assert hostile.request_count("resolve") == 1  # only the missing file


# ------------------------------------------------------------------------------------------------------------
# Row 6: the token goes to the endpoint only, and never shows


@pytest.mark.parametrize(
    "echo",
    [{"repo_info": [500]}, {"repo_info": [401]}, {"tree": [501]}, {"resolve": [403]}, {"resolve": [500]}],
    ids=["info-500", "info-401", "tree-501", "file-403", "file-500"],
)
def test_an_echoed_token_never_shows_in_a_download(
    hostile, published: str, tmp_path: Path, echo, capfd, caplog, recwarn
) -> None:
    caplog.set_level(logging.DEBUG)
    hostile.echo = {route: list(statuses) for route, statuses in echo.items()}
    with pytest.raises(AttncardError) as caught:
        download_verified(REPO, endpoint=hostile.endpoint, cache_dir=tmp_path / "cache-1")
    assert_one_line_without_token(caught.value)
    hostile.echo = {route: list(statuses) for route, statuses in echo.items()}
    assert main(["download", REPO, "--hub-endpoint", hostile.endpoint]) == 2
    out, err = capfd.readouterr()
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert any(auth == f"Bearer {TOKEN}" for _, _, auth in hostile.requests_seen)  # it was sent, and echoed
    shown = [out, err, caplog.text, *(str(warning.message) for warning in recwarn)]
    assert not [text for text in shown if TOKEN in text]


def test_an_echoed_token_never_shows_in_a_push(
    hostile, tiny_gpt2_run, short_waits, capfd, caplog, recwarn
) -> None:
    run_dir, _ = tiny_gpt2_run
    caplog.set_level(logging.DEBUG)
    # A retried 503 (its reason goes into a retry warning), then a 400 that ends the push.
    hostile.echo = {"commit": [503], "create_tag": [400]}
    assert main(["push", str(run_dir), "--repo-id", REPO, "--hub-endpoint", hostile.endpoint]) == 2
    out, err = capfd.readouterr()
    assert "push: the commit to" in err and "retry 1 of 5" in err and "Authorization: Bearer <token>" in err
    assert err.splitlines()[-1].startswith("error: ") and "Bearer <token>" in err.splitlines()[-1]
    hostile.echo = {"create_repo": [400]}
    with pytest.raises(PushError) as caught:
        push_run_folder(run_dir, REPO, endpoint=hostile.endpoint)
    assert "Bearer <token>" in assert_one_line_without_token(caught.value)
    shown = [out, err, caplog.text, *(str(warning.message) for warning in recwarn)]
    assert not [text for text in shown if TOKEN in text]


def test_plain_http_to_another_host_is_refused_before_any_request(
    hostile, tiny_gpt2_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    run_dir, _ = tiny_gpt2_run
    contacted: list[object] = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: contacted.append(args) or [])
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: contacted.append(address))
    endpoint = "http://example.invalid"
    with pytest.raises(InsecureEndpointError, match="plain http: the token goes to the configured https"):
        download_verified(REPO, endpoint=endpoint, cache_dir=tmp_path / "cache")
    with pytest.raises(InsecureEndpointError, match="plain http"):
        push_run_folder(run_dir, REPO, endpoint=endpoint)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)  # as HF_ENDPOINT sets it
    assert main(["download", REPO]) == 2
    assert "the Hub endpoint http://example.invalid is plain http" in capsys.readouterr().err
    assert contacted == [] and hostile.requests_seen == []
    assert hub_endpoint("https://Hub.Example/mirror/") == "https://hub.example/mirror"
    for loopback in ("http://127.0.0.1:8080/", "http://localhost:1", "http://[::1]:2", "http://127.9.9.9"):
        assert hub_endpoint(loopback) == loopback.rstrip("/")
    for refused in ("ftp://hub.example", "hub.example", "https://user:pw@hub.example", "http://10.0.0.1"):
        with pytest.raises(InsecureEndpointError):
            hub_endpoint(refused)


# ------------------------------------------------------------------------------------------------------------
# Row 7: a trickle ends at the deadline


@pytest.mark.slow
@pytest.mark.parametrize(
    "trickle",
    [{"repo_info": "headers"}, {"tree": "body"}, {"resolve": "headers"}, {"resolve": "body"}],
    ids=["info-headers", "tree-body", "file-headers", "file-body"],
)
def test_a_trickling_server_cannot_hang_a_download(
    hostile, published: str, monkeypatch: pytest.MonkeyPatch, capsys, trickle
) -> None:
    # The per-read timeout is longer than the trickle's one second: only the deadline can end it.
    monkeypatch.setattr(fetch, "DEFAULT_TIMEOUT_S", 5.0)
    monkeypatch.setattr(fetch, "DEFAULT_DEADLINE_S", DEADLINE_S)
    hostile.trickle = trickle
    started = time.monotonic()
    assert main(["download", REPO, "--hub-endpoint", hostile.endpoint]) == 2
    assert time.monotonic() - started < DEADLINE_S + 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.fullmatch(
        rf"error: downloading {REPO} from {hostile.endpoint} ran past its deadline of 2 s "
        r".*--hub-deadline\)\n",
        err,
    ), err


def test_a_wait_asked_past_the_deadline_is_not_waited(hostile, published: str, tmp_path: Path) -> None:
    # huggingface_hub's listing would sleep Retry-After + 1 s before retrying.
    hostile.faults.add("tree", "rate_limit", retry_after=600)
    started = time.monotonic()
    with pytest.raises(HubDeadlineError, match="ran past its deadline of 2 s"):
        fetch_run(REPO, endpoint=hostile.endpoint, cache_dir=tmp_path / "cache", deadline=DEADLINE_S)
    assert time.monotonic() - started < DEADLINE_S


@pytest.mark.slow
@pytest.mark.parametrize(
    "trickle", [{"create_repo": "headers"}, {"repo_info": "body"}], ids=["repo-headers", "info-body"]
)
def test_a_trickling_server_cannot_hang_a_push(hostile, tiny_gpt2_run, trickle) -> None:
    run_dir, _ = tiny_gpt2_run
    hostile.trickle = trickle
    started = time.monotonic()
    with pytest.raises(HubDeadlineError) as caught:
        push_run_folder(run_dir, REPO, endpoint=hostile.endpoint, timeout=5.0, deadline=DEADLINE_S)
    assert time.monotonic() - started < DEADLINE_S + 2
    assert re.fullmatch(
        rf"pushing {run_dir} to {REPO} on {hostile.endpoint} ran past its deadline of 2 s .* push again "
        r"later, or allow more time \(deadline=\)",
        assert_one_line_without_token(caught.value),
    )
    # The deadline was the push's own: the client's factory is huggingface_hub's again.
    assert hf_http._GLOBAL_CLIENT_FACTORY is hf_http.default_client_factory


# ------------------------------------------------------------------------------------------------------------
# Issue 30: every library's Hub requests follow the endpoint rule; the cache is per endpoint; a server can
# fill neither the disk nor the memory, nor hold a download with silence; a push's failed upload is one line


def test_plain_http_hf_endpoint_is_refused_for_data_and_base_models_before_any_request(
    hostile, tiny_gpt2_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A name that reaches the hostile Hub but is not a loopback address: as a mirror on the network would.
    port = int(hostile.endpoint.rsplit(":", 1)[1])
    resolve = socket.getaddrinfo
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, *args, **kwargs: resolve(
            "127.0.0.1" if host == "hub.attncard.test" else host, *args, **kwargs
        ),
    )
    endpoint = f"http://hub.attncard.test:{port}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)  # as HF_ENDPOINT sets them, at import
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", f"{endpoint}/{{repo_id}}/resolve/{{revision}}/{{filename}}"
    )
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", endpoint)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False, raising=False)  # not in datasets 2.16
    hostile.requests_seen.clear()
    run_dir, _ = tiny_gpt2_run
    results = Results.load(run_dir)
    hub_base = dataclasses.replace(
        results, model=dataclasses.replace(results.model, model_id=f"{HUB_USER}/base", revision="b" * 40)
    )
    calls = {
        "the Hub's GLUE": lambda: load_task_from_hub(get_task("sst2"), revision="a" * 40),
        "a Hub model to train": lambda: load_model(f"{HUB_USER}/base", ["negative", "positive"]),
        "its licence": lambda: base_model_license(f"{HUB_USER}/base", f"{HUB_USER}/base", f"{HUB_USER}/base"),
        # The base model `download --verify` and `verify` load, read from HF_ENDPOINT by transformers.
        "a run's Hub base model": lambda: download.load_base_model(
            hub_base, AutoConfig.from_pretrained(run_dir), "the run", None
        ),
    }
    for what, call in calls.items():
        with pytest.raises(
            InsecureEndpointError, match=f"the Hub endpoint {endpoint} is plain http"
        ) as caught:
            call()
        assert_one_line_without_token(caught.value), what
    assert hostile.requests_seen == []  # no request, so no token, reached the server


def test_a_mirrors_copy_is_not_served_for_another_endpoint(
    hostile, published: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    mirrored = fetch_run(REPO, published, endpoint=hostile.endpoint, cache_dir=cache)
    assert mirrored.folder == snapshot(cache, hostile, published)
    with socket.socket() as closed:  # a port nothing listens on: the other endpoint is unreachable
        closed.bind(("127.0.0.1", 0))
        unreachable = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with pytest.raises(
        HubUnreachableError, match=rf"could not reach {unreachable} \(ConnectError\) and {REPO}@"
    ):
        fetch_run(REPO, published, endpoint=unreachable, cache_dir=cache)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        HubUnreachableError, match=f"HF_HUB_OFFLINE is set and {REPO}@{published} is not in the"
    ):
        fetch_run(REPO, published, endpoint="https://huggingface.co", cache_dir=cache)
    assert fetch_run(REPO, published, endpoint=hostile.endpoint, cache_dir=cache) == mirrored
    assert endpoint_key("https://huggingface.co") != endpoint_key("https://huggingface.co/mirror")
    assert endpoint_key("http://[::1]:8080") == f"__1-8080-{endpoint_key('http://[::1]:8080')[-8:]}"


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        ({"config.json": 1 << 40}, r"lists \d+ bytes, over the download budget of \d+ bytes; nothing was"),
        (
            {"results.json": 32 << 20},
            r"lists results\.json at 33554432 bytes, over the 16777216 bytes it may",
        ),
        (
            {".gitattributes": 2 << 20},
            r"lists \.gitattributes at 2097152 bytes, over the 1048576 bytes it may have",
        ),
        ({"config.json": 2 << 20}, r"lists config\.json at 2097152 bytes, over the 1048576 bytes it may"),
        ({"README.md": 8 << 20}, r"lists README\.md at 8388608 bytes, over the 4194304 bytes it may"),
    ],
    ids=["over-the-budget", "results-json", "not-in-the-manifest", "a-config", "the-card"],
)
def test_a_listed_size_over_its_cap_is_refused_before_the_file_is_fetched(
    hostile, published: str, tmp_path: Path, capsys, listed: dict[str, int], message: str
) -> None:
    hostile.listed_sizes = listed
    hostile.compressed = {path: 64 << 20 for path in listed}  # what the server would send for it
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError, match=message) as caught:
        fetch_run(REPO, endpoint=hostile.endpoint, cache_dir=cache)
    assert_one_line_without_token(caught.value)
    # A file over its own cap is named in the error's fields too; the budget is the whole listing's.
    assert caught.value.fields.get("file") == (None if "budget" in message else next(iter(listed)))
    assert not [path for path, *_ in hostile.requests_seen if path.endswith(tuple(listed))]
    assert sum(path.stat().st_size for path in cache.rglob("*") if path.is_file()) < 1 << 20
    assert main(["download", REPO, "--hub-endpoint", hostile.endpoint]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and re.search(message, err), err


def test_a_file_sent_compressed_although_not_asked_is_not_written(
    hostile, published: str, tmp_path: Path
) -> None:
    hostile.compressed = {"config.json": 64 << 20}  # a gzip body of about 64 KiB
    cache = tmp_path / "cache"
    with pytest.raises(
        DownloadError, match=r"sent config\.json compressed \('gzip'\) although attncard"
    ) as caught:
        fetch_run(REPO, endpoint=hostile.endpoint, cache_dir=cache)
    assert_one_line_without_token(caught.value)
    assert not (snapshot(cache, hostile, published) / "config.json").exists()
    assert not [path for path in cache.rglob("*.partial")]


@pytest.mark.parametrize(
    "answer",
    [
        {"compressed": {"repo_info": 64 << 20}},
        {"compressed": {"tree": 64 << 20}},
        {"oversized": {"repo_info": 24 << 20}},
        {"oversized": {"tree": 24 << 20}},
    ],
    ids=["info-gzip", "tree-gzip", "info-no-length", "tree-no-length"],
)
def test_an_api_answer_over_its_cap_is_not_parsed(
    hostile, published: str, tmp_path: Path, capsys, answer
) -> None:
    for name, value in answer.items():
        setattr(hostile, name, value)
    with pytest.raises(
        HubAnswerError, match=r"^the answer to GET http://127\.0\.0\.1:\d+/api/models/"
    ) as caught:
        fetch_run(REPO, endpoint=hostile.endpoint, cache_dir=tmp_path / "cache")
    text = assert_one_line_without_token(caught.value)
    assert re.search(
        r"compressed \('gzip'\) although attncard asked for none|is over the 16777216 bytes", text
    )
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("results.json"))
    assert main(["download", REPO, "--hub-endpoint", hostile.endpoint]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the answer to GET") and err.count("\n") == 1, err


def test_an_lfs_batch_answer_over_its_cap_stops_the_push(hostile, tiny_gpt2_run) -> None:
    run_dir, _ = tiny_gpt2_run
    hostile.lfs_threshold = 0  # every file goes through the LFS batch API
    hostile.oversized = {"lfs_batch": 24 << 20}
    with pytest.raises(
        HubAnswerError, match=r"^the answer to POST .*/info/lfs/objects/batch is over"
    ) as caught:
        push_run_folder(run_dir, REPO, endpoint=hostile.endpoint)
    assert_one_line_without_token(caught.value)
    assert hostile.request_count("commit") == 0  # nothing was committed


@pytest.mark.slow
def test_a_server_that_never_answers_is_not_asked_again(
    hostile, published: str, tiny_gpt2_run, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # huggingface_hub would retry a timed-out request five times: 5 x 5 s here, 5 x 60 s by default.
    monkeypatch.setattr(fetch, "DEFAULT_TIMEOUT_S", 5.0)
    monkeypatch.setattr(http, "FIRST_ANSWER_TIMEOUT_S", 1.0)
    hostile.silent = {"repo_info"}
    hostile.requests_seen.clear()
    started = time.monotonic()
    assert main(["download", REPO, "--hub-endpoint", hostile.endpoint]) == 2
    assert time.monotonic() - started < 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.fullmatch(
        rf"error: could not reach {hostile.endpoint} \(ReadTimeout\) and {REPO} is not in the local cache: "
        r".*\n",
        err,
    ), err
    assert len([path for _, path, _ in hostile.requests_seen if path.startswith("/api/models/")]) == 1
    # A listing the server does not answer, after it answered the commit: one timeout, not six.
    hostile.silent = {"tree"}
    hostile.requests_seen.clear()
    started = time.monotonic()
    assert main(["download", REPO, "--hub-endpoint", hostile.endpoint]) == 2
    assert time.monotonic() - started < 5 + 2
    assert "error: could not reach" in capsys.readouterr().err
    assert len([path for _, path, _ in hostile.requests_seen if "/tree/" in path]) == 1
    run_dir, _ = tiny_gpt2_run
    hostile.silent = {"validate_yaml"}
    hostile.requests_seen.clear()
    started = time.monotonic()
    with pytest.raises(HubNoAnswerError) as caught:
        push_run_folder(run_dir, REPO, endpoint=hostile.endpoint, timeout=5.0)
    assert time.monotonic() - started < 3
    assert re.fullmatch(
        rf"{hostile.endpoint} did not answer \(ReadTimeout within 1 s\), and a server that never answered is "
        r"not asked again: check the endpoint \(endpoint=, HF_ENDPOINT\) and the network, then try "
        r"again",
        assert_one_line_without_token(caught.value),
    )
    assert len(hostile.requests_seen) == 1


@pytest.mark.parametrize("elsewhere", ["refusing", pytest.param("unreachable", marks=pytest.mark.slow)])
def test_an_upload_the_lfs_answer_sends_elsewhere_fails_in_one_line_and_commits_nothing(
    hostile, tiny_gpt2_run, short_waits, capsys, elsewhere: str
) -> None:
    run_dir, _ = tiny_gpt2_run
    hostile.lfs_threshold = 0  # every file goes through the LFS batch API
    if elsewhere == "refusing":  # the same server under another name: another origin, which answers 403
        origin = f"http://localhost:{hostile.endpoint.rsplit(':', 1)[1]}"
        hostile.echo = {"lfs_upload": [403] * 100}
        reason = rf"HTTP 403: you sent Authorization: None from {origin}"
    else:  # huggingface_hub retries a refused connection five times, a minute of waits: one push only
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            origin = f"http://127.0.0.1:{closed.getsockname()[1]}"
        reason = rf"ConnectError: .* at {origin}"
    hostile.lfs_upload_to = origin
    with pytest.raises(PushError) as caught:
        push_run_folder(run_dir, REPO, endpoint=hostile.endpoint)
    assert re.fullmatch(
        rf"uploading \S+ to where {hostile.endpoint}'s LFS answer sends it failed \({reason}\); nothing was "
        rf"committed, {REPO} .*: push again later, and if the upload went to a host you do not expect, use "
        r"another endpoint",
        assert_one_line_without_token(caught.value),
    ), caught.value
    assert hostile.request_count("commit") == 0
    uploads = [(host, auth) for host, path, auth in hostile.requests_seen if "lfs-upload" in path]
    assert all(auth is None for _, auth in uploads)  # the token was held back from the other origin
    if elsewhere == "refusing":
        assert uploads and all(host.startswith("localhost:") for host, _ in uploads)
        assert main(["push", str(run_dir), "--repo-id", REPO, "--hub-endpoint", hostile.endpoint]) == 2
        err = capsys.readouterr().err
        assert err.splitlines()[-1].startswith("error: uploading ") and "Traceback" not in err, err
        assert hostile.request_count("commit") == 0
