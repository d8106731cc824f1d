"""Pushing a Space folder to a loopback Hub through the real huggingface_hub client, with injected faults.

Each test gets a fresh `LoopbackHub` (tests/support/hub_server.py), which serves Spaces as the Hub does.
After a push the Space holds exactly the folder's files (and the Hub's .gitattributes); after a failed one,
exactly what it held before, at the same commit.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import replace
from pathlib import Path

import pytest
from huggingface_hub import HfApi, constants

from attncard.pipeline.hub.http import HUB_BACKOFF
from attncard.pipeline.record.errors import InsecureEndpointError, PushError, PushRefusedError
from attncard.pipeline.record.manifest import sha256_file
from attncard.pipeline.space import push as space_push
from attncard.pipeline.space.push import push_space
from conftest import HUB_USER, serve
from hub_server import LoopbackHub

# huggingface_hub 2.4.0 itself uploads LFS parts with httpx2's deprecated `data=<file>`.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

# Distinctive, so that finding it anywhere it should not be is unambiguous.
TOKEN = "hf_attncardSpaceSecret_4Wn8Rt2YbQ6v"
SPACE = f"{HUB_USER}/leaderboard"
README = "---\ntitle: Leaderboard\nsdk: gradio\napp_file: app.py\npinned: false\n---\n\n# Leaderboard\n"


@pytest.fixture
def hub_token() -> str:
    return TOKEN


@pytest.fixture(autouse=True)
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries wait 0.05, 0.1, 0.2, 0.2, 0.2 s instead of 1, 2, 4, 8, 8 s."""
    monkeypatch.setattr(
        space_push, "HUB_BACKOFF", replace(HUB_BACKOFF, base_wait_s=0.05, max_wait_s=0.2, asked_margin_s=0.0)
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A Space folder as `attncard space` writes it: the app, its requirements, its card, the runs' cards."""
    space = tmp_path / "space"
    (space / "cards" / "minilm-none-sst2").mkdir(parents=True)
    (space / "app.py").write_text("import gradio as gr\n\ngr.Markdown('# Leaderboard').launch()\n")
    (space / "requirements.txt").write_text("gradio==6.31.0\n")
    (space / "README.md").write_text(README)
    (space / "cards" / "minilm-none-sst2" / "README.md").write_text("# minilm-none-sst2\n")
    (space / "cards" / "minilm-none-sst2" / "results.json").write_text('{"status": "PASS"}\n')
    return space


def files_of(folder: Path) -> dict[str, str]:
    """Path -> sha256 of every file of a folder, as `LoopbackHub.commits` gives a commit's files."""
    return {
        p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()
    }


def held(hub: LoopbackHub) -> dict[str, str]:
    """The Space's files at main, without the Hub's .gitattributes."""
    files = dict(hub.commits(SPACE, repo_type="space")[0].files)
    files.pop(".gitattributes")
    return files


def history(hub: LoopbackHub) -> list[str]:
    return [commit.oid for commit in hub.commits(SPACE, repo_type="space")]


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and TOKEN not in text, text
    return text


def test_a_push_makes_the_space_exactly_the_folder_in_one_commit(hub: LoopbackHub, folder: Path) -> None:
    commit = push_space(folder, SPACE, endpoint=hub.endpoint)
    assert hub.repo_ids("space") == [SPACE] and hub.repo_ids() == []  # a Space, not a model
    assert hub.space_sdk(SPACE) == "gradio"
    first = history(hub)
    assert first[0] == commit == hub.head(SPACE, repo_type="space")
    assert len(first) == 2  # the Hub's initial commit, then this push's one
    assert held(hub) == files_of(folder)  # the Hub's own README.md replaced by the folder's
    assert hub.read_file(SPACE, "app.py", repo_type="space") == (folder / "app.py").read_bytes()
    assert hub.request_count("commit") == 1

    # A changed file and a removed one: one more commit, holding exactly the folder again.
    (folder / "app.py").write_text("import gradio as gr\n\ngr.Markdown('# Leaderboard, v2').launch()\n")
    (folder / "cards" / "minilm-none-sst2" / "results.json").unlink()
    second = push_space(folder, SPACE, endpoint=hub.endpoint)
    assert history(hub) == [second, *first]
    assert held(hub) == files_of(folder) and "cards/minilm-none-sst2/results.json" not in held(hub)

    # The same folder again: the Space holds it already, and no commit is made.
    assert push_space(folder, SPACE, endpoint=hub.endpoint) == second
    assert history(hub) == [second, *first] and hub.request_count("commit") == 2
    assert hub.internal_errors == []


def test_files_the_folder_lacks_are_deleted_but_not_gitattributes(hub: LoopbackHub, folder: Path) -> None:
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo(SPACE, repo_type="space", space_sdk="gradio")
    api.upload_file(path_or_fileobj=b"old", path_in_repo="old/page.py", repo_id=SPACE, repo_type="space")
    push_space(folder, SPACE, endpoint=hub.endpoint)
    files = hub.commits(SPACE, repo_type="space")[0].files
    assert set(files) == {".gitattributes", *files_of(folder)}


def test_large_files_go_through_lfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """A file over the Hub's threshold is uploaded through the Space's Git LFS batch API."""
    (folder / "cards" / "plot.png").write_bytes(bytes(range(256)) * 64)
    with_lfs = LoopbackHub(tmp_path / "lfs-hub", token=TOKEN, user=HUB_USER, lfs_threshold=4096)
    for hub in serve(with_lfs, tmp_path, TOKEN, monkeypatch):
        push_space(folder, SPACE, endpoint=hub.endpoint)
        assert held(hub) == files_of(folder)
        assert hub.request_count("lfs_batch", status=200) == 1 and hub.request_count("lfs_upload") == 1
        assert any(r.path.startswith(f"/spaces/{SPACE}.git/") for r in hub.requests if r.route == "lfs_batch")


def test_a_model_repository_of_the_same_name_is_another_repository(hub: LoopbackHub, folder: Path) -> None:
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo(SPACE)
    model_head = hub.head(SPACE)
    push_space(folder, SPACE, endpoint=hub.endpoint)
    assert hub.head(SPACE) == model_head and set(hub.snapshot(SPACE)) == {".gitattributes"}
    assert hub.repo_ids() == [SPACE] and hub.repo_ids("space") == [SPACE]
    assert api.model_info(SPACE).sha == model_head
    assert api.space_info(SPACE).sha == hub.head(SPACE, repo_type="space") != model_head


@pytest.mark.parametrize(
    ("kind", "status", "says"),
    [
        ("status", 500, "HTTP 500"),
        ("drop", None, "RemoteProtocolError"),
        ("conflict", 412, "someone else pushed to the Space meanwhile"),
        ("status", 403, "use a token with write access to loopback-user"),
    ],
)
def test_a_failed_commit_leaves_the_space_at_its_previous_commit(
    hub: LoopbackHub, folder: Path, kind: str, status: int | None, says: str
) -> None:
    previous = push_space(folder, SPACE, endpoint=hub.endpoint)
    before = held(hub)
    hub.clear_requests()
    (folder / "app.py").write_text("raise SystemExit('a page that must not go out half pushed')\n")
    (folder / "cards" / "minilm-none-sst2" / "README.md").unlink()
    hub.faults.add("commit", kind, status=status)
    with pytest.raises(PushError) as caught:
        push_space(folder, SPACE, endpoint=hub.endpoint)
    message = one_line(caught.value)
    assert says in message
    assert (
        f"commits are all or nothing, and the Space is still at its previous commit {previous[:12]}"
        in message
    )
    assert hub.faults.fired("commit") == 1 and hub.request_count("commit") == 1  # the commit is not retried
    assert hub.head(SPACE, repo_type="space") == previous and len(history(hub)) == 2
    assert held(hub) == before


def test_a_first_push_that_fails_leaves_the_new_space_as_the_hub_made_it(
    hub: LoopbackHub, folder: Path
) -> None:
    hub.faults.add("commit", "status", status=500)
    with pytest.raises(PushError, match="still at its previous commit"):
        push_space(folder, SPACE, endpoint=hub.endpoint)
    assert len(history(hub)) == 1 and set(hub.snapshot(SPACE, repo_type="space")) == {
        ".gitattributes",
        "README.md",
    }


def test_transient_failures_before_the_commit_are_retried(hub: LoopbackHub, folder: Path) -> None:
    hub.faults.add("create_repo", "status", status=503)
    hub.faults.add("repo_info", "drop")
    commit = push_space(folder, SPACE, endpoint=hub.endpoint)
    assert commit == hub.head(SPACE, repo_type="space") and held(hub) == files_of(folder)
    assert hub.request_count("create_repo") == 2 and hub.faults.pending() == []


def test_a_commit_past_the_deadline_is_a_push_error(hub: LoopbackHub, folder: Path) -> None:
    hub.faults.add("commit", "delay", delay=5.0)
    with pytest.raises(PushError) as caught:
        push_space(folder, SPACE, endpoint=hub.endpoint, deadline=1.0)
    message = one_line(caught.value)
    assert "deadline" in message and "all or nothing" in message and "allow more time (deadline=)" in message
    assert len(history(hub)) == 1  # the Space as the Hub made it


def test_no_token_is_a_push_error_before_anything_is_sent(
    hub: LoopbackHub, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN")  # and HF_TOKEN_PATH names no file (client_settings)
    with pytest.raises(PushError) as caught:
        push_space(folder, SPACE, endpoint=hub.endpoint)
    assert "set HF_TOKEN to a token with write access to loopback-user" in one_line(caught.value)
    assert hub.requests == []


def test_offline_is_a_push_error_before_anything_is_sent(
    hub: LoopbackHub, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PushError, match=r"HF_HUB_OFFLINE is set: pushing .* needs the network; unset it"):
        push_space(folder, SPACE, endpoint=hub.endpoint)
    assert hub.requests == []


def _no_front_matter(folder: Path) -> None:
    (folder / "README.md").write_text("# Leaderboard\n")


def _streamlit(folder: Path) -> None:
    (folder / "README.md").write_text(README.replace("sdk: gradio", "sdk: streamlit"))


def _no_app_file(folder: Path) -> None:
    (folder / "README.md").write_text(README.replace("app_file: app.py", "app_file: main.py"))


def _broken_yaml(folder: Path) -> None:
    (folder / "README.md").write_text("---\nsdk: [gradio\n---\n")


def _no_requirements(folder: Path) -> None:
    (folder / "requirements.txt").unlink()


def _a_link(folder: Path) -> None:
    (folder / "cards" / "secrets.txt").symlink_to(folder.parent / "elsewhere.txt")


@pytest.mark.parametrize(
    ("edit", "space_id", "says"),
    [
        (_no_front_matter, SPACE, "README.md says sdk: nothing, not gradio"),
        (_streamlit, SPACE, "README.md says sdk: streamlit, not gradio"),
        (_no_app_file, SPACE, "README.md's app_file (main.py) is not a file of"),
        (_broken_yaml, SPACE, "the metadata of"),
        (_no_requirements, SPACE, "is not a Space folder: it has no requirements.txt"),
        (_a_link, SPACE, "cards/secrets.txt is a symbolic link"),
        (None, "leaderboard", "'leaderboard' names no owner"),
        (None, "loopback-user/lead--board", "is not a Space id"),
        (None, f"spaces/{SPACE}", "is not a Space id"),
    ],
)
def test_what_is_not_a_gradio_space_folder_is_refused_before_anything_is_sent(
    hub: LoopbackHub, folder: Path, edit, space_id: str, says: str
) -> None:
    if edit is not None:
        edit(folder)
    with pytest.raises(PushRefusedError) as caught:
        push_space(folder, space_id, endpoint=hub.endpoint)
    message = one_line(caught.value)
    assert says in message and "nothing was pushed" in message
    assert hub.requests == []


def test_plain_http_off_this_machine_is_refused_before_anything_is_sent(
    hub: LoopbackHub, folder: Path
) -> None:
    with pytest.raises(InsecureEndpointError, match="is plain http: the token goes to"):
        push_space(folder, SPACE, endpoint="http://hub.example.com", token=TOKEN)
    assert hub.requests == []


def test_the_token_never_shows(hub: LoopbackHub, folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    # A server that echoes the token, in a refusal and in a failure that is retried (and logged) first.
    hub.faults.add("create_repo", "status", status=400, message=f"token {TOKEN} may not create Spaces")
    hub.faults.add("repo_info", "status", status=503, message=f"busy, {TOKEN}", times=None)
    hub.faults.add("commit", "status", status=500, message=f"Bearer {TOKEN} broke the commit")
    for _ in range(2):
        with pytest.raises(PushError) as caught:
            push_space(folder, SPACE, endpoint=hub.endpoint)
        errors.append(caught.value)
    hub.faults.clear()
    hub.faults.add("commit", "status", status=500, message=f"Bearer {TOKEN} broke the commit")
    with pytest.raises(PushError) as caught:
        push_space(folder, SPACE, endpoint=hub.endpoint)
    errors.append(caught.value)

    assert "token <token> may not create Spaces" in one_line(errors[0])
    assert "failed after 6 attempts (HTTP 503: busy, <token>)" in one_line(errors[1])
    assert "Bearer <token> broke the commit" in one_line(errors[2])
    assert "retry 5 of 5" in caplog.text and "busy, <token>" in caplog.text
    shown = [caplog.text, *("".join(traceback.format_exception(error)) + repr(error) for error in errors)]
    for text in shown:
        assert TOKEN not in text
