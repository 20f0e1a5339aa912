"""Running the app with uvicorn on a socket Ember binds itself.

Binding here (not in uvicorn) turns "address in use" into one line instead of uvicorn's
`sys.exit`, lets port 0 pick a free port (tests), and refuses a non-loopback address
without an API key before anything listens. `ServerThread` runs the server on its own
thread and loop beside the window, sharing the window's `Engine` (the engine hands events
to whichever loop asked).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from desktop.serve.app import ServeState, build_app
from desktop.serve.connections import ConnectionLimits, guarded_protocol
from desktop.serve.ollama_api import ollama_routes
from desktop.serve.origins import HostPolicy
from engine.api.errors import ConfigError

log = logging.getLogger("desktop.serve")

_SHUTDOWN_S = 10  # longest wait for replies in progress when the server stops


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, api_key: str | None) -> None:
    """Anything but loopback is reachable from other machines: only with an API key."""
    if not is_loopback(host) and not api_key:
        raise ConfigError(
            f"serving on {host} makes the model reachable from other machines: "
            "give an API key with --api-key-env VAR (or serve on 127.0.0.1)"
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; ConfigError (one line) when that is not possible."""
    return bind_near(host, port, tries=1)


def bind_near(host: str, port: int, *, tries: int) -> socket.socket:
    """A listening socket on `port`, or on the next free one of `tries` ports (the window: 8080 busy → 8081).

    ConfigError (one line) when none is free or the address cannot be used at all.
    """
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot serve on {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    last = min(port + max(tries, 1) - 1, 65535) if port else port
    for candidate in range(port, last + 1):
        try:
            return _listen(family, kind, proto, (address[0], candidate, *address[2:]))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise ConfigError(f"cannot serve on {host}:{candidate}: {exc.strerror}") from None
    ports = f"{port}" if last == port else f"{port} to {last}"
    if last == port:
        raise ConfigError(f"cannot serve on {host}:{port}: the port is in use (choose another with --port)")
    raise ConfigError(f"cannot serve on {host}: ports {ports} are all in use")


def _listen(family: int, kind: int, proto: int, address: tuple[Any, ...]) -> socket.socket:
    # The protocol must be IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY on accepted sockets only
    # then, and without it every response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, kind, proto or socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handlers: the caller decides how it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def make_server(
    state: ServeState, hosts: HostPolicy, limits: ConnectionLimits, grace_s: int = _SHUTDOWN_S
) -> uvicorn.Server:
    """uvicorn on Ember's guarded protocol: the connection limits replace uvicorn's `limit_concurrency`."""
    protocol, _ = guarded_protocol(limits)
    config = uvicorn.Config(
        build_app(state, hosts, ollama_routes),
        http=protocol,
        timeout_keep_alive=int(limits.idle_s) + 1,  # the protocol's own idle deadline comes first
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=grace_s,
        server_header=False,
    )
    return _Server(config)


async def serve(
    state: ServeState,
    sock: socket.socket,
    *,
    stop: asyncio.Event | None = None,
    limits: ConnectionLimits | None = None,
    host: str = "",
    grace_s: int = _SHUTDOWN_S,
) -> None:
    """Serve on `sock` until `stop` is set (or the task is cancelled); then end every reply.

    `host` is the address as the user gave it (a name the `Host` header may carry besides the
    bound address); `grace_s` is how long replies in progress may take to end once stopping.
    """
    hosts = HostPolicy.for_bind(host, str(sock.getsockname()[0]))
    server = make_server(state, hosts, limits or ConnectionLimits.for_line(state.line.max_waiting), grace_s)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        if stop is None:
            await task
        else:
            waiter = asyncio.ensure_future(stop.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
    finally:
        server.should_exit = True
        for job in list(state.jobs):
            job.abandon()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sock.close()
        if state.history is not None:
            state.history.close()


class ServerThread:
    """The server on its own thread and event loop (the window's); `stop()` ends it."""

    def __init__(self, state: ServeState, sock: socket.socket, limits: ConnectionLimits | None = None) -> None:
        self.state = state
        self._limits = limits
        self.address = address(sock)
        self.port: int = sock.getsockname()[1]
        self._sock = sock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ember-serve", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(timeout=10)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await serve(self.state, self._sock, stop=self._stop, limits=self._limits)

        try:
            asyncio.run(main())
        except Exception:
            log.exception("the server stopped with an error")
        finally:
            self._ready.set()

    def stop(self, timeout: float = _SHUTDOWN_S + 2) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended on its own meanwhile
                loop.call_soon_threadsafe(stop.set)
        self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()
