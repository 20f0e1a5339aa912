"""Ember's built-in local tools (no network): clock, calculator, granted files, own history.

    tools = builtin_tools(grants=FolderGrants([folder]), history_db=paths.history_db)

`list_files` and `read_file` are offered only when a folder is granted, and
`search_conversations` only when there is a history database.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.history.search import search_conversations
from engine.history.types import HistoryError
from engine.tools.calculator import CalcError, calculate, format_number
from engine.tools.files import FolderGrants, list_folder, read_text_file
from engine.tools.registry import Tool, ToolError, object_schema

BUILTIN_NAMES = ("current_time", "calculator", "list_files", "read_file", "search_conversations")
MAX_SEARCH_HITS = 10

_PATH = {"path": {"type": "string", "description": "a path relative to a granted folder"}}


def current_time_tool(now: Callable[[], dt.datetime] = lambda: dt.datetime.now().astimezone()) -> Tool:
    def run(_: Mapping[str, Any]) -> str:
        moment = now()
        zone = moment.tzname() or "local time"
        return f"{moment:%A %Y-%m-%d %H:%M:%S} {zone} (UTC{moment:%z})"

    return Tool("current_time", "The current date, time and time zone.", object_schema(), run)


def calculator_tool() -> Tool:
    def run(arguments: Mapping[str, Any]) -> str:
        expression = arguments.get("expression")
        if not isinstance(expression, str):
            raise ToolError("expression must be a string such as '2 * (3 + 4)'")
        try:
            return format_number(calculate(expression))
        except CalcError as exc:
            raise ToolError(str(exc)) from exc

    params = object_schema(
        {"expression": {"type": "string", "description": "arithmetic, e.g. 2 * (3 + 4) ** 2"}}, required=["expression"]
    )
    return Tool("calculator", "Evaluate an arithmetic expression exactly.", params, run)


def _path_argument(arguments: Mapping[str, Any], default: str | None = None) -> str:
    path = arguments.get("path", default)
    if not isinstance(path, str):
        raise ToolError("path must be a string")
    return path


def file_tools(grants: FolderGrants) -> list[Tool]:
    def list_run(arguments: Mapping[str, Any]) -> str:
        return list_folder(grants, _path_argument(arguments, "."))

    def read_run(arguments: Mapping[str, Any]) -> str:
        return read_text_file(grants, _path_argument(arguments))

    granted = f" Granted folders: {grants.names()}."
    return [
        Tool("list_files", "List the files in a folder the user granted." + granted, object_schema(_PATH), list_run),
        Tool(
            "read_file",
            "Read a text file inside a folder the user granted." + granted,
            object_schema(_PATH, required=["path"]),
            read_run,
        ),
    ]


def search_tool(history_db: Path) -> Tool:
    """Searches the history read-only, on whatever thread the tool runs."""

    def run(arguments: Mapping[str, Any]) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query must be a non-empty string")
        try:
            conn = sqlite3.connect(f"{history_db.resolve().as_uri()}?mode=ro", uri=True)
            try:
                hits = search_conversations(conn, query, MAX_SEARCH_HITS)
            finally:
                conn.close()
        except (sqlite3.Error, HistoryError) as exc:
            raise ToolError(f"the history cannot be searched: {exc}") from exc
        if not hits:
            return f"No conversation matches {query!r}."
        return "\n".join(f"- {h.title or '(untitled)'}: {h.plain_snippet}" for h in hits)

    params = object_schema({"query": {"type": "string", "description": "words to look for"}}, required=["query"])
    return Tool("search_conversations", "Search the user's earlier conversations with Ember.", params, run)


def builtin_tools(
    *, grants: FolderGrants | None = None, history_db: Path | None = None, now: Callable[[], dt.datetime] | None = None
) -> list[Tool]:
    tools = [current_time_tool(now) if now else current_time_tool(), calculator_tool()]
    if grants:
        tools.extend(file_tools(grants))
    if history_db is not None and history_db.exists():
        tools.append(search_tool(history_db))
    return tools
