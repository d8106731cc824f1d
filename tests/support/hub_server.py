"""A loopback Hugging Face Hub for tests.

`LoopbackHub` is a small HTTP server (stdlib only) bound to 127.0.0.1 that speaks the part of the Hub
protocol that huggingface_hub 2.4.0 uses to create repos, commit files (regular and Git LFS uploads),
tag, list and download. It keeps a git-like history per repository (40-hex commit ids, parents, tags,
branches) so tests can exercise the *real* client over HTTP, inject faults with `FaultPlan` and then
look at what the server holds.

Model and Space repositories are served (datasets are not), each kind in a namespace of its own as on the
Hub: the test helpers take `repo_type="space"` for a Space. Xet storage is not spoken: clients must run with
Xet disabled (see `client_settings`), so that large files go through the legacy LFS batch API.

The routes, payloads and headers follow what the installed client sends and expects; see the
`_match_route` table for the list.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fnmatch
import hashlib
import json
import os
import re
import secrets
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, get_args
from urllib.parse import parse_qs, unquote, urlsplit

FaultKind = Literal["status", "rate_limit", "conflict", "drop", "delay", "lose_response"]

#: Route names that faults and the request log use. Each HTTP route of the server maps to one of these.
ROUTES: frozenset[str] = frozenset(
    {
        "whoami",
        "validate_yaml",
        "create_repo",
        "delete_repo",
        "repo_info",
        "preupload",
        "commit",
        "create_tag",
        "delete_tag",
        "create_branch",
        "delete_branch",
        "refs",
        "commits",
        "tree",
        "paths_info",
        "lfs_batch",
        "lfs_upload",
        "lfs_verify",
        "resolve",
        "xet_token",
        "unknown",
    }
)

#: Message of the Hub when `parentCommit` is not the head of the branch any more (HTTP 412).
CONFLICT_MESSAGE = "A commit has happened since. Please refresh and try again."

_FAULT_DEFAULT_STATUS = {"status": 500, "rate_limit": 429, "conflict": 412}

# What the Hub puts in the initial commit of every new repository.
_GITATTRIBUTES = (
    b"*.7z filter=lfs diff=lfs merge=lfs -text\n"
    b"*.bin filter=lfs diff=lfs merge=lfs -text\n"
    b"*.ckpt filter=lfs diff=lfs merge=lfs -text\n"
    b"*.h5 filter=lfs diff=lfs merge=lfs -text\n"
    b"*.npy filter=lfs diff=lfs merge=lfs -text\n"
    b"*.onnx filter=lfs diff=lfs merge=lfs -text\n"
    b"*.pt filter=lfs diff=lfs merge=lfs -text\n"
    b"*.pth filter=lfs diff=lfs merge=lfs -text\n"
    b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    b"*.zip filter=lfs diff=lfs merge=lfs -text\n"
)
_SYSTEM_AUTHOR = "system"
# The repository types served, with the prefix of their paths (`/api/spaces/…`, `/spaces/…/resolve/…`).
_URL_PREFIXES = {"model": "", "space": "spaces/"}
_SPACE_SDKS = ("gradio", "streamlit", "docker", "static")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_OID_PREFIX_RE = re.compile(r"^[0-9a-f]{7,40}$")
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


# --------------------------------------------------------------------------------------------------
# Git-style hashing


def _git_hash(kind: bytes, body: bytes) -> str:
    """The git object id of a `kind` ("blob", "tree", "commit") object with this body."""
    return hashlib.sha1(kind + b" " + str(len(body)).encode() + b"\0" + body).hexdigest()


def _lfs_pointer(sha256: str, size: int) -> bytes:
    """The Git LFS pointer file that stands in git for a file stored in LFS."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _iso(timestamp: float) -> str:
    """A timestamp in the Hub's date format ("2024-01-31T12:00:00.000Z")."""
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class _Entry:
    """One file of a snapshot: content address plus the git identity the Hub reports for it."""

    sha256: str
    size: int
    lfs: bool
    git_oid: str

    @classmethod
    def of(cls, data: bytes, *, lfs: bool) -> _Entry:
        sha256 = hashlib.sha256(data).hexdigest()
        blob = _lfs_pointer(sha256, len(data)) if lfs else data
        return cls(sha256=sha256, size=len(data), lfs=lfs, git_oid=_git_hash(b"blob", blob))

    @property
    def etag(self) -> str:
        """ETag of `/resolve` and oid of preupload: sha256 for LFS files, git blob id otherwise."""
        return self.sha256 if self.lfs else self.git_oid

    @property
    def pointer_size(self) -> int:
        return len(_lfs_pointer(self.sha256, self.size))

    def lfs_info(self) -> dict[str, Any]:
        return {"oid": self.sha256, "size": self.size, "pointerSize": self.pointer_size}


def _tree_oids(files: Mapping[str, _Entry]) -> dict[str, str]:
    """Git tree ids of every folder of a snapshot ("" is the root), computed as git does."""
    children: dict[str, dict[str, tuple[bool, str]]] = {"": {}}
    for path, entry in files.items():
        parts = path.split("/")
        for depth in range(len(parts) - 1):
            parent, folder = "/".join(parts[:depth]), "/".join(parts[: depth + 1])
            children.setdefault(parent, {})[parts[depth]] = (True, folder)
            children.setdefault(folder, {})
        children.setdefault("/".join(parts[:-1]), {})[parts[-1]] = (False, entry.git_oid)
    oids: dict[str, str] = {}
    # Deepest folders first, so that a folder's subtrees are known when it is hashed.
    for folder in sorted(children, key=lambda p: p.count("/") if p else -1, reverse=True):
        items = []
        for name, (is_tree, ref) in children[folder].items():
            oid = oids[ref] if is_tree else ref
            mode = "40000" if is_tree else "100644"
            # git sorts trees as if their name ended with "/".
            items.append(((name + "/" if is_tree else name).encode(), mode, name, bytes.fromhex(oid)))
        items.sort(key=lambda item: item[0])
        body = b"".join(f"{mode} {name}".encode() + b"\0" + raw for _, mode, name, raw in items)
        oids[folder] = _git_hash(b"tree", body)
    return oids


# --------------------------------------------------------------------------------------------------
# Repository state


@dataclass
class _Commit:
    oid: str
    parent: str | None
    title: str
    description: str
    author: str
    created_at: float
    files: dict[str, _Entry]


@dataclass
class _Repo:
    repo_id: str
    private: bool
    created_at: float
    commits: dict[str, _Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    lfs_objects: set[str] = field(default_factory=set)
    repo_type: str = "model"
    sdk: str | None = None  # a Space's

    @property
    def key(self) -> str:
        """Its key in `LoopbackHub._repos` and `state.json`, and the path of its pages: `ns/name` for a model,
        `spaces/ns/name` for a Space."""
        return _repo_key(self.repo_id, self.repo_type)


def _repo_key(repo_id: str, repo_type: str = "model") -> str:
    if repo_type not in _URL_PREFIXES:
        raise ValueError(f"LoopbackHub serves {' and '.join(_URL_PREFIXES)} repositories, not {repo_type!r}")
    return _URL_PREFIXES[repo_type] + repo_id


@dataclass(frozen=True)
class HubCommit:
    """A commit as the server holds it (returned by `LoopbackHub.commits`).

    `files` maps every path of the snapshot to the sha256 of its content.
    """

    oid: str
    parent: str | None
    title: str
    description: str
    author: str
    created_at: datetime
    files: Mapping[str, str]


@dataclass(frozen=True)
class RequestRecord:
    """One request the server received.

    `status` is what the server answered; None while the request is in flight, or when the connection
    was closed without an answer (a `drop` or `lose_response` fault, a client that went away before
    the answer). `fault` names the fault kind injected into this request.
    """

    method: str
    path: str
    route: str
    status: int | None
    fault: FaultKind | None


# --------------------------------------------------------------------------------------------------
# Faults


@dataclass
class Fault:
    """A fault armed on a route; see `FaultPlan.add` for the meaning of the fields."""

    route: str
    kind: FaultKind
    times: int | None
    status: int
    delay: float
    after_bytes: int | None
    retry_after: int
    method: str | None
    message: str | None
    fired: int = 0

    def matches(self, route: str, method: str) -> bool:
        return (
            fnmatch.fnmatchcase(route, self.route)
            and (self.method is None or self.method == method)
            and (self.times is None or self.fired < self.times)
        )


class FaultPlan:
    """Faults to inject into the live server, consumed in the order they were added. Thread-safe.

    Each incoming request takes the first armed fault matching its route (and method, if given); a
    fault is armed until it has fired `times` times.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(
        self,
        route: str,
        kind: FaultKind,
        *,
        times: int | None = 1,
        status: int | None = None,
        delay: float = 0.0,
        after_bytes: int | None = None,
        retry_after: int = 1,
        method: str | None = None,
        message: str | None = None,
    ) -> Fault:
        """Arm a fault and return it (its `fired` counter tells how often it struck).

        Args:
            route: a name from `ROUTES` (e.g. "commit", "preupload", "resolve"), or a glob pattern over
                them ("lfs_*", "*").
            kind: what happens to a matching request:
                - "status": answer `status` (default 500) with a JSON error, without handling the request;
                - "rate_limit": answer 429 with `Retry-After: <retry_after>`;
                - "conflict": answer `status` (default 412, or 409) with the Hub's "A commit has
                  happened since" error, without handling the request;
                - "drop": read `after_bytes` of the request body (default: half of it), then close the
                  connection without answering; nothing is handled;
                - "delay": sleep `delay` seconds, then handle the request normally;
                - "lose_response": handle the request normally (a commit lands), then close the
                  connection without answering.
            times: how many requests the fault strikes; None strikes forever.
            method: only strike requests with this HTTP method (e.g. "HEAD" or "GET" on "resolve").
            message: error message for "status" / "conflict" answers.
        """
        # A mistyped route would never fire and the test would silently check nothing.
        if not any(fnmatch.fnmatchcase(name, route) for name in ROUTES):
            raise ValueError(f"Route pattern {route!r} matches none of {sorted(ROUTES)}")
        if kind not in get_args(FaultKind):
            raise ValueError(f"Unknown fault kind {kind!r}; expected one of {get_args(FaultKind)}")
        if times is not None and times < 1:
            raise ValueError("times must be at least 1 (or None for a permanent fault)")
        if kind == "delay" and delay <= 0:
            raise ValueError("a 'delay' fault needs delay > 0")
        fault = Fault(
            route=route,
            kind=kind,
            times=times,
            status=status if status is not None else _FAULT_DEFAULT_STATUS.get(kind, 0),
            delay=delay,
            after_bytes=after_bytes,
            retry_after=retry_after,
            method=method.upper() if method else None,
            message=message,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Disarm every fault."""
        with self._lock:
            self._faults.clear()

    def pending(self) -> list[Fault]:
        """The faults still armed."""
        with self._lock:
            return [f for f in self._faults if f.times is None or f.fired < f.times]

    def fired(self, route: str | None = None) -> int:
        """How many requests were struck by a fault (armed with this exact `route` pattern, if given)."""
        with self._lock:
            return sum(f.fired for f in self._faults if route is None or f.route == route)

    def _take(self, route: str, method: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(route, method):
                    fault.fired += 1
                    return fault
        return None


# --------------------------------------------------------------------------------------------------
# HTTP plumbing


class _HubError(Exception):
    """An error answer of the Hub: JSON body `{"error": message}` plus the Hub's error headers."""

    def __init__(
        self, status: int, message: str, *, code: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})


@dataclass
class _LogEntry:
    method: str
    path: str
    route: str
    fault: FaultKind | None
    status: int | None = None

    def record(self) -> RequestRecord:
        return RequestRecord(self.method, self.path, self.route, self.status, self.fault)


@dataclass
class _Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> _Response:
        merged = {"Content-Type": "application/json", **(headers or {})}
        return cls(status=status, body=json.dumps(payload).encode(), headers=merged)

    @classmethod
    def error(cls, err: _HubError) -> _Response:
        headers = dict(err.headers)
        if err.code is not None:
            headers["X-Error-Code"] = err.code
        headers.setdefault("X-Error-Message", err.message)
        return cls.json({"error": err.message}, status=err.status, headers=headers)


@dataclass
class _Request:
    method: str
    route: str
    params: dict[str, str]
    query: dict[str, list[str]]
    headers: Message
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except json.JSONDecodeError as exc:
            raise _HubError(400, f"Malformed JSON body: {exc}") from exc

    def flag(self, name: str) -> bool:
        values = self.query.get(name)
        return bool(values) and values[-1].lower() in {"1", "true"}


# (method, action after /api/models/{ns}/{name}/) -> (route, min and max number of segments after it)
_REPO_ACTIONS: dict[tuple[str, str], tuple[str, int, int]] = {
    ("GET", "revision"): ("repo_info", 1, 1),
    ("POST", "preupload"): ("preupload", 1, 1),
    ("POST", "commit"): ("commit", 1, 1),
    ("POST", "tag"): ("create_tag", 1, 1),
    ("DELETE", "tag"): ("delete_tag", 1, 1),
    ("POST", "branch"): ("create_branch", 1, 1),
    ("DELETE", "branch"): ("delete_branch", 1, 1),
    ("GET", "refs"): ("refs", 0, 0),
    ("GET", "commits"): ("commits", 1, 1),
    ("GET", "tree"): ("tree", 1, 1_000),  # revision, then the folder path (quoted or not)
    ("POST", "paths-info"): ("paths_info", 1, 1),
    ("GET", "xet-write-token"): ("xet_token", 0, 1_000),
    ("GET", "xet-read-token"): ("xet_token", 0, 1_000),
}


def _match_route(method: str, seg: list[str]) -> tuple[str, dict[str, str]]:
    """Map a request to a route name and its path parameters (segments are already unquoted).

    A Space's routes are a model's with `spaces` in place of `models` (`/api/spaces/{ns}/{name}/…`) or
    before the repository (`/spaces/{ns}/{name}/resolve/…`, `/spaces/{ns}/{name}.git/info/lfs/…`), under
    the same route names; their parameters hold `repo_type: "space"`.
    """
    if len(seg) >= 3 and seg[0] == "spaces" and seg[1] not in {"", "api"}:
        route, params = _match_route(method, seg[1:])
        if "repo" in params:
            return route, {**params, "repo_type": "space"}
        return "unknown", {}
    if len(seg) >= 4 and seg[:2] == ["api", "spaces"]:
        route, params = _match_route(method, ["api", "models", *seg[2:]])
        return route, {**params, "repo_type": "space"} if "repo" in params else params
    if seg == ["api", "whoami-v2"]:
        return "whoami", {}
    if seg == ["api", "validate-yaml"]:
        return "validate_yaml", {}
    if seg == ["api", "repos", "create"]:
        return "create_repo", {}
    if seg == ["api", "repos", "delete"]:
        return "delete_repo", {}
    if seg == ["api", "models"] and method == "GET":
        return "list_models", {}
    if len(seg) >= 4 and seg[:2] == ["api", "models"]:
        repo = f"{seg[2]}/{seg[3]}"
        if len(seg) == 4:
            return ("repo_info", {"repo": repo}) if method == "GET" else ("unknown", {})
        route, min_args, max_args = _REPO_ACTIONS.get((method, seg[4]), ("unknown", 0, -1))
        args = seg[5:]
        if min_args <= len(args) <= max_args:
            params = {"repo": repo}
            if args:
                params["rev"] = args[0]
                params["path"] = "/".join(args[1:])
            return route, params
    if len(seg) == 6 and seg[1].endswith(".git") and seg[2:5] == ["info", "lfs", "objects"]:
        repo = f"{seg[0]}/{seg[1].removesuffix('.git')}"
        if method == "POST" and seg[5] in {"batch", "verify"}:
            return f"lfs_{seg[5]}", {"repo": repo}
    if len(seg) == 3 and seg[:2] == ["__loopback__", "lfs-upload"] and method == "PUT":
        return "lfs_upload", {"ticket": seg[2]}
    if len(seg) >= 5 and seg[2] == "resolve" and method in {"GET", "HEAD"}:
        return "resolve", {"repo": f"{seg[0]}/{seg[1]}", "rev": seg[3], "path": "/".join(seg[4:])}
    return "unknown", {}


def _card_tags(card: bytes) -> list[str]:
    """The `tags:` list of a card's YAML front matter, as a block list of plain scalars (`- name`), the form
    attncard's cards write; [] without front matter or tags."""
    lines = card.decode("utf-8", "replace").splitlines()
    if not lines or lines[0].strip() != "---":
        return []
    tags: list[str] = []
    inside = False
    for line in lines[1:]:
        if line.strip() == "---":
            break
        if inside and line.startswith("- "):
            tags.append(line[2:].strip().strip("'\""))
            continue
        inside = line.rstrip() == "tags:"
    return tags


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """Read the whole request body, plain (Content-Length) or chunked."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(handler.rfile.readline(65537).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline(65537) not in {b"\r\n", b"\n", b""}:
                    pass  # trailer headers, unused
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    data = handler.rfile.read(length) if length else b""
    if len(data) != length:
        raise ConnectionError("the client closed the connection in the middle of the request body")
    return data


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The request queue must absorb bursts of parallel downloads (snapshot_download runs 8 workers).
    request_queue_size = 64

    def __init__(self, hub: LoopbackHub) -> None:
        self.hub = hub
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    server_version = "LoopbackHub/1.0"
    timeout = 120  # an idle keep-alive connection is closed after this long
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):  # the peer is gone; nothing left to flush to
            super().finish()

    def _dispatch(self) -> None:
        self.server.hub._dispatch(self)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _dispatch

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: `LoopbackHub.requests` is the log."""


def _close_without_answer(handler: BaseHTTPRequestHandler) -> None:
    handler.close_connection = True
    with contextlib.suppress(OSError):  # already closed by the peer
        handler.connection.shutdown(socket.SHUT_RDWR)


# --------------------------------------------------------------------------------------------------
# The server


class LoopbackHub:
    """A Hugging Face Hub on 127.0.0.1 for tests, with repositories stored under `root`.

    Args:
        root: folder for the content store and `state.json`; a hub started again on the same root
            finds its repositories again.
        token: when set, every request that writes must carry `Authorization: Bearer <token>` (401
            otherwise), and a request carrying any other token is refused on every route. Reads of
            public repos may be anonymous.
        user: the user name `whoami` answers and the namespace of repos created without one.
        lfs_threshold: when set, preupload answers `uploadMode: "lfs"` for files larger than this
            many bytes (they then go through the LFS batch API); otherwise every file is "regular".

    Use as a context manager, or call `start()` / `stop()`.
    """

    def __init__(
        self,
        root: Path,
        token: str | None = None,
        *,
        user: str = "loopback-user",
        lfs_threshold: int | None = None,
    ) -> None:
        self.root = Path(root)
        self.token = token
        self.user = user
        self.lfs_threshold = lfs_threshold
        self.faults = FaultPlan()
        # What `POST /api/validate-yaml` answers besides "no errors": set by a test to stand for the Hub's
        # own card warnings (a refusal is a "status" fault with 400 on the route "validate_yaml").
        self.card_warnings: list[str] = []
        self._lock = threading.RLock()
        self._log: list[_LogEntry] = []  # in order of arrival
        self._repos: dict[str, _Repo] = {}
        self._upload_tickets: dict[str, tuple[str, str, int]] = {}  # ticket -> (repo, sha256, size)
        self._tree_cache: dict[tuple[str, str], dict[str, str]] = {}
        self._internal_errors: list[str] = []
        self._handlers: dict[str, Callable[[_Request], _Response]] = {
            "whoami": self._h_whoami,
            "validate_yaml": self._h_validate_yaml,
            "create_repo": self._h_create_repo,
            "delete_repo": self._h_delete_repo,
            "repo_info": self._h_repo_info,
            "list_models": self._h_list_models,
            "preupload": self._h_preupload,
            "commit": self._h_commit,
            "create_tag": self._h_create_tag,
            "delete_tag": self._h_delete_tag,
            "create_branch": self._h_create_branch,
            "delete_branch": self._h_delete_branch,
            "refs": self._h_refs,
            "commits": self._h_commits,
            "tree": self._h_tree,
            "paths_info": self._h_paths_info,
            "lfs_batch": self._h_lfs_batch,
            "lfs_upload": self._h_lfs_upload,
            "lfs_verify": self._h_lfs_verify,
            "resolve": self._h_resolve,
            "xet_token": self._h_xet_token,
        }
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._base_url = ""  # kept after stop() for handlers still in flight
        self._thread: threading.Thread | None = None
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "objects").mkdir(exist_ok=True)
        self._load_state()

    # ---------------------------------------------------------------------------- lifecycle

    def start(self) -> LoopbackHub:
        """Start serving on an ephemeral port; returns self."""
        if self._server is not None:
            raise RuntimeError("LoopbackHub is already running")
        self._stopping.clear()
        self._server = _Server(self)
        self._base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="loopback-hub",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection (sleeping `delay` faults are cut short)."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with server.connections_lock:
            connections = list(server.connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LoopbackHub:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """Base URL of the running server, e.g. "http://127.0.0.1:54321"."""
        if self._server is None:
            raise RuntimeError("LoopbackHub is not running")
        return self._base_url

    # ---------------------------------------------------------------------------- test helpers

    @property
    def requests(self) -> list[RequestRecord]:
        """Every request received so far, in order of arrival."""
        with self._lock:
            return [entry.record() for entry in self._log]

    def request_count(self, route: str, *, method: str | None = None, status: int | None = None) -> int:
        """How many requests hit `route` (optionally with this method / answered with this status)."""
        return sum(
            1
            for r in self.requests
            if r.route == route
            and (method is None or r.method == method)
            and (status is None or r.status == status)
        )

    @property
    def internal_errors(self) -> list[str]:
        """Tracebacks of unexpected exceptions in the server (answered as HTTP 500); should stay empty."""
        with self._lock:
            return list(self._internal_errors)

    def clear_requests(self) -> None:
        """Forget the request log."""
        with self._lock:
            self._log.clear()

    def repo_ids(self, repo_type: str = "model") -> list[str]:
        """Ids of the repositories of this type (`"model"` or `"space"`) the server holds."""
        with self._lock:
            return sorted(repo.repo_id for repo in self._repos.values() if repo.repo_type == repo_type)

    def space_sdk(self, repo_id: str) -> str | None:
        """The SDK a Space was created with (`POST /api/repos/create`'s `sdk`)."""
        with self._lock:
            return self._existing_repo(repo_id, "space").sdk

    # Every helper below takes `repo_type="space"` for a Space (the default is a model repository).

    def head(self, repo_id: str, branch: str = "main", *, repo_type: str = "model") -> str:
        """Commit id at the head of `branch`."""
        with self._lock:
            repo = self._existing_repo(repo_id, repo_type)
            if branch not in repo.branches:
                raise KeyError(f"{repo_id} has no branch {branch!r}")
            return repo.branches[branch]

    def refs(self, repo_id: str, *, repo_type: str = "model") -> dict[str, dict[str, str]]:
        """`{"branches": {name: oid}, "tags": {name: oid}}`."""
        with self._lock:
            repo = self._existing_repo(repo_id, repo_type)
            return {"branches": dict(repo.branches), "tags": dict(repo.tags)}

    def commits(self, repo_id: str, revision: str = "main", *, repo_type: str = "model") -> list[HubCommit]:
        """History reachable from `revision` (branch, tag or commit id), newest first."""
        with self._lock:
            repo = self._existing_repo(repo_id, repo_type)
            return [
                self._public_commit(c)
                for c in self._history(repo, self._resolve_or_key_error(repo, revision))
            ]

    def snapshot(self, repo_id: str, revision: str = "main", *, repo_type: str = "model") -> dict[str, bytes]:
        """Every file of `revision`, as path -> content."""
        with self._lock:
            repo = self._existing_repo(repo_id, repo_type)
            files = dict(self._resolve_or_key_error(repo, revision).files)
        return {path: self._read_blob(entry.sha256) for path, entry in sorted(files.items())}

    def read_file(
        self, repo_id: str, path: str, revision: str = "main", *, repo_type: str = "model"
    ) -> bytes:
        """Content of one file at `revision`; KeyError when it is not there."""
        with self._lock:
            commit = self._resolve_or_key_error(self._existing_repo(repo_id, repo_type), revision)
            if path not in commit.files:
                raise KeyError(f"{path!r} is not in {repo_id}@{revision}")
            entry = commit.files[path]
        return self._read_blob(entry.sha256)

    def tamper(
        self, repo_id: str, path: str, new_bytes: bytes, revision: str = "main", *, repo_type: str = "model"
    ) -> None:
        """Overwrite an existing file in place in the commit at `revision`, without making a commit.

        Simulates a corrupted server copy: the commit id stays the same, while everything the server
        reports about the file (content, ETag, size, tree entries) now describes `new_bytes`. The
        file keeps its storage mode (regular or LFS). Every ref pointing to that commit sees it.
        """
        with self._lock:
            repo = self._existing_repo(repo_id, repo_type)
            commit = self._resolve_or_key_error(repo, revision)
            if path not in commit.files:
                raise KeyError(f"{path!r} is not in {repo_id}@{revision}")
            entry = _Entry.of(new_bytes, lfs=commit.files[path].lfs)
            self._write_blob(new_bytes, entry.sha256)
            commit.files[path] = entry
            self._tree_cache.pop((repo.key, commit.oid), None)
            self._save_state()

    def delete_file_silently(
        self, repo_id: str, path: str, revision: str = "main", *, repo_type: str = "model"
    ) -> None:
        """Remove a file in place from the commit at `revision`, without making a commit."""
        with self._lock:
            repo = self._existing_repo(repo_id, repo_type)
            commit = self._resolve_or_key_error(repo, revision)
            if path not in commit.files:
                raise KeyError(f"{path!r} is not in {repo_id}@{revision}")
            del commit.files[path]
            self._tree_cache.pop((repo.key, commit.oid), None)
            self._save_state()

    # ---------------------------------------------------------------------------- storage

    def _blob_path(self, sha256: str) -> Path:
        return self.root / "objects" / sha256[:2] / sha256

    def _write_blob(self, data: bytes, sha256: str) -> None:
        path = self._blob_path(sha256)
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{sha256}.{secrets.token_hex(4)}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def _read_blob(self, sha256: str) -> bytes:
        return self._blob_path(sha256).read_bytes()

    def _save_state(self) -> None:
        state = {
            key: {
                **({"type": repo.repo_type, "sdk": repo.sdk} if repo.repo_type != "model" else {}),
                "private": repo.private,
                "created_at": repo.created_at,
                "branches": repo.branches,
                "tags": repo.tags,
                "lfs_objects": sorted(repo.lfs_objects),
                "commits": [
                    {
                        "oid": c.oid,
                        "parent": c.parent,
                        "title": c.title,
                        "description": c.description,
                        "author": c.author,
                        "created_at": c.created_at,
                        "files": {p: [e.sha256, e.size, e.lfs, e.git_oid] for p, e in c.files.items()},
                    }
                    for c in repo.commits.values()
                ],
            }
            for key, repo in self._repos.items()
        }
        path = self.root / "state.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)

    def _load_state(self) -> None:
        path = self.root / "state.json"
        if not path.exists():
            return
        for key, raw in json.loads(path.read_text()).items():
            repo_type = raw.get("type", "model")
            repo = _Repo(
                repo_id=key.removeprefix(_URL_PREFIXES[repo_type]),
                private=raw["private"],
                created_at=raw["created_at"],
                repo_type=repo_type,
                sdk=raw.get("sdk"),
            )
            repo.branches, repo.tags, repo.lfs_objects = raw["branches"], raw["tags"], set(raw["lfs_objects"])
            for c in raw["commits"]:
                files = {
                    p: _Entry(sha256=v[0], size=v[1], lfs=v[2], git_oid=v[3]) for p, v in c["files"].items()
                }
                repo.commits[c["oid"]] = _Commit(
                    c["oid"], c["parent"], c["title"], c["description"], c["author"], c["created_at"], files
                )
            self._repos[key] = repo

    # ---------------------------------------------------------------------------- model helpers

    def _existing_repo(self, repo_id: str, repo_type: str = "model") -> _Repo:
        key = _repo_key(repo_id, repo_type)
        if key not in self._repos:
            raise KeyError(f"LoopbackHub holds no {repo_type} repository {repo_id!r}")
        return self._repos[key]

    def _resolve_or_key_error(self, repo: _Repo, revision: str) -> _Commit:
        try:
            return self._resolve(repo, revision)
        except _HubError as exc:
            raise KeyError(exc.message) from None

    @staticmethod
    def _resolve(repo: _Repo, revision: str) -> _Commit:
        """A branch, a tag (optionally as refs/heads/.., refs/tags/..) or an unambiguous commit id prefix."""
        name = revision
        if name.startswith("refs/heads/") and name[len("refs/heads/") :] in repo.branches:
            name = name[len("refs/heads/") :]
        elif name.startswith("refs/tags/") and name[len("refs/tags/") :] in repo.tags:
            name = name[len("refs/tags/") :]
        if name in repo.branches:
            return repo.commits[repo.branches[name]]
        if name in repo.tags:
            return repo.commits[repo.tags[name]]
        if _OID_PREFIX_RE.match(name):
            found = [c for oid, c in repo.commits.items() if oid.startswith(name)]
            if len(found) == 1:
                return found[0]
        raise _HubError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")

    @staticmethod
    def _history(repo: _Repo, commit: _Commit) -> Iterator[_Commit]:
        current: _Commit | None = commit
        while current is not None:
            yield current
            current = repo.commits[current.parent] if current.parent else None

    def _public_commit(self, commit: _Commit) -> HubCommit:
        return HubCommit(
            oid=commit.oid,
            parent=commit.parent,
            title=commit.title,
            description=commit.description,
            author=commit.author,
            created_at=datetime.fromtimestamp(commit.created_at, tz=UTC),
            files={path: entry.sha256 for path, entry in sorted(commit.files.items())},
        )

    def _trees(self, repo: _Repo, commit: _Commit) -> dict[str, str]:
        key = (repo.key, commit.oid)
        if key not in self._tree_cache:
            self._tree_cache[key] = _tree_oids(commit.files)
        return self._tree_cache[key]

    def _new_commit(
        self,
        repo: _Repo,
        parent: str | None,
        files: dict[str, _Entry],
        title: str,
        description: str,
        author: str,
    ) -> _Commit:
        created_at = time.time()
        stamp = f"{author} <{author}@loopback.invalid> {int(created_at)} +0000"
        text = f"tree {_tree_oids(files)['']}\n"
        text += f"parent {parent}\n" if parent else ""
        text += f"author {stamp}\ncommitter {stamp}\n\n{title}\n"
        text += f"\n{description}\n" if description else ""
        oid = _git_hash(b"commit", text.encode())
        commit = _Commit(oid, parent, title, description, author, created_at, files)
        repo.commits.setdefault(oid, commit)
        return repo.commits[oid]

    def _create_repo_state(
        self, repo_id: str, private: bool, repo_type: str = "model", sdk: str | None = None
    ) -> _Repo:
        repo = _Repo(repo_id=repo_id, private=private, created_at=time.time(), repo_type=repo_type, sdk=sdk)
        files = {".gitattributes": _GITATTRIBUTES}
        if repo_type == "space":
            # The Hub starts a Space with a README.md whose metadata names its SDK.
            name = repo_id.split("/")[1]
            files["README.md"] = (
                f"---\ntitle: {name}\nsdk: {sdk}\napp_file: app.py\npinned: false\n---\n".encode()
            )
        entries = {}
        for path, data in files.items():
            entries[path] = _Entry.of(data, lfs=False)
            self._write_blob(data, entries[path].sha256)
        initial = self._new_commit(repo, None, entries, "initial commit", "", _SYSTEM_AUTHOR)
        repo.branches["main"] = initial.oid
        self._repos[repo.key] = repo
        return repo

    # ---------------------------------------------------------------------------- dispatch

    def _dispatch(self, handler: _Handler) -> None:
        method = handler.command
        split = urlsplit(handler.path)
        segments = [unquote(s) for s in split.path.split("/")[1:]]
        route, params = _match_route(method, segments)
        fault = self.faults._take(route, method)
        entry = _LogEntry(method, split.path, route, fault.kind if fault else None)
        with self._lock:
            self._log.append(entry)

        if fault is not None and fault.kind == "drop":
            self._drop_mid_body(handler, fault)
            return
        try:
            body = _read_body(handler)
        except (OSError, ValueError):
            _close_without_answer(handler)
            return
        if fault is not None and fault.kind == "delay" and self._stopping.wait(fault.delay):
            _close_without_answer(handler)  # the server is stopping: don't answer late
            return
        if fault is not None and fault.kind in {"status", "rate_limit", "conflict"}:
            response = self._fault_response(fault)
        else:
            response = self._handle(
                _Request(method, route, params, parse_qs(split.query), handler.headers, body)
            )
        if fault is not None and fault.kind == "lose_response":
            _close_without_answer(handler)
            return
        # Logged before the answer leaves, so that a client which got it always finds it in the log.
        with self._lock:
            entry.status = response.status
        if not self._send(handler, method, response):
            with self._lock:
                entry.status = None

    @staticmethod
    def _drop_mid_body(handler: _Handler, fault: Fault) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        to_read = fault.after_bytes if fault.after_bytes is not None else length // 2
        if length:
            to_read = min(to_read, length)
        if to_read:
            handler.rfile.read(to_read)
        _close_without_answer(handler)

    @staticmethod
    def _fault_response(fault: Fault) -> _Response:
        if fault.kind == "rate_limit":
            return _Response.json(
                {"error": fault.message or "Too Many Requests"},
                status=fault.status,
                headers={"Retry-After": str(fault.retry_after)},
            )
        if fault.kind == "conflict":
            return _Response.error(_HubError(fault.status, fault.message or CONFLICT_MESSAGE))
        return _Response.json(
            {"error": fault.message or f"Injected HTTP {fault.status}"}, status=fault.status
        )

    @staticmethod
    def _send(handler: _Handler, method: str, response: _Response) -> bool:
        try:
            handler.send_response(response.status)
            headers = dict(response.headers)
            headers.setdefault("Content-Length", str(len(response.body)))
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            if method != "HEAD" and response.body:
                handler.wfile.write(response.body)
            return True
        except OSError:
            handler.close_connection = True  # the client gave up (e.g. timed out) before the answer
            return False

    def _handle(self, req: _Request) -> _Response:
        try:
            if req.route not in self._handlers:
                raise _HubError(404, "Sorry, we can't find the page you are looking for.")
            return self._handlers[req.route](req)
        except _HubError as err:
            return _Response.error(err)
        except Exception as exc:
            # A bug in this server: answer 500 (which the client may retry) and keep the traceback,
            # so that `internal_errors` makes it loud instead of a mysteriously dropped connection.
            trace = "".join(traceback.format_exception(exc))
            with self._lock:
                self._internal_errors.append(f"{req.method} {req.route}: {trace}")
            return _Response.json({"error": f"LoopbackHub internal error: {exc!r}"}, status=500)

    # ---------------------------------------------------------------------------- auth

    def _authenticate(self, req: _Request, *, write: bool) -> bool:
        """Whether the request carries a valid token; raises 401 for a bad token or an anonymous write."""
        header = req.headers.get("Authorization")
        if header is None:
            if write and self.token is not None:
                raise _HubError(401, "Invalid username or password.")
            return False
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value or (self.token is not None and value != self.token):
            raise _HubError(401, "Invalid credentials in Authorization header")
        return True

    @staticmethod
    def _repo_key_of(req: _Request) -> str:
        return _repo_key(req.params["repo"], req.params.get("repo_type", "model"))

    def _readable_repo(self, req: _Request) -> _Repo:
        authenticated = self._authenticate(req, write=False)
        repo = self._repos.get(self._repo_key_of(req))
        # Like the Hub, a private repo is "not found" for anonymous readers.
        if repo is None or (repo.private and not authenticated and self.token is not None):
            raise _HubError(404, "Repository not found", code="RepoNotFound")
        return repo

    def _writable_repo(self, req: _Request) -> _Repo:
        self._authenticate(req, write=True)
        repo = self._repos.get(self._repo_key_of(req))
        if repo is None:
            raise _HubError(404, "Repository not found", code="RepoNotFound")
        return repo

    # ---------------------------------------------------------------------------- account routes

    def _h_whoami(self, req: _Request) -> _Response:
        if not self._authenticate(req, write=False):
            raise _HubError(401, "Invalid username or password.")
        return _Response.json(
            {
                "type": "user",
                "id": hashlib.sha1(self.user.encode()).hexdigest()[:24],
                "name": self.user,
                "fullname": self.user,
                "email": f"{self.user}@loopback.invalid",
                "emailVerified": True,
                "isPro": False,
                "orgs": [],
                "auth": {"type": "access_token", "accessToken": {"displayName": "loopback", "role": "write"}},
            }
        )

    def _h_validate_yaml(self, req: _Request) -> _Response:
        self._authenticate(req, write=False)
        payload = req.json()
        if not isinstance(payload, dict) or not isinstance(payload.get("content"), str):
            raise _HubError(400, "Expected a JSON body with a 'content' string")
        # The Hub's format, as huggingface_hub's `HfApi._validate_yaml` reads it: `{"message": …}` each.
        warnings = [{"message": message} for message in self.card_warnings]
        return _Response.json({"errors": [], "warnings": warnings})

    def _h_create_repo(self, req: _Request) -> _Response:
        self._authenticate(req, write=True)
        payload = req.json()
        if not isinstance(payload, dict):
            raise _HubError(400, "Expected a JSON object")
        repo_type = payload.get("type") or "model"
        if repo_type not in _URL_PREFIXES:
            raise _HubError(501, f"LoopbackHub serves model and space repositories, not {repo_type!r}")
        sdk = payload.get("sdk") if repo_type == "space" else None
        if repo_type == "space" and sdk not in _SPACE_SDKS:
            raise _HubError(400, f"Invalid sdk {sdk!r}: a Space needs one of {', '.join(_SPACE_SDKS)}")
        name, namespace = payload.get("name"), payload.get("organization") or self.user
        if not isinstance(name, str) or not _NAME_RE.match(name) or name.endswith(".git"):
            raise _HubError(400, f"Invalid repository name: {name!r}")
        if not _NAME_RE.match(namespace):
            raise _HubError(400, f"Invalid namespace: {namespace!r}")
        repo_id = f"{namespace}/{name}"
        url = f"{self._base_url}/{_repo_key(repo_id, repo_type)}"
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        with self._lock:
            if _repo_key(repo_id, repo_type) in self._repos:
                # The client reads "url" from this 409 answer when exist_ok=True.
                return _Response.json(
                    {"error": f"You already created this {repo_type} repo", "url": url}, status=409
                )
            self._create_repo_state(repo_id, private, repo_type, sdk)
            self._save_state()
        return _Response.json(
            {"url": url, "name": repo_id, "id": hashlib.sha1(repo_id.encode()).hexdigest()[:24]}
        )

    def _h_delete_repo(self, req: _Request) -> _Response:
        self._authenticate(req, write=True)
        payload = req.json()
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            raise _HubError(400, "Expected a JSON object with a 'name'")
        repo_id = f"{payload.get('organization') or self.user}/{payload['name']}"
        repo_type = payload.get("type") or "model"
        key = _repo_key(repo_id, repo_type) if repo_type in _URL_PREFIXES else None
        with self._lock:
            if key not in self._repos:
                raise _HubError(404, "Repository not found", code="RepoNotFound")
            del self._repos[key]
            self._save_state()
        return _Response.json({})

    # ---------------------------------------------------------------------------- read routes

    def _h_repo_info(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._readable_repo(req)
            commit = self._resolve(repo, req.params.get("rev") or "main")
            files = sorted(commit.files.items())
        with_blobs = req.flag("blobs")
        siblings = []
        for path, entry in files:
            sibling: dict[str, Any] = {"rfilename": path}
            if with_blobs:
                sibling.update(size=entry.size, blobId=entry.git_oid)
                if entry.lfs:
                    sibling["lfs"] = {
                        "sha256": entry.sha256,
                        "size": entry.size,
                        "pointerSize": entry.pointer_size,
                    }
            siblings.append(sibling)
        namespace = repo.repo_id.split("/")[0]
        info: dict[str, Any] = {
            "_id": hashlib.sha1(repo.key.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            **({"modelId": repo.repo_id} if repo.repo_type == "model" else {"sdk": repo.sdk}),
            "author": namespace,
            "sha": commit.oid,
            "lastModified": _iso(commit.created_at),
            "createdAt": _iso(repo.created_at),
            "private": repo.private,
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "usedStorage": sum(entry.size for _, entry in files),
        }
        expand = req.query.get("expand") or req.query.get("expand[]")
        if expand:
            info = {key: value for key, value in info.items() if key in {"_id", "id", *expand}}
        return _Response.json(info)

    def _h_list_models(self, req: _Request) -> _Response:
        """`GET /api/models?author=NS&filter=TAG…`, as `HfApi.list_models` asks it: every model of `author`
        (all when absent) whose tags hold every `filter`, oldest first, in one page (no `Link: next`). The
        tags are those of the card's front matter at `main`, as the Hub derives them; a private repository
        is listed only to an authenticated reader."""
        authenticated = self._authenticate(req, write=False)
        author = (req.query.get("author") or [None])[-1]
        wanted = set(req.query.get("filter") or [])
        limit = int((req.query.get("limit") or ["0"])[-1]) or None
        with self._lock:
            repos = sorted(self._repos.values(), key=lambda repo: (repo.created_at, repo.repo_id))
            listed = []
            for repo in repos:
                if repo.repo_type != "model":
                    continue
                if author is not None and repo.repo_id.split("/")[0] != author:
                    continue
                if repo.private and not authenticated and self.token is not None:
                    continue
                commit = repo.commits[repo.branches["main"]]
                card = commit.files.get("README.md")
                tags = _card_tags(self._read_blob(card.sha256)) if card is not None else []
                if wanted <= set(tags):
                    listed.append((repo, commit, tags))
        items = [
            {
                "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "private": repo.private,
                "downloads": 0,
                "likes": 0,
                "tags": tags,
                "createdAt": _iso(repo.created_at),
            }
            for repo, commit, tags in listed[:limit]
        ]
        return _Response.json(items)

    def _h_refs(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._readable_repo(req)
            branches = sorted(repo.branches.items())
            tags = sorted(repo.tags.items())
        payload: dict[str, Any] = {
            "branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": oid} for n, oid in branches],
            "converts": [],
            "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": oid} for n, oid in tags],
        }
        if req.flag("include_prs"):
            payload["pullRequests"] = []
        return _Response.json(payload)

    def _h_commits(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._readable_repo(req)
            history = list(self._history(repo, self._resolve(repo, req.params["rev"])))
        return _Response.json(
            [
                {
                    "id": c.oid,
                    "title": c.title,
                    "message": c.description,
                    "authors": [{"user": c.author}],
                    "date": _iso(c.created_at),
                }
                for c in history
            ]
        )

    def _file_info(self, path: str, entry: _Entry) -> dict[str, Any]:
        info: dict[str, Any] = {"type": "file", "oid": entry.git_oid, "size": entry.size, "path": path}
        if entry.lfs:
            info["lfs"] = entry.lfs_info()
        return info

    def _h_tree(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._readable_repo(req)
            commit = self._resolve(repo, req.params["rev"])
            files = dict(commit.files)
            trees = self._trees(repo, commit)
        base = req.params["path"].strip("/")
        if base not in trees:
            raise _HubError(404, f"Entry not found: {base}", code="EntryNotFound")
        prefix = f"{base}/" if base else ""
        recursive = req.flag("recursive")

        def listed(path: str) -> bool:
            return path.startswith(prefix) and (recursive or "/" not in path[len(prefix) :])

        entries = [
            {"type": "directory", "oid": trees[d], "path": d} for d in sorted(trees) if d and listed(d)
        ]
        entries += [self._file_info(p, e) for p, e in sorted(files.items()) if listed(p)]
        return _Response.json(entries)

    def _h_paths_info(self, req: _Request) -> _Response:
        if req.headers.get("Content-Type", "").startswith("application/json"):
            payload = req.json()
            paths = payload.get("paths", []) if isinstance(payload, dict) else []
        else:
            paths = parse_qs(req.body.decode()).get("paths", [])
        with self._lock:
            repo = self._readable_repo(req)
            commit = self._resolve(repo, req.params["rev"])
            files = dict(commit.files)
            trees = self._trees(repo, commit)
        infos = []
        for raw in paths:
            path = str(raw).strip("/")
            if path in files:
                infos.append(self._file_info(path, files[path]))
            elif path and path in trees:
                infos.append({"type": "directory", "oid": trees[path], "path": path})
        return _Response.json(infos)

    def _h_resolve(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._readable_repo(req)
            commit = self._resolve(repo, req.params["rev"])
            entry = commit.files.get(req.params["path"])
        if entry is None:
            # The client caches the absence of the file under the commit id it reads here.
            raise _HubError(
                404, "Entry not found", code="EntryNotFound", headers={"X-Repo-Commit": commit.oid}
            )
        headers = {
            "Content-Type": "application/octet-stream",
            "ETag": f'"{entry.etag}"',
            "X-Repo-Commit": commit.oid,
            "Accept-Ranges": "bytes",
        }
        if entry.lfs:
            headers["X-Linked-Etag"] = f'"{entry.sha256}"'
            headers["X-Linked-Size"] = str(entry.size)
        start, end = 0, entry.size - 1
        status = 200
        if "Range" in req.headers:
            match = _RANGE_RE.match(req.headers["Range"].strip())
            if match is None or (not match[1] and not match[2]):
                raise _HubError(416, "Invalid range", headers={"Content-Range": f"bytes */{entry.size}"})
            if match[1]:
                start = int(match[1])
                end = min(int(match[2]), entry.size - 1) if match[2] else entry.size - 1
            else:
                start = max(entry.size - int(match[2]), 0)
            if start >= entry.size or start > end:
                raise _HubError(
                    416, "Range not satisfiable", headers={"Content-Range": f"bytes */{entry.size}"}
                )
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{entry.size}"
        headers["Content-Length"] = str(end - start + 1)
        body = b"" if req.method == "HEAD" else self._read_blob(entry.sha256)[start : end + 1]
        return _Response(status=status, body=body, headers=headers)

    def _h_xet_token(self, req: _Request) -> _Response:
        raise _HubError(
            501,
            "LoopbackHub does not speak Xet: disable it in the client "
            "(huggingface_hub.constants.HF_HUB_DISABLE_XET = True) so that uploads use Git LFS",
        )

    # ---------------------------------------------------------------------------- write routes

    def _upload_mode(self, size: int) -> str:
        return "lfs" if self.lfs_threshold is not None and size > self.lfs_threshold else "regular"

    def _h_preupload(self, req: _Request) -> _Response:
        if req.flag("create_pr"):
            raise _HubError(501, "LoopbackHub does not support pull requests")
        payload = req.json()
        files = payload.get("files") if isinstance(payload, dict) else None
        if not isinstance(files, list):
            raise _HubError(400, "Expected a JSON object with a 'files' list")
        with self._lock:
            repo = self._writable_repo(req)
            commit = self._resolve(repo, req.params["rev"])
            existing = dict(commit.files)
            head = commit.oid
        answers = []
        for item in files:
            if not isinstance(item, dict) or not isinstance(item.get("path"), str):
                raise _HubError(400, "Each file needs a 'path'")
            if not isinstance(item.get("size"), int) or item["size"] < 0:
                raise _HubError(400, f"Invalid size for {item['path']!r}")
            current = existing.get(item["path"])
            answers.append(
                {
                    "path": item["path"],
                    "uploadMode": self._upload_mode(item["size"]),
                    "shouldIgnore": False,
                    # The client skips a file whose oid here equals its local one (no-op detection).
                    "oid": current.etag if current is not None else None,
                }
            )
        return _Response.json({"files": answers, "commitOid": head})

    def _h_commit(self, req: _Request) -> _Response:
        if req.flag("create_pr"):
            raise _HubError(501, "LoopbackHub does not support pull requests")
        with self._lock:
            repo = self._writable_repo(req)
            branch = req.params["rev"].removeprefix("refs/heads/")
            if branch not in repo.branches:
                self._resolve(repo, branch)  # 404 RevisionNotFound when it is no ref at all
                raise _HubError(400, f"Invalid rev id: {req.params['rev']} is not a branch")
        header, operations = self._parse_commit_body(req.body)
        summary = header.get("summary")
        if not isinstance(summary, str) or not summary:
            raise _HubError(400, "The commit needs a summary")
        description = header.get("description") or ""
        parent_commit = header.get("parentCommit")
        if parent_commit is not None and not (
            isinstance(parent_commit, str) and re.fullmatch(r"[0-9a-fA-F]{5,40}", parent_commit)
        ):
            raise _HubError(400, f"Invalid parentCommit: {parent_commit!r}")

        # Blobs of regular files are content-addressed: writing them before the ref moves is harmless.
        additions: dict[str, _Entry] = {}
        for key, value, data in operations:
            if key == "file":
                entry = _Entry.of(data, lfs=False)
                self._write_blob(data, entry.sha256)
                additions[value["path"]] = entry

        with self._lock:
            repo = self._writable_repo(req)
            if branch not in repo.branches:  # deleted while the payload was being read
                raise _HubError(404, f"Invalid rev id: {req.params['rev']}", code="RevisionNotFound")
            head = repo.commits[repo.branches[branch]]
            if parent_commit is not None and not head.oid.startswith(parent_commit.lower()):
                raise _HubError(412, CONFLICT_MESSAGE)
            files = dict(head.files)
            for key, value, _ in operations:
                path = value["path"]
                if key == "file":
                    files[path] = additions[path]
                elif key == "lfsFile":
                    files[path] = self._lfs_entry(repo, value)
                elif key == "deletedFile":
                    if path not in files:
                        raise _HubError(
                            404, f"A file with this name doesn't exist: {path}", code="EntryNotFound"
                        )
                    del files[path]
                else:  # deletedFolder
                    folder = path.rstrip("/") + "/"
                    doomed = [p for p in files if p.startswith(folder)]
                    if not doomed:
                        raise _HubError(
                            404, f"A folder with this name doesn't exist: {path}", code="EntryNotFound"
                        )
                    for p in doomed:
                        del files[p]
            self._check_no_file_folder_clash(files)
            commit = self._new_commit(repo, head.oid, files, summary, description, self.user)
            repo.branches[branch] = commit.oid
            self._save_state()
        return _Response.json(
            {
                "success": True,
                "commitOid": commit.oid,
                "commitUrl": f"{self._base_url}/{repo.key}/commit/{commit.oid}",
                "hookOutput": "",
                "pullRequestUrl": None,
            }
        )

    @staticmethod
    def _parse_commit_body(body: bytes) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any], bytes]]]:
        """Validate the whole NDJSON payload before anything changes (a commit is all or nothing)."""
        header: dict[str, Any] | None = None
        operations: list[tuple[str, dict[str, Any], bytes]] = []
        for number, line in enumerate(body.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _HubError(400, f"Line {number} of the commit payload is not JSON: {exc}") from exc
            key, value = (item.get("key"), item.get("value")) if isinstance(item, dict) else (None, None)
            if not isinstance(value, dict):
                raise _HubError(400, f"Line {number} of the commit payload has no 'value' object")
            if key == "header":
                if header is not None:
                    raise _HubError(400, "The commit payload has two headers")
                header = value
                continue
            if header is None:
                raise _HubError(400, "The commit payload must start with its header")
            if key not in {"file", "lfsFile", "deletedFile", "deletedFolder"}:
                raise _HubError(400, f"Unknown operation {key!r} on line {number}")
            path = value.get("path")
            if not isinstance(path, str) or not _valid_repo_path(
                path.rstrip("/") if key == "deletedFolder" else path
            ):
                raise _HubError(400, f"Invalid path on line {number}: {path!r}")
            data = b""
            if key == "file":
                if value.get("encoding", "base64") != "base64" or not isinstance(value.get("content"), str):
                    raise _HubError(400, f"Line {number}: expected base64 'content'")
                try:
                    data = base64.b64decode(value["content"], validate=True)
                except binascii.Error as exc:
                    raise _HubError(400, f"Line {number}: content is not valid base64") from exc
            elif key == "lfsFile" and (
                value.get("algo", "sha256") != "sha256" or not _SHA256_RE.match(str(value.get("oid", "")))
            ):
                raise _HubError(400, f"Line {number}: lfsFile needs a sha256 'oid'")
            operations.append((key, value, data))
        if header is None:
            raise _HubError(400, "The commit payload has no header")
        return header, operations

    def _lfs_entry(self, repo: _Repo, value: Mapping[str, Any]) -> _Entry:
        oid = value["oid"]
        if oid not in repo.lfs_objects:
            raise _HubError(
                400,
                "Your push was rejected because an LFS pointer pointed to a file that does not exist"
                f" ({oid})",
            )
        size = self._blob_path(oid).stat().st_size
        if value.get("size") is not None and value["size"] != size:
            raise _HubError(400, f"LFS object {oid} has size {size}, not {value['size']}")
        pointer = _lfs_pointer(oid, size)
        return _Entry(sha256=oid, size=size, lfs=True, git_oid=_git_hash(b"blob", pointer))

    @staticmethod
    def _check_no_file_folder_clash(files: Mapping[str, _Entry]) -> None:
        for path in files:
            parts = path.split("/")
            for depth in range(1, len(parts)):
                if "/".join(parts[:depth]) in files:
                    raise _HubError(400, f"{'/'.join(parts[:depth])!r} is a file, it cannot hold {path!r}")

    def _h_create_tag(self, req: _Request) -> _Response:
        payload = req.json()
        tag = payload.get("tag") if isinstance(payload, dict) else None
        if not isinstance(tag, str) or not _valid_ref_name(tag):
            raise _HubError(400, f"Invalid tag name: {tag!r}")
        with self._lock:
            repo = self._writable_repo(req)
            commit = self._resolve(repo, req.params["rev"])
            if tag in repo.tags or tag in repo.branches:
                raise _HubError(409, f"Tag {tag} already exists")
            repo.tags[tag] = commit.oid
            self._save_state()
        return _Response.json({})

    def _h_delete_tag(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._writable_repo(req)
            tag = req.params["rev"].removeprefix("refs/tags/")
            if tag not in repo.tags:
                raise _HubError(404, f"Tag {tag} does not exist", code="RevisionNotFound")
            del repo.tags[tag]
            self._save_state()
        return _Response.json({})

    def _h_create_branch(self, req: _Request) -> _Response:
        payload = req.json()
        start = payload.get("startingPoint") if isinstance(payload, dict) else None
        branch = req.params["rev"]
        if not _valid_ref_name(branch):
            raise _HubError(400, f"Invalid branch name: {branch!r}")
        with self._lock:
            repo = self._writable_repo(req)
            commit = self._resolve(repo, start if isinstance(start, str) else "main")
            if branch in repo.branches or branch in repo.tags:
                raise _HubError(409, f"Reference {branch} already exists")
            repo.branches[branch] = commit.oid
            self._save_state()
        return _Response.json({})

    def _h_delete_branch(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._writable_repo(req)
            branch = req.params["rev"]
            if branch == "main":
                raise _HubError(403, "Cannot delete the default branch")
            if branch not in repo.branches:
                raise _HubError(404, f"Branch {branch} does not exist", code="RevisionNotFound")
            del repo.branches[branch]
            self._save_state()
        return _Response.json({})

    # ---------------------------------------------------------------------------- Git LFS

    def _h_lfs_batch(self, req: _Request) -> _Response:
        payload = req.json()
        if not isinstance(payload, dict) or payload.get("operation") != "upload":
            raise _HubError(400, "LoopbackHub only serves LFS uploads through the batch API")
        objects = payload.get("objects")
        if not isinstance(objects, list):
            raise _HubError(400, "Expected an 'objects' list")
        with self._lock:
            repo = self._writable_repo(req)
            answers = []
            for obj in objects:
                oid, size = (obj.get("oid"), obj.get("size")) if isinstance(obj, dict) else (None, None)
                if (
                    not isinstance(oid, str)
                    or not _SHA256_RE.match(oid)
                    or not isinstance(size, int)
                    or size < 0
                ):
                    raise _HubError(400, f"Invalid LFS object: {obj!r}")
                if oid in repo.lfs_objects:
                    answers.append({"oid": oid, "size": size})  # no actions: already uploaded
                    continue
                # Like a presigned S3 URL: the PUT carries no token, the ticket in the URL authorizes it.
                ticket = secrets.token_urlsafe(18)
                self._upload_tickets[ticket] = (repo.key, oid, size)
                answers.append(
                    {
                        "oid": oid,
                        "size": size,
                        "authenticated": True,
                        "actions": {
                            "upload": {"href": f"{self._base_url}/__loopback__/lfs-upload/{ticket}"},
                            "verify": {"href": f"{self._base_url}/{repo.key}.git/info/lfs/objects/verify"},
                        },
                    }
                )
        return _Response.json(
            {"transfer": "basic", "objects": answers},
            headers={"Content-Type": "application/vnd.git-lfs+json"},
        )

    def _h_lfs_upload(self, req: _Request) -> _Response:
        with self._lock:
            ticket = self._upload_tickets.get(req.params["ticket"])
        if ticket is None:
            raise _HubError(403, "Unknown or expired upload URL")
        key, oid, size = ticket
        if len(req.body) != size or hashlib.sha256(req.body).hexdigest() != oid:
            raise _HubError(400, f"Uploaded content does not match LFS object {oid} ({size} bytes)")
        self._write_blob(req.body, oid)
        with self._lock:
            if key in self._repos:
                self._repos[key].lfs_objects.add(oid)
                self._save_state()
        return _Response(status=200, headers={"ETag": f'"{oid}"'})

    def _h_lfs_verify(self, req: _Request) -> _Response:
        payload = req.json()
        oid, size = (payload.get("oid"), payload.get("size")) if isinstance(payload, dict) else (None, None)
        with self._lock:
            repo = self._writable_repo(req)
            present = isinstance(oid, str) and oid in repo.lfs_objects
        if not present or self._blob_path(str(oid)).stat().st_size != size:
            raise _HubError(404, f"LFS object {oid} of size {size} was not uploaded")
        return _Response.json({"success": True})


def _valid_repo_path(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and all(p not in {"", ".", ".."} for p in parts) and parts[0] != ".git"


def _valid_ref_name(name: str) -> bool:
    return (
        bool(name) and _valid_repo_path(name) and not any(c in name for c in " ~^:?*[\\") and ".." not in name
    )


# --------------------------------------------------------------------------------------------------
# Client configuration


def client_settings(
    hub: LoopbackHub, hf_home: Path, token: str | None = None
) -> tuple[dict[str, str], dict[str, object]]:
    """Environment variables and `huggingface_hub.constants` overrides that point the client at `hub`.

    huggingface_hub 2.4.0 reads its environment once, at import: setting the variables afterwards
    only helps subprocesses, so the same settings must also be patched into
    `huggingface_hub.constants` (which the client reads at call time). Returns `(env, constants)`;
    apply both, e.g. with pytest's monkeypatch, then call `huggingface_hub.utils.close_session()` so
    that the shared HTTP client is rebuilt with the new proxy settings.
    """
    home = Path(hf_home)
    endpoint = hub.endpoint
    env = {
        "HF_ENDPOINT": endpoint,
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_XET_CACHE": str(home / "xet"),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    # httpx honours HTTP(S)_PROXY: make sure loopback traffic never goes to a proxy.
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY") or os.environ.get("no_proxy"), "127.0.0.1"]))
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    if token is not None:
        env["HF_TOKEN"] = token
    constants_overrides: dict[str, object] = {
        # ENDPOINT and the URL template must move together: `hf_hub_url` only swaps in an explicit
        # `endpoint=` when the template starts with ENDPOINT.
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_XET": True,
        # Telemetry off also stops the user-agent builder from fetching an "agent harness" list.
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": False,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HUGGINGFACE_HUB_CACHE": str(home / "hub"),
        "HF_ASSETS_CACHE": str(home / "assets"),
        "HF_XET_CACHE": str(home / "xet"),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "AGENT_HARNESSES_PATH": str(home / ".agent_harnesses.json"),
    }
    return env, constants_overrides
