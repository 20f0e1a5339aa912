"""What part of a conversation the model sees when all of it no longer fits its context.

Three policies, chosen per conversation (default per model):

- ``truncate-middle`` (the default): the system prompt and the first exchange stay, then
  as many of the most recent turns as fit;
- ``rolling``: the system prompt and the most recent turns only;
- ``stop``: nothing is dropped; a conversation that no longer fits is refused with a
  clear message (the behaviour before policies existed).

Cuts fall on turn boundaries: a turn is a user message and what follows it up to the next
user message, so a kept answer always has its question and the window never starts with
an orphaned assistant message. Sizes are measured by the caller's `TokenCounter`, which
renders the candidate prompt through the model's own chat template and tokenizer, so a
cut is never mid-token and the template's own overhead is counted. Thinking from earlier
turns is never re-sent.

The reply keeps room of its own: `reply_reserve` tokens (its max tokens, at most half the
context, so a model with no length limit still has history to read).

When the window has to move, it moves in steps of about a quarter of the budget, on a grid
fixed by the conversation's own turns (`_stable_start`): most turns then extend the very
prompt the previous turn sent, so the model's KV cache is reused and the time to first
token stays flat, instead of the whole middle being re-evaluated on every turn.

A message longer than the context could hold at MAX_CHARS_PER_TOKEN characters a token is
never measured (tokenizing a 600 MB message aborted llama.cpp): the newest turn is refused in
one line, an older one is left out of the window (under `stop`, the conversation is full).

Pure and Qt-free: no I/O, no model; everything is measured through the counter.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, cast

from engine.backends.base import MAX_CHARS_PER_TOKEN, Message
from engine.errors import ContextOverflowError


class ContextPolicy(StrEnum):
    TRUNCATE_MIDDLE = "truncate-middle"
    ROLLING = "rolling"
    STOP = "stop"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    ContextPolicy.TRUNCATE_MIDDLE: "Truncate middle",
    ContextPolicy.ROLLING: "Rolling window",
    ContextPolicy.STOP: "Stop at limit",
}

DEFAULT_POLICY = ContextPolicy.TRUNCATE_MIDDLE
SETTINGS_KEY = "context_policy"  # in a conversation's settings and a model's settings
DIVIDER_TEXT = "Earlier messages are outside the model's context"
MESSAGE_OVERHEAD = 4  # role markers a template adds around each message (grid weights only)
STEP_FRACTION = 4  # the window moves in steps of budget / STEP_FRACTION tokens


def parse_policy(text: object, default: ContextPolicy = DEFAULT_POLICY) -> ContextPolicy:
    """The policy named by `text`; `default` for anything else (a stored value is never trusted)."""
    try:
        return ContextPolicy(str(text))
    except ValueError:
        return default


class TokenCounter(Protocol):
    """Measures through one model's chat template and tokenizer."""

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of the prompt these messages render to (generation prompt included)."""
        ...

    def text_tokens(self, text: str) -> int:
        """Tokens of plain text (used to place the window's steps, not to check the fit)."""
        ...


class MessageTooLongError(ContextOverflowError):
    """The newest message cannot fit even alone: refuse it before it is stored or sent."""

    def __init__(self, tokens: int, limit: int, n_ctx: int) -> None:
        self.tokens, self.limit, self.n_ctx = tokens, limit, n_ctx
        if limit <= 0:  # the system prompt and the tools' descriptions alone fill it
            super().__init__(
                f"the model's {n_ctx:,}-token context has no room for this message: with room kept for the "
                f"reply, the system prompt and the tools' descriptions already fill it; raise the context "
                f"length or turn the tools off"
            )
            return
        super().__init__(
            f"this message needs {tokens:,} tokens, but with room kept for the reply the model's "
            f"{n_ctx:,}-token context holds at most {limit:,}; shorten it or raise the context length"
        )


class MessageTooLargeError(MessageTooLongError):
    """The newest message is so long in characters that it was not even measured."""

    def __init__(self, chars: int, limit: int, n_ctx: int) -> None:
        ContextOverflowError.__init__(
            self,
            f"this message is {chars:,} characters long, far more than the model's {n_ctx:,}-token context "
            f"can hold; shorten it (or attach it as a file: it is then searched, not sent whole)",
        )
        self.tokens, self.limit, self.n_ctx = chars // MAX_CHARS_PER_TOKEN, limit, n_ctx


class SystemPromptTooLongError(MessageTooLongError):
    """The system prompt alone leaves no room for any message: say so, not "this message needs 1 token"."""

    def __init__(self, tokens: int, limit: int, n_ctx: int) -> None:
        ContextOverflowError.__init__(
            self,
            f"the system prompt alone ({tokens:,} tokens) is longer than the model's {n_ctx:,}-token "
            f"context allows ({limit:,} with room kept for the reply); shorten it or raise the context length",
        )
        self.tokens, self.limit, self.n_ctx = tokens, limit, n_ctx


class ContextFullError(ContextOverflowError):
    """Under the stop policy: the conversation no longer fits."""

    def __init__(self, tokens: int, limit: int, n_ctx: int) -> None:
        self.tokens, self.limit, self.n_ctx = tokens, limit, n_ctx
        super().__init__(
            f"the conversation ({tokens:,} tokens) no longer fits the {n_ctx:,}-token context "
            f"({limit:,} with room for the reply); choose another context policy or start a new conversation"
        )


def reply_reserve(n_ctx: int, max_tokens: int) -> int:
    """Tokens kept free for the reply: its max tokens, at most half the context."""
    return max(1, min(max_tokens, n_ctx // 2))


@dataclass(frozen=True, slots=True)
class Fit:
    """The messages to send and what was left out.

    Indexes refer to the messages given to `fit_messages`; turn numbers count the turns
    after the system prompt (turn 0 is the first exchange).
    """

    messages: tuple[Message, ...]
    prompt_tokens: int
    budget: int
    dropped: tuple[int, ...] = ()  # message indexes left out: one contiguous span
    dropped_turns: tuple[int, ...] = ()
    turns: int = 0
    measured: bool = True  # False: the backend cannot count, everything is sent

    @property
    def cut(self) -> bool:
        return bool(self.dropped)

    @property
    def resume_turn(self) -> int | None:
        """The turn right after the dropped span (where the divider goes); None when nothing was cut."""
        return self.dropped_turns[-1] + 1 if self.dropped_turns else None

    @property
    def kept_head(self) -> int:
        """Turns kept before the dropped span (truncate-middle's first exchange); 0 when none."""
        return self.dropped_turns[0] if self.dropped_turns else 0


@dataclass(frozen=True, slots=True)
class _Split:
    system: list[int]
    turns: list[list[int]] = field(default_factory=list[list[int]])


def fit_messages(
    messages: Sequence[Message],
    policy: ContextPolicy,
    counter: TokenCounter,
    *,
    n_ctx: int,
    max_tokens: int,
    stable: bool = True,
    headroom: int = 0,
) -> Fit:
    """The part of `messages` the model sees under `policy`.

    `headroom` tokens are kept free besides the reply's room (a recovery round's extra line).

    Raises `MessageTooLongError` when the newest turn does not fit even with only the
    system prompt, and `ContextFullError` under `stop` when the whole does not fit.
    """
    clean = [without_thinking(m) for m in messages]
    budget = n_ctx - reply_reserve(n_ctx, max_tokens) - headroom
    split = _split(clean)
    floor = _first_measurable(clean, split, budget, n_ctx)
    everything = _pick(clean, range(len(clean)))
    if floor == 0:
        total = counter.prompt_tokens(everything)
        if total <= budget or not split.turns:
            return Fit(everything, total, budget, turns=len(split.turns))
    else:  # an older turn can never fit: it is not measured, and the window starts after it
        total = _chars(clean, range(len(clean))) // MAX_CHARS_PER_TOKEN
        if policy is ContextPolicy.STOP:
            raise ContextFullError(total, budget, n_ctx)
    newest = split.turns[-1]
    alone = counter.prompt_tokens(_pick(clean, split.system + newest))
    if alone > budget:
        overhead = alone - counter.text_tokens(_text(clean, newest))
        if split.system and overhead >= budget:  # the system prompt (with the template) fills it already
            raise SystemPromptTooLongError(counter.prompt_tokens(_pick(clean, split.system)), budget, n_ctx)
        raise MessageTooLongError(alone - overhead, max(0, budget - overhead), n_ctx)
    if policy is ContextPolicy.STOP:
        raise ContextFullError(total, budget, n_ctx)
    head = _head(clean, split, policy, counter, budget) if floor == 0 else []
    return _window(clean, split, head, counter, budget, stable, total, floor)


def _first_measurable(clean: list[Message], split: _Split, budget: int, n_ctx: int) -> int:
    """The first turn after the last one holding a message too long to measure (0: none is).

    Raises MessageTooLargeError when that is the newest turn, or the system prompt.
    """
    most = max(1, budget) * MAX_CHARS_PER_TOKEN
    if split.system and _chars(clean, split.system) > most:
        raise SystemPromptTooLongError(_chars(clean, split.system) // MAX_CHARS_PER_TOKEN, budget, n_ctx)
    floor = 0
    for t, turn in enumerate(split.turns):
        if _chars(clean, turn) > most:
            if t == len(split.turns) - 1:
                raise MessageTooLargeError(_chars(clean, turn), budget, n_ctx)
            floor = t + 1
    return floor


def _chars(messages: Sequence[Message], indexes: Sequence[int]) -> int:
    return sum(len(str(messages[i].get("content") or "")) for i in indexes)


def unmeasured(messages: Sequence[Message]) -> Fit:
    """Everything, for a backend that cannot count (its context is unknown): sent as before."""
    clean = [without_thinking(m) for m in messages]
    return Fit(_pick(clean, range(len(clean))), 0, 0, turns=len(_split(clean).turns), measured=False)


def _head(clean: list[Message], split: _Split, policy: ContextPolicy, counter: TokenCounter, budget: int) -> list[int]:
    """The turns kept at the start: the first exchange under truncate-middle, if it fits with the newest."""
    if policy is not ContextPolicy.TRUNCATE_MIDDLE or len(split.turns) < 2:
        return []
    head = split.turns[0]
    if counter.prompt_tokens(_pick(clean, split.system + head + split.turns[-1])) > budget:
        return []
    return head


def _window(
    clean: list[Message],
    split: _Split,
    head: list[int],
    counter: TokenCounter,
    budget: int,
    stable: bool,
    total: int,
    floor: int = 0,
) -> Fit:
    turns = split.turns
    first = max(floor, 1 if head else 0)  # the first turn the window may start at

    def indexes(start: int) -> list[int]:
        return split.system + head + [i for turn in turns[start:] for i in turn]

    def fits(start: int) -> bool:
        return counter.prompt_tokens(_pick(clean, indexes(start))) <= budget

    # Each render is the whole prompt through the template and tokenizer, so the smallest start
    # that fits is first estimated from the turns' own sizes, then confirmed by rendering (it
    # fits and the one before does not): about two renders where a bisection over all turns
    # takes log2(turns) — 7 at 100 turns — on every turn of a long chat.
    # Turns before `floor` are never measured (one of them is too long to), only dropped.
    unmeasured = {i for turn in turns[:floor] for i in turn}
    texts = [0 if i in unmeasured else counter.text_tokens(str(m.get("content") or "")) for i, m in enumerate(clean)]
    if floor:
        total = counter.prompt_tokens(_pick(clean, split.system + [i for turn in turns[floor:] for i in turn]))
    # The template's markup a message, from the exact total: the estimate is then near exact.
    markup = max(0.0, (total - sum(texts)) / max(1, len(clean) - len(unmeasured)))
    estimate = [sum(texts[i] for i in turn) + markup * len(turn) for turn in turns]
    lo = _smallest(fits, _estimated_start(estimate, first, total, budget), first, len(turns) - 1)
    grid = [sum(texts[i] for i in turn) + MESSAGE_OVERHEAD * len(turn) for turn in turns]
    start = _stable_start(grid, first, lo, budget) if stable else lo
    kept = _pick(clean, indexes(start))
    dropped_turns = tuple(range(1 if head else 0, start))
    dropped = tuple(i for t in dropped_turns for i in turns[t])
    return Fit(kept, counter.prompt_tokens(kept), budget, dropped, dropped_turns, len(turns))


def _smallest(fits: Callable[[int], bool], guess: int, lo: int, hi: int) -> int:
    """The smallest start in [lo, hi] that fits (`hi` when none does), searched outwards from
    `guess` in doubling steps, then bisected: few renders when the guess is near."""
    guess = min(max(guess, lo), hi)
    if fits(guess):
        hi, step = guess, 1
        while hi - step >= lo and fits(hi - step):
            hi, step = hi - step, step * 2
        lo = max(lo, hi - step + 1)
    else:
        lo, step = guess + 1, 1
        while lo + step <= hi and not fits(lo + step - 1):
            lo, step = lo + step, step * 2
        hi = min(hi, lo + step - 1)
    while lo < hi:  # fits(hi) or hi is the newest turn; every start below lo does not fit
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _estimated_start(costs: list[float], first: int, total: int, budget: int) -> int:
    """The first start whose estimate (`total` less the turns dropped before it) fits."""
    size, start = float(total), first
    while start < len(costs) - 1 and size > budget:
        size -= costs[start]
        start += 1
    return start


def _stable_start(costs: list[int], first: int, smallest: int, budget: int) -> int:
    """The first step of the grid at or after `smallest` (the newest turn always stays).

    Grid steps sit where the running size of the turns after `first` crosses a multiple
    of budget / STEP_FRACTION. They depend only on those turns, which never change as the
    conversation grows, so consecutive turns pick the same start until it no longer fits.
    """
    step = max(1, budget // STEP_FRACTION)
    grid: list[int] = [first]
    running, mark = 0, step
    for t in range(first, len(costs) - 1):
        running += costs[t]
        if running >= mark:
            grid.append(t + 1)
            mark = (running // step + 1) * step
    at = bisect_left(grid, smallest)
    return grid[at] if at < len(grid) else smallest


def _split(messages: Sequence[Message]) -> _Split:
    """The leading system message, then the turns (each begins at a user message)."""
    system = [0] if messages and messages[0].get("role") == "system" else []
    split = _Split(system)
    for i in range(len(system), len(messages)):
        if messages[i].get("role") == "user" or not split.turns:
            split.turns.append([])
        split.turns[-1].append(i)
    return split


def _pick(messages: Sequence[Message], indexes: Sequence[int]) -> tuple[Message, ...]:
    return join_runs([messages[i] for i in indexes])


def join_runs(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Consecutive user (or assistant) messages joined into one, since many templates need roles
    to alternate (a question left unanswered by a failed turn, then another)."""
    out: list[Message] = []
    for m in messages:
        role = m.get("role")
        if out and role in ("user", "assistant") and out[-1].get("role") == role:
            joined = out[-1].copy()
            joined["content"] = f"{out[-1].get('content') or ''}\n\n{m.get('content') or ''}"
            if images := [*(out[-1].get("images") or ()), *(m.get("images") or ())]:
                joined["images"] = images  # each question's pictures go with the joined one
            out[-1] = joined
        else:
            out.append(m.copy())
    return tuple(out)


def _text(messages: Sequence[Message], indexes: Sequence[int]) -> str:
    return "\n".join(str(messages[i].get("content") or "") for i in indexes)


_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)
_THINKING_KEYS = ("thinking", "reasoning_content", "reasoning")


def without_thinking(message: Message) -> Message:
    """`message` without thinking: no thinking fields, no leading think block in an answer."""
    out = cast(Message, {k: v for k, v in message.items() if k not in _THINKING_KEYS})
    if out["role"] == "assistant" and "</think>" in out["content"]:
        out["content"] = _THINK_BLOCK.sub("", out["content"], count=1)
    return out
