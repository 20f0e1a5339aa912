"""The scaffolding filter: the matrix of the guardrail's rules, plus chunking properties."""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.events import Piece
from engine.reply.scaffolding import (
    DEFAULT_REGISTRY,
    LOG_SPAN_CHARS,
    MarkerSet,
    PieceBuffer,
    ScaffoldingFilter,
    ScaffoldPattern,
)
from tests.bench.scaffolding_filter import bench_filter
from tests.reply_text import registry_markers, strip_scaffolding

STARTS = [p.start for p in DEFAULT_REGISTRY]
SPANNING = [p for p in DEFAULT_REGISTRY if p.end]  # start … end
TO_END = [p for p in DEFAULT_REGISTRY if p.end is None]
STANDALONE = [p for p in DEFAULT_REGISTRY if p.end == ""]


def run(chunks: Iterable[str]) -> tuple[str, int]:
    f = ScaffoldingFilter()
    out = "".join(f.feed(c) for c in chunks) + f.flush()
    return out, f.stripped_chars


def run_pieces(pieces: Iterable[Piece]) -> tuple[str, int]:
    f = ScaffoldingFilter()
    out = "".join(f.feed_piece(p) for p in pieces) + f.flush()
    return out, f.stripped_chars


def special(text: str) -> Piece:
    return Piece(text, special=True)


def cut(text: str, points: Iterable[int]) -> list[str]:
    bounds = [0, *sorted(set(points)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def expected_visible(pattern: ScaffoldPattern) -> str:
    """The fixture with its one span taken out."""
    before, _, rest = pattern.fixture.partition(pattern.start)
    if pattern.end is None:
        return before
    if pattern.end == "":
        return before + rest
    return before + rest.partition(pattern.end)[2]


def reference(text: str, registry: Sequence[ScaffoldPattern] = DEFAULT_REGISTRY) -> str:
    """An independent one-shot oracle: leftmost start marker, then the nearest end."""
    by_start = {p.start: p for p in registry}
    starts = re.compile("|".join(re.escape(s) for s in by_start))
    out: list[str] = []
    pos = 0
    while (m := starts.search(text, pos)) is not None:
        out.append(text[pos : m.start()])
        end = by_start[m.group()].end
        if end == "":
            pos = m.end()
            continue
        if end is None or (at := text.find(end, m.end())) < 0:
            return "".join(out)
        pos = at + len(end)
    out.append(text[pos:])
    return "".join(out)


# --- the registry ---------------------------------------------------------------------


@pytest.mark.parametrize("pattern", DEFAULT_REGISTRY, ids=lambda p: f"{p.family}:{p.start}")
def test_registry_fixture_is_stripped(pattern: ScaffoldPattern) -> None:
    assert pattern.fixture.count(pattern.start) == 1
    out, stripped = run([pattern.fixture])
    assert out == expected_visible(pattern)
    assert pattern.start not in out
    if pattern.end:
        assert pattern.end not in out
    assert stripped == len(pattern.fixture) - len(out)


@pytest.mark.parametrize("pattern", DEFAULT_REGISTRY, ids=lambda p: f"{p.family}:{p.start}")
def test_span_split_at_every_offset_of_its_start_marker(pattern: ScaffoldPattern) -> None:
    at = pattern.fixture.index(pattern.start)
    for offset in range(len(pattern.start) + 1):
        out, _ = run(cut(pattern.fixture, [at + offset]))
        assert out == expected_visible(pattern), offset


@pytest.mark.parametrize("pattern", DEFAULT_REGISTRY, ids=lambda p: f"{p.family}:{p.start}")
def test_fixture_fed_one_character_at_a_time(pattern: ScaffoldPattern) -> None:
    assert run(pattern.fixture) == run([pattern.fixture])


def test_registry_markers_lists_every_start_end_and_standalone_marker() -> None:
    markers = registry_markers()
    assert {"<|tool_call_start|>", "<|tool_call_end|>", "<|tool_calls|>", "<|tool_call|>"} <= markers
    assert "<｜tool▁calls▁begin｜>" in markers
    assert "[TOOL_CALLS]" in markers
    assert "" not in markers


def test_registry_start_markers_are_prefix_free() -> None:
    MarkerSet(STARTS)  # raises on a prefix pair: leftmost matching needs prefix-freedom
    with pytest.raises(ValueError, match="prefix"):
        MarkerSet(["<a>", "<a>b"])


def test_filters_share_their_registrys_markers_and_a_registry_keeps_its_own() -> None:
    # Built once per registry (a filter is made for every model request, after its first token).
    first, second = ScaffoldingFilter(), ScaffoldingFilter()
    assert first._starts is second._starts  # pyright: ignore[reportPrivateUsage]
    only = ScaffoldPattern("Test", "<<call>>", "<</call>>", "x<<call>>y<</call>>z")
    custom = ScaffoldingFilter([only])
    text = "a<<call>>b<</call>>c<tool_call>{}</tool_call>d"
    assert custom.feed(text) + custom.flush() == "ac<tool_call>{}</tool_call>d"
    default = ScaffoldingFilter()
    assert default.feed(text) + default.flush() == "a<<call>>b<</call>>cd"


def test_every_required_family_is_registered() -> None:
    families = {p.family for p in DEFAULT_REGISTRY}
    for name in ("LFM2", "Hermes/Qwen", "DeepSeek", "Kimi K2", "Command R7B", "MiniMax", "Seed-OSS"):
        assert name in families
    for name in ("Jamba", "Apertus", "Nemotron", "InternLM", "Gemma 4", "FunctionGemma", "GPT-OSS"):
        assert name in families
    assert {p.family for p in TO_END} == {"Mistral", "Llama 3"}


# --- the matrix -----------------------------------------------------------------------


def test_span_in_one_chunk() -> None:
    span = "<|tool_call_start|>[f(a=1)]<|tool_call_end|>"
    assert run([f"Hi {span} there"]) == ("Hi  there", len(span))


def test_several_spans_in_one_chunk() -> None:
    text = "a<tool_call>{}</tool_call>b<|tool_call_start|>[f()]<|tool_call_end|>c<|tool_calls|>d"
    assert run([text])[0] == "abcd"


def test_spans_back_to_back_and_spans_split_everywhere() -> None:
    text = "x<tool_call>1</tool_call><tool_call>2</tool_call>y"
    for i in range(len(text) + 1):
        assert run(cut(text, [i]))[0] == "xy"


@pytest.mark.parametrize("pattern", STANDALONE, ids=lambda p: p.start)
def test_standalone_token_only_strips_itself(pattern: ScaffoldPattern) -> None:
    assert run([f"one {pattern.start}two"]) == ("one two", len(pattern.start))


@pytest.mark.parametrize(
    "text",
    [
        "I will use tool_call to fetch it, then tool_call_start again.",
        "An unknown <|some_other_token|> written as text.",
        "A lone end </tool_call> with no start.",
        "A lone end <|tool_call_end|> too.",
        "Compare a < b and list[0] and <b>bold</b> and [TOOL] and <tool> and <tools>.",
        "Start markers missing their last character: <tool_call and [TOOL_CALLS and <|python_tag| ok",
    ],
)
def test_look_alikes_stay(text: str) -> None:
    assert run([text]) == (text, 0)
    assert run(text) == (text, 0)


def test_partial_start_at_end_of_stream_is_emitted_by_flush() -> None:
    f = ScaffoldingFilter()
    assert f.feed("Done. <|tool_ca") == "Done. "
    assert f.flush() == "<|tool_ca"
    assert f.stripped_chars == 0


def test_flush_rescans_after_a_partial_that_never_completed() -> None:
    # `<|start|>assistant<|channel|>commentary` could have become a Harmony call header;
    # at the end it is text, and the shorter marker inside it still does not match.
    text = "x <|start|>assistant<|channel|>commentary to"
    assert run([text]) == (text, 0)


def test_complete_start_without_end_drops_the_rest() -> None:
    assert run(["Sure. <tool_call>", '{"name": "f"']) == ("Sure. ", len('<tool_call>{"name": "f"'))


def test_to_end_of_reply_patterns_drop_everything_after_them() -> None:
    assert run(["Ok", "[TOOL_", "CALLS][{}]", " more text"]) == ("Ok", len("[TOOL_CALLS][{}] more text"))
    assert run(["a<|python_tag|>code"]) == ("a", len("<|python_tag|>code"))


def test_stripped_chars_accumulates_over_spans() -> None:
    out, stripped = run(["<tool_call>ab</tool_call>", "x", "<|tool_calls|>"])
    assert out == "x"
    assert stripped == len("<tool_call>ab</tool_call>") + len("<|tool_calls|>")


def test_empty_chunks_change_nothing() -> None:
    chunks = ["", "a", "", "<tool", "", "_call>x</tool", "", "_call>", "", "b", ""]
    assert run(chunks) == ("ab", len("<tool_call>x</tool_call>"))
    assert run([""]) == ("", 0)


def test_feed_returns_only_certain_text() -> None:
    f = ScaffoldingFilter()
    assert f.feed("plain") == "plain"
    assert f.feed(" <tool") == " "
    assert f.feed("_c") == ""
    assert f.feed("x") == "<tool_cx"


def test_filter_is_reusable_after_flush() -> None:
    f = ScaffoldingFilter()
    assert f.feed("a<tool_call>") == "a"
    assert f.flush() == ""
    assert f.feed("b") + f.flush() == "b"


def test_custom_registry() -> None:
    f = ScaffoldingFilter([ScaffoldPattern("Test", "<<", ">>", "a<<b>>c")])
    assert f.feed("a<<b>>c<tool_call>") + f.flush() == "ac<tool_call>"


# --- tokens ---------------------------------------------------------------------------


def test_special_start_and_end_tokens_match_atomically() -> None:
    f = ScaffoldingFilter()
    assert f.feed_piece(Piece("Hi ")) == "Hi "
    assert f.feed_piece(special("<|tool_call_start|>")) == ""
    assert f.feed_piece(Piece("[f()]")) == ""
    assert f.feed_piece(special("<|tool_call_end|>")) == ""
    assert f.feed_piece(Piece("!")) == "!"
    assert f.flush() == ""


def test_special_marker_releases_held_partial_text() -> None:
    f = ScaffoldingFilter()
    assert f.feed_piece(Piece("see <|tool_ca")) == "see "
    assert f.feed_piece(special("<|tool_call_start|>")) == "<|tool_ca"
    assert f.feed_piece(special("<|tool_call_end|>")) + f.flush() == ""


def test_other_control_tokens_are_never_rendered(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.scaffolding"):
        out, stripped = run_pieces([Piece("a"), special("<|im_end|>"), Piece("b"), special("<|eot_id|>")])
    assert (out, stripped) == ("ab", len("<|im_end|><|eot_id|>"))
    assert any("<|im_end|>" in r.getMessage() for r in caplog.records)


def test_control_token_inside_a_held_partial_is_dropped() -> None:
    assert run_pieces([Piece("x <tool"), special("<|im_end|>"), Piece("y")]) == ("x <tooly", 10)


def test_lone_special_end_marker_is_a_control_token_and_dropped() -> None:
    assert run_pieces([Piece("a"), special("</tool_call>"), Piece("b")]) == ("ab", 12)


def test_user_defined_tokens_follow_the_text_rules() -> None:
    def ud(text: str) -> Piece:
        return Piece(text, special=True, user_defined=True)

    assert run_pieces([ud("<|some_other_token|>"), Piece("x")]) == ("<|some_other_token|>x", 0)
    assert run_pieces([Piece("a"), ud("<tool_call>"), Piece("{}"), ud("</tool_call>"), Piece("b")])[0] == "ab"


def test_harmony_call_spelled_by_control_and_text_tokens() -> None:
    pieces = [
        Piece("Checking."),
        special("<|start|>"),
        Piece("assistant"),
        special("<|channel|>"),
        Piece("comment"),
        Piece("ary to"),
        Piece("=functions.get_weather "),
        special("<|constrain|>"),
        Piece("json"),
        special("<|message|>"),
        Piece('{"city":"Paris"}'),
        special("<|call|>"),
    ]
    out, stripped = run_pieces(pieces)
    assert out == "Checking."
    assert stripped == sum(len(p.text) for p in pieces[1:])


def test_harmony_call_cut_off_at_the_end_of_generation_is_dropped() -> None:
    pieces = [special("<|channel|>"), Piece("commentary to=functions.f "), special("<|message|>"), Piece("{}")]
    assert run_pieces(pieces)[0] == ""


def test_a_marker_never_matches_inside_a_special_token() -> None:
    # A control token whose text merely contains a marker is one atom: it is dropped
    # as a control token, and never opens a span that would swallow the answer.
    token = "<|x[TOOL_CALLS]|>"
    assert run_pieces([special(token), Piece("answer")]) == ("answer", len(token))


def test_piece_buffer_take_keeps_atoms_whole() -> None:
    buf = PieceBuffer()
    buf.add_text("ab")
    buf.add_atom(special("<|x|>"))
    buf.add_text("cd")
    assert buf.take(7) == [Piece("ab"), special("<|x|>")]
    assert (buf.text, buf.atoms) == ("cd", [])


# --- logging --------------------------------------------------------------------------


def test_strip_logs_a_warning_with_the_span_cut_to_200_chars(caplog: pytest.LogCaptureFixture) -> None:
    body = "".join(chr(ord("a") + i % 26) for i in range(500))
    span = f"<tool_call>{body}</tool_call>"
    with caplog.at_level(logging.WARNING, logger="engine.scaffolding"):
        out, stripped = run(["x", span[:300], span[300:], "y"])
    assert (out, stripped) == ("xy", len(span))
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.name == "engine.scaffolding"
    assert repr(span[:LOG_SPAN_CHARS]) in record.getMessage()
    assert span[: LOG_SPAN_CHARS + 1] not in record.getMessage()
    assert "Hermes/Qwen" in record.getMessage()


def test_unterminated_span_is_logged_at_flush(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.scaffolding"):
        run(["a<TOOLCALL>[{"])
    [record] = caplog.records
    assert "unterminated" in record.getMessage()
    assert repr("<TOOLCALL>[{") in record.getMessage()


def test_nothing_is_logged_for_clean_text(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="engine.scaffolding"):
        run(["a < b", " and [x]"])
    assert caplog.records == []


# --- properties -----------------------------------------------------------------------

# Fragments that make the interesting cases likely: whole markers, halves of markers,
# and the characters markers are made of.
_FRAGMENTS = sorted(
    registry_markers()
    | {m[: len(m) // 2] for m in registry_markers()}
    | {m[len(m) // 2 :] for m in registry_markers()}
    | {"<|start|>", "<|channel|>", "assistant", "commentary to=", " ", "\n", "x"}
)
rich_text = st.lists(
    st.one_of(st.sampled_from(_FRAGMENTS), st.text(alphabet="<|>[]/_=tolcaTOLCA ｜▁x", max_size=4)),
    max_size=25,
).map("".join)


@st.composite
def chunked(draw: st.DrawFn, text_strategy: st.SearchStrategy[str]) -> tuple[str, list[str]]:
    text = draw(text_strategy)
    points = draw(st.lists(st.integers(0, len(text)), max_size=12))
    return text, cut(text, points)


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@given(chunked(rich_text))
@settings(max_examples=200, deadline=None)
def test_any_chunking_gives_the_one_shot_output(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    one_shot = run([text])
    assert run(chunks) == one_shot
    assert one_shot[0] == reference(text)
    assert one_shot[1] == len(text) - len(one_shot[0])


_SAFE = st.text(alphabet="abc XYZ019.,!?'\"(){}:;-\n_é", max_size=12)
_LOOK_ALIKES = st.sampled_from(
    [
        "tool_call",
        "tool_call_start",
        "<|some_other_token|>",
        "</tool_call>",
        "<|tool_call_end|>",
        "<tool>",
        "a < b",
        "list[0]",
        "[TOOL]",
        "<|tool_ca",
        "<tool_call",
        "[TOOL_CALLS",
    ]
)
_prose = st.lists(st.one_of(_SAFE, _LOOK_ALIKES), max_size=4).map("".join)
_body = st.text(alphabet="abc {}[]\"':,=()\n", max_size=15)


Segment = tuple[str, bool]  # (text, is a scaffolding span)


@st.composite
def scaffolded_reply(draw: st.DrawFn) -> list[Segment]:
    """Prose and complete spans, alternating; maybe a to-the-end span last."""
    segments: list[Segment] = []
    for _ in range(draw(st.integers(0, 4))):
        pattern = draw(st.sampled_from(SPANNING + STANDALONE))
        span = pattern.start if pattern.end == "" else pattern.start + draw(_body) + (pattern.end or "")
        segments += [(draw(_prose), False), (span, True)]
    segments.append((draw(_prose), False))
    if draw(st.booleans()):
        pattern = draw(st.sampled_from(TO_END))
        segments.append((pattern.start + draw(_body), True))
    return segments


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@given(scaffolded_reply(), st.data())
@settings(max_examples=150, deadline=None)
def test_scaffolding_never_reaches_the_output(segments: list[Segment], data: st.DataObject) -> None:
    text = "".join(t for t, _ in segments)
    points = data.draw(st.lists(st.integers(0, len(text)), max_size=10))
    out, stripped = run(cut(text, points))
    assert out == "".join(t for t, is_span in segments if not is_span)
    assert stripped == sum(len(t) for t, is_span in segments if is_span)
    assert not any(s in out for s in STARTS)


_MARKER_SPLIT = re.compile("(" + "|".join(map(re.escape, sorted(registry_markers(), key=len, reverse=True))) + ")")


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@given(scaffolded_reply(), st.data())
@settings(max_examples=120, deadline=None)
def test_special_tokens_and_spelled_out_markers_look_the_same(segments: list[Segment], data: st.DataObject) -> None:
    pieces: list[Piece] = []
    for text, is_span in segments:
        for part in _MARKER_SPLIT.split(text) if is_span else [text]:
            if is_span and part in registry_markers() and data.draw(st.booleans()):
                pieces.append(special(part))
            elif part:
                pieces.append(Piece(part))
    assert run_pieces(pieces) == run(["".join(t for t, _ in segments)])


# --- the benchmark --------------------------------------------------------------------


def test_bench_filter_measures_something() -> None:
    assert bench_filter(n_bytes=20_000, seed=1) > 0


def test_strip_scaffolding_one_shot() -> None:
    assert strip_scaffolding("a<tool_call>x</tool_call>b") == "ab"
