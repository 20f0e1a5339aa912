"""Ollama's request bodies (`/api/chat`, `/api/generate`) declared, and checked into the same `ChatCall` as OpenAI's.

Ollama puts sampling in `options` (`num_predict`, `temperature`, `top_k`, `top_p`, `min_p`,
`repeat_penalty`, `seed`, `stop`, `frequency_penalty`, `presence_penalty`), streams unless
`"stream": false`, and asks for JSON with `format`: `"json"` or a JSON Schema. Fields Ember
has no use for (`keep_alive`, `num_ctx`, `num_thread`, …) are accepted and ignored, as Ollama
ignores unknown ones. A missing option takes the same neutral default as on the OpenAI side.
A user message's `images` (and `/api/generate`'s) are the same checked images as OpenAI's
`image_url` parts (`wire_images`); a model that cannot see refuses them in one line, as there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, cast

from pydantic import AfterValidator, BeforeValidator

from desktop.serve.errors import bad_request
from desktop.serve.wire import (
    JSON_OBJECT_SCHEMA,
    Body,
    ChatCall,
    Defaults,
    Knobs,
    parse_chat,
    parse_completion,
    validated,
)
from desktop.serve.wire_images import base64_images
from engine.api.values import ImageData


def is_load(body: dict[str, Any], *, chat: bool) -> bool:
    """A request that only asks for the model to be loaded, as Ollama reads it: `/api/chat` with no
    messages, `/api/generate` with no prompt (`keep_alive`, even 0, changes nothing here)."""
    if chat:
        return body.get("messages") is None or body.get("messages") == []
    return body.get("prompt") is None or body.get("prompt") == ""


def _predict(value: int) -> int:
    if value <= 0 and value not in (-1, -2):
        raise ValueError("must be a whole number (-1: as long as the context allows)")
    return value


def _format(value: Any) -> Any:
    if value is None or value == "":
        return None
    if value == "json":
        return JSON_OBJECT_SCHEMA
    if not isinstance(value, (dict, bool)):
        raise ValueError('must be "json" or a JSON Schema object')
    return value


class Options(Knobs):
    num_predict: Annotated[int, AfterValidator(_predict)] | None = None


class OllamaRequest(Body):
    """What `/api/chat` and `/api/generate` share."""

    options: Options | None = None
    stream: Any = True
    format: Annotated[Any, BeforeValidator(_format)] = None

    def common(self, defaults: Defaults) -> dict[str, Any]:
        """The OpenAI fields Ollama's `options`, `stream` and `format` stand for."""
        options = self.options or Options()
        out = options.model_dump(exclude_none=True, exclude={"num_predict"})
        if out.get("seed", 0) < 0:
            del out["seed"]  # Ollama's -1: a random seed
        predict = options.num_predict or 0
        if predict > 0:
            out["max_tokens"] = min(predict, defaults.context_size or predict)
        out["stream"] = self.stream is not False
        if self.format is not None:
            out["response_format"] = {"type": "json_schema", "json_schema": {"schema": self.format}}
        return out


class OllamaChat(OllamaRequest):
    messages: list[Any]
    tools: Any = None


class OllamaGenerate(OllamaRequest):
    prompt: str = ""
    suffix: str | None = None
    system: str | None = None
    raw: bool | None = None
    images: Any = None


def parse_ollama_chat(body: dict[str, Any], defaults: Defaults) -> ChatCall:
    """`/api/chat`: messages (with `tool_calls` whose arguments are objects, and `images`), tools,
    options, format."""
    request = validated(OllamaChat, body)
    items = request.messages
    pictures = {i: found for i, m in enumerate(items) if (found := _images(m, f"messages[{i}]"))}
    openai: dict[str, Any] = {"messages": [_message(m) for m in items], **request.common(defaults)}
    if request.tools:
        openai["tools"] = request.tools
    call = parse_chat(openai, defaults)
    return _with_images(call, pictures) if pictures else call


def parse_ollama_generate(body: dict[str, Any], defaults: Defaults) -> ChatCall:
    """`/api/generate`: a prompt through the chat template (with `system`), or as it is with `raw`
    or `suffix` (fill-in-the-middle), which take no template."""
    request = validated(OllamaGenerate, body)
    common = request.common(defaults)
    images = base64_images(request.images, "images")
    if request.raw or request.suffix:
        if images:
            raise bad_request("'images' need the chat template: not with 'raw' or 'suffix'", "images")
        if request.format is not None:
            raise bad_request("'format' cannot be used with a raw prompt", "format")
        return parse_completion({"prompt": request.prompt, "suffix": request.suffix or None, **common}, defaults)
    system = [{"role": "system", "content": request.system}] if request.system is not None else []
    call = parse_chat({"messages": [*system, {"role": "user", "content": request.prompt}], **common}, defaults)
    return _with_images(call, {len(system): images}) if images else call


def _images(raw: Any, where: str) -> list[ImageData]:
    """A message's `images`, checked; only a user message may carry them (as on the OpenAI side)."""
    if not isinstance(raw, dict):
        return []
    message = cast(dict[str, Any], raw)
    found = base64_images(message.get("images") or None, f"{where}.images")
    if found and message.get("role") != "user":
        raise bad_request(f"'{where}.images': only a user message may carry images", f"{where}.images")
    return found


def _with_images(call: ChatCall, pictures: dict[int, list[ImageData]]) -> ChatCall:
    """The call with each message's images where the OpenAI side puts an `image_url` part's."""
    messages = tuple({**m, "images": pictures[i]} if i in pictures else m for i, m in enumerate(call.messages))
    return replace(call, messages=messages)


def _message(raw: Any) -> Any:
    """An Ollama message as the OpenAI side reads it: its calls named by their function, as the
    tool results that answer them are (`tool_name`); its `images` are taken apart, by `_images`."""
    if not isinstance(raw, dict):
        return raw
    message = {k: v for k, v in cast(dict[str, Any], raw).items() if k != "images"}
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        message["tool_calls"] = [_call(c, i) for i, c in enumerate(cast(list[Any], calls))]
    if message.get("role") == "tool" and "tool_call_id" not in message:
        message["tool_call_id"] = str(message.get("tool_name") or message.get("name") or "call_0")
    return message


def _call(raw: Any, index: int) -> Any:
    if not isinstance(raw, dict) or not isinstance(cast(dict[str, Any], raw).get("function"), dict):
        return raw
    call = cast(dict[str, Any], raw)
    return {**call, "id": str(call.get("id") or call["function"].get("name") or f"call_{index}")}
