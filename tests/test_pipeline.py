"""The reply pipeline end to end: pieces in, coalesced thinking and content deltas out."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.events import ContentDelta, Piece, ThinkingDelta
from engine.reply.pipeline import Delta, ReplyPipeline
from tests.reply_text import split_thinking, strip_scaffolding


def special(text: str) -> Piece:
    return Piece(text, special=True)


def run(pieces: Iterable[Piece], *, start_in_thinking: bool = False) -> tuple[list[Delta], ReplyPipeline]:
    pipeline = ReplyPipeline(prefilled="<think>" if start_in_thinking else "")
    deltas: list[Delta] = []
    for piece in pieces:
        deltas += pipeline.feed(piece)
    return deltas + pipeline.flush(), pipeline


def test_plain_text_streams_as_it_comes() -> None:
    pipeline = ReplyPipeline()
    assert pipeline.feed(Piece("Hello")) == [ContentDelta("Hello")]
    assert pipeline.feed(Piece(", world")) == [ContentDelta(", world")]
    assert pipeline.flush() == []
    assert (pipeline.content, pipeline.thinking, pipeline.stripped_chars) == ("Hello, world", "", 0)


def test_held_text_yields_no_empty_delta() -> None:
    pipeline = ReplyPipeline()
    assert pipeline.feed(Piece("<tool")) == []
    assert pipeline.feed(Piece("box")) == [ContentDelta("<toolbox")]


def test_one_piece_with_both_channels_gives_one_delta_per_run() -> None:
    deltas, _ = run([Piece("a<think>b</think>c")])
    assert deltas == [ContentDelta("a"), ThinkingDelta("b"), ContentDelta("c")]


def test_thinking_tool_call_and_answer() -> None:
    pieces = [
        special("<think>"),
        Piece("Use the tool: <tool_call>{}</tool_call>"),
        special("</think>"),
        Piece("\n\n"),
        special("<|tool_call_start|>"),
        Piece('[get_weather(city="Paris")]'),
        special("<|tool_call_end|>"),
        Piece("It is sunny."),
    ]
    deltas, pipeline = run(pieces)
    assert deltas == [ThinkingDelta("Use the tool: <tool_call>{}</tool_call>"), ContentDelta("It is sunny.")]
    assert pipeline.thinking == "Use the tool: <tool_call>{}</tool_call>"
    assert pipeline.content == "It is sunny."
    assert pipeline.stripped_chars == len('<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>')


def test_prefilled_thinking() -> None:
    deltas, pipeline = run([Piece("hmm"), Piece("</think>"), Piece("ok")], start_in_thinking=True)
    assert deltas == [ThinkingDelta("hmm"), ContentDelta("ok")]
    assert pipeline.content == "ok"


def test_special_pieces_in_thinking_stay_raw() -> None:
    deltas, pipeline = run([special("<think>"), Piece("a"), special("<|im_start|>"), Piece("b"), special("</think>")])
    assert deltas == [ThinkingDelta("a"), ThinkingDelta("<|im_start|>"), ThinkingDelta("b")]
    assert (pipeline.thinking, pipeline.content, pipeline.stripped_chars) == ("a<|im_start|>b", "", 0)


def test_harmony_reply_with_a_tool_call_has_no_visible_content() -> None:
    pieces = [
        special("<|channel|>"),
        Piece("analysis"),
        special("<|message|>"),
        Piece("Need weather."),
        special("<|end|>"),
        special("<|start|>"),
        Piece("assistant"),
        special("<|channel|>"),
        Piece("commentary to=functions.get_weather "),
        special("<|constrain|>"),
        Piece("json"),
        special("<|message|>"),
        Piece('{"city":"Paris"}'),
    ]
    deltas, pipeline = run(pieces)
    assert deltas == [ThinkingDelta("Need weather.")]
    assert pipeline.content == ""
    assert pipeline.stripped_chars == sum(len(p.text) for p in pieces[5:])


def test_harmony_final_answer() -> None:
    header = [special("<|start|>"), Piece("assistant"), special("<|channel|>"), Piece("final"), special("<|message|>")]
    deltas, _ = run([*header, Piece("Four."), special("<|return|>")])
    assert deltas == [ContentDelta("Four.")]


def test_unterminated_tool_call_is_dropped_at_flush() -> None:
    pipeline = ReplyPipeline()
    assert pipeline.feed(Piece("Sure.")) == [ContentDelta("Sure.")]
    assert pipeline.feed(Piece("<tool_call>{")) == []
    assert pipeline.flush() == []
    assert pipeline.stripped_chars == len("<tool_call>{")


_FRAGMENTS = ["a", " ", "\n", "<think>", "</think>", "<tool_call>", "</tool_call>", "<", "[TOOL_CALLS]", "x"]


@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=20), st.data())
@settings(max_examples=100, deadline=None)
def test_any_chunking_gives_the_same_channels(parts: list[str], data: st.DataObject) -> None:
    text = "".join(parts)
    points = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=10))))
    bounds = [0, *points, len(text)]
    _, chunked = run([Piece(text[a:b]) for a, b in itertools.pairwise(bounds)])
    thinking, content = split_thinking(text)
    assert (chunked.thinking, chunked.content) == (thinking, strip_scaffolding(content))
