"""`ember tools`: the tools a conversation can offer, per source (built-in, each MCP server).

ember tools                 # built-in tools, and the configured MCP servers (not started)
ember tools --mcp files     # start server "files" and list its tools
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from desktop.cli.common import EXIT_OK, fail, warn
from engine.api.errors import ConfigError
from engine.api.program import ember_paths
from engine.api.text import cell
from engine.api.tools import CONFIG_NAME, FolderGrants, McpServers, Tool, builtin_tools


def register(sub: Any) -> None:
    p = sub.add_parser("tools", help="list the built-in tools and the MCP servers' tools")
    p.add_argument(
        "--mcp",
        metavar="NAME",
        action="append",
        default=[],
        help="start MCP server NAME and list its tools (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    paths = ember_paths()
    try:
        servers = McpServers.from_config_dir(paths.config_dir)
        servers.check(args.mcp)
    except ConfigError as exc:
        return fail(str(exc))
    # The file tools are listed as if a folder were granted: `--allow-folder` turns them on.
    listing: dict[str, Any] = {
        "builtin": [_ungranted(_row(t)) for t in builtin_tools(grants=_any_grant(), history_db=paths.history_db)]
    }
    try:
        for name in servers.names:
            started = name in args.mcp
            tools = servers.tools_for([name], warn=warn) if started else None
            listing[f"mcp:{name}"] = None if tools is None else [_row(t) for t in tools]
    finally:
        servers.close()
    _print(listing, args.json, paths.config_dir / CONFIG_NAME)
    return EXIT_OK


def _any_grant() -> FolderGrants:
    return FolderGrants([ember_paths().ensure().data_dir])


def _ungranted(row: dict[str, Any]) -> dict[str, Any]:
    """A file tool's description without the stand-in grant: no folder is granted until a chat grants one."""
    description = str(row["description"])
    at = description.find(" Granted folders: ")
    if at >= 0:
        row["description"] = description[:at] + " No folders granted (`ember chat --allow-folder DIR` grants one)."
    return row


def _row(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)}


def _print(listing: dict[str, Any], as_json: bool, config: Any) -> None:
    if as_json:
        sys.stdout.write(json.dumps(listing, ensure_ascii=False, indent=2) + "\n")
        return
    for source, tools in listing.items():
        shown = cell(source)  # names and descriptions come from servers: one line each, no escapes
        if tools is None:
            sys.stdout.write(f"{shown}: not started (ember tools --mcp {cell(source[4:])})\n")
            continue
        sys.stdout.write(f"{shown}:\n")
        for tool in tools:
            sys.stdout.write(f"  {cell(tool['name'])}: {cell(tool['description'])}\n")
    if len(listing) == 1:
        sys.stdout.write(f'(no MCP servers configured; add them to {config} under "mcpServers")\n')
