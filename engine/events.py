"""Plain-value events: the one vocabulary shared by the GUI, the CLI, tests and benches.

A turn with tools adds `ToolCall` (shown before it runs), then its `ToolResult` or
`ToolDenied`, and `ToolLimit` when the model kept calling past the round limit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token's log probability under the model (a log-softmax of its raw logits),
    and the most likely alternatives at that position (`top`: best first), as the API reports them."""

    token: str
    bytes: tuple[int, ...]
    logprob: float
    top: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class Piece:
    """One streamed unit from a backend, usually one token.

    `special` marks a CONTROL or USER_DEFINED vocabulary token; `user_defined` tells the
    two apart (USER_DEFINED tokens print as text and go through the text rules). `logprobs`:
    the tokens this piece completes, when the request asked for them (`Request.logprobs`).
    """

    text: str
    token_id: int | None = None
    special: bool = False
    user_defined: bool = False
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class TokenLogprobs:
    """The log probabilities of the tokens behind the deltas that follow (asked for by the request)."""

    tokens: tuple[TokenLogprob, ...]


@dataclass(frozen=True, slots=True)
class PromptLogprobs:
    """A raw prompt's own tokens scored by the model (`Request.score_prompt`), before any reply token.

    The first token has no context to be scored in: its `logprob` is 0.0 and `top` is empty
    (the completions API reports it as null)."""

    tokens: tuple[TokenLogprob, ...]


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ContentDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Recovery:
    reason: str


@dataclass(frozen=True, slots=True)
class StructuredRetry:
    """A structured turn asks again: `attempt` (1-based) starts now, after `error`."""

    attempt: int
    error: str


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should know about this turn that is not an error (shown, not fatal)."""

    text: str


@dataclass(frozen=True, slots=True)
class PromptProgress:
    """The prompt is being read: `done` of `total` prompt tokens evaluated so far.

    Emitted between llama.cpp batches while a long prompt is evaluated, before the first
    token; the window shows "Reading prompt… n %", `--events` a `progress` line.
    """

    done: int
    total: int


@dataclass(frozen=True, slots=True)
class SourceRef:
    """One numbered passage a reply may cite as `[n]`: where it comes from and what it says.

    `page` is 1-based (PDF) or None; `start`/`end` are character offsets in the page's (PDF)
    or the document's extracted text; `score` is the retrieval score (0 for a whole document).
    """

    n: int
    path: str
    page: int | None
    start: int
    end: int
    score: float
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        """The event's and history's shape; `text` is a preview (a whole document can be long)."""
        out = asdict(self)
        if len(self.text) > SOURCE_PREVIEW_CHARS:
            out["text"] = self.text[:SOURCE_PREVIEW_CHARS] + "…"
        return out


SOURCE_PREVIEW_CHARS = 2000


@dataclass(frozen=True, slots=True)
class ParagraphSources:
    """The passages that support one paragraph of an answer (`answer[start:end]`), by number.

    `cited`: the model's own `[n]` (those that name a passage it was given); otherwise found by
    `engine.docs.attribution` from the words the paragraph shares with the passages.
    """

    start: int
    end: int
    sources: tuple[int, ...]
    cited: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "sources": list(self.sources), "cited": self.cited}


ANSWER_FROM_PARAGRAPHS = "paragraphs"  # the passages support the answer's paragraphs (their [n], or their words)
ANSWER_FROM_GIVEN = "given"  # no paragraph matched one: every passage the model was given


@dataclass(frozen=True, slots=True)
class AnswerFrom:
    """Where an answer from documents came from, as every front end shows it: never nothing.

    `basis` "paragraphs": `sources` support at least one paragraph each (shown as "Answer from").
    `basis` "given": no paragraph cites or matches a passage closely enough (an off-topic answer,
    or one too short to judge), so `sources` are all the passages the model was given, labelled
    as that and not as support.
    """

    basis: str
    sources: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"basis": self.basis, "sources": list(self.sources)}


def answer_from(sources: Sequence[SourceRef], paragraphs: Sequence[ParagraphSources]) -> AnswerFrom:
    """The passages an answer shows as its origin: those supporting its paragraphs, else all it was given."""
    supporting = tuple(dict.fromkeys(n for p in paragraphs for n in p.sources))
    if supporting:
        return AnswerFrom(ANSWER_FROM_PARAGRAPHS, supporting)
    return AnswerFrom(ANSWER_FROM_GIVEN, tuple(ref.n for ref in sources))


@dataclass(frozen=True, slots=True)
class Sources:
    """The passages from the user's documents that this turn's prompt carries, before the answer.

    A turn with sources sends it twice: before the answer (`paragraphs` None), and once the
    answer is whole, again with each paragraph's supporting passages (`paragraphs`) and so
    where the answer came from (`answer_from()`).
    """

    sources: tuple[SourceRef, ...]
    paragraphs: tuple[ParagraphSources, ...] | None = None

    def answer_from(self) -> AnswerFrom | None:
        """None until the answer is whole (`paragraphs` known)."""
        return None if self.paragraphs is None else answer_from(self.sources, self.paragraphs)


@dataclass(frozen=True, slots=True)
class StructuredValue:
    """A structured turn's accepted value (parsed and schema-valid), just before TurnDone."""

    value: Any


def fenced_json(value: Any) -> str:
    """A structured value as the app shows and stores it: a fenced ```json block, pretty-printed."""
    return "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asked to run `name` with `arguments`; it runs only once approved.

    `partial`: the arguments' text as far as the model wrote them, when the reply was cut by
    its token limit inside the call (`arguments` is then empty; such a call is never run).
    """

    id: str
    name: str
    arguments: dict[str, Any]
    partial: str | None = None


class Approval(StrEnum):
    """How a tool call came to run (stored with the call)."""

    APPROVED = "approved"  # the user was asked and said yes
    APPROVED_ALWAYS = "approved_always"  # asked; the user chose "always allow"
    ALWAYS = "always"  # not asked: the tool is always allowed in this conversation


@dataclass(frozen=True, slots=True)
class ToolResult:
    id: str
    content: str
    error: bool = False  # the tool failed; `content` says why (the model sees it too)
    approval: Approval = Approval.APPROVED


@dataclass(frozen=True, slots=True)
class ToolDenied:
    id: str


@dataclass(frozen=True, slots=True)
class ToolLimit:
    """The turn stopped because the model kept calling tools past the round limit."""

    rounds: int


class FinishReason(StrEnum):
    """Why a model request (and so a turn) stopped producing tokens."""

    STOP = "stop"
    LENGTH = "length"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class TurnStats:
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, how many the KV cache already held (not evaluated again)
    ttft_ms: float = 0.0
    tokens_per_s: float = 0.0
    total_ms: float = 0.0
    retries: int = 0
    scaffold_stripped: int = 0
    attempts: int = 1
    finish_reason: str = FinishReason.STOP
    context_used: int = 0
    context_size: int = 0  # the runtime context (n_ctx), under its name in `--events` and stored stats
    drafted: int = 0  # speculative decoding: draft tokens proposed, and accepted by the model
    accepted: int = 0
    # What reproduces the reply (engine/backends/receipt.py); None when the backend gives none.
    receipt: dict[str, Any] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TurnDone:
    stats: TurnStats = field(default_factory=TurnStats)


class TurnErrorKind(StrEnum):
    """Every way a turn can fail, exactly the kinds that are produced."""

    MALFORMED_REPLY = "malformed_reply"  # the reply and its one recovery were both empty
    CONTEXT_FULL = "context_full"  # the conversation no longer fits the context window
    STRUCTURED_OUTPUT = "structured_output"  # no valid JSON after the bounded retries
    SCRIPT = "script"  # a scripted backend ran out of replies
    CONFIG = "config"  # the request could not be sent as asked (e.g. an unusable schema)
    BACKEND = "backend"  # the backend failed (decode error, transport failure)
    NO_MODEL = "no_model"  # no model is loaded (reported by the front end)


@dataclass(frozen=True, slots=True)
class TurnError:
    kind: TurnErrorKind
    message: str
    stats: TurnStats = field(default_factory=TurnStats)


ToolEvent = ToolCall | ToolResult | ToolDenied | ToolLimit
Event = (
    ThinkingDelta
    | ContentDelta
    | TokenLogprobs
    | PromptLogprobs
    | Recovery
    | StructuredRetry
    | Notice
    | PromptProgress
    | Sources
    | StructuredValue
    | ToolCall
    | ToolResult
    | ToolDenied
    | ToolLimit
    | TurnDone
    | TurnError
)


def event_to_json(event: Event) -> dict[str, Any]:
    """The `--events` JSON-lines shape of an event."""
    match event:
        case ThinkingDelta(text=text):
            return {"type": "thinking", "text": text}
        case ContentDelta(text=text):
            return {"type": "content", "text": text}
        case TokenLogprobs(tokens=tokens):
            return {"type": "logprobs", "tokens": [{"token": t.token, "logprob": t.logprob} for t in tokens]}
        case PromptLogprobs(tokens=tokens):
            return {"type": "prompt_logprobs", "tokens": [{"token": t.token, "logprob": t.logprob} for t in tokens]}
        case Recovery(reason=reason):
            return {"type": "recovery", "reason": reason}
        case StructuredRetry(attempt=attempt, error=error):
            return {"type": "structured_retry", "attempt": attempt, "error": error}
        case Notice(text=text):
            return {"type": "notice", "text": text}
        case PromptProgress(done=done, total=total):
            return {"type": "progress", "done": done, "total": total}
        case Sources(sources=sources, paragraphs=paragraphs):
            out: dict[str, Any] = {"type": "sources", "sources": [s.to_json() for s in sources]}
            if paragraphs is not None:
                out["paragraphs"] = [p.to_json() for p in paragraphs]
                out["answer_from"] = answer_from(sources, paragraphs).to_json()
            return out
        case StructuredValue(value=value):
            return {"type": "json", "value": value}
        case ToolCall(id=call_id, name=name, arguments=arguments):
            return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}
        case ToolResult(id=call_id, content=content, error=error):
            return {"type": "tool_result", "id": call_id, "content": content} | ({"error": True} if error else {})
        case ToolDenied(id=call_id):
            return {"type": "tool_denied", "id": call_id}
        case ToolLimit(rounds=rounds):
            return {"type": "tool_limit", "rounds": rounds}
        case TurnDone(stats=stats):
            return {"type": "done", "stats": stats.to_dict()}
        case TurnError(kind=kind, message=message):
            return {"type": "error", "kind": str(kind), "message": message}
