"""What the chat controller asks of the window's parts (protocols), and the quiet stand-ins.

A controller without a window (the tests, a script) gets `QuietHistory` and `NoTools`, so the
controller never asks whether a part is there.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from desktop.core.failures import TurnFailure
from desktop.core.history_session import Branch
from desktop.core.model_choice import ModelInfo
from engine.api.errors import LoadFailure
from engine.api.session import ReplyFormat
from engine.api.tools import Approver, ToolSet, deny_all
from engine.api.values import ToolEvent, TurnStats


class ReplySink(Protocol):
    """One assistant reply on screen, fed as the turn streams."""

    def add_thinking(self, text: str) -> None: ...
    def add_content(self, text: str) -> None: ...
    def restart(self, reason: str) -> None: ...
    def retrying(self, attempt: int, error: str) -> None: ...
    def note(self, text: str) -> None: ...  # e.g. "decoding is not constrained to the schema"
    def progress(self, done: int, total: int) -> None: ...  # the prompt is being read (PromptProgress)
    def finish(self, stats: TurnStats) -> None: ...


@runtime_checkable
class LoadWaitSink(Protocol):
    """A reply that can say it waits for the model to load (the window's does)."""

    def waiting_for_model(self, label: str, percent: int | None = None) -> None: ...
    def model_arrived(self) -> None: ...


class ChatView(Protocol):
    """Everything the controller asks of the window."""

    def show_user_message(self, text: str) -> None: ...
    def start_reply(self) -> ReplySink: ...
    def show_turn_failure(self, failure: TurnFailure) -> None: ...
    def clear_turn_failure(self, *, remove: bool) -> None: ...
    def set_busy(self, busy: bool) -> None: ...
    def show_stats(self, stats: TurnStats) -> None: ...
    def clear_conversation(self) -> None: ...
    def model_loading(self, label: str) -> None: ...
    def model_load_progress(self, label: str, percent: int) -> None: ...
    def model_ready(self, info: ModelInfo) -> None: ...
    def model_failed(self, label: str, message: str, cause: LoadFailure) -> None: ...


@runtime_checkable
class ContextView(Protocol):
    """A view that shows where the model's context begins (the window implements it)."""

    def show_context_cut(self, resume_turn: int | None, kept_head: int = 0) -> None: ...


class HistoryView(Protocol):
    """What the controller asks of the history side of the window (sidebar, stored messages)."""

    def show_branch(self, branch: Branch) -> None: ...
    def tag_branch(self, branch: Branch) -> bool: ...
    async def conversations_changed(self) -> None: ...  # re-read the list and the title (off the GUI thread)
    def show_reply_format(self, fmt: ReplyFormat) -> None: ...
    def show_history_problem(self, text: str) -> None: ...
    def set_actions_enabled(self, enabled: bool) -> None: ...


class QuietHistory:
    """A `HistoryView` that shows nothing: the stored branch is taken as what is on screen."""

    def show_branch(self, branch: Branch) -> None:
        pass

    def tag_branch(self, branch: Branch) -> bool:
        return True

    async def conversations_changed(self) -> None:
        pass

    def show_reply_format(self, fmt: ReplyFormat) -> None:
        pass

    def show_history_problem(self, text: str) -> None:
        pass

    def set_actions_enabled(self, enabled: bool) -> None:
        pass


class ToolOffer(Protocol):
    """The tools a conversation offers and their approvals (desktop.core.tool_turns.ToolTurns)."""

    @property
    def enabled(self) -> bool: ...
    async def for_turn(self) -> ToolSet | None: ...
    def approver(self) -> Approver: ...
    def turn_ended(self, tools: ToolSet) -> None: ...
    def show(self, event: ToolEvent) -> None: ...
    def stop(self) -> None: ...
    def conversation_changed(self) -> None: ...


class NoTools:
    """A `ToolOffer` with tools off: no turn offers any."""

    enabled = False

    async def for_turn(self) -> ToolSet | None:
        return None

    def approver(self) -> Approver:
        return deny_all

    def turn_ended(self, tools: ToolSet) -> None:
        tools.close()

    def show(self, event: ToolEvent) -> None:
        pass

    def stop(self) -> None:
        pass

    def conversation_changed(self) -> None:
        pass
