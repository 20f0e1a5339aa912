"""The backend contract: one model request in, a stream of `Piece`s out."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, Required, TypedDict, cast, runtime_checkable

from engine.backends.image_input import ImageData
from engine.cancel import CancelToken
from engine.errors import ConfigError
from engine.events import FinishReason, Piece, PromptProgress, TokenLogprob
from models.library.settings import ModelSettings


class Message(TypedDict, total=False):
    """One chat message as every backend takes it (OpenAI's shape): a role and its text, always."""

    role: Required[str]  # system, user, assistant or tool
    content: Required[str]
    images: list[ImageData]  # a user's pictures, for a model with vision
    tool_calls: list[dict[str, Any]]  # an assistant's calls, in the OpenAI function shape
    tool_call_id: str  # a tool result's call
    name: str  # a tool result's tool


ToolSpec = dict[str, Any]  # one offered tool, in the OpenAI function shape
Schema = Mapping[str, Any] | bool  # a JSON Schema


_DEFAULTS = ModelSettings()
# Text longer than a context of n tokens × this, in characters, is taken never to fit it, without
# tokenizing it: llama.cpp's tokenizer holds several times the text in memory (a 600 MB message
# aborted it with std::bad_alloc). Tokens average 3 to 5 characters; 32 leaves room for runs of
# spaces or symbols that some vocabularies take as one long token.
MAX_CHARS_PER_TOKEN = 32
DEFAULT_MAX_TOKENS = _DEFAULTS.reply_limit


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling settings; `seed=None` means a fresh random seed per request.

    The defaults are the per-model settings' defaults: one set for every front end.
    """

    temperature: float = _DEFAULTS.temperature
    top_p: float = _DEFAULTS.top_p
    top_k: int = _DEFAULTS.top_k
    min_p: float = _DEFAULTS.min_p
    repeat_penalty: float = _DEFAULTS.repeat_penalty
    seed: int | None = _DEFAULTS.seed
    # OpenAI's penalties, over the reply's own tokens: a logit drops by count × frequency_penalty,
    # and by presence_penalty once the token has appeared (llama.cpp's penalties sampler).
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0

    @classmethod
    def greedy(cls) -> Sampling:
        return cls(temperature=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=0)


@dataclass(frozen=True, slots=True)
class Request:
    """One turn's request. `messages` include the system message, if any.

    `schema` (a JSON Schema) makes it a structured turn: the reply must be JSON matching
    it (engine.turns.structured). `grammar` is GBNF text for one model request; the structured
    policy sets it, and backends without the grammar capability ignore it.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] | None = None
    sampling: Sampling = field(default_factory=Sampling)
    max_tokens: int = DEFAULT_MAX_TOKENS
    grammar: str | None = None
    schema: Schema | None = None
    # The messages are the prompt, as an API client sent them: a tool-less chat turn adds no
    # no-tools line (engine.turns.runner), so the template's own default system prompt stays.
    verbatim: bool = False
    # A structured turn folds an instruction naming its schema into the system message, unless
    # the request is `verbatim` (an API client's: its grammar alone constrains the reply), which
    # asks for the instruction with `schema_hint` (`"ember": {"schema_instruction": true}`).
    schema_hint: bool = False
    # Log probabilities of the reply's tokens, with this many alternatives each (0 to 20); None: none.
    logprobs: int | None = None
    # A raw prompt (`/v1/completions`): tokenized as it is, no template; `messages` are then ignored.
    # `suffix` asks for fill-in-the-middle (the model's FIM tokens around prompt and suffix).
    prompt: str | None = None
    suffix: str | None = None
    # A raw prompt's own tokens are scored too (`StreamInfo.prompt_logprobs`, with `logprobs`
    # alternatives each): the completions API's `echo` with `logprobs`. `max_tokens` may then be 0.
    score_prompt: bool = False

    def with_(self, **changes: Any) -> Request:
        return replace(self, **changes)


@dataclass(slots=True)
class StreamInfo:
    """What a backend learned while streaming, read after the stream ends."""

    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens reused from the KV cache (not evaluated again)
    completion_tokens: int = 0
    n_ctx: int = 0  # the runtime context size (tokens)
    finish_reason: str = FinishReason.STOP
    retries: int = 0
    drafted: int = 0  # speculative decoding: draft tokens proposed
    accepted: int = 0  # and how many of them the model agreed with
    # The thinking opener the rendered prompt ends with ('' when none: see
    # models.formats.prefill_opener); the reply then starts in the thinking channel.
    prefilled_thinking: str = ""
    # The request's receipt (engine/backends/receipt.py), filled in by backends that can.
    receipt: dict[str, Any] = field(default_factory=dict[str, Any])
    # `Request.score_prompt`: the prompt's tokens and their log probabilities, set before any piece.
    prompt_logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend declares it can do, and where it runs; callers read this, never probe."""

    grammar: bool = False  # honours Request.grammar; check_grammar validates one first
    token_count: bool = False  # count_tokens/count_prompt_tokens are the model's own counts, not estimates
    n_ctx: int = 0  # tokens the loaded context holds (the runtime context size); 0 when unknown (a server)
    tools: bool = False  # the template renders Request.tools
    tool_markup: str = ""  # the family (models.formats key) the model writes calls in, when known: "hermes"
    device: str = "CPU"  # CPU | GPU | Remote | Scripted, for the status bar
    device_note: str = ""  # e.g. why GPU layers were not used
    base_model: bool = False  # the file has no chat template (models.gguf.builtin_templates.BASE_MODEL_NOTE)
    vision: bool = False  # takes images in messages (`message["images"]`): a projector, or a remote server
    vision_note: str = ""  # why not, when a projector beside the model was refused (one line)


@runtime_checkable
class Backend(Protocol):
    """Streams one model request as pieces, honouring `cancel` between pieces.

    `stream` runs on the engine's single worker thread; it fills `info` as it goes.
    Errors are raised as `engine.errors.LLMError` subclasses.
    """

    name: str
    capabilities: Capabilities

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece | PromptProgress]:
        """The reply's pieces; before the first, a backend may report its prompt evaluation."""
        ...

    def check_grammar(self, gbnf: str) -> str | None:
        """None when the decoder accepts the GBNF grammar, else why not (grammar backends only)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens in `text`: exact with the token_count capability, else an estimate."""
        ...

    def count_prompt_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        """Tokens of the prompt `messages` (and the `tools` offered) render to, chat template
        included: exact with the token_count capability, else an estimate. Reads only the
        vocabulary and the template, so it may run beside a streaming reply
        (engine/turns/context_window.py)."""
        ...

    def close(self) -> None: ...


class PlainBackend:
    """Defaults for a backend without grammars or a tokenizer (scripted, remote, test fakes)."""

    capabilities = Capabilities()

    def check_grammar(self, gbnf: str) -> str | None:
        return None  # asked only with the grammar capability; a server then validates it itself

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1  # about four characters a token

    def count_prompt_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        # An estimate: the contents plus a few tokens of role markup per message, and the tools' JSON.
        described = sum(self.count_tokens(json.dumps(t, ensure_ascii=False)) for t in tools or ())
        return sum(self.count_tokens(str(m.get("content") or "")) + 3 for m in messages) + described


def prompt_key(messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> str:
    """A key for a prompt's content: equal exactly when the messages and tools are."""
    return json.dumps([list(messages), list(tools or ())], sort_keys=True, ensure_ascii=False, default=str)


def make_request(messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Request:
    """Build a Request, checking each message has a role and content before it is taken as a `Message`."""
    bad = next((m for m in messages if "role" not in m or "content" not in m), None)
    if bad is not None:
        raise ConfigError(f"message without role or content: {bad!r}")
    return Request(messages=tuple(cast(Message, dict(m)) for m in messages), **kwargs)
