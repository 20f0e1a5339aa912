"""Ollama's request bodies (`/api/chat`, `/api/generate`) checked into the same `ChatCall` as OpenAI's.

Ollama puts sampling in `options` (`num_predict`, `temperature`, `top_k`, `top_p`, `min_p`,
`repeat_penalty`, `seed`, `stop`, `frequency_penalty`, `presence_penalty`), streams unless
`"stream": false`, and asks for JSON with `format`: `"json"` or a JSON Schema. Fields Ember
has no use for (`keep_alive`, `num_ctx`, `num_thread`, …) are accepted and ignored, as Ollama
ignores unknown ones. A missing option takes the same neutral default as on the OpenAI side.
A user message's `images` (and `/api/generate`'s) are the same checked images as OpenAI's
`image_url` parts (`wire_images`); a model that cannot see refuses them in one line, as there.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, cast

from desktop.serve.errors import bad_request
from desktop.serve.wire import JSON_OBJECT_SCHEMA, ChatCall, Defaults, parse_chat, parse_completion
from desktop.serve.wire_images import base64_images
from engine.api.values import ImageData, Message, Schema

_OPTIONS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "seed", "frequency_penalty", "presence_penalty")


def is_load(body: dict[str, Any], *, chat: bool) -> bool:
    """A request that only asks for the model to be loaded, as Ollama reads it: `/api/chat` with no
    messages, `/api/generate` with no prompt (`keep_alive`, even 0, changes nothing here)."""
    if chat:
        return body.get("messages") is None or body.get("messages") == []
    return body.get("prompt") is None or body.get("prompt") == ""


def parse_ollama_chat(body: dict[str, Any], defaults: Defaults) -> ChatCall:
    """`/api/chat`: messages (with `tool_calls` whose arguments are objects, and `images`), tools,
    options, format."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise bad_request("'messages' must be an array of messages", "messages")
    items = cast(list[Any], messages)
    pictures = {i: found for i, m in enumerate(items) if (found := _images(m, f"messages[{i}]"))}
    openai: dict[str, Any] = {"messages": [_message(m) for m in items], **_common(body, defaults)}
    if body.get("tools"):
        openai["tools"] = body["tools"]
    call = parse_chat(openai, defaults)
    return _with_images(call, pictures) if pictures else call


def parse_ollama_generate(body: dict[str, Any], defaults: Defaults) -> ChatCall:
    """`/api/generate`: a prompt through the chat template (with `system`), or as it is with `raw`
    or `suffix` (fill-in-the-middle), which take no template."""
    prompt = body.get("prompt", "")
    if not isinstance(prompt, str):
        raise bad_request("'prompt' must be a string", "prompt")
    suffix = body.get("suffix")
    if suffix is not None and not isinstance(suffix, str):
        raise bad_request("'suffix' must be a string", "suffix")
    system = body.get("system")
    common = _common(body, defaults)
    images = base64_images(body.get("images"), "images")
    if body.get("raw") is True or suffix:
        if images:
            raise bad_request("'images' need the chat template: not with 'raw' or 'suffix'", "images")
        call = parse_completion({"prompt": prompt, "suffix": suffix or None, **common}, defaults)
        return _with_format(call, body)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if isinstance(system, str) else []
    call = parse_chat({"messages": [*messages, {"role": "user", "content": prompt}], **common}, defaults)
    return _with_images(call, {len(messages): images}) if images else call


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
    messages: list[Message] = []
    for i, message in enumerate(call.messages):
        messages.append({**message, "images": pictures[i]} if i in pictures else message)
    return replace(call, messages=tuple(messages))


def _common(body: dict[str, Any], defaults: Defaults) -> dict[str, Any]:
    """The OpenAI fields Ollama's `options`, `stream` and `format` stand for."""
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise bad_request("'options' must be an object", "options")
    opts = cast(dict[str, Any], options)
    out: dict[str, Any] = {k: opts[k] for k in _OPTIONS if opts.get(k) is not None}
    if isinstance(out.get("seed"), int) and out["seed"] < 0:
        del out["seed"]  # Ollama's -1: a random seed
    predict = opts.get("num_predict")
    if isinstance(predict, int) and not isinstance(predict, bool) and predict > 0:
        out["max_tokens"] = min(predict, defaults.context_size or predict)
    elif predict is not None and not (isinstance(predict, int) and predict in (-1, -2)):
        raise bad_request(
            "'options.num_predict' must be a whole number (-1: as long as the context allows)", "options.num_predict"
        )
    if opts.get("stop") is not None:
        out["stop"] = opts["stop"]
    out["stream"] = body.get("stream", True) is not False
    fmt = _format(body.get("format"))
    if fmt is not None:
        out["response_format"] = {"type": "json_schema", "json_schema": {"schema": fmt}}
    return out


def _with_format(call: ChatCall, body: dict[str, Any]) -> ChatCall:
    if _format(body.get("format")) is not None:
        raise bad_request("'format' cannot be used with a raw prompt", "format")
    return call


def _format(value: Any) -> Schema | None:
    if value is None or value == "":
        return None
    if value == "json":
        return JSON_OBJECT_SCHEMA
    if isinstance(value, (dict, bool)):
        return cast(Schema, value)
    raise bad_request("'format' must be \"json\" or a JSON Schema object", "format")


def _message(raw: Any) -> Any:
    """An Ollama message as the OpenAI side reads it: `tool_calls` arguments as JSON text (its
    `images` are taken apart, by `_images`)."""
    if not isinstance(raw, dict):
        return raw
    message = dict(cast(dict[str, Any], raw))
    message.pop("images", None)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        message["tool_calls"] = [_call(c, i) for i, c in enumerate(cast(list[Any], calls))]
    if message.get("role") == "tool" and "tool_call_id" not in message:
        message["tool_call_id"] = str(message.get("tool_name") or message.get("name") or "call_0")
    return message


def _call(raw: Any, index: int) -> Any:
    if not isinstance(raw, dict):
        return raw
    call = cast(dict[str, Any], raw)
    function = call.get("function")
    if not isinstance(function, dict):
        return call
    fn = dict(cast(dict[str, Any], function))
    if not isinstance(fn.get("arguments"), str):
        fn["arguments"] = json.dumps(fn.get("arguments") or {})
    name = fn.get("name")
    return {"id": str(call.get("id") or name or f"call_{index}"), "type": "function", "function": fn}
