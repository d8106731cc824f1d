"""A Hub that lies: `LoopbackHub` (tests/support/hub_server.py) with the answers a hostile server or mirror
can give.

Each hostility is a plain attribute, off by default, set by a test before the client runs:

- `etag`: the ETag (and X-Linked-Etag) every `/resolve` answer carries, e.g. `../../../../x`;
- `extra_tree_paths`: file entries added to every tree listing, e.g. `../x` or `/abs`;
- `served`: bytes `/resolve` serves for a path instead of the file's (the listing still gives the real id);
- `redirect_to`: a base URL (another origin) that `/resolve` redirects to; the request arriving there (it
  carries `?cdn=1`) is served normally;
- `echo`: per route, statuses to answer in turn with the request's `Authorization` header in the body and
  in `X-Error-Message`, as a server that echoes what it was sent;
- `trickle`: per route, answer 200 one byte a second, forever, in the headers or in the body;
- `silent`: routes whose requests are read and never answered, the connection held open until the server
  stops (a server that accepts connections and never answers);
- `listed_sizes`: path -> the size every tree listing gives for that file instead of its own (e.g. 1 TiB);
- `compressed`: per route (or, for `/resolve`, per file path), the answer padded with spaces to this many
  bytes and sent gzip-compressed with `Content-Encoding: gzip`, although the client asked for `identity` (a
  compression bomb: a few hundred KiB on the wire);
- `oversized`: per route, the answer padded with spaces to this many bytes and sent without
  `Content-Length` (its end is the connection's);
- `lfs_upload_to`: a base URL (another origin) that LFS batch answers point upload URLs to;
- `error_body`: per route name, or per repository id (every `/resolve` of a file of it), `(status, body)` to
  answer, the body as the error's text (no `X-Error-Message`): a mirror whose error page says what it likes.

`requests_seen` records the Host and Authorization headers of every request.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import zlib
from typing import Literal
from urllib.parse import unquote, urlsplit

from hub_server import LoopbackHub, _Handler, _match_route, _read_body, _Request, _Response


class HostileHub(LoopbackHub):
    """A `LoopbackHub` whose answers can be made hostile; see the module docstring."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.etag: str | None = None
        self.extra_tree_paths: list[str] = []
        self.served: dict[str, bytes] = {}
        self.redirect_to: str | None = None
        self.echo: dict[str, list[int]] = {}
        self.trickle: dict[str, Literal["headers", "body"]] = {}
        self.silent: set[str] = set()
        self.listed_sizes: dict[str, int] = {}
        self.compressed: dict[str, int] = {}
        self.oversized: dict[str, int] = {}
        self.lfs_upload_to: str | None = None
        self.error_body: dict[str, tuple[int, bytes]] = {}
        self.requests_seen: list[tuple[str, str, str | None]] = []  # (Host, path, Authorization)

    def _dispatch(self, handler: _Handler) -> None:
        path = urlsplit(handler.path).path
        with self._lock:
            self.requests_seen.append(
                (handler.headers.get("Host", ""), path, handler.headers.get("Authorization"))
            )
        route, _ = _match_route(handler.command, [unquote(s) for s in path.split("/")[1:]])
        if route in self.trickle:
            self._trickle(handler, self.trickle[route])
            return
        if route in self.silent:
            with contextlib.suppress(OSError, ValueError):
                _read_body(handler)
            handler.close_connection = True
            self._stopping.wait()  # the client gave up, or the test ended: close without a byte
            return
        super()._dispatch(handler)

    def _send(self, handler: _Handler, method: str, response: _Response) -> bool:
        if "Content-Encoding" in response.headers:
            handler.close_connection = True  # the client refuses the answer unread and closes: so do we
        if response.headers.get("Content-Length") != "omit":
            return super()._send(handler, method, response)
        del response.headers["Content-Length"]
        handler.close_connection = True  # without a length, the body ends with the connection
        try:
            handler.send_response(response.status)
            for name, value in response.headers.items():
                handler.send_header(name, value)
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(response.body)
            return True
        except OSError:  # the client stopped reading: the point of the test
            return False

    def _trickle(self, handler: _Handler, part: str) -> None:
        """Answers 200, then one byte a second (of an endless header, or of a long body) until stopped."""
        with contextlib.suppress(OSError, ValueError):
            _read_body(handler)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        head += b"Content-Length: 1000000\r\n\r\n[" if part == "body" else b"X-Trickle: "
        handler.close_connection = True
        with contextlib.suppress(OSError):  # the client gave up: the point of the test
            handler.wfile.write(head)
            handler.wfile.flush()
            while not self._stopping.wait(1.0):
                handler.wfile.write(b" " if part == "body" else b"a")
                handler.wfile.flush()

    def _handle(self, req: _Request) -> _Response:
        response = self._hostile_answer(req)
        if response.status != 200:
            return response
        if req.route == "lfs_batch" and self.lfs_upload_to:
            own = f"{self.endpoint}/__loopback__/".encode()
            response.body = response.body.replace(own, f"{self.lfs_upload_to}/__loopback__/".encode())
            response.headers.pop("Content-Length", None)
        size = self.compressed.get(req.params.get("path") if req.route == "resolve" else None)
        size = size or self.compressed.get(req.route)
        if size:
            padded = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # the gzip format
            spaces = b" " * (1 << 20)
            body = [padded.compress(response.body)]
            for start in range(len(response.body), size, len(spaces)):
                body.append(padded.compress(spaces[: size - start]))
            response.body = b"".join([*body, padded.flush()])
            response.headers.update({"Content-Encoding": "gzip", "Content-Length": str(len(response.body))})
            response.headers.pop("X-Linked-Size", None)
        if req.route in self.oversized:
            response.body = response.body.ljust(self.oversized[req.route], b" ")
            response.headers["Content-Length"] = "omit"
        return response

    def _hostile_answer(self, req: _Request) -> _Response:
        repo = req.params.get("repo") if req.route == "resolve" else None
        if req.route in self.error_body or repo in self.error_body:
            status, body = self.error_body.get(req.route) or self.error_body[repo]
            return _Response(status, body, {"Content-Type": "text/html"})
        statuses = self.echo.get(req.route)
        if statuses:
            status = statuses.pop(0)
            message = f"you sent Authorization: {req.headers.get('Authorization')}"
            return _Response.json({"error": message}, status=status, headers={"X-Error-Message": message})
        if req.route == "resolve" and self.redirect_to and "cdn" not in req.query:
            # As the Hub redirects to its CDN: the file's headers (commit, ETag, size), and no body.
            response = super()._handle(req)
            if response.status == 200:
                path = f"{req.params['repo']}/resolve/{req.params['rev']}/{req.params['path']}"
                response.headers["Location"] = f"{self.redirect_to}/{path}?cdn=1"
                response.headers.pop("Content-Length")
                response.status, response.body = 302, b""
            return response
        return super()._handle(req)

    def _h_resolve(self, req: _Request) -> _Response:
        response = super()._h_resolve(req)
        if response.status != 200:
            return response
        if self.etag is not None:
            response.headers["ETag"] = f'"{self.etag}"'
            if "X-Linked-Etag" in response.headers:
                response.headers["X-Linked-Etag"] = f'"{self.etag}"'
        if req.params["path"] in self.served:
            body = self.served[req.params["path"]]
            response.headers["Content-Length"] = str(len(body))
            response.headers.pop("X-Linked-Size", None)
            response.body = b"" if req.method == "HEAD" else body
        return response

    def _h_tree(self, req: _Request) -> _Response:
        response = super()._h_tree(req)
        if response.status != 200 or not (self.extra_tree_paths or self.listed_sizes):
            return response
        entries = json.loads(response.body)
        for entry in entries:
            if entry.get("path") in self.listed_sizes:
                entry["size"] = self.listed_sizes[entry["path"]]
        for path in self.extra_tree_paths:
            oid = hashlib.sha1(b"blob 1\0x").hexdigest()  # the blob id of a file holding b"x"
            entries.append({"type": "file", "oid": oid, "size": 1, "path": path})
        response.body = json.dumps(entries).encode()
        response.headers.pop("Content-Length", None)
        return response
