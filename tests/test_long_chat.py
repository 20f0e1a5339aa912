"""Long conversations end to end: every turn is answered under each policy, and the backend
receives exactly what the policy says (scripted and the real SmolLM2 at a 512-token context)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.backends.base import Message, Request, Sampling, StreamInfo, ToolSpec, make_request
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.events import Piece, TurnDone
from engine.history.store import HistoryStore
from engine.turns.context_policy import ContextFullError, ContextPolicy, MessageTooLongError, fit_messages
from engine.turns.context_window import counter_for, fit_for, fit_request
from engine.turns.rounds import fold_system
from engine.turns.runner import CORRECTION_LINE, NO_TOOLS_LINE, TurnRunner
from engine.turns.runner import sent_messages as first_round_messages

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = "You are terse."


def question(i: int) -> str:
    return f"Question {i}: " + "please tell me something about the number " * 3 + str(i)


def sent_messages(request: Request) -> list[Message]:
    """What the backend received, with the turn's fixed no-tools line taken back out of the system message."""
    messages = [m.copy() for m in request.messages]
    assert messages[0]["role"] == "system"
    messages[0]["content"] = str(messages[0]["content"]).removesuffix(f"\n\n{NO_TOOLS_LINE}")
    return messages


def run_conversation(
    backend: Any, policy: ContextPolicy, turns: int, max_tokens: int, answer: Any = None
) -> tuple[list[Message], list[tuple[tuple[Message, ...], Request]]]:
    """Chat `turns` times; return the whole conversation and (policy's messages, request received) per turn."""
    history: list[Message] = [{"role": "system", "content": SYSTEM}]
    seen: list[tuple[tuple[Message, ...], Request]] = []
    for i in range(turns):
        history.append({"role": "user", "content": question(i)})
        fit = fit_for(backend, history, policy, max_tokens)
        request = make_request(fit.messages, sampling=Sampling.greedy(), max_tokens=max_tokens)
        events = list(TurnRunner(backend).run(request, CancelToken()))
        assert isinstance(events[-1], TurnDone), (i, events[-1])
        seen.append((fit.messages, backend.requests[-1]))
        reply = "".join(getattr(e, "text", "") for e in events if type(e).__name__ == "ContentDelta")
        history.append({"role": "assistant", "content": reply})
    return history, seen


def assert_policy_shape(history: list[Message], sent: list[Message], policy: ContextPolicy) -> None:
    """system (+ first exchange under truncate-middle) + a contiguous run of the latest turns."""
    if len(sent) == len(history):
        assert sent == history
        return
    assert sent[0] == history[0]
    head = 3 if policy is ContextPolicy.TRUNCATE_MIDDLE and sent[1] == history[1] else 1
    if policy is ContextPolicy.TRUNCATE_MIDDLE:
        assert head == 3 and sent[2] == history[2]
    tail = sent[head:]
    assert tail[0]["role"] == "user"  # never an orphaned answer at the cut
    upto = history.index(sent[-1]) + 1
    assert tail == history[upto - len(tail) : upto]


@pytest.mark.parametrize("policy", [ContextPolicy.TRUNCATE_MIDDLE, ContextPolicy.ROLLING])
def test_sixty_scripted_turns_at_512_are_all_answered_as_the_policy_says(policy: ContextPolicy) -> None:
    replies = [f"Answer {i}: " + "some words " * 15 for i in range(60)]
    backend = ScriptedBackend.from_texts(*replies)
    backend.n_ctx = 512
    history, seen = run_conversation(backend, policy, 60, max_tokens=64)
    cuts = 0
    for turn, (fitted, request) in enumerate(seen):
        sent = sent_messages(request)
        assert sent == list(fitted)
        assert backend.count_prompt_tokens(request.messages) <= 512 - 64
        assert_policy_shape(history[: 2 + 2 * turn], sent, policy)
        cuts += len(sent) < 2 + 2 * turn
    assert cuts > 40  # the window really moved


def test_the_counted_prompt_is_what_the_runner_sends_and_its_recovery_fits_the_headroom() -> None:
    backend = ScriptedBackend.from_texts("", "Now an answer.")  # empty first: one recovery round
    backend.n_ctx = 512
    messages: tuple[Message, ...] = ({"role": "system", "content": SYSTEM}, {"role": "user", "content": "hello"})
    request, fit = fit_request(backend, make_request(messages, max_tokens=64), ContextPolicy.TRUNCATE_MIDDLE)
    events = list(TurnRunner(backend).run(request))
    assert isinstance(events[-1], TurnDone)
    assert len(backend.requests) == 2
    assert backend.requests[0].messages == first_round_messages(messages, None)
    assert backend.count_prompt_tokens(backend.requests[0].messages) == fit.prompt_tokens  # counted = sent
    recovery = backend.count_prompt_tokens(backend.requests[1].messages)
    counter = counter_for(backend)
    assert counter is not None and fit.prompt_tokens < recovery <= fit.prompt_tokens + counter.recovery_headroom()


def test_under_stop_turns_are_answered_until_full_then_refused_with_a_clear_message() -> None:
    answers = [f"Answer {i}: " + "some words " * 15 for i in range(60)]
    backend = ScriptedBackend.from_texts(*answers)
    backend.n_ctx = 512
    history: list[Message] = [{"role": "system", "content": SYSTEM}]
    counter = counter_for(backend)
    assert counter is not None
    answered = 0
    for i in range(60):
        history.append({"role": "user", "content": question(i)})
        if counter.prompt_tokens(history) > 512 - 64 - counter.recovery_headroom():  # full: the policy decides
            break
        fit = fit_for(backend, history, ContextPolicy.STOP, 64)
        assert fit.messages == tuple(history)  # nothing is ever dropped
        events = list(TurnRunner(backend).run(make_request(fit.messages, max_tokens=64)))
        assert isinstance(events[-1], TurnDone)
        history.append({"role": "assistant", "content": answers[i]})
        answered += 1
    assert answered >= 5
    while backend.count_prompt_tokens(history) <= 512:
        history.append({"role": "user", "content": question(len(history))})
    with pytest.raises(ContextFullError, match="no longer fits the 512-token context"):
        fit_for(backend, history, ContextPolicy.STOP, 64)


def test_a_backend_that_cannot_count_gets_everything_as_before() -> None:
    backend = ScriptedBackend.from_texts("ok")  # no context size: it declares no counting
    assert counter_for(backend) is None
    history: list[Message] = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    fit = fit_for(backend, history, ContextPolicy.ROLLING, 64)
    assert not fit.measured and fit.messages == ({"role": "user", "content": "a\n\nb"},)


# -- the real model ---------------------------------------------------------------------------


class Recording:
    """A real backend that also keeps each request and stream info (counting passes through)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.requests: list[Request] = []
        self.infos: list[StreamInfo] = []

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        self.requests.append(request)
        self.infos.append(info)
        return self.inner.stream(request, cancel, info)

    def count_prompt_tokens(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        return self.inner.count_prompt_tokens(messages, tools)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def check_grammar(self, gbnf: str) -> str | None:
        return self.inner.check_grammar(gbnf)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def smollm_512(smollm_path: Path) -> Iterator[Any]:
    from engine.llama.llama import LlamaBackend

    backend = LlamaBackend(smollm_path, n_ctx=512, n_threads=1)  # 1 thread: steadier on a shared CPU
    yield backend
    backend.close()


# 30 turns under truncate-middle (the window is full after about ten, then moves on every turn); rolling
# moves its window the same way (24 turns).
@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("policy", "turns"), [(ContextPolicy.TRUNCATE_MIDDLE, 30), (ContextPolicy.ROLLING, 24)])
def test_real_turns_at_512_are_all_answered_and_the_kv_prefix_is_reused(
    smollm_512: Any, policy: ContextPolicy, turns: int
) -> None:
    backend = Recording(smollm_512)
    history, seen = run_conversation(backend, policy, turns, max_tokens=6)
    for turn, (fitted, request) in enumerate(seen):
        sent = sent_messages(request)
        assert sent == list(fitted)
        assert_policy_shape(history[: 2 + 2 * turn], sent, policy)
        assert backend.infos[turn].prompt_tokens <= 512 - 6
    assert len(seen[-1][0]) < len(history) - 1  # the window moved
    moved = [turn for turn, (fitted, _) in enumerate(seen) if len(fitted) < 2 + 2 * turn]
    assert len(moved) >= 10, moved  # and went on moving, turn after turn
    # KV reuse: only the last answer and the new question are evaluated, also on the turns
    # where the window moved (the kept span is shifted in the cache, engine/llama/kv_reuse.py).
    evaluated = [i.prompt_tokens - i.cached_tokens for i in backend.infos[1:]]
    small = [e for e in evaluated if e < 80]
    assert len(small) >= 0.9 * len(evaluated), evaluated
    assert max(i.cached_tokens for i in backend.infos) > 200


@pytest.mark.slow  # loads the real model (tests/slow_marks.py)
def test_a_real_message_longer_than_the_context_is_refused(smollm_512: Any) -> None:
    history: list[Message] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "word " * 600}]
    for policy in ContextPolicy:
        with pytest.raises(MessageTooLongError, match=r"this message needs 60[0-9] tokens"):
            fit_for(smollm_512, history, policy, 64)
    counter = counter_for(smollm_512)
    assert counter is not None
    # Measured through the template, exactly the prompt a turn renders (its own system line folded in);
    # the recovery round's longer prompt fits in the headroom kept beside it.
    short: list[Message] = [{"role": "user", "content": "hello there"}]
    first = fold_system(tuple(short), NO_TOOLS_LINE)
    assert counter.prompt_tokens(short) == len(smollm_512.prompt_tokens(Request(messages=first))[0])
    recovery = len(smollm_512.prompt_tokens(Request(messages=fold_system(first, CORRECTION_LINE)))[0])
    assert counter.prompt_tokens(short) < recovery <= counter.prompt_tokens(short) + counter.recovery_headroom()
    assert fit_messages(short, ContextPolicy.ROLLING, counter, n_ctx=512, max_tokens=64).prompt_tokens > 2


# -- the CLI ----------------------------------------------------------------------------------


def ember(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "desktop", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=180
    )


def _store(home: Path) -> HistoryStore:
    from models.library.paths import ember_paths

    return HistoryStore(ember_paths().ensure().history_db)


@pytest.mark.slow  # starts a process
def test_cli_refuses_a_too_long_message_without_storing_it_and_a_stuck_conversation_continues(ember_home: Path) -> None:
    base = ("chat", "--ctx", "512", "--temperature", "0", "--max-tokens", "8")
    first = ember(*base, "Hi there", home=ember_home)
    assert first.returncode == 0, first.stderr
    long = ember(*base, "-c", "word " * 700, home=ember_home)
    assert long.returncode == 3
    assert "this message needs" in long.stderr and long.stderr.count("\n") == 1
    with _store(ember_home) as store:
        conv = store.latest_conversation()
        assert conv is not None
        assert [m.role for m in store.path(conv.id)] == ["user", "assistant"]  # not stored
        # A conversation stuck before policies existed: a too-long question stored, unanswered.
        store.add_message(conv.id, "user", "word " * 700, parent_id=store.path(conv.id)[-1].id)
    more = ember(*base, "-c", "--context-policy", "rolling", "--events", "And now?", home=ember_home)
    assert more.returncode == 0, more.stderr
    assert "outside the model's context" in more.stderr
    assert json.loads(more.stdout.splitlines()[-1])["type"] == "done"
    with _store(ember_home) as store:
        conv = store.latest_conversation()
        assert conv is not None and conv.settings["context_policy"] == "rolling"


def test_counting_runs_on_its_own_thread_beside_the_model_thread() -> None:
    import asyncio
    import threading

    from engine.runtime import Engine

    async def main() -> None:
        engine = Engine()
        assert await engine.measure(lambda b: 1) is None  # no model yet
        first = ScriptedBackend.from_texts("a")
        await engine.load(lambda: first)
        seen = await engine.measure(lambda b: (b is first, threading.current_thread().name))
        assert seen is not None and seen[0] and seen[1].startswith("ember-count")
        second = ScriptedBackend.from_texts("b")
        await engine.load(lambda: second)
        assert await engine.measure(lambda b: b is second)
        await engine.aclose()

    asyncio.run(main())


def test_the_cache_span_a_moved_window_keeps_is_found() -> None:
    from engine.llama.kv_reuse import MIN_REUSE, find_span

    head, dropped, kept = list(range(10)), list(range(100, 200)), list(range(300, 300 + MIN_REUSE + 20))
    cached = head + dropped + kept
    assert find_span(cached, head + kept + [7, 7, 7], len(head)) == (len(head) + len(dropped), len(kept))
    assert find_span(cached, head + kept[:10] + [7] * 80, len(head)) == (0, 0)  # too short to be worth it
