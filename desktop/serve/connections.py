"""Connections that cannot be held hostage: read deadlines, and limits that evict the idle first.

uvicorn alone has no deadline for reading a request's headers, and it answers 503 to
everyone once `limit_concurrency` connections are open, so 300 clients sending one header
byte a second lock every other client out (slowloris). Here each connection must deliver
its headers within `header_timeout_s` and its body within `body_timeout_s` (then it is
closed with a 408), and a client that stops reading its reply for `stalled_read_s` is cut
off. When a client (or the server) is at its connection limit, a new connection evicts the
one that has waited longest without delivering a full request (still sending headers or
body, or idle between requests) instead of being refused. A connection whose request is
being answered is never evicted; only when every connection is busy is the newcomer
refused with 503. On loopback, attacker and user share one address, so eviction (not the
per-address cap) is what keeps the user served.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    total: int = 256
    per_client: int = 64
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    stalled_read_s: float = 60.0  # a client that stops reading its reply this long is cut off
    # A kept-alive connection with no request this long is closed. Longer than the 5 s after which
    # httpx (so the OpenAI SDK) and others drop their idle connections: when both sides wait the same
    # time, a request sent just as the server closes the connection is lost (a ReadError client-side).
    idle_s: float = 30.0

    @classmethod
    def for_line(cls, max_waiting: int) -> ConnectionLimits:
        """Room for every request the model's line can hold (one client may fill it), and more."""
        per_client = max(64, 2 * (max_waiting + 1))
        return cls(total=max(256, 4 * per_client), per_client=per_client)


@dataclass
class ConnectionBook:
    """The open connections of one server, by client address, oldest first."""

    limits: ConnectionLimits
    by_client: defaultdict[str, list[GuardedH11Protocol]] = field(default_factory=lambda: defaultdict(list))
    count: int = 0
    evicted: int = 0
    refused: int = 0
    timed_out: int = 0

    def admit(self, conn: GuardedH11Protocol) -> bool:
        """Room for `conn`, evicting an idle connection if needed; False when every one is busy."""
        peers = self.by_client[conn.client_key]
        if len(peers) >= self.limits.per_client:
            room = self._evict(peers)
        elif self.count >= self.limits.total:
            room = self._evict([c for group in self.by_client.values() for c in group])
        else:
            room = True
        if not room:
            self.refused += 1
            if not peers:
                del self.by_client[conn.client_key]
            return False
        peers.append(conn)
        self.count += 1
        return True

    def _evict(self, conns: list[GuardedH11Protocol]) -> bool:
        idle = [c for c in conns if c.phase != "busy"]
        if not idle:
            return False
        victim = min(idle, key=lambda c: c.since)
        self.evicted += 1
        self.leave(victim)
        victim.close_idle()
        return True

    def leave(self, conn: GuardedH11Protocol) -> None:
        peers = self.by_client.get(conn.client_key)
        if peers is not None and conn in peers:
            peers.remove(conn)
            self.count -= 1
            if not peers:
                del self.by_client[conn.client_key]


def _raw_response(status: int, reason: str, message: str, code: str) -> bytes:
    body = json.dumps(
        {
            "error": {
                "message": message,
                "type": "server_error" if status >= 500 else "invalid_request_error",
                "param": None,
                "code": code,
            }
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n"
    )
    if status == 503:
        head += "Retry-After: 1\r\n"
    return head.encode() + b"\r\n" + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with read deadlines and the book's limits (`book` set per server)."""

    book: ClassVar[ConnectionBook]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # idle (between requests, nothing sent) | headers | body | busy (a full request, not yet answered)
        self.phase = "headers"
        self.since = 0.0
        self.closed = False
        self.client_key = ""
        self._deadline: asyncio.TimerHandle | None = None
        self._stalled: asyncio.TimerHandle | None = None
        self._admitted = False
        self._heard = False  # bytes arrived since the last answer ended

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.client_key = self.client[0] if self.client else ""
        if not self.book.admit(self):
            self._close_with(
                _raw_response(
                    503, "Service Unavailable", "the server has too many connections; retry", "too_many_connections"
                )
            )
            return
        self._admitted = True
        self._enter("headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None
        if self._admitted:
            self.book.leave(self)
            self._admitted = False
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._heard = True
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        self._follow()

    def on_response_complete(self) -> None:
        self._heard = False
        super().on_response_complete()
        self._follow()

    def pause_writing(self) -> None:
        """The client has stopped reading (its window is full): a connection being answered is never
        evicted, so one that would hold its reply for ever is cut off instead."""
        super().pause_writing()
        if self._stalled is None and not self.closed:
            self._stalled = self.loop.call_later(self.book.limits.stalled_read_s, self._stalled_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None

    def _stalled_out(self) -> None:
        self._stalled = None
        self.book.timed_out += 1
        self.transport.abort()  # not close(): that would still wait to hand over the whole buffer

    def _follow(self) -> None:
        if self.closed or not self._admitted:
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            phase = "body"
        elif self.cycle is not None and not self.cycle.response_complete:
            phase = "busy"
        elif state is h11.IDLE or state is h11.DONE:  # between requests: waiting for the next one
            phase = "headers" if self._heard or self.phase == "headers" else "idle"
        else:
            phase = "busy"  # closing
        if phase != self.phase:
            self._enter(phase)

    def _enter(self, phase: str) -> None:
        self.phase = phase
        self.since = self.loop.time()
        self._disarm()
        limits = self.book.limits
        timeout = {"idle": limits.idle_s, "headers": limits.header_timeout_s, "body": limits.body_timeout_s}.get(phase)
        if timeout is not None:
            self._deadline = self.loop.call_later(timeout, self._expire, phase)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, phase: str) -> None:
        self._deadline = None
        if self.closed or self.phase != phase:
            return
        if phase == "idle":  # a kept-alive connection nobody used: no reply owed, nothing counted
            self.book.leave(self)
            self.close_idle()
            return
        self.book.timed_out += 1
        if phase == "headers" and (self.cycle is None or self.cycle.response_complete):
            self._close_with(
                _raw_response(408, "Request Timeout", "the request did not arrive in time", "request_timeout")
            )
        else:  # mid-body: the app is reading it and sees the disconnect
            self.transport.close()

    def close_idle(self) -> None:
        """Evicted to make room, or idle too long (the book has let it go): nothing of this
        connection's is being answered."""
        self.closed = True
        self._admitted = False
        self._disarm()
        self.transport.close()

    def _close_with(self, response: bytes) -> None:
        self.closed = True
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(response)
            self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> tuple[type[GuardedH11Protocol], ConnectionBook]:
    """A protocol class bound to a fresh book (one per server, so two servers never share limits)."""
    shared = ConnectionBook(limits)

    class EmberH11Protocol(GuardedH11Protocol):
        book = shared

    return EmberH11Protocol, shared
