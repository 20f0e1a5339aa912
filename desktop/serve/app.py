"""The ASGI app: `/v1/models`, `/v1/chat/completions`, `/v1/embeddings` on one `Engine` (Starlette).

Each chat request is read with a size limit, checked (`desktop.serve.wire`), queued for the
model in arrival order (`desktop.serve.admission`), then run as a `TurnJob`. A failure
before the first event is an HTTP error with the right status; after it (streaming), an
error chunk and `[DONE]`. A client that disconnects, while queued or mid-reply, frees its
place and stops its generation. Every error is in OpenAI's shape (`desktop.serve.errors`), or Ollama's on `/api/…`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from desktop.serve.admission import DEFAULT_MAX_WAITING, ModelLine, QueueFull
from desktop.serve.completions import Envelope, Reply, Shape, TurnJob, choice_call
from desktop.serve.documents import check_collection
from desktop.serve.embeddings import EmbedCall, TextEmbedder, check_dimensions, embed_all, parse_embeddings
from desktop.serve.embeddings import model_id as embedding_model_id
from desktop.serve.embeddings import response as embedding_response
from desktop.serve.errors import ApiError, bad_request, turn_error
from desktop.serve.gate import BrowserGate
from desktop.serve.origins import HostPolicy, OriginPolicy
from desktop.serve.record import ApiHistory
from desktop.serve.text_completions import TextEnvelope
from desktop.serve.wire import ChatCall, Defaults, parse_chat, parse_completion, parse_json
from desktop.serve.wire_images import IMAGES_BODY_BYTES, images_length
from engine.api.session import Engine
from engine.api.values import CancelToken, Event, TurnError

log = logging.getLogger("desktop.serve")

MAX_BODY_BYTES = 4 * 1024 * 1024  # far more text than any local context holds
# A chat request may also carry a message's images as base64 data URLs (a third larger than
# the files): room for MAX_IMAGES at the API's per-image cap, and still a firm bound (~89 MB).
MAX_CHAT_BODY_BYTES = MAX_BODY_BYTES + IMAGES_BODY_BYTES
# Chat bodies past the text bound (pictures) read on LARGE_READS at once; the others wait with their
# bytes unread (the socket holds them back), so 256 connections cannot make the server hold 256 bodies
# of 89 MB. Every body reads its first MAX_BODY_BYTES without a slot, so slow small ones hold none.
LARGE_READS = 2
PING_S = 15  # SSE keep-alive comments while a long prompt is read
DEFAULT_MODEL = "default"  # a name for whichever model is served (chat takes any name)
T = TypeVar("T")


@dataclass
class ServeState:
    """What the app serves: the engine, its model's name and defaults, the key, the line."""

    engine: Engine
    model_id: Callable[[], str]
    defaults: Callable[[], Defaults]
    api_key: str | None = None
    line: ModelLine = field(default_factory=lambda: ModelLine(DEFAULT_MAX_WAITING))
    on_request: Callable[[], None] = lambda: None  # the window's request counter
    jobs: set[TurnJob] = field(default_factory=lambda: set[TurnJob]())  # turns in progress
    history: ApiHistory | None = None  # `--record`: requests become conversations
    embedder: TextEmbedder | None = None  # `--embedder`: `/v1/embeddings` answers
    origins: OriginPolicy = field(default_factory=OriginPolicy.default)  # browser pages that may call
    requests: int = 0
    large_reads: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(LARGE_READS))


def build_app(
    state: ServeState, hosts: HostPolicy | None = None, more_routes: Callable[[ServeState], list[Route]] | None = None
) -> Starlette:
    """The routes behind the browser gate; `hosts` None: any Host header (in-process tests of the app alone)."""

    async def models(request: Request) -> Response:
        authorize(request, state)
        return JSONResponse({"object": "list", "data": _model_list(state)})

    async def chat(request: Request) -> Response:
        authorize(request, state)
        state.requests += 1
        state.on_request()
        body = await read_chat_body(request, state)
        call = check_text_bound(len(body), parse_chat(parse_json(body), state.defaults()))
        refuse_embedder(state, call.model)
        if call.collection is not None:  # a 404 now, not after waiting for the model
            await asyncio.to_thread(check_collection, call.collection)
        return await _complete(request, state, call, Envelope(state.model_id()))

    async def text(request: Request) -> Response:
        authorize(request, state)
        state.requests += 1
        state.on_request()
        call = parse_completion(parse_json(await read_body(request)), state.defaults())
        refuse_embedder(state, call.model)
        return await _complete(request, state, call, TextEnvelope(state.model_id()))

    async def model(request: Request) -> Response:
        authorize(request, state)
        wanted = request.path_params["id"]
        entry = served_model(state, wanted)
        if entry is not None:
            return JSONResponse(entry)
        raise ApiError(
            404,
            f"no model {wanted!r} here (GET /v1/models lists what is served)",
            code="model_not_found",
            param="model",
        )

    async def embeddings(request: Request) -> Response:
        authorize(request, state)
        if state.embedder is None:
            raise ApiError(
                501,
                "this server has no embedding model: start it with `ember serve --embedder GGUF` "
                "(or --embedder default)",
                code="embeddings_unavailable",
            )
        state.requests += 1
        state.on_request()
        call = parse_embeddings(parse_json(await read_body(request)))
        return await _embed(request, state, state.embedder, call)

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{id:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", text, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        *(more_routes(state) if more_routes else []),
    ]
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        ApiError: _api_error,
        HTTPException: _http_error,
        Exception: _internal_error,
    }
    gate = Middleware(BrowserGate, origins=state.origins, hosts=hosts)
    return Starlette(routes=routes, exception_handlers=handlers, middleware=[gate])


def served_model(state: ServeState, name: str) -> dict[str, Any] | None:
    """The `/v1/models` entry `name` asks for: a listed id, or `default` (what chat accepts and the
    README sends), which is the model being served; None when it names neither."""
    entries = _model_list(state)
    if name == DEFAULT_MODEL:
        return entries[0]
    return next((entry for entry in entries if entry["id"] == name), None)


def _model_list(state: ServeState) -> list[dict[str, Any]]:
    """The chat model, then the embedder; `capabilities` (Ollama's words) tells a picker which chats."""
    created = int(time.time())
    chat = {"id": state.model_id(), "object": "model", "created": created, "owned_by": "ember"}
    entries = [{**chat, "capabilities": ["completion"]}]
    embedder = embedder_id(state)
    if embedder is not None:
        entries.append({**chat, "id": embedder, "capabilities": ["embedding"]})
    return entries


def embedder_id(state: ServeState) -> str | None:
    """The embedding model's id, when it is served and is not also the chat model."""
    if state.embedder is None or embedding_model_id(state.embedder) == state.model_id():
        return None
    return embedding_model_id(state.embedder)


def refuse_embedder(state: ServeState, name: str) -> None:
    """A 400 when a chat or completion request names the embedding model (any other name is the chat model's)."""
    embedder = embedder_id(state)
    if embedder is not None and name.removesuffix(":latest") == embedder:
        raise bad_request(
            f"{name!r} is an embedding model: it answers /v1/embeddings (and /api/embed), not chat; "
            f"ask {state.model_id()!r} or 'default'",
            "model",
            "model_not_chat",
        )


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response(request.url.path)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {
        404: "no such endpoint (Ember serves /v1/models, /v1/chat/completions, /v1/completions, "
        "/v1/embeddings, and Ollama's /api/…)",
        405: "this endpoint does not take that method",
    }
    return ApiError(
        exc.status_code, messages.get(exc.status_code, str(exc.detail)), headers=dict(exc.headers or {})
    ).response(request.url.path)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.error("serve: internal error", exc_info=exc)
    return ApiError(500, f"internal error: {type(exc).__name__}").response(request.url.path)


def authorize(request: Request, state: ServeState) -> None:
    if state.api_key is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), state.api_key.encode()):
        raise ApiError(401, "a valid API key is required (Authorization: Bearer KEY)", code="invalid_api_key")


def check_text_bound(body_length: int, call: ChatCall) -> ChatCall:
    """`call`, unless its body without its images is over the text bound (413): a chat body may
    be as large as its images need, its text may not."""
    if body_length - images_length(call.messages) > MAX_BODY_BYTES:
        raise _too_large(MAX_BODY_BYTES, "the request's text, images aside,")
    return call


async def read_chat_body(request: Request, state: ServeState) -> bytes:
    """A chat body: as large as its pictures need. Its first `MAX_BODY_BYTES` are read like any
    body's; only a body that really goes past them reads on in one of `LARGE_READS` slots, so
    slow senders of small or unsized bodies cannot hold the slots (a declared length is no proof)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > MAX_CHAT_BODY_BYTES:
        raise _too_large(MAX_CHAT_BODY_BYTES)
    body = bytearray()
    chunks = request.stream()
    if await _read_into(body, chunks, MAX_BODY_BYTES, stop_past=True):
        return bytes(body)
    async with state.large_reads:
        await _read_into(body, chunks, MAX_CHAT_BODY_BYTES)
    return bytes(body)


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, refused with 413 as soon as it passes `limit` (a declared length is checked first)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    body = bytearray()
    await _read_into(body, request.stream(), limit)
    return bytes(body)


async def _read_into(body: bytearray, chunks: AsyncIterator[bytes], limit: int, *, stop_past: bool = False) -> bool:
    """Append `chunks` to `body`; True at the body's end. Past `limit`: 413, or False (`stop_past`)."""
    try:
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                if stop_past:
                    return False
                raise _too_large(limit)
    except ClientDisconnect:  # the client left, or was cut off for sending too slowly: nobody reads this
        raise ApiError(408, "the request body did not arrive in time", code="request_timeout") from None
    return True


def _too_large(limit: int, what: str = "the request body") -> ApiError:
    return ApiError(413, f"{what} is larger than {limit // (1024 * 1024)} MB", code="request_too_large")


async def until_disconnected(request: Request) -> None:
    """Return when the client goes away (the body must have been read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _or_disconnect(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result; `ClientGone` (and `work` cancelled) when the client leaves first."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(until_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise ClientGone
    return task.result()


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


CLIENT_GONE = 499  # nginx's "client closed request": logged, never seen by anyone


async def _take_turn_in_line(request: Request, state: ServeState) -> bool:
    """Wait for the model's line (429 when it is full); False when the client left meanwhile."""
    try:
        await _or_disconnect(request, state.line.acquire())
    except QueueFull as full:
        raise ApiError(429, str(full), code="queue_full", headers={"Retry-After": str(full.retry_after_s)}) from None
    except ClientGone:
        return False
    return True


@dataclass
class Started:
    """A choice whose turn has produced its first event (so a failure so far was an HTTP status)."""

    events: AsyncGenerator[Event, None]
    reply: Reply
    first: Event


def _begin(state: ServeState, call: ChatCall, index: int) -> tuple[AsyncGenerator[Event, None], Reply]:
    """Run the choice's turn (the caller holds the model's line, which the job releases)."""
    job = TurnJob(state.engine, call, state.line.release, state.history, state.model_id())
    state.jobs.add(job)
    job.task.add_done_callback(lambda _: state.jobs.discard(job))
    return job.events(), Reply(call, job.cancel, index=index)


async def start_choice(request: Request, state: ServeState, call: ChatCall, index: int) -> Started | None:
    """The choice under way, its first event in hand; None when the client left; an ApiError when
    the turn failed before it produced anything."""
    if not await _take_turn_in_line(request, state):
        return None
    events, reply = _begin(state, call, index)
    try:  # a disconnect cancels the wait, which closes `events`, which cancels the turn
        first = await _or_disconnect(request, anext(events, None))
    except BaseException:
        await events.aclose()
        raise
    if first is None or isinstance(first, TurnError):
        await events.aclose()
        raise _shutting_down() if first is None else turn_error(first)
    return Started(events, reply, first)


async def _complete(request: Request, state: ServeState, call: ChatCall, envelope: Shape) -> Response:
    try:
        started = await start_choice(request, state, call, 0)
        if started is None:
            return Response(status_code=CLIENT_GONE)
        if call.stream:
            return EventSourceResponse(_stream(started, state, envelope), ping=PING_S, sep="\n")
        replies: list[Reply] = []
        for index in range(call.n):  # one after another, in the model's line each time
            if index:
                started = await start_choice(request, state, choice_call(call, index), index)
                if started is None:
                    return Response(status_code=CLIENT_GONE)
            replies.append(await finish_choice(request, started))
    except ClientGone:
        return Response(status_code=CLIENT_GONE)
    return JSONResponse(envelope.completion(replies))


async def finish_choice(request: Request, started: Started) -> Reply:
    """The choice's whole reply (non-streamed)."""
    reply = started.reply
    try:
        reply.take(started.first)
        await _or_disconnect(request, _collect(started.events, reply))
    finally:
        await started.events.aclose()
    if reply.error is not None:
        raise turn_error(reply.error)
    if not reply.finished:
        raise _shutting_down()
    return reply


async def _embed(request: Request, state: ServeState, embedder: TextEmbedder, call: EmbedCall) -> Response:
    done = await embed_rows(request, state, embedder, call)
    if done is None:
        return Response(status_code=CLIENT_GONE)
    rows, tokens = done
    return JSONResponse(embedding_response(call, embedding_model_id(embedder), rows, tokens))


async def embed_rows(
    request: Request, state: ServeState, embedder: TextEmbedder, call: EmbedCall
) -> tuple[list[Any], int] | None:
    """Embed in the model's line, on a thread; the line moves on only once that thread has finished.
    None when the client left."""
    check_dimensions(call, embedder)
    if not await _take_turn_in_line(request, state):
        return None
    loop = asyncio.get_running_loop()
    cancel = CancelToken()  # the one token, as a turn's (completions.TurnJob)

    def work() -> tuple[list[Any], int]:
        try:
            return embed_all(embedder, call.texts, cancel)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone anyway
                loop.call_soon_threadsafe(state.line.release)

    job = loop.run_in_executor(None, work)
    try:
        return await _or_disconnect(request, asyncio.shield(job))
    except (ClientGone, asyncio.CancelledError) as exc:
        cancel.cancel()  # the thread stops at its next batch
        job.add_done_callback(_quiet)
        if isinstance(exc, ClientGone):
            return None
        raise


def _quiet(job: asyncio.Future[Any]) -> None:
    """Collect an abandoned job's outcome (`Cancelled`, or an error nobody waits for)."""
    if not job.cancelled():
        job.exception()


def _shutting_down() -> ApiError:
    return ApiError(503, "the server is shutting down", code="shutting_down")


async def _collect(events: AsyncIterator[Event], reply: Reply) -> None:
    async for event in events:
        reply.take(event)


async def _stream(started: Started, state: ServeState, envelope: Shape) -> AsyncIterator[str]:
    """SSE data lines: per choice a role chunk, the deltas and its finish chunk; then usage if
    asked, and `[DONE]`. A failure after the first chunk is an error chunk.

    sse-starlette cancels this generator when the client disconnects; closing a choice's
    events then cancels its turn.
    """
    call = started.reply.call
    replies: list[Reply] = []
    current: Started | ApiError = started
    for index in range(call.n):
        if index:  # the next choice waits in the model's line like any request
            current = await _next_choice(state, choice_call(call, index), index)
        if isinstance(current, ApiError):
            yield json.dumps(current.body(), ensure_ascii=False)
            break
        replies.append(current.reply)
        async for line in _stream_choice(current, envelope):
            yield line
        if current.reply.error is not None or not current.reply.finished:
            break
    else:
        if call.include_usage:
            yield json.dumps(envelope.usage_chunk(replies))
    yield "[DONE]"


async def _next_choice(state: ServeState, call: ChatCall, index: int) -> Started | ApiError:
    try:
        await state.line.acquire()
    except QueueFull as full:
        return ApiError(429, str(full), code="queue_full")
    events, reply = _begin(state, call, index)
    first = await anext(events, None)
    if first is None or isinstance(first, TurnError):
        await events.aclose()
        return _shutting_down() if first is None else turn_error(first)
    return Started(events, reply, first)


async def _stream_choice(started: Started, envelope: Shape) -> AsyncIterator[str]:
    """One choice's chunks: its opening chunk, deltas, and finish chunk (or an error chunk)."""
    reply, events = started.reply, started.events
    try:
        opening = envelope.opening(reply)
        if opening is not None:
            yield json.dumps(opening, ensure_ascii=False)
        pending: list[Event] = [started.first]
        while True:
            event = pending.pop() if pending else await anext(events, None)
            if event is None:
                break
            delta = reply.take(event)
            if delta:
                yield json.dumps(envelope.chunk(reply, delta), ensure_ascii=False)
            if reply.finished:
                break
        if reply.error is not None or not reply.finished:  # not finished: the server is stopping
            error = turn_error(reply.error) if reply.error is not None else _shutting_down()
            yield json.dumps(error.body(), ensure_ascii=False)
        else:
            yield json.dumps(envelope.chunk(reply, {}, reply.finish_reason))
    finally:
        await events.aclose()
