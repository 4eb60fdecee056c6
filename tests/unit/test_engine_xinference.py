"""Xinference through ``engine: openai``, against its wire format over loopback, and the fix's samples spread over a
server's replicas.

The fixtures (tests/fixtures/xinference/) were captured from a real Xinference 4.1.0 cluster on this machine: a
supervisor and two workers, the bundled 0.5B launched with two replicas (docs/engines.md, "When one machine is not
enough"; tests/integration/test_xinference.py runs that cluster where Xinference is installed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cortana import Agent, Message, ModelNotFound, tool
from cortana.config import Settings
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, complete
from cortana.models.factory import create_model_client
from cortana.models.openai_server import OpenAIServerClient
from tests.wire import FIXTURES, Reply, WireServer

MODEL = "cortana-qwen2.5-coder-0.5b"


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    server.add("GET", "/v1/models", Reply.fixture("xinference/models"))
    yield server
    server.stop()


async def test_the_model_and_its_window_come_from_xinferences_listing(wire: WireServer) -> None:
    client = await OpenAIServerClient(base_url=wire.start() + "/v1").connect()
    assert (client.model, client.context_window) == (MODEL, 8192), "context_length: the n_ctx it was launched with"
    await client.aclose()


@pytest.mark.parametrize("streamed", [True, False])
async def test_an_answer_whole_or_streamed(wire: WireServer, streamed: bool) -> None:
    wire.add(
        "POST", "/v1/chat/completions", Reply.fixture("xinference/chat_stream" if streamed else "xinference/chat_whole")
    )
    client = await OpenAIServerClient(MODEL, base_url=wire.start()).connect()
    request = ModelRequest([Message.user("What is a mutex? One sentence.")], streamed=streamed)
    answer = await complete(client, request)
    assert answer.message.content.startswith("A mutex is a synchronization mechanism")
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (27, 22)
    [body] = wire.bodies("/v1/chat/completions")
    assert body["model"] == MODEL and body["stream"] is streamed
    await client.aclose()


async def test_a_call_the_model_wrote_as_a_fenced_block_runs(wire: WireServer) -> None:
    """Xinference's llama.cpp engine hands back the 0.5B's call as text; Cortana recovers it, as for any engine."""
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        ran.append(city)
        return "Sunny"

    wire.add(
        "POST",
        "/v1/chat/completions",
        Reply.fixture("xinference/chat_text_call"),
        Reply.fixture("xinference/chat_whole"),
    )
    client = await OpenAIServerClient(MODEL, base_url=wire.start()).connect()
    result = await Agent(client, tools=[get_weather]).run("What is the weather in Paris?")
    assert ran == ["Paris"] and result.output.startswith("A mutex"), "the second answer is whatever was recorded"
    await client.aclose()


async def test_a_model_that_is_not_launched_is_named(wire: WireServer) -> None:
    with pytest.raises(ModelNotFound, match=r"has no model 'qwen2.5-coder-7b' \(it lists: cortana-qwen2.5-coder"):
        await OpenAIServerClient("qwen2.5-coder-7b", base_url=wire.start()).connect()
    wire.add("POST", "/v1/chat/completions", Reply.fixture("xinference/error_model_not_found"))
    client = await OpenAIServerClient(MODEL, base_url=wire.start()).connect()
    with pytest.raises(Exception, match="Model not found in the model list, uid: nope"):
        await complete(client, ModelRequest([Message.user("hi")], streamed=False))
    await client.aclose()


def slow_answer() -> Reply:
    """The recorded whole answer, a little later: long enough that requests sent together overlap."""
    return Reply(
        body=json.dumps(json.loads((FIXTURES / "xinference/chat_whole.json").read_text())["response"]["json"]).encode(),
        delay=0.3,
    )


@pytest.mark.parametrize(("parallel", "most"), [(1, 1), (2, 2), (8, 4)])
async def test_several_answers_go_as_up_to_parallel_requests_at_once(
    wire: WireServer, parallel: int, most: int
) -> None:
    """A server with N replicas answers N requests together: the fix's four samples of one prompt go as up to
    ``parallel`` requests at once (never more than asked for), each with its own seed, in the order asked."""
    wire.keep_alive = True
    wire.add("POST", "/v1/chat/completions", slow_answer())
    client = await OpenAIServerClient(MODEL, base_url=wire.start(), parallel=parallel).connect()
    settings = ModelSettings(temperature=0.8, seed=7)
    request = ModelRequest([Message.user("Write it again.")], settings=settings, streamed=False)
    answers = await client.complete_many(request, 4)
    assert len(answers) == 4 and all(isinstance(answer, ModelResponse) for answer in answers)
    assert wire.most_at_once == most
    assert sorted(body["seed"] for body in wire.bodies("/v1/chat/completions")) == [7, 8, 9, 10]
    await client.aclose()


async def test_parallel_comes_from_the_settings_and_from_a_role(wire: WireServer) -> None:
    url = wire.start() + "/v1"
    settings = Settings(engine="openai", base_url=url, parallel=3)
    client = await create_model_client(settings=settings)
    assert isinstance(client, OpenAIServerClient) and client.parallel == 3
    await client.aclose()
    with_role = Settings(models={"sampler": {"engine": "openai", "base_url": url, "model": MODEL, "parallel": 2}})
    assert with_role.models.sampler is not None
    sampler = await create_model_client(settings=with_role.for_role(with_role.models.sampler))
    assert isinstance(sampler, OpenAIServerClient) and (sampler.model, sampler.parallel) == (MODEL, 2)
    await sampler.aclose()


async def test_a_failed_answer_drops_the_others_and_says_why(wire: WireServer) -> None:
    wire.keep_alive = True
    wire.add("POST", "/v1/chat/completions", Reply.fixture("xinference/error_model_not_found"), slow_answer())
    client = await OpenAIServerClient(MODEL, base_url=wire.start(), parallel=2).connect()
    with pytest.raises(Exception, match="Model not found"):
        await client.complete_many(ModelRequest([Message.user("x")], streamed=False), 4)
    await client.aclose()
