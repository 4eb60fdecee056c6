"""An Agent built without a model runs on the configured engine, shared by the process's agents."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana import Agent
from cortana.models.llamacpp import LlamaCppClient
from tests.wire import FIXTURES, Reply, WireServer

LLAMA = FIXTURES / "llamacpp"


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[WireServer]:
    """A llama.cpp server on loopback (its recorded answers), named as the engine by the environment."""
    server = WireServer()
    server.add("GET", "/health", Reply(body=(LLAMA / "q05_health.json").read_bytes()))
    server.add("GET", "/props", Reply(body=(LLAMA / "q05_props.json").read_bytes()))
    server.add("GET", "/slots", Reply(body=(LLAMA / "q05_slots.json").read_bytes()))
    server.add("POST", "/v1/chat/completions", Reply(body=(LLAMA / "q05_chat_plain.json").read_bytes()))  # run(): whole
    monkeypatch.chdir(tmp_path)  # no cortana.yml here
    monkeypatch.setenv("CORTANA_ENGINE", "llamacpp")
    monkeypatch.setenv("CORTANA_BASE_URL", server.start())
    yield server
    server.stop()


async def test_agents_without_a_model_share_the_configured_engine(configured: WireServer) -> None:
    first, second = Agent(name="a"), Agent(name="b")
    answer = await first.run("Say hello in one word.")
    assert answer.output
    await second.run("Say hello in one word.")
    client = await first.client()
    assert isinstance(client, LlamaCppClient) and client is await second.client()
    assert len(configured.bodies("/props")) == 1, "connected once, for both agents"
    assert len(configured.bodies("/v1/chat/completions")) == 2
    await first.aclose()
    assert await second.client() is not client, "aclose closed it; the next use makes a new one"
    await second.aclose()


def test_the_shared_engine_is_closed_when_the_event_loop_ends(
    configured: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[LlamaCppClient] = []
    original = LlamaCppClient.aclose

    async def recording_aclose(self: LlamaCppClient) -> None:
        closed.append(self)
        await original(self)

    monkeypatch.setattr(LlamaCppClient, "aclose", recording_aclose)

    async def main() -> LlamaCppClient:
        agent = Agent()
        await agent.run("Say hello in one word.")
        client = await agent.client()
        assert isinstance(client, LlamaCppClient)
        return client

    used = asyncio.run(main())
    assert closed == [used], "asyncio.run ending closed the shared client"
    assert Agent().run_sync("Say hello in one word.").output, "a new loop gets a new client"
    assert len(closed) == 2 and closed[1] is not used
