"""Thinking and tool-call marker strings, as they appear in model vocabularies.

A marker that is one token in a model's vocabulary arrives whole from the backend and can
be matched by token id; any other marker arrives spelled out in pieces and must be matched
by text. The metadata reader reports which of these are single tokens (and their token
types: CONTROL tokens are hidden by llama.cpp's detokenizer, USER_DEFINED ones print).
Sources: shared/reference/markup-formats.md, sections 1 and 2.
"""

from __future__ import annotations

from enum import StrEnum


class MarkerKind(StrEnum):
    THINKING = "thinking"
    TOOL_CALL = "tool_call"


THINKING_MARKERS: frozenset[str] = frozenset({
    "<think>", "</think>",
    "<seed:think>", "</seed:think>",
    "[THINK]", "[/THINK]",
    "<|START_THINKING|>", "<|END_THINKING|>",
    "<|inner_prefix|>", "<|inner_suffix|>",
    # Harmony (GPT-OSS): the analysis channel carries the reasoning.
    "<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|return|>",
    # Gemma 4
    "<|channel>", "<channel|>",
})  # fmt: skip

TOOL_CALL_MARKERS: frozenset[str] = frozenset({
    "<tool_call>", "</tool_call>",
    "<seed:tool_call>", "</seed:tool_call>",
    "<minimax:tool_call>", "</minimax:tool_call>",
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_section_begin|>",
    "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_call_argument_begin|>",
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>", "<｜tool▁sep｜>",
    "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>",
    "<｜tool_call_end｜>", "<｜tool_sep｜>",
    "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]",
    "<|python_tag|>", "<|eom_id|>", "<|python_start|>", "<|python_end|>",
    "<|call|>", "<|constrain|>",
    "<|tool_call|>", "<|/tool_call|>",
    "<start_function_call>", "<end_function_call>",
    "<|tool_call>", "<tool_call|>", '<|"|>',
    "<|tool_call_start|>",  # LFM2 (its closer, <|tool_call_end|>, is listed with Kimi's)
    "<|action_start|>", "<|action_end|>", "<|plugin|>",
    "<tool_calls>", "</tool_calls>",
    "<|tools_prefix|>", "<|tools_suffix|>",
    "<TOOLCALL>", "</TOOLCALL>",
    "<|START_ACTION|>", "<|END_ACTION|>",
    "<|function_call|>", "<|role_sep|>",
})  # fmt: skip

ALL_MARKERS: frozenset[str] = THINKING_MARKERS | TOOL_CALL_MARKERS

# Encoded once: the vocabulary scan compares raw token bytes.
MARKER_BYTES: frozenset[bytes] = frozenset(m.encode() for m in ALL_MARKERS)


def marker_kind(marker: str) -> MarkerKind:
    return MarkerKind.THINKING if marker in THINKING_MARKERS else MarkerKind.TOOL_CALL
