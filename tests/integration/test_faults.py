"""Faults on the real engine: it dies in the middle of a tool loop, and comes back."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from cortana import Agent, ModelError, ModelSettings, TextDelta, ThreadRef
from cortana.memory.sqlite import SQLiteMemory
from cortana.models.embedded import EmbeddedClient
from tests.integration.conftest import TEST_MODEL, weather_tool

QUESTION = "What's the weather in Paris?"


async def test_an_engine_killed_mid_stream_in_a_tool_loop_loses_nothing_and_the_next_turn_works(
    tmp_path: Path,
) -> None:
    ran: list[str] = []

    get_weather = weather_tool(ran)

    memory = SQLiteMemory(tmp_path / "memory.db", working_memory=None)
    thread = ThreadRef(resource_id="me", thread_id="trip")
    client = await EmbeddedClient.start(TEST_MODEL, context_window=2048, threads=1)
    agent = Agent(
        client,
        instructions="You are a helpful assistant.",
        tools=[get_weather],
        memory=memory,
        settings=ModelSettings(temperature=0, seed=7, max_tokens=120),
    )
    try:
        with pytest.raises(ModelError) as info:
            async for event in agent.run_stream(QUESTION, thread=thread):
                if isinstance(event, TextDelta) and ran:  # the answer after the tool result is streaming
                    assert client.server.pid is not None
                    os.kill(client.server.pid, signal.SIGKILL)
                    await asyncio.sleep(0.2)
    finally:
        await client.aclose()
    assert "stopped answering mid-stream" in str(info.value) or "closed the stream" in str(info.value), info.value
    assert ran == ["Paris"]
    stored = [entry.message for entry in await memory.messages(thread)]
    assert stored[0].content == QUESTION, "the user's message"
    assert stored[1].tool_calls and stored[1].tool_calls[0].name == "get_weather", "the call"
    assert stored[2].role == "tool" and "sunny in Paris" in stored[2].content, "the finished tool result"
    assert all(m.role != "assistant" for m in stored[3:]), "nothing of the broken answer (a nudge may be there)"
    assert await memory.interrupted_prompt(thread) == QUESTION

    restarted = await EmbeddedClient.start(TEST_MODEL, context_window=2048, threads=1)
    agent.model = restarted
    try:
        result = await agent.run("Thanks. Was it sunny there? Answer in one sentence.", thread=thread)
    finally:
        await restarted.aclose()
        memory.close()
    assert result.output.strip() and result.metrics.model_calls >= 1
    assert result.metrics.prompt_tokens > 0, "the new turn was read with the stored history"


async def test_a_cut_off_tool_call_in_the_history_does_not_end_the_next_request(
    engine_url: str, engine_key: str
) -> None:
    """A call whose arguments were cut at the token limit stays in the history as the model wrote it;
    llama.cpp's server parses every call there, and answered HTTP 500 to this one before it was wrapped."""
    from cortana.messages import Message, ToolCall
    from cortana.models.base import ModelRequest, complete
    from cortana.models.llamacpp import LlamaCppClient

    client = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    try:
        cut = ToolCall(id="c1", name="write_file", raw_arguments='{"path": "note.txt", "content": "Take the pizza o')
        history = [
            Message.user("Write a note about the pizza."),
            Message(role="assistant", tool_calls=[cut]),
            Message(role="tool", tool_call_id="c1", name="write_file", is_error=True, content="Arguments not JSON."),
            Message.user("Just tell me in one word: what food was it?"),
        ]
        assert await client.count_tokens(history, []) > 20
        reply = await complete(
            client, ModelRequest(messages=history, settings=ModelSettings(temperature=0, max_tokens=10))
        )
        assert reply.message.content.strip()
    finally:
        await client.aclose()
