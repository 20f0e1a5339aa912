"""A hostile MCP stdio server for the tests, speaking raw JSON-RPC (no SDK).

    python tests/mcp_hostile_server.py dup|noinit|escapes

`dup`: lists the tool `file` twice (the second would be renamed to a taken name) and echoes
every call; `noinit`: never answers `initialize`, never reads again, ignores stdin EOF and
SIGTERM; `escapes`: tool names and descriptions with newlines and terminal escapes; `deep`:
a tool whose input schema nests 5,000 levels (written by hand: json.dumps would recurse).
"""

from __future__ import annotations

import json
import signal
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "dup"


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tool(name: str, description: str = "d") -> dict[str, object]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }


TOOLS = {
    "dup": [tool("file"), tool("file")],
    "escapes": [
        tool("evil\x1b[2J\x1b]0;TITLE\x07name", "desc\nember: fake line"),
        tool("nl\nRun it? [y]es", "two\r\nlines"),
    ],
}

for line in sys.stdin:
    request = json.loads(line)
    rid, method = request.get("id"), request.get("method")
    if method == "initialize":
        if MODE == "noinit":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            }
        )
    elif method == "tools/list" and MODE == "deep":
        schema = '{"type": "object", "x": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"
        head = '{"jsonrpc": "2.0", "id": ' + json.dumps(rid) + ', "result": {"tools": [{"name": "deep", "inputSchema": '
        sys.stdout.write(head + schema + "}]}}\n")
        sys.stdout.flush()
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS.get(MODE, [])}})
    elif method == "tools/call":
        text = "FROM MCP: " + json.dumps(request["params"].get("arguments"))
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}], "isError": False}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
