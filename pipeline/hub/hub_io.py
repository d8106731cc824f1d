"""Hub I/O: where requests go, what they may carry, how long they may take, and where answers may land.

Everything attncard sends to or reads from a Hub (huggingface.co, a mirror, a loopback server in tests) goes
through here:

- [`hub_endpoint`]: the endpoint, checked before any request: https, or plain http to a loopback host only,
  because the token goes along with every request. Data (datasets) and base models (transformers) read
  `HF_ENDPOINT` themselves: their callers check it with `hub_endpoint()` first.
- [`redact`] and [`redacted`]: while a push or a download runs, no log record, warning or error message
  carries the token, even when a server echoes it back in an error body.
- [`Deadline`] and [`hub_client_timeout`]: every request has a per-operation timeout, and the whole
  operation an overall deadline that also holds against a server trickling one byte a second (the
  timeouts of one read never fire on a trickle, so the deadline is checked on every socket read and write).
  A server that never answered gets a short timeout and no retries; an API answer is read only
  uncompressed and up to `MAX_ANSWER_BYTES`, before it is parsed.
- [`fetch_run`]: downloads a repository snapshot into a folder attncard owns, per endpoint
  ([`endpoint_key`]), without huggingface_hub's file download: file names come from the tree listing and
  are checked, sizes are capped before any byte is fetched, every file is checked against the id the
  listing gives, and no header (an ETag, say) is ever used to build a path.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import logging
import os
import re
import tempfile
import time
import traceback
import typing
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpcore2
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
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import build_hf_headers, parse_ratelimit_headers, validate_repo_id

from ..record.errors import (
    AttncardError,
    DownloadError,
    HubAnswerError,
    HubDeadlineError,
    HubNoAnswerError,
    HubUnreachableError,
    InsecureEndpointError,
    IntegrityError,
    RepoNotFoundError,
    RevisionNotFoundError,
    first_line,
)
from ..record.manifest import RESULTS_FILE, WEIGHTS_SUFFIX, hash_file, max_file_bytes
from ..record.text import COMMIT_RE
from ..record.text import SHA_PREFIX as _SHORT_SHA

DEFAULT_TIMEOUT_S = 60.0  # each network operation: connecting, one read, one write
# Until a server has answered once: huggingface_hub's own default, and a server that accepts a connection
# but never answers is not asked again (no retries), so it costs this long, not five times DEFAULT_TIMEOUT_S.
FIRST_ANSWER_TIMEOUT_S = 10.0
DEFAULT_DEADLINE_S = 30 * 60.0  # a whole download or push
REDACTED = "<token>"
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
MAX_ANSWER_BYTES = 16 << 20  # one API answer (model_info, a tree page, an LFS batch), before it is parsed
MAX_REDIRECTS = 5
_WRITE_CHUNK = 1 << 16  # writes are split so that the deadline is checked between chunks
_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})  # those huggingface_hub's http_backoff retries

logger = logging.getLogger(__name__)


# --- the endpoint -------------------------------------------------------------------------------------------


def hub_endpoint(endpoint: str | None = None) -> str:
    """The Hub endpoint to use, normalised, refusing one the token must not go to.

    Args:
        endpoint: a Hub URL; default `HF_ENDPOINT` as huggingface_hub read it, else https://huggingface.co.

    Returns:
        `scheme://host[:port][/path]`, scheme and host in lower case, without a trailing `/`.

    Raises:
        [`InsecureEndpointError`]: not an http(s) URL, a URL with credentials, a query or a fragment, or
            plain http to a host that is not loopback (127.0.0.0/8, ::1, localhost).

    Example:
        >>> hub_endpoint("https://HuggingFace.co/")
        'https://huggingface.co'
    """
    text = (endpoint if endpoint is not None else constants.ENDPOINT).strip().rstrip("/")
    try:
        parts = urlsplit(text)
        host, _ = parts.hostname, parts.port  # a port that is not a number raises here
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not host:
        raise InsecureEndpointError(
            f"the Hub endpoint {text!r} is not an http(s) URL; pass https://HOST[:PORT] (--hub-endpoint, "
            "HF_ENDPOINT)"
        )
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise InsecureEndpointError(
            f"the Hub endpoint {parts.scheme}://{host}… holds credentials, a query or a fragment; pass "
            "https://HOST[:PORT][/PATH] and give the token with HF_TOKEN or `hf auth login`"
        )
    if parts.scheme.lower() == "http" and not _is_loopback(host):
        raise InsecureEndpointError(
            f"the Hub endpoint {text} is plain http: the token goes to the configured https endpoint only "
            "(loopback http allowed for tests); pass an https:// endpoint (--hub-endpoint, HF_ENDPOINT)"
        )
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path}".rstrip("/")


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin(url: str | httpx2.URL) -> tuple[str, str, int | None]:
    """`(scheme, host, port)`, the default port filled in: what must match for the token to be sent."""
    url = httpx2.URL(str(url))
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host.lower(), url.port or default


def endpoint_key(endpoint: str) -> str:
    """A folder name for a normalised endpoint: readable, path-safe, and distinct for distinct endpoints.

    Host and port for reading, and a short sha256 of the whole endpoint (scheme, path) so that no two
    endpoints share a name. Derived from the endpoint the user configured only, never from an answer.

    Example:
        >>> endpoint_key("https://huggingface.co")
        'huggingface.co-443-03a89053'
    """
    _, host, port = _origin(endpoint)
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", host)[:64]
    return f"{readable}-{port}-{hashlib.sha256(endpoint.encode()).hexdigest()[:8]}"


# --- the token ----------------------------------------------------------------------------------------------


def redact(text: str, token: str | None) -> str:
    """`text` with every occurrence of `token` (so its `Bearer …` form too) replaced by `<token>`.

    Example:
        >>> redact("you sent Authorization: Bearer hf_abc", "hf_abc")
        'you sent Authorization: Bearer <token>'
    """
    return text.replace(token, REDACTED) if token else text


@contextlib.contextmanager
def redacted(token: str | None) -> Iterator[None]:
    """Keeps `token` out of every log record, warning and error message while the block runs.

    Log records of every logger (attncard's `pipeline.*`, huggingface_hub's, httpx2's) are redacted when
    they are made, message and traceback text alike; warnings are redacted before they are shown or
    recorded; an exception leaving the block whose message, or the message of an exception it was raised
    from, holds the token is raised again as the same class with the message redacted, without the chain.

    Args:
        token: the token to hide; nothing is done when it is empty.

    Example:
        >>> import sys
        >>> logger = logging.getLogger("attncard.example")
        >>> logger.addHandler(logging.StreamHandler(sys.stdout))
        >>> with redacted("hf_abc"):
        ...     logger.warning("the server said: Bearer hf_abc")
        the server said: Bearer <token>
        >>> with redacted("hf_abc"):
        ...     raise ValueError("401 Unauthorized for token hf_abc")
        Traceback (most recent call last):
        ...
        ValueError: 401 Unauthorized for token <token>
    """
    if not token:
        yield
        return
    make_record = logging.getLogRecordFactory()
    show_warning = warnings.showwarning

    def record_factory(*args: object, **kwargs: object) -> logging.LogRecord:
        return _redact_record(make_record(*args, **kwargs), token)

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if token in str(message):
            try:
                message = category(redact(str(message), token))
            except Exception:  # a warning class that takes other arguments: show the text
                message = redact(str(message), token)
        show_warning(message, category, filename, lineno, file, line)

    logging.setLogRecordFactory(record_factory)
    warnings.showwarning = show
    try:
        yield
    except Exception as error:
        clean = _redacted_error(error, token)
        if clean is error:
            raise
        raise clean from None
    finally:
        logging.setLogRecordFactory(make_record)
        warnings.showwarning = show_warning


def _redact_record(record: logging.LogRecord, token: str) -> logging.LogRecord:
    try:
        message = record.getMessage()
    except Exception:  # a malformed logging call: logging reports it itself when the record is emitted
        return record
    if token in message:
        record.msg, record.args = redact(message, token), None
    if record.exc_info and record.exc_info[1] is not None:
        # Formatters use `exc_text` when it is set, instead of formatting the exception again.
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if token in text:
            record.exc_text = redact(text, token)
    if record.stack_info and token in record.stack_info:
        record.stack_info = redact(record.stack_info, token)
    return record


def _redacted_error(error: Exception, token: str) -> Exception:
    """`error` when no message in its chain holds `token`; else the same class with its message redacted."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    if not any(token in str(item) or token in repr(item) for item in chain):
        return error
    text = redact(str(error), token)
    try:
        clean = type(error)(text)
    except Exception:  # a class that takes other arguments
        clean = None
    if clean is None or str(clean) != text:
        clean = AttncardError(text) if isinstance(error, AttncardError) else RuntimeError(text)
    return clean


# --- timeouts and deadlines ---------------------------------------------------------------------------------


class Deadline:
    """The moment by which a whole operation (a download, a push) must end, shared by all its requests.

    Args:
        seconds: how long the operation may take from now.

    Example:
        >>> deadline = Deadline(30)
        >>> deadline.cap(60) <= 30
        True
    """

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self._ends = time.monotonic() + self.seconds

    def left(self) -> float:
        """Seconds left; negative once it passed."""
        return self._ends - time.monotonic()

    def check(self) -> None:
        """Raises [`HubDeadlineError`] once the deadline passed."""
        if self.left() <= 0:
            raise HubDeadlineError(f"the Hub operation ran past its deadline of {self.seconds:g} s")

    def cap(self, timeout: float | None) -> float:
        """`timeout` (None: none) cut to the time left; raises [`HubDeadlineError`] when none is left."""
        self.check()
        return self.left() if timeout is None else min(timeout, self.left())


class _DeadlineStream(httpcore2.NetworkStream):
    """A connection whose every read and write ends by the deadline: a trickle of one byte a second keeps
    each read short, so only a check on every read can end it, in the headers as in the body."""

    def __init__(self, stream: httpcore2.NetworkStream, deadline: Deadline):
        self._stream, self._deadline = stream, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return self._stream.read(max_bytes, self._deadline.cap(timeout))
        except httpcore2.ReadTimeout:
            self._deadline.check()  # the read was cut by the deadline, not by its own timeout
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for start in range(0, len(buffer), _WRITE_CHUNK):
            try:
                self._stream.write(buffer[start : start + _WRITE_CHUNK], self._deadline.cap(timeout))
            except httpcore2.WriteTimeout:
                self._deadline.check()
                raise

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore2.NetworkStream:
        stream = self._stream.start_tls(ssl_context, server_hostname, self._deadline.cap(timeout))
        return _DeadlineStream(stream, self._deadline)

    def get_extra_info(self, info: str) -> object:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    """Opens connections as `backend` does, each a [`_DeadlineStream`]."""

    def __init__(self, backend: httpcore2.NetworkBackend, deadline: Deadline):
        self._backend, self._deadline = backend, deadline

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        stream = self._backend.connect_tcp(
            host, port, self._deadline.cap(timeout), local_address, socket_options
        )
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        stream = self._backend.connect_unix_socket(path, self._deadline.cap(timeout), socket_options)
        return _DeadlineStream(stream, self._deadline)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(min(seconds, max(0.0, self._deadline.left())))


def _bind_deadline(client: httpx2.Client, deadline: Deadline) -> None:
    """Makes every connection `client` opens end by `deadline`.

    httpx2 gives no way to hand a network backend to a transport it built, so the backend of each
    transport's connection pool (direct, and through each proxy) is wrapped in place. A transport without
    one (a mock) is left as it is: its requests still check the deadline when they start.
    """
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = _DeadlineBackend(pool._network_backend, deadline)


def _wait_asked_s(response: httpx2.Response) -> float | None:
    """The wait a retried answer asks for (rate-limit reset, `Retry-After`), read as http_backoff does."""
    if response.status_code not in _RETRIED_STATUSES:
        return None
    limit = parse_ratelimit_headers(response.headers) if response.status_code == 429 else None
    if limit is not None and limit.remaining == 0:
        return float(limit.reset_in_seconds)
    value = response.headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


@contextlib.contextmanager
def hub_client_timeout(
    seconds: float,
    deadline: Deadline | None = None,
    *,
    endpoint: str | None = None,
    retry_unanswered: bool = True,
) -> Iterator[HubAnswers]:
    """Gives huggingface_hub's shared HTTP client timeouts, a deadline and a token guard while the block runs.

    huggingface_hub 2.4.0 builds its client without a timeout, and many of its calls (`model_info`, the
    listings) even pass `timeout=None` explicitly, so a server that stops answering hangs them forever.
    Inside the block, the client is built by the factory in place before (the library's default, or one set
    with `huggingface_hub.set_client_factory`) with `seconds` as its default timeout, and a request hook
    that gives `seconds` to each part of a request's timeout (connect, read, write, pool) that is None (a
    timeout a call asks for is kept), cut to the time `deadline` leaves. With a deadline, every socket read
    and write of the client ends by it, a request made after it raises [`HubDeadlineError`], and so does an
    answer asking to wait (`Retry-After`, a rate-limit reset) past it: huggingface_hub would sleep that long
    unasked. With an endpoint, the `Authorization` header is taken off any request to another origin (a
    pagination link, a redirect). The previous factory is put back on exit; the shared client is rebuilt
    on entry and on exit.

    Until a server has answered once, each part of a timeout is at most `FIRST_ANSWER_TIMEOUT_S` (a timeout
    a call asks for too), and a request that gets no answer raises [`HubNoAnswerError`], which
    huggingface_hub does not retry; with `retry_unanswered=False`, so does a request that gets no answer
    (a timeout before the status line, a refused connection) after the server answered others. Every
    request asks for `Accept-Encoding: identity`; an answer compressed anyway, or over `MAX_ANSWER_BYTES`
    (its `Content-Length`, or the bytes read), raises [`HubAnswerError`] before it is parsed.

    Args:
        seconds: the timeout of each network operation: connecting, each read and each write.
        deadline: when the whole operation must end; None: no overall limit.
        endpoint: the Hub's URL; the token goes to its origin (scheme, host, port) only.
        retry_unanswered: whether huggingface_hub may retry a request that got no answer, once the server
            answered another (a push retries its own calls; a download is not worth five timeouts).

    Yields:
        [`HubAnswers`]: whether a server answered, and the first connection that failed, for messages.

    Example:
        >>> with hub_client_timeout(30, Deadline(600)):
        ...     len(HfApi().model_info("loopback-user/tiny-gpt2-none-sst2").sha)
        40
    """
    # huggingface_hub has a setter for the factory but no getter: the one in place is read from its module.
    previous: Callable[[], httpx2.Client] = getattr(
        hf_http, "_GLOBAL_CLIENT_FACTORY", hf_http.default_client_factory
    )
    origin = _origin(endpoint) if endpoint is not None else None
    answers = HubAnswers(retry_unanswered=retry_unanswered)

    def on_request(request: httpx2.Request) -> None:
        if deadline is not None:
            deadline.check()
        if origin is not None and _origin(request.url) != origin:
            request.headers.pop("authorization", None)
        request.headers["Accept-Encoding"] = "identity"
        parts = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {
            part: _capped(
                min(
                    seconds if parts.get(part) is None else parts[part],
                    float("inf") if answers.answered else FIRST_ANSWER_TIMEOUT_S,
                ),
                deadline,
            )
            for part in ("connect", "read", "write", "pool")
        }

    def on_response(response: httpx2.Response) -> None:
        _check_answer(response, MAX_ANSWER_BYTES)
        response.stream = _CappedStream(response.stream, MAX_ANSWER_BYTES, _answer_name(response.request))
        wait = _wait_asked_s(response)
        if deadline is not None and wait is not None and wait >= deadline.left():
            raise HubDeadlineError(
                f"the Hub asked to wait {wait:g} s before a retry (HTTP {response.status_code}), past the "
                f"deadline of {deadline.seconds:g} s"
            )

    def factory() -> httpx2.Client:
        client = previous()
        client.timeout = httpx2.Timeout(seconds)
        hooks = client.event_hooks
        client.event_hooks = {
            "request": [*hooks["request"], on_request],
            "response": [*hooks["response"], on_response],
        }
        if deadline is not None:
            _bind_deadline(client, deadline)
        client._transport = _FirstAnswerTransport(client._transport, answers)
        client._mounts = {
            pattern: transport if transport is None else _FirstAnswerTransport(transport, answers)
            for pattern, transport in client._mounts.items()
        }
        return client

    hf_http.set_client_factory(factory)
    try:
        yield answers
    finally:
        hf_http.set_client_factory(previous)


def _capped(timeout: float, deadline: Deadline | None) -> float:
    return timeout if deadline is None else deadline.cap(timeout)


@dataclass
class HubAnswers:
    """What the requests of a [`hub_client_timeout`] block met.

    Attributes:
        answered: whether a server answered once (its status line and headers came).
        first_failure: the first request that got no answer, e.g. `ConnectError at http://host:port`. With
            concurrent requests (huggingface_hub's uploads) the others then fail with the client it closed.
    """

    answered: bool = False
    first_failure: str | None = None
    retry_unanswered: bool = True  # see [`hub_client_timeout`]


class _FirstAnswerTransport(httpx2.BaseTransport):
    """A transport whose failure before any answer came raises [`HubNoAnswerError`], which huggingface_hub
    does not retry: a server that accepts a connection and never answers costs one short wait, not five.
    Without `retry_unanswered`, so does any request that gets no answer.

    Like [`_bind_deadline`], it replaces the client's transports in place: httpx2 has no hook on failures.
    """

    def __init__(self, transport: httpx2.BaseTransport, answers: HubAnswers):
        self._transport, self._answers = transport, answers

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = self._transport.handle_request(request)
        except httpx2.TransportError as error:
            where = f"{request.url.scheme}://{request.url.netloc.decode()}"
            if self._answers.first_failure is None:
                self._answers.first_failure = f"{_transport_failure(error)} at {where}"
            if self._answers.answered and self._answers.retry_unanswered:
                raise
            waited = (request.extensions.get("timeout") or {}).get("read")
            waited = f" within {waited:g} s" if isinstance(error, httpx2.TimeoutException) and waited else ""
            if self._answers.answered:
                raise HubNoAnswerError(
                    f"{where} did not answer {request.method} {request.url.path} ({type(error).__name__}"
                    f"{waited}), and it is not asked again: try again later, or check the endpoint "
                    "(--hub-endpoint, HF_ENDPOINT)"
                ) from error
            raise HubNoAnswerError(
                f"{where} did not answer ({type(error).__name__}{waited}), and a server that never answered "
                "is not asked again: check the endpoint (--hub-endpoint, HF_ENDPOINT) and the network, then "
                "try again"
            ) from error
        self._answers.answered = True
        return response

    def close(self) -> None:
        self._transport.close()


def _transport_failure(error: httpx2.TransportError) -> str:
    """`ConnectError: [Errno 111] Connection refused`, or the class name alone when the message is empty."""
    detail = first_line(error)
    return type(error).__name__ + (f": {detail}" if detail != type(error).__name__ else "")


def _answer_name(request: httpx2.Request) -> str:
    """`METHOD scheme://host/path` of a request, for messages (no query: it may carry a ticket)."""
    return f"{request.method} {request.url.scheme}://{request.url.netloc.decode()}{request.url.path}"


def _unasked_encoding(response: httpx2.Response) -> str:
    """The answer's `Content-Encoding` when it is not the `identity` attncard asks for; "" when it is."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    return "" if encoding in ("", "identity") else encoding


def _check_answer(response: httpx2.Response, cap: int) -> None:
    """Refuses an answer compressed although `identity` was asked for, or announcing more than `cap` bytes."""
    if encoding := _unasked_encoding(response):
        raise HubAnswerError(
            f"the answer to {_answer_name(response.request)} is compressed ({encoding[:40]!r}) although "
            "attncard asked for none (a compression bomb?); it was not read: this server cannot be trusted, "
            "use another endpoint"
        )
    length = response.headers.get("Content-Length", "").strip()
    if length.isdigit() and int(length) > cap:
        raise HubAnswerError(
            f"the answer to {_answer_name(response.request)} is {int(length)} bytes, over the {cap} bytes "
            "attncard reads of it; it was not read: this server cannot be trusted, use another endpoint"
        )


class _CappedStream(httpx2.SyncByteStream):
    """An answer's body that raises [`HubAnswerError`] once more than `cap` bytes came: a server may omit
    Content-Length, or send more than it announced."""

    def __init__(self, stream: httpx2.SyncByteStream, cap: int, name: str):
        self._stream, self._cap, self._name = stream, cap, name

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self._stream:
            received += len(chunk)
            if received > self._cap:
                raise HubAnswerError(
                    f"the answer to {self._name} is over the {self._cap} bytes attncard reads of it; it was "
                    "not read: this server cannot be trusted, use another endpoint"
                )
            yield chunk

    def close(self) -> None:
        self._stream.close()


# --- fetching a run -----------------------------------------------------------------------------------------


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
                "trickling server?); try again later, or allow more time (--hub-deadline)"
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
                    "check the network and the endpoint (--hub-endpoint, HF_ENDPOINT), or pass a local run "
                    "folder"
                ) from error
            logger.warning(
                "could not reach %s (%s): using the copy of %s cached at %s",
                hub,
                reason,
                where,
                cached.commit[:_SHORT_SHA],
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
                "and the token cannot read it: check the id (and --hub-endpoint), or log in with `hf auth "
                "login` / pass a token"
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
        where = f"{repo_id}@{commit[:_SHORT_SHA]} on {hub}"
        files = _listing(api, repo_id, commit, hub)
        weights = {file.path for file in files if _is_weights(file.path)}
        if without_weights:
            files = [file for file in files if file.path not in weights]
        _check_listed_sizes(files, budget, where)
        headers = {**build_hf_headers(token=token), "Accept-Encoding": "identity"}
        manifest: set[str] | None = None  # the paths results.json lists, once it is here
        with httpx2.Client(timeout=httpx2.Timeout(timeout), follow_redirects=False) as client:
            _bind_deadline(client, limit)
            for file in sorted(files, key=lambda file: file.path != RESULTS_FILE):  # results.json first
                if file.path != RESULTS_FILE and file.size > MAX_UNLISTED_FILE_BYTES:
                    manifest = _manifest_paths(folder / RESULTS_FILE) if manifest is None else manifest
                    if file.path not in manifest:
                        raise DownloadError(
                            f"{where} lists {file.path} at {file.size} bytes, over the "
                            f"{MAX_UNLISTED_FILE_BYTES} bytes a file that results.json's manifest does not "
                            "list may have; it was not downloaded: this is not an attncard run"
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
    where = f"{repo_id}@{commit[:_SHORT_SHA]} on {hub}"
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
                "was downloaded: this is not an attncard run"
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
            if _origin(url) == _origin(hub)
            else {name: value for name, value in headers.items() if name.lower() != "authorization"}
        )
        with client.stream("GET", url, headers=sent) as response:
            if response.has_redirect_location:
                url = response.url.join(response.headers["Location"])
                if url.scheme not in ("http", "https"):
                    raise DownloadError(
                        f"{hub} redirected {file.path} to a {url.scheme!r} URL; try another endpoint"
                    )
                continue
            if response.status_code != 200:
                response.read()
                message = response.headers.get("X-Error-Message") or response.text.strip()
                reason = message.splitlines()[0][:200] if message else response.reason_phrase
                raise DownloadError(
                    f"{hub} answered HTTP {response.status_code} for {url} ({reason}); try again later"
                )
            if encoding := _unasked_encoding(response):
                raise DownloadError(
                    f"{hub} sent {file.path} compressed ({encoding[:40]!r}) although attncard asked for "
                    "none (a compression bomb?); nothing of it was written: this server cannot be trusted, "
                    "use another endpoint"
                )
            _store(response, file, target, hub)
            return
    raise DownloadError(f"{hub} redirected {file.path} more than {MAX_REDIRECTS} times; try again later")


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
                        "file was not kept: this server cannot be trusted"
                    )
                digest.update(chunk)
                handle.write(chunk)
        if received < file.size:
            raise DownloadError(
                f"{hub} sent {received} of the {file.size} bytes of {file.path}; try again later"
            )
        if digest.hexdigest() != file.expected:
            raise IntegrityError(
                f"{hub} sent bytes for {file.path} whose id {digest.hexdigest()[:_SHORT_SHA]}… is not the "
                f"{file.expected[:_SHORT_SHA]}… its listing gives; the file was not kept: do not use this "
                "server"
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


def _is_weights(path: str) -> bool:
    return path.endswith(WEIGHTS_SUFFIX)


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
    "DEFAULT_DEADLINE_S",
    "DEFAULT_TIMEOUT_S",
    "Deadline",
    "FetchedRun",
    "HubAnswers",
    "HubOptions",
    "check_options",
    "endpoint_key",
    "fetch_run",
    "hub_client_timeout",
    "hub_endpoint",
    "hub_options",
    "redact",
    "redacted",
]
