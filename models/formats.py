"""The one table of model output formats: thinking blocks, tool-call markup, pre-fill openers.

Every rule about what a model's markup looks like lives here, once, per family. The
engine's thinking splitter (`engine.reply.reasoning`), its scaffolding guardrail
(`engine.reply.scaffolding`), the vocabulary scan behind `ember models` (`models.gguf.meta`) and
pre-fill detection (`prefill_opener`, `models.gguf.templates`) are all built from `FORMATS`,
so adding a family here teaches every one of them at once.

Each `ModelFormat` has a stable `key` (never renamed: other code, such as per-family
tool-call parsers, attaches to it) and a human `label` used in logs.
Source: shared/reference/markup-formats.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class MarkerKind(StrEnum):
    THINKING = "thinking"
    TOOL_CALL = "tool_call"


@dataclass(frozen=True, slots=True)
class ThinkingFormat:
    """A thinking block; `prefills` when a template may end the prompt with the opener."""

    opener: str
    closer: str
    prefills: bool = False


@dataclass(frozen=True, slots=True)
class ToolCallSpan:
    """Tool-call markup the guardrail strips from an answer.

    `end=None`: the span runs to the end of the reply; `end=""`: a standalone marker, only
    the marker itself is stripped. `sample` is a typical body between the markers.
    """

    start: str
    end: str | None
    sample: str = ""


@dataclass(frozen=True, slots=True)
class ModelFormat:
    """What one family of models writes around its thinking and its tool calls.

    `tokens` are further single-token markers of the family (separators inside a call,
    Harmony's headers) that the vocabulary scan reports; `answer_headers` are headers that
    open a visible answer message (consumed, never shown).
    """

    key: str
    label: str
    thinking: tuple[ThinkingFormat, ...] = ()
    tool_calls: tuple[ToolCallSpan, ...] = ()
    thinking_tokens: tuple[str, ...] = ()
    tool_tokens: tuple[str, ...] = ()
    answer_headers: tuple[str, ...] = ()


THINK = ThinkingFormat("<think>", "</think>", prefills=True)
_HARMONY_CALL = 'functions.get_weather <|constrain|>json<|message|>{"location":"Paris"}'
_HARMONY_END = "<|end|>"
_CALL_LIST = '[{"name": "f", "arguments": {}}]'

# Order matters only for readability; derived views keep first occurrences.
FORMATS: tuple[ModelFormat, ...] = (
    ModelFormat("lfm2", "LFM2", (THINK,), (
        ToolCallSpan("<|tool_call_start|>", "<|tool_call_end|>", '[get_weather(location="Paris")]'),
        ToolCallSpan("<|tool_calls|>", ""),
        ToolCallSpan("<|tool_call|>", ""),
    ), tool_tokens=("<|/tool_call|>",)),  # Phi-4's closer for the same opener
    ModelFormat("hermes", "Hermes/Qwen", (THINK,), (
        ToolCallSpan("<tool_call>", "</tool_call>", '\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'),
    )),
    ModelFormat("deepseek", "DeepSeek", (THINK,), (
        ToolCallSpan("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
                     '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```'
                     "<｜tool▁call▁end｜>"),
        ToolCallSpan("<｜tool calls begin｜>", "<｜tool calls end｜>", '{"city": "Paris"}'),
    ), tool_tokens=("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>")),
    # llama.cpp accepts this DeepSeek spelling too; Step-3 uses it.
    ModelFormat("step3", "DeepSeek/Step-3", (), (
        ToolCallSpan("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>function"),
    ), tool_tokens=("<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>")),
    ModelFormat("deepseek-v3.2", "DeepSeek V3.2", (THINK,), (
        ToolCallSpan("<｜DSML｜function_calls>", "</｜DSML｜function_calls>",
                     '<｜DSML｜invoke name="f"><｜DSML｜parameter name="x" string="true">1</｜DSML｜parameter>'
                     "</｜DSML｜invoke>"),
    )),
    ModelFormat("kimi-k2", "Kimi K2", (THINK,), (
        ToolCallSpan("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                     '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}'
                     "<|tool_call_end|>"),
    ), tool_tokens=("<|tool_call_section_begin|>", "<|tool_call_begin|>", "<|tool_call_end|>",
                    "<|tool_call_argument_begin|>")),
    ModelFormat("command-r", "Command R7B", (ThinkingFormat("<|START_THINKING|>", "<|END_THINKING|>"),), (
        ToolCallSpan("<|START_ACTION|>", "<|END_ACTION|>", '[{"tool_call_id":"0","tool_name":"f"}]'),
    )),
    ModelFormat("minimax", "MiniMax", (THINK,), (
        ToolCallSpan("<minimax:tool_call>", "</minimax:tool_call>",
                     '<invoke name="f"><parameter name="x">1</parameter></invoke>'),
    )),
    ModelFormat("seed-oss", "Seed-OSS", (ThinkingFormat("<seed:think>", "</seed:think>", prefills=True),), (
        ToolCallSpan("<seed:tool_call>", "</seed:tool_call>", "<function=f><parameter=x>1</parameter></function>"),
    )),
    ModelFormat("jamba", "Jamba", (), (ToolCallSpan("<tool_calls>", "</tool_calls>", _CALL_LIST),)),
    ModelFormat("apertus", "Apertus", (ThinkingFormat("<|inner_prefix|>", "<|inner_suffix|>"),), (
        ToolCallSpan("<|tools_prefix|>", "<|tools_suffix|>", '[{"get_weather": {"city": "Paris"}}]'),
    )),
    ModelFormat("nemotron", "Nemotron", (), (ToolCallSpan("<TOOLCALL>", "</TOOLCALL>", _CALL_LIST),)),
    ModelFormat("internlm", "InternLM", (), (
        ToolCallSpan("<|action_start|>", "<|action_end|>", '<|plugin|>\n{"name": "f", "parameters": {}}'),
    ), tool_tokens=("<|plugin|>",)),
    ModelFormat("gemma4", "Gemma 4", (ThinkingFormat("<|channel>thought", "<channel|>"),), (
        ToolCallSpan("<|tool_call>", "<tool_call|>", 'call:get_weather{city:<|"|>Paris<|"|>}'),
    ), thinking_tokens=("<|channel>", "<channel|>"), tool_tokens=('<|"|>',)),
    ModelFormat("function-gemma", "FunctionGemma", (), (
        ToolCallSpan("<start_function_call>", "<end_function_call>", "call:f{city:<escape>Paris<escape>}"),
    )),
    ModelFormat("longcat", "Longcat", (), (
        ToolCallSpan("<longcat_tool_call>", "</longcat_tool_call>", '{"name": "f", "arguments": {}}'),
    )),
    ModelFormat("llama4", "Llama 4", (), (
        ToolCallSpan("<|python_start|>", "<|python_end|>", '[get_weather(city="Paris")]'),
    )),
    # GPT-OSS Harmony: reasoning is the analysis channel; `<|call|>` is end-of-generation, so
    # llama.cpp usually never emits it and a tool-call span then runs to the end of the reply.
    ModelFormat("harmony", "GPT-OSS", (
        ThinkingFormat("<|channel|>analysis<|message|>", _HARMONY_END),
        # A later message's header names the role again; drop it with the channel header.
        ThinkingFormat("<|start|>assistant<|channel|>analysis<|message|>", _HARMONY_END),
    ), (
        ToolCallSpan("<|start|>assistant<|channel|>commentary to=", "<|call|>", _HARMONY_CALL),
        ToolCallSpan("<|start|>assistant to=", "<|call|>", 'functions.f<|channel|>commentary json<|message|>{"x":1}'),
        # The first message of a reply: the prompt already ends with `<|start|>assistant`.
        ToolCallSpan("<|channel|>commentary to=", "<|call|>", _HARMONY_CALL),
    ), thinking_tokens=("<|channel|>", "<|message|>", "<|start|>", _HARMONY_END, "<|return|>"),
        tool_tokens=("<|constrain|>",),
        # Answer messages; a commentary message without a recipient is a visible preamble.
        answer_headers=("<|channel|>final<|message|>", "<|start|>assistant<|channel|>final<|message|>",
                        "<|channel|>commentary<|message|>", "<|start|>assistant<|channel|>commentary<|message|>")),
    ModelFormat("mistral", "Mistral", (ThinkingFormat("[THINK]", "[/THINK]"),), (
        ToolCallSpan("[TOOL_CALLS]", None, '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
    ), tool_tokens=("[ARGS]", "[CALL_ID]")),
    ModelFormat("llama3", "Llama 3", (), (
        ToolCallSpan("<|python_tag|>", None, '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
    ), tool_tokens=("<|eom_id|>",)),
    # Vocabulary only: reported by `ember models`, not stripped (their calls are plain JSON).
    ModelFormat("gigachat", "GigaChat", tool_tokens=("<|function_call|>", "<|role_sep|>")),
)  # fmt: skip

BY_KEY: dict[str, ModelFormat] = {f.key: f for f in FORMATS}


def thinking_formats() -> tuple[ThinkingFormat, ...]:
    """Every distinct thinking format, in table order."""
    return tuple(dict.fromkeys(t for f in FORMATS for t in f.thinking))


def answer_headers() -> frozenset[str]:
    return frozenset(h for f in FORMATS for h in f.answer_headers)


def tool_call_spans() -> tuple[tuple[ModelFormat, ToolCallSpan], ...]:
    """Every tool-call span with the family it belongs to (a start marker appears once)."""
    seen: dict[str, tuple[ModelFormat, ToolCallSpan]] = {}
    for fmt in FORMATS:
        for span in fmt.tool_calls:
            seen.setdefault(span.start, (fmt, span))
    return tuple(seen.values())


PREFILL_OPENERS: tuple[str, ...] = tuple(t.opener for t in thinking_formats() if t.prefills)


def prefill_opener(prompt_tail: str) -> str:
    """The thinking opener a rendered prompt ends with ('' when none): the reply starts in it."""
    tail = prompt_tail.rstrip()
    return next((o for o in PREFILL_OPENERS if tail.endswith(o)), "")


def closer_for(opener: str) -> str:
    """The closer of the thinking block `opener` starts."""
    return next(t.closer for t in thinking_formats() if t.opener == opener)


def vocabulary_markers() -> dict[str, MarkerKind]:
    """Every marker string a vocabulary may hold as one token, with its kind.

    Thinking wins when a string is both (Harmony's `<|start|>` opens either message).
    """
    out: dict[str, MarkerKind] = {}
    for fmt in FORMATS:
        for span in fmt.tool_calls:
            out.update(dict.fromkeys(filter(None, (span.start, span.end)), MarkerKind.TOOL_CALL))
        out.update(dict.fromkeys(fmt.tool_tokens, MarkerKind.TOOL_CALL))
    for fmt in FORMATS:
        for t in fmt.thinking:
            out.update(dict.fromkeys((t.opener, t.closer), MarkerKind.THINKING))
        out.update(dict.fromkeys(fmt.thinking_tokens, MarkerKind.THINKING))
    return out
