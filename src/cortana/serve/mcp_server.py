"""``cortana mcp-serve``: the assistant as an MCP server over stdio, for other agents.

Two tools: ``ask`` (a question or a task for the assistant of this workspace,
answered with its memory, code graph and tools; a ``thread`` name continues
a conversation) and ``search_memory`` (what the assistant remembers that is
near a query: working memory and recalled earlier messages). Tools that need
an approval are refused, as over HTTP (``cortana.serve.service``).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from cortana.assistant import RESOURCE_ID
from cortana.messages import ThreadRef
from cortana.serve.service import ChatService

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["mcp_server"]

INSTRUCTIONS = (
    "Cortana, a local assistant that works in one project folder: it reads the code, remembers earlier "
    "conversations, and can search its memory. Ask it questions about the project or give it tasks; tools that "
    "would need the user's approval are not run."
)


def mcp_server(service: ChatService) -> MCPServer[Any]:
    """An MCP server whose tools ask ``service``'s assistant; run it with ``run_stdio_async()``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server: MCPServer[Any] = MCPServer("cortana", instructions=INSTRUCTIONS)
    conversation = service.assistant.thread.thread_id

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, openWorldHint=False))
    async def ask(prompt: str, thread: str | None = None) -> str:
        """Ask the assistant of this project a question, or give it a task; returns its answer.

        Args:
            prompt: what to ask or do, in plain words.
            thread: a conversation to continue (any name of letters, digits and ._:-); by default the one
                conversation of this server.
        """
        end = await service.ask(prompt, thread_name=thread or conversation)
        return end.shown

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    async def search_memory(query: str) -> str:
        """What the assistant remembers near ``query``: its working memory and earlier messages about it.

        Args:
            query: what to look for, in plain words.
        """
        scratch = ThreadRef(resource_id=RESOURCE_ID, thread_id=f"mcp-search-{uuid.uuid4().hex}")
        found = await service.assistant.memory.retrieve_context(scratch, query)
        if found:
            return found
        if service.assistant.memory.recall is None:
            return "Nothing remembered matches (semantic recall is off, so only working memory was searched)."
        return "Nothing remembered matches."

    return server
