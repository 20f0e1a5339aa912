"""The MCP server configuration: `mcp.json` in Ember's config folder, in the shape other clients use.

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "some-server", "/tmp"], "env": {"K": "v"}}}}

Reading it never starts anything; a bad file or entry is a one-line `ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from engine.errors import ConfigError
from engine.json_files import read_json

CONFIG_NAME = "mcp.json"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict[str, str])


def load_mcp_config(path: Path) -> dict[str, ServerConfig]:
    """The configured servers by name; an absent file means none."""
    if not path.exists():
        return {}
    data: Any = read_json(path)
    servers = cast(dict[str, Any], data).get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f'{path}: expected an object with "mcpServers"')
    return {str(name): _server(str(name), raw, path) for name, raw in cast(dict[str, Any], servers).items()}


def _server(name: str, raw: Any, path: Path) -> ServerConfig:
    where = f"{path}: server {name!r}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be an object")
    entry = cast(dict[str, Any], raw)
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(f'{where} needs a "command" (only stdio servers are supported)')
    args: Any = entry.get("args", [])
    env: Any = entry.get("env", {})
    if not isinstance(args, list) or not all(isinstance(a, str) for a in cast(list[Any], args)):
        raise ConfigError(f'{where}: "args" must be a list of strings')
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in cast(dict[str, Any], env).values()):
        raise ConfigError(f'{where}: "env" must map names to strings')
    return ServerConfig(name, command, tuple(cast(list[str], args)), dict(cast(dict[str, str], env)))
