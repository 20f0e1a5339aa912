"""The in-process enforcement: a Python audit hook that refuses a connection before it is made.

CPython raises an audit event before every `socket.connect`, `sendto`/`sendmsg` to an
address, and every name lookup (`getaddrinfo`, `gethostbyname`, ...). The hook, installed
once per process (audit hooks cannot be removed), asks the active `Guard`: an Internet
destination the policy does not permit is refused by raising `EgressRefused` (a
PermissionError, so code that handles network failures handles it) and recorded in the
ledger with the feature that asked (`feature("remote server")` around a request names it).
`localhost` and IP literals are looked up without asking (no query leaves the machine);
connecting to them is still checked. Other `*.localhost` names (and `localhost.`) are asked
about like any name: glibc may send them to DNS. Every lookup that may leave the machine is
in the ledger, allowed or not. Unix sockets and listening sockets are not egress.

Backends also call `require(host, port, feature)` before they connect, so a refusal ends a
request with the one-line message at once instead of as a transport failure to retry.

What this covers: every connection Python code in Ember's process makes. Ember's native
libraries make none (llama.cpp; Qt's network module is not used or bundled); programs Ember
starts are covered by `engine.network.sandbox`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import socket
import sys
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, cast

from engine.errors import BackendError
from engine.network.destinations import MCP_PREFIX, Destination, answered_locally, is_ip_literal, is_loopback_name
from engine.network.ledger import LEDGER_FILE, Attempt, Ledger
from engine.network.policy import Allowed, EgressPolicy, PolicyView
from engine.network.sandbox import isolation, without_network
from models.library.paths import EmberPaths

UNNAMED_FEATURE = "unnamed code"
_NAME_TTL_S = 60.0
_INET = (socket.AF_INET, socket.AF_INET6)
_LOOKUPS = frozenset(
    {
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
    }
)
_SENDS = frozenset({"socket.sendto", "socket.sendmsg"})
_EVENTS = frozenset({"socket.connect", *_LOOKUPS, *_SENDS})

_feature: contextvars.ContextVar[str] = contextvars.ContextVar("ember_network_feature", default=UNNAMED_FEATURE)
_granted: contextvars.ContextVar[tuple[Allowed, ...]] = contextvars.ContextVar("ember_network_granted", default=())
_busy = threading.local()  # set while the guard resolves an allowed name itself
_active: Guard | None = None
_hook_installed = False
_install_lock = threading.Lock()


class EgressRefused(BackendError, PermissionError):
    """A connection zero-egress mode refused; the message is the one line to show."""

    def __init__(self, destination: str, feature: str) -> None:
        super().__init__(refusal_line(destination, feature))
        self.destination = destination
        self.feature = feature


def refusal_line(destination: str, feature: str) -> str:
    return (
        f"zero-egress mode refused a connection to {destination} ({feature}); to allow it, save it as a "
        f"server in the window or run: ember network allow {destination}"
    )


@contextlib.contextmanager
def feature(name: str) -> Generator[None]:
    """Name the feature behind the connections made inside the block (for the ledger)."""
    token = _feature.set(name)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # a generator closed from another context
            _feature.reset(token)


@contextlib.contextmanager
def granted(destination: Destination, why: str) -> Generator[None]:
    """Permit `destination` to the code inside the block, in this context (thread) only.

    For a connection the user's permission implies without naming it: a model download from
    an allowed Hub is redirected to the Hub's file servers (a CDN host that changes), and only
    that download, while it runs, may follow it there. The ledger records each connection.
    """
    token = _granted.set((*_granted.get(), Allowed(destination, why)))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            _granted.reset(token)


class Guard:
    """Checks attempts against a policy and records them in a ledger."""

    def __init__(self, policy: EgressPolicy, ledger: Ledger) -> None:
        self.policy = policy
        self.ledger = ledger
        self._names: dict[tuple[str, int | None], tuple[float, frozenset[str]]] = {}

    def view(self) -> PolicyView:
        view, extra = self.policy.view(), _granted.get()
        return dataclasses.replace(view, allowed=view.allowed + extra) if extra and view.zero_egress else view

    def require(self, host: str, port: int | None, feature_name: str | None = None, action: str = "connect") -> None:
        """Raise EgressRefused (recorded) unless the policy permits `host:port`; nothing is recorded if it does."""
        if self.view().permits(host, port):
            return
        self._refuse(str(Destination(host.lower(), port)), action, feature_name)

    # -- the audit events -----------------------------------------------------------------

    def on_event(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.connect":
            self._on_send(args[0], args[1], "connect")
        elif event in _SENDS:
            if len(args) > 1 and args[1] is not None:
                self._on_send(args[0], args[1], "send")
        else:
            self._on_lookup(args[0])

    def _on_lookup(self, host: Any) -> None:
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        if not isinstance(host, str) or not host or answered_locally(host):
            return
        view = self.view()
        # `localhost.` goes to DNS (the hosts file has no absolute names): never as if it were `localhost`.
        dotted_loopback = view.zero_egress and host.endswith(".") and is_loopback_name(host)
        if dotted_loopback or not view.names_allowed(host):
            self._refuse(host.lower(), "lookup", None)
        if view.zero_egress:  # a query leaves the machine: in the ledger, like a connection
            self.ledger.record(Attempt(time.time(), host.lower(), "lookup", True, _feature.get()))

    def _on_send(self, sock: Any, address: Any, action: str) -> None:
        if getattr(sock, "family", None) not in _INET or not isinstance(address, tuple):
            return  # Unix sockets and the like never leave the machine
        parts = cast(tuple[object, ...], address)
        if len(parts) < 2:
            return
        host, port = str(parts[0]), parts[1] if isinstance(parts[1], int) else None
        dest = str(Destination(host.lower(), port))
        view = self.view()
        if view.permits(host, port) or self._resolves_to_allowed(view, host, port):
            self.ledger.record(Attempt(time.time(), dest, action, True, _feature.get()))
            return
        if action == "connect" and is_loopback_name(host) and _from_socketpair():
            return
        self._refuse(dest, action, None)

    def _resolves_to_allowed(self, view: PolicyView, ip: str, port: int | None) -> bool:
        """Whether `ip` is an address of an allowed destination given by name (the usual case)."""
        for allowed in view.allowed:
            d = allowed.destination
            if (d.port is None or d.port == port) and not is_ip_literal(d.host) and ip in self._addresses(d.host, port):
                return True
        return False

    def _addresses(self, name: str, port: int | None) -> frozenset[str]:
        key, now = (name, port), time.monotonic()
        cached = self._names.get(key)
        if cached is not None and now - cached[0] < _NAME_TTL_S:
            return cached[1]
        _busy.on = True
        found: frozenset[str]
        try:
            found = frozenset(str(info[4][0]) for info in socket.getaddrinfo(name, port))
        except OSError:
            found = frozenset[str]()
        finally:
            _busy.on = False
        self._names[key] = (now, found)
        return found

    def _refuse(self, dest: str, action: str, feature_name: str | None) -> None:
        asked = feature_name or _feature.get()
        self.ledger.record(Attempt(time.time(), dest, action, False, asked))
        raise EgressRefused(dest, asked)


def _from_socketpair() -> bool:
    # Where the platform has no socketpair() (Windows), Python builds one from a loopback
    # listener and a connect to it: a connection inside this process, not egress.
    frame = inspect.currentframe()
    for _ in range(7):  # the guard's own frames, then the caller of connect()
        if frame is None:
            return False
        if frame.f_code.co_name == "socketpair" and frame.f_globals.get("__name__") == "socket":
            return True
        frame = frame.f_back
    return False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event not in _EVENTS:
        return
    guard = _active
    if guard is None or getattr(_busy, "on", False):
        return
    guard.on_event(event, args)


def install_hook() -> None:
    global _hook_installed
    with _install_lock:
        if not _hook_installed:
            sys.addaudithook(_hook)
            _hook_installed = True


def active() -> Guard | None:
    return _active


@contextlib.contextmanager
def enforced(guard: Guard) -> Generator[Guard]:
    """Make `guard` the process's guard inside the block (the previous one comes back after)."""
    global _active
    install_hook()
    previous, _active = _active, guard
    try:
        yield guard
    finally:
        _active = previous


def guard_for(paths: EmberPaths) -> Guard:
    """The guard of an Ember process: the policy from `paths`' config, the ledger in its data folder."""
    return Guard(EgressPolicy(paths), Ledger(paths.data_dir / LEDGER_FILE))


def note(destination: str, action: str = "connect") -> None:
    """Record an allowed attempt the audit hook cannot see whole (a connection through a proxy names the
    proxy; this names what it reached through it)."""
    guard = _active
    if guard is not None:
        guard.ledger.record(Attempt(time.time(), destination, action, True, _feature.get()))


def require(host: str, port: int | None, feature_name: str) -> None:
    """A backend's check before it connects: EgressRefused when the active guard refuses."""
    guard = _active
    if guard is not None:
        guard.require(host, port, feature_name)


@dataclass(frozen=True, slots=True)
class ChildLaunch:
    """How to start a program: wrapped to run without network (`isolated`), or as is with a `note`."""

    command: str
    args: tuple[str, ...]
    isolated: bool = False
    note: str = ""  # set when zero-egress is on but cannot be enforced for the program


def child_launch(what: str, allow_key: str, command: str, args: tuple[str, ...]) -> ChildLaunch:
    """Start `command` without network under zero-egress, unless `allow_key` (e.g. `mcp:files`) is allowed."""
    guard = _active
    if guard is None:
        return ChildLaunch(command, args)
    view = guard.view()
    if not view.zero_egress or allow_key.removeprefix(MCP_PREFIX) in view.mcp_network:
        return ChildLaunch(command, args)
    wrapped = without_network(command, args)
    if wrapped is None:
        why = isolation().how
        return ChildLaunch(command, args, note=f"zero-egress mode is not enforced for {what}: {why}")
    return ChildLaunch(wrapped[0], wrapped[1], isolated=True)
