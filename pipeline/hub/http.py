"""HTTP to the Hub: one backoff policy, timeouts, an overall deadline, and caps on what an answer may be.

- [`BackoffPolicy`] and [`HUB_BACKOFF`]: the one schedule of retries attncard's Hub calls follow, that of
  huggingface_hub's own `http_backoff` (which retries downloads and listings itself): the statuses retried,
  how many retries, the waits between them, and the wait a server asks for (`Retry-After`, a rate-limit
  reset). A push retries the calls huggingface_hub does not on the same schedule.
- [`Deadline`] and [`hub_client_timeout`]: every request has a per-operation timeout, and the whole
  operation an overall deadline that also holds against a server trickling one byte a second (the
  timeouts of one read never fire on a trickle, so the deadline is checked on every socket read and write).
  A server that never answered gets a short timeout and no retries; an API answer is read only
  uncompressed and up to `MAX_ANSWER_BYTES`, before it is parsed.
"""

from __future__ import annotations

import contextlib
import email.utils
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpcore2
import httpx2
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import parse_ratelimit_headers

from ..record.errors import HubAnswerError, HubDeadlineError, HubNoAnswerError, first_line
from .endpoint import origin

DEFAULT_TIMEOUT_S = 60.0  # each network operation: connecting, one read, one write
# Until a server has answered once: huggingface_hub's own default, and a server that accepts a connection
# but never answers is not asked again (no retries), so it costs this long, not five times DEFAULT_TIMEOUT_S.
FIRST_ANSWER_TIMEOUT_S = 10.0
DEFAULT_DEADLINE_S = 30 * 60.0  # a whole download or push
MAX_ANSWER_BYTES = 16 << 20  # one API answer (model_info, a tree page, an LFS batch), before it is parsed
_WRITE_CHUNK = 1 << 16  # writes are split so that the deadline is checked between chunks


# --- the backoff policy -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackoffPolicy:
    """When to ask the Hub again after a failure, and how long to wait first.

    Attributes:
        retries: retries after the first attempt.
        base_wait_s: the wait before the first retry; each next wait doubles, up to `max_wait_s`.
        max_wait_s: the longest wait of the doubling schedule.
        statuses: the HTTP statuses that are retried; any other status is an answer.
        asked_margin_s: added to a wait the server asks for (a rate-limit reset, `Retry-After`), against
            rounding, as huggingface_hub's `http_backoff` does.
        asked_max_s: the longest wait a server may ask of a push; huggingface_hub itself sets none.

    Example:
        >>> [HUB_BACKOFF.wait_s(attempt) for attempt in range(HUB_BACKOFF.retries)]
        [1.0, 2.0, 4.0, 8.0, 8.0]
        >>> HUB_BACKOFF.wait_s(0, httpx2.Response(503, headers={"Retry-After": "3"}))
        4.0
    """

    retries: int = 5
    base_wait_s: float = 1.0
    max_wait_s: float = 8.0
    statuses: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504})
    asked_margin_s: float = 1.0
    asked_max_s: float = 300.0

    def retried(self, status: int | None) -> bool:
        """Whether an answer with this status is retried (None: no answer came, which is retried too)."""
        return status is None or status in self.statuses

    def asked_wait_s(self, response: httpx2.Response, *, http_date: bool = False) -> float | None:
        """The wait a retried answer asks for, in seconds; None when it asks for none.

        A 429 whose rate-limit headers say no request remains asks for the time until the window resets;
        otherwise `Retry-After` in seconds. huggingface_hub reads no HTTP date there; with `http_date`, a
        date is read too (a push's own retries honour it).
        """
        if response.status_code not in self.statuses:
            return None
        limit = parse_ratelimit_headers(response.headers) if response.status_code == 429 else None
        if limit is not None and limit.remaining == 0:
            return float(limit.reset_in_seconds)
        value = response.headers.get("Retry-After", "").strip()
        if value.isdigit():
            return float(value)
        if not http_date or not value:
            return None
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return max(0.0, (moment - datetime.now(UTC)).total_seconds())

    def wait_s(self, attempt: int, response: httpx2.Response | None = None) -> float:
        """Seconds to wait before retry `attempt + 1`: what the answer asks for plus `asked_margin_s` (at
        most `asked_max_s`), else the doubling schedule."""
        asked = self.asked_wait_s(response, http_date=True) if response is not None else None
        if asked is not None:
            return min(asked + self.asked_margin_s, self.asked_max_s)
        return min(self.max_wait_s, self.base_wait_s * 2**attempt)


# huggingface_hub's `http_backoff` defaults (tests/hub/test_hub_server.py checks they still are).
HUB_BACKOFF = BackoffPolicy()


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


def bind_deadline(client: httpx2.Client, deadline: Deadline) -> None:
    """Makes every connection `client` opens end by `deadline`.

    httpx2 gives no way to hand a network backend to a transport it built, so the backend of each
    transport's connection pool (direct, and through each proxy) is wrapped in place. A transport without
    one (a mock) is left as it is: its requests still check the deadline when they start.
    """
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = _DeadlineBackend(pool._network_backend, deadline)


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
        >>> from huggingface_hub import HfApi
        >>> with hub_client_timeout(30, Deadline(600)):
        ...     len(HfApi().model_info("loopback-user/tiny-gpt2-none-sst2").sha)
        40
    """
    # huggingface_hub has a setter for the factory but no getter: the one in place is read from its module.
    previous: Callable[[], httpx2.Client] = getattr(
        hf_http, "_GLOBAL_CLIENT_FACTORY", hf_http.default_client_factory
    )
    token_origin = origin(endpoint) if endpoint is not None else None
    answers = HubAnswers(retry_unanswered=retry_unanswered)

    def on_request(request: httpx2.Request) -> None:
        if deadline is not None:
            deadline.check()
        if token_origin is not None and origin(request.url) != token_origin:
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
        wait = HUB_BACKOFF.asked_wait_s(response)
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
            bind_deadline(client, deadline)
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

    Like [`bind_deadline`], it replaces the client's transports in place: httpx2 has no hook on failures.
    """

    def __init__(self, transport: httpx2.BaseTransport, answers: HubAnswers):
        self._transport, self._answers = transport, answers

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = self._transport.handle_request(request)
        except httpx2.TransportError as error:
            where = f"{request.url.scheme}://{request.url.netloc.decode()}"
            if self._answers.first_failure is None:
                self._answers.first_failure = f"{transport_failure(error)} at {where}"
            if self._answers.answered and self._answers.retry_unanswered:
                raise
            waited = (request.extensions.get("timeout") or {}).get("read")
            waited = f" within {waited:g} s" if isinstance(error, httpx2.TimeoutException) and waited else ""
            if self._answers.answered:
                raise HubNoAnswerError(
                    f"{where} did not answer {request.method} {request.url.path} ({type(error).__name__}"
                    f"{waited}), and it is not asked again: try again later, or check the endpoint "
                    "(endpoint=, HF_ENDPOINT)",
                    options=("endpoint",),
                    endpoint=where,
                ) from error
            raise HubNoAnswerError(
                f"{where} did not answer ({type(error).__name__}{waited}), and a server that never answered "
                "is not asked again: check the endpoint (endpoint=, HF_ENDPOINT) and the network, then "
                "try again",
                options=("endpoint",),
                endpoint=where,
            ) from error
        self._answers.answered = True
        return response

    def close(self) -> None:
        self._transport.close()


# The failures of the network a push retries on `HUB_BACKOFF`'s schedule, as it retries a retried status.
TRANSIENT_ERRORS = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)


def http_status(error: HfHubHTTPError) -> int | None:
    """The status the Hub answered with, or None when the error carries no answer."""
    return error.response.status_code if error.response is not None else None


def http_reason(error: HfHubHTTPError) -> str:
    """`HTTP 403: <the first line the server said>`, for one-line messages."""
    message = (error.server_message or "").strip().splitlines()
    return f"HTTP {http_status(error)}" + (f": {message[0]}" if message else "")


def transport_failure(error: httpx2.TransportError) -> str:
    """`ConnectError: [Errno 111] Connection refused`, or the class name alone when the message is empty."""
    detail = first_line(error)
    return type(error).__name__ + (f": {detail}" if detail != type(error).__name__ else "")


def _answer_name(request: httpx2.Request) -> str:
    """`METHOD scheme://host/path` of a request, for messages (no query: it may carry a ticket)."""
    return f"{request.method} {request.url.scheme}://{request.url.netloc.decode()}{request.url.path}"


def unasked_encoding(response: httpx2.Response) -> str:
    """The answer's `Content-Encoding` when it is not the `identity` attncard asks for; "" when it is."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    return "" if encoding in ("", "identity") else encoding


def _check_answer(response: httpx2.Response, cap: int) -> None:
    """Refuses an answer compressed although `identity` was asked for, or announcing more than `cap` bytes."""
    if encoding := unasked_encoding(response):
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


__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_TIMEOUT_S",
    "FIRST_ANSWER_TIMEOUT_S",
    "HUB_BACKOFF",
    "MAX_ANSWER_BYTES",
    "TRANSIENT_ERRORS",
    "BackoffPolicy",
    "Deadline",
    "HubAnswers",
    "bind_deadline",
    "http_reason",
    "http_status",
    "hub_client_timeout",
    "transport_failure",
    "unasked_encoding",
]
