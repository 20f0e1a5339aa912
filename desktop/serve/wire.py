"""A chat-completions request body, checked field by field, into one `ChatCall` (or a 400).

Known fields of the wrong type or out of range are refused with the field named in
`param`; fields Ember does not use (`user`, `metadata`, `store`, …)
are accepted and ignored, as OpenAI-compatible servers do. llama.cpp's extensions that
Ember's own `openai:` backend sends (`top_k`, `min_p`, `repeat_penalty`) are honoured.
Bounds (`MAX_MESSAGES`, `MAX_TOOLS`, `MAX_STOPS`, `MAX_TOKENS_CAP`) keep a hostile request
from costing more than a refusal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from desktop.serve.errors import bad_request
from desktop.serve.wire_images import is_image_part, part_images
from engine.api.errors import ConfigError
from engine.api.session import compile_schema
from engine.api.values import Message, Sampling, Schema

MAX_MESSAGES = 4096
MAX_TOOLS = 128
MAX_STOPS = 4
MAX_STOP_CHARS = 256
MAX_CHOICES = 8  # `n`: each choice is a full generation, run one after another
MAX_TOP_LOGPROBS = 20  # OpenAI's bound
MAX_TOKENS_CAP = 1 << 20  # without a known context size, anything above this is absurd
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}\Z")
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
# `json_object` asks for any JSON object: the grammar of this schema, and nothing said to the model.
JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True, slots=True)
class ChatCall:
    """One checked chat-completions request."""

    model: str
    messages: tuple[Message, ...]
    sampling: Sampling
    max_tokens: int
    stream: bool = False
    include_usage: bool = False
    stops: tuple[str, ...] = ()
    tools: tuple[dict[str, Any], ...] | None = None
    schema: Schema | None = None
    forced: str | None = None  # tool_choice "required", or the one function it names: the answer must call
    parallel_calls: bool = False  # `parallel_tool_calls: true`: a forced answer may make several calls
    n: int = 1  # choices, generated one after another (seeds derived from `seed`)
    prompt: str | None = None  # `/v1/completions`: a raw prompt, no template (`messages` empty)
    suffix: str | None = None  # fill-in-the-middle: the text after the gap
    echo: bool = False  # the reply's text starts with the prompt
    logprobs: int | None = None  # `logprobs: true`: with this many `top_logprobs` alternatives
    schema_hint: bool = False  # `"ember": {"schema_instruction": true}`: the model is told the schema too
    collection: str | None = None  # `"ember": {"collection": "NAME"}`: answered from that collection


# What a field the client leaves out means on OpenAI's API (temperature 1, top_p 1, no
# penalty) and llama.cpp's sampler with nothing set (top_k 0 and min_p 0: off).
NEUTRAL_SAMPLING = Sampling(temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, repeat_penalty=1.0, seed=None)


@dataclass(frozen=True, slots=True)
class Defaults:
    """What a request that leaves a field out gets (`state.defaults_for`: the neutral ones).

    `model`: the model's own recommended settings, which a request asks for with
    `"ember": {"model_defaults": true}`.
    """

    sampling: Sampling
    max_tokens: int
    context_size: int = 0  # 0: unknown (a remote backend)
    model: Defaults | None = None


def parse_json(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 saying why not.

    The body must be UTF-8 (RFC 8259), and no string in it may hold a lone surrogate
    (`"\\ud800"` is valid JSON but no text: it cannot be encoded for the model or the history).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(f"the request body is not UTF-8 (byte {exc.start} is not valid UTF-8)") from None
    try:
        body = json.loads(text)
    except RecursionError:
        raise bad_request("the request body is not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # besides JSONDecodeError: an integer of more than 4,300 digits
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "a number has too many digits"
        raise bad_request(f"the request body is not valid JSON ({reason})") from None
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    where = _lone_surrogate(body)
    if where is not None:
        raise bad_request(f"'{where}' holds a lone surrogate (\\ud800-\\udfff), which is not text", where)
    return cast(dict[str, Any], body)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(body: Any) -> str | None:
    """The path of the first string (key or value) holding a lone surrogate; None when there is none.

    Iterative: json.loads already bounded the depth, but a recursive walk would need the stack again.
    """
    stack: list[tuple[str, Any]] = [("", body)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return path or "body"
        elif isinstance(value, dict):
            for key, item in reversed(cast(dict[str, Any], value).items()):
                inner = f"{path}.{key}" if path else key
                if _SURROGATE.search(key):
                    return path or "body"
                stack.append((inner, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(cast(list[Any], value)))))
    return None


def parse_chat(body: dict[str, Any], defaults: Defaults) -> ChatCall:
    """Check every field Ember reads; raises ApiError (400) naming the first bad one."""
    model = _opt(body, "model", str) or ""
    ember = _opt(body, "ember", dict) or {}
    if _opt(ember, "model_defaults", bool, "ember.model_defaults") and defaults.model is not None:
        defaults = defaults.model
    n = _whole(body, "n", 1, MAX_CHOICES) or 1
    logprobs = _logprobs(body)
    stream = bool(_opt(body, "stream", bool))
    options = _opt(body, "stream_options", dict) or {}
    include_usage = bool(_opt(options, "include_usage", bool, "stream_options.include_usage"))
    tools, forced = _tools(body)
    schema = _response_format(body)
    # The grammar alone holds the reply to the schema; telling the model it too is one field away.
    hint = bool(_opt(ember, "schema_instruction", bool, "ember.schema_instruction")) and schema is not None
    if tools and schema is not None:
        raise bad_request("tools and response_format cannot be used together", "response_format")
    # The request is the prompt: a forced tool_choice is held by the grammar (forced_calls), not a line.
    messages = _messages(body.get("messages"))
    return ChatCall(
        model=model,
        messages=messages,
        sampling=_sampling(body, defaults.sampling),
        max_tokens=_max_tokens(body, defaults),
        stream=stream,
        include_usage=include_usage,
        stops=_stops(body.get("stop")),
        tools=tools,
        schema=schema,
        forced=forced,
        parallel_calls=bool(_opt(body, "parallel_tool_calls", bool)),
        n=n,
        logprobs=logprobs,
        schema_hint=hint and schema is not JSON_OBJECT_SCHEMA,  # no schema to tell for json_object
        collection=_collection(ember, messages),
    )


def _collection(ember: dict[str, Any], messages: Sequence[Message]) -> str | None:
    """`ember.collection`: the name of an `ember docs` collection the answer comes from (None: none).
    Its passages go into the last message, which must be the user's question, in text alone."""
    name = _opt(ember, "collection", str, "ember.collection")
    if name is None:
        return None
    if not name.strip():
        raise bad_request("'ember.collection' is empty: name a collection (see `ember docs list`)", "ember.collection")
    last = messages[-1] if messages else None
    if last is None or last.get("role") != "user" or last.get("images"):  # its passages replace it
        raise bad_request(
            "'ember.collection' needs the last message to be the user's question, in text (no picture)",
            "ember.collection",
        )
    return name


def parse_completion(body: dict[str, Any], defaults: Defaults) -> ChatCall:
    """A `/v1/completions` body: a raw prompt (one string), `suffix`, `echo`, and the sampling fields."""
    ember = _opt(body, "ember", dict) or {}
    if _opt(ember, "model_defaults", bool, "ember.model_defaults") and defaults.model is not None:
        defaults = defaults.model
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(cast(list[Any], prompt)) == 1:
        prompt = cast(list[Any], prompt)[0]  # a batch of one
    if not isinstance(prompt, str):
        raise bad_request("'prompt' must be a string (or an array of one string)", "prompt")
    suffix = _opt(body, "suffix", str)
    if not prompt and not suffix:  # the model needs at least one token to continue from
        raise bad_request("'prompt' is empty: give the text to continue", "prompt")
    options = _opt(body, "stream_options", dict) or {}
    top = _whole(body, "logprobs", 0, MAX_TOP_LOGPROBS)
    return ChatCall(
        model=_opt(body, "model", str) or "",
        messages=(),
        sampling=_sampling(body, defaults.sampling),
        max_tokens=_completion_tokens(body, defaults),
        stream=bool(_opt(body, "stream", bool)),
        include_usage=bool(_opt(options, "include_usage", bool, "stream_options.include_usage")),
        stops=_stops(body.get("stop")),
        n=_whole(body, "n", 1, MAX_CHOICES) or 1,
        logprobs=top,
        prompt=prompt,
        suffix=suffix,
        echo=bool(_opt(body, "echo", bool)),
    )


def _completion_tokens(body: dict[str, Any], defaults: Defaults) -> int:
    """OpenAI's completions default to 16 tokens when `max_tokens` is left out; 0 with `echo`
    scores the prompt without generating (lm-evaluation-harness's loglikelihood requests)."""
    value = body.get("max_tokens")
    if value == 0 and not isinstance(value, bool):
        if body.get("echo") is not True:
            raise bad_request("'max_tokens' 0 scores the prompt without generating: it needs 'echo'", "max_tokens")
        return 0
    return _max_tokens(body, defaults) if value is not None else min(16, defaults.max_tokens)


def _whole(body: dict[str, Any], key: str, low: int, high: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_request(f"'{key}' must be a whole number from {low} to {high}, got {_short(value)}", key)
    return value


def _logprobs(body: dict[str, Any]) -> int | None:
    """`logprobs: true` with `top_logprobs` alternatives (0 to 20); None when not asked."""
    top = _whole(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if not _opt(body, "logprobs", bool):
        if top:
            raise bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs")
        return None
    return top or 0


# -- fields ------------------------------------------------------------------------------------


def _opt(body: dict[str, Any], key: str, kind: type, param: str | None = None) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise bad_request(f"'{param or key}' must be {_KIND_NAMES[kind]}, not {_json_type(value)}", param or key)
    return value


_KIND_NAMES: dict[type, str] = {
    str: "a string",
    bool: "a boolean",
    dict: "an object",
    list: "an array",
    int: "an integer",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise bad_request(f"'{key}' must be a number from {low:g} to {high:g}, got {_short(value)}", key)
    return float(value)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _sampling(body: dict[str, Any], base: Sampling) -> Sampling:
    temperature = _number(body, "temperature", 0, 2)
    top_p = _number(body, "top_p", 0, 1)
    min_p = _number(body, "min_p", 0, 1)
    repeat = _number(body, "repeat_penalty", 0, 10)
    frequency = _number(body, "frequency_penalty", -2, 2)
    presence = _number(body, "presence_penalty", -2, 2)
    top_k = body.get("top_k")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or not 0 <= top_k <= 1_000_000):
        raise bad_request(f"'top_k' must be a whole number from 0 to 1000000, got {_short(top_k)}", "top_k")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**64):
        raise bad_request(f"'seed' must be an integer, got {_short(seed)}", "seed")
    return Sampling(
        temperature=base.temperature if temperature is None else temperature,
        top_p=base.top_p if top_p is None else top_p,
        top_k=base.top_k if top_k is None else top_k,
        min_p=base.min_p if min_p is None else min_p,
        repeat_penalty=base.repeat_penalty if repeat is None else repeat,
        seed=base.seed if seed is None else seed % 2**32,
        frequency_penalty=base.frequency_penalty if frequency is None else frequency,
        presence_penalty=base.presence_penalty if presence is None else presence,
    )


def _max_tokens(body: dict[str, Any], defaults: Defaults) -> int:
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    value = body.get(key)
    if value is None:
        return defaults.max_tokens
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_request(f"'{key}' must be a whole number of at least 1, got {_short(value)}", key)
    cap = defaults.context_size or MAX_TOKENS_CAP
    if value > cap:
        where = f"the model's {cap}-token context" if defaults.context_size else f"the limit of {cap}"
        raise bad_request(f"'{key}' is {value}, more than {where}", key)
    return value


def _stops(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or len(cast(list[Any], stops)) > MAX_STOPS:
        raise bad_request(f"'stop' must be a string or an array of at most {MAX_STOPS} strings", "stop")
    out: list[str] = []
    for item in cast(list[Any], stops):
        if not isinstance(item, str) or not 0 < len(item) <= MAX_STOP_CHARS:
            raise bad_request(f"each 'stop' sequence must be a string of 1 to {MAX_STOP_CHARS} characters", "stop")
        out.append(item)
    return tuple(out)


def _response_format(body: dict[str, Any]) -> Schema | None:
    fmt = _opt(body, "response_format", dict)
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON_OBJECT_SCHEMA
    if kind != "json_schema":
        raise bad_request("'response_format.type' must be text, json_object or json_schema", "response_format.type")
    spec = _opt(fmt, "json_schema", dict, "response_format.json_schema")
    schema = (spec or {}).get("schema", {} if spec is not None else None)
    if not isinstance(schema, (dict, bool)):
        raise bad_request(
            "'response_format.json_schema.schema' must be a JSON Schema object", "response_format.json_schema.schema"
        )
    try:
        compile_schema(cast(Schema, schema))
    except ConfigError as exc:
        raise bad_request(str(exc), "response_format.json_schema.schema") from None
    return cast(Schema, schema)


def _tools(body: dict[str, Any]) -> tuple[tuple[dict[str, Any], ...] | None, str | None]:
    """The offered tools (None when none, or tool_choice "none"), and what forces a call
    ("required", a function's name, or None)."""
    raw = _opt(body, "tools", list)
    if not raw:
        if _tool_choice(body.get("tool_choice"), []) == "required":
            raise bad_request("'tool_choice' is required, but no 'tools' are offered", "tool_choice")
        return None, None
    if len(raw) > MAX_TOOLS:
        raise bad_request(f"at most {MAX_TOOLS} tools", "tools")
    tools = [_tool(spec, i) for i, spec in enumerate(cast(list[Any], raw))]
    names = [t["function"]["name"] for t in tools]
    choice = _tool_choice(body.get("tool_choice"), names)
    if choice == "none":  # the model is not told of any tool
        return None, None
    if choice == "required":
        return tuple(tools), choice
    if choice != "auto":  # one named function: offer only it
        return tuple(t for t in tools if t["function"]["name"] == choice), choice
    return tuple(tools), None


def _tool(spec: Any, i: int) -> dict[str, Any]:
    where = f"tools[{i}]"
    if not isinstance(spec, dict) or spec.get("type", "function") != "function":
        raise bad_request(f"'{where}' must be an object with type 'function'", where)
    function = _opt(cast(dict[str, Any], spec), "function", dict, f"{where}.function")
    name = (function or {}).get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise bad_request(
            f"'{where}.function.name' must be 1 to 64 letters, digits, '_', '.' or '-'", f"{where}.function.name"
        )
    assert function is not None
    out: dict[str, Any] = {"name": name}
    description = _opt(function, "description", str, f"{where}.function.description")
    if description:
        out["description"] = description
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise bad_request(f"'{where}.function.parameters' must be a JSON Schema object", f"{where}.function.parameters")
    out["parameters"] = parameters if parameters is not None else {"type": "object", "properties": {}}
    return {"type": "function", "function": out}


def _tool_choice(value: Any, names: list[str]) -> str:
    if value is None:
        return "auto"
    if value in ("none", "auto", "required"):
        return cast(str, value)
    function = cast(dict[str, Any], value).get("function") if isinstance(value, dict) else None
    name = cast(dict[str, Any], function).get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise bad_request(
            '\'tool_choice\' must be none, auto, required or {"type": "function", "function": {"name": …}}',
            "tool_choice",
        )
    if name not in names:
        raise bad_request(f"'tool_choice' names {name!r}, which is not among the tools", "tool_choice")
    return name


# -- messages ----------------------------------------------------------------------------------


def _messages(value: Any) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise bad_request("'messages' must be a non-empty array", "messages")
    items = cast(list[Any], value)
    if len(items) > MAX_MESSAGES:
        raise bad_request(f"'messages' has {len(items)} entries; at most {MAX_MESSAGES}", "messages")
    out: list[Message] = []
    call_names: dict[str, str] = {}
    for i, item in enumerate(items):
        message = _message(item, f"messages[{i}]", call_names)
        out.append(message)
    return tuple(out)


def _message(item: Any, where: str, call_names: dict[str, str]) -> Message:
    if not isinstance(item, dict):
        raise bad_request(f"'{where}' must be an object", where)
    raw = cast(dict[str, Any], item)
    role = _ROLES.get(raw.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise bad_request(f"'{where}.role' must be system, developer, user, assistant or tool", f"{where}.role")
    message: Message = {"role": role, "content": _content(raw.get("content"), f"{where}.content", role == "user")}
    if role == "user" and (images := part_images(raw.get("content"), f"{where}.content")):
        message["images"] = images
    if role == "assistant" and raw.get("tool_calls"):
        message["tool_calls"] = _calls(raw["tool_calls"], f"{where}.tool_calls", call_names)
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str):
            raise bad_request(f"'{where}.tool_call_id' must be a string", f"{where}.tool_call_id")
        message["tool_call_id"] = call_id
        name = raw.get("name") if isinstance(raw.get("name"), str) else call_names.get(call_id)
        if name:
            message["name"] = name
    return message


def _content(value: Any, where: str, pictures: bool = False) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if not isinstance(value, list):
        raise bad_request(f"'{where}' must be a string or an array of text parts", where)
    parts: list[str] = []
    for i, part in enumerate(cast(list[Any], value)):
        if pictures and is_image_part(part):
            continue  # a user message's picture: `part_images` takes it
        kind = cast(dict[str, Any], part).get("type") if isinstance(part, dict) else None
        text = cast(dict[str, Any], part).get("text") if kind == "text" else None
        if not isinstance(text, str):
            what = f"a {kind} part" if isinstance(kind, str) else "not a text part"
            raise bad_request(f"'{where}[{i}]' is {what}; this model takes text only", f"{where}[{i}]")
        parts.append(text)
    return "".join(parts)


def _calls(value: Any, where: str, call_names: dict[str, str]) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise bad_request(f"'{where}' must be an array", where)
    calls: list[dict[str, Any]] = []
    for i, raw in enumerate(cast(list[Any], value)):
        function = cast(dict[str, Any], raw).get("function") if isinstance(raw, dict) else None
        name = cast(dict[str, Any], function).get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not isinstance(function, dict):
            raise bad_request(f"'{where}[{i}].function.name' must be a string", f"{where}[{i}].function.name")
        call_id = cast(dict[str, Any], raw).get("id")
        call_id = call_id if isinstance(call_id, str) else f"call_{i}"
        call_names[call_id] = name
        arguments = _arguments(cast(dict[str, Any], function).get("arguments"), f"{where}[{i}].function.arguments")
        # Chat templates take the arguments as an object (the API sends a JSON string).
        calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
    return calls


def _arguments(value: Any, where: str) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return cast(dict[str, Any], value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return cast(dict[str, Any], parsed)
    raise bad_request(f"'{where}' must be a JSON object (as a string)", where)
