"""The MCP servers a conversation enabled, as Ember tools.

Servers start only when a conversation that enabled them needs their tools. A server
that cannot start is reported in one line and left out; the chat goes on without it.
A tool whose name is already taken (a built-in, another server, the same server listing it
twice) is offered as `SERVER_NAME`, or `SERVER_NAME_2`, `_3`… if that is taken too: names
are unique by construction, so a server can never shadow another tool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

from engine.errors import ConfigError
from engine.tools.mcp_client import CALL_TIMEOUT_S, START_TIMEOUT_S, McpServer
from engine.tools.mcp_config import CONFIG_NAME, ServerConfig, load_mcp_config
from engine.tools.registry import Tool, ToolError


class McpServers:
    """The configured servers; each starts at most once, when first needed."""

    def __init__(
        self,
        configs: dict[str, ServerConfig],
        *,
        start_timeout_s: float = START_TIMEOUT_S,
        call_timeout_s: float = CALL_TIMEOUT_S,
    ) -> None:
        self.servers = {
            name: McpServer(config, start_timeout_s=start_timeout_s, call_timeout_s=call_timeout_s)
            for name, config in configs.items()
        }

    @classmethod
    def from_config_dir(cls, config_dir: Path, **timeouts: float) -> McpServers:
        return cls(load_mcp_config(config_dir / CONFIG_NAME), **timeouts)

    @property
    def names(self) -> list[str]:
        return list(self.servers)

    def check(self, names: Iterable[str]) -> None:
        """ConfigError (one line) for a server name that is not configured; starts nothing."""
        for name in names:
            if name not in self.servers:
                known = ", ".join(self.servers) or f'none; add them to {CONFIG_NAME} under "mcpServers"'
                raise ConfigError(f"no MCP server named {name!r} is configured (configured: {known})")

    def tools_for(
        self, names: Iterable[str], *, taken: Iterable[str] = (), warn: Callable[[str], None] = lambda _: None
    ) -> list[Tool]:
        names = list(names)
        self.check(names)
        used = set(taken)
        out: list[Tool] = []
        for name in names:
            try:
                listed = self.servers[name].tools()
            except ToolError as exc:
                warn(f"{exc}; continuing without its tools")
                continue
            if note := self.servers[name].network_note:
                warn(note)
            for tool in listed:
                unique = free_name(tool.name, name, used)
                if unique != tool.name:
                    tool = dataclasses.replace(tool, name=unique)
                used.add(tool.name)
                out.append(tool)
        return out

    def close(self) -> None:
        for server in self.servers.values():
            server.close()


def free_name(name: str, server: str, used: set[str]) -> str:
    """`name`, or the first of `SERVER_NAME`, `SERVER_NAME_2`, … that no tool in `used` has."""
    if name not in used:
        return name
    candidate, n = f"{server}_{name}", 1
    while candidate in used:
        n += 1
        candidate = f"{server}_{name}_{n}"
    return candidate
