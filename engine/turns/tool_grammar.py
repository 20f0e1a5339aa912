"""A GBNF grammar that makes the model answer with tool calls (OpenAI's `tool_choice: "required"`
or a named function), in its family's own markup, with arguments that match each tool's schema.

    grammar = call_grammar(backend, tools, max_calls=1)   # None: decode freely (and check after)

This is what llama.cpp's server does for `required`: the family's call format, decoded under
a grammar from the first token. Only families whose calls are JSON in known markers are
covered (`hermes`: `<tool_call>{"name": …, "arguments": …}</tool_call>`, which is also what
a model whose template ignores tools is told to write); others, and backends without the
grammar capability, get None and the caller's bounded retry instead.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, cast

from engine.backends.base import Backend
from engine.turns.schema_limits import bounded_for_grammar
from engine.turns.tool_loop import tool_names

log = logging.getLogger("engine.turn")

_ROOT = re.compile(r"^root ::=", re.MULTILINE)
_THINK = r'think ::= "<think>" [^<]* "</think>" [ \t\n]*'


def call_grammar(backend: Backend, tools: Sequence[dict[str, Any]], *, max_calls: int = 4) -> str | None:
    """A grammar for 1 to `max_calls` calls of `tools` in the backend's markup, or None when there is none."""
    caps = backend.capabilities
    if not caps.grammar or caps.tool_markup != "hermes" or not tools:
        return None
    try:
        gbnf = _hermes(tools, max_calls)
    except Exception as exc:  # any converter failure just means "no grammar"
        log.warning("tool_choice: the tools do not convert to a grammar (%s: %s)", type(exc).__name__, exc)
        return None
    problem = backend.check_grammar(gbnf)  # llama.cpp may crash on a grammar it cannot parse: ask first
    if problem:
        log.warning("tool_choice: the tools' grammar is unusable (%s)", problem)
        return None
    return gbnf


def _hermes(tools: Sequence[dict[str, Any]], max_calls: int) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # a native library: only when asked

    calls = [_call_schema(name, _parameters(spec)) for name, spec in zip(tool_names(tuple(tools)), tools, strict=True)]
    schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
    body = str(json_schema_to_gbnf(json.dumps(bounded_for_grammar(schema)), ["name", "arguments"]))
    if len(_ROOT.findall(body)) != 1 or re.search(r"::=.*\broot\b", body):
        raise ValueError("the schema refers to itself")
    body = _ROOT.sub("call ::=", body)
    more = f' ("\\n" tool-call){{0,{max_calls - 1}}}' if max_calls > 1 else ""
    # A thinking model may think first (llama.cpp allows it too); the call must follow. The block
    # must open with "<think>": with free text allowed first, a small model rambles to max_tokens
    # (SmolLM2 did). A template that prefills "<think>" (Qwen3) thus gets no call under the grammar,
    # and the caller's one retry without it.
    return f'root ::= think? tool-call{more}\ntool-call ::= "<tool_call>\\n" call "\\n</tool_call>"\n{_THINK}\n{body}'


def _call_schema(name: str, parameters: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": name}, "arguments": parameters},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _parameters(spec: dict[str, Any]) -> Any:
    function = spec.get("function")
    parameters = function.get("parameters") if isinstance(function, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return cast(Any, parameters) if isinstance(parameters, (dict, bool)) else {"type": "object"}
