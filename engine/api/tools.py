"""Tools: the set a turn may call, the folders and MCP servers they reach, and the approvals.

What the window's switches and approval card, `ember chat --tools` and `ember tools` use.
"""

from __future__ import annotations

from engine.tools.builtin import builtin_tools
from engine.tools.files import FolderGrants
from engine.tools.mcp_config import CONFIG_NAME
from engine.tools.mcp_tools import McpServers
from engine.tools.permissions import DEFAULT_MAX_ROUNDS, Approver, Decision, ToolPermissions, arguments_text, deny_all
from engine.tools.registry import Tool, ToolError, ToolSet
from engine.turns.tool_loop import MAX_CALLS_PER_ROUND

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_MAX_ROUNDS",
    "MAX_CALLS_PER_ROUND",
    "Approver",
    "Decision",
    "FolderGrants",
    "McpServers",
    "Tool",
    "ToolError",
    "ToolPermissions",
    "ToolSet",
    "arguments_text",
    "builtin_tools",
    "deny_all",
]
