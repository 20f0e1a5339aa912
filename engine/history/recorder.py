"""Recording one turn into the history as its events stream (Qt-free; the GUI and the CLI share it).

    recorder = TurnRecorder(store, conversation_id)
    with recorder:
        recorder.begin("Hello")                  # user message + turn record, committed now
        for event in recorded(run_turn(request), recorder):
            show(event)

Write discipline: the user's message and an open turn record are committed before
generation starts; the assistant row appears with the first delta and is rewritten at
most every `flush_interval_s` while it streams (so a crash loses about a second of
text); the end of the turn writes the final text, its tool calls (under `"tools"` in the
reply's stats: name, arguments, approval, result) and the audit record in one
transaction. A reply cut off by a crash stays `streaming` until the next `HistoryStore`
open marks it `interrupted`.

A recorder serves one turn and is used from ONE thread: the one consuming the events
(the GUI's event-loop thread, the CLI's main thread), never the model's worker thread.
A failed history write never stops the reply: it is logged and retried at the next flush.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Literal

from engine.backends.image_input import ImageData
from engine.events import (
    ContentDelta,
    Event,
    FinishReason,
    Recovery,
    Sources,
    StructuredValue,
    ThinkingDelta,
    ToolCall,
    ToolDenied,
    ToolResult,
    TurnDone,
    TurnError,
    TurnErrorKind,
    TurnStats,
    fenced_json,
)
from engine.history.images import copy_images, save_images
from engine.history.store import HistoryStore, title_from_text
from engine.history.types import TOOLS_STATS_KEY, HistoryError, Outcome, Status, TurnKind

log = logging.getLogger("engine.history")

_WRITE_ERRORS = HistoryError  # the store translates sqlite3 errors


class TurnRecorder:
    """Records one turn of one conversation: begin → on_event… → (TurnDone | TurnError | abandon)."""

    def __init__(
        self,
        store: HistoryStore,
        conversation_id: int,
        *,
        parent_id: int | None = None,
        model: str = "",
        clock: Callable[[], float] = time.monotonic,
        flush_interval_s: float = 1.0,
    ) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.parent_id = parent_id  # None: after the conversation's active leaf
        self.model = model
        self._clock = clock
        self._flush_interval_s = flush_interval_s
        self.turn_id: int | None = None
        self.user_message_id: int | None = None
        self.assistant_message_id: int | None = None
        self.outcome: Outcome | None = None
        self._fallback_leaf: int | None = None  # the leaf to show again if no reply is kept
        self._content: list[str] = []
        self._thinking: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []  # this turn's calls, in order (stored with the reply)
        self._sources: list[dict[str, Any]] = []  # the passages the prompt carried, kept with the reply
        self._paragraphs: list[dict[str, Any]] | None = None  # which support each paragraph (once whole)
        self._dirty = False
        self._last_write: float | None = None  # None: nothing written (or tried) yet

    # -- starting a turn --------------------------------------------------------------

    def begin(self, user_content: str, images: Sequence[ImageData] = ()) -> int:
        """Commit the user's message (after `parent_id` or the active leaf) with its images; open the turn."""
        self._check_unstarted()
        with self.store.transaction():
            parent = self.parent_id
            if parent is None:
                parent = self.store.conversation(self.conversation_id).active_leaf_id
            user_id = self.store.add_message(self.conversation_id, "user", user_content, parent_id=parent)
            if images:
                save_images(self.store, user_id, images)
            self.store.set_auto_title(self.conversation_id, title_from_text(user_content), only_if_untitled=True)
            self._open(user_id, "send", fallback_leaf=user_id)
        return user_id

    def begin_edit(self, message_id: int, content: str) -> int:
        """Store `content` as a new version of user message `message_id` and answer it."""
        self._check_unstarted()
        if self.store.message(message_id).role != "user":
            raise HistoryError(f"message {message_id} is not a user message")
        with self.store.transaction():
            user_id = self.store.edit_message(message_id, content)
            copy_images(self.store, message_id, user_id)
            self._open(user_id, "edit", fallback_leaf=user_id)
        return user_id

    def begin_regenerate(self, message_id: int) -> int:
        """Answer again: `message_id` is the answer to replace or the user message it answered.

        The new answer becomes another version; the old ones stay. Returns the user message id.
        """
        self._check_unstarted()
        msg = self.store.message(message_id)
        user_id = msg.parent_id if msg.role == "assistant" else msg.id
        if user_id is None or self.store.message(user_id).role != "user":
            raise HistoryError(f"message {message_id} does not answer a user message")
        with self.store.transaction():
            # The leaf moves only when the new answer's first text arrives; if none is kept
            # the conversation shows what it showed before.
            leaf = self.store.conversation(self.conversation_id).active_leaf_id
            self._open(user_id, "regenerate", fallback_leaf=leaf)
        return user_id

    def _check_unstarted(self) -> None:
        if self.turn_id is not None:
            raise HistoryError("a TurnRecorder records one turn; make a new one")

    def _open(self, user_id: int, kind: TurnKind, *, fallback_leaf: int | None) -> None:
        self.turn_id = self.store.start_turn(self.conversation_id, user_id, kind)
        self.user_message_id = user_id
        self._fallback_leaf = fallback_leaf

    # -- streaming --------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    @property
    def content(self) -> str:
        return "".join(self._content)

    @property
    def thinking(self) -> str:
        return "".join(self._thinking)

    def on_event(self, event: Event) -> None:
        """Feed one turn event, in order."""
        if self.turn_id is None:
            raise HistoryError("call begin() before feeding events")
        if self.finished:
            log.warning("history: event %s after the end of turn %s ignored", type(event).__name__, self.turn_id)
            return
        match event:
            case ThinkingDelta(text=text) if text:
                self._thinking.append(text)
                self._on_delta()
            case ContentDelta(text=text) if text:
                self._content.append(text)
                self._on_delta()
            case Recovery():
                # The next deltas are a new attempt; its text replaces this one at the next write.
                self._content.clear()
                self._thinking.clear()
                self._dirty = True
            case Sources(sources=sources, paragraphs=paragraphs):
                self._sources = [s.to_json() for s in sources]
                if paragraphs is not None:  # sent again once the answer is whole
                    self._paragraphs = [p.to_json() for p in paragraphs]
            case StructuredValue(value=value):
                # A structured turn's answer is its value, stored as the app shows it.
                self._content[:] = [fenced_json(value)]
                self._on_delta()
            case ToolCall(id=call_id, name=name, arguments=arguments):
                # "at": how much of the answer came before the call, so a stored reply shows its card there
                self.tool_calls.append(
                    {"id": call_id, "name": name, "arguments": arguments, "at": sum(map(len, self._content))}
                )
            case ToolDenied(id=call_id):
                self._tool_update(call_id, approval="denied")
            case ToolResult(id=call_id, content=content, error=error, approval=approval):
                self._tool_update(call_id, approval=str(approval), result=content, error=error)
            case TurnDone(stats=stats):
                self._end_done(stats)
            case TurnError(kind=kind, message=message, stats=stats):
                self._end_error(kind, message, stats)
            case _:
                pass

    def _tool_update(self, call_id: str, **fields: Any) -> None:
        for record in reversed(self.tool_calls):
            if record["id"] == call_id:
                record.update(fields)
                return

    def _on_delta(self) -> None:
        self._dirty = True
        # The first delta is written at once; after that (or after a failed try) once per interval.
        if self._last_write is None or self._clock() - self._last_write >= self._flush_interval_s:
            self.flush()

    def flush(self) -> None:
        """Write the text streamed so far (a GUI may also call this from a timer)."""
        if not self._dirty or self.finished or self.turn_id is None:
            return
        try:
            if self.assistant_message_id is None:
                self._insert_reply()
            else:
                self.store.update_text(self.assistant_message_id, self.content, self.thinking)
        except _WRITE_ERRORS as exc:
            log.warning("history: could not save the streaming reply (will retry): %s", exc)
            return
        finally:
            self._last_write = self._clock()
        self._dirty = False

    def _insert_reply(self) -> None:
        assert self.turn_id is not None
        assert self.user_message_id is not None
        # One transaction: a row marked streaming is always owned by an open turn, so crash
        # recovery in another process can tell a live stream from a dead one.
        with self.store.transaction():
            self.assistant_message_id = self.store.add_message(
                self.conversation_id,
                "assistant",
                self.content,
                parent_id=self.user_message_id,
                thinking=self.thinking,
                status="streaming",
                model=self.model,
            )
            self.store.attach_reply(self.turn_id, self.assistant_message_id)

    # -- ending -----------------------------------------------------------------------

    def _end_done(self, stats: TurnStats) -> None:
        stopped = stats.finish_reason == FinishReason.CANCELLED
        # A completed turn always gets its answer; a stop before any text leaves none.
        keep = not stopped or bool(self.content or self.thinking)
        self._end("stopped" if stopped else "completed", "stopped" if stopped else "complete", keep, stats)

    def _end_error(self, kind: str, message: str, stats: TurnStats) -> None:
        if kind == TurnErrorKind.MALFORMED_REPLY:
            # The user's message stays; no assistant message is written (or it is removed).
            self._end("malformed", "error", False, stats, kind, message)
        else:
            self._end("error", "error", bool(self.content or self.thinking), stats, kind, message)

    def abandon(self, status: Literal["stopped", "interrupted"] = "interrupted") -> None:
        """End a turn whose events stopped coming (the consumer left, Ctrl+C, an exception)."""
        if self.turn_id is None or self.finished:
            return
        self._end(status, status, bool(self.content or self.thinking), None)

    def _end(
        self,
        outcome: Outcome,
        status: Status,
        keep: bool,
        stats: TurnStats | None,
        error_kind: str = "",
        error_message: str = "",
    ) -> None:
        assert self.turn_id is not None
        message_stats: dict[str, Any] | None = stats.to_dict() if stats is not None else None
        if message_stats is not None and error_kind:
            message_stats |= {"error_kind": error_kind, "error_message": error_message}
        if self.tool_calls:  # with the answer, in the same transaction
            message_stats = (message_stats or {}) | {TOOLS_STATS_KEY: self.tool_calls}
        if self._sources:
            message_stats = (message_stats or {}) | {"sources": self._sources}
            if self._paragraphs is not None:  # even [] (an empty answer): attributed, so shown as given
                message_stats |= {"source_paragraphs": self._paragraphs}
        try:
            with self.store.transaction():
                self._finish_reply(keep, status, message_stats)
                self.store.finish_turn(
                    self.turn_id, outcome, stats=stats, error_kind=error_kind, error_message=error_message
                )
        except _WRITE_ERRORS as exc:
            # The open turn is closed as interrupted at the next start; the reply itself went on.
            log.error("history: could not record the end of turn %s: %s", self.turn_id, exc)
        self.outcome = outcome

    def _finish_reply(self, keep: bool, status: Status, stats: dict[str, Any] | None) -> None:
        if keep:
            if self.assistant_message_id is None:
                self._insert_reply()
            assert self.assistant_message_id is not None
            self.store.finish_message(
                self.assistant_message_id, content=self.content, thinking=self.thinking, status=status, stats=stats
            )
            return
        if self.assistant_message_id is not None:
            self.store.remove_message(self.assistant_message_id)
            self.assistant_message_id = None
        self.store.set_active_leaf(self.conversation_id, self._fallback_leaf)

    def close(self) -> None:
        """Abandon the turn as interrupted if it never ended."""
        self.abandon("interrupted")

    def __enter__(self) -> TurnRecorder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Ctrl+C is the user stopping the reply; anything else cut it off.
        self.abandon("stopped" if exc_type is KeyboardInterrupt else "interrupted")


def recorded(events: Iterable[Event], recorder: TurnRecorder) -> Iterator[Event]:
    """Pass events through unchanged, recording each before it is shown."""
    for event in events:
        recorder.on_event(event)
        yield event
