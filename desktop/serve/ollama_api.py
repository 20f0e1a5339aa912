"""Ollama's API beside OpenAI's, on the same port, key, browser gate and model line.

`/api/chat` and `/api/generate` run the same turn as `/v1/chat/completions` and
`/v1/completions` (`ollama_wire` turns their bodies into a `ChatCall`), answered in Ollama's
shape: one JSON object, or NDJSON lines ending with a `done: true` line that carries the counts
and durations. `/api/tags`, `/api/show`, `/api/ps` (filled from the GGUF: `ollama_models`),
`/api/version`, `/api/embed` and the legacy `/api/embeddings` answer what Open WebUI and the
`ollama` client ask before and beside a chat; `/api/pull` fetches a model from the Hugging Face
Hub (`ollama_pull`). Every error on `/api/…` is `{"error": "…"}`, as Ollama's.

A request that only asks for the model to be loaded (no messages, no prompt: how Ollama's
clients preload) is answered as Ollama answers it, `done_reason: "load"`, without a turn: the
model is already loaded, and nothing is queued, counted or recorded.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from desktop.serve import app as api
from desktop.serve.completions import Reply
from desktop.serve.embeddings import EmbedCall, parse_embeddings
from desktop.serve.errors import ApiError
from desktop.serve.ollama_models import ModelFacts, facts_of
from desktop.serve.ollama_pull import pull
from desktop.serve.ollama_wire import is_load, parse_ollama_chat, parse_ollama_generate
from desktop.serve.partial_args import finished_fields
from desktop.serve.wire import ChatCall, parse_json
from engine.api.values import ToolCall

OLLAMA_API_VERSION = "0.12.0"  # the Ollama release whose API these routes follow
NEVER = "2318-08-31T00:00:00Z"  # `/api/ps`' expiry of a model kept loaded (Ollama's `keep_alive: -1`)
Handler = Callable[[Request], Awaitable[Response]]


def ollama_routes(state: api.ServeState) -> list[Route]:
    """The `/api/…` routes on `state`'s engine and line."""

    def guarded(handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            try:
                api.authorize(request, state)
                return await handler(request)
            except ApiError as exc:  # Ollama's clients read `error` as a string
                return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

        return run

    async def tags(_request: Request) -> Response:
        return JSONResponse({"models": [entry for entry, _ in await _served(state)]})

    async def ps(_request: Request) -> Response:
        gpu = state.engine.backend is not None and state.engine.backend.capabilities.device == "GPU"
        running = [
            {**entry, "expires_at": NEVER, "size_vram": entry["size"] if gpu and i == 0 else 0}
            for i, (entry, _) in enumerate(await _served(state))
        ]
        for entry in running:
            entry.pop("modified_at", None)
        return JSONResponse({"models": running})

    async def version(_request: Request) -> Response:
        return JSONResponse({"version": OLLAMA_API_VERSION})

    async def show(request: Request) -> Response:
        body = await _body(request)
        name = _bare(str(body.get("model") or body.get("name") or ""))
        served = await _served(state)
        wanted = served[0] if name in ("", api.DEFAULT_MODEL) else None
        wanted = wanted or next((s for s in served if s[0]["name"] == name), None)
        if wanted is None:
            raise ApiError(404, f"model '{name}' not found (GET /api/tags lists what is served)")
        return JSONResponse(_show(state, *wanted))

    async def turn(request: Request, *, chat: bool) -> Response:
        """`/api/chat` (`chat`) or `/api/generate`: a preload, or a turn."""
        raw = await api.read_chat_body(request, state)  # room for `images`
        body = parse_json(raw)
        if is_load(body, chat=chat):
            return _loaded(state, body, chat=chat)
        parse = parse_ollama_chat if chat else parse_ollama_generate
        call = api.check_text_bound(len(raw), parse(body, state.defaults()))
        api.refuse_embedder(state, str(body.get("model") or ""))
        return await _answer(request, state, call, chat=chat)

    async def chat(request: Request) -> Response:
        return await turn(request, chat=True)

    async def generate(request: Request) -> Response:
        return await turn(request, chat=False)

    async def embed(request: Request) -> Response:
        call = parse_embeddings(await _body(request))
        started = time.perf_counter_ns()
        done = await _embedded(request, call)
        if done is None:
            return Response(status_code=api.CLIENT_GONE)
        rows, tokens = done
        return JSONResponse(
            {
                "model": call.model or state.model_id(),
                "embeddings": [list(r) for r in rows],
                "total_duration": time.perf_counter_ns() - started,
                "prompt_eval_count": tokens,
            }
        )

    async def embeddings(request: Request) -> Response:
        """The legacy endpoint: one `prompt`, one `embedding`."""
        body = await _body(request)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ApiError(400, "'prompt' must be a string (the text to embed)")
        done = await _embedded(request, parse_embeddings({"model": body.get("model"), "input": prompt}))
        if done is None:
            return Response(status_code=api.CLIENT_GONE)
        return JSONResponse({"embedding": list(done[0][0])})

    async def pulled(request: Request) -> Response:
        return await pull(await _body(request))

    async def _embedded(request: Request, call: EmbedCall) -> tuple[list[Any], int] | None:
        if state.embedder is None:
            raise ApiError(501, "this server has no embedding model: start it with `ember serve --embedder GGUF`")
        state.requests += 1
        state.on_request()
        return await api.embed_rows(request, state, state.embedder, call)

    return [
        Route("/api/tags", guarded(tags), methods=["GET"]),
        Route("/api/ps", guarded(ps), methods=["GET"]),
        Route("/api/embeddings", guarded(embeddings), methods=["POST"]),
        Route("/api/pull", guarded(pulled), methods=["POST"]),
        Route("/api/version", guarded(version), methods=["GET"]),
        Route("/api/show", guarded(show), methods=["POST"]),
        Route("/api/chat", guarded(chat), methods=["POST"]),
        Route("/api/generate", guarded(generate), methods=["POST"]),
        Route("/api/embed", guarded(embed), methods=["POST"]),
    ]


async def _body(request: Request) -> dict[str, Any]:
    return parse_json(await api.read_body(request))


def _bare(name: str) -> str:
    return name.removesuffix(":latest")


def _loaded(state: api.ServeState, body: dict[str, Any], *, chat: bool) -> Response:
    """Ollama's answer to a preload: one object (streamed or not), `done_reason: "load"`."""
    if state.engine.backend is None:
        raise ApiError(503, "no model is loaded: choose one in the window (or start `ember serve --model PATH`)")
    model = body.get("model")
    out: dict[str, Any] = {"model": model if isinstance(model, str) else state.model_id(), "created_at": _now()}
    out.update({"message": {"role": "assistant", "content": ""}} if chat else {"response": ""})
    out.update(done=True, done_reason="load")
    return JSONResponse(out)


async def _served(state: api.ServeState) -> list[tuple[dict[str, Any], ModelFacts]]:
    """`/api/tags`' entries, the chat model first, each with the facts of its file (read off the loop)."""
    files: list[tuple[str, Path | None, str]] = [
        (state.model_id(), getattr(state.engine.backend, "path", None), "completion")
    ]
    embedder = api.embedder_id(state)
    if embedder is not None:
        files.append((embedder, getattr(state.embedder, "path", None), "embedding"))
    out: list[tuple[dict[str, Any], ModelFacts]] = []
    for name, path, capability in files:
        facts = await asyncio.to_thread(facts_of, path if isinstance(path, Path) else None)
        entry = {
            "name": name,
            "model": name,
            "modified_at": facts.modified_at or _now(),
            "size": facts.size,
            "digest": facts.digest,
            "details": facts.details(),
            "capabilities": [capability],  # Open WebUI and others keep an embedder out of chat pickers
        }
        out.append((entry, facts))
    return out


def _show(state: api.ServeState, entry: dict[str, Any], facts: ModelFacts) -> dict[str, Any]:
    backend = state.engine.backend
    capabilities = entry["capabilities"]
    info = dict(facts.model_info)
    if capabilities == ["completion"] and backend is not None:
        context = backend.capabilities.n_ctx
        arch = info.get("general.architecture") or ""
        if context and arch:
            info.setdefault(f"{arch}.context_length", context)
        # Open WebUI offers tools and images on these words.
        capabilities = [
            "completion",
            *(["tools"] if backend.capabilities.tools else []),
            *(["vision"] if backend.capabilities.vision else []),
        ]
    return {
        "modelfile": "",
        "parameters": "",
        "template": facts.template,
        "details": entry["details"],
        "model_info": info,
        "capabilities": capabilities,
        "modified_at": entry["modified_at"],
    }


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


async def _answer(request: Request, state: api.ServeState, call: ChatCall, *, chat: bool) -> Response:
    state.requests += 1
    state.on_request()
    shape = OllamaShape(state.model_id(), chat)
    try:
        started = await api.start_choice(request, state, call, 0)
        if started is None:
            return Response(status_code=api.CLIENT_GONE)
        if call.stream:
            return StreamingResponse(_lines(started, shape), media_type="application/x-ndjson")
        reply = await api.finish_choice(request, started)
    except api.ClientGone:
        return Response(status_code=api.CLIENT_GONE)
    return JSONResponse(shape.whole(reply))


async def _lines(started: api.Started, shape: OllamaShape) -> AsyncIterator[str]:
    """NDJSON: a line per delta, then the `done` line (or an `error` line when the turn failed)."""
    reply, events = started.reply, started.events
    try:
        pending = [started.first]
        while not reply.finished:
            event = pending.pop() if pending else await anext(events, None)
            if event is None:
                break
            delta = reply.take(event)
            if delta:
                yield json.dumps(shape.part(delta), ensure_ascii=False) + "\n"
        if reply.error is not None or not reply.finished:
            message = reply.error.message if reply.error is not None else "the server is shutting down"
            yield json.dumps({"error": message}, ensure_ascii=False) + "\n"
        else:
            yield json.dumps(shape.done(reply, {}), ensure_ascii=False) + "\n"
    finally:
        await events.aclose()


class OllamaShape:
    """Ollama's response objects for one chat or generate request."""

    def __init__(self, model: str, chat: bool) -> None:
        self.model, self.chat = model, chat
        self.started = time.perf_counter_ns()

    def part(self, delta: dict[str, Any]) -> dict[str, Any]:
        return self._base(delta, done=False)

    def whole(self, reply: Reply) -> dict[str, Any]:
        delta: dict[str, Any] = {"content": "".join(reply.content)}
        if reply.reasoning:
            delta["reasoning_content"] = "".join(reply.reasoning)
        if reply.calls:
            delta["tool_calls"] = [{"function": {"name": c.name, "arguments": _arguments(c)}} for c in reply.calls]
        return self.done(reply, delta)

    def done(self, reply: Reply, delta: dict[str, Any]) -> dict[str, Any]:
        stats, total = reply.stats, time.perf_counter_ns() - self.started
        out = self._base(delta, done=True)
        out.update(
            {
                "done_reason": "length" if reply.finish_reason == "length" else "stop",
                "total_duration": total,
                "load_duration": 0,
                "prompt_eval_count": stats.prompt_tokens,
                "prompt_eval_duration": int(stats.ttft_ms * 1e6),
                "eval_count": stats.tokens,
                "eval_duration": max(total - int(stats.ttft_ms * 1e6), 0),
            }
        )
        return out

    def _base(self, delta: dict[str, Any], *, done: bool) -> dict[str, Any]:
        text = str(delta.get("content") or "")
        out: dict[str, Any] = {"model": self.model, "created_at": _now()}
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if delta.get("reasoning_content"):
                message["thinking"] = delta["reasoning_content"]
            if delta.get("tool_calls"):
                message["tool_calls"] = [_ollama_call(c) for c in delta["tool_calls"]]
            out["message"] = message
        else:
            out["response"] = text
            if delta.get("reasoning_content"):
                out["thinking"] = delta["reasoning_content"]
        out["done"] = done
        return out


def _arguments(call: ToolCall) -> dict[str, Any]:
    """A call's arguments; one cut by max_tokens (`partial`: its text so far) gives the fields it finished."""
    return finished_fields(call.partial) if call.partial is not None else call.arguments


def _ollama_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call with its arguments as an object (Ollama's), from either shape: a streamed call's
    are JSON text, the text so far when the call was cut by max_tokens (`done_reason: "length"`)."""
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        function["arguments"] = finished_fields(arguments)
    return {"function": {"name": function.get("name"), "arguments": function.get("arguments") or {}}}
