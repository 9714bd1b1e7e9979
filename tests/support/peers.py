"""Real HTTP peers on loopback: webhook receivers, a fake Telegram Bot API, a closed port.

And the check a webhook receiver makes of the hex signature it got.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Peer:
    url: str
    requests: list[Request] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    respond: Callable[[Request], Answer] = lambda _r: (200, {}, b"ok")
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])


def status(
    code: int, headers: dict[str, str] | None = None, body: bytes = b""
) -> Callable[[Request], Answer]:
    return lambda _r: (code, headers or {}, body)


def hang(seconds: float, code: int = 200) -> Callable[[Request], Answer]:
    def respond(_r: Request) -> Answer:
        time.sleep(seconds)
        return code, {}, b"late"

    return respond


def held(release: threading.Event, seconds: float = 30) -> Callable[[Request], Answer]:
    """Answers 200 after `seconds`, or as soon as `release` is set."""

    def respond(_r: Request) -> Answer:
        release.wait(seconds)
        return 200, {}, b"ok"

    return respond


@contextmanager
def receiver(
    respond: Callable[[Request], Answer] | None = None, *, tls: ssl.SSLContext | None = None
) -> Iterator[Peer]:
    """A threaded HTTP/1.1 server on 127.0.0.1 recording every request (HTTPS with `tls`)."""
    peer = Peer(url="")
    if respond is not None:
        peer.respond = respond

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *_args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            request = Request(self.command, self.path, dict(self.headers.items()), body)
            with peer.lock:
                peer.requests.append(request)
            code, headers, answer = peer.respond(request)
            with peer.lock:
                peer.answered.append(code)
            try:
                self.send_response(code)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except OSError:
                pass

        do_POST = _serve
        do_GET = _serve
        do_PUT = _serve
        do_PATCH = _serve

    class Server(ThreadingHTTPServer):
        request_queue_size = 512

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    scheme = "http"
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    peer.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A loopback port nothing listens on, for a server to take (or a send to fail at)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()


def telegram_api(retry_after: int | None = None) -> Callable[[Request], Answer]:
    """Telegram's `sendMessage` answers: ok, or a 429 with `parameters.retry_after`."""

    def respond(_r: Request) -> Answer:
        if retry_after is not None:
            body = {
                "ok": False,
                "error_code": 429,
                "description": "Too Many Requests",
                "parameters": {"retry_after": retry_after},
            }
            return 429, {"Content-Type": "application/json"}, json.dumps(body).encode()
        body2 = {"ok": True, "result": {"message_id": 1}}
        return 200, {"Content-Type": "application/json"}, json.dumps(body2).encode()

    return respond


def hex_signature_matches(secret: str, body: bytes, header: str) -> bool:
    """Whether `header` is `sha256=` and the hex HMAC of `body` keyed with the UTF-8 bytes of
    the whole destination secret (a `whsec_` secret included)."""
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(header, f"sha256={expected}")
