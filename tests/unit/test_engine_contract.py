"""The one engine contract: capabilities the loop and CLI read, defaults that say what is missing, ``async with``."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator

import pytest

from cortana import Agent, ConfigError, Message, ModelError, ModelNotFound
from cortana.memory.recall import EngineEmbedder
from cortana.models.base import ModelRequest, ModelSettings
from cortana.models.docker import DockerModelRunnerClient
from cortana.models.llamacpp import LlamaCppClient
from cortana.models.ollama import OllamaClient
from cortana.testing import ScriptedModel
from tests.wire import FIXTURES, Reply, WireServer


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _no_env_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("OLLAMA_CONTEXT_LENGTH", raising=False)


def show(capabilities: list[str], num_ctx: int = 4096) -> Reply:
    """Ollama's recorded /api/show answer, with the capabilities and Modelfile num_ctx of another model."""
    answer = copy.deepcopy(json.loads((FIXTURES / "ollama" / "show.json").read_text())["response"]["json"])
    answer["capabilities"] = capabilities
    answer["parameters"] = f"num_ctx {num_ctx}"
    return Reply.json(answer)


async def test_a_client_without_a_capability_says_so() -> None:
    model = ScriptedModel(["hi"], model="tiny")
    capabilities = [model.supports_token_counting, model.supports_embeddings, model.supports_thinking]
    assert not any([*capabilities, model.can_list_models, model.can_switch_model])
    assert model.base_url is None
    with pytest.raises(ModelError, match=r"scripted model \(tiny\) cannot count tokens"):
        await model.count_tokens([Message.user("x")])
    with pytest.raises(ModelError, match="cannot list its models"):
        await model.list_models()
    with pytest.raises(ModelError, match="cannot switch models"):
        await model.switch_model("other")
    with pytest.raises(ModelError, match="cannot embed text"):
        await model.embed(["x"])
    with pytest.raises(ConfigError, match="scripted model cannot embed text; use E5Embedder"):
        EngineEmbedder(model)


async def test_clients_close_when_their_async_with_block_ends() -> None:
    closed: list[str] = []

    class Closing(ScriptedModel):
        async def aclose(self) -> None:
            closed.append(self.model)

    async with Closing(["hi"], model="a") as client:
        assert (await Agent(client).run("hello")).output == "hi"
        assert closed == []
    assert closed == ["a"]


async def test_capabilities_of_the_adapters(wire: WireServer) -> None:
    wire.add("GET", "/health", Reply.json({"status": "ok"}))
    wire.add("GET", "/props", Reply(body=(FIXTURES / "llamacpp" / "q05_props.json").read_bytes()))
    url = wire.start()
    llama = await LlamaCppClient(base_url=url).connect()
    assert llama.supports_token_counting and llama.can_list_models and llama.supports_embeddings
    assert not llama.can_switch_model, "llama-server serves the one model it was started with"
    assert not llama.supports_thinking, "Qwen2.5's template has no enable_thinking switch"
    assert llama.engine == "llama.cpp" and llama.base_url == url
    ollama = OllamaClient("qwen2.5:0.5b", base_url=url)
    assert ollama.can_switch_model and ollama.can_list_models and ollama.supports_embeddings
    assert not ollama.supports_token_counting, "Ollama has no tokenizer endpoint; compaction estimates"
    dmr = DockerModelRunnerClient("ai/qwen2.5", base_url=url)
    assert dmr.can_switch_model and not dmr.supports_token_counting
    for client in (llama, ollama, dmr):
        await client.aclose()


async def test_ollama_switches_models_and_rereads_the_window(wire: WireServer) -> None:
    wire.add("POST", "/api/show", show(["completion", "tools"], 4096), show(["completion", "tools", "thinking"], 8192))
    wire.add("GET", "/api/tags", Reply.fixture("ollama/tags"))
    async with OllamaClient("qwen2.5:0.5b", base_url=wire.start()) as client:
        await client.connect()
        assert (client.context_window, client.supports_thinking) == (4096, False)
        await client.switch_model("qwen3:0.6b")
        assert (client.model, client.context_window, client.supports_thinking) == ("qwen3:0.6b", 8192, True)
        assert [body["model"] for body in wire.bodies("/api/show")] == ["qwen2.5:0.5b", "qwen3:0.6b"]


async def test_a_failed_switch_keeps_the_model_in_use(wire: WireServer) -> None:
    wire.add("POST", "/api/show", show(["completion", "tools"]), Reply.fixture("ollama/error_model_not_found"))
    async with OllamaClient("qwen2.5:0.5b", base_url=wire.start()) as client:
        await client.connect()
        with pytest.raises(ModelNotFound, match="ollama pull nope"):
            await client.switch_model("nope")
        assert (client.model, client.context_window) == ("qwen2.5:0.5b", 4096)


async def test_docker_model_runner_switches_only_to_a_pulled_model(wire: WireServer) -> None:
    wire.add("GET", "/engines/v1/models", Reply.fixture("dmr/models"))
    async with DockerModelRunnerClient(base_url=wire.start()) as client:
        await client.connect()
        names = await client.list_models()
        with pytest.raises(ModelNotFound, match=r"docker model pull ai/nothing"):
            await client.switch_model("ai/nothing")
        await client.switch_model(names[-1])
        assert client.model == names[-1]


async def test_think_is_sent_only_to_a_model_that_thinks(wire: WireServer) -> None:
    wire.add("POST", "/api/show", show(["completion", "tools"]), show(["completion", "tools", "thinking"]))
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    settings = ModelSettings(think=False)
    async with OllamaClient("qwen2.5:0.5b", base_url=wire.start()) as client:
        await client.connect()
        await Agent(client, settings=settings).run("hello")
        await client.switch_model("qwen3:0.6b")
        await Agent(client, settings=settings).run("hello")
    plain, thinking = wire.bodies("/api/chat")
    assert "think" not in plain, "Ollama answers HTTP 400 to think for a model without the capability"
    assert thinking["think"] is False


def test_llamacpp_sends_think_as_the_templates_switch() -> None:
    client = LlamaCppClient(base_url="http://127.0.0.1:9")
    request = ModelRequest([Message.user("hi")], settings=ModelSettings(think=False))
    assert client.request_body(request)["chat_template_kwargs"] == {"enable_thinking": False}
    assert "chat_template_kwargs" not in client.request_body(ModelRequest([Message.user("hi")]))


async def test_a_think_level_reaches_ollama_as_its_level(wire: WireServer) -> None:
    wire.add("POST", "/api/show", show(["completion", "tools", "thinking"]))
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    async with OllamaClient("gpt-oss:20b", base_url=wire.start()) as client:
        await client.connect()
        await Agent(client, settings=ModelSettings(think="low")).run("hello")
    assert wire.bodies("/api/chat")[0]["think"] == "low"


def test_llamacpp_caps_thinking_for_a_level_and_keeps_it_on() -> None:
    client = LlamaCppClient(base_url="http://127.0.0.1:9")
    body = client.request_body(ModelRequest([Message.user("hi")], settings=ModelSettings(think="low")))
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["thinking_budget_tokens"] == 512
    assert "reasoning_effort" not in body
    high = client.request_body(ModelRequest([Message.user("hi")], settings=ModelSettings(think="high")))
    assert "thinking_budget_tokens" not in high


def test_openai_style_servers_get_a_level_as_reasoning_effort() -> None:
    client = DockerModelRunnerClient(base_url="http://127.0.0.1:9")
    body = client.request_body(ModelRequest([Message.user("hi")], settings=ModelSettings(think="medium")))
    assert body["reasoning_effort"] == "medium"
