"""Tools in the app (no Qt): the per-conversation switch, approvals across threads, a tool turn.

The tool loop runs on the engine's worker thread and asks for approval there; the
`ThreadApprover` hands each question to the event loop (where the approval card lives)
and blocks the worker until the user answers or the turn is stopped (a stop denies).
Whether a conversation offers tools, and which tools it always allows, are kept in its
stored settings (`tools_enabled`, `tools_always`), so both follow the conversation.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from desktop.core.history_session import HISTORY_ERRORS, HistorySession
from engine.backends.base import Backend, Request
from engine.history.recorder import TurnRecorder
from engine.runtime import Engine
from engine.tools.activity import ALWAYS_KEY, ToolActivity, replay_tool_calls
from engine.tools.builtin import builtin_tools
from engine.tools.files import FolderGrants
from engine.tools.mcp_tools import McpServers
from engine.tools.registry import ToolError, ToolSet
from engine.turns.tool_events import AnyEvent, ToolCall, ToolDenied, ToolEvent, ToolLimit, ToolResult
from engine.turns.tool_loop import Decision, ToolPermissions, ToolTurnRunner
from models.library.paths import ember_paths

log = logging.getLogger("desktop.tools")

ENABLED_KEY = "tools_enabled"
FOLDERS_KEY = "tools_folders"
MCP_KEY = "tools_mcp"


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
    """The app's tools: which conversations offer them, and running a turn with them."""

    def __init__(self, prompter: ToolPrompter, make_tools: Callable[[Sequence[str]], ToolSet], *,
                 history: HistorySession | None = None, mcp: McpServers | None = None) -> None:
        self.prompter = prompter
        self.make_tools = make_tools
        self.mcp = mcp  # the configured servers, kept running across turns once started
        self.history = history
        self._memory: dict[str, Any] = {}  # the settings, when there is no history
        self._approver: ThreadApprover | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_conversation_changed: Callable[[], None] = lambda: None

    def conversation_changed(self) -> None:
        """Another conversation is open: its own tool settings apply (the toggle follows)."""
        if self.history is None:
            self._memory = {}
        self.on_conversation_changed()

    # -- the per-conversation settings ---------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        if self.history is None:
            return dict(self._memory)
        try:
            return dict(self.history.settings)
        except HISTORY_ERRORS as exc:
            log.warning("history: could not read the tool settings: %s", exc)
            return {}

    def _save(self, settings: dict[str, Any]) -> None:
        if self.history is None:
            self._memory = settings
            return
        try:
            self.history.update_settings(settings)
        except HISTORY_ERRORS as exc:
            log.warning("history: could not save the tool settings: %s", exc)

    @property
    def enabled(self) -> bool:
        return bool(self._settings().get(ENABLED_KEY))

    def set_enabled(self, enabled: bool) -> None:
        self._save({**self._settings(), ENABLED_KEY: enabled})

    def folders(self) -> list[str]:
        stored: Any = self._settings().get(FOLDERS_KEY)
        return [str(f) for f in stored] if isinstance(stored, list) else []  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]

    def grant_folder(self, folder: str) -> None:
        folders = self.folders()
        if folder not in folders:
            self._save({**self._settings(), FOLDERS_KEY: [*folders, folder]})

    def mcp_servers(self) -> list[str]:
        """The MCP servers this conversation enabled (and that are still configured)."""
        stored: Any = self._settings().get(MCP_KEY)
        known = self.mcp.names if self.mcp is not None else []
        return [str(n) for n in stored if n in known] if isinstance(stored, list) else []  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]

    def set_mcp_server(self, name: str, enabled: bool) -> None:
        names = [n for n in self.mcp_servers() if n != name] + ([name] if enabled else [])
        self._save({**self._settings(), MCP_KEY: names})

    def close(self) -> None:
        """Stop the MCP servers (the app is closing)."""
        if self.mcp is not None:
            self.mcp.close()

    def permissions(self) -> ToolPermissions:
        stored: Any = self._settings().get(ALWAYS_KEY)
        return ToolPermissions({str(n) for n in stored} if isinstance(stored, list) else set())  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]

    def set_permissions(self, permissions: ToolPermissions) -> None:
        self._save({**self._settings(), ALWAYS_KEY: sorted(permissions.always)})

    # -- a turn --------------------------------------------------------------------------

    def stop(self) -> None:
        if self._approver is not None:
            self._approver.stop()

    async def run(self, engine: Engine, request: Request, recorder: TurnRecorder | None) -> AsyncGenerator[AnyEvent]:
        """The events of one turn with tools; the caller shows them (`show` for the tool events).

        Approvals go to the prompter; when the turn ends (or is left), the tools close and the
        calls and any new always-allow choices are saved with the conversation.
        """
        self._loop = asyncio.get_running_loop()
        self.prompter.clear()
        tools = await self._tools()
        permissions = self.permissions()
        before = set(permissions.always)
        approver = self._approver = ThreadApprover(asyncio.get_running_loop(), self.prompter.ask)

        def runner_for(backend: Backend) -> ToolTurnRunner:
            return ToolTurnRunner(backend, tools, approver, permissions=permissions)

        if recorder is not None:  # earlier replies' tool calls and results, put back before their answers
            thread = replay_tool_calls(recorder.store, recorder.conversation_id, list(request.messages),
                                       upto=recorder.user_message_id)
            request = request.with_(messages=tuple(thread))
        activity = ToolActivity()
        events = engine.run_turn(request, runner_for=runner_for)
        try:
            async for event in events:
                activity.on_event(event)
                yield event
        finally:
            await events.aclose()
            self._approver = None
            tools.close()
            if permissions.always != before:
                self.set_permissions(permissions)
            if recorder is not None:
                activity.save(recorder.store, recorder.assistant_message_id)

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
