"""Tool-call parsing per family: the spans the guardrail strips become structured calls.

Every case is checked one-shot, split at every offset, and cut at random points with its
marker strings as special-token pieces: all give the same calls and the same visible text.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.events import Piece
from engine.reply.pipeline import ReplyPipeline
from engine.reply.scaffolding import DEFAULT_REGISTRY, ScaffoldPattern
from engine.reply.tool_call_parsers import PARSERS, CallSyntaxError, ParsedCall, python_calls
from engine.reply.tool_calls import ToolCallCollector, parse_span
from models.formats import BY_KEY, FORMATS

CALL = ("get_weather", {"city": "Paris"})
J = '{"city": "Paris"}'

# (family, reply text, visible text): each reply holds exactly one call, CALL.
CASES: list[tuple[str, str, str]] = [
    (
        "Hermes/Qwen",
        f'Checking.<tool_call>\n{{"name": "get_weather", "arguments": {J}}}\n</tool_call> Done.',
        "Checking. Done.",
    ),
    (
        "Qwen3-Coder",
        "Checking.<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "</function>\n</tool_call> Done.",
        "Checking. Done.",
    ),
    ("GLM-4.5", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>", ""),
    ("Granite 3.1", f'<tool_call>[{{"name": "get_weather", "arguments": {J}}}]</tool_call>', ""),
    (
        "Step-3",
        '<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">'
        '<steptml:parameter name="city">Paris</steptml:parameter></steptml:invoke><｜tool_call_end｜>'
        "<｜tool_calls_end｜>",
        "",
    ),
    ("LFM2", 'Checking.<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|> Done.', "Checking. Done."),
    ("Llama 3", f'Checking.<|python_tag|>{{"name": "get_weather", "parameters": {J}}}', "Checking."),
    ("Llama 4", '<|python_start|>[get_weather(city="Paris")]<|python_end|>', ""),
    ("Mistral v3", f'[TOOL_CALLS][{{"name": "get_weather", "arguments": {J}}}]', ""),
    ("Mistral v11", f"[TOOL_CALLS]get_weather{J}", ""),
    ("Magistral", f"[TOOL_CALLS]get_weather[ARGS]{J}", ""),
    (
        "DeepSeek V3",
        f"Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
        f"```json\n{J}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "Checking.",
    ),
    (
        "DeepSeek V3.1",
        f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{J}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "",
    ),
    (
        "DeepSeek V3.2",
        '<｜DSML｜function_calls><｜DSML｜invoke name="get_weather"><｜DSML｜parameter name="city" '
        'string="true">Paris</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>',
        "",
    ),
    (
        "Kimi K2",
        f"<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        f"<|tool_call_argument_begin|>{J}<|tool_call_end|><|tool_calls_section_end|>",
        "",
    ),
    ("GPT-OSS", f"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{J}<|call|>", ""),
    ("GPT-OSS header", f"<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{J}", ""),
    (
        "Command R7B",
        f'<|START_ACTION|>[{{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {J}}}]<|END_ACTION|>',
        "",
    ),
    (
        "MiniMax",
        '<minimax:tool_call><invoke name="get_weather"><parameter name="city">Paris</parameter></invoke>'
        "</minimax:tool_call>",
        "",
    ),
    (
        "Seed-OSS",
        "<seed:tool_call><function=get_weather><parameter=city>Paris</parameter></function></seed:tool_call>",
        "",
    ),
    ("Jamba", f'<tool_calls>[{{"name": "get_weather", "arguments": {J}}}]</tool_calls>', ""),
    ("Apertus", f'<|tools_prefix|>[{{"get_weather": {J}}}]<|tools_suffix|>', ""),
    ("Nemotron", f'<TOOLCALL>[{{"name": "get_weather", "arguments": {J}}}]</TOOLCALL>', ""),
    ("InternLM", f'<|action_start|><|plugin|>\n{{"name": "get_weather", "parameters": {J}}}<|action_end|>', ""),
    ("Gemma 4", '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>', ""),
    ("FunctionGemma", "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>", ""),
    ("Longcat", f'<longcat_tool_call>{{"name": "get_weather", "arguments": {J}}}</longcat_tool_call>', ""),
]
IDS = [c[0] for c in CASES]

# Strings that are one special token in their vocabularies: fed as atoms in the token tests.
SPECIALS = sorted(
    {
        "<|tool_call_start|>",
        "<|tool_call_end|>",
        "<|python_tag|>",
        "<|python_start|>",
        "<|python_end|>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁sep｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁calls▁end｜>",
        "<|tool_calls_section_begin|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_calls_section_end|>",
        "<|channel|>",
        "<|constrain|>",
        "<|message|>",
        "<|call|>",
        "<|start|>",
        "<|START_ACTION|>",
        "<|END_ACTION|>",
        "<|tools_prefix|>",
        "<|tools_suffix|>",
        "<|action_start|>",
        "<|plugin|>",
        "<|action_end|>",
        "<tool_call>",
        "</tool_call>",
    },
    key=len,
    reverse=True,
)
_SPECIAL_RE = re.compile("|".join(re.escape(s) for s in SPECIALS))


def run(pieces: list[Piece]) -> tuple[str, list[ParsedCall], int]:
    collector = ToolCallCollector(["get_weather", "other"])
    pipeline = ReplyPipeline(span_sink=collector)
    for piece in pieces:
        pipeline.feed(piece)
    pipeline.flush()
    return pipeline.content, collector.calls, pipeline.stripped_chars


def texts(chunks: list[str]) -> list[Piece]:
    return [Piece(c) for c in chunks if c]


def tokens(text: str, cuts: set[int]) -> list[Piece]:
    """Special strings as special pieces; the text between them cut at `cuts`."""
    pieces: list[Piece] = []
    pos = 0
    for found in [*_SPECIAL_RE.finditer(text), None]:
        stop = found.start() if found else len(text)
        bounds = [pos, *sorted(c for c in cuts if pos < c < stop), stop]
        pieces += [Piece(text[a:b]) for a, b in itertools.pairwise(bounds) if b > a]
        if found:
            pieces.append(Piece(found.group(), special=True))
            pos = found.end()
    return pieces


def as_pair(calls: list[ParsedCall]) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in calls]


@pytest.mark.parametrize(("family", "reply", "visible"), CASES, ids=IDS)
def test_one_shot_parses_the_call_and_hides_it(family: str, reply: str, visible: str) -> None:
    content, calls, stripped = run([Piece(reply)])
    assert as_pair(calls) == [CALL]
    assert content == visible
    assert stripped == 0  # a parsed call is not scaffolding


@pytest.mark.parametrize(("family", "reply", "visible"), CASES, ids=IDS)
def test_every_split_offset_gives_the_same_call(family: str, reply: str, visible: str) -> None:
    for k in range(1, len(reply)):
        content, calls, _ = run(texts([reply[:k], reply[k:]]))
        assert (content, as_pair(calls)) == (visible, [CALL]), f"split at {k}"


@pytest.mark.parametrize(("family", "reply", "visible"), CASES, ids=IDS)
def test_one_character_pieces_give_the_same_call(family: str, reply: str, visible: str) -> None:
    content, calls, _ = run(texts(list(reply)))
    assert (content, as_pair(calls)) == (visible, [CALL])


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(CASES), cuts=st.sets(st.integers(min_value=1, max_value=300), max_size=12))
def test_special_token_pieces_cut_anywhere_give_the_same_call(case: tuple[str, str, str], cuts: set[int]) -> None:
    _, reply, visible = case
    content, calls, stripped = run(tokens(reply, cuts))
    assert as_pair(calls) == [CALL]
    assert content == visible
    assert stripped == 0


def test_two_calls_in_one_reply_are_both_kept_in_order() -> None:
    reply = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
        '<tool_call>{"name": "other", "arguments": {}}</tool_call>'
    )
    _, calls, _ = run([Piece(reply)])
    assert as_pair(calls) == [CALL, ("other", {})]
    assert as_pair(parse_span("lfm2", '<|tool_call_start|>[get_weather(city="Paris"), other()]<|tool_call_end|>')) == [
        CALL,
        ("other", {}),
    ]


MALFORMED = [
    'Hi.<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>',  # broken JSON
    'Hi.<tool_call>{"arguments": {}}</tool_call>',  # no name
    'Hi.<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',  # not an offered tool
    'Hi.<|tool_call_start|>[__import__("os").system("x")]<|tool_call_end|>',  # not a literal call
    'Hi.<|tool_call_start|>[get_weather(city=open("/etc/passwd").read())]<|tool_call_end|>',
    'Hi.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}',  # unterminated: fine JSON, kept
]


@pytest.mark.parametrize("reply", MALFORMED[:-1])
def test_a_call_that_does_not_parse_is_stripped_and_counted_like_scaffolding(reply: str) -> None:
    content, calls, stripped = run([Piece(reply)])
    plain = ReplyPipeline()
    plain.feed(Piece(reply))
    plain.flush()
    assert calls == []
    assert content == plain.content == "Hi."
    assert stripped == plain.stripped_chars > 0


def test_an_unterminated_but_complete_call_at_the_end_of_the_reply_still_parses() -> None:
    _, calls, _ = run([Piece(MALFORMED[-1])])
    assert as_pair(calls) == [CALL]


@pytest.mark.parametrize("pattern", DEFAULT_REGISTRY, ids=lambda p: f"{p.family}:{p.start}")
def test_a_sink_never_changes_the_visible_text(pattern: object) -> None:
    fixture = getattr(pattern, "fixture")  # noqa: B009 - the registry's own sample reply
    with_sink = ReplyPipeline(span_sink=ToolCallCollector())
    without = ReplyPipeline()
    for pipeline in (with_sink, without):
        pipeline.feed(Piece(fixture))
        pipeline.flush()
    assert with_sink.content == without.content


def test_every_format_family_with_tool_call_markup_has_a_parser_or_says_it_has_none() -> None:
    # The formats table is the one place families are named: a family that gains tool-call
    # markers must be given a parser here, or an explicit `None`.
    marked = {f.key for f in FORMATS if f.tool_calls or f.tool_tokens}
    assert marked == set(PARSERS)
    assert {p.key for p in DEFAULT_REGISTRY} <= {k for k, parser in PARSERS.items() if parser is not None}


@pytest.mark.parametrize("pattern", DEFAULT_REGISTRY, ids=lambda p: f"{p.key}:{p.start}")
def test_the_sink_gets_each_registry_span_under_its_format_key(pattern: ScaffoldPattern) -> None:
    seen: list[str] = []

    def sink(family: str, _span: str, _terminated: bool) -> bool:
        seen.append(family)
        return False

    pipeline = ReplyPipeline(span_sink=sink)
    pipeline.feed(Piece(pattern.fixture))
    pipeline.flush()
    assert seen == [pattern.key] and pattern.key in BY_KEY


def test_unknown_family_names_fall_back_to_the_opening_marker() -> None:
    span = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert as_pair(parse_span("qwen2.5 (renamed)", span)) == [CALL]
    with pytest.raises(CallSyntaxError):
        parse_span("nobody", "<nothing>")


def test_python_call_syntax_allows_literals_only() -> None:
    parsed = python_calls('[f(a=1, b=[1, 2], c={"k": None})]')
    assert as_pair(parsed) == [("f", {"a": 1, "b": [1, 2], "c": {"k": None}})]
    for bad in ("[f(a=g())]", "[f(**x)]", "[f(1)]", "[1 + 2]", "[(lambda: 1)()]", "f(a=" + "[" * 500 + "]" * 500 + ")"):
        with pytest.raises(CallSyntaxError):
            python_calls(bad)


def test_llama3_built_in_tools_are_named_without_call() -> None:
    span = '<|python_tag|>brave_search.call(query="Paris weather")<|eom_id|>'
    assert as_pair(parse_span("Llama 3", span)) == [("brave_search", {"query": "Paris weather"})]


def test_double_encoded_arguments_are_decoded() -> None:
    span = '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>'
    assert as_pair(parse_span("Hermes/Qwen", span)) == [CALL]
