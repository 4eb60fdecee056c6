"""create_model_client: explicit engines, probing order, and the errors when nothing runs."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana import EngineUnavailable, ModelNotFound, UserError
from cortana.models.docker import DockerModelRunnerClient
from cortana.models.factory import create_model_client, probe_engines
from cortana.models.llamacpp import LlamaCppClient
from cortana.models.ollama import OllamaClient
from tests.wire import FIXTURES, Reply, WireServer

LLAMA = FIXTURES / "llamacpp"


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def llama_server() -> WireServer:
    server = WireServer()
    server.add("GET", "/health", Reply(body=(LLAMA / "q05_health.json").read_bytes()))
    server.add("GET", "/props", Reply(body=(LLAMA / "q05_props.json").read_bytes()))
    server.add("GET", "/slots", Reply(body=(LLAMA / "q05_slots.json").read_bytes()))
    return server


def ollama_server() -> WireServer:
    server = WireServer()
    server.add("GET", "/api/version", Reply.fixture("ollama/version"))
    server.add("GET", "/api/tags", Reply.fixture("ollama/tags"))
    server.add("POST", "/api/show", Reply.fixture("ollama/show"))
    return server


@pytest.fixture
def nothing_running(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("OLLAMA_HOST", "CORTANA_DMR_URL", "CORTANA_LLAMACPP_URL"):
        monkeypatch.setenv(name, closed_port_url())
    monkeypatch.delenv("OLLAMA_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("OLLAMA_CONTEXT_LENGTH", raising=False)
    yield


async def test_probe_finds_what_answers(nothing_running: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert await probe_engines(0.3) == set()
    llama = llama_server()
    monkeypatch.setenv("CORTANA_LLAMACPP_URL", llama.start())
    try:
        assert await probe_engines(0.3) == {"llamacpp"}
        client = await create_model_client()
        assert isinstance(client, LlamaCppClient) and client.context_window == 4096
        await client.aclose()
    finally:
        llama.stop()


async def test_ollama_comes_first_and_picks_a_tool_model(
    nothing_running: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    llama, ollama = llama_server(), ollama_server()
    monkeypatch.setenv("CORTANA_LLAMACPP_URL", llama.start())
    monkeypatch.setenv("OLLAMA_HOST", ollama.start())
    try:
        client = await create_model_client()
        assert isinstance(client, OllamaClient)
        assert client.model == "qwen2.5:0.5b" and client.context_window == 4096
        await client.aclose()
    finally:
        llama.stop()
        ollama.stop()


async def test_ollamas_engine_takes_a_model_by_its_store_name(nothing_running: None) -> None:
    """``--engine ollama --model ollama:NAME`` (the name ``cortana models`` lists a model of Ollama's store by) asks
    Ollama for NAME: Ollama knows no ``ollama:`` prefix and answered 404."""
    ollama = ollama_server()
    url = ollama.start()
    try:
        client = await create_model_client("ollama", model="ollama:qwen2.5:0.5b", base_url=url)
        assert isinstance(client, OllamaClient) and client.model == "qwen2.5:0.5b"
        assert ollama.bodies("/api/show") == [{"model": "qwen2.5:0.5b"}]
        await client.aclose()
    finally:
        ollama.stop()


async def test_explicit_engines(nothing_running: None, monkeypatch: pytest.MonkeyPatch) -> None:
    dmr = WireServer().add("GET", "/engines/v1/models", Reply.fixture("dmr/models"))
    url = dmr.start()
    try:
        client = await create_model_client("docker-model-runner", base_url=url)
        assert isinstance(client, DockerModelRunnerClient) and client.model == "ai/qwen2.5:latest"
        await client.aclose()
        with pytest.raises(EngineUnavailable, match=r"llama-server -m MODEL\.gguf"):
            await create_model_client("llamacpp", max_retries=0)
        with pytest.raises(UserError, match="no engine is called 'tgi'"):
            await create_model_client("tgi")
    finally:
        dmr.stop()


async def test_nothing_running_and_no_bundled_model(nothing_running: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cortana.models.embedded.installed_models", lambda: [])
    with pytest.raises(EngineUnavailable) as info:
        await create_model_client()
    message = str(info.value)
    assert "11434" in message and "12434" in message and "8080" in message
    assert "pip install 'cortana[local]'" in message and "ollama serve" in message


async def test_a_model_file_on_this_disk_goes_to_the_embedded_engine_unprobed(
    nothing_running: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A running llama-server would answer for its own model under any name: a name that is a file on this disk
    (ollama:, lmstudio:, hf:, a .gguf path) starts the embedded engine, which says the file is not there."""
    llama = llama_server()
    monkeypatch.setenv("CORTANA_LLAMACPP_URL", llama.start())
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path))
    try:
        with pytest.raises(ModelNotFound, match="Ollama's store has no ollama:absent:latest"):
            await create_model_client(model="ollama:absent")
        with pytest.raises(ModelNotFound, match="No GGUF file at"):
            await create_model_client(model=str(tmp_path / "absent.gguf"))
        assert not [request for request in llama.requests if request.path == "/props"], "llama.cpp was never asked"
        for name in ("qwen2.5:0.5b", "someone/model:tag", "ai/qwen2.5"):
            client = await create_model_client(model=name)
            assert isinstance(client, LlamaCppClient), f"{name}: any other name is still the running engine's"
            await client.aclose()
    finally:
        llama.stop()
