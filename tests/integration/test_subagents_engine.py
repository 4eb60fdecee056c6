"""The real engine (bundled Qwen2.5-Coder-0.5B) drives a spawn and a wait.

No forced tool choice: a prompt that names the two tools, which the 0.5B model
follows at temperature 0: it spawns, then waits and reads the subagent's result.
"""

from __future__ import annotations

from cortana import Agent
from cortana.agent.subagents import SubagentManager
from cortana.models.base import ModelSettings
from cortana.models.llamacpp import LlamaCppClient

PROMPT = (
    "Use spawn_subagent with the task 'What is the capital of France?'. "
    "Then call wait_subagents and tell me its answer."
)


async def test_the_model_spawns_a_subagent_and_waits_for_it(engine_url: str, engine_key: str) -> None:
    client = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    manager = SubagentManager()
    agent = Agent(
        client,
        instructions="You are a helpful assistant.",
        tools=manager.tools(),
        settings=ModelSettings(temperature=0, seed=3, max_tokens=150),
        max_tool_iterations=6,
    )
    try:
        result = await agent.run(PROMPT)
    finally:
        await manager.aclose()
        await client.aclose()
    called = [call.name for message in result.new_messages for call in message.tool_calls]
    assert "spawn_subagent" in called and "wait_subagents" in called, called
    assert called.index("spawn_subagent") < called.index("wait_subagents")
    waited = [m.content for m in result.new_messages if m.role == "tool" and m.name == "wait_subagents"]
    assert any("(done): " in text for text in waited), waited
    assert result.metrics.subagent_spawns >= 1 and result.metrics.subagent_prompt_tokens > 0
    # What the 0.5B model does after the wait varies with the engine's cache state (it may spawn
    # again); the spawn -> wait -> result path is what this test is about.
