"""Tool calls captured from the guardrail: the spans it strips, parsed into structured calls.

When tools are offered, a reply's pipeline hands every closed scaffolding span to a
`ToolCallCollector` (the filter's sink). A span that parses into calls is claimed: it
becomes `calls` and is not counted as stripped. One that does not parse is left to the
guardrail, exactly as without tools (stripped, counted, recovery if nothing is visible).
The filter delivers whole spans whatever the chunking, so the calls do not depend on
where the stream was cut either.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from engine.reply.tool_call_parsers import CallSyntaxError, ParsedCall, parser_for_span
from models.library.json_input import json_depth

log = logging.getLogger("engine.tool_calls")

MAX_ARGUMENT_DEPTH = 64


def parse_span(family: str, span: str) -> list[ParsedCall]:
    """The calls in one span; raises `CallSyntaxError` when it holds none.

    Arguments nested deeper than `MAX_ARGUMENT_DEPTH` make the call malformed: nothing a
    tool takes nests that deep, and such a value could not be stored, shown or imported.
    """
    parser = parser_for_span(family, span)
    if parser is None:
        raise CallSyntaxError(f"no tool-call parser for {family}")
    try:
        calls = parser(span)
    except RecursionError as exc:
        raise CallSyntaxError("the call is nested too deeply") from exc
    if any(json_depth(c.arguments) > MAX_ARGUMENT_DEPTH for c in calls):
        raise CallSyntaxError(f"the arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep")
    return calls


class ToolCallCollector:
    """A scaffolding-filter sink that keeps the well-formed tool calls of one reply.

    `tool_names`, when given, limits claims to calls of offered tools: a call to anything
    else is malformed output, left to the guardrail.
    """

    def __init__(self, tool_names: Iterable[str] | None = None) -> None:
        self._names = None if tool_names is None else frozenset(tool_names)
        self.calls: list[ParsedCall] = []
        self.rejected = 0
        self.unfinished = ""  # an unterminated span that did not parse: a call cut off, perhaps

    def __call__(self, family: str, span: str, terminated: bool) -> bool:
        try:
            calls = parse_span(family, span)
        except CallSyntaxError as exc:
            self.rejected += 1
            if not terminated:
                self.unfinished = span
            log.info("a %s tool call did not parse (%s); treated as scaffolding", family, exc)
            return False
        unknown = [c.name for c in calls if self._names is not None and c.name not in self._names]
        if unknown:
            self.rejected += 1
            log.info("a %s tool call names tools that were not offered: %s", family, ", ".join(unknown))
            return False
        self.calls.extend(calls)
        log.info("parsed %d %s tool call(s)%s", len(calls), family, "" if terminated else " (unterminated)")
        return True


_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,64})"')
_ARGUMENTS = re.compile(r'"(?:arguments|parameters)"\s*:\s*')


def partial_call(span: str, names: Iterable[str]) -> tuple[str, str] | None:
    """(name, the arguments' text so far) of a JSON-style call cut off mid-way, if it names an offered tool.

    Best effort across families: the first `"name": "…"` in the span, and whatever follows
    `"arguments":` (or `"parameters":`). None when no offered tool is named.
    """
    found = _NAME.search(span)
    if found is None or found.group(1) not in set(names):
        return None
    rest = _ARGUMENTS.search(span, found.end()) or _ARGUMENTS.search(span)
    return found.group(1), span[rest.end() :].rstrip() if rest else ""
