"""A tiny MCP stdio server for the tests, written with the official SDK.

    python tests/mcp_stub_server.py [ok|crash|hang|boom|dial]

One tool, `shout(text)`. `crash`: the process exits inside the call; `hang`: the call never
returns; `boom`: the process exits before it can even start; `dial` adds `dial(port)`, which
tries to connect to 127.0.0.1:port (the zero-egress tests).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

from mcp.server.mcpserver import MCPServer

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
if MODE == "boom":
    sys.exit(3)

app = MCPServer("stub")


@app.tool(description="Upper-case the text.")
async def shout(text: str) -> str:
    if MODE == "crash":
        os._exit(1)
    if MODE == "hang":
        await asyncio.sleep(3600)
    return text.upper() + "!"


async def dial(port: int) -> str:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError as exc:
        return f"failed: {exc}"
    return "connected"


if MODE == "dial":
    app.tool(description="Try to connect to 127.0.0.1:port.")(dial)


if __name__ == "__main__":
    app.run()
