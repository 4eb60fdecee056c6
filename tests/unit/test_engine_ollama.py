"""The Ollama adapter against Ollama's documented wire format, served over loopback.

Verified only this way (no Ollama can run here): request shapes, NDJSON
streaming, whole tool calls in one chunk, thinking, /api/show context length,
/api/tags, /api/embed, and the error bodies. See tests/fixtures/README.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cortana import Agent, EngineUnavailable, Message, ModelError, ModelNotFound, StreamInterrupted, tool
from cortana.models.base import ModelRequest, ModelResponse, TextDelta, ThinkingDelta, ToolSpec
from cortana.models.ollama import OllamaClient, ollama_base_url
from tests.wire import FIXTURES, Reply, WireServer

WEATHER = ToolSpec(
    "get_weather",
    "Get the weather in a given city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


def fixture(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((FIXTURES / "ollama" / f"{name}.json").read_text())


async def collect(client: OllamaClient, request: ModelRequest) -> tuple[list, ModelResponse]:  # type: ignore[type-arg]
    events = [event async for event in client.stream(request)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    return events[:-1], final


async def test_streamed_answer_and_usage(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("OLLAMA_CONTEXT_LENGTH", raising=False)
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start())
    deltas, final = await collect(client, ModelRequest([Message.user("why is the sky blue?")]))
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert text.startswith("The sky looks") and text == final.message.content
    assert len(deltas) > 5, "text must arrive as it streams, not at the end"
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (35, 27)
    assert final.finish_reason == "stop" and final.model == "qwen2.5:0.5b"
    sent = wire.bodies("/api/chat")[0]
    assert sent["stream"] is True and sent["messages"] == [{"role": "user", "content": "why is the sky blue?"}]
    await client.aclose()


async def test_tool_calls_arrive_whole_with_object_arguments(wire: WireServer) -> None:
    recorded = fixture("chat_tools_stream")
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_tools_stream"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start())
    _, final = await collect(client, ModelRequest([Message.user("what is the weather in tokyo?")], tools=[WEATHER]))
    [call] = final.message.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_0pz7m2ha", "get_weather", {"city": "Tokyo"})
    sent = wire.bodies("/api/chat")[0]
    assert sent["tools"][0]["type"] == "function"
    assert set(sent["tools"][0]["function"]) == set(recorded["request"]["json"]["tools"][0]["function"])
    await client.aclose()


async def test_thinking_streams_separately(wire: WireServer) -> None:
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_think_stream"))
    client = OllamaClient("qwen3:0.6b", base_url=wire.start(), think=True)
    deltas, final = await collect(client, ModelRequest([Message.user("What is 17 × 23?")]))
    thinking = "".join(d.text for d in deltas if isinstance(d, ThinkingDelta))
    assert thinking.startswith("Okay, the") and final.message.thinking == thinking
    assert "391" in final.message.content
    assert wire.bodies("/api/chat")[0]["think"] is True
    await client.aclose()


async def test_tool_results_are_sent_in_the_documented_shape(wire: WireServer) -> None:
    recorded = fixture("chat_tool_result")["request"]["json"]["messages"]
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start())
    from cortana.messages import ToolCall

    call = ToolCall(id="call_k3v9x0qd", name="get_weather", arguments={"city": "Toronto"})
    history = [
        Message.user("what is the weather in Toronto?"),
        Message.assistant("", [call]),
        Message.tool(call, "11 degrees celsius"),
    ]
    await collect(client, ModelRequest(history, tools=[WEATHER]))
    assert wire.bodies("/api/chat")[0]["messages"] == recorded
    await client.aclose()


async def test_one_fixed_num_ctx_from_show_and_options(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("OLLAMA_CONTEXT_LENGTH", raising=False)
    wire.add("POST", "/api/show", Reply.fixture("ollama/show"))
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start(), keep_alive="10m")
    await client.connect()
    assert client.model_length == 32768
    assert client.context_window == 4096, "the Modelfile's num_ctx wins over the trained length"
    assert "tools" in client.capabilities
    from cortana.models.base import ModelSettings

    settings = ModelSettings(temperature=0.2, seed=42, max_tokens=64)
    for _ in range(2):
        await collect(client, ModelRequest([Message.user("Say hello in one word.")], settings=settings))
    documented = fixture("chat_options")["request"]["json"]
    for sent in wire.bodies("/api/chat"):
        assert sent["options"] == {**documented["options"], "num_ctx": 4096}
        assert sent["keep_alive"] == documented["keep_alive"]
    await client.aclose()


async def test_environment_sets_the_window(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_CONTEXT_WINDOW", raising=False)
    monkeypatch.setenv("OLLAMA_CONTEXT_LENGTH", "16384")
    wire.add("POST", "/api/show", Reply.fixture("ollama/show"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start())
    await client.connect()
    assert client.context_window == 16384, "the environment wins over the Modelfile's num_ctx (4096)"
    explicit = OllamaClient("qwen2.5:0.5b", base_url=wire.start(), context_window=2048)
    await explicit.connect()
    assert explicit.context_window == 2048, "an explicit argument wins over the environment"
    monkeypatch.setenv("OLLAMA_CONTEXT_WINDOW", "8192")
    assert OllamaClient("x").context_window == 8192, "OLLAMA_CONTEXT_WINDOW comes before OLLAMA_CONTEXT_LENGTH"
    await explicit.aclose()
    monkeypatch.setenv("OLLAMA_CONTEXT_WINDOW", "lots")
    from cortana import ConfigError

    with pytest.raises(ConfigError, match="OLLAMA_CONTEXT_WINDOW"):
        OllamaClient("x")
    await client.aclose()


async def test_tags_and_embeddings(wire: WireServer) -> None:
    wire.add("GET", "/api/tags", Reply.fixture("ollama/tags"))
    wire.add("POST", "/api/embed", Reply.fixture("ollama/embed"))
    client = OllamaClient("all-minilm", base_url=wire.start())
    assert "qwen2.5:0.5b" in await client.list_models()
    vectors = await client.embed(["Why is the sky blue?", "Why is the grass green?"])
    assert len(vectors) == 2 and len(vectors[0]) == 8 and vectors[0][0] == pytest.approx(0.071768545)
    await client.aclose()


async def test_unknown_model_says_how_to_pull_it(wire: WireServer) -> None:
    wire.add("POST", "/api/chat", Reply.fixture("ollama/error_model_not_found"))
    client = OllamaClient("x", base_url=wire.start())
    with pytest.raises(ModelNotFound, match="ollama pull x"):
        await collect(client, ModelRequest([Message.user("hi")]))
    await client.aclose()


async def test_model_without_tools_says_what_to_pick(wire: WireServer) -> None:
    wire.add("POST", "/api/chat", Reply.fixture("ollama/error_tools_unsupported"))
    client = OllamaClient("gemma:2b", base_url=wire.start())
    with pytest.raises(ModelError, match=r"does not support tools.*Capabilities"):
        await collect(client, ModelRequest([Message.user("weather?")], tools=[WEATHER]))
    await client.aclose()


async def test_a_stream_cut_midway_is_an_error_not_an_answer(wire: WireServer) -> None:
    reply = Reply.fixture("ollama/chat_plain_stream")
    reply.cut_after = 4
    wire.add("POST", "/api/chat", reply)
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start())
    with pytest.raises(StreamInterrupted) as info:
        await collect(client, ModelRequest([Message.user("why is the sky blue?")]))
    assert info.value.partial_text.startswith("The sky")
    assert "Retry the turn" in str(info.value)
    await client.aclose()


async def test_server_errors_are_retried_then_reported(wire: WireServer) -> None:
    wire.add("POST", "/api/chat", Reply.json({"error": "busy"}, 503), Reply.fixture("ollama/chat_plain_stream"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start(), max_retries=2)
    client.http.backoff = 0.01
    _, final = await collect(client, ModelRequest([Message.user("hi")]))
    assert final.message.content.startswith("The sky")
    wire.routes[("POST", "/api/chat")] = [Reply.json({"error": "out of memory"}, 500)]
    with pytest.raises(ModelError, match=r"HTTP 500 after 3 attempts: out of memory"):
        await collect(client, ModelRequest([Message.user("hi")]))
    await client.aclose()


async def test_nothing_listening_names_the_url_and_how_to_start() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OllamaClient("qwen2.5:0.5b", base_url=f"http://127.0.0.1:{port}", max_retries=0)
    with pytest.raises(EngineUnavailable) as info:
        await collect(client, ModelRequest([Message.user("hi")]))
    assert f"127.0.0.1:{port}" in str(info.value) and "ollama serve" in str(info.value)
    assert "cortana[local]" in str(info.value)
    await client.aclose()


async def test_full_agent_round_trip(wire: WireServer) -> None:
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_tools_stream"), Reply.fixture("ollama/chat_plain_stream"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start())

    @tool
    def get_weather(city: str) -> str:
        """Get the weather in a given city."""
        return f"11 degrees in {city}"

    result = await Agent(client, tools=[get_weather]).run("what is the weather in tokyo?")
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool", "assistant"]
    assert result.new_messages[2].content == "11 degrees in Tokyo"
    second = wire.bodies("/api/chat")[1]["messages"]
    assert second[-1] == {
        "role": "tool",
        "content": "11 degrees in Tokyo",
        "tool_name": "get_weather",
        "tool_call_id": "call_0pz7m2ha",
    }
    await client.aclose()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:11500", "http://127.0.0.1:11500"),
        ("example.lan:1234", "http://example.lan:1234"),
        ("https://ollama.example/", "https://ollama.example:11434"),
    ],
)
def test_ollama_host(value: str | None, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv("OLLAMA_HOST", raising=False)
    else:
        monkeypatch.setenv("OLLAMA_HOST", value)
    assert ollama_base_url() == expected


async def test_a_prompt_over_num_ctx_is_refused_before_ollama_truncates_it(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortana import ContextOverflow

    monkeypatch.delenv("OLLAMA_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("OLLAMA_CONTEXT_LENGTH", raising=False)
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start(), context_window=4096)
    await collect(client, ModelRequest([Message.user("why is the sky blue? " * 100)]))  # ~2,100 chars: fits
    with pytest.raises(ContextOverflow) as info:
        await collect(client, ModelRequest([Message.user("why is the sky blue? " * 1000)]))
    assert info.value.context_window == 4096 and (info.value.prompt_tokens or 0) > 4096
    assert "silently drop" in str(info.value) and "OLLAMA_CONTEXT_WINDOW" in str(info.value)
    assert len(wire.bodies("/api/chat")) == 1, "the oversize prompt was never sent"
    await client.aclose()


async def test_an_engine_too_slow_to_answer_is_retried_then_reported(wire: WireServer) -> None:
    wire.add("POST", "/api/chat", Reply(body=b"{}", delay=1.0))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start(), timeout=0.2, max_retries=1)
    client.http.backoff = 0.01
    with pytest.raises(ModelError, match=r"did not answer /api/chat in time after 2 attempts.*raise the timeout"):
        await collect(client, ModelRequest([Message.user("hi")]))
    assert len(wire.bodies("/api/chat")) == 2
    await client.aclose()


async def test_consecutive_streamed_calls_reuse_one_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # The stream is read to its end after the "done" line, so the connection goes back to the pool.
    monkeypatch.setenv("OLLAMA_CONTEXT_WINDOW", "4096")
    wire = WireServer(keep_alive=True)
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start())
    try:
        for _ in range(3):
            _, final = await collect(client, ModelRequest([Message.user("why is the sky blue?")]))
            assert final.message.content
        assert len(wire.bodies("/api/chat")) == 3 and wire.connections() == 1
    finally:
        await client.aclose()
        wire.stop()
