"""The server's pure parts: stop sequences whatever the chunking, the FIFO line, request checks."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desktop.serve.admission import ModelLine, QueueFull
from desktop.serve.errors import ApiError
from desktop.serve.wire import Defaults, parse_chat
from engine.backends.base import Sampling
from engine.backends.stops import StopMatcher


def _run(matcher: StopMatcher, chunks: list[str]) -> str:
    return "".join(matcher.feed(c) for c in chunks) + matcher.flush()


@given(st.text(alphabet="abS TOP", max_size=40), st.lists(st.integers(0, 40), max_size=6))
def test_stop_output_does_not_depend_on_chunking(text: str, cuts: list[int]) -> None:
    points = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    chunks = [text[a:b] for a, b in itertools.pairwise(points)]
    whole = StopMatcher(("STOP", "bb"))
    split = StopMatcher(("STOP", "bb"))
    expected = _run(whole, [text])
    assert _run(split, chunks) == expected
    assert split.hit == whole.hit
    cut = min((i for i in (text.find("STOP"), text.find("bb")) if i >= 0), default=-1)
    assert expected == (text[:cut] if cut >= 0 else text)


def test_held_text_is_released_when_it_is_not_a_stop() -> None:
    matcher = StopMatcher(("END",))
    assert matcher.feed("the EN") == "the "
    assert matcher.feed("D") == "" and matcher.hit
    other = StopMatcher(("END",))
    assert other.feed("the EN") == "the "
    assert other.feed("ough") == "ENough"


def test_the_line_is_first_come_first_served_and_bounded() -> None:
    async def scenario() -> list[str]:
        line = ModelLine(max_waiting=2)
        order: list[str] = []
        await line.acquire()

        async def waiter(name: str) -> None:
            await line.acquire()
            order.append(name)
            line.release()

        tasks = [asyncio.ensure_future(waiter(n)) for n in ("a", "b")]
        await asyncio.sleep(0)
        with pytest.raises(QueueFull) as full:
            await line.acquire()
        assert full.value.retry_after_s >= 1
        line.release()
        await asyncio.gather(*tasks)
        assert not line.busy and line.waiting == 0
        return order

    assert asyncio.run(scenario()) == ["a", "b"]


def test_a_waiter_that_leaves_does_not_take_the_model() -> None:
    async def scenario() -> None:
        line = ModelLine(max_waiting=2)
        await line.acquire()
        gone = asyncio.ensure_future(line.acquire())
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.sleep(0)
        assert line.waiting == 0
        line.release()
        assert not line.busy

    asyncio.run(scenario())


DEFAULTS = Defaults(Sampling(temperature=0.7, seed=None), max_tokens=100, context_size=2048)


def test_defaults_fill_what_a_request_leaves_out() -> None:
    call = parse_chat(
        {
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
            ]
        },
        DEFAULTS,
    )
    assert call.sampling.temperature == 0.7 and call.max_tokens == 100 and not call.stream
    assert call.messages == ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"})


def test_max_tokens_past_the_context_is_refused() -> None:
    with pytest.raises(ApiError) as info:
        parse_chat({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 4096}, DEFAULTS)
    assert info.value.status == 400 and info.value.param == "max_completion_tokens"
    assert "2048-token context" in info.value.message


def test_a_named_tool_choice_offers_only_that_tool() -> None:
    tools = [{"type": "function", "function": {"name": n}} for n in ("a", "b")]
    call = parse_chat(
        {
            "messages": [{"role": "user", "content": "x"}],
            "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": "b"}},
        },
        DEFAULTS,
    )
    assert call.tools is not None and [t["function"]["name"] for t in call.tools] == ["b"]
    assert call.messages == ({"role": "user", "content": "x"},)  # the grammar forces it: no added line
