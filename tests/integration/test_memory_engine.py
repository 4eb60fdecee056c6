"""Memory on the real engine (bundled Qwen2.5-Coder-0.5B): a fact outlives its turn and its thread."""

from __future__ import annotations

from pathlib import Path

from cortana import Agent
from cortana.memory.recall import E5Embedder, Recall
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import ThreadRef
from cortana.models.base import ModelSettings
from cortana.models.llamacpp import LlamaCppClient

QUESTION = "What is my favourite colour? Answer with one word."


async def test_a_fact_from_turn_one_is_used_in_turn_three_and_in_a_new_thread(
    engine_url: str, engine_key: str, tmp_path: Path
) -> None:
    client = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    memory = SQLiteMemory(tmp_path / "memory.db", recall=Recall(E5Embedder(), top_k=2))
    agent = Agent(
        client,
        instructions="You are a helpful assistant. Answer briefly.",
        memory=memory,
        settings=ModelSettings(temperature=0, seed=1, max_tokens=60),
    )
    first = ThreadRef(resource_id="me", thread_id="one")
    try:
        await agent.run("My favourite colour is teal.", thread=first)
        await agent.run("Name a fruit that is yellow.", thread=first)
        third = await agent.run(QUESTION, thread=first)
        assert "teal" in third.output.lower(), third.output
        assert third.metrics.cached_prompt_tokens > 0, "the history prefix is served from the engine's cache"

        fresh = await agent.run(QUESTION, thread=ThreadRef(resource_id="me", thread_id="two"))
        sent = fresh.new_messages[0].content
        assert "My favourite colour is teal." in sent, "recall brings the fact into the new thread"
        assert "teal" in fresh.output.lower(), fresh.output
    finally:
        memory.close()
        await client.aclose()
