"""The assistant for other clients: an OpenAI-compatible HTTP API (``cortana serve``) and an MCP server
(``cortana mcp-serve``), both over one :class:`~cortana.Assistant`.

``ChatService`` is the part that knows no protocol (histories onto threads, the
queue, tool activity, check-ins); ``openai_chat`` reads and writes OpenAI's chat
completions; ``create_app`` is the HTTP API on Starlette around it;
``mcp_server`` the MCP tools; ``acp`` the editors' agent. Install with ``pip install 'cortana[serve]'``
(Starlette and uvicorn). See docs/serve.md.

Names are imported on first use: Starlette and the MCP SDK load only when the
HTTP app or the MCP server is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortana.lazy import lazy_names

if TYPE_CHECKING:
    from cortana.serve.conversations import ConversationMap, conversation_key
    from cortana.serve.http import create_app
    from cortana.serve.mcp_server import mcp_server
    from cortana.serve.openai_chat import parse_messages
    from cortana.serve.queue import Busy, RunQueue
    from cortana.serve.service import (
        BadRequest,
        ChatInput,
        ChatService,
        CheckIn,
        ToolActivity,
        TurnEnd,
        refuse_over_api,
    )

__all__ = [
    "BadRequest",
    "Busy",
    "ChatInput",
    "ChatService",
    "CheckIn",
    "ConversationMap",
    "RunQueue",
    "ToolActivity",
    "TurnEnd",
    "conversation_key",
    "create_app",
    "mcp_server",
    "parse_messages",
    "refuse_over_api",
]

_LAZY = {
    "BadRequest": "cortana.serve.service",
    "Busy": "cortana.serve.queue",
    "ChatInput": "cortana.serve.service",
    "ChatService": "cortana.serve.service",
    "CheckIn": "cortana.serve.service",
    "ConversationMap": "cortana.serve.conversations",
    "RunQueue": "cortana.serve.queue",
    "ToolActivity": "cortana.serve.service",
    "TurnEnd": "cortana.serve.service",
    "conversation_key": "cortana.serve.conversations",
    "create_app": "cortana.serve.http",
    "mcp_server": "cortana.serve.mcp_server",
    "parse_messages": "cortana.serve.openai_chat",
    "refuse_over_api": "cortana.serve.service",
}

__getattr__ = lazy_names(__name__, _LAZY)
