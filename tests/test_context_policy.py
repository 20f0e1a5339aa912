"""The context policy (engine/turns/context_policy.py): what the model sees of a long conversation."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import cast

import pytest

from engine.backends.base import Message
from engine.turns.context_policy import (
    ContextFullError,
    ContextPolicy,
    MessageTooLongError,
    fit_messages,
    join_runs,
    parse_policy,
    reply_reserve,
    unmeasured,
    without_thinking,
)


class Words:
    """A counter like a template: each message costs its words plus 3, the prompt 1 more."""

    def __init__(self) -> None:
        self.prompts = 0

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        self.prompts += 1
        return sum(self.text_tokens(str(m["content"])) + 3 for m in messages) + 1

    def text_tokens(self, text: str) -> int:
        return len(text.split())


def chat(turns: int, words: int = 10, system: str | None = "Be brief.") -> list[Message]:
    out: list[Message] = [{"role": "system", "content": system}] if system else []
    for i in range(turns):
        out.append({"role": "user", "content": f"q{i} " + "w " * (words - 1)})
        out.append({"role": "assistant", "content": f"a{i} " + "w " * (words - 1)})
    out.append({"role": "user", "content": f"q{turns} now"})
    return out


def fit(
    messages: list[Message], policy: ContextPolicy, n_ctx: int = 200, max_tokens: int = 50, stable: bool = False
) -> tuple[Message, ...]:
    return fit_messages(messages, policy, Words(), n_ctx=n_ctx, max_tokens=max_tokens, stable=stable).messages


def test_a_conversation_that_fits_is_sent_whole_under_every_policy() -> None:
    messages = chat(3)
    for policy in ContextPolicy:
        result = fit_messages(messages, policy, Words(), n_ctx=4096, max_tokens=512)
        assert list(result.messages) == messages
        assert not result.cut and result.resume_turn is None


def test_truncate_middle_keeps_system_first_exchange_and_the_latest_turns() -> None:
    messages = chat(30)
    result = fit_messages(messages, ContextPolicy.TRUNCATE_MIDDLE, Words(), n_ctx=200, max_tokens=50, stable=False)
    sent = list(result.messages)
    assert sent[:3] == messages[:3]  # system, first question, first answer
    assert sent[-1] == messages[-1]  # the message being answered
    tail = sent[3:]
    assert tail == messages[len(messages) - len(tail) :]  # a contiguous run of the newest turns
    assert tail[0]["role"] == "user"  # no orphaned answer at the cut
    assert result.prompt_tokens <= 150 == result.budget  # 200 minus the reply's 50
    # As many as fit: one more turn would not.
    one_more = messages[:3] + messages[len(messages) - len(tail) - 2 :]
    assert Words().prompt_tokens(one_more) > 150


def test_rolling_keeps_the_system_prompt_and_only_the_latest_turns() -> None:
    messages = chat(30)
    sent = list(fit(messages, ContextPolicy.ROLLING))
    assert sent[0] == messages[0]
    assert sent[1]["role"] == "user" and sent[1] != messages[1]
    assert sent[1:] == messages[len(messages) - len(sent) + 1 :]


def test_stop_refuses_a_conversation_that_no_longer_fits_with_a_clear_message() -> None:
    with pytest.raises(ContextFullError, match=r"no longer fits the 200-token context.*another context policy"):
        fit(chat(30), ContextPolicy.STOP)


def test_a_message_that_cannot_fit_even_alone_is_refused_under_every_policy() -> None:
    messages = [*chat(2)[:-1], {"role": "user", "content": "long " * 400}]
    for policy in ContextPolicy:
        with pytest.raises(MessageTooLongError, match="this message needs 400 tokens") as caught:
            fit(messages, policy)
        assert caught.value.limit < 150


def test_truncate_middle_drops_the_first_exchange_rather_than_refuse_when_it_is_what_does_not_fit() -> None:
    messages = chat(5)
    messages[1] = {"role": "user", "content": "big " * 135}
    sent = fit(messages, ContextPolicy.TRUNCATE_MIDDLE)
    assert messages[1] not in sent and sent[-1] == messages[-1]


def test_a_stuck_conversation_continues_the_old_too_long_question_is_dropped() -> None:
    # A question too long for the context was stored before policies existed; its turn
    # failed, so the next question follows it directly.
    messages = [*chat(3)[:-1], {"role": "user", "content": "huge " * 400}, {"role": "user", "content": "hello?"}]
    for policy in (ContextPolicy.TRUNCATE_MIDDLE, ContextPolicy.ROLLING):
        sent = fit(messages, policy)
        assert sent[-1] == {"role": "user", "content": "hello?"}
        assert all("huge" not in str(m["content"]) for m in sent)


def test_consecutive_questions_that_stay_are_joined_so_roles_alternate() -> None:
    messages: list[Message] = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    assert fit(messages, ContextPolicy.ROLLING) == ({"role": "user", "content": "one\n\ntwo"},)
    assert join_runs([{"role": "system", "content": "a"}, {"role": "system", "content": "b"}]) == (
        {"role": "system", "content": "a"},
        {"role": "system", "content": "b"},
    )


def test_thinking_from_earlier_turns_is_never_sent() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "hi"},
        cast(Message, {"role": "assistant", "content": "<think>secret plan</think>\nHello!", "thinking": "more"}),
        {"role": "user", "content": "again"},
    ]
    sent = fit(messages, ContextPolicy.TRUNCATE_MIDDLE, n_ctx=4096)
    assert sent[1] == {"role": "assistant", "content": "Hello!"}
    assert without_thinking({"role": "user", "content": "<think>x</think> y"})["content"] == "<think>x</think> y"
    assert unmeasured(messages).messages[1] == {"role": "assistant", "content": "Hello!"}


def test_the_divider_goes_after_the_dropped_span() -> None:
    messages = chat(30)
    result = fit_messages(messages, ContextPolicy.TRUNCATE_MIDDLE, Words(), n_ctx=200, max_tokens=50, stable=False)
    assert result.dropped_turns[0] == 1  # the first exchange (turn 0) stays
    assert result.dropped == tuple(range(3, 3 + 2 * len(result.dropped_turns)))
    assert result.resume_turn is not None
    first_kept_after_gap = messages[1 + 2 * result.resume_turn]
    assert result.messages[3] == first_kept_after_gap


def test_the_window_moves_in_steps_so_the_prompt_prefix_stays_stable() -> None:
    # Growing the conversation turn by turn: most turns' prompts must extend the previous
    # turn's prompt (so the KV cache is reused); with exact fitting every turn would move.
    def prompts(stable: bool) -> list[tuple[Message, ...]]:
        out = []
        for turns in range(10, 60):
            out.append(
                fit_messages(
                    chat(turns), ContextPolicy.TRUNCATE_MIDDLE, Words(), n_ctx=400, max_tokens=50, stable=stable
                ).messages
            )
        return out

    def extended(seq: list[tuple[Message, ...]]) -> int:
        return sum(1 for a, b in itertools.pairwise(seq) if b[: len(a) - 1] == a[:-1])

    stable, exact = prompts(True), prompts(False)
    assert extended(stable) >= 0.6 * (len(stable) - 1)
    assert extended(exact) < 0.3 * (len(exact) - 1)
    for sent in stable:  # a stable window still keeps the shape and fits
        assert Words().prompt_tokens(sent) <= 350 and sent[3]["role"] == "user"


def test_the_reply_keeps_its_room_but_never_more_than_half_the_context() -> None:
    assert reply_reserve(4096, 512) == 512
    assert reply_reserve(4096, 4096) == 2048
    assert reply_reserve(512, 1) == 1


def test_policy_names_parse_and_anything_else_falls_back() -> None:
    assert parse_policy("rolling") is ContextPolicy.ROLLING
    assert parse_policy("stop") is ContextPolicy.STOP
    assert parse_policy(None) is ContextPolicy.TRUNCATE_MIDDLE
    assert parse_policy("nonsense", ContextPolicy.STOP) is ContextPolicy.STOP


@pytest.mark.parametrize("turns", [100, 1000])
def test_the_fit_renders_a_handful_of_prompts_however_long_the_chat(turns: int) -> None:
    # The whole, the newest alone, the first exchange with it, two around the estimated start,
    # and the kept prompt (which a real backend serves from its prompt cache). A bisection over
    # every turn rendered 11 at 100 turns and 14 at 1,000.
    for policy in (ContextPolicy.TRUNCATE_MIDDLE, ContextPolicy.ROLLING):
        counter = Words()
        result = fit_messages(chat(turns), policy, counter, n_ctx=2048, max_tokens=256)
        assert result.dropped_turns and counter.prompts <= 6


def test_a_system_prompt_longer_than_the_context_is_named_as_the_cause() -> None:
    from engine.turns.context_policy import SystemPromptTooLongError

    messages: list[Message] = [{"role": "system", "content": "word " * 500}, {"role": "user", "content": "hi"}]
    for policy in ContextPolicy:
        with pytest.raises(SystemPromptTooLongError, match=r"the system prompt alone \(50[0-9] tokens\) is longer"):
            fit(messages, policy)


@pytest.mark.parametrize("seed", range(12))
def test_the_estimated_search_finds_the_smallest_start_that_fits(seed: int) -> None:
    import random

    rng = random.Random(seed)
    messages: list[Message] = [{"role": "system", "content": "Be brief."}]
    for i in range(rng.randint(5, 120)):  # turns of very different sizes
        messages.append({"role": "user", "content": f"q{i} " + "w " * rng.randint(1, 120)})
        messages.append({"role": "assistant", "content": f"a{i} " + "w " * rng.randint(1, 300)})
    messages.append({"role": "user", "content": "now"})
    counter = Words()
    result = fit_messages(messages, ContextPolicy.ROLLING, counter, n_ctx=2048, max_tokens=256, stable=False)
    budget = result.budget
    turns = [i for i, m in enumerate(messages) if m["role"] == "user"]
    fitting = [t for t, at in enumerate(turns) if counter.prompt_tokens([messages[0], *messages[at:]]) <= budget]
    assert len(result.dropped_turns) == min(fitting)  # brute force: the first start that fits
