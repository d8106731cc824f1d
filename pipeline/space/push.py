"""Hub I/O, the Space: a Space folder pushed to a Hub Space as one commit, so that the Space becomes exactly
the folder.

[`check_space_folder`] says, without the network, whether a folder is a Gradio Space's; [`push_space`] pushes
it. The token rules, timeouts and overall deadline are those of a run's push ([`pipeline.publish.push`]); the
calls huggingface_hub does not retry itself, but for the commit, are retried on its schedule
([`pipeline.hub.http.HUB_BACKOFF`]).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx2
import yaml
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    RepoFile,
    SpaceCard,
    constants,
    get_token,
)
from huggingface_hub.errors import HfHubHTTPError, HFValidationError
from huggingface_hub.utils import validate_repo_id

from ..hub.endpoint import hub_endpoint, redacted
from ..hub.http import (
    DEFAULT_DEADLINE_S,
    DEFAULT_TIMEOUT_S,
    HUB_BACKOFF,
    TRANSIENT_ERRORS,
    Deadline,
    http_reason,
    http_status,
    hub_client_timeout,
    transport_failure,
)
from ..record.errors import AttncardError, HubDeadlineError, PushError, PushRefusedError, first_line
from ..record.text import SHA_PREFIX

# What a Gradio Space folder holds at least: the app, what the Space installs, and the card whose metadata
# tells the Hub how to run it.
SPACE_FILES = ("app.py", "requirements.txt", "README.md")
SPACE_SDK = "gradio"
# Every Hub repository has one; a Space folder need not: the push neither compares nor deletes it.
GITATTRIBUTES = ".gitattributes"

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


def check_space_folder(folder: str | os.PathLike, space_id: str) -> list[str]:
    """Checks, without any network access, that `folder` may be pushed to the Space `space_id`.

    The folder must hold app.py, requirements.txt and README.md, and no symbolic link (it would push what it
    points to, wherever that is); README.md's metadata must load with huggingface_hub's `SpaceCard` and say
    `sdk: gradio` and an `app_file` that is a file of the folder. `space_id` must be `OWNER/NAME` as
    huggingface_hub's `validate_repo_id` accepts it.

    Args:
        folder: the Space folder, e.g. the one `attncard space --output space` writes.
        space_id: the Space, `OWNER/NAME`.

    Returns:
        The folder's files, as sorted POSIX paths relative to it.

    Raises:
        [`PushRefusedError`]: what is wrong, and what to do; nothing was sent.

    Example:
        >>> check_space_folder("runs/tiny-gpt2-none-sst2", "loopback-user/leaderboard")
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.PushRefusedError: runs/tiny-gpt2-none-sst2 is not a Space folder: it
        has no app.py, requirements.txt; nothing was pushed: write it with `attncard space ORG --output DIR`
    """
    folder = Path(folder)
    try:
        validate_repo_id(space_id)
    except HFValidationError as error:
        raise PushRefusedError(
            f"{space_id!r} is not a Space id ({first_line(error)}); nothing was pushed: pass OWNER/NAME"
        ) from None
    if "/" not in space_id:
        raise PushRefusedError(
            f"{space_id!r} names no owner; nothing was pushed: pass OWNER/NAME, e.g. ORG/{space_id}"
        )
    if not folder.is_dir():
        raise PushRefusedError(f"{folder} is not a folder; nothing was pushed: pass the Space folder")
    links = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_symlink())
    if links:  # what it points to may be any file of this machine
        raise PushRefusedError(
            f"{folder}/{links[0]} is a symbolic link; nothing was pushed: put the file itself in the folder"
        )
    files = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    missing = [name for name in SPACE_FILES if name not in files]
    if missing:
        raise PushRefusedError(
            f"{folder} is not a Space folder: it has no {', '.join(missing)}; nothing was pushed: write it "
            "with `attncard space ORG --output DIR`"
        )
    try:
        card = SpaceCard((folder / "README.md").read_text(encoding="utf-8"))
    except (ValueError, yaml.YAMLError) as error:  # not UTF-8, not YAML, or not a mapping
        raise PushRefusedError(
            f"the metadata of {folder}/README.md does not load ({first_line(error)}); nothing was pushed: "
            "fix its YAML front matter"
        ) from None
    if card.data.sdk != SPACE_SDK:
        raise PushRefusedError(
            f"{folder}/README.md says sdk: {card.data.sdk or 'nothing'}, not {SPACE_SDK}; nothing was "
            f"pushed: its front matter must say `sdk: {SPACE_SDK}`, as `attncard space` writes it"
        )
    if card.data.app_file not in files:
        raise PushRefusedError(
            f"{folder}/README.md's app_file ({card.data.app_file or 'none given'}) is not a file of "
            f"{folder}; nothing was pushed: its front matter must say `app_file: app.py`, as `attncard "
            "space` writes it"
        )
    return files


def push_space(
    folder: str | os.PathLike,
    space_id: str,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
) -> str:
    """Pushes a Space folder to a Hub Space as one commit: afterwards the Space holds exactly the folder's
    files (and the Hub's `.gitattributes`), or, when the push fails, exactly what it held before.

    1. Refuses, before any network access, a folder [`check_space_folder`] rejects.
    2. Creates the Space if needed (a Gradio Space, `create_repo(exist_ok=True)`), reads the head of `main`
       and the files there.
    3. Makes ONE commit with `parent_commit` = that head: every file of the folder, and the deletion of every
       file the Space holds that the folder lacks (but `.gitattributes`). A commit is all or nothing, and
       one made on top of another head is refused, so a concurrent push cannot mix with this one. When the
       Space already holds the folder, huggingface_hub makes no commit and the head is returned.

    `create_repo` and the read of the head are retried on huggingface_hub's schedule
    ([`pipeline.hub.http.HUB_BACKOFF`]); the listing is retried by huggingface_hub itself; the commit is not
    retried. Every request runs with `timeout` seconds per network operation, and the whole push ends within
    `deadline` seconds. The token is sent only to the endpoint's origin (https, or http to loopback), and no
    log line, warning or error message shows it.

    Args:
        folder: the Space folder: app.py, requirements.txt, README.md (`sdk: gradio`), maybe `cards/`.
        space_id: the Space, `OWNER/NAME`.
        endpoint: the Hub (default: `HF_ENDPOINT`, else https://huggingface.co).
        token: a token with write access to OWNER (default: `HF_TOKEN`, else the `hf auth login` token).
        timeout: seconds each network operation may take (default `DEFAULT_TIMEOUT_S`, 60).
        deadline: seconds the whole push may take (default `DEFAULT_DEADLINE_S`, 30 minutes).

    Returns:
        The commit the Space's `main` is at: the one this push made, or the head it found holding the folder.

    Raises:
        [`InsecureEndpointError`]: the endpoint is plain http to a host not loopback; nothing was sent.
        [`PushRefusedError`]: the folder or the Space id is not fit to be pushed; nothing was sent.
        [`PushError`]: no token, offline mode, an error the Hub answered, a failure of the network, or the
            deadline; the commit is all or nothing, so the Space holds its previous commit (the message says
            what to do).

    Example:
        >>> from pathlib import Path
        >>> space = Path("space")
        >>> space.mkdir()
        >>> _ = (space / "app.py").write_text("import gradio as gr\\ngr.Markdown('Leaderboard').launch()\\n")
        >>> _ = (space / "requirements.txt").write_text("gradio\\n")
        >>> _ = (space / "README.md").write_text("---\\nsdk: gradio\\napp_file: app.py\\n---\\n")
        >>> commit = push_space(space, "loopback-user/leaderboard")
        >>> sorted(HfApi().list_repo_files("loopback-user/leaderboard", repo_type="space"))
        ['.gitattributes', 'README.md', 'app.py', 'requirements.txt']
        >>> push_space(space, "loopback-user/leaderboard") == commit  # the Space holds it already
        True
    """
    folder = Path(folder)
    hub = hub_endpoint(endpoint)
    files = check_space_folder(folder, space_id)
    owner = space_id.split("/")[0]
    token = token or get_token()
    if not token:
        raise PushError(
            f"no Hub token to push {folder} with: set HF_TOKEN to a token with write access to {owner}, or "
            "run `hf auth login`"
        )
    if constants.is_offline_mode():
        raise PushError(
            f"HF_HUB_OFFLINE is set: pushing {folder} to {hub} needs the network; unset it (or set "
            "HF_HUB_OFFLINE=0) and push again"
        )
    api = HfApi(endpoint=hub, token=token)
    limit = Deadline(deadline if deadline is not None else DEFAULT_DEADLINE_S)
    # A server may echo what it was sent, the token included, in the answers that warnings and errors quote.
    with redacted(token):
        try:
            with hub_client_timeout(
                timeout if timeout is not None else DEFAULT_TIMEOUT_S, limit, endpoint=hub
            ):
                return _push(api, folder, files, space_id, limit)
        except AttncardError as error:  # the deadline, a server that never answered, an answer not read
            if isinstance(error, PushError):
                raise
            more_time = ", or allow more time (deadline=)" if isinstance(error, HubDeadlineError) else ""
            raise PushError(
                f"pushing {folder} to the Space {space_id} on {hub} failed: {first_line(error)}; commits are "
                f"all or nothing, so the Space holds its previous commit or this folder complete: push again "
                f"later{more_time}",
                options=(*error.options, "deadline") if more_time else error.options,
                repo_id=space_id,
            ) from None


def _push(api: HfApi, folder: Path, files: list[str], space_id: str, deadline: Deadline) -> str:
    owner = space_id.split("/")[0]
    _retried(
        f"creating the Space {space_id}",
        lambda: api.create_repo(space_id, repo_type="space", space_sdk=SPACE_SDK, exist_ok=True),
        owner,
        deadline,
    )
    head = _retried(
        f"reading the head of the Space {space_id}",
        lambda: api.space_info(space_id).sha,
        owner,
        deadline,
    )
    if not head:
        raise PushError(
            f"{api.endpoint} gave no commit for the main branch of the Space {space_id}; push again"
        )
    held = _retried(
        f"listing the files of the Space {space_id}",
        lambda: list(api.list_repo_tree(space_id, repo_type="space", revision=head, recursive=True)),
        owner,
        deadline,
        retries=0,  # huggingface_hub retries the listing itself
    )
    deletions = sorted(
        entry.path
        for entry in held
        if isinstance(entry, RepoFile) and entry.path != GITATTRIBUTES and entry.path not in files
    )
    operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(folder / path)) for path in files]
    operations += [CommitOperationDelete(path_in_repo=path) for path in deletions]
    logger.info(
        "committing %d file(s) and %d deletion(s) to the Space %s on top of %s",
        len(files),
        len(deletions),
        space_id,
        head[:SHA_PREFIX],
    )
    try:
        commit = api.create_commit(
            space_id,
            operations,
            commit_message=f"Update the Space from {folder.name}/",
            commit_description=f"{len(files)} file(s) written, {len(deletions)} deleted.",
            repo_type="space",
            parent_commit=head,
        ).oid
    except HfHubHTTPError as error:
        reason, code = http_reason(error), http_status(error)
    except httpx2.HTTPError as error:
        reason, code = transport_failure(error), None
    except ValueError as error:  # the Hub's check of README.md's metadata, made before any upload
        raise PushError(
            f"{api.endpoint} refused the metadata of {folder}/README.md ({first_line(error)}); nothing was "
            "committed: fix its front matter and push again",
            repo_id=space_id,
        ) from None
    except RuntimeError as error:
        # huggingface_hub's "Error while uploading 'PATH' to the Hub.", from an upload of a large file (LFS)
        if not isinstance(error.__cause__, (httpx2.HTTPError, AttncardError)):
            raise
        reason, code = f"{first_line(error)} {first_line(error.__cause__)}", None
    else:
        logger.info("the Space %s is at %s", space_id, commit[:SHA_PREFIX])
        return commit
    raise PushError(
        f"the commit of {folder} to the Space {space_id} failed ({reason}); {_state(api, space_id, head)}: "
        f"{_advice(code, owner)}",
        repo_id=space_id,
    )


def _retried(
    what: str, call: Callable[[], _T], owner: str, deadline: Deadline, retries: int | None = None
) -> _T:
    """Runs `call`, retrying an answer with a retried status and a failure of the network on
    [`HUB_BACKOFF`]'s schedule (`retries` times, default its own); raises [`PushError`] on any other
    failure, and when transient ones outlast the retries."""
    retries = HUB_BACKOFF.retries if retries is None else retries
    attempt = 0
    while True:
        tries = f" after {attempt + 1} attempts" if attempt else ""
        try:
            return call()
        except HfHubHTTPError as error:
            reason, code = http_reason(error), http_status(error)
            wait = HUB_BACKOFF.wait_s(attempt, error.response)
            if code not in HUB_BACKOFF.statuses or attempt == retries:
                raise PushError(
                    f"{what} failed{tries} ({reason}); nothing was pushed: {_advice(code, owner)}"
                ) from None
        except TRANSIENT_ERRORS as error:
            reason, wait = transport_failure(error), HUB_BACKOFF.wait_s(attempt)
            if attempt == retries:
                raise PushError(
                    f"{what} failed{tries} ({reason}); nothing was pushed: check the network and the "
                    "endpoint (endpoint=, HF_ENDPOINT), then push again",
                    options=("endpoint",),
                ) from None
        attempt += 1
        logger.warning("%s failed (%s); retry %d of %d in %.2f s", what, reason, attempt, retries, wait)
        time.sleep(max(0.0, min(wait, deadline.left())))


def _state(api: HfApi, space_id: str, head: str) -> str:
    """What the Space holds after a failed commit, its head read once more."""
    try:
        current = api.space_info(space_id).sha
    except (httpx2.HTTPError, AttncardError):
        current = None
    if current == head:
        return (
            f"commits are all or nothing, and the Space is still at its previous commit {head[:SHA_PREFIX]}"
        )
    if current is None:
        return (
            f"commits are all or nothing, so the Space holds its previous commit {head[:SHA_PREFIX]} or this "
            "folder complete"
        )
    return (
        f"the Space is now at {current[:SHA_PREFIX]}, not {head[:SHA_PREFIX]}: this commit landed although "
        "its answer was lost, or someone else pushed meanwhile (look at the Space's history)"
    )


def _advice(code: int | None, owner: str) -> str:
    if code == 401:
        return (
            f"set HF_TOKEN to a valid token with write access to {owner} (or run `hf auth login`), push again"
        )
    if code == 403:
        return f"use a token with write access to {owner} (HF_TOKEN, or `hf auth login`), then push again"
    if code in (409, 412):
        return "someone else pushed to the Space meanwhile; push again"
    if code is None or code in HUB_BACKOFF.statuses:
        return (
            f"push again later; if it keeps failing, check that the token has write access to {owner}, and "
            "the endpoint (endpoint=, HF_ENDPOINT)"
        )
    return f"fix what the Hub says, check that the token has write access to {owner}, then push again"


__all__ = ["SPACE_FILES", "SPACE_SDK", "check_space_folder", "push_space"]
