"""An MCP server that starts and then never answers: it reads its stdin and says nothing."""

import sys

for _ in sys.stdin:
    pass
