"""Fetching a Hub repository's files into a folder attncard owns, each checked, with no trust in the server.

[`fetch_run`] downloads a repository snapshot per endpoint ([`endpoint_key`]), without huggingface_hub's file
download: file names come from the tree listing and are checked, sizes are capped before any byte is
fetched, every file is checked against the id the listing gives, and no header (an ETag, say) is ever used
to build a path. Its requests run under [`hub_client_timeout`]: timeouts, the deadline, and
huggingface_hub's retries ([`pipeline.hub.http.HUB_BACKOFF`]).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import typing
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx2
from huggingface_hub import HfApi, RepoFile, constants, get_token
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
)
from huggingface_hub.errors import RevisionNotFoundError as HubRevisionNotFoundError
from huggingface_hub.utils import build_hf_headers, validate_repo_id

from ..record.errors import (
    DownloadError,
    HubDeadlineError,
    HubNoAnswerError,
    HubUnreachableError,
    IntegrityError,
    RepoNotFoundError,
    RevisionNotFoundError,
    first_line,
)
from ..record.manifest import RESULTS_FILE, hash_file, is_weights, max_file_bytes
from ..record.text import COMMIT_RE, SHA_PREFIX
from .endpoint import endpoint_key, hub_endpoint, origin, redacted
from .http import (
    DEFAULT_DEADLINE_S,
    DEFAULT_TIMEOUT_S,
    Deadline,
    bind_deadline,
    hub_client_timeout,
    unasked_encoding,
)

# Bounds on what a tree listing may ask for; a run folder holds about ten small files.
MAX_FILES = 10_000
MAX_PATH_CHARS = 1024
MAX_DEPTH = 16
MAX_NAME_CHARS = 255
MAX_FILE_BYTES = 1 << 40
# What a download may write, checked on the tree listing's sizes before any file is fetched. A run is a few
# MiB; a full model's weights fit too. results.json comes first; a file its manifest does not list (the
# signature, .gitattributes) may only be small.
DEFAULT_MAX_DOWNLOAD_BYTES = 4 << 30
MAX_UNLISTED_FILE_BYTES = 1 << 20
MAX_REDIRECTS = 5
_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchedRun:
    """A repository snapshot fetched and checked file by file against the Hub's tree listing.

    Attributes:
        folder: `<cache_dir>/<endpoint key>/<org>--<name>/<commit>`, holding exactly the files of the listing
            (see [`endpoint_key`]).
        commit: the 40-hex commit sha the files are from.
    """

    folder: Path
    commit: str


@dataclass(frozen=True)
class _File:
    """One file of a tree listing: its checked path, its size and the id its bytes must have."""

    path: str
    size: int
    blob_id: str  # the git blob id: sha1 of the file for a regular file, of its LFS pointer for an LFS file
    sha256: str | None  # the LFS object id, for a file stored in LFS

    def hasher(self) -> hashlib._Hash:
        if self.sha256 is not None:
            return hashlib.sha256()
        blob = hashlib.sha1()
        blob.update(b"blob %d\0" % self.size)  # a git blob id covers this header, then the bytes
        return blob

    @property
    def expected(self) -> str:
        return self.sha256 if self.sha256 is not None else self.blob_id


class HubOptions(typing.TypedDict, total=False):
    """Where a run is fetched from, and how long that may take: the keyword arguments of [`fetch_run`], and
    part of those of the download family ([`pipeline.verify.download.DownloadOptions`]). Each defaults to
    None.

    Keys:
        endpoint: the Hub (default: `HF_ENDPOINT`, else https://huggingface.co); see [`hub_endpoint`].
        token: a token for a private or gated repository (default: `HF_TOKEN`, else the login's).
        cache_dir: the cache folder (default: `attncard` under huggingface_hub's `HF_HOME`). A new folder
            makes sure the files are the server's current copy rather than one cached earlier.
        timeout: seconds each network operation (connect, one read, one write) may take (default
            `DEFAULT_TIMEOUT_S`, 60).
        deadline: seconds the whole download may take, however the server trickles (default
            `DEFAULT_DEADLINE_S`, 1800).

    Example:
        >>> options: HubOptions = {"timeout": 30, "deadline": 300}
        >>> fetch_run("loopback-user/tiny-gpt2-none-sst2", "v1", **options).commit
        '...'
    """

    endpoint: str | None
    token: str | None
    cache_dir: str | os.PathLike | None
    timeout: float | None
    deadline: float | None


def hub_options(options: typing.Mapping[str, typing.Any]) -> HubOptions:
    """The keys of `options` that are [`HubOptions`]: where from and how long, for [`fetch_run`]."""
    hub_keys = typing.get_type_hints(HubOptions)
    return typing.cast(HubOptions, {key: value for key, value in options.items() if key in hub_keys})


def check_options(options: typing.Mapping[str, object], kind: type, function: str) -> None:
    """Raises `TypeError` for a keyword of `function` that the TypedDict `kind` does not name, as Python does
    for a misspelt keyword argument."""
    unknown = sorted(set(options) - set(typing.get_type_hints(kind)))
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")


def fetch_run(
    repo_id: str,
    revision: str | None = None,
    *,
    max_bytes: int | None = None,
    without_weights: bool = False,
    **options: typing.Unpack[HubOptions],
) -> FetchedRun:
    """Downloads a Hub model repository's snapshot into a folder attncard owns, checking every file.

    1. Resolves `revision` to a commit with `model_info` (a 40-hex sha must be confirmed by the Hub).
    2. Lists the files at that commit (`list_repo_tree`) and checks every path: relative, each part a
       plain name (`[A-Za-z0-9._-]+`, not `.` or `..`), bounded in length, depth and count; and every size
       and id (40-hex blob id, 64-hex LFS sha256). The listed sizes must add up to at most `max_bytes`,
       and each file's be at most what its kind may have (`manifest.max_file_bytes`: results.json 16 MiB, a
       config 1 MiB, …), before any file is fetched.
    3. Fetches results.json first; then a file its manifest does not list may be at most
       `MAX_UNLISTED_FILE_BYTES` (the signature, .gitattributes), checked before it is fetched.
    4. GETs each file from `{endpoint}/{repo_id}/resolve/{commit}/{path}`, following redirects itself
       (at most `MAX_REDIRECTS`) and sending the token to the endpoint's origin only; streams it into a
       temporary file next to its place, never more bytes than listed and never compressed (a
       `Content-Encoding` is refused: only `identity` is asked for), checks the bytes against the listed id
       (git blob sha1, or sha256 for LFS) and renames it into place.

    The cache is kept per endpoint ([`endpoint_key`]): a commit's files are whatever the endpoint that
    served them said the commit holds, so a mirror's copy is never given for another endpoint. Files
    already there with the listed id are not downloaded again; a commit fetched completely before from the
    same endpoint is not listed again (a commit never changes). No header is used to build a path. When
    the endpoint cannot be reached, or HF_HUB_OFFLINE is set, a commit sha (or a branch or tag whose commit
    this cache recorded when it fetched it) fetched completely before from the same endpoint is returned
    from the cache. The token never shows in a log line, warning or error ([`redacted`]).

    Args:
        repo_id: the model repository, `ORG/NAME`.
        revision: a branch, tag or commit sha (default: `main`).
        max_bytes: bytes the whole download may write (default `DEFAULT_MAX_DOWNLOAD_BYTES`).
        without_weights: leave out the weights (`*.safetensors`): the folder is then a cards copy of the
            run, what `attncard summary --hub` and `verify --predictions` read. A complete fetch of the
            commit serves it too; a fetch without weights never serves a later one that wants them.
        **options: where from and how long: the keys of [`HubOptions`] (endpoint, token, cache_dir, timeout,
            deadline).

    Returns:
        [`FetchedRun`]: the folder and the commit.

    Raises:
        [`InsecureEndpointError`]: the endpoint is refused; nothing was sent.
        [`RepoNotFoundError`], [`RevisionNotFoundError`]: no such repository (or no access), or no such
            revision.
        [`HubUnreachableError`]: offline or unreachable (it never answered), and not in the cache.
        [`HubDeadlineError`]: the download ran past `deadline`.
        [`HubAnswerError`]: an API answer over `MAX_ANSWER_BYTES`, or compressed although none was asked for.
        [`IntegrityError`]: a file's bytes differ from the listed id.
        [`DownloadError`]: an unsafe or malformed listing, sizes over their caps or the budget, a file sent
            compressed, an HTTP error, a full disk.

    Example:
        >>> run = fetch_run("loopback-user/tiny-gpt2-none-sst2", "v1")
        >>> run.folder.name == run.commit, (run.folder / "results.json").is_file()
        (True, True)
    """
    check_options(options, HubOptions, "fetch_run")
    endpoint, token, cache_dir = options.get("endpoint"), options.get("token"), options.get("cache_dir")
    timeout, deadline = options.get("timeout"), options.get("deadline")
    hub = hub_endpoint(endpoint)
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise DownloadError(f"'{repo_id}' is not a Hub repository id; pass ORG/NAME") from None
    if repo_id.count("/") != 1:
        raise DownloadError(f"'{repo_id}' is not a Hub repository id ORG/NAME (it has no ORG)")
    where = f"{repo_id}@{revision}" if revision else repo_id
    root = Path(cache_dir if cache_dir is not None else Path(constants.HF_HOME) / "attncard")
    root = root.expanduser() / endpoint_key(hub) / repo_id.replace("/", "--")
    limit = Deadline(deadline if deadline is not None else DEFAULT_DEADLINE_S)
    budget = max_bytes if max_bytes is not None else DEFAULT_MAX_DOWNLOAD_BYTES
    with redacted(token or get_token()):
        if constants.is_offline_mode():
            cached = _cached(root, hub, revision, without_weights)
            if cached is None:
                raise HubUnreachableError(
                    f"HF_HUB_OFFLINE is set and {where} is not in the local cache: set HF_HUB_OFFLINE=0 to "
                    "download it, or pass a local run folder"
                )
            return cached
        try:
            # A download can be started again: a listing a server does not answer is not worth five timeouts.
            with hub_client_timeout(
                timeout or DEFAULT_TIMEOUT_S, limit, endpoint=hub, retry_unanswered=False
            ):
                return _fetch_online(
                    repo_id,
                    revision,
                    hub,
                    token,
                    root,
                    timeout or DEFAULT_TIMEOUT_S,
                    limit,
                    budget,
                    without_weights,
                )
        except HubDeadlineError:
            raise HubDeadlineError(
                f"downloading {where} from {hub} ran past its deadline of {limit.seconds:g} s (a stalled or "
                "trickling server?); try again later, or allow more time (deadline=)",
                options=("deadline",),
                repo_id=repo_id,
                revision=revision,
                endpoint=hub,
            ) from None
        except (
            httpx2.ConnectError,
            httpx2.TimeoutException,
            HubNoAnswerError,
            OfflineModeIsEnabled,
        ) as error:
            reason = type(error.__cause__ if isinstance(error, HubNoAnswerError) else error).__name__
            cached = _cached(root, hub, revision, without_weights)
            if cached is None:
                raise HubUnreachableError(
                    f"could not reach {hub} ({reason}) and {where} is not in the local cache: "
                    "check the network and the endpoint (endpoint=, HF_ENDPOINT), or pass a local run "
                    "folder",
                    options=("endpoint",),
                    repo_id=repo_id,
                    revision=revision,
                    endpoint=hub,
                ) from error
            logger.warning(
                "could not reach %s (%s): using the copy of %s cached at %s",
                hub,
                reason,
                where,
                cached.commit[:SHA_PREFIX],
            )
            return cached
        except HubRevisionNotFoundError:
            raise _revision_not_found(repo_id, revision, hub) from None
        except GatedRepoError:
            raise RepoNotFoundError(
                f"{repo_id} on {hub} is gated: accept its conditions on its Hub page, then pass a token that "
                "has access (token=, HF_TOKEN or `hf auth login`)"
            ) from None
        except RepositoryNotFoundError:
            # Some Hub servers (olah, a mirror) answer "repository not found" for a revision they lack.
            if revision is not None and _repo_exists(
                repo_id, hub, token, timeout or DEFAULT_TIMEOUT_S, limit
            ):
                raise _revision_not_found(repo_id, revision, hub) from None
            raise RepoNotFoundError(
                f"no repository '{repo_id}' on {hub} (nor a local folder of that name), or it is private "
                "and the token cannot read it: check the id (and endpoint=), or log in with `hf auth "
                "login` / pass a token",
                options=("endpoint",),
                repo_id=repo_id,
                endpoint=hub,
            ) from None
        except DisabledRepoError:
            raise RepoNotFoundError(
                f"{repo_id} on {hub} is disabled by the Hub; it cannot be downloaded"
            ) from None
        except HfHubHTTPError as error:
            status = error.response.status_code if error.response is not None else "error"
            raise DownloadError(
                f"{hub} answered HTTP {status} while downloading {where} ({first_line(error)}); try again "
                "later"
            ) from error
        except httpx2.HTTPError as error:  # the HTTP client's errors are not OSErrors
            raise HubUnreachableError(
                f"the connection to {hub} failed while downloading {where} ({type(error).__name__}: "
                f"{first_line(error)}); try again"
            ) from error
        except OSError as error:
            raise DownloadError(
                f"could not store {where} in {root.parent} ({error}); free disk space or pass another "
                "cache_dir"
            ) from error


def _fetch_online(
    repo_id: str,
    revision: str | None,
    hub: str,
    token: str | None,
    root: Path,
    timeout: float,
    limit: Deadline,
    budget: int,
    without_weights: bool = False,
) -> FetchedRun:
    where = f"{repo_id}@{revision}" if revision else repo_id
    api = HfApi(endpoint=hub, token=token)
    # Always by revision: olah answers "not found" for the bare `/api/models/ORG/NAME`.
    commit = api.model_info(repo_id, revision=revision or "main").sha
    if not isinstance(commit, str) or not COMMIT_RE.fullmatch(commit):
        raise DownloadError(f"{hub} gave {str(commit)[:80]!r} as the commit of {where}, not a 40-hex sha")
    if revision is not None and re.fullmatch(r"[0-9a-fA-F]{40}", revision) and commit != revision.lower():
        raise DownloadError(f"{hub} answered commit {commit} for the commit {revision}; it cannot be trusted")
    folder = root / commit
    if _complete(root, commit, hub, without_weights) is None:
        where = f"{repo_id}@{commit[:SHA_PREFIX]} on {hub}"
        files = _listing(api, repo_id, commit, hub)
        weights = {file.path for file in files if is_weights(file.path)}
        if without_weights:
            files = [file for file in files if file.path not in weights]
        _check_listed_sizes(files, budget, where)
        headers = {**build_hf_headers(token=token), "Accept-Encoding": "identity"}
        manifest: set[str] | None = None  # the paths results.json lists, once it is here
        with httpx2.Client(timeout=httpx2.Timeout(timeout), follow_redirects=False) as client:
            bind_deadline(client, limit)
            for file in sorted(files, key=lambda file: file.path != RESULTS_FILE):  # results.json first
                if file.path != RESULTS_FILE and file.size > MAX_UNLISTED_FILE_BYTES:
                    manifest = _manifest_paths(folder / RESULTS_FILE) if manifest is None else manifest
                    if file.path not in manifest:
                        raise DownloadError(
                            f"{where} lists {file.path} at {file.size} bytes, over the "
                            f"{MAX_UNLISTED_FILE_BYTES} bytes a file that results.json's manifest does not "
                            "list may have; it was not downloaded: this is not an attncard run",
                            file=file.path,
                        )
                if not _holds(folder / file.path, file):
                    url = f"{hub}/{repo_id}/resolve/{commit}/{quote(file.path)}"
                    _download(client, headers, hub, url, file, folder / file.path)
        # Weights a complete fetch left are kept: a later one that wants them need not fetch them again.
        _remove_others(folder, {file.path for file in files} | weights)
        _write_json(
            root / f"{commit}.complete.json",
            {"endpoint": hub, "files": [vars(f) for f in files], "weights": not without_weights},
        )
    refs = _read_json(root / "refs.json")
    _write_json(root / "refs.json", {**refs, revision or "main": commit})
    return FetchedRun(folder=folder, commit=commit)


def _listing(api: HfApi, repo_id: str, commit: str, hub: str) -> list[_File]:
    """The files at `commit`, every path, size and id checked."""
    where = f"{repo_id}@{commit[:SHA_PREFIX]} on {hub}"
    files: list[_File] = []
    entries = 0
    try:
        for entry in api.list_repo_tree(repo_id, revision=commit, recursive=True):
            entries += 1
            if entries > MAX_FILES:
                raise DownloadError(f"{where} lists more than {MAX_FILES} entries; this is not a run")
            problem = _path_problem(entry.path)
            if problem:
                raise DownloadError(
                    f"{where} lists an unsafe path {str(entry.path)[:80]!r} ({problem}); nothing of it was "
                    "written: this server cannot be trusted, use another endpoint"
                )
            if isinstance(entry, RepoFile):
                files.append(_file_of(entry, where))
    except (KeyError, TypeError, ValueError) as error:  # an entry without its fields, a body that is not JSON
        raise DownloadError(
            f"{where} gave a malformed file listing ({first_line(error)}); try again"
        ) from None
    seen: set[str] = set()
    folders = {
        "/".join(f.path.lower().split("/")[:depth])
        for f in files
        for depth in range(1, f.path.count("/") + 1)
    }
    for file in files:
        # One name twice, or a file where another file's folder is, would write one file over another (on
        # a case-insensitive disk too).
        if file.path.lower() in seen or file.path.lower() in folders:
            raise DownloadError(
                f"{where} lists {file.path!r} twice, or as a file and a folder; this is not a run"
            )
        seen.add(file.path.lower())
    return files


def _check_listed_sizes(files: list[_File], budget: int, where: str) -> None:
    """Refuses a listing whose sizes exceed what may be written, before any file is fetched."""
    total = sum(file.size for file in files)
    if total > budget:
        raise DownloadError(
            f"{where} lists {total} bytes, over the download budget of {budget} bytes; nothing was "
            "downloaded: this is not an attncard run, or pass a larger max_bytes= if you expect that much"
        )
    for file in files:
        cap = max_file_bytes(file.path)
        if cap is not None and file.size > cap:
            raise DownloadError(
                f"{where} lists {file.path} at {file.size} bytes, over the {cap} bytes it may have; nothing "
                "was downloaded: this is not an attncard run",
                file=file.path,
            )


def _manifest_paths(path: Path) -> set[str]:
    """The paths results.json's manifest lists; none when it is missing or malformed (download checks it)."""
    try:
        manifest = json.loads(path.read_bytes()).get("manifest")
    except (OSError, ValueError, AttributeError):
        return set()
    return {name for name in manifest if isinstance(name, str)} if isinstance(manifest, dict) else set()


def _path_problem(path: object) -> str | None:
    """Why a listed path may not be written under the snapshot folder; None when it may."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
        return f"not a path of 1 to {MAX_PATH_CHARS} characters"
    parts = path.split("/")
    if len(parts) > MAX_DEPTH:
        return f"deeper than {MAX_DEPTH} folders"
    for part in parts:
        if part in ("", ".", "..") or len(part) > MAX_NAME_CHARS or not _SAFE_NAME.fullmatch(part):
            return "each part must be a plain name of letters, digits, '.', '_' or '-', not '.' or '..'"
    return None


def _file_of(entry: RepoFile, where: str) -> _File:
    size, blob_id, lfs = entry.size, entry.blob_id, entry.lfs
    if type(size) is not int or not 0 <= size <= MAX_FILE_BYTES:
        raise DownloadError(f"{where} lists {entry.path} with size {str(size)[:40]!r}; this is not a run")
    if not isinstance(blob_id, str) or not COMMIT_RE.fullmatch(blob_id):
        raise DownloadError(f"{where} lists {entry.path} with blob id {str(blob_id)[:80]!r}, not 40-hex")
    sha256 = None
    if lfs is not None:
        sha256 = lfs.sha256
        if not isinstance(sha256, str) or not _SHA256_RE.fullmatch(sha256) or lfs.size != size:
            raise DownloadError(f"{where} lists {entry.path} with malformed LFS information (sha256, size)")
    return _File(path=entry.path, size=size, blob_id=blob_id, sha256=sha256)


def _download(
    client: httpx2.Client, headers: dict[str, str], hub: str, url: str, file: _File, target: Path
) -> None:
    """GETs `url` into `target`, following redirects, the token to the endpoint's origin only."""
    url = httpx2.URL(url)
    for _ in range(MAX_REDIRECTS + 1):
        sent = (
            headers
            if origin(url) == origin(hub)
            else {name: value for name, value in headers.items() if name.lower() != "authorization"}
        )
        with client.stream("GET", url, headers=sent) as response:
            if response.has_redirect_location:
                url = response.url.join(response.headers["Location"])
                if url.scheme not in ("http", "https"):
                    raise DownloadError(
                        f"{hub} redirected {file.path} to a {url.scheme!r} URL; try another endpoint",
                        file=file.path,
                        endpoint=hub,
                    )
                continue
            if response.status_code != 200:
                response.read()
                message = response.headers.get("X-Error-Message") or response.text.strip()
                reason = message.splitlines()[0][:200] if message else response.reason_phrase
                raise DownloadError(
                    f"{hub} answered HTTP {response.status_code} for {url} ({reason}); try again later",
                    file=file.path,
                    endpoint=hub,
                )
            if encoding := unasked_encoding(response):
                raise DownloadError(
                    f"{hub} sent {file.path} compressed ({encoding[:40]!r}) although attncard asked for "
                    "none (a compression bomb?); nothing of it was written: this server cannot be trusted, "
                    "use another endpoint",
                    file=file.path,
                    endpoint=hub,
                )
            _store(response, file, target, hub)
            return
    raise DownloadError(
        f"{hub} redirected {file.path} more than {MAX_REDIRECTS} times; try again later",
        file=file.path,
        endpoint=hub,
    )


def _store(response: httpx2.Response, file: _File, target: Path, hub: str) -> None:
    """Streams the answer into a temporary file next to `target`, checks it, and renames it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    temporary = Path(name)
    try:
        digest, received = file.hasher(), 0
        with os.fdopen(descriptor, "wb") as handle:
            for chunk in response.iter_raw():  # never decoded: the encoding was checked to be identity
                received += len(chunk)
                if received > file.size:
                    raise IntegrityError(
                        f"{hub} sent more than the {file.size} bytes its listing gives for {file.path}; the "
                        "file was not kept: this server cannot be trusted",
                        file=file.path,
                        endpoint=hub,
                    )
                digest.update(chunk)
                handle.write(chunk)
        if received < file.size:
            raise DownloadError(
                f"{hub} sent {received} of the {file.size} bytes of {file.path}; try again later",
                file=file.path,
                endpoint=hub,
            )
        if digest.hexdigest() != file.expected:
            raise IntegrityError(
                f"{hub} sent bytes for {file.path} whose id {digest.hexdigest()[:SHA_PREFIX]}… is not the "
                f"{file.expected[:SHA_PREFIX]}… its listing gives; the file was not kept: do not use this "
                "server",
                file=file.path,
                endpoint=hub,
            )
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def _holds(path: Path, file: _File) -> bool:
    """Whether `path` is a regular file with the listed size and id."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size != file.size:
        return False
    digest = file.hasher()
    hash_file(path, digest)
    return digest.hexdigest() == file.expected


def _remove_others(folder: Path, paths: set[str]) -> None:
    """Deletes what the snapshot folder holds beyond the listing (leftovers of an interrupted download)."""
    for parent, _, names in os.walk(folder):
        for name in names:
            path = Path(parent) / name
            if path.relative_to(folder).as_posix() not in paths:
                path.unlink()


def _complete(root: Path, commit: str, hub: str, without_weights: bool = False) -> list[_File] | None:
    """The files of `commit` when a fetch of it from `hub` completed and they are all still there and
    intact (a fetch that left out the weights serves only another that leaves them out); else None."""
    record = _read_json(root / f"{commit}.complete.json")
    if not record or record.get("endpoint") != hub:
        return None
    if record.get("weights", True) is not True and not without_weights:
        return None
    try:
        files = [_File(**item) for item in record["files"]]
    except (KeyError, TypeError):
        return None
    folder = root / commit
    if any(_path_problem(file.path) or not _holds(folder / file.path, file) for file in files):
        return None
    return files


def _cached(root: Path, hub: str, revision: str | None, without_weights: bool = False) -> FetchedRun | None:
    """A complete snapshot of `revision` fetched from `hub`: a commit sha, or a branch or tag a fetch
    recorded."""
    name = revision or "main"
    commit = (
        name.lower() if re.fullmatch(r"[0-9a-fA-F]{40}", name) else _read_json(root / "refs.json").get(name)
    )
    if (
        not isinstance(commit, str)
        or not COMMIT_RE.fullmatch(commit)
        or _complete(root, commit, hub, without_weights) is None
    ):
        return None
    return FetchedRun(folder=root / commit, commit=commit)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    """Writes atomically: a reader sees the old record or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
        os.replace(name, path)
    finally:
        Path(name).unlink(missing_ok=True)


def _revision_not_found(repo_id: str, revision: str | None, hub: str) -> RevisionNotFoundError:
    return RevisionNotFoundError(
        f"{repo_id} on {hub} has no branch, tag or commit '{revision}'; pass one it has "
        f"(HfApi().list_repo_refs('{repo_id}') lists its branches and tags), or leave it out for main"
    )


def _repo_exists(repo_id: str, hub: str, token: str | None, timeout: float, limit: Deadline) -> bool:
    """Whether the Hub lists the branches and tags of `repo_id` (False on any error)."""
    try:
        with hub_client_timeout(timeout, limit, endpoint=hub):
            HfApi(endpoint=hub, token=token).list_repo_refs(repo_id)
    except (HfHubHTTPError, httpx2.HTTPError, OSError, HubDeadlineError):
        return False
    return True


__all__ = [
    "DEFAULT_MAX_DOWNLOAD_BYTES",
    "MAX_UNLISTED_FILE_BYTES",
    "FetchedRun",
    "HubOptions",
    "check_options",
    "fetch_run",
    "hub_options",
]
