"""``engine: openai`` (vLLM, SGLang, LM Studio...) against the wire format, over loopback.

No such server can run here: the vLLM fixtures (tests/fixtures/vllm/) are written from vLLM's
protocol and serving code, each file naming what it follows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana import Agent, Message, ModelError, ModelNotFound, UserError
from cortana.config import Settings
from cortana.models.base import ModelRequest, ModelResponse, ToolSpec
from cortana.models.factory import create_model_client
from cortana.models.openai_server import OpenAIServerClient
from tests.wire import Reply, WireServer

WEATHER = ToolSpec(
    "get_weather",
    "Get the weather in a given city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
KEY = "sk-test-5e3f1d7c9b"
MODEL = "Qwen/Qwen2.5-7B-Instruct"


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


async def answer(client: OpenAIServerClient, request: ModelRequest) -> ModelResponse:
    events = [event async for event in client.stream(request)]
    assert isinstance(events[-1], ModelResponse)
    return events[-1]


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
async def test_connect_picks_the_served_model_and_its_window(wire: WireServer, suffix: str) -> None:
    wire.add("GET", "/v1/models", Reply.fixture("vllm/models"))
    client = await OpenAIServerClient(base_url=wire.start() + suffix, api_key=KEY).connect()
    assert (client.model, client.context_window) == (MODEL, 32768)
    [request] = wire.requests
    assert request.headers.get("Authorization") == f"Bearer {KEY}"
    await client.aclose()


async def test_a_window_given_in_cortana_yml_wins_and_other_field_names_are_read(wire: WireServer) -> None:
    wire.add(
        "GET", "/v1/models", Reply.json({"object": "list", "data": [{"id": "local-model", "context_length": 8192}]})
    )
    given = await OpenAIServerClient("local-model", base_url=wire.start(), context_window=4096).connect()
    read = await OpenAIServerClient("local-model", base_url=wire.start()).connect()
    assert (given.context_window, read.context_window) == (4096, 8192)
    await given.aclose()
    await read.aclose()


async def test_a_server_that_reports_no_window_leaves_it_unknown(wire: WireServer) -> None:
    wire.add("GET", "/v1/models", Reply.json({"object": "list", "data": [{"id": "m", "object": "model"}]}))
    client = await OpenAIServerClient(base_url=wire.start()).connect()
    assert client.context_window is None  # compaction stays off rather than guessing
    await client.aclose()


async def test_a_model_the_server_does_not_list_is_named_with_what_it_lists(wire: WireServer) -> None:
    wire.add("GET", "/v1/models", Reply.fixture("vllm/models"))
    with pytest.raises(ModelNotFound, match=r"has no model 'gpt-4o' \(it lists: Qwen/Qwen2.5-7B-Instruct\)"):
        await OpenAIServerClient("gpt-4o", base_url=wire.start()).connect()


async def test_structured_tool_calls_stream_in_with_usage(wire: WireServer) -> None:
    wire.add("GET", "/v1/models", Reply.fixture("vllm/models"))
    wire.add("POST", "/v1/chat/completions", Reply.fixture("vllm/chat_tools_stream"))
    client = await OpenAIServerClient(base_url=wire.start()).connect()
    final = await answer(client, ModelRequest([Message.user("Weather in Paris?")], tools=[WEATHER]))
    [call] = final.message.tool_calls
    assert (call.name, call.arguments, call.from_text) == ("get_weather", {"city": "Paris"}, False)
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (193, 21)
    sent = wire.bodies("/v1/chat/completions")[0]
    assert sent["model"] == MODEL and sent["tools"][0]["function"]["name"] == "get_weather"
    await client.aclose()


async def test_a_call_written_as_text_is_recovered(wire: WireServer) -> None:
    wire.add("GET", "/v1/models", Reply.fixture("vllm/models"))
    wire.add("POST", "/v1/chat/completions", Reply.fixture("vllm/chat_text_call_stream"))
    client = await OpenAIServerClient(base_url=wire.start()).connect()
    final = await answer(client, ModelRequest([Message.user("Weather in Paris?")], tools=[WEATHER]))
    [call] = final.message.tool_calls
    assert (call.name, call.arguments, call.from_text) == ("get_weather", {"city": "Paris"}, True)
    assert "<tool_call>" not in final.message.content
    await client.aclose()


@pytest.mark.parametrize("key", [KEY, None])
async def test_a_refused_or_missing_key_says_so_and_never_shows_it(wire: WireServer, key: str | None) -> None:
    wire.add("GET", "/v1/models", Reply.fixture("vllm/error_unauthorized"))
    client = OpenAIServerClient(base_url=wire.start(), api_key=key)
    with pytest.raises(ModelError) as raised:
        await client.connect()
    message = str(raised.value)
    assert f"the API key {'was refused' if key else 'is missing'}" in message and "CORTANA_API_KEY" in message
    assert KEY not in message and KEY not in repr(client)
    await client.aclose()


async def test_without_an_address_the_error_names_the_key() -> None:
    with pytest.raises(UserError, match="engine: openai needs the server's address: set base_url"):
        OpenAIServerClient(base_url="")


async def test_the_factory_takes_the_openai_variables_and_the_aliases(
    wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire.add("GET", "/v1/models", Reply.fixture("vllm/models"))
    wire.add("POST", "/v1/chat/completions", Reply.fixture("vllm/chat_text_call_stream"))
    monkeypatch.setenv("OPENAI_BASE_URL", wire.start() + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = await create_model_client("vllm", settings=Settings())
    assert isinstance(client, OpenAIServerClient) and client.model == MODEL
    result = await Agent(client).run_stream("hi").get_result()  # the recorded reply is a stream
    assert result.output  # a call for no offered tool stays text
    assert {r.headers.get("Authorization") for r in wire.requests} == {f"Bearer {KEY}"}
    await client.aclose()


def test_doctor_shows_the_server_and_window_but_never_the_key(wire: WireServer, tmp_path: Path) -> None:
    wire.add("GET", "/v1/models", Reply.fixture("vllm/models"))
    url = wire.start()
    env = {**os.environ, "CORTANA_API_KEY": KEY, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    doctor = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "doctor", "--engine", "openai", "--base-url", url],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert doctor.returncode == 0, doctor.stderr
    report = dict(line.split("  ", 1) for line in doctor.stdout.splitlines() if "  " in line)
    assert report["engine"].strip() == f"OpenAI-compatible server at {url}"
    assert report["model"].strip() == MODEL
    assert report["context window"].strip() == "32,768 tokens"
    assert KEY not in doctor.stdout + doctor.stderr
