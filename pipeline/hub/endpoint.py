"""The Hub's endpoint and the token: where requests may go, and keeping the token out of what is shown.

- [`hub_endpoint`]: the endpoint, checked before any request: https, or plain http to a loopback host only,
  because the token goes along with every request. Data (datasets) and base models (transformers) read
  `HF_ENDPOINT` themselves: their callers check it with `hub_endpoint()` first.
- [`origin`] and [`endpoint_key`]: what must match for the token to be sent, and a folder name per endpoint.
- [`redact`] and [`redacted`]: while a push or a download runs, no log record, warning or error message
  carries the token, even when a server echoes it back in an error body.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import logging
import re
import traceback
import warnings
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import constants

from ..record.errors import AttncardError, InsecureEndpointError

REDACTED = "<token>"


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
            f"the Hub endpoint {text!r} is not an http(s) URL; pass https://HOST[:PORT] (endpoint=, "
            "HF_ENDPOINT)",
            options=("endpoint",),
            endpoint=text,
        )
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise InsecureEndpointError(
            f"the Hub endpoint {parts.scheme}://{host}… holds credentials, a query or a fragment; pass "
            "https://HOST[:PORT][/PATH] and give the token with HF_TOKEN or `hf auth login`",
            endpoint=f"{parts.scheme}://{host}",
        )
    if parts.scheme.lower() == "http" and not _is_loopback(host):
        raise InsecureEndpointError(
            f"the Hub endpoint {text} is plain http: the token goes to the configured https endpoint only "
            "(loopback http allowed for tests); pass an https:// endpoint (endpoint=, HF_ENDPOINT)",
            options=("endpoint",),
            endpoint=text,
        )
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path}".rstrip("/")


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origin(url: str | httpx2.URL) -> tuple[str, str, int | None]:
    """`(scheme, host, port)`, the default port filled in: what must match for the token to be sent.

    Example:
        >>> origin("https://huggingface.co/api/models")
        ('https', 'huggingface.co', 443)
    """
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
    _, host, port = origin(endpoint)
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
    if isinstance(error, AttncardError) and isinstance(clean, AttncardError):
        # What the error is about, and the remedy the command line words, survive the redaction.
        clean.options = error.options
        clean.fields = {
            name: redact(value, token) if isinstance(value, str) else value
            for name, value in error.fields.items()
        }
        for name, value in clean.fields.items():
            setattr(clean, name, value)
    return clean


__all__ = ["REDACTED", "endpoint_key", "hub_endpoint", "origin", "redact", "redacted"]
