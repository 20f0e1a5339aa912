"""`ember serve` against slow and greedy clients (SV-21, SV-22): read deadlines and connection limits.

All on 127.0.0.1, so attacker and user share one address: eviction of the connection that
has waited longest without a full request, not a per-address cap, is what keeps the user in.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from serve_helpers import EchoBackend, Served, serve

from desktop.serve.connections import ConnectionLimits

SLOW_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "still here"}], "max_tokens": 4})


def _connect(s: Served) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", s.server.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    return sock


def _normal(s: Served, timeout: float = 20) -> httpx.Response:
    return httpx.post(
        f"{s.url}/chat/completions", content=BODY, timeout=timeout, headers={"content-type": "application/json"}
    )


def _closed_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server sent before closing `sock` (b"reset" if it reset it); fails if still open after `seconds`."""
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except TimeoutError:
        pytest.fail(f"the connection was still open after {seconds} s")
    except ConnectionResetError:  # closed with our bytes unread: the kernel resets instead of closing
        return received or b"reset"
    return received


@pytest.fixture
def echo() -> Iterator[tuple[Served, EchoBackend]]:
    backend = EchoBackend()
    s = serve(backend)  # the default limits
    yield s, backend
    s.close()


def test_300_slowloris_clients_do_not_lock_out_a_normal_request(echo: tuple[Served, EchoBackend]) -> None:
    s, _ = echo
    slow: list[socket.socket] = []
    try:
        for _ in range(300):  # each sends part of its headers and then nothing (a byte a minute, say)
            sock = _connect(s)
            sock.sendall(SLOW_HEAD + b"a" * 100)
            slow.append(sock)
        started = time.monotonic()
        reply = _normal(s)
        assert reply.status_code == 200, reply.text[:200]
        assert reply.json()["choices"][0]["message"]["content"] == "echo: still here"
        assert time.monotonic() - started < 15  # generous: a hang, not a speed target
        assert _normal(s).status_code == 200  # and the next one
    finally:
        for sock in slow:
            sock.close()


def test_headers_trickled_a_byte_at_a_time_are_cut_off_with_a_408() -> None:
    s = serve(EchoBackend(), limits=ConnectionLimits(header_timeout_s=0.6, body_timeout_s=0.6))
    try:
        sock = _connect(s)
        stop = threading.Event()

        def trickle() -> None:  # bytes keep arriving: uvicorn's keep-alive timer would be reset by each
            for byte in SLOW_HEAD + b"a" * 1000:
                if stop.wait(0.05):
                    return
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    return

        sender = threading.Thread(target=trickle, daemon=True)
        started = time.monotonic()
        sender.start()
        received = _closed_within(sock, 10)
        stop.set()
        assert received.startswith(b"HTTP/1.1 408") or received == b"reset"  # a byte may land just as it closes
        assert time.monotonic() - started < 5
        assert _normal(s).status_code == 200
        sock.close()
    finally:
        s.close()


def _keep_alive_request(sock: socket.socket) -> bytes:
    """One request on `sock`, kept alive; the reply's bytes (read until its body is complete)."""
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(BODY)}\r\n\r\n{BODY}".encode()
    )
    received = b""
    while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    return received


def test_a_kept_alive_connection_outlives_the_header_deadline_and_closes_quietly_when_idle() -> None:
    # Clients keep idle connections 5 s (httpx, the OpenAI SDK): a server that closes them at
    # the same moment loses a request now and then. Idle is its own, longer deadline, and no 408.
    s = serve(EchoBackend(), limits=ConnectionLimits(header_timeout_s=0.3, idle_s=1.5))
    try:
        sock = _connect(s)
        assert _keep_alive_request(sock).startswith(b"HTTP/1.1 200")
        time.sleep(0.8)  # past the header deadline: still open, and the next request is answered
        assert _keep_alive_request(sock).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert _closed_within(sock, 10) == b""  # closed, with nothing sent
        assert 0.5 < time.monotonic() - started < 5
        sock.close()
    finally:
        s.close()


def test_a_body_that_stops_arriving_is_cut_off_and_the_server_moves_on() -> None:
    backend = EchoBackend()
    s = serve(backend, limits=ConnectionLimits(header_timeout_s=5, body_timeout_s=0.6))
    try:
        sock = _connect(s)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"model": '
        )
        started = time.monotonic()
        _closed_within(sock, 10)
        assert time.monotonic() - started < 5
        sock.close()
        assert _normal(s).status_code == 200 and backend.pieces > 0
    finally:
        s.close()


def test_requests_being_answered_are_never_evicted_and_a_full_house_is_a_503() -> None:
    gate = threading.Event()
    backend = EchoBackend(gate=gate)
    s = serve(backend, max_waiting=4, limits=ConnectionLimits(total=8, per_client=3))
    replies: list[httpx.Response] = []
    try:

        def ask() -> None:
            replies.append(_normal(s, timeout=30))

        askers = [threading.Thread(target=ask) for _ in range(3)]
        for asker in askers:
            asker.start()
        deadline = time.monotonic() + 10
        while s.state.line.waiting < 2 and time.monotonic() < deadline:  # one holds the model, two wait
            time.sleep(0.02)
        assert s.state.line.waiting == 2
        newcomer = _connect(s)
        answer = _closed_within(newcomer, 10)
        newcomer.close()
        assert answer.startswith(b"HTTP/1.1 503") and b"too_many_connections" in answer
        gate.set()
        for asker in askers:
            asker.join(30)
        assert [r.status_code for r in replies] == [200, 200, 200]
    finally:
        gate.set()
        s.close()


def test_a_slow_client_is_evicted_for_a_newcomer_from_the_same_address() -> None:
    s = serve(EchoBackend(), limits=ConnectionLimits(total=8, per_client=2))
    try:
        first, second = _connect(s), _connect(s)
        for sock in (first, second):
            sock.sendall(SLOW_HEAD)
        time.sleep(0.1)
        assert _normal(s).status_code == 200  # evicts `first`, the one that waited longest
        assert _closed_within(first, 5) in (b"", b"reset")
        second.close()
        first.close()
    finally:
        s.close()


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_client_that_stops_reading_its_reply_is_cut_off() -> None:
    backend = EchoBackend(repeat=60)  # one 100 KB word, 60 times: a 6 MB reply
    s = serve(backend, limits=ConnectionLimits(stalled_read_s=0.5))
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window fills at once
        sock.connect(("127.0.0.1", s.server.port))
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "a" * 100_000}]}).encode()
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        deadline = time.monotonic() + 30
        while (backend.pieces < 60 or s.state.jobs) and time.monotonic() < deadline:
            time.sleep(0.05)  # the reply is made; not reading, the server's buffer fills and it waits on us
        # A kept sleep: the server's stalled_read_s (0.5 s) must run out before we read again, and
        # nothing here can see it (its reset does not get through our full window; measured).
        time.sleep(2)
        sock.settimeout(10)
        received = 0
        try:
            while chunk := sock.recv(1 << 16):
                received += len(chunk)
        except ConnectionResetError:
            pass
        sock.close()
        assert received < 6_000_000  # cut off, not delivered whole
        assert _normal(s).status_code == 200
    finally:
        s.close()
