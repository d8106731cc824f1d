"""`attncard summary --hub` against a Hub or mirror that lies (tests/support/hostile_hub.py), issue 42: text a
run or a server chose reaches the leaderboard and the terminal escaped (item 3), the whole command ends by its
deadline however many repositories trickle (item 7), and the leaderboard names a required key by its
fingerprint, not by its path on this machine (item 8).

The tiny GPT-2 run is committed and tagged as `attncard push` tags it; each test makes it, or the server,
hostile in one way. Fast: no sweep, at most one run is recomputed.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from attncard.pipeline.cli import main
from attncard.pipeline.cli.common import progress_on_stderr
from attncard.pipeline.record.manifest import sha256_file
from attncard.pipeline.record.run_names import run_tag
from conftest import HUB_USER, TINY_GPT2_REPO, commit_run_folder, serve
from hostile_hub import HostileHub
from signing_keys import make_key

TOKEN = "hf_summaryAttackSecret_Q7pL2x"
# What a terminal or a Markdown reader would obey: escape sequences, line breaks, bidi and zero-width.
UNSHOWABLE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")
HOSTILE_KEY = "<a href=x>[click](http://evil)</a>\x1b[31m"
HOSTILE_BODY = b"<b>Mirror</b> [login](http://evil) **now** | x \x1b[2K\xe2\x80\xaeevil\nsecond line\n"


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostileHub]:
    yield from serve(HostileHub(tmp_path / "hub", token=TOKEN, user=HUB_USER), tmp_path, TOKEN, monkeypatch)


def _publish(hub: HostileHub, run_dir: Path, repo_id: str, results: dict | None = None) -> None:
    """Commits the run to `repo_id` (its results.json replaced by `results`, when given) and tags the commit
    as `attncard push` does: the tag names that results.json."""
    commit_run_folder(hub.endpoint, repo_id, run_dir, TOKEN)
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    record = run_dir / "results.json"
    if results is not None:
        record = run_dir.parent / f"{repo_id.replace('/', '--')}-results.json"
        record.write_text(json.dumps(results, indent=2), encoding="utf-8")
        api.create_commit(repo_id, [CommitOperationAdd("results.json", str(record))], commit_message="edit")
    started = json.loads(record.read_text(encoding="utf-8"))["started_at"]
    api.create_tag(repo_id, tag=run_tag(started, sha256_file(record)))


def _summary(hub: HostileHub, output: Path, glue: Path | None, *options: str) -> tuple[int, str, str, str]:
    """Runs `attncard summary --hub`; `(exit status, stdout, stderr, README.md or "")`."""
    out, err = io.StringIO(), io.StringIO()
    argv = [
        *("summary", "--hub", HUB_USER, "--output", str(output), "--hub-endpoint", hub.endpoint),
        *options,
    ]
    if glue is not None:
        argv += ["--data-dir", str(glue)]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    readme = output / "README.md"
    return code, out.getvalue(), err.getvalue(), readme.read_text("utf-8") if readme.is_file() else ""


def _refused(readme: str) -> str:
    return readme.split("## Refused", 1)[1].split("\n## ", 1)[0]


# --- item 3: refusal reasons quote hostile text ------------------------------------------------------------


def test_refusal_reasons_are_escaped_in_the_leaderboard_and_on_stderr(
    hostile: HostileHub, tiny_gpt2_run, tmp_path: Path
) -> None:
    run_dir, glue = tiny_gpt2_run
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    results["model"][HOSTILE_KEY] = 1  # an unknown field, which the refusal names
    _publish(hostile, run_dir, TINY_GPT2_REPO, results)
    mirror = f"{HUB_USER}/mirror-error-run"
    _publish(hostile, run_dir, mirror)
    hostile.error_body[mirror] = (418, HOSTILE_BODY)

    code, out, err, readme = _summary(hostile, tmp_path / "board", glue)

    assert code == 1 and "0 runs verified, 2 refused" in out, err
    refused = _refused(readme)
    assert f"`{TINY_GPT2_REPO}`" in refused and f"`{mirror}`" in refused, refused
    # Only the escaped text: no tag, link, emphasis, table break or escape sequence takes effect.
    for live in ("<a", "<b>", "](http", "[click]", "**now**", " | x", "\x1b", "\u202e"):
        assert live not in readme, (live, refused)
    assert "&lt;a href=x&gt;\\[click\\]\\(http://evil\\)&lt;/a&gt;" in refused
    assert (
        "&lt;b&gt;Mirror&lt;/b&gt; \\[login\\]\\(http://evil\\) \\*\\*now\\*\\* \\| x "
        "\\\\x1b\\[2K\\\\u202eevil"
    ) in refused
    assert "second line" not in readme  # an error body's first line only
    assert not UNSHOWABLE.search(err), ascii(err)
    assert "\\x1b[2K\\u202eevil" in err and err.count("\n") == 2  # one line per refused run


def test_an_error_quoting_a_hostile_server_is_one_visible_line(
    hostile: HostileHub, tiny_gpt2_run, capsys: pytest.CaptureFixture
) -> None:
    """`error:` lines (here `attncard download`'s) show what a server's error page quotes, never obey it."""
    commit_run_folder(hostile.endpoint, TINY_GPT2_REPO, tiny_gpt2_run[0], TOKEN)
    hostile.error_body[TINY_GPT2_REPO] = (418, HOSTILE_BODY)

    assert main(["download", TINY_GPT2_REPO, "--hub-endpoint", hostile.endpoint]) == 2

    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not UNSHOWABLE.search(err), ascii(err)
    assert "(<b>Mirror</b> [login](http://evil) **now** | x \\x1b[2K\\u202eevil)" in err, err


def test_progress_lines_show_control_characters_as_escapes(capsys: pytest.CaptureFixture) -> None:
    """What the library logs may quote a server too: the progress lines on stderr are made visible."""
    with progress_on_stderr():
        logging.getLogger("attncard.pipeline.hub.fetch").info("server says \x1b[2J\u202eevil\nforged line")

    err = capsys.readouterr().err
    assert err == "server says \\x1b[2J\\u202eevil\\nforged line\n", ascii(err)


# --- item 8: no local path in the leaderboard --------------------------------------------------------------


def test_a_required_key_is_named_by_its_fingerprint_not_its_path(
    hostile: HostileHub, tiny_gpt2_run, tmp_path: Path
) -> None:
    run_dir, glue = tiny_gpt2_run
    _publish(hostile, run_dir, TINY_GPT2_REPO)  # unsigned: refused when a key is required
    secret = tmp_path / "secret-dir"
    secret.mkdir()
    _, public_key = make_key(secret, "key")

    code, out, err, readme = _summary(hostile, tmp_path / "board", glue, "--require-key", str(public_key))

    assert code == 1 and "0 runs verified, 1 refused" in out, err
    assert "unsigned" in _refused(readme) and "sha256:" in _refused(readme), _refused(readme)
    assert "secret-dir" not in readme and str(tmp_path) not in readme
    written = [path for path in (tmp_path / "board").rglob("*") if path.is_file()]
    assert not [path for path in written if b"secret-dir" in path.read_bytes()]


# --- item 7: one deadline for the whole command -------------------------------------------------------------


@pytest.mark.slow
def test_trickling_repositories_cannot_hold_the_command_past_its_deadline(
    hostile: HostileHub, tiny_gpt2_run, tmp_path: Path
) -> None:
    run_dir, glue = tiny_gpt2_run
    repos = [f"{HUB_USER}/trickling-run-{index}" for index in range(6)]
    for repo_id in repos:
        commit_run_folder(hostile.endpoint, repo_id, run_dir, TOKEN)
    hostile.trickle = {"refs": "headers"}  # each run's branches and tags, one byte a second, forever

    started = time.monotonic()
    options = ("--deadline", "3", "--hub-deadline", "3")
    code, out, err, readme = _summary(hostile, tmp_path / "board", glue, *options)
    took = time.monotonic() - started

    assert took < 10, (took, err)  # one run after the other, six runs took 6 × 3 s and more
    assert code == 1 and "0 runs verified, 6 refused" in out, err
    refused = _refused(readme)
    assert all(f"`{repo_id}`" in refused for repo_id in repos), refused
    assert refused.count("within the deadline of 3 s") == 6, refused
    assert err.count("within the deadline of 3 s") == 6, err


def test_a_fetch_that_does_not_give_up_is_stopped_and_its_partial_copy_removed(
    hostile: HostileHub, tiny_gpt2_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backstop behind each download's own deadline: a worker still busy past the whole command's
    deadline (and a short grace) is stopped, and what it copied so far is not left in the leaderboard."""
    from attncard.pipeline.study import hub_leaderboard as hub_summary

    commit_run_folder(hostile.endpoint, f"{HUB_USER}/stuck-run", tiny_gpt2_run[0], TOKEN)

    def stuck(repo_id: str, output: Path, hub: str, options: dict) -> None:
        (output / repo_id.split("/")[1]).mkdir()
        (output / repo_id.split("/")[1] / "README.md").write_text("half a copy", encoding="utf-8")
        time.sleep(120)

    monkeypatch.setattr(hub_summary, "_stage", stuck)  # the workers are forked: they run it
    monkeypatch.setattr(hub_summary, "_STOP_GRACE_S", 0.5)
    started = time.monotonic()
    summary = hub_summary.write_hub_summary(
        HUB_USER, tmp_path / "board", endpoint=hostile.endpoint, total_deadline=1
    )

    assert time.monotonic() - started < 10
    assert [(run.repo_id, run.reason.split(";")[0]) for run in summary.refused] == [
        (f"{HUB_USER}/stuck-run", "not reached within the deadline of 1 s of the whole leaderboard")
    ]
    assert sorted(path.name for path in (tmp_path / "board").iterdir()) == ["README.md"]
