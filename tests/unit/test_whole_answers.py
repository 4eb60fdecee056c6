"""Answers asked for whole when nobody reads them as they arrive (``Agent.run``), over loopback.

``run_stream`` streams (the terminal shows the answer as it comes); ``run`` returns only the result, so each
model answer is asked for with ``"stream": false``: one body to parse instead of an event per token, which
is most of what the loop cost per step against an instant server (issue 48). The llama.cpp replies are real
captures of its server on the bundled 0.5B model (``tests/fixtures/llamacpp/q05_chat_*.json``); the
structured tool call is Docker Model Runner's documented shape (llama.cpp's server behind it).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from cortana import Agent, AgentLogger, ContextOverflow, ModelError
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, TextDelta
from cortana.models.docker import DockerModelRunnerClient
from cortana.models.openai_compat import OpenAICompatClient
from tests.wire import FIXTURES, Reply, WireServer

LLAMA = FIXTURES / "llamacpp"
PATH = "/v1/chat/completions"


def captured(name: str) -> Reply:
    return Reply(body=(LLAMA / name).read_bytes())


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


ran: list[str] = []


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    ran.append(city)
    return f"It is 21 degrees and sunny in {city}."


async def test_run_asks_for_whole_answers_and_a_call_written_as_text_still_runs(wire: WireServer) -> None:
    ran.clear()
    wire.add("POST", PATH, captured("q05_chat_tools.json"), captured("q05_chat_plain.json"))
    agent = Agent(OpenAICompatClient("qwen", base_url=wire.start() + "/v1"), tools=[get_weather])
    result = await agent.run("What's the weather in Paris?")
    assert ran == ["Paris"], "the 0.5B model wrote the call as text in its whole answer: recovered and run"
    assert result.output == "Hello!"
    sent = wire.bodies(PATH)
    assert [body["stream"] for body in sent] == [False, False] and not any("stream_options" in b for b in sent)
    assert result.metrics.prompt_tokens == 179 + 35 and result.metrics.cached_prompt_tokens > 0
    assert result.metrics.completion_tokens == 17 + 3
    await agent.aclose()


async def test_run_stream_still_streams(wire: WireServer) -> None:
    wire.add("POST", PATH, Reply.sse_file(LLAMA / "q05_chat_plain_stream.sse.txt"))
    agent = Agent(OpenAICompatClient("qwen", base_url=wire.start() + "/v1"))
    deltas = [event async for event in agent.run_stream("Hello?") if isinstance(event, TextDelta)]
    assert len(deltas) > 1, "the answer arrives piece by piece"
    assert wire.bodies(PATH)[0]["stream"] is True
    await agent.aclose()


async def test_an_agent_with_a_logger_streams_even_in_run(wire: WireServer) -> None:
    wire.add("POST", PATH, Reply.sse_file(LLAMA / "q05_chat_plain_stream.sse.txt"))
    agent = Agent(OpenAICompatClient("qwen", base_url=wire.start() + "/v1"), logger=AgentLogger(file=io.StringIO()))
    await agent.run("Hello?")
    assert wire.bodies(PATH)[0]["stream"] is True, "the logger shows the answer as it comes"
    await agent.aclose()


async def test_a_whole_answer_cut_at_max_tokens_says_so(wire: WireServer) -> None:
    wire.add("POST", PATH, captured("q05_chat_plain_length.json"))
    client = OpenAICompatClient("qwen", base_url=wire.start() + "/v1")
    events = [e async for e in client.stream(ModelRequest([], settings=ModelSettings(max_tokens=5), streamed=False))]
    final = events[-1]
    assert isinstance(final, ModelResponse) and final.finish_reason == "length"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["One to twenty is "], "the text, once"
    await client.aclose()


async def test_a_structured_call_in_a_whole_answer(wire: WireServer) -> None:
    fixture = json.loads((FIXTURES / "dmr" / "chat_tools.json").read_text())
    wire.add("POST", "/engines/v1/chat/completions", Reply.json(fixture["response"]["json"]))
    client = DockerModelRunnerClient("ai/qwen2.5", base_url=wire.start())
    events = [e async for e in client.stream(ModelRequest([], streamed=False))]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    expected = fixture["response"]["json"]["choices"][0]["message"]["tool_calls"][0]
    [call] = final.message.tool_calls
    assert call.name == expected["function"]["name"]
    assert call.arguments == json.loads(expected["function"]["arguments"]) and call.id == expected["id"]
    await client.aclose()


async def test_a_prompt_too_long_is_refused_as_when_streaming(wire: WireServer) -> None:
    wire.add("POST", PATH, Reply(status=400, body=(LLAMA / "q05_error_ctx_exceeded.json").read_bytes()))
    client = OpenAICompatClient("qwen", base_url=wire.start() + "/v1")
    with pytest.raises(ContextOverflow):
        _ = [e async for e in client.stream(ModelRequest([], streamed=False))]
    await client.aclose()


@pytest.mark.parametrize(
    ("reply", "named"),
    [
        ({"choices": []}, "no choice"),
        ({"choices": [{"message": "hello"}]}, "message"),
        ({"error": {"message": "model crashed"}}, "model crashed"),
    ],
)
async def test_a_malformed_whole_answer_is_a_clear_error(wire: WireServer, reply: object, named: str) -> None:
    wire.add("POST", PATH, Reply.json(reply))
    client = OpenAICompatClient("qwen", base_url=wire.start() + "/v1")
    with pytest.raises(ModelError, match=named):
        _ = [e async for e in client.stream(ModelRequest([], streamed=False))]
    await client.aclose()


async def test_an_engine_that_dies_before_its_whole_answer_is_a_clear_error_and_the_message_is_kept(
    wire: WireServer,
) -> None:
    from cortana import InMemoryHistory, ThreadRef

    wire.add("POST", PATH, Reply(drop=True))  # the connection closes with no answer, every time
    memory = InMemoryHistory()
    agent = Agent(OpenAICompatClient("qwen", base_url=wire.start() + "/v1"), memory=memory)
    with pytest.raises(ModelError) as raised:
        await agent.run("Write a story.", thread="t")
    assert "OpenAI-compatible server" in str(raised.value), raised.value
    assert len(wire.bodies(PATH)) == 2, "one retry on a fresh connection (a kept-alive one may have been dropped)"
    assert [m.content for m in memory.threads[ThreadRef(thread_id="t")]] == ["Write a story."]
    await agent.aclose()


async def test_a_whole_answer_may_take_longer_than_an_answer_may_take_to_start(wire: WireServer) -> None:
    # The client's timeout is for an answer to start; a whole answer starts only when it is done, so a long one
    # written slowly must not be cut off by it.
    slow = captured("q05_chat_plain.json")
    slow.delay = 1.0
    wire.add("POST", PATH, slow)
    client = OpenAICompatClient("qwen", base_url=wire.start() + "/v1", timeout=0.3, max_retries=0)
    events = [e async for e in client.stream(ModelRequest([], streamed=False))]
    assert isinstance(events[-1], ModelResponse) and events[-1].message.content == "Hello!"
    await client.aclose()
