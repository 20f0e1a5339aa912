"""MCP servers over stdio, through the official `mcp` SDK, behind a plain blocking API.

    server = McpServer(config)           # nothing starts yet
    tools = server.tools()               # starts the server (once) and lists its tools
    text = server.call("search", {...})  # one call, with a timeout

Each running server has its own thread with an asyncio loop that owns the SDK session
(the SDK's context managers must open and close in one task). A server is started only
when its tools are first needed. A call that fails, times out, or finds the server dead
raises `ToolError` with one line; the server is then shut down, so a later call starts it
afresh and the chat goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

from engine.network import guard as network_guard
from engine.tools.mcp_config import ServerConfig
from engine.tools.registry import Tool, ToolError

if TYPE_CHECKING:  # the SDK (pydantic, its type modules: seconds to import) loads when a server starts
    import anyio
    from mcp import ClientSession

log = logging.getLogger("engine.mcp")

START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 8.0  # the SDK's own shutdown: 2 s for stdin EOF, 2 s after SIGTERM, then SIGKILL
_T = TypeVar("_T")


class McpServer:
    """One configured stdio server: started on first use, restarted after a failure."""

    def __init__(
        self, config: ServerConfig, *, start_timeout_s: float = START_TIMEOUT_S, call_timeout_s: float = CALL_TIMEOUT_S
    ) -> None:
        self.config = config
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self._lock = threading.Lock()
        self._link: _Link | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def running(self) -> bool:
        return self._link is not None

    @property
    def network_note(self) -> str:
        """Set while running when zero-egress mode could not be enforced for this server."""
        link = self._link
        return link.launch.note if link is not None else ""

    def tools(self) -> list[Tool]:
        """The server's tools, as Ember tools that call back into it."""
        listed: Any = self._request(lambda s: s.list_tools(), self.start_timeout_s, "listing tools")
        return [
            Tool(
                t.name,
                t.description or "",
                dict(t.input_schema or {"type": "object"}),
                self._runner(t.name),
                source=f"mcp:{self.name}",
            )
            for t in listed.tools
        ]

    def call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        timeout = self.call_timeout_s
        result: Any = self._request(
            lambda s: s.call_tool(tool, dict(arguments), read_timeout_seconds=timeout),
            timeout,
            f"running {tool}",
            grace_s=1.0,
        )
        text = _result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(text or f"{tool} failed on MCP server {self.name}")
        return text

    def close(self) -> None:
        with self._lock:
            link, self._link = self._link, None
        if link is not None:
            link.close()

    def _runner(self, tool: str) -> Callable[[Mapping[str, Any]], str]:
        def run(arguments: Mapping[str, Any]) -> str:
            return self.call(tool, arguments)

        return run

    def _request(
        self, make: Callable[[ClientSession], Coroutine[Any, Any, Any]], timeout: float, what: str, grace_s: float = 0.0
    ) -> Any:
        link = self._started()
        try:
            return link.run(make(link.session), timeout + grace_s)
        except FutureTimeout:
            self._fail(link, f"MCP server {self.name} did not answer within {timeout:.0f} s while {what}")
        except _Unreadable as exc:
            self._fail(link, f"{exc} while {what}")
        except ToolError as exc:
            self._fail(link, str(exc))
        except Exception as exc:
            if "timed out" in str(exc).lower():
                self._fail(link, f"MCP server {self.name} did not answer within {timeout:.0f} s while {what}")
            self._fail(link, f"MCP server {self.name} failed while {what}: {_one_line(exc)}")

    def _fail(self, link: _Link, message: str) -> Any:
        log.warning("%s; stopping it", message)
        with self._lock:
            if self._link is link:
                self._link = None
        link.close()
        raise ToolError(message)

    def _started(self) -> _Link:
        with self._lock:
            if self._link is None:
                self._link = _Link.start(self.config, self.start_timeout_s)
            return self._link


class _Unreadable(ToolError):
    """The server's reply could not be read at all (nested deeper than the JSON parser goes)."""


def _too_deep(fault: Exception) -> bool:
    # pydantic's JSON parser stops at a fixed depth; the SDK hands the error to the session
    # and drops the line, so the request would otherwise wait for its timeout.
    return "recursion limit" in str(fault).lower()


class _Link:
    """A running server: the loop thread, the SDK session, and a way to stop both."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.ready: Future[ClientSession] = Future()
        self.session: ClientSession = cast("ClientSession", None)
        self._scope: anyio.CancelScope | None = None
        self._closing = False
        self._too_deep = asyncio.Event()  # a reply nested too deeply to parse arrived
        self._thread = threading.Thread(target=self._main, name=f"mcp-{config.name}", daemon=True)
        # Zero-egress mode: the server starts in a network namespace of its own where it can.
        self.launch = network_guard.child_launch(
            f"MCP server {config.name}", f"mcp:{config.name}", config.command, tuple(config.args)
        )

    @classmethod
    def start(cls, config: ServerConfig, timeout: float) -> _Link:
        import mcp.client.stdio  # noqa: F401  # pyright: ignore[reportUnusedImport]  (loaded here, outside the start timeout)

        link = cls(config)
        link._thread.start()
        try:
            link.session = link.ready.result(timeout)
        except FutureTimeout:
            link.close()
            raise ToolError(f"MCP server {config.name} did not start within {timeout:.0f} s") from None
        except Exception as exc:
            link.close()
            raise ToolError(f"MCP server {config.name} could not start: {_one_line(exc)}") from exc
        if link.launch.note:
            log.warning("%s", link.launch.note)
        log.info("MCP server %s started%s", config.name, " without network access" if link.launch.isolated else "")
        return link

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            with open(os.devnull, "w") as errlog:  # a server's own log must not spill into the chat
                self.loop.run_until_complete(self._serve(errlog))
        except BaseException as exc:  # the server died: every waiter gets the reason
            if not self.ready.done():
                self.ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        finally:
            self.loop.close()

    async def _serve(self, errlog: TextIO) -> None:
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        # One anyio scope around the whole session, cancelled by close(): even a server stuck in
        # `initialize` then gets the SDK's shutdown (stdin closed, SIGTERM, SIGKILL to its whole
        # process group), instead of outliving Ember. A native task.cancel() could skip that.
        launch = self.launch
        params = StdioServerParameters(
            command=launch.command, args=list(launch.args), env=dict(self.config.env) or None
        )
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._closing:
                scope.cancel()
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, message_handler=self._on_message) as session,
            ):
                await session.initialize()
                self.ready.set_result(session)
                await anyio.sleep_forever()
        if not self.ready.done():
            self.ready.set_exception(ToolError(f"MCP server {self.config.name} was stopped while starting"))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception) and _too_deep(message):
            self._too_deep.set()

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float) -> _T:
        if not self._thread.is_alive():
            coro.close()
            raise ToolError(f"MCP server {self.config.name} is not running")
        return asyncio.run_coroutine_threadsafe(self._unless_unreadable(coro), self.loop).result(timeout)

    async def _unless_unreadable(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """`coro`, or `_Unreadable` at once when a reply too deep to parse arrives meanwhile."""
        self._too_deep.clear()
        request = asyncio.ensure_future(coro)
        unreadable = asyncio.ensure_future(self._too_deep.wait())
        try:
            await asyncio.wait({request, unreadable}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            unreadable.cancel()
        if not request.done():
            request.cancel()
            raise _Unreadable(
                f"MCP server {self.config.name} sent a reply nested too deeply to read "
                "(a tool's schema or result deeper than the JSON parser's limit)"
            )
        return request.result()

    def close(self) -> None:
        self._closing = True
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing left to stop
                self.loop.call_soon_threadsafe(self._cancel)
            self._thread.join(timeout=STOP_TIMEOUT_S)
        if self._thread.is_alive():
            log.warning("MCP server %s did not stop in time; leaving its thread", self.config.name)

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()


def _result_text(result: Any) -> str:
    parts: list[str] = []
    blocks: list[Any] = getattr(result, "content", None) or []
    for block in blocks:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')} not shown]")
    if not parts and getattr(result, "structured_content", None) is not None:
        import json

        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _one_line(exc: BaseException) -> str:
    inner: tuple[BaseException, ...] = getattr(exc, "exceptions", ())  # an exception group: its first cause
    if inner:
        return _one_line(inner[0])
    error: object = exc
    text = " ".join(str(error).split()) or type(exc).__name__
    return text[:300]
