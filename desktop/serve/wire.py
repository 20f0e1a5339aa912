"""A chat-completions request body, declared as pydantic models, checked into one `ChatCall` (or a 400).

The models say each field's type and range (strict: `"1"` is no number, `1` no boolean); the
checks between fields (a forced tool among the tools, a collection's question) follow in
`parse_chat`. A refusal names the field in `param` (`validated`). Fields Ember does not use
(`user`, `metadata`, `store`, …) are accepted and ignored, as OpenAI-compatible servers do.
llama.cpp's extensions that Ember's own `openai:` backend sends (`top_k`, `min_p`,
`repeat_penalty`) are honoured. Bounds (`MAX_MESSAGES`, `MAX_TOOLS`, `MAX_STOPS`,
`MAX_TOKENS_CAP`) keep a hostile request from costing more than a refusal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from desktop.serve.errors import bad_request, invalid
from desktop.serve.wire_images import part_images
from engine.api.errors import ConfigError
from engine.api.session import compile_schema
from engine.api.text import NestedTooDeep, bounded_loads
from engine.api.values import Message, Sampling, Schema

MAX_MESSAGES = 4096
MAX_PARTS = 4096  # a message's content parts, or its tool calls
MAX_TOOLS = 128
MAX_STOPS = 4
MAX_STOP_CHARS = 256
MAX_CHOICES = 8  # `n`: each choice is a full generation, run one after another
MAX_TOP_LOGPROBS = 20  # OpenAI's bound
MAX_BODY_DEPTH = 512  # junk a client nests in fields Ember ignores is let through; this is far from the limit
MAX_TOKENS_CAP = 1 << 20  # without a known context size, anything above this is absurd
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
        body = bounded_loads(text, max_depth=MAX_BODY_DEPTH)
    except (NestedTooDeep, RecursionError):
        raise bad_request("the request body is not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # besides JSONDecodeError: an integer of more than 4,300 digits
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "a number has too many digits"
        raise bad_request(f"the request body is not valid JSON ({reason})") from None
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    where = _lone_surrogate(body) if _ESCAPED_SURROGATE.search(text) else None  # the walk only when one may be
    if where is not None:
        raise bad_request(f"'{where}' holds a lone surrogate (\\ud800-\\udfff), which is not text", where)
    return cast(dict[str, Any], body)


_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # UTF-8 holds none: only an escape makes one


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


# -- the request models ------------------------------------------------------------------------


class Body(BaseModel):
    """A request body (or a part of one): JSON types as they are, unknown fields ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)


M = TypeVar("M", bound=Body)


def validated(model: type[M], body: dict[str, Any]) -> M:
    """`body` as `model`, or a 400 naming the first bad field (errors.invalid)."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise invalid(exc) from None


def _text_parts(value: Any) -> Any:
    """A message's `content`, a string or an array of parts, as parts (None: no text)."""
    if value is None or isinstance(value, str):
        return [{"type": "text", "text": value or ""}]
    if not isinstance(value, list):
        raise ValueError("must be a string or an array of text parts")
    return value


def _choice(value: Any) -> Any:
    """`tool_choice` as a mode or the one function's name (`{"type": "function", "function": {"name"}}`)."""
    if value in ("none", "auto", "required"):
        return value
    function = cast(dict[str, Any], value).get("function") if isinstance(value, dict) else None
    name = cast(dict[str, Any], function).get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise ValueError('must be none, auto, required or {"type": "function", "function": {"name": …}}')
    return {"name": name}


def _arguments(value: Any) -> Any:
    """A call's arguments, sent as JSON text, as the object chat templates take."""
    if value is None or value == "":
        return {}
    try:
        value = bounded_loads(value) if isinstance(value, str) else value
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object (as a string)")
    return value


def _schema(value: Any) -> Any:
    if not isinstance(value, (dict, bool)):
        raise ValueError("must be a JSON Schema object")
    try:
        compile_schema(cast(Schema, value))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return value


def _prompt(value: Any) -> Any:
    if isinstance(value, list) and len(cast(list[Any], value)) == 1:
        value = cast(list[Any], value)[0]  # a batch of one
    if not isinstance(value, str):
        raise ValueError("must be a string (or an array of one string)")
    return value


def Many(at_most: int, *, at_least: int = 0) -> Any:
    """A list's bounds; its first bad item ends the check (a million bad items are one error, not a
    million: 14 s and 1.2 GB before `fail_fast`)."""
    return Field(min_length=at_least, max_length=at_most, fail_fast=True)


Unit = Annotated[float, Field(ge=0, le=1)]
Penalty = Annotated[float, Field(ge=-2, le=2)]
Stop = Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]
Stops = Annotated[list[Stop], Many(MAX_STOPS), BeforeValidator(lambda v: [v] if isinstance(v, str) else v)]
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")]  # letters, digits, _ . -
JsonSchema = Annotated[Any, BeforeValidator(_schema)]


class CallFunction(Body):
    """A call the assistant made: chat templates take its arguments as an object."""

    name: str
    arguments: Annotated[dict[str, Any], BeforeValidator(_arguments)] = {}


class ToolCall(Body):
    id: str | None = None
    function: CallFunction


class ChatMessage(Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    # Parts are read as they are by `_content`: a model each (or a dict copied) cost up to 5 times
    # the time and 2.4 times the memory of parsing a hostile 84 MB body of tiny parts.
    content: Annotated[list[Any], Many(MAX_PARTS), BeforeValidator(_text_parts)] = []
    tool_calls: Annotated[list[ToolCall], Many(MAX_PARTS)] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class FunctionSpec(Body):
    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Tool(Body):
    type: Literal["function"] = "function"
    function: FunctionSpec


class NamedChoice(Body):
    name: str


class JsonSchemaSpec(Body):
    schema_: JsonSchema = Field({}, alias="schema")


class ResponseFormat(Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaSpec | None = None


class StreamOptions(Body):
    include_usage: bool = False


class EmberOptions(Body):
    model_defaults: bool = False
    schema_instruction: bool = False
    collection: str | None = None


class Knobs(Body):
    """The sampling fields (and `stop`), which Ollama's `options` carry too."""

    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Unit | None = None
    min_p: Unit | None = None
    repeat_penalty: Annotated[float, Field(ge=0, le=10)] | None = None
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    top_k: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    seed: Annotated[int, Field(ge=-(2**63), lt=2**64)] | None = None
    stop: Stops | None = None


_SAMPLING = set(Knobs.model_fields) - {"stop"}  # the fields that make a `Sampling`


class Sampled(Knobs):
    """The fields both endpoints share: sampling, length, streaming."""

    model: str | None = None
    n: Annotated[int, Field(ge=1, le=MAX_CHOICES)] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    ember: EmberOptions | None = None

    def sampling(self, base: Sampling) -> Sampling:
        knobs = self.model_dump(include=_SAMPLING, exclude_none=True)
        if "seed" in knobs:
            knobs["seed"] %= 2**32
        return replace(base, **knobs)

    def common(self, defaults: Defaults) -> dict[str, Any]:
        """The `ChatCall` fields both endpoints fill alike."""
        return {
            "model": self.model or "",
            "sampling": self.sampling(defaults.sampling),
            "stream": bool(self.stream),
            "include_usage": bool(self.stream_options and self.stream_options.include_usage),
            "stops": tuple(self.stop or ()),
            "n": self.n or 1,
        }

    def defaults(self, defaults: Defaults) -> Defaults:
        """The model's own settings where the request asks for them."""
        wanted = self.ember is not None and self.ember.model_defaults
        return defaults.model if wanted and defaults.model is not None else defaults


class ChatRequest(Sampled):
    messages: Annotated[list[ChatMessage], Many(MAX_MESSAGES, at_least=1)]
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None
    tools: Annotated[list[Tool], Many(MAX_TOOLS)] | None = None
    tool_choice: Annotated[Literal["none", "auto", "required"] | NamedChoice, BeforeValidator(_choice)] | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None


class CompletionRequest(Sampled):
    prompt: Annotated[str, BeforeValidator(_prompt)]
    suffix: str | None = None
    echo: bool | None = None
    max_tokens: Annotated[int, Field(ge=0)] | None = None
    logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None


# -- from the models to a ChatCall -------------------------------------------------------------


def parse_chat(body: dict[str, Any], defaults: Defaults) -> ChatCall:
    """Check every field Ember reads; raises ApiError (400) naming the first bad one."""
    request = validated(ChatRequest, body)
    defaults = request.defaults(defaults)
    tools, forced = _tools(request)
    schema = _response_format(request.response_format)
    if tools and schema is not None:
        raise bad_request("tools and response_format cannot be used together", "response_format")
    # The grammar alone holds the reply to the schema; telling the model it too is one field away.
    hint = request.ember is not None and request.ember.schema_instruction and schema is not None
    # The request is the prompt: a forced tool_choice is held by the grammar (forced_calls), not a line.
    messages = _messages(request.messages)
    key = "max_completion_tokens" if request.max_completion_tokens is not None else "max_tokens"
    return ChatCall(
        **request.common(defaults),
        messages=messages,
        max_tokens=_max_tokens(getattr(request, key), key, defaults),
        tools=tools,
        schema=schema,
        forced=forced,
        parallel_calls=bool(request.parallel_tool_calls),
        logprobs=_logprobs(request),
        schema_hint=hint and schema is not JSON_OBJECT_SCHEMA,  # no schema to tell for json_object
        collection=_collection(request.ember, messages),
    )


def _collection(ember: EmberOptions | None, messages: tuple[Message, ...]) -> str | None:
    """`ember.collection`: the name of an `ember docs` collection the answer comes from (None: none).
    Its passages go into the last message, which must be the user's question, in text alone."""
    name = ember.collection if ember is not None else None
    if name is None:
        return None
    if not name.strip():
        raise bad_request("'ember.collection' is empty: name a collection (see `ember docs list`)", "ember.collection")
    last = messages[-1]
    if last.get("role") != "user" or last.get("images"):  # its passages replace it
        raise bad_request(
            "'ember.collection' needs the last message to be the user's question, in text (no picture)",
            "ember.collection",
        )
    return name


def parse_completion(body: dict[str, Any], defaults: Defaults) -> ChatCall:
    """A `/v1/completions` body: a raw prompt (one string), `suffix`, `echo`, and the sampling fields."""
    request = validated(CompletionRequest, body)
    defaults = request.defaults(defaults)
    if not request.prompt and not request.suffix:  # the model needs at least one token to continue from
        raise bad_request("'prompt' is empty: give the text to continue", "prompt")
    return ChatCall(
        **request.common(defaults),
        messages=(),
        max_tokens=_completion_tokens(request, defaults),
        logprobs=request.logprobs,
        prompt=request.prompt,
        suffix=request.suffix,
        echo=bool(request.echo),
    )


def _completion_tokens(request: CompletionRequest, defaults: Defaults) -> int:
    """OpenAI's completions default to 16 tokens when `max_tokens` is left out; 0 with `echo`
    scores the prompt without generating (lm-evaluation-harness's loglikelihood requests)."""
    if request.max_tokens == 0:
        if not request.echo:
            raise bad_request("'max_tokens' 0 scores the prompt without generating: it needs 'echo'", "max_tokens")
        return 0
    if request.max_tokens is None:
        return min(16, defaults.max_tokens)
    return _max_tokens(request.max_tokens, "max_tokens", defaults)


def _logprobs(request: ChatRequest) -> int | None:
    """`logprobs: true` with `top_logprobs` alternatives (0 to 20); None when not asked."""
    if not request.logprobs:
        if request.top_logprobs:
            raise bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs")
        return None
    return request.top_logprobs or 0


def _max_tokens(value: int | None, key: str, defaults: Defaults) -> int:
    if value is None:
        return defaults.max_tokens
    cap = defaults.context_size or MAX_TOKENS_CAP
    if value > cap:
        where = f"the model's {cap}-token context" if defaults.context_size else f"the limit of {cap}"
        raise bad_request(f"'{key}' is {value}, more than {where}", key)
    return value


def _response_format(fmt: ResponseFormat | None) -> Schema | None:
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return JSON_OBJECT_SCHEMA
    if fmt.json_schema is None:
        raise bad_request(
            "'response_format.json_schema.schema' must be a JSON Schema object", "response_format.json_schema.schema"
        )
    return cast(Schema, fmt.json_schema.schema_)


def _tools(request: ChatRequest) -> tuple[tuple[dict[str, Any], ...] | None, str | None]:
    """The offered tools (None when none, or tool_choice "none"), and what forces a call
    ("required", a function's name, or None)."""
    choice = request.tool_choice or "auto"
    name = choice.name if isinstance(choice, NamedChoice) else None
    tools = [_tool(t.function) for t in request.tools or ()]
    if name is not None and name not in [t["function"]["name"] for t in tools]:
        raise bad_request(f"'tool_choice' names {name!r}, which is not among the tools", "tool_choice")
    if not tools and choice == "required":
        raise bad_request("'tool_choice' is required, but no 'tools' are offered", "tool_choice")
    if not tools or choice == "none":  # the model is not told of any tool
        return None, None
    if name is not None:  # one named function: offer only it
        return tuple(t for t in tools if t["function"]["name"] == name), name
    return tuple(tools), "required" if choice == "required" else None


def _tool(function: FunctionSpec) -> dict[str, Any]:
    spec = function.model_dump(exclude_none=True)
    if not function.description:
        spec.pop("description", None)
    return {"type": "function", "function": spec}


# -- messages ----------------------------------------------------------------------------------


def _messages(items: list[ChatMessage]) -> tuple[Message, ...]:
    call_names: dict[str, str] = {}
    return tuple(_message(item, f"messages[{i}]", call_names) for i, item in enumerate(items))


def _message(raw: ChatMessage, where: str, call_names: dict[str, str]) -> Message:
    role = "system" if raw.role == "developer" else raw.role
    message: Message = {"role": role, "content": _content(raw.content, f"{where}.content", role == "user")}
    pictures = [
        (i, cast(dict[str, Any], p).get("image_url")) for i, p in enumerate(raw.content) if _kind(p) == "image_url"
    ]
    if role == "user" and (images := part_images(pictures, f"{where}.content")):
        message["images"] = images
    if role == "assistant" and raw.tool_calls:
        message["tool_calls"] = _calls(raw.tool_calls, call_names)
    if role == "tool":
        if raw.tool_call_id is None:
            raise bad_request(f"'{where}.tool_call_id' must be a string", f"{where}.tool_call_id")
        message["tool_call_id"] = raw.tool_call_id
        name = raw.name or call_names.get(raw.tool_call_id)
        if name:
            message["name"] = name
    return message


def _kind(part: Any) -> Any:
    return cast(dict[str, Any], part).get("type") if isinstance(part, dict) else None


def _content(parts: list[Any], where: str, pictures: bool) -> str:
    texts: list[str] = []
    for i, part in enumerate(parts):
        kind = _kind(part)
        if pictures and kind == "image_url":
            continue  # a user message's picture: `part_images` takes it
        text = cast(dict[str, Any], part).get("text") if kind == "text" else None
        if not isinstance(text, str):
            what = f"a {kind} part" if isinstance(kind, str) else "not a text part"
            raise bad_request(f"'{where}[{i}]' is {what}; this model takes text only", f"{where}[{i}]")
        texts.append(text)
    return "".join(texts)


def _calls(calls: list[ToolCall], call_names: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        call_id = call.id or f"call_{i}"
        call_names[call_id] = call.function.name
        out.append({"id": call_id, "type": "function", "function": call.function.model_dump()})
    return out
