"""Hub I/O, the push: a run folder to a Hub model repository, as one commit, tagged.

[`push_run_folder`] pushes a run folder as one commit (or none when the Hub already holds exactly its files)
and tags it `run-<started_at>-<results.json sha256[:32]>`; [`check_pushable`] says, without the network,
whether a folder may be pushed; [`sign_and_push`] signs the folder first when given a key. Retries follow
the Hub's one backoff policy ([`pipeline.hub.http.HUB_BACKOFF`]); timeouts and the overall deadline are those
of [`pipeline.hub.http.hub_client_timeout`].
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx2
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, RepoFile, constants, get_token
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.repocard import REGEX_YAML_BLOCK
from huggingface_hub.utils import get_session, hf_raise_for_status

from ..checks.lint import lint_run_folder
from ..hub.endpoint import hub_endpoint, redacted
from ..hub.http import (
    DEFAULT_DEADLINE_S,
    DEFAULT_TIMEOUT_S,
    HUB_BACKOFF,
    TRANSIENT_ERRORS,
    Deadline,
    HubAnswers,
    http_reason,
    http_status,
    hub_client_timeout,
    transport_failure,
)
from ..hub.signing import check_private_key, sign_run_folder
from ..record.errors import (
    AttncardError,
    HubDeadlineError,
    PushConflictError,
    PushError,
    PushRefusedError,
    first_line,
)
from ..record.manifest import CARD_FILE, RESULTS_FILE, hash_file, is_transport_path, sha256_file
from ..record.results import Results, Status
from ..record.run_names import run_tag
from ..record.text import SHA_PREFIX

# The calls huggingface_hub does not retry itself (the commit POST, create_repo, model_info, refs, tags) are
# retried on its schedule, HUB_BACKOFF: 5 retries after the first attempt, waiting 1, 2, 4, 8, 8 s, on its
# retried statuses; a 429 whose rate-limit headers say when the limit resets, or an answer with `Retry-After`,
# waits that long plus 1 s instead, at most 300 s. A commit is not retried blindly (`_Pusher._commit`).
# The HTTP client's timeout during a push, per network operation (connect, each read and write): a stalled
# server ends in a timeout, which is retried like any transient failure, instead of hanging the push.
PUSH_TIMEOUT_S = DEFAULT_TIMEOUT_S
# The whole push, retries and waits included: a server trickling bytes keeps every single read short, so only
# an overall deadline ends it.
PUSH_DEADLINE_S = DEFAULT_DEADLINE_S
CONFLICT_STATUSES = frozenset({409, 412})
_UPLOAD_FAILED = re.compile(r"Error while uploading '(.*)' to the Hub\.")  # huggingface_hub's RuntimeError

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True)
class PushResult:
    """What a push left on the Hub.

    Attributes:
        repo_id: the repository, `ORG/NAME`.
        commit: the head of its `main` branch after the push, which holds exactly the run folder's files
            (plus the Hub's `.gitattributes`).
        tag: the run's tag (see [`push_tag`]); it names a commit holding exactly these files.
        created_commit: whether this push made a commit; False when the Hub already held the files.
        created_tag: whether this push created the tag; False when it was already there.
        url: the repository's page, e.g. `https://huggingface.co/ORG/NAME`.
    """

    repo_id: str
    commit: str
    tag: str
    created_commit: bool
    created_tag: bool
    url: str


@dataclass(frozen=True)
class _LocalFile:
    """A file of the run folder, with both ids the Hub may report for it."""

    path: Path
    sha256: str  # what the Hub reports for a file stored in LFS
    git_oid: str  # the git blob id, what it reports for a regular file


def push_tag(run_dir: str | os.PathLike) -> str:
    """The tag a push of this run folder puts on its commit: `run-<started_at>-<sha>`.

    `<started_at>` is results.json's `started_at` in UTC as `YYYYMMDDTHHMMSSZ`; `<sha>` is the first
    `RUN_TAG_DIGEST_HEX` (32) hex digits, 128 bits, of results.json's sha256, which covers every other file
    through its manifest: finding another results.json with the same tag is a 2^128 search. The tag is the
    same on every push of the same folder, and two different runs started in the same second still get
    different tags.

    Args:
        run_dir: the run folder.

    Returns:
        The tag name.

    Raises:
        [`ResultsError`]: results.json is missing or unreadable.

    Example:
        >>> push_tag("runs/tiny-gpt2-none-sst2")
        'run-...T...Z-...'
    """
    run_dir = Path(run_dir)
    return run_tag(Results.load(run_dir).started_at, sha256_file(run_dir / RESULTS_FILE))


def check_pushable(run_dir: str | os.PathLike, repo_id: str, allow_fail: bool = False) -> Results:
    """Checks, without any network access, that a folder may be pushed to `repo_id`.

    A folder is pushable when it is a run folder (it has a results.json that loads), `attncard lint` finds
    nothing in it, its card was rendered for `repo_id` (results.json's `repo_id`, which the card's usage
    snippet loads from), the status line at the top of its card names results.json's status, and that
    status is not FAIL, unless `allow_fail`.

    Args:
        run_dir: the run folder.
        repo_id: the repository it is to be pushed to, `ORG/NAME`.
        allow_fail: accept a run whose status is FAIL (its card says so at its top).

    Returns:
        The run's results.

    Raises:
        [`PushRefusedError`]: the folder may not be pushed; the message says why.

    Example:
        >>> results = check_pushable("runs/tiny-gpt2-none-sst2", "loopback-user/tiny-gpt2-none-sst2")
        >>> results.verification.status
        <Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>
        >>> check_pushable("runs/tiny-gpt2-none-sst2", "someone-else/tiny-gpt2-none-sst2")
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.PushRefusedError: runs/tiny-gpt2-none-sst2: its card was rendered for
        loopback-user/tiny-gpt2-none-sst2, ...
    """
    run_dir = Path(run_dir)
    try:
        findings = lint_run_folder(run_dir)
        results = Results.load(run_dir)
    except AttncardError as error:
        raise PushRefusedError(f"{error}; nothing was pushed") from None
    if findings:
        raise PushRefusedError(
            f"{run_dir}: `attncard lint` found {len(findings)} problem(s), first: {findings[0]}; nothing was "
            f"pushed: run `attncard lint {run_dir}` and re-run publish"
        )
    if results.repo_id is None:
        raise PushRefusedError(
            f"{run_dir}: its card was rendered without a repo_id, so its usage snippet loads the local "
            f"folder; nothing was pushed: re-run publish with repo_id={repo_id}",
            options=("repo_id",),
            repo_id=repo_id,
        )
    if results.repo_id != repo_id:
        raise PushRefusedError(
            f"{run_dir}: its card was rendered for {results.repo_id}, and its usage snippet loads from "
            f"there; nothing was pushed: push it to {results.repo_id}, or re-run publish with repo_id="
            f"{repo_id}",
            options=("repo_id",),
            repo_id=repo_id,
        )
    status = results.verification.status
    card_status = _card_status(run_dir)
    if card_status != status.value:
        raise PushRefusedError(
            f"{run_dir}: results.json says {status.value} but the card's status line says "
            f"{card_status or 'nothing'}; nothing was pushed: re-run publish to render the card again"
        )
    if status == Status.FAIL and not allow_fail:
        verification = results.verification
        raise PushRefusedError(
            f"{run_dir}: the run's status is FAIL (accuracy {verification.accuracy:.4f} is below the "
            f"threshold {verification.threshold:.4f}); nothing was pushed: pass allow_fail=True to publish "
            "it anyway, its card says FAIL at the top",
            options=("allow_fail",),
        )
    return results


def _card_status(run_dir: Path) -> str | None:
    """The status the card's first `**Status: …**` line names, before its first section; None without one."""
    text = (run_dir / CARD_FILE).read_text(encoding="utf-8")
    match = REGEX_YAML_BLOCK.search(text)
    body = text[match.end() :] if match else text
    for line in body.splitlines():
        if line.startswith("## "):
            return None
        if line.startswith("**Status: "):
            return line.removeprefix("**Status: ").split("**", 1)[0].strip()
    return None


def push_run_folder(
    run_dir: str | os.PathLike,
    repo_id: str,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    allow_fail: bool = False,
    timeout: float = PUSH_TIMEOUT_S,
    deadline: float = PUSH_DEADLINE_S,
) -> PushResult:
    """Pushes a run folder to a Hub model repository: all of it in one commit, or nothing.

    1. Refuses, before any network access, a folder that [`check_pushable`] rejects: not a run folder, a
       finding of `attncard lint`, a card rendered for another repository, a FAIL run without `allow_fail`.
    2. Creates the repository if needed (`create_repo(exist_ok=True)`) and reads the head of `main`.
    3. Compares the files there with the folder's (the git blob sha1 of a regular file, the sha256 of one in
       LFS; the Hub's `.gitattributes` is ignored). When they are identical it makes no commit. Otherwise it
       makes ONE commit with `parent_commit` = the head read: every file of the folder, and the deletion of
       every other file there. Commits are atomic on the Hub, so it never shows a card without its weights,
       and two concurrent pushes cannot interleave: the second is refused ([`PushConflictError`]). The
       commit message names the run and its status; its description holds results.json's sha256 and the tag.
    4. Tags the commit `run-<started_at UTC, YYYYMMDDTHHMMSSZ>-<results.json sha256[:32]>` ([`push_tag`]).
       The tag is the same on every push of the same folder: pushing a folder again finds the files and the
       tag in place and changes nothing. A tag already there is left as it is when the commit it names holds
       exactly the folder's files, and refused otherwise.

    Transient failures of the calls huggingface_hub does not retry itself (the commit, `create_repo`,
    `model_info`, refs, the tag) are retried on its schedule, [`pipeline.hub.http.HUB_BACKOFF`] (5 retries,
    waits from 1 s doubling up to 8 s, `Retry-After` + 1 s on a 429). After a
    failed commit (an error status, a dropped connection, a timeout) the head is read again first: when
    the commit landed after all, it is not made twice. Every request runs with `timeout` seconds per network
    operation, and the whole push must end within `deadline` seconds, waits and retries included, so neither
    a stalled server nor one trickling bytes can hang a push.

    The token is sent only to the endpoint's origin, which must be https (plain http to a loopback host
    only): it is not written, and no log line, warning or error message shows it, even when a server echoes
    it back (see [`pipeline.hub.endpoint.redacted`]).

    Args:
        run_dir: the run folder written by `publish`, e.g. `runs/minilm-none-sst2`.
        repo_id: the model repository, `ORG/NAME`; it must be the one the card was rendered for.
        endpoint: the Hub (default: `HF_ENDPOINT`, else https://huggingface.co).
        token: a token with write access to ORG (default: `HF_TOKEN`, else the `hf auth login` token).
        allow_fail: push a run whose status is FAIL.
        timeout: seconds each network operation may take before it is abandoned (and retried).
        deadline: seconds the whole push may take.

    Returns:
        [`PushResult`]: the commit `main` is at, the tag, and whether this push created them.

    Raises:
        [`InsecureEndpointError`]: the endpoint is plain http to a host not loopback; nothing was sent.
        [`PushRefusedError`]: the folder may not be pushed; nothing was sent.
        [`PushConflictError`]: someone else pushed meanwhile; this push committed nothing: re-run it.
        [`PushError`]: no token, offline mode, an error the Hub answered, or transient failures that outlasted
            the retries; commits are atomic, so the repository is at its previous commit or holds this run.
        [`HubDeadlineError`]: the push ran past `deadline`; the repository is as for a [`PushError`].

    Example:
        >>> result = push_run_folder("runs/tiny-gpt2-none-sst2", "loopback-user/tiny-gpt2-none-sst2")
        >>> result.tag, result.created_commit, result.created_tag
        ('run-...T...Z-...', True, True)
        >>> push_run_folder("runs/tiny-gpt2-none-sst2", "loopback-user/tiny-gpt2-none-sst2").created_commit
        False
    """
    run_dir = Path(run_dir)
    hub = hub_endpoint(endpoint)
    results = check_pushable(run_dir, repo_id, allow_fail)
    token = token or get_token()
    if not token:
        raise PushError(
            f"no Hub token to push {run_dir} with: set HF_TOKEN to a token with write access to "
            f"{repo_id.split('/')[0]}, or run `hf auth login`"
        )
    # A server may echo what it was sent, the token included, in the answers that retry warnings and errors
    # quote.
    with redacted(token):
        return _Pusher(run_dir, repo_id, results, hub, token, Deadline(deadline)).push(timeout)


# What only a push reads: given without --push, each is a mistake (`check_push_only_options`).
PUSH_ONLY_OPTIONS = ("allow_fail", "hub_endpoint", "hub_timeout", "hub_deadline", "sign_key")


def check_push_only_options(settings: object) -> None:
    """Fails when `settings` (parsed arguments, or settings with the same attribute names) sets an option that
    only a push reads, without --push.

    Raises:
        [`AttncardError`]: the first such option, and what to do.
    """
    given = [name for name in PUSH_ONLY_OPTIONS if getattr(settings, name)]
    if given:
        option = "--" + given[0].replace("_", "-")
        raise AttncardError(f"{option} only applies with --push; add --push, or drop {option}")


def check_push_setup(repo_id: str | None, endpoint: str | None = None, sign_key: Path | None = None) -> None:
    """Fails fast, before any training, when a push could not happen: no repository, no token, offline, an
    endpoint the token may not go to (plain http off this machine), a signing key that cannot sign.

    Raises:
        [`AttncardError`]: what stands in the way, naming the option that fixes it.
    """
    if not repo_id:
        raise AttncardError(
            "--push needs --repo-id ORG/NAME: the repository to push to, which the card's usage snippet "
            "loads from"
        )
    if not get_token():
        raise AttncardError(
            f"--push needs a Hub token with write access to {repo_id.split('/')[0]}: set HF_TOKEN, or run "
            "`hf auth login`"
        )
    if constants.is_offline_mode():
        raise AttncardError("HF_HUB_OFFLINE is set: --push needs the network; unset it, or drop --push")
    hub_endpoint(endpoint)
    if sign_key is not None:
        check_private_key(sign_key)


def sign_and_push(
    run_dir: str | os.PathLike,
    repo_id: str,
    allow_fail: bool = False,
    endpoint: str | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
    sign_key: str | os.PathLike | None = None,
) -> PushResult:
    """Pushes a run folder with [`push_run_folder`], signing it first with `sign_key` when given, once the
    folder is known to be pushable (a refused folder is left unsigned). Progress goes to this module's logger.

    Args:
        run_dir: the run folder.
        repo_id: the repository, `ORG/NAME`, the card was rendered for.
        allow_fail: push a run whose status is FAIL.
        endpoint: the Hub (default `$HF_ENDPOINT`, else https://huggingface.co).
        timeout: per network operation, in seconds (default `PUSH_TIMEOUT_S`).
        deadline: for the whole push, in seconds (default `PUSH_DEADLINE_S`).
        sign_key: a PEM private key to sign the folder with (`model.sig`, OpenSSF model signing).

    Returns:
        The [`PushResult`].

    Example:
        >>> run_dir, repo_id = "runs/tiny-gpt2-none-sst2", "loopback-user/tiny-gpt2-none-sst2"
        >>> result = sign_and_push(run_dir, repo_id, sign_key="signing-key.pem")
        >>> result.tag == push_tag(run_dir), "model.sig" in HfApi().list_repo_files(repo_id)
        (True, True)
    """
    if sign_key is not None:
        check_pushable(run_dir, repo_id, allow_fail)
        signature = sign_run_folder(Path(run_dir), Path(sign_key))
        logger.info("signed %s/ with %s: %s", run_dir, sign_key, signature)
    result = push_run_folder(
        run_dir,
        repo_id,
        endpoint=endpoint,
        allow_fail=allow_fail,
        timeout=timeout if timeout is not None else PUSH_TIMEOUT_S,
        deadline=deadline if deadline is not None else PUSH_DEADLINE_S,
    )
    commit = "new commit" if result.created_commit else "unchanged, no commit"
    tag = "tagged" if result.created_tag else "tag already there"
    logger.info(
        "pushed %s/ to %s@%s (%s), %s %s: %s",
        run_dir,
        result.repo_id,
        result.commit[:SHA_PREFIX],
        commit,
        tag,
        result.tag,
        result.url,
    )
    return result


class _Pusher:
    """One push of a run folder; see [`push_run_folder`]."""

    def __init__(
        self, run_dir: Path, repo_id: str, results: Results, hub: str, token: str, deadline: Deadline
    ):
        self.run_dir = run_dir
        self.repo_id = repo_id
        self.results = results
        self.hub = hub
        self.deadline = deadline
        self.api = HfApi(endpoint=self.hub, token=token)
        self.tag = push_tag(run_dir)
        self.results_sha256 = sha256_file(run_dir / RESULTS_FILE)
        self.local = _local_files(run_dir)
        self._listings: dict[str, dict[str, RepoFile]] = {}  # commit -> its files; commits never change
        self.answers = HubAnswers()  # those of the push's requests, once it runs

    def push(self, timeout: float) -> PushResult:
        if constants.is_offline_mode():
            raise PushError(
                f"HF_HUB_OFFLINE is set: pushing {self.run_dir} to {self.hub} needs the network; unset it "
                "(or set HF_HUB_OFFLINE=0) and push again"
            )
        try:
            with hub_client_timeout(timeout, self.deadline, endpoint=self.hub) as self.answers:
                return self._push()
        except HubDeadlineError:
            raise HubDeadlineError(
                f"pushing {self.run_dir} to {self.repo_id} on {self.hub} ran past its deadline of "
                f"{self.deadline.seconds:g} s (a stalled or trickling server?); commits are all or nothing, "
                f"so {self.repo_id} holds its previous commit or this run complete: push again later, or "
                "allow more time (deadline=)",
                options=("deadline",),
                repo_id=self.repo_id,
                endpoint=self.hub,
            ) from None

    def _push(self) -> PushResult:
        self._validate_card()
        url = str(
            self._retried(
                "creating the repository", lambda: self.api.create_repo(self.repo_id, exist_ok=True)
            )
        )
        head = self._head()
        tagged = self._tags().get(self.tag)
        if tagged is not None and not self._holds_run(tagged):
            raise PushError(
                f"tag {self.tag} of {self.repo_id} names commit {tagged[:SHA_PREFIX]}, whose files "
                f"differ from {self.run_dir}; nothing was pushed: look at that commit, delete the tag if "
                f"it is wrong (HfApi().delete_tag('{self.repo_id}', tag='{self.tag}')), then push again"
            )
        if self._holds_run(head):
            commit = head
            logger.info("%s@%s already holds %s: no commit", self.repo_id, head[:SHA_PREFIX], self.run_dir)
        else:
            commit = self._commit(head)
        created_tag = tagged is None and self._create_tag(commit)
        return PushResult(
            repo_id=self.repo_id,
            commit=commit,
            tag=self.tag,
            created_commit=commit != head,
            created_tag=created_tag,
            url=url,
        )

    def _validate_card(self) -> None:
        """Asks the Hub's own card validation (`POST /api/validate-yaml`, what huggingface_hub's
        `RepoCard.validate` calls) before anything is written, on this push's endpoint: a refusal (400) is a
        [`PushRefusedError`] quoting the Hub, and each warning it gives is logged."""
        card = (self.run_dir / CARD_FILE).read_text(encoding="utf-8")

        def validate() -> httpx2.Response:
            response = get_session().post(
                f"{self.hub}/api/validate-yaml",
                json={"repoType": "model", "content": card},
                headers={"Accept": "application/json"},
            )
            if response.status_code != 400:  # a refusal is an answer, not a failure to retry
                hf_raise_for_status(response)
            return response

        response = self._retried("validating the card", validate)
        if response.status_code == 400:
            raise PushRefusedError(
                f"{self.hub} refuses the card of {self.run_dir}: {first_line(ValueError(response.text))}; "
                "nothing was pushed: fix what it names (attncard lint checks the same rules it knows), "
                "then push again"
            )
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        warnings = answer.get("warnings", []) if isinstance(answer, dict) else []
        for warning in warnings if isinstance(warnings, list) else []:
            message = warning.get("message", warning) if isinstance(warning, dict) else warning
            logger.warning("the Hub warns about the card of %s: %s", self.run_dir, str(message)[:500])

    # -- reading the repository

    def _head(self) -> str:
        info = self._retried("reading the head of main", lambda: self.api.model_info(self.repo_id))
        if not info.sha:
            raise PushError(
                f"{self.hub} gave no commit for the main branch of {self.repo_id}; try again later"
            )
        return info.sha

    def _tags(self) -> dict[str, str]:
        refs = self._retried("reading the tags", lambda: self.api.list_repo_refs(self.repo_id))
        return {tag.name: tag.target_commit for tag in refs.tags}

    def _remote_files(self, revision: str) -> dict[str, RepoFile]:
        """The files of the repository at commit `revision` (huggingface_hub retries this listing itself)."""
        if revision in self._listings:
            return self._listings[revision]
        entries = self._once(
            f"listing the files of {revision[:SHA_PREFIX]}",
            lambda: list(self.api.list_repo_tree(self.repo_id, revision=revision, recursive=True)),
        )
        self._listings[revision] = {
            entry.path: entry
            for entry in entries
            # The Hub's own `.gitattributes` (in every repository) is neither compared nor deleted.
            if isinstance(entry, RepoFile) and (not is_transport_path(entry.path) or entry.path in self.local)
        }
        return self._listings[revision]

    def _holds_run(self, revision: str) -> bool:
        """Whether the repository at `revision` holds exactly the run folder's files."""
        remote = self._remote_files(revision)
        return remote.keys() == self.local.keys() and all(
            _same_file(remote[path], local) for path, local in self.local.items()
        )

    # -- writing

    def _commit(self, head: str) -> str:
        """Commits the run folder on top of `head`; returns the commit. At most one commit lands."""
        status = self.results.verification.status.value
        message = f"Publish {self.results.repo_name}: {status}"
        description = (
            f"attncard run {self.results.repo_name}, status {status}, accuracy "
            f"{self.results.verification.accuracy:.4f} on {self.results.verification.n} rows "
            f"({self.results.dataset.task}).\n\nresults.json sha256: {self.results_sha256}\ntag: {self.tag}\n"
            f"command: {self.results.command}\n"
        )
        deletions = sorted(self._remote_files(head).keys() - self.local.keys())
        attempt = 0
        while True:
            # New operation objects on every attempt: huggingface_hub marks the ones it sent as used.
            operations = [
                CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(local.path))
                for path, local in sorted(self.local.items())
            ] + [CommitOperationDelete(path_in_repo=path) for path in deletions]
            logger.info(
                "committing %d file(s) and %d deletion(s) to %s on top of %s",
                len(self.local),
                len(deletions),
                self.repo_id,
                head[:SHA_PREFIX],
            )
            self.answers.first_failure = None
            try:
                commit = self.api.create_commit(
                    self.repo_id,
                    operations,
                    commit_message=message,
                    commit_description=description,
                    parent_commit=head,
                ).oid
            except HfHubHTTPError as error:
                code = http_status(error)
                if code in CONFLICT_STATUSES:
                    return self._after_conflict(head, error)
                if code not in HUB_BACKOFF.statuses:
                    raise PushError(
                        f"{self.hub} refused the commit to {self.repo_id} ({http_reason(error)}); "
                        f"{self._state(head, self._head_once())}: {_advice(code, self.repo_id)}"
                    ) from None
                reason, wait = http_reason(error), HUB_BACKOFF.wait_s(attempt, error.response)
            except TRANSIENT_ERRORS as error:
                reason, wait = transport_failure(error), HUB_BACKOFF.wait_s(attempt)
            except RuntimeError as error:
                if not _UPLOAD_FAILED.match(str(error)):
                    raise
                state = self._state(head, self._head_once())
                raise PushError(
                    f"{self._upload_failure(error)}; nothing was committed, {state}: push again later, and "
                    "if the upload went to a host you do not expect, use another endpoint"
                ) from None
            except ValueError as error:  # the Hub's check of the card's metadata, made before any upload
                raise PushError(
                    f"{self.hub} refused the card of {self.run_dir} ({first_line(error)}); nothing was "
                    "committed: fix the card's front matter (`attncard lint`) and re-run publish"
                ) from None
            else:
                if not self._holds_run(commit):
                    raise PushConflictError(
                        f"{self.repo_id} at {commit[:SHA_PREFIX]} does not hold exactly {self.run_dir}: "
                        "someone else pushed to it at the same time; re-run the push"
                    )
                return commit
            if attempt == HUB_BACKOFF.retries:
                current = self._head_once()
                if current is not None and current != head and self._holds_run(current):
                    return current  # the last attempt landed after all
                raise PushError(
                    f"gave up committing {self.run_dir} to {self.repo_id} after {attempt + 1} attempts "
                    f"(last: {reason}); {self._state(head, current)}: re-run the push later"
                )
            attempt += 1
            logger.warning(
                "the commit to %s failed (%s); retry %d of %d in %.2f s",
                self.repo_id,
                reason,
                attempt,
                HUB_BACKOFF.retries,
                wait,
            )
            self._sleep(wait)
            # The commit may have landed although its answer never came (or came as an error).
            current = self._head()
            if current != head:
                if self._holds_run(current):
                    logger.info("the commit landed: %s is at %s", self.repo_id, current[:SHA_PREFIX])
                    return current
                raise self._conflict(head, current)

    def _upload_failure(self, error: RuntimeError) -> str:
        """What failed in huggingface_hub's upload of a file ("Error while uploading 'PATH' to the Hub.")."""
        path = _UPLOAD_FAILED.match(str(error)).group(1)
        cause = error.__cause__
        if isinstance(cause, HfHubHTTPError) and cause.response is not None:
            url = cause.response.request.url
            reason = f"{http_reason(cause)} from {url.scheme}://{url.netloc.decode()}"
        elif self.answers.first_failure is not None:
            # Uploads run in threads: after one connection failed, the others fail on the client it closed.
            reason = self.answers.first_failure
        else:
            reason = first_line(cause) if cause is not None else "no reason given"
        return f"uploading {path} to where {self.hub}'s LFS answer sends it failed ({reason})"

    def _after_conflict(self, head: str, error: HfHubHTTPError) -> str:
        """After a 409/412 on the commit: our own earlier attempt may be what moved the head."""
        current = self._head()
        if current != head and self._holds_run(current):
            return current
        if current == head:
            raise PushConflictError(
                f"{self.hub} refused the commit to {self.repo_id} as a conflict ({http_reason(error)}): "
                f"someone else is pushing to it; nothing was committed and it is still at "
                f"{head[:SHA_PREFIX]}: re-run the push"
            )
        raise self._conflict(head, current)

    def _conflict(self, head: str, current: str) -> PushConflictError:
        return PushConflictError(
            f"someone else pushed to {self.repo_id} while this push ran (main moved from {head[:SHA_PREFIX]} "
            f"to {current[:SHA_PREFIX]}); nothing of {self.run_dir} was committed: re-run the push"
        )

    def _head_once(self) -> str | None:
        """The head of main, read once; None when the Hub does not answer."""
        try:
            return self._once("reading the head of main", lambda: self.api.model_info(self.repo_id).sha)
        except PushError:
            return None

    def _state(self, head: str, current: str | None) -> str:
        """What the repository holds after a failed commit, given its head read again (None: unknown)."""
        if current is None:
            return (
                f"commits are all or nothing, so {self.repo_id} holds either its previous commit "
                f"{head[:SHA_PREFIX]} or this run complete"
            )
        if current == head:
            return f"{self.repo_id} is still at its previous commit {head[:SHA_PREFIX]}"
        return f"{self.repo_id} is now at {current[:SHA_PREFIX]}, which someone else pushed"

    def _create_tag(self, commit: str) -> bool:
        """Tags `commit`; True when this push created the tag."""
        message = f"{self.results.repo_name} {self.results.verification.status.value}, results.json sha256 "
        message += self.results_sha256

        def create() -> bool:
            try:
                self.api.create_tag(self.repo_id, tag=self.tag, tag_message=message, revision=commit)
            except HfHubHTTPError as error:
                if http_status(error) == 409:  # the tag is there already
                    return False
                raise
            return True

        if self._retried(f"tagging {commit[:SHA_PREFIX]} as {self.tag}", create):
            logger.info("tagged %s@%s as %s", self.repo_id, commit[:SHA_PREFIX], self.tag)
            return True
        # The tag was not there when this push began: an earlier attempt whose answer was lost made it, or
        # someone else tagged the same run meanwhile.
        tagged = self._tags().get(self.tag)
        if tagged == commit:
            return True
        if tagged is None or not self._holds_run(tagged):
            raise PushError(
                f"{self.repo_id} has a tag {self.tag} that does not name {commit[:SHA_PREFIX]}, which holds "
                f"{self.run_dir}; the files are pushed, the tag is not: look at the tag, delete it if it is "
                "wrong, then push again"
            )
        return False

    # -- calling the Hub

    def _sleep(self, wait: float) -> None:
        """Waits before a retry, never past the deadline: the retry then stops with [`HubDeadlineError`]."""
        time.sleep(max(0.0, min(wait, self.deadline.left())))

    def _retried(self, what: str, call: Callable[[], _T]) -> _T:
        """Runs `call`, retrying transient failures; raises [`PushError`] on any other failure, and when
        transient ones outlast the retries."""
        attempt = 0
        while True:
            try:
                return call()
            except HfHubHTTPError as error:
                code = http_status(error)
                if code not in HUB_BACKOFF.statuses or attempt == HUB_BACKOFF.retries:
                    raise self._failure(what, http_reason(error), attempt, code) from None
                reason, wait = http_reason(error), HUB_BACKOFF.wait_s(attempt, error.response)
            except TRANSIENT_ERRORS as error:
                if attempt == HUB_BACKOFF.retries:
                    raise self._failure(what, transport_failure(error), attempt, None) from None
                reason, wait = transport_failure(error), HUB_BACKOFF.wait_s(attempt)
            attempt += 1
            logger.warning(
                "%s failed (%s); retry %d of %d in %.2f s", what, reason, attempt, HUB_BACKOFF.retries, wait
            )
            self._sleep(wait)

    def _once(self, what: str, call: Callable[[], _T]) -> _T:
        """Runs `call` once (huggingface_hub retries it), mapping its failures to [`PushError`]."""
        try:
            return call()
        except HfHubHTTPError as error:
            raise self._failure(what, http_reason(error), 0, http_status(error)) from None
        except TRANSIENT_ERRORS as error:
            raise self._failure(what, transport_failure(error), 0, None) from None

    def _failure(self, what: str, reason: str, retries: int, code: int | None) -> PushError:
        if code is not None and code not in HUB_BACKOFF.statuses:
            return PushError(
                f"{self.hub} answered {reason} while {what} of {self.repo_id}; nothing more was pushed: "
                f"{_advice(code, self.repo_id)}"
            )
        tries = f" after {retries + 1} attempts" if retries else ""
        return PushError(
            f"could not reach {self.hub} while {what} of {self.repo_id}{tries} (last: {reason}); nothing "
            "more was pushed: check the network and the endpoint (endpoint=, HF_ENDPOINT) and push again",
            options=("endpoint",),
            repo_id=self.repo_id,
        )


def _local_files(run_dir: Path) -> dict[str, _LocalFile]:
    """Every file of the run folder, by POSIX path, with its sha256 and git blob id."""
    files = {}
    for path in sorted(run_dir.rglob("*")):
        if not path.is_file():
            continue
        sha256, sha1 = hashlib.sha256(), hashlib.sha1()
        sha1.update(b"blob %d\0" % path.stat().st_size)
        hash_file(path, sha256, sha1)
        relative = path.relative_to(run_dir).as_posix()
        files[relative] = _LocalFile(path=path, sha256=sha256.hexdigest(), git_oid=sha1.hexdigest())
    return files


def _same_file(remote: RepoFile, local: _LocalFile) -> bool:
    if remote.lfs is not None:
        return remote.lfs.sha256 == local.sha256
    return remote.blob_id == local.git_oid




def _advice(code: int | None, repo_id: str) -> str:
    owner = repo_id.split("/")[0]
    if code == 401:
        return f"set HF_TOKEN to a valid token with write access to {owner}, or run `hf auth login`"
    if code == 403:
        return f"use a token with write access to {owner} (HF_TOKEN, or `hf auth login`)"
    return "fix what the Hub says and push again"
