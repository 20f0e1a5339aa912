"""What an MCP server started without network can still reach (adversarial review 2: NW-04, NW-06).

NW-04: a relay on a host Unix socket (the review's proxy, standing in for the system D-Bus
and systemd-resolved) forwarded data out of the "isolated" server. The relay here listens in
a folder under /run (as root) or under $XDG_RUNTIME_DIR, where a desktop's service sockets
live, and forwards what it gets to a TCP listener on loopback: the sandboxed child must not
reach it, while an ordinary child does (so the test can fail).
NW-06: a lookup of `secret-data.localhost` could go to DNS; it is asked about like any name.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.network import sandbox
from engine.network.guard import EgressRefused, Guard, enforced
from engine.network.ledger import Ledger
from engine.network.policy import EgressPolicy, PolicyView
from engine.network.report import network_report, report_lines
from models.library.paths import ember_paths

CLIENT = """
import os, socket, sys
print("dbus:", os.environ.get("DBUS_SYSTEM_BUS_ADDRESS"), "runtime:", os.environ.get("XDG_RUNTIME_DIR"))
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"EXFIL via unix socket")
    s.close()
    print("CONNECTED")
except OSError as exc:
    print("refused:", exc)
"""


def _socket_home() -> Path | None:
    """A folder where a desktop's service sockets would be: /run (root) or $XDG_RUNTIME_DIR."""
    for folder in ("/run", os.environ.get("XDG_RUNTIME_DIR", "")):
        if folder.startswith(("/run/", "/var/run/")) or folder == "/run":
            if os.access(folder, os.W_OK):
                return Path(folder)
    return None


class Relay:
    """A Unix socket that records what it receives (the review forwarded it to a TCP listener)."""

    def __init__(self, folder: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ember-relay-", dir=folder))
        self.path = self.dir / "relay.sock"
        self.received: list[bytes] = []
        self._sock = socket.socket(socket.AF_UNIX)
        self._sock.bind(str(self.path))
        self._sock.listen()
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(100))
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._sock.close()
        self.path.unlink(missing_ok=True)
        self.dir.rmdir()


@pytest.fixture
def relay() -> Iterator[Relay]:
    home = _socket_home()
    if home is None:
        pytest.skip("no writable /run or $XDG_RUNTIME_DIR for a relay socket")
    r = Relay(home)
    try:
        yield r
    finally:
        r.close()


def _run(command: list[str], relay: Relay) -> str:
    env = os.environ | {"DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={relay.path}", "XDG_RUNTIME_DIR": str(relay.dir)}
    done = subprocess.run(
        [*command, sys.executable, "-c", CLIENT, str(relay.path)],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )
    return done.stdout + done.stderr


@pytest.mark.slow
def test_an_isolated_child_cannot_reach_a_host_unix_socket(relay: Relay) -> None:
    assert "CONNECTED" in _run([], relay)  # the relay works for an ordinary child
    deadline = time.monotonic() + 10
    while not relay.received and time.monotonic() < deadline:  # its thread may record it after the child exits
        time.sleep(0.02)
    assert relay.received
    relay.received.clear()
    iso = sandbox.isolation()
    if not iso.available:
        pytest.skip(iso.how)
    out = _run(list(iso.prefix), relay)
    assert "refused:" in out and "CONNECTED" not in out, out
    assert "dbus: None runtime: None" in out
    assert relay.received == []


def test_the_doctor_says_what_an_isolated_server_can_still_reach() -> None:
    report = network_report(ember_paths())
    child = report["enforcement"]["child_processes"]
    lines = report_lines(report)
    if child["enforced"]:
        assert any(line.strip().startswith("still reachable from them:") for line in lines)
        assert child["still_reachable"] in (sandbox.STILL_REACHABLE, sandbox.Isolation(True).reachable)


def test_a_localhost_subdomain_lookup_is_asked_about(tmp_path: Path) -> None:
    guard = Guard(EgressPolicy.fixed(PolicyView(True), ember_paths()), Ledger(None))
    with enforced(guard):
        with pytest.raises(EgressRefused):
            socket.getaddrinfo("secret-data.localhost", 80)
        socket.getaddrinfo("localhost", 80)  # the hosts file answers: no query, no question
        socket.getaddrinfo("127.0.0.1", 80)
    assert [(a.action, a.destination) for a in guard.ledger.entries()] == [("lookup", "secret-data.localhost")]


@pytest.mark.parametrize("name", ["localhost.", "LOCALHOST.", "localhost.localdomain.", "127.0.0.1."])
def test_a_fully_qualified_localhost_lookup_is_asked_about(name: str) -> None:
    """X-08: `localhost.` was taken as answered locally, and glibc sent it to the resolver."""
    guard = Guard(EgressPolicy.fixed(PolicyView(True), ember_paths()), Ledger(None))
    with enforced(guard), pytest.raises(EgressRefused):
        socket.getaddrinfo(name, 80)
    assert [(a.action, a.destination) for a in guard.ledger.entries()] == [("lookup", name.lower())]


@pytest.mark.slow
def test_without_a_mount_namespace_the_socket_addresses_are_still_unset(
    relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    works = sandbox._works  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(
        sandbox, "_works", lambda command: "-cnm" not in command and "-rnm" not in command and works(command)
    )
    sandbox.isolation.cache_clear()
    try:
        iso = sandbox.isolation()
        if not iso.available:
            pytest.skip(iso.how)
        assert not iso.hides_sockets
        assert "every Unix socket" in iso.reachable
        assert "dbus: None runtime: None" in _run(list(iso.prefix), relay)
    finally:
        sandbox.isolation.cache_clear()
