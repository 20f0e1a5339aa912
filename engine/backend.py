"""The backend contract: one model request in, a stream of `Piece`s out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
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
    """A thread-safe stop flag, checked by backends between pieces."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


@dataclass(slots=True)
class StreamInfo:
    """What a backend learned while streaming, read after the stream ends."""

    prompt_tokens: int = 0
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
