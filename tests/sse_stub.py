"""A tiny OpenAI-compatible stub server on 127.0.0.1 for transport fault tests.

Each request takes the next scripted `Reply`: a status, raw body parts (each sent as one
HTTP chunk, so SSE events can be split anywhere), then an ending — a clean end, a TCP
reset, a stall, or a trickle of keep-alive comments until the client hangs up. Every
wait is bounded and `stop()` releases them all, so a test can never hang on the stub.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, cast

MAX_WAIT_S = 5.0  # upper bound on every stub-side wait
DONE = b"data: [DONE]\n\n"
PING = b": ping\n\n"

Ending = Literal["end", "reset", "stall", "trickle"]


def sse(obj: Any) -> bytes:
    """One SSE event carrying `obj` as JSON."""
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    reasoning_key: str = "reasoning_content",
    finish: str | None = None,
) -> bytes:
    """A `chat.completion.chunk` event with the given delta."""
    delta: dict[str, str] = {}
    if reasoning is not None:
        delta[reasoning_key] = reasoning
    if content is not None:
        delta["content"] = content
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return sse({"id": "c1", "object": "chat.completion.chunk", "model": "stub", "choices": [choice]})


def json_body(obj: Any) -> list[bytes]:
    return [json.dumps(obj).encode()]


@dataclass
class Reply:
    parts: list[bytes] = field(default_factory=list[bytes])
    status: int = 200
    content_type: str = "text/event-stream"
    then: Ending = "end"
    gate: bool = False  # wait for `stub.proceed` before the ending


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: StubServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # resets and hang-ups are the point of this server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        stub = cast(_Server, self.server).stub
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        stub.record(Recorded(self.command, self.path, dict(self.headers.items()), json.loads(raw) if raw else None))
        reply = stub.next_reply()
        self.close_connection = True
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for part in reply.parts:
                self._chunk(part)
            if reply.gate:
                stub.proceed.wait(MAX_WAIT_S)
            self._finish(reply.then, stub)
        except OSError:
            stub.client_gone.set()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _finish(self, then: Ending, stub: StubServer) -> None:
        if then == "end":
            self.wfile.write(b"0\r\n\r\n")
        elif then == "reset":
            # SO_LINGER 0 turns close() into a TCP RST: the client sees "connection reset".
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        elif then == "stall":
            stub.release.wait(MAX_WAIT_S)
        else:
            self._trickle(stub)

    def _trickle(self, stub: StubServer) -> None:
        """Send keep-alive comments until the client hangs up (a write then fails)."""
        for _ in range(int(MAX_WAIT_S / 0.01)):
            if stub.release.wait(0.01):
                return
            self._chunk(PING)


class StubServer:
    """Serves scripted replies in order; use as a context manager."""

    def __init__(self, replies: Iterable[Reply]) -> None:
        self._replies = deque(replies)
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self.proceed = threading.Event()
        self.release = threading.Event()
        self.client_gone = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.stub = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    def next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return Reply(json_body({"error": {"message": "stub has no reply left"}}), status=500)

    def start(self) -> StubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.proceed.set()
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(MAX_WAIT_S)

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port() -> int:
    """A port nothing listens on (bound, then released), for connection-refused tests."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
