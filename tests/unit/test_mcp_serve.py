"""``cortana mcp-serve``'s tools, called by the official ``mcp`` client (in process; over stdio with the real
model in tests/integration/test_serve_engine.py)."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from cortana import Assistant, Settings
from cortana.serve import ChatService, mcp_server, refuse_over_api
from cortana.testing import ScriptedModel, tool_call, tool_call_response

QUIET = Settings(memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False})


async def test_ask_answers_continues_its_conversation_and_refuses_approvals(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            "Paris.",
            tool_call_response(tool_call("write_file", path="notes.txt", content="x")),
            "I did not write the notes.",
            "You asked about Paris, then the notes.",
        ]
    )
    assistant = Assistant(tmp_path, QUIET, client=model, approve=refuse_over_api, heartbeat=False)
    service = ChatService(assistant)
    try:
        async with Client(mcp_server(service)) as client:
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            assert names == ["ask", "search_memory"]
            first = await client.call_tool("ask", {"prompt": "Capital of France?"})
            assert first.content[0].text == "Paris."  # type: ignore[union-attr]
            second = await client.call_tool("ask", {"prompt": "Write the notes."})
            text = second.content[0].text  # type: ignore[union-attr]
            assert text.startswith("I did not write the notes.") and "Not done: write_file" in text
            third = await client.call_tool("ask", {"prompt": "What did I ask?"})
            assert third.content[0].text.startswith("You asked")  # type: ignore[union-attr]
            remembered = [m.content for m in model.requests[-1].messages if m.role == "user"]
            assert remembered[0].endswith("Capital of France?"), "one conversation per server by default"
            found = await client.call_tool("search_memory", {"query": "France"})
            assert "semantic recall is off" in found.content[0].text  # type: ignore[union-attr]
    finally:
        service.close()
        await assistant.aclose()
