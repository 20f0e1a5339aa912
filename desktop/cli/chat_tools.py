"""`ember chat --tools …`: tool options, the tools offered and terminal approval prompts.

    ember chat --tools builtin --allow-folder ~/notes "what is in todo.txt?"
    ember chat --tools builtin,mcp:files --yes --events "…"

Each call is shown with its full arguments and runs only after the user answers
y (run), n (deny) or a (always allow this tool in this conversation, remembered with the
conversation's history). `--yes` approves every call, for scripts; without a terminal and
without `--yes` calls are denied, never run silently.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from desktop.cli.common import positive_int, warn
from engine.api.errors import ConfigError
from engine.api.program import ember_paths
from engine.api.tools import (
    DEFAULT_MAX_ROUNDS,
    Decision,
    FolderGrants,
    McpServers,
    Tool,
    ToolError,
    ToolSet,
    arguments_text,
    builtin_tools,
)
from engine.api.values import ToolCall

RESULT_PREVIEW_CHARS = 300


def add_tool_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tools")
    g.add_argument(
        "--tools",
        metavar="LIST",
        default=None,
        help="offer tools: builtin and/or mcp:NAME, comma-separated (e.g. builtin,mcp:files)",
    )
    g.add_argument(
        "--allow-folder",
        metavar="DIR",
        action="append",
        default=[],
        help="let the file tools read inside DIR (repeatable)",
    )
    g.add_argument("--yes", action="store_true", help="approve every tool call without asking (for scripts)")
    g.add_argument(
        "--ask-again",
        action="store_true",
        help="forget this conversation's 'always allow' choices: every tool asks again",
    )
    g.add_argument(
        "--max-tool-rounds",
        type=positive_int,
        default=DEFAULT_MAX_ROUNDS,
        metavar="N",
        help=f"stop after N rounds of tool calls in one turn (default {DEFAULT_MAX_ROUNDS})",
    )


@dataclass
class ToolChoice:
    builtin: bool = False
    mcp: list[str] = field(default_factory=list[str])


def parse_tools(spec: str) -> ToolChoice:
    """`builtin,mcp:NAME` → what to offer; ConfigError (one line) for anything else."""
    choice = ToolChoice()
    for item in (part.strip() for part in spec.split(",")):
        if item == "builtin":
            choice.builtin = True
        elif item.startswith("mcp:") and item[4:].strip():
            choice.mcp.append(item[4:].strip())
        else:
            raise ConfigError(f"--tools: unknown entry {item!r} (use builtin and/or mcp:NAME)")
    return choice


def build_toolset(args: argparse.Namespace, history_db: Path | None) -> ToolSet:
    """The tools `--tools` asks for; MCP servers start here, as this turn needs them."""
    choice = parse_tools(args.tools)
    try:
        grants = FolderGrants(args.allow_folder)
    except ToolError as exc:
        raise ConfigError(f"--allow-folder: {exc}") from exc
    if grants and not choice.builtin:
        raise ConfigError("--allow-folder needs --tools builtin")
    tools: list[Tool] = builtin_tools(grants=grants, history_db=history_db) if choice.builtin else []
    if not choice.mcp:
        return ToolSet(tools)
    servers = McpServers.from_config_dir(ember_paths().config_dir)
    servers.check(choice.mcp)
    tools += servers.tools_for(choice.mcp, taken=[t.name for t in tools], warn=warn)
    return ToolSet(tools, closers=[servers.close])


class TerminalApprover:
    """Asks on the terminal (stderr + stdin); `yes` approves all; no terminal means deny."""

    def __init__(
        self,
        *,
        yes: bool,
        ask: Callable[[str], str] | None = None,
        out: TextIO | None = None,
        interactive: bool | None = None,
    ) -> None:
        self.yes = yes
        self._ask = ask or input
        self._out = out or sys.stderr
        self._interactive = sys.stdin.isatty() if interactive is None else interactive

    def __call__(self, call: ToolCall) -> Decision:
        if self.yes:
            return Decision.APPROVE
        shown = arguments_text(call.arguments)
        self._out.write(f"\nember: the model wants to run the tool {call.name} with:\n{shown}\n")
        if not self._interactive:
            self._out.write("ember: no terminal to ask on, so the call is denied (use --yes to approve calls)\n")
            return Decision.DENY
        while True:
            self._out.write(f"Run it? [y]es / [n]o / [a]lways allow {call.name} in this conversation: ")
            self._out.flush()
            try:
                answer = self._ask("").strip().lower()
            except EOFError:
                return Decision.DENY
            if answer in ("y", "yes"):
                return Decision.APPROVE
            if answer in ("n", "no", ""):
                return Decision.DENY
            if answer in ("a", "always"):
                return Decision.ALWAYS


def result_preview(text: str) -> str:
    """A tool result on one line, cut to `RESULT_PREVIEW_CHARS`."""
    flat = "".join(ch if ch.isprintable() else " " for ch in text)
    return flat if len(flat) <= RESULT_PREVIEW_CHARS else flat[:RESULT_PREVIEW_CHARS] + "…"
