"""A backend that replays a JSON script: deterministic tests and demos.

Script shape: ``{"replies": [[chunk, ...], ...]}`` where a chunk is a string or
``{"text": "...", "special": bool, "user_defined": bool, "delay_ms": N}``, or
``{"progress": [done, total], "delay_ms": N}``: the prompt-reading progress a local model
reports between batches of a long prompt (`PromptProgress`), for demos of that state.
Each model request consumes the next reply; running out raises `ScriptExhaustedError`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from engine.backends.base import Capabilities, Message, PlainBackend, Request, StreamInfo, ToolSpec
from engine.cancel import CancelToken
from engine.errors import ConfigError, ContextOverflowError, ScriptExhaustedError
from engine.events import FinishReason, Piece, PromptProgress
from engine.json_files import read_json

SCRIPT_MESSAGE_OVERHEAD = 3
SCRIPT_MAX_BYTES = 256 * 1024 * 1024  # scripts carry test replies of many megabytes


@dataclass(frozen=True, slots=True)
class ScriptChunk:
    text: str
    special: bool = False
    user_defined: bool = False
    delay_ms: float = 0.0
    progress: tuple[int, int] | None = None  # a PromptProgress(done, total) instead of text


MAX_DELAY_MS = 60_000  # a scripted pause longer than a minute is a mistake


def _parse_chunk(raw: Any, where: str) -> ScriptChunk:
    if isinstance(raw, str):
        return ScriptChunk(raw)
    obj = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
    text = obj.get("text")
    if isinstance(text, str):
        return ScriptChunk(
            text=text,
            special=_flag(obj, "special", where),
            user_defined=_flag(obj, "user_defined", where),
            delay_ms=_delay(obj.get("delay_ms", 0), where),
        )
    if "progress" in obj:
        progress = _progress(obj["progress"], where)
        return ScriptChunk("", delay_ms=_delay(obj.get("delay_ms", 0), where), progress=progress)
    raise ConfigError(f"{where}: a chunk must be a string or an object with 'text', got {_short(raw)}")


def _flag(obj: dict[str, Any], key: str, where: str) -> bool:
    """A JSON boolean; the string "false" is refused rather than read as true."""
    value = obj.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: '{key}' must be true or false, got {_short(value)}")
    return value


def _progress(value: Any, where: str) -> tuple[int, int]:
    pair = cast(list[Any], value) if isinstance(value, list) else []
    if len(pair) == 2 and all(isinstance(n, int) and not isinstance(n, bool) for n in pair) and 0 <= pair[0] <= pair[1]:
        return pair[0], pair[1]
    raise ConfigError(f"{where}: 'progress' must be [done, total] with 0 <= done <= total, got {_short(value)}")


def _delay(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_DELAY_MS:
        raise ConfigError(f"{where}: 'delay_ms' must be a number from 0 to {MAX_DELAY_MS}, got {_short(value)}")
    return float(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def parse_script(data: Any, name: str = "script") -> list[list[ScriptChunk]]:
    """Validate a script object and return its replies."""
    replies = cast(dict[str, Any], data).get("replies") if isinstance(data, dict) else None
    if not isinstance(replies, list):
        raise ConfigError(f"{name}: expected an object with a 'replies' list")
    out: list[list[ScriptChunk]] = []
    for i, reply in enumerate(cast(list[Any], replies)):
        if not isinstance(reply, list):
            raise ConfigError(f"{name}: reply {i} must be a list of chunks")
        out.append([_parse_chunk(c, f"{name}: reply {i}") for c in cast(list[Any], reply)])
    return out


class ScriptedBackend(PlainBackend):
    """Replays scripted replies and records every request it receives."""

    capabilities = Capabilities(device="Scripted", vision=True)  # images are accepted, and not looked at

    def __init__(
        self, replies: list[list[ScriptChunk]] | list[list[Any]], name: str = "script", n_ctx: int | None = None
    ) -> None:
        self.name = name
        if n_ctx is not None:
            self.n_ctx = n_ctx
        self._replies = [
            [c if isinstance(c, ScriptChunk) else _parse_chunk(c, name) for c in reply] for reply in replies
        ]
        self._next = 0
        self._lock = threading.Lock()
        self.requests: list[Request] = []

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedBackend:
        """A script file: `{"replies": [...]}`, and optionally `"n_ctx"`: a context to count against."""
        p = Path(path)
        data = read_json(p, "script", max_bytes=SCRIPT_MAX_BYTES)
        replies = parse_script(data, str(p))
        n_ctx = cast(dict[str, Any], data).get("n_ctx")
        if n_ctx is not None and (not isinstance(n_ctx, int) or isinstance(n_ctx, bool) or n_ctx < 1):
            raise ConfigError(f"{p}: 'n_ctx' must be a positive whole number")
        return cls(replies, name=str(p), n_ctx=n_ctx)

    @classmethod
    def from_texts(cls, *replies: str | list[Any]) -> ScriptedBackend:
        """Convenience for tests: each reply is a string (one chunk) or a list of chunks."""
        return cls([[r] if isinstance(r, str) else list(r) for r in replies])

    @property
    def n_ctx(self) -> int | None:
        return self.capabilities.n_ctx or None

    @n_ctx.setter
    def n_ctx(self, value: int | None) -> None:
        # With a context size it declares token counting (in words, its own count) like a
        # local model, so context policies can be tested without one; a prompt over it is refused.
        # (A subclass's own declaration is kept; only the counting part changes.)
        declared = type(self).capabilities
        self.capabilities = declared if value is None else replace(declared, token_count=True, n_ctx=value)

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece | PromptProgress]:
        with self._lock:
            self.requests.append(request)
            if self._next >= len(self._replies):
                raise ScriptExhaustedError(f"script {self.name} has no reply left for request {len(self.requests)}")
            reply = self._replies[self._next]
            self._next += 1
        info.prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in request.messages)
        n_ctx = self.n_ctx
        if n_ctx is not None:
            info.prompt_tokens = self.count_prompt_tokens(request.messages, request.tools)
            info.n_ctx = n_ctx
            if info.prompt_tokens >= n_ctx:
                raise ContextOverflowError(
                    f"the conversation ({info.prompt_tokens} tokens) no longer fits the {n_ctx}-token context"
                )
        emitted = 0
        for chunk in reply:
            if cancel.cancelled:
                info.finish_reason = FinishReason.CANCELLED
                return
            if emitted >= request.max_tokens:
                info.finish_reason = FinishReason.LENGTH
                return
            if chunk.delay_ms:
                time.sleep(chunk.delay_ms / 1000)
                if cancel.cancelled:
                    info.finish_reason = FinishReason.CANCELLED
                    return
            if chunk.progress is not None:
                yield PromptProgress(*chunk.progress)
                continue
            emitted += 1
            yield Piece(chunk.text, None, chunk.special, chunk.user_defined)
        info.finish_reason = FinishReason.STOP

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def count_prompt_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        """Words, plus a few tokens per message for the role markers a template would add, and the tools' JSON."""
        described = sum(self.count_tokens(json.dumps(t)) for t in tools or ())
        return sum(self.count_tokens(_text(m)) + SCRIPT_MESSAGE_OVERHEAD for m in messages) + described + 1

    def close(self) -> None:
        pass


def _text(message: Message) -> str:
    """What a template would print of `message`: its content and any tool calls it made."""
    calls = message.get("tool_calls")
    return str(message.get("content") or "") + (" " + json.dumps(calls) if calls else "")
