"""The backend contract: one model request in, a stream of `Piece`s out."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from engine.events import Piece

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling settings; `seed=None` means a fresh random seed per request."""

    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    seed: int | None = None

    @classmethod
    def greedy(cls) -> Sampling:
        return cls(temperature=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=0)


@dataclass(frozen=True, slots=True)
class Request:
    """One model request. `messages` include the system message, if any."""

    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] | None = None
    sampling: Sampling = field(default_factory=Sampling)
    max_tokens: int = 1024
    grammar: str | None = None  # GBNF text; backends without grammar support ignore it

    def with_(self, **changes: Any) -> Request:
        return replace(self, **changes)


class CancelToken:
    """A thread-safe stop flag, checked by backends between pieces.

    A backend blocked in I/O (a silent server) registers a callback that unblocks it
    (`on_cancel`); callbacks run once, on the thread that cancels.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _run_quietly(callback)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` when cancelled (at once if already); returns a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        _run_quietly(callback)
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


def _run_quietly(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # a failing unblock must not break the stop itself
        logging.getLogger("engine.backend").exception("cancel callback failed")


@dataclass(slots=True)
class StreamInfo:
    """What a backend learned while streaming, read after the stream ends."""

    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens reused from the KV cache (not evaluated again)
    completion_tokens: int = 0
    context_size: int = 0
    finish_reason: str = "stop"  # stop | length | cancelled
    retries: int = 0
    # True when the rendered prompt ends inside an opened thinking block (a template
    # that pre-fills `<think>`): the reply then starts in the thinking channel.
    prefilled_thinking: bool = False


@runtime_checkable
class Backend(Protocol):
    """Streams one model request as pieces, honouring `cancel` between pieces.

    `stream` runs on the engine's single worker thread; it fills `info` as it goes.
    Errors are raised as `engine.errors.LLMError` subclasses.
    """

    name: str
    supports_grammar: bool

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]: ...

    def close(self) -> None: ...


def _check_messages(messages: tuple[Message, ...]) -> None:
    for m in messages:
        if "role" not in m or "content" not in m:
            raise ValueError(f"message without role or content: {m!r}")


def make_request(messages: list[Message] | tuple[Message, ...], **kwargs: Any) -> Request:
    """Build a Request, validating the messages' shape."""
    msgs = tuple(dict(m) for m in messages)
    _check_messages(msgs)
    return Request(messages=msgs, **kwargs)
