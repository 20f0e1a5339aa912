"""A remote backend: any OpenAI-compatible server (llama.cpp's server, vLLM, Ollama).

`OpenAIBackend.stream` posts `{base}/chat/completions` with `stream: true` and turns the
server-sent events into `Piece`s, so the reply goes through the same ThinkingSplitter →
ScaffoldingFilter pipeline as a local model's.

Thinking. Servers that parse reasoning themselves send it as `delta.reasoning_content`
(llama.cpp, DeepSeek) or `delta.reasoning` (vLLM, Ollama). It is re-wrapped in special
marker pieces — `Piece("<think>", special=True)`, the reasoning text as plain pieces, then
`Piece("</think>", special=True)` when content resumes or the stream ends — instead of
a side channel: the splitter already matches special `<think>`/`</think>` pieces
atomically, so thinking reaches `ThinkingDelta` raw and nothing downstream needs to know
the reply came over the network. A server that leaves `<think>` as text in
`delta.content` is split downstream exactly like a local model's output.

Retries. A refused connection, a connect timeout, a connection dropped before anything
streamed, or an HTTP 5xx/429 answer is retried at most `max_retries` times with a short
backoff, and only while no piece has been yielded: once the consumer has seen text, a
failure ends the stream with `BackendError` and the turn keeps the partial answer.

Secrets. The API key travels only in the `Authorization: Bearer` header. It is kept out
of `repr`, logs and error messages; a server message that echoes it is redacted.

Nothing here touches the network until `stream` (or `list_models`) is called.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import ssl
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

import httpx

from engine import __version__
from engine.backends.base import Capabilities, PlainBackend, Request, StreamInfo
from engine.backends.openai_tools import CHARS_PER_TOKEN_CAP, ToolCallDeltas, wire_message
from engine.backends.receipt import request_receipt
from engine.cancel import CancelToken
from engine.errors import BackendError, ConfigError
from engine.events import FinishReason, Piece
from engine.network import guard as network_guard
from models.library.json_input import bounded_loads

log = logging.getLogger("engine.openai_backend")  # a stable name for log filters

THINK_OPEN = Piece("<think>", special=True)
THINK_CLOSE = Piece("</think>", special=True)

# Longest silence tolerated between bytes. Generous: a long prompt on a busy server can
# take a while to its first token, and llama.cpp's server sends nothing until then.
DEFAULT_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 10.0
# Delay before retry 1, 2, …; the last one repeats. Total stays well under 5 s.
DEFAULT_RETRY_DELAYS_S: tuple[float, ...] = (0.2, 0.5)
LIST_MODELS_TIMEOUT_S = 10.0
# Longest wait for reply text while the server sends only keep-alive comments or empty
# deltas; `EMBER_IDLE_TIMEOUT_S` overrides it. A long prompt on a slow server can keep a
# server pinging for minutes before the first token, so it is generous too.
DEFAULT_IDLE_TIMEOUT_S = 180.0
IDLE_TIMEOUT_ENV = "EMBER_IDLE_TIMEOUT_S"
# Client-side backstop for `max_tokens`: a piece counts as at least one token, and as one
# per this many characters, so a server that ignores the limit is still cut off.
_CHARS_PER_TOKEN_CAP = CHARS_PER_TOKEN_CAP

_ERROR_BODY_LIMIT = 4096  # bytes of an error response worth reading for its message
_MESSAGE_LIMIT = 300  # characters of server text quoted in one error line
_CANCEL_POLL_S = 0.05
_SSE_FIELDS = frozenset({"event", "id", "retry"})
NETWORK_FEATURE = "remote server"  # the feature the network ledger names for these connections

Redact = Callable[[str], str]


class _Failure(Exception):
    """A failed attempt; `retryable` says whether a retry could help (if nothing streamed)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class _Server:
    base: str  # normalised base URL without a trailing slash
    host: str  # host[:port], the name every error message uses
    hostname: str = ""
    port: int | None = None  # the scheme's port when the URL names none

    def require_allowed(self) -> None:
        """Zero-egress mode's check before connecting: EgressRefused (one line) if not allowed."""
        network_guard.require(self.hostname, self.port, NETWORK_FEATURE)


def _parse_base_url(base_url: str) -> _Server:
    """Validate a base URL without contacting it; a bare `host:port/v1` means http."""
    text = base_url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"bad server URL {base_url!r}: {exc}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"bad server URL {base_url!r}: expected http(s)://host[:port]/v1")
    if url.port is not None and not 1 <= url.port <= 65535:
        raise ConfigError(f"bad server URL {base_url!r}: the port must be 1 to 65535, not {url.port}")
    host = f"{url.host}:{url.port}" if url.port else url.host
    port = url.port or (443 if url.scheme == "https" else 80)
    return _Server(base=str(url).rstrip("/"), host=host, hostname=url.host, port=port)


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"User-Agent": f"ember/{__version__}"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


@cache
def _ssl_context() -> ssl.SSLContext:
    # httpx builds a fresh context (reading the CA bundle, ~60 ms) for every client;
    # one shared context, same settings, keeps "Add server…" probes and tests quick.
    return httpx.create_ssl_context()


def _client(api_key: str | None, timeout: httpx.Timeout, transport: httpx.BaseTransport | None) -> httpx.Client:
    verify: ssl.SSLContext | bool = _ssl_context() if transport is None else True
    return httpx.Client(headers=_headers(api_key), timeout=timeout, transport=transport, verify=verify)


def _redactor(secret: str | None) -> Redact:
    if not secret:
        return lambda text: text
    return lambda text: text.replace(secret, "***")


def _check_api_key(api_key: str | None) -> None:
    # A control character or space would make httpx quote the header value in its error.
    if api_key and not all(33 <= ord(c) < 127 for c in api_key):
        raise ConfigError("the API key has characters an HTTP header cannot carry (spaces, line breaks, non-ASCII)")


def _safe_cause(exc: BaseException | None, redact: Redact) -> BaseException | None:
    """The exception to chain under a BackendError, unless its text would reveal the key."""
    return exc if exc is not None and redact(str(exc)) == str(exc) else None


def _one_line(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _as_dict(value: object) -> dict[str, object] | None:
    return cast("dict[str, object]", value) if isinstance(value, dict) else None


def _as_list(value: object) -> list[object]:
    return cast("list[object]", value) if isinstance(value, list) else []


def _str_field(obj: dict[str, object], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


# --- error descriptions -------------------------------------------------------------


def _os_reason(exc: Exception) -> str:
    """`[Errno 111] Connection refused` → `connection refused`."""
    text = _one_line(re.sub(r"\[Errno -?\d+\]\s*", "", str(exc)))
    return (text[:1].lower() + text[1:]) if text else type(exc).__name__


def _transport_failure(exc: httpx.RequestError, host: str, timeout: float) -> _Failure:
    if isinstance(exc, httpx.ConnectTimeout):
        return _Failure(f"cannot connect to {host}: timed out", retryable=True)
    if isinstance(exc, httpx.ConnectError):
        return _Failure(f"cannot connect to {host}: {_os_reason(exc)}", retryable=True)
    if isinstance(exc, httpx.ReadTimeout):
        return _Failure(f"{host}: the server stopped sending (no data for {timeout:g} s)")
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        # Typically a stale keep-alive connection or a server restart: worth a retry
        # when nothing has streamed yet.
        return _Failure(f"{host} dropped the connection ({_os_reason(exc)})", retryable=True)
    return _Failure(f"{host}: {type(exc).__name__}: {_os_reason(exc)}")


def _json_error_message(obj: object) -> str:
    """The human part of the usual error shapes: OpenAI, llama.cpp, FastAPI, Ollama."""
    body = _as_dict(obj)
    if body is None:
        return ""
    error = body.get("error")
    if isinstance(error, str):
        return error
    if (inner := _as_dict(error)) is not None:
        return _str_field(inner, "message")
    detail = body.get("detail")
    if isinstance(detail, str):
        return detail
    first = _as_dict(next(iter(_as_list(detail)), None))
    if first is not None:  # FastAPI validation: [{"loc": [...], "msg": "..."}]
        where = ".".join(str(p) for p in _as_list(first.get("loc")))
        return f"{where}: {_str_field(first, 'msg')}" if where else _str_field(first, "msg")
    return _str_field(body, "message")


def _error_detail(text: str) -> str:
    try:
        message = _json_error_message(bounded_loads(text))
    except (ValueError, RecursionError):
        # Plain text is worth quoting; an HTML error page is not.
        return "" if text.lstrip().startswith("<") else _one_line(text)
    return _one_line(message or text)


def _read_bounded(response: httpx.Response, limit: int = _ERROR_BODY_LIMIT) -> str:
    buf = bytearray()
    for chunk in response.iter_bytes():
        buf += chunk
        if len(buf) >= limit:
            break
    return bytes(buf[:limit]).decode("utf-8", "replace")


def _status_failure(response: httpx.Response, host: str) -> _Failure:
    code = response.status_code
    detail = _error_detail(_read_bounded(response))
    message = f"{host} returned HTTP {code} {response.reason_phrase}".rstrip()
    if detail:
        message += f": {detail}"
    if code in (401, 403):
        message += " (check the API key)"
    return _Failure(message, retryable=code >= 500 or code == 429)


# --- server-sent events -------------------------------------------------------------


def _sse_data(lines: Iterable[str], on_junk: Callable[[str], None]) -> Iterator[str]:
    """The `data` payload of each SSE event; comments (`: ping`) and known fields skipped."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value.removeprefix(" "))
        elif name not in _SSE_FIELDS:
            on_junk(line)
    if data:  # a stream cut without its final blank line still counts
        yield "\n".join(data)


def _until_cancelled(lines: Iterable[str], cancel: CancelToken) -> Iterator[str]:
    """Stop reading at the next line once cancelled: keep-alive comments are lines too,
    so a stop is noticed even while a server is only pinging."""
    for line in lines:
        if cancel.cancelled:
            return
        yield line


class _ChunkReader:
    """Turns `chat.completion.chunk` payloads into pieces; remembers what the stream said."""

    def __init__(self, host: str, redact: Redact) -> None:
        self._host = host
        self._redact = redact
        self._in_reasoning = False
        self.valid = 0
        self.malformed = 0
        self._first_malformed = ""
        self.finish_reason = ""
        self.prompt_tokens: int | None = None
        self.tool_calls = False
        self.calls = ToolCallDeltas()

    def junk(self, line: str) -> None:
        self.malformed += 1
        self._first_malformed = self._first_malformed or _one_line(self._redact(line), 80)
        log.debug("%s: skipping malformed stream line: %s", self._host, _one_line(self._redact(line), 200))

    def feed(self, data: str) -> Iterator[Piece]:
        chunk = self._parse(data)
        if chunk is None:
            return
        self.valid += 1
        self._raise_on_error(chunk)
        self._note_usage(chunk)
        choice = _as_dict(next(iter(_as_list(chunk.get("choices"))), None))
        if choice is None:
            return
        if isinstance(reason := choice.get("finish_reason"), str):
            self.finish_reason = reason
        delta = _as_dict(choice.get("delta")) or {}
        reasoning = _str_field(delta, "reasoning_content") or _str_field(delta, "reasoning")
        self.tool_calls = self.tool_calls or bool(delta.get("tool_calls"))
        self.calls.add(delta.get("tool_calls"))
        yield from self._reasoning(reasoning)
        yield from self._content(_str_field(delta, "content"))

    def close_thinking(self) -> Iterator[Piece]:
        if self._in_reasoning:
            self._in_reasoning = False
            yield THINK_CLOSE

    def finish(self, *, saw_done: bool) -> None:
        """A stream that ended with nothing readable is an error (a bare `[DONE]` is not)."""
        if self.tool_calls and not self.calls.wanted:
            log.info("%s sent structured tool calls though no tools were offered; they were dropped", self._host)
        if self.valid == 0 and self.malformed:
            raise _Failure(
                f"{self._host} sent no readable stream data "
                f"({self.malformed} malformed lines, first: {self._first_malformed!r})"
            )
        if self.valid == 0 and not saw_done:
            raise _Failure(f"{self._host} ended the reply stream without sending anything")

    def _parse(self, data: str) -> dict[str, object] | None:
        try:
            chunk = _as_dict(bounded_loads(data))
        except (ValueError, RecursionError):  # RecursionError: a chunk nested past what json parses
            chunk = None
        if chunk is None:
            self.junk(data)
        return chunk

    def _raise_on_error(self, chunk: dict[str, object]) -> None:
        if "error" in chunk or chunk.get("object") == "error":  # the latter: older vLLM
            message = _one_line(_json_error_message(chunk) or str(chunk.get("error")))
            raise _Failure(f"{self._host} reported an error: {message}")

    def _note_usage(self, chunk: dict[str, object]) -> None:
        usage = _as_dict(chunk.get("usage"))
        tokens = usage.get("prompt_tokens") if usage is not None else None
        if isinstance(tokens, int):
            self.prompt_tokens = tokens

    def _reasoning(self, text: str) -> Iterator[Piece]:
        if not text:
            return
        if not self._in_reasoning:
            self._in_reasoning = True
            yield THINK_OPEN
        yield Piece(text)

    def _content(self, text: str) -> Iterator[Piece]:
        if not text:
            return
        if self._in_reasoning:
            self._in_reasoning = False
            yield THINK_CLOSE
        yield Piece(text)


# --- the backend --------------------------------------------------------------------


class OpenAIBackend(PlainBackend):
    """Streams chat completions from an OpenAI-compatible server.

    `timeout` is the longest silence tolerated while waiting for data (connecting waits
    at most `CONNECT_TIMEOUT_S`). `retry_delays` are the pauses before retry 1, 2, …
    `supports_grammar` may be set for a llama.cpp server, which honours `grammar` (and
    reports a grammar it cannot parse as a failed request).

    A stop is noticed at the next line the server sends, or at once when the server is
    silent (reading a long prompt): the stop shuts the socket down, waking the blocked read.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        api_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 2,
        retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS_S,
        supports_grammar: bool = False,
        idle_timeout: float | None = None,
    ) -> None:
        if timeout <= 0 or max_retries < 0 or any(d < 0 for d in retry_delays):
            raise ConfigError("timeout must be positive; max_retries and retry_delays non-negative")
        self._idle_timeout = idle_timeout if idle_timeout is not None else default_idle_timeout()
        if not self._idle_timeout > 0:
            raise ConfigError("the idle timeout must be a positive number of seconds")
        _check_api_key(api_key)
        self._server = _parse_base_url(base_url)
        self.model = model
        self.name = f"{model or 'openai'}@{self._server.host}"
        # Tools go to the server as `tools`; its tool-call deltas come back as Hermes markup.
        # Images go as image_url data URLs; a server without vision answers with its own error.
        self.capabilities = Capabilities(grammar=supports_grammar, tools=True, device="Remote", vision=True)
        self._api_key = api_key or None
        self._redact = _redactor(self._api_key)
        self._transport = transport
        self._timeout = timeout
        self._max_retries = max_retries
        self._retry_delays = tuple(retry_delays) or (0.0,)
        self._client: httpx.Client | None = None  # built on first use: no work at construction

    def __repr__(self) -> str:
        key = ", api_key=***" if self._api_key else ""
        return f"OpenAIBackend({self._server.base!r}, model={self.model!r}{key})"

    @property
    def base_url(self) -> str:
        return self._server.base

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Generator[Piece, None, None]:
        self._server.require_allowed()  # refused before any connection, and never retried
        body = self._body(request)
        info.receipt = {
            "backend": "openai-compatible",
            "server": self._server.host,
            "model": {"name": self.model},
            **request_receipt(request, request.sampling.seed),
        }
        attempt = 0
        while True:
            if cancel.cancelled:
                info.finish_reason = FinishReason.CANCELLED
                return
            yielded = False
            try:
                with closing(self._attempt(body, cancel, info)) as pieces:
                    for piece in pieces:
                        yielded = True
                        yield piece
                return
            except _Failure as failure:
                if yielded or not failure.retryable or attempt >= self._max_retries:
                    message = self._redact(failure.message)
                    raise BackendError(message) from _safe_cause(failure.__cause__, self._redact)
                attempt += 1
                log.info("%s (retry %d of %d)", self._redact(failure.message), attempt, self._max_retries)
                self._pause(attempt, cancel)
                if not cancel.cancelled:  # count only retries actually made
                    info.retries += 1

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    # --- one attempt ---

    def _attempt(self, body: dict[str, Any], cancel: CancelToken, info: StreamInfo) -> Generator[Piece, None, None]:
        """One HTTP request; transport errors become `_Failure`; the response always closes."""
        try:
            with (
                network_guard.feature(NETWORK_FEATURE),
                self._http().stream("POST", f"{self._server.base}/chat/completions", json=body) as response,
            ):
                if response.status_code >= 300:
                    raise _status_failure(response, self._server.host)
                forget = cancel.on_cancel(_hang_up(response))
                try:
                    yield from self._pieces(response, cancel, info, int(body["max_tokens"]), tools="tools" in body)
                finally:
                    forget()
        except httpx.RequestError as exc:
            if cancel.cancelled:  # our own hang-up, or a failure that no longer matters
                info.finish_reason = FinishReason.CANCELLED
                return
            raise _transport_failure(exc, self._server.host, self._timeout) from exc

    def _pieces(
        self, response: httpx.Response, cancel: CancelToken, info: StreamInfo, max_tokens: int, tools: bool = False
    ) -> Iterator[Piece]:
        reader = _ChunkReader(self._server.host, self._redact)
        reader.calls.wanted = tools
        reader.calls.room = max(1, max_tokens) * _CHARS_PER_TOKEN_CAP
        budget = _TokenBudget(max_tokens)
        idle = _IdleWatch(self._server.host, self._idle_timeout)
        saw_done = False
        lines = idle.watch(_until_cancelled(response.iter_lines(), cancel))
        for data in _sse_data(lines, reader.junk):
            if cancel.cancelled:
                break
            if data.strip() == "[DONE]":
                saw_done = True
                break
            for piece in reader.feed(data):
                piece = budget.take(piece)
                if piece.text:
                    idle.content()
                    yield piece
                if budget.spent:
                    break
            budget.charge(reader.calls.take_cost())  # tool-call fragments count like text
            if budget.spent:
                log.info("%s ignored max_tokens=%d; the reply was cut off here", self._server.host, max_tokens)
                break
        yield from reader.close_thinking()
        yield from reader.calls.pieces()  # the server's own parsed calls, as markup the guardrail parses
        if cancel.cancelled and not saw_done:
            info.finish_reason = FinishReason.CANCELLED
            return
        reader.finish(saw_done=saw_done or budget.spent)
        if reader.prompt_tokens is not None:
            info.prompt_tokens = reader.prompt_tokens
        if budget.spent or reader.finish_reason == FinishReason.LENGTH:
            info.finish_reason = FinishReason.LENGTH
            return
        if not saw_done and not reader.finish_reason:
            # Neither a finish reason nor [DONE]: the connection ended mid-reply.
            raise _Failure(f"{self._server.host} ended the stream without finishing the reply (cut off)")
        info.finish_reason = FinishReason.STOP

    def _body(self, request: Request) -> dict[str, Any]:
        s = request.sampling
        body: dict[str, Any] = {
            "messages": [wire_message(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": request.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            # Not OpenAI fields, but llama.cpp's server reads them and others ignore them.
            "top_k": s.top_k,
            "min_p": s.min_p,
            "repeat_penalty": s.repeat_penalty,
        }
        if self.model:
            body["model"] = self.model
        if s.seed is not None:
            body["seed"] = s.seed
        if request.tools:
            body["tools"] = [dict(t) for t in request.tools]
        if request.grammar is not None:
            body["grammar"] = request.grammar
        return body

    def _http(self) -> httpx.Client:
        if self._client is None:
            timeout = httpx.Timeout(self._timeout, connect=min(self._timeout, CONNECT_TIMEOUT_S))
            self._client = _client(self._api_key, timeout, self._transport)
        return self._client

    def _pause(self, attempt: int, cancel: CancelToken) -> None:
        """Back off before retry `attempt` (1-based), waking early on cancel."""
        delay = self._retry_delays[min(attempt, len(self._retry_delays)) - 1]
        deadline = time.monotonic() + delay
        while not cancel.cancelled and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, _CANCEL_POLL_S))


def default_idle_timeout() -> float:
    """`EMBER_IDLE_TIMEOUT_S` when set to a positive number, else `DEFAULT_IDLE_TIMEOUT_S`."""
    text = os.environ.get(IDLE_TIMEOUT_ENV, "").strip()
    try:
        value = float(text) if text else DEFAULT_IDLE_TIMEOUT_S
    except ValueError:
        value = -1.0
    if not (0 < value < float("inf")):
        raise ConfigError(f"{IDLE_TIMEOUT_ENV} must be a positive number of seconds, got {text!r}")
    return value


class _TokenBudget:
    """Counts streamed pieces against `max_tokens`; trims the piece that overshoots."""

    def __init__(self, max_tokens: int) -> None:
        self._left = max(1, max_tokens)
        self.spent = False

    def take(self, piece: Piece) -> Piece:
        if piece.special or not piece.text:
            return piece
        cost = max(1, len(piece.text) // _CHARS_PER_TOKEN_CAP)
        if cost >= self._left:
            self.spent = True
            keep = self._left * _CHARS_PER_TOKEN_CAP
            self._left = 0
            return Piece(piece.text[:keep]) if len(piece.text) > keep else piece
        self._left -= cost
        return piece

    def charge(self, cost: int) -> None:
        """Count `cost` tokens that arrived outside the text (tool-call fragments)."""
        if cost:
            self._left -= cost
            self.spent = self.spent or self._left <= 0


class _IdleWatch:
    """Fails the stream when no reply text arrives for `seconds` (keep-alives do not count)."""

    def __init__(self, host: str, seconds: float) -> None:
        self._host = host
        self._seconds = seconds
        self._last = time.monotonic()

    def content(self) -> None:
        self._last = time.monotonic()

    def watch(self, lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            if time.monotonic() - self._last > self._seconds:
                raise _Failure(
                    f"{self._host} sent no reply text for {self._seconds:g} s (set {IDLE_TIMEOUT_ENV} to wait longer)"
                )
            yield line


def _hang_up(response: httpx.Response) -> Callable[[], None]:
    """A stop while the server is silent (a long prompt) would wait for the read timeout:
    shutting the socket down from the stopping thread wakes the blocked read at once."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None

    def shut() -> None:
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    return shut


def list_models(
    base_url: str,
    api_key: str | None = None,
    transport: httpx.BaseTransport | None = None,
    *,
    timeout: float = LIST_MODELS_TIMEOUT_S,
) -> list[str]:
    """The model ids a server offers (`GET {base}/models`), in the server's order."""
    _check_api_key(api_key)
    server = _parse_base_url(base_url)
    server.require_allowed()
    redact = _redactor(api_key)
    try:
        with network_guard.feature(NETWORK_FEATURE), _client(api_key, httpx.Timeout(timeout), transport) as client:
            with client.stream("GET", f"{server.base}/models") as response:
                if response.status_code >= 300:
                    raise _status_failure(response, server.host)
                text = response.read().decode("utf-8", "replace")
    except httpx.RequestError as exc:
        raise BackendError(redact(_transport_failure(exc, server.host, timeout).message)) from _safe_cause(exc, redact)
    except _Failure as failure:
        raise BackendError(redact(failure.message)) from None
    return _model_ids(text, server.host)


def _model_ids(text: str, host: str) -> list[str]:
    try:
        body = _as_dict(bounded_loads(text))
    except (ValueError, RecursionError):
        body = None
    if body is None:
        raise BackendError(f"{host} did not answer /models with a JSON object")
    ids: list[str] = []
    for entry in _as_list(body.get("data")) + _as_list(body.get("models")):
        item = _as_dict(entry) or {}
        model_id = _str_field(item, "id") or _str_field(item, "model") or _str_field(item, "name")
        if model_id and model_id not in ids:
            ids.append(model_id)
    return ids
