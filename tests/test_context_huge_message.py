"""A message too long for the context never reaches the tokenizer (IM-07), and stored sources are
bounded when a reply is shown again (IM-09).

IM-07: continuing an imported conversation that holds one 600 MB message aborted in llama.cpp's
tokenizer (`std::bad_alloc`, after 108 s at 9 GB): the fit tokenized the whole message before
finding it could not fit. Now a message longer than the context could hold at MAX_CHARS_PER_TOKEN
characters a token is never measured: the newest is refused in one line, an older one is left out.
IM-09: an imported reply with 20,000 sources stalled the window 3.9 s on opening.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from desktop.core.citations import MAX_STORED_SOURCES, sources_from_stats
from engine.backends.base import MAX_CHARS_PER_TOKEN, Message
from engine.turns.context_policy import (
    ContextFullError,
    ContextPolicy,
    MessageTooLongError,
    SystemPromptTooLongError,
    fit_messages,
)
from engine.turns.context_window import measure_draft

N_CTX = 4096
HUGE = "a" * (N_CTX * MAX_CHARS_PER_TOKEN + 1)  # 131 KB here; the review's was 600 MB


class Guarded:
    """Counts words, and fails the test if asked to measure a text too long to ever fit."""

    def __init__(self) -> None:
        self.longest = 0

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        return sum(self.text_tokens(str(m.get("content") or "")) + 3 for m in messages) + 1

    def text_tokens(self, text: str) -> int:
        self.longest = max(self.longest, len(text))
        assert len(text) <= N_CTX * MAX_CHARS_PER_TOKEN, "a huge text was handed to the tokenizer"
        return len(text.split())


def _chat(*contents: str) -> list[Message]:
    roles = ["user", "assistant"]
    system: Message = {"role": "system", "content": "Be brief."}
    return [system, *({"role": roles[i % 2], "content": c} for i, c in enumerate(contents))]


def test_a_huge_newest_message_is_refused_without_being_tokenized() -> None:
    with pytest.raises(
        MessageTooLongError,
        match=r"^this message is 131,073 characters long, far more than "
        r"the model's 4,096-token context can hold",
    ):
        fit_messages(_chat("hi", "hello", HUGE), ContextPolicy.TRUNCATE_MIDDLE, Guarded(), n_ctx=N_CTX, max_tokens=256)


@pytest.mark.parametrize("policy", [ContextPolicy.TRUNCATE_MIDDLE, ContextPolicy.ROLLING])
def test_a_huge_older_message_is_left_out_and_the_conversation_goes_on(policy: ContextPolicy) -> None:
    """The imported 600 MB message, then a new question: answered from what follows it."""
    messages = _chat(HUGE, "that was long", "later question", "later answer", "summarize")
    counter = Guarded()
    fit = fit_messages(messages, policy, counter, n_ctx=N_CTX, max_tokens=256)
    assert [m["content"] for m in fit.messages] == ["Be brief.", "later question", "later answer", "summarize"]
    assert fit.dropped == (1, 2) and fit.dropped_turns == (0,) and fit.resume_turn == 1
    assert fit.prompt_tokens <= fit.budget and counter.longest < len(HUGE)


def test_under_stop_a_huge_older_message_means_the_conversation_is_full() -> None:
    with pytest.raises(ContextFullError):
        fit_messages(_chat(HUGE, "ok", "next"), ContextPolicy.STOP, Guarded(), n_ctx=N_CTX, max_tokens=256)


def test_a_huge_system_prompt_is_refused_as_the_system_prompt() -> None:
    messages: list[Message] = [{"role": "system", "content": HUGE}, {"role": "user", "content": "hi"}]
    with pytest.raises(SystemPromptTooLongError, match=r"^the system prompt alone"):
        fit_messages(messages, ContextPolicy.TRUNCATE_MIDDLE, Guarded(), n_ctx=N_CTX, max_tokens=256)


def test_the_token_meter_never_tokenizes_a_huge_message_either() -> None:
    from engine.backends.scripted import ScriptedBackend

    backend = ScriptedBackend.from_texts("ok")
    backend.n_ctx = N_CTX
    asked: list[int] = []
    count = backend.count_tokens

    def guarded(text: str) -> int:
        asked.append(len(text))
        assert len(text) <= N_CTX * MAX_CHARS_PER_TOKEN
        return count(text)

    backend.count_tokens = guarded  # type: ignore[method-assign]
    meter = measure_draft(backend, _chat(HUGE, "ok"), "next question", ContextPolicy.STOP, 256)
    assert meter is not None and meter.problem.startswith("the conversation")


def test_stored_sources_are_bounded_when_read_back() -> None:
    """IM-09: 20,000 sources of 2,000 characters on one imported reply."""
    stats = {
        "sources": [
            {"n": i, "path": f"/d/{i}.md", "start": 0, "end": 2000, "text": "x" * 2000} for i in range(1, 20_001)
        ]
    }
    refs = sources_from_stats(stats)
    assert len(refs) == MAX_STORED_SOURCES and refs[-1].n == MAX_STORED_SOURCES
    huge = sources_from_stats({"sources": [{"n": 1, "path": "p" * 10**6, "text": "t" * 10**7}]})
    assert len(huge[0].path) <= 4096 and len(huge[0].text) <= 20_000


@pytest.mark.slow
def test_the_llama_backend_never_tokenizes_a_text_too_long_to_fit(
    smollm: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second guard: whatever reaches SmolLM2's backend, nothing too long goes to llama.cpp's tokenizer."""
    from engine.backends.base import CancelToken, Request, StreamInfo
    from engine.errors import ContextOverflowError
    from engine.llama.llama import LlamaBackend

    assert isinstance(smollm, LlamaBackend)
    llm = smollm._llm  # pyright: ignore[reportPrivateUsage]
    tokenize = llm.tokenize
    seen: list[int] = []

    def spy(text: bytes, *args: object, **kwargs: object) -> list[int]:
        seen.append(len(text))
        return tokenize(text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(llm, "tokenize", spy)
    huge = "a" * (smollm.n_ctx * MAX_CHARS_PER_TOKEN + 1)
    assert smollm.count_tokens(huge) > smollm.n_ctx
    request = Request(messages=({"role": "user", "content": huge},), max_tokens=4)
    with pytest.raises(ContextOverflowError, match="characters long, far more than"):
        list(smollm.stream(request, CancelToken(), StreamInfo()))
    assert all(n <= smollm.n_ctx * MAX_CHARS_PER_TOKEN for n in seen)
    assert smollm.count_tokens("hello world") == 2
