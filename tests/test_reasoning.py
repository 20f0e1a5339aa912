"""The thinking splitter: every format, pre-filled thinking, tokens vs text, chunking."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.events import Piece
from engine.reply.reasoning import (
    ANSWER_HEADERS,
    THINKING_FORMATS,
    Channel,
    ThinkingFormat,
    ThinkingSplitter,
)
from tests.reply_text import split_thinking

Run = tuple[Channel, str]


def merge(pairs: Iterable[tuple[Channel, str]]) -> list[Run]:
    """Adjacent same-channel text joined, empty text dropped."""
    runs: list[Run] = []
    for channel, text in pairs:
        if not text:
            continue
        if runs and runs[-1][0] == channel:
            runs[-1] = (channel, runs[-1][1] + text)
        else:
            runs.append((channel, text))
    return runs


def split_pieces(pieces: Iterable[Piece], *, start_in_thinking: bool = False) -> list[tuple[Channel, Piece]]:
    s = ThinkingSplitter("<think>" if start_in_thinking else "")
    out: list[tuple[Channel, Piece]] = []
    for piece in pieces:
        out += s.feed_piece(piece)
    return out + s.flush()


def split_chunks(chunks: Iterable[str], *, start_in_thinking: bool = False) -> list[Run]:
    pairs = split_pieces([Piece(c) for c in chunks], start_in_thinking=start_in_thinking)
    return merge((ch, p.text) for ch, p in pairs)


def special(text: str) -> Piece:
    return Piece(text, special=True)


def cut(text: str, points: Iterable[int]) -> list[str]:
    bounds = [0, *sorted(set(points)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


_OPENERS = {f.opener: f.closer for f in THINKING_FORMATS}
_CONTENT_RE = re.compile("|".join(re.escape(m) for m in sorted({*_OPENERS, *ANSWER_HEADERS}, key=len, reverse=True)))


def reference(text: str, *, start_in_thinking: bool = False) -> list[Run]:
    """An independent one-shot oracle for plain text."""
    closer = "</think>" if start_in_thinking else None
    runs: list[tuple[Channel, str]] = []
    pos, lstrip = 0, False
    while True:
        if closer is not None:
            at = text.find(closer, pos)
            runs.append(("thinking", text[pos : at if at >= 0 else len(text)]))
            if at < 0:
                return merge(runs)
            pos, closer, lstrip = at + len(closer), None, True
            continue
        m = _CONTENT_RE.search(text, pos)
        segment = text[pos : m.start() if m else len(text)]
        if lstrip and segment.strip():
            segment, lstrip = segment.lstrip(), False
        runs.append(("content", "" if lstrip else segment))
        if m is None:
            return merge(runs)
        pos = m.end()
        if m.group() in ANSWER_HEADERS:
            lstrip = True
        else:
            closer = _OPENERS[m.group()]


# --- formats --------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", THINKING_FORMATS, ids=lambda f: f.opener)
def test_each_format_splits_thinking_from_content(fmt: ThinkingFormat) -> None:
    text = f"Intro {fmt.opener}Reasoning <tool_call>{{}}</tool_call>{fmt.closer}\n\nAnswer"
    expected = [("content", "Intro "), ("thinking", "Reasoning <tool_call>{}</tool_call>"), ("content", "Answer")]
    assert split_chunks([text]) == expected
    for i in range(len(text) + 1):
        assert split_chunks(cut(text, [i])) == expected, i


@pytest.mark.parametrize("fmt", THINKING_FORMATS, ids=lambda f: f.opener)
def test_each_format_as_special_tokens(fmt: ThinkingFormat) -> None:
    pieces = [Piece("a"), special(fmt.opener), Piece("why"), special(fmt.closer), Piece("b")]
    pairs = split_pieces(pieces)
    assert pairs == [("content", Piece("a")), ("thinking", Piece("why")), ("content", Piece("b"))]


def test_prefilled_think_starts_in_thinking() -> None:
    assert split_chunks(["Let me ", "see.</th", "ink>\n\nIt is 4."], start_in_thinking=True) == [
        ("thinking", "Let me see."),
        ("content", "It is 4."),
    ]
    assert split_thinking("all reasoning", prefilled="<think>") == ("all reasoning", "")


def test_unclosed_thinking_stays_thinking() -> None:
    assert split_thinking("<think>never closes <tool_ca") == ("never closes <tool_ca", "")


def test_thinking_can_open_again_later() -> None:
    assert split_thinking("<think>a</think>b<think>c</think>d") == ("ac", "bd")


def test_markers_of_other_formats_inside_thinking_are_thinking() -> None:
    assert split_thinking("<think>[THINK]x<|end|></think>y") == ("[THINK]x<|end|>", "y")


def test_lone_closer_and_look_alikes_in_content_stay() -> None:
    for text in ("a </think> b", "think about <thinking> and [THINK", "<seed:thin"):
        assert split_thinking(text) == ("", text)


def test_partial_opener_at_the_end_is_content() -> None:
    s = ThinkingSplitter()
    assert s.feed("Hello <thi") == [("content", "Hello ")]
    assert s.flush() == [("content", Piece("<thi"))]


# --- whitespace after the closer ------------------------------------------------------


def test_leading_whitespace_after_closer_is_stripped_for_any_chunking() -> None:
    text = "<think>r</think> \n\n  Answer  \n"
    for points in ([], [16], [17, 18], [16, 17, 18, 19, 20, 21]):
        assert split_chunks(cut(text, points)) == [("thinking", "r"), ("content", "Answer  \n")]


def test_whitespace_only_content_after_closer_emits_nothing() -> None:
    assert split_chunks(["<think>r</think>", "\n", "\n"]) == [("thinking", "r")]


def test_whitespace_before_any_thinking_is_kept() -> None:
    assert split_thinking("  hi") == ("", "  hi")


# --- GPT-OSS Harmony ------------------------------------------------------------------


def harmony_header(channel: str) -> list[Piece]:
    return [special("<|start|>"), Piece("assistant"), special("<|channel|>"), Piece(channel), special("<|message|>")]


def test_harmony_analysis_then_final() -> None:
    pieces = [
        special("<|channel|>"),
        Piece("analysis"),
        special("<|message|>"),
        Piece("User wants 2+2."),
        special("<|end|>"),
        *harmony_header("final"),
        Piece("4"),
    ]
    assert split_pieces(pieces) == [("thinking", Piece("User wants 2+2.")), ("content", Piece("4"))]


def test_harmony_tool_call_message_passes_through_intact() -> None:
    call = [
        special("<|start|>"),
        Piece("assistant"),
        special("<|channel|>"),
        Piece("commentary to=functions.f "),
        special("<|constrain|>"),
        Piece("json"),
        special("<|message|>"),
        Piece("{}"),
        special("<|call|>"),
    ]
    pairs = split_pieces([*harmony_header("analysis"), Piece("think"), special("<|end|>"), *call])
    assert pairs[0] == ("thinking", Piece("think"))
    assert [p for _, p in pairs[1:]] == call
    assert {ch for ch, _ in pairs[1:]} == {"content"}


def test_harmony_preamble_is_content() -> None:
    pieces = [special("<|channel|>"), Piece("commentary"), special("<|message|>"), Piece("Let me check.")]
    assert split_pieces(pieces) == [("content", Piece("Let me check."))]


# --- tokens ---------------------------------------------------------------------------


def test_other_special_pieces_pass_through_unchanged() -> None:
    eot = Piece("<|im_end|>", token_id=7, special=True)
    ud = Piece("<tool_call>", token_id=9, special=True, user_defined=True)
    assert split_pieces([Piece("a"), ud, Piece("b"), eot]) == [
        ("content", Piece("a")),
        ("content", ud),
        ("content", Piece("b")),
        ("content", eot),
    ]


def test_special_pieces_inside_thinking_are_thinking() -> None:
    eot = special("<|im_start|>")
    assert split_pieces([special("<think>"), Piece("x"), eot, special("</think>")]) == [
        ("thinking", Piece("x")),
        ("thinking", eot),
    ]


def test_user_defined_think_token_is_a_marker() -> None:
    think = Piece("<think>", special=True, user_defined=True)
    pairs = split_pieces([think, Piece("r"), Piece("</think>", special=True, user_defined=True), Piece("c")])
    assert pairs == [("thinking", Piece("r")), ("content", Piece("c"))]


def test_special_marker_releases_held_text() -> None:
    s = ThinkingSplitter()
    assert s.feed_piece(Piece("x <thi")) == [("content", Piece("x "))]
    assert s.feed_piece(special("<think>")) == [("content", Piece("<thi"))]
    assert s.feed_piece(Piece("y")) == [("thinking", Piece("y"))]


@given(st.lists(st.sampled_from(["a", " ", "\n", "<think>", "</think>", "[THINK]", "[/THINK]", "<", "<thi"])))
@settings(max_examples=150, deadline=None)
def test_special_markers_and_spelled_out_markers_split_the_same(parts: list[str]) -> None:
    markers = {"<think>", "</think>", "[THINK]", "[/THINK]"}
    pieces = [special(p) if p in markers else Piece(p) for p in parts]
    as_tokens = merge((ch, p.text) for ch, p in split_pieces(pieces))
    assert as_tokens == split_chunks(parts) == reference("".join(parts))


# --- chunking -------------------------------------------------------------------------

_FRAGMENTS = sorted(
    {f.opener for f in THINKING_FORMATS}
    | {f.closer for f in THINKING_FORMATS}
    | ANSWER_HEADERS
    | {"<|start|>", "<|channel|>", "assistant", "<|message|>", " ", "\n", "x", "<tool_call>"}
)
rich_text = st.lists(
    st.one_of(st.sampled_from(_FRAGMENTS), st.text(alphabet="<|>[]/thinkTHINK x\n", max_size=4)),
    max_size=20,
).map("".join)


@given(rich_text, st.data(), st.booleans())
@settings(max_examples=150, deadline=None)
def test_any_chunking_gives_the_one_shot_split(text: str, data: st.DataObject, prefilled: bool) -> None:
    points = data.draw(st.lists(st.integers(0, len(text)), max_size=12))
    one_shot = split_chunks([text], start_in_thinking=prefilled)
    assert split_chunks(cut(text, points), start_in_thinking=prefilled) == one_shot
    assert one_shot == reference(text, start_in_thinking=prefilled)


def test_feed_convenience_returns_text_pairs() -> None:
    s = ThinkingSplitter(prefilled="<think>")
    assert s.feed("a</think>b") == [("thinking", "a"), ("content", "b")]
