"""A small MCP server written with the mcp SDK, for Cortana's tests.

python tests/mcp_servers/tiny.py                     stdio
python tests/mcp_servers/tiny.py --http PORT         streamable HTTP on 127.0.0.1:PORT
python tests/mcp_servers/tiny.py --crash-on-start    exits before answering
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("tiny", version="0.1")
CRASH_MARKER = os.environ.get("TINY_CRASH_MARKER")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@server.tool()
def crash_once() -> str:
    """Crash the server the first time (when TINY_CRASH_MARKER names a file that does not exist yet)."""
    if CRASH_MARKER and not Path(CRASH_MARKER).exists():
        Path(CRASH_MARKER).write_text("crashed")
        os._exit(1)
    return "survived"


@server.tool()
def crash_always() -> str:
    """Crash the server every time."""
    os._exit(1)


if __name__ == "__main__":
    if "--crash-on-start" in sys.argv:
        print("tiny: refusing to start (asked to crash)", file=sys.stderr, flush=True)
        sys.exit(3)
    if "--http" in sys.argv:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        server.run()
