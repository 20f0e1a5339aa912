"""Tools a conversation offers: name, description, JSON-Schema parameters and a runner.

`ToolSet.specs()` is the `tools=` list a chat template renders (the OpenAI function
shape). A tool's runner gets the call's arguments and returns text for the model; it
raises `ToolError` (one line, shown to the user and the model) when it cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import EngineError


class ToolError(EngineError):
    """A tool could not do what was asked; the message is one line for user and model."""


Runner = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Runner = field(compare=False)
    source: str = "builtin"  # "builtin" or "mcp:SERVER"

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


def object_schema(
    properties: Mapping[str, Mapping[str, Any]] | None = None, required: Iterable[str] = ()
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: dict(v) for k, v in (properties or {}).items()},
        "required": list(required),
    }


class ToolSet:
    """The tools offered in one conversation, by name.

    Names are unique: a later tool with a name already held is left out (and listed in
    `dropped`), never put in its place, so nothing can take over an earlier tool's name
    (and with it the user's "always allow"). MCP tools are renamed before they get here.
    """

    def __init__(self, tools: Iterable[Tool] = (), closers: Iterable[Callable[[], None]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self.dropped: list[Tool] = []
        for tool in tools:
            if tool.name in self._tools:
                self.dropped.append(tool)
            else:
                self._tools[tool.name] = tool
        self._closers = list(closers)  # what the tools hold open (MCP servers), for close()

    def close(self) -> None:
        closers, self._closers = self._closers, []
        for close in closers:
            close()

    def __bool__(self) -> bool:
        return bool(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self) -> tuple[dict[str, Any], ...]:
        return tuple(t.spec() for t in self._tools.values())

    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f"there is no tool named {name!r}")
        _check_required(tool, arguments)
        return tool.run(arguments)


def _check_required(tool: Tool, arguments: Mapping[str, Any]) -> None:
    required: Any = tool.parameters.get("required") or []
    missing = [str(k) for k in required if k not in arguments]
    if missing:
        raise ToolError(f"{tool.name} needs the argument(s): {', '.join(missing)}")
