"""Tools in the app (no Qt): the per-conversation switch, the tools a turn offers, approvals across threads.

The tool rounds run on the engine's worker thread and ask for approval there; the
`ThreadApprover` hands each question to the event loop (where the approval card lives)
and blocks the worker until the user answers or the turn is stopped (a stop denies).
Whether a conversation offers tools, its folders, servers and the tools it always allows
are its settings (`ConversationSettings`), so they follow the conversation. The turn
itself runs through the session (engine/session) like any other.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from desktop.core.async_tasks import spawn
from engine.api.program import ember_paths
from engine.api.session import ChatSession, ConversationSettings
from engine.api.tools import Decision, FolderGrants, McpServers, ToolError, ToolPermissions, ToolSet, builtin_tools
from engine.api.values import HistoryError, ToolCall, ToolDenied, ToolEvent, ToolLimit, ToolResult

log = logging.getLogger("desktop.tools")


def default_tools(folders: Sequence[str]) -> ToolSet:
    """The built-in tools, with the file tools on the conversation's granted folders."""
    grants = FolderGrants()
    for folder in folders:
        try:
            grants.grant(folder)
        except ToolError as exc:  # a granted folder that went away: leave it out
            log.warning("tools: %s", exc)
    return ToolSet(builtin_tools(grants=grants, history_db=ember_paths().history_db))


class ToolPrompter(Protocol):
    """The approval UI: asks on the event-loop thread, shows what came of each call."""

    def show_call(self, call: ToolCall) -> None: ...
    def ask(self, call: ToolCall) -> Awaitable[Decision]: ...
    def show_outcome(self, event: ToolResult | ToolDenied | ToolLimit) -> None: ...
    def show_notice(self, text: str) -> None: ...
    def clear(self) -> None: ...


class ThreadApprover:
    """An approver for the worker thread that asks the prompter on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ask: Callable[[ToolCall], Awaitable[Decision]]) -> None:
        self._loop = loop
        self._ask = ask
        self._lock = threading.Lock()
        self._pending: Future[Decision] | None = None
        self._stopped = False

    def __call__(self, call: ToolCall) -> Decision:
        with self._lock:
            if self._stopped:
                return Decision.DENY
            pending = self._pending = asyncio.run_coroutine_threadsafe(_ask_on_loop(self._ask, call), self._loop)
        try:
            return pending.result()
        except Exception:  # cancelled by a stop, or the card went away: never run unasked
            return Decision.DENY
        finally:
            with self._lock:
                self._pending = None

    def stop(self) -> None:
        """Deny the open question and every later one (the user stopped the turn)."""
        with self._lock:
            self._stopped = True
            pending = self._pending
        if pending is not None:
            pending.cancel()


async def _ask_on_loop(ask: Callable[[ToolCall], Awaitable[Decision]], call: ToolCall) -> Decision:
    return await ask(call)  # called here, on the loop: the prompter's widgets live on its thread


class ToolTurns:
    """The app's tools: which conversations offer them, the tools a turn offers and its approvals."""

    def __init__(
        self,
        prompter: ToolPrompter,
        make_tools: Callable[[Sequence[str]], ToolSet],
        *,
        session: ChatSession,
        mcp: McpServers | None = None,
    ) -> None:
        self.prompter = prompter
        self.make_tools = make_tools
        self.mcp = mcp  # the configured servers, kept running across turns once started
        self.session = session
        self._approver: ThreadApprover | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_conversation_changed: Callable[[], None] = lambda: None

    def conversation_changed(self) -> None:
        """Another conversation is open: its own tool settings apply (the toggle follows)."""
        self.on_conversation_changed()

    # -- the per-conversation settings ---------------------------------------------------

    def _settings(self) -> ConversationSettings:
        try:
            return self.session.settings
        except HistoryError as exc:
            log.warning("history: could not read the tool settings: %s", exc)
            return ConversationSettings()

    def _save(self, **changes: Any) -> None:
        """The settings change now; they are written on the session's history thread."""
        write = self.session.state.update_settings_soon(**changes)
        if write is not None:
            spawn(_logged(write))

    @property
    def enabled(self) -> bool:
        return self._settings().tools_enabled

    def set_enabled(self, enabled: bool) -> None:
        self._save(tools_enabled=enabled)

    def folders(self) -> list[str]:
        return list(self._settings().tools_folders)

    def grant_folder(self, folder: str) -> None:
        folders = self.folders()
        if folder not in folders:
            self._save(tools_folders=(*folders, folder))

    def mcp_servers(self) -> list[str]:
        """The MCP servers this conversation enabled (and that are still configured)."""
        known = self.mcp.names if self.mcp is not None else []
        return [n for n in self._settings().tools_mcp if n in known]

    def set_mcp_server(self, name: str, enabled: bool) -> None:
        names = [n for n in self.mcp_servers() if n != name] + ([name] if enabled else [])
        self._save(tools_mcp=tuple(names))

    def close(self) -> None:
        """Stop the MCP servers (the app is closing)."""
        if self.mcp is not None:
            self.mcp.close()

    def permissions(self) -> ToolPermissions:
        return ToolPermissions(self._settings().tools_always)

    def set_permissions(self, permissions: ToolPermissions) -> None:
        self._save(tools_always=tuple(sorted(permissions.always)))

    # -- a turn --------------------------------------------------------------------------

    async def for_turn(self) -> ToolSet | None:
        """The tools the next turn offers (None when this conversation has them off); the cards start afresh."""
        if not self.enabled:
            return None
        self._loop = asyncio.get_running_loop()
        self.prompter.clear()
        return await self._tools()

    def approver(self) -> ThreadApprover:
        """A new approver for one turn: its questions go to the prompter; `stop` denies them."""
        self._approver = ThreadApprover(asyncio.get_running_loop(), self.prompter.ask)
        return self._approver

    def stop(self) -> None:
        if self._approver is not None:
            self._approver.stop()

    def turn_ended(self, tools: ToolSet) -> None:
        self._approver = None
        tools.close()

    def show(self, event: ToolEvent) -> None:
        """Show a tool event: every call is seen (an always-allowed one too), then its outcome."""
        if isinstance(event, ToolCall):
            self.prompter.show_call(event)
        else:
            self.prompter.show_outcome(event)

    async def _tools(self) -> ToolSet:
        base = self.make_tools(self.folders())
        servers = self.mcp_servers()
        if self.mcp is None or not servers:
            return base
        mcp = self.mcp
        # Starting a server blocks (seconds): off the event loop; the turn waits for it anyway.
        extra = await asyncio.to_thread(mcp.tools_for, servers, taken=base.names, warn=self._notice_threadsafe)
        return ToolSet([*base, *extra])

    def _notice_threadsafe(self, text: str) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.prompter.show_notice, text)


async def _logged(write: Awaitable[None]) -> None:
    try:
        await write
    except HistoryError as exc:
        log.warning("history: could not save the tool settings: %s", exc)
