"""The code graph on the real engine: the 0.5B model names a function's caller because the lookup told it."""

from __future__ import annotations

import shutil
from pathlib import Path

from cortana import Agent, KnowledgeGraph
from cortana.models.base import ModelSettings
from cortana.models.llamacpp import LlamaCppClient

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "graph_project"


async def test_asked_what_calls_a_function_the_small_model_names_the_caller(
    engine_url: str, engine_key: str, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    client = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    graph = KnowledgeGraph(project)
    agent = Agent(
        client,
        instructions="You are a coding assistant. Answer briefly.",
        knowledge_graph=graph,
        settings=ModelSettings(temperature=0, seed=1, max_tokens=80),
    )
    try:
        result = await agent.run("What calls `price_total`?")
        assert "called by: checkout() at shop/app.py:15" in result.new_messages[0].content
        assert "checkout" in result.output, result.output
        plain = await Agent(client, settings=ModelSettings(temperature=0, seed=1, max_tokens=80)).run(
            "What calls `price_total`?"
        )
        assert "checkout" not in plain.output, "without the graph the model cannot know (or the test proves nothing)"
    finally:
        await agent.aclose()
        await graph.aclose()
        await client.aclose()
