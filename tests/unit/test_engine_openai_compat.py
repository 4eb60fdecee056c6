"""Docker Model Runner and llama.cpp adapters against their wire format, over loopback.

Docker Model Runner fixtures follow its documented API and source (it cannot
run here); the llama.cpp ones are real captures from llama.cpp's server
running the bundled Qwen2.5-Coder-0.5B model (tests/fixtures/llamacpp/).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cortana import ContextOverflow, Message, ModelNotFound, StreamInterrupted
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, TextDelta, ToolSpec
from cortana.models.docker import DockerModelRunnerClient
from cortana.models.llamacpp import LlamaCppClient
from cortana.models.openai_compat import OpenAICompatClient
from tests.wire import FIXTURES, Reply, WireServer

WEATHER = ToolSpec(
    "get_weather",
    "Get the weather in a given city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
LLAMA = FIXTURES / "llamacpp"


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


async def collect(client: OpenAICompatClient, request: ModelRequest) -> tuple[list, ModelResponse]:  # type: ignore[type-arg]
    events = [event async for event in client.stream(request)]
    assert isinstance(events[-1], ModelResponse)
    return events[:-1], events[-1]


async def test_dmr_streamed_answer_with_usage(wire: WireServer) -> None:
    wire.add("POST", "/engines/v1/chat/completions", Reply.fixture("dmr/chat_plain_stream_usage"))
    client = DockerModelRunnerClient("ai/qwen2.5", base_url=wire.start())
    request = ModelRequest(
        [Message.system("You are a helpful assistant."), Message.user("Why is the sky blue?")],
        settings=ModelSettings(temperature=0.1),
    )
    deltas, final = await collect(client, request)
    assert "".join(d.text for d in deltas) == final.message.content
    assert final.message.content.startswith("The sky")
    assert final.usage.prompt_tokens > 0 and final.usage.completion_tokens > 0
    sent = wire.bodies("/engines/v1/chat/completions")[0]
    assert sent["stream_options"] == {"include_usage": True} and sent["temperature"] == 0.1
    assert sent["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Why is the sky blue?"},
    ]
    await client.aclose()


async def test_dmr_tool_call_assembled_from_argument_fragments(wire: WireServer) -> None:
    wire.add("POST", "/engines/v1/chat/completions", Reply.fixture("dmr/chat_tools_stream"))
    client = DockerModelRunnerClient("ai/qwen2.5", base_url=wire.start())
    deltas, final = await collect(
        client, ModelRequest([Message.user("What is the weather in Tokyo?")], tools=[WEATHER])
    )
    [call] = final.message.tool_calls
    assert call.id == "pZ4hQm1cVx8RkT2sLw6YbN0aJd9eGf3U"
    assert (call.name, call.arguments) == ("get_weather", {"city": "Tokyo"})
    assert not [d for d in deltas if isinstance(d, TextDelta)]
    await client.aclose()


async def test_servers_that_repeat_id_and_name_in_every_chunk(wire: WireServer) -> None:
    chunks = [
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
        '"function":{"name":"get_weather","arguments":"{\\"ci"}}]}}]}',
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
        '"function":{"name":"get_weather","arguments":"ty\\": \\"Oslo\\"}"}}]}}]}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
    ]
    wire.add(
        "POST",
        "/v1/chat/completions",
        Reply(
            lines=[f"data: {c}" for c in chunks] + ["data: [DONE]"], content_type="text/event-stream", line_end="\n\n"
        ),
    )
    client = LlamaCppClient("m", base_url=wire.start())
    _, final = await collect(client, ModelRequest([Message.user("weather in Oslo")], tools=[WEATHER]))
    [call] = final.message.tool_calls
    assert (call.id, call.name, call.arguments) == ("c1", "get_weather", {"city": "Oslo"})
    await client.aclose()


async def test_dmr_models_and_context_window(wire: WireServer) -> None:
    wire.add("GET", "/engines/v1/models", Reply.fixture("dmr/models"))
    client = await DockerModelRunnerClient(base_url=wire.start()).connect()
    assert client.model == "ai/qwen2.5:latest" and client.context_window == 32768
    named = await DockerModelRunnerClient("ai/smollm2", base_url=client.base_url).connect()
    assert named.context_window is None, "smollm2 was packaged without a context window"
    assert "ai/mxbai-embed-large:latest" in await client.list_models()
    await client.aclose()
    await named.aclose()


async def test_dmr_unknown_model_plain_text_404(wire: WireServer) -> None:
    wire.add("POST", "/engines/v1/chat/completions", Reply.fixture("dmr/error_model_not_found"))
    client = DockerModelRunnerClient("ai/does-not-exist", base_url=wire.start())
    with pytest.raises(ModelNotFound, match="docker model pull ai/does-not-exist"):
        await collect(client, ModelRequest([Message.user("hi")]))
    await client.aclose()


async def test_dmr_embeddings(wire: WireServer) -> None:
    wire.add("POST", "/engines/v1/embeddings", Reply.fixture("dmr/embeddings"))
    client = DockerModelRunnerClient("ai/mxbai-embed-large", base_url=wire.start())
    vectors = await client.embed(["Why is the sky blue?", "Why is the grass green?"])
    assert len(vectors) == 2 and vectors[0][0] == pytest.approx(0.20336976)
    await client.aclose()


async def test_llamacpp_props_give_the_real_window(wire: WireServer) -> None:
    wire.add("GET", "/health", Reply(body=(LLAMA / "q05_health.json").read_bytes()))
    wire.add("GET", "/props", Reply(body=(LLAMA / "q05_props.json").read_bytes()))
    wire.add("GET", "/slots", Reply(body=(LLAMA / "q05_slots.json").read_bytes()))
    client = await LlamaCppClient(base_url=wire.start(), context_window=999).connect()
    assert client.context_window == 4096, "/props beats the configured fallback"
    assert client.model == "qwen0.5.gguf"
    await client.aclose()


async def test_llamacpp_real_capture_fenced_json_becomes_a_tool_call(wire: WireServer) -> None:
    wire.add("POST", "/v1/chat/completions", Reply.sse_file(LLAMA / "q05_chat_tools_stream.sse.txt"))
    client = LlamaCppClient("qwen0.5.gguf", base_url=wire.start())
    deltas, final = await collect(client, ModelRequest([Message.user("What's the weather in Paris?")], tools=[WEATHER]))
    [call] = final.message.tool_calls
    assert (call.name, call.arguments) == ("get_weather", {"city": "Paris"})
    assert final.message.content == ""
    assert not [d for d in deltas if isinstance(d, TextDelta) and d.text.strip()], "the call must not flash by as text"
    assert final.usage.cached_tokens == 177, "no usage object in this capture: counts come from timings"
    await client.aclose()


async def test_llamacpp_without_recovery_keeps_the_text(wire: WireServer) -> None:
    wire.add("POST", "/v1/chat/completions", Reply.sse_file(LLAMA / "q05_chat_tools_stream.sse.txt"))
    client = LlamaCppClient("qwen0.5.gguf", base_url=wire.start(), recover_text_tool_calls=False)
    _deltas, final = await collect(
        client, ModelRequest([Message.user("What's the weather in Paris?")], tools=[WEATHER])
    )
    assert final.message.tool_calls == [] and final.message.content.startswith("```json")
    await client.aclose()


async def test_llamacpp_double_brace_capture_from_the_1_5b_model(wire: WireServer) -> None:
    wire.add("POST", "/v1/chat/completions", Reply.sse_file(LLAMA / "q15_chat_tools_sysprompt_stream.sse.txt"))
    client = LlamaCppClient("qwen1.5.gguf", base_url=wire.start())
    _, final = await collect(client, ModelRequest([Message.user("What's the weather in Paris?")], tools=[WEATHER]))
    [call] = final.message.tool_calls
    assert (call.name, call.arguments["city"]) == ("get_weather", "Paris")
    await client.aclose()


async def test_llamacpp_context_overflow(wire: WireServer) -> None:
    wire.add(
        "POST", "/v1/chat/completions", Reply(status=400, body=(LLAMA / "q05_error_ctx_exceeded.json").read_bytes())
    )
    client = LlamaCppClient("m", base_url=wire.start())
    with pytest.raises(ContextOverflow) as info:
        await collect(client, ModelRequest([Message.user("x " * 6000)]))
    assert (info.value.prompt_tokens, info.value.context_window) == (6030, 4096)
    assert "6030 tokens" in str(info.value) and "compact" in str(info.value)
    await client.aclose()


async def test_llamacpp_counts_tokens_with_template_and_tokenizer(wire: WireServer) -> None:
    wire.add("POST", "/apply-template", Reply(body=(LLAMA / "q05_apply_template.json").read_bytes()))
    wire.add("POST", "/tokenize", Reply(body=(LLAMA / "q05_tokenize.json").read_bytes()))
    client = LlamaCppClient("m", base_url=wire.start())
    assert await client.count_tokens([Message.user("Hello world, how are you?")]) == 7
    assert wire.bodies("/tokenize")[0]["content"].startswith("<|im_start|>")
    await client.aclose()


async def test_stream_closed_without_finish_is_an_error(wire: WireServer) -> None:
    reply = Reply.sse_file(LLAMA / "q05_chat_plain_stream.sse.txt")
    reply.cut_after = 3
    wire.add("POST", "/v1/chat/completions", reply)
    client = LlamaCppClient("m", base_url=wire.start())
    with pytest.raises(StreamInterrupted, match="Retry the turn"):
        await collect(client, ModelRequest([Message.user("hi")]))
    await client.aclose()


async def test_consecutive_streamed_calls_reuse_one_connection() -> None:
    # The stream is read to its end after [DONE], so the connection goes back to the pool; closing it
    # early made every model call open a new one (a quarter of the loop's time against a fast server).
    wire = WireServer(keep_alive=True)
    wire.add("POST", "/v1/chat/completions", Reply.fixture("dmr/chat_plain_stream_usage"))
    client = LlamaCppClient("qwen", base_url=wire.start(), context_window=4096)
    try:
        for _ in range(3):
            _, final = await collect(client, ModelRequest([Message.user("Why is the sky blue?")]))
            assert final.message.content.startswith("The sky")
        assert len(wire.requests) == 3 and wire.connections() == 1
    finally:
        await client.aclose()
        wire.stop()


async def test_a_connection_dropped_before_the_answer_is_retried_once_on_a_new_one(wire: WireServer) -> None:
    # llama.cpp closes kept-alive connections; the request that meets one must not fail the turn.
    wire.add("POST", "/v1/chat/completions", Reply(drop=True), Reply.fixture("dmr/chat_plain_stream_usage"))
    client = LlamaCppClient("qwen", base_url=wire.start(), context_window=4096)
    _, final = await collect(client, ModelRequest([Message.user("Why is the sky blue?")]))
    assert final.message.content.startswith("The sky")
    assert len(wire.requests) == 2
    await client.aclose()


async def test_an_engine_that_keeps_dropping_connections_is_reported_unavailable(wire: WireServer) -> None:
    from cortana import EngineUnavailable

    wire.add("POST", "/v1/chat/completions", Reply(drop=True))
    client = LlamaCppClient("qwen", base_url=wire.start(), context_window=4096)
    with pytest.raises(EngineUnavailable, match=r"closed the connection without answering.*check its log"):
        await collect(client, ModelRequest([Message.user("Why is the sky blue?")]))
    assert len(wire.requests) == 2  # one retry, not a loop
    await client.aclose()


@pytest.mark.parametrize(
    ("raw", "sent"),
    [
        ('{"path": "a.txt", "content": "It\'s time to take the pizza', '{"unparsed_arguments": '),  # cut off
        ('{"city": "Paris"}', '{"city": "Paris"}'),
        ("[1, 2]", '{"unparsed_arguments": "[1, 2]"}'),
    ],
)
def test_arguments_that_are_not_a_json_object_are_sent_as_one(raw: str, sent: str) -> None:
    """llama.cpp answers HTTP 500 to a history holding a call whose arguments it cannot parse."""
    import json

    from cortana.messages import ToolCall
    from cortana.models.openai_compat import to_openai_messages

    call = ToolCall(id="c1", name="write_file", raw_arguments=raw)
    (message,) = to_openai_messages([Message(role="assistant", tool_calls=[call])])
    text = message["tool_calls"][0]["function"]["arguments"]
    assert text.startswith(sent) and isinstance(json.loads(text), dict)
    if "unparsed" in sent:
        assert json.loads(text)["unparsed_arguments"] == raw, "the model still sees what it wrote"


async def test_llamacpp_several_answers_of_one_prompt_come_in_one_request(wire: WireServer) -> None:
    """llama.cpp's ``n`` (a real capture, three choices): the prompt is read once; more than the server's slots
    take another request, its seed three on."""
    import json

    props = json.loads((LLAMA / "q05_props.json").read_text())
    props["total_slots"] = 3
    wire.add("GET", "/health", Reply(body=(LLAMA / "q05_health.json").read_bytes()))
    wire.add("GET", "/props", Reply.json(props))
    wire.add("GET", "/slots", Reply(body=(LLAMA / "q05_slots.json").read_bytes()))
    wire.add("POST", "/v1/chat/completions", Reply(body=(LLAMA / "q05_chat_n3.json").read_bytes()))
    wire.add("POST", "/tokenize", Reply(body=(LLAMA / "q05_tokenize_apple.json").read_bytes()))
    client = await LlamaCppClient(base_url=wire.start()).connect()
    assert client.parallel_samples == 3
    request = ModelRequest([Message.user("Name a fruit. One word.")], settings=ModelSettings(temperature=0.9, seed=7))
    answers = await client.complete_many(request, 5)
    assert [answer.message.content for answer in answers] == ["Apple"] * 5
    bodies = [r.body for r in wire.requests if r.path == "/v1/chat/completions"]
    assert [(body["n"], body["seed"], body["stream"]) for body in bodies] == [(3, 7, False), (2, 10, False)]
    assert answers[0].usage.prompt_tokens == 36 and answers[1].usage.prompt_tokens == 0, "counted once a request"
    # The reply's usage says 2 generated tokens for all three answers; each answer is "Apple" and its end token.
    assert [answer.usage.completion_tokens for answer in answers] == [2] * 5
    assert [body["content"] for body in wire.bodies("/tokenize")] == ["Apple"] * 5


async def test_an_engine_without_slots_answers_one_request_after_another(wire: WireServer) -> None:
    wire.add("GET", "/health", Reply(body=(LLAMA / "q05_health.json").read_bytes()))
    wire.add("GET", "/props", Reply(body=(LLAMA / "q05_props.json").read_bytes()))
    wire.add("GET", "/slots", Reply(body=(LLAMA / "q05_slots.json").read_bytes()))
    wire.add("POST", "/v1/chat/completions", Reply.sse_file(LLAMA / "q05_chat_plain_stream.sse.txt"))
    client = await LlamaCppClient(base_url=wire.start()).connect()
    assert client.parallel_samples == 1
    request = ModelRequest([Message.user("Hi")], settings=ModelSettings(seed=1))
    answers = await client.complete_many(request, 2)
    assert len(answers) == 2
    bodies = [r.body for r in wire.requests if r.path == "/v1/chat/completions"]
    assert [(body.get("n"), body["seed"], body["stream"]) for body in bodies] == [(None, 1, True), (None, 2, True)]
