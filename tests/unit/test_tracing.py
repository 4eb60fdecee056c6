"""OpenTelemetry spans of runs, model calls and tool calls, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from cortana import Agent, Instrumentation, instrument, tool, uninstrument
from cortana.errors import ModelError
from cortana.models.base import ModelSettings
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"Sunny in {city}."


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    uninstrument()


async def test_a_run_its_model_calls_and_tool_calls_are_spans_by_the_genai_conventions(spans) -> None:  # type: ignore[no-untyped-def]
    provider, exporter = spans
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Paris")), "It is sunny in Paris."])
    agent = Agent(
        model, name="weather", tools=[get_weather], settings=ModelSettings(temperature=0.3, seed=7),
        instrument=Instrumentation(tracer_provider=provider),
    )  # fmt: skip
    result = await agent.run("Weather in Paris?", thread="t-1")
    finished = {span.name: span for span in exporter.get_finished_spans()}
    assert sorted(finished) == ["chat scripted", "execute_tool get_weather", "invoke_agent weather"]
    assert len(exporter.get_finished_spans()) == 4, "two model calls, one tool call, one run"
    run = finished["invoke_agent weather"]
    assert run.attributes is not None and run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "weather" and run.attributes["gen_ai.conversation.id"] == "t-1"
    assert run.attributes["gen_ai.usage.input_tokens"] == result.metrics.prompt_tokens > 0
    chats = [span for span in exporter.get_finished_spans() if span.name == "chat scripted"]
    assert all(span.parent is not None and span.parent.span_id == run.context.span_id for span in chats)
    chat = chats[0].attributes or {}
    assert chats[0].kind == SpanKind.CLIENT and chat["gen_ai.operation.name"] == "chat"
    assert (chat["gen_ai.request.temperature"], chat["gen_ai.request.seed"]) == (0.3, 7)
    assert chat["gen_ai.usage.output_tokens"] > 0 and chat["gen_ai.response.finish_reasons"] == ("stop",)
    called = finished["execute_tool get_weather"]
    assert called.attributes is not None and called.attributes["gen_ai.tool.name"] == "get_weather"
    assert called.attributes["gen_ai.tool.call.id"] == model.requests[1].messages[-1].tool_call_id
    assert called.parent is not None and called.parent.span_id == run.context.span_id
    everything = json.dumps([dict(span.attributes or {}) for span in exporter.get_finished_spans()], default=str)
    assert "Paris" not in everything, "content stays off spans unless asked for"


async def test_content_on_failures_and_the_global_switch(spans) -> None:  # type: ignore[no-untyped-def]
    provider, exporter = spans
    instrument(include_content=True, tracer_provider=provider)
    model = ScriptedModel(
        [tool_call_response(tool_call("get_weather", city="Atlantis")), "I could not find it.", "Quiet."]
    )
    await Agent(model, tools=[get_weather]).run("Weather in Atlantis?")
    finished = {span.name: span for span in exporter.get_finished_spans()}
    failed = finished["execute_tool get_weather"]
    assert failed.status.status_code == StatusCode.ERROR and (failed.attributes or {})["error.type"] == "tool_error"
    assert "Atlantis" in str((failed.attributes or {})["gen_ai.tool.call.arguments"])
    assert "Atlantis" in str((finished["invoke_agent agent"].attributes or {})["gen_ai.input.messages"])
    exporter.clear()
    await Agent(model, instrument=False).run("hi")
    assert exporter.get_finished_spans() == (), "instrument=False keeps an agent out"
    uninstrument()
    await Agent(ScriptedModel(["x"])).run("hi")
    assert exporter.get_finished_spans() == ()


async def test_an_engine_failure_ends_the_open_spans_with_the_error(spans) -> None:  # type: ignore[no-untyped-def]
    provider, exporter = spans
    model = ScriptedModel([ScriptedResponse("partial", error=ModelError("the engine went away"))])
    with pytest.raises(ModelError):
        await Agent(model, instrument=Instrumentation(tracer_provider=provider)).run("hi")
    finished = {span.name: span for span in exporter.get_finished_spans()}
    for name in ("invoke_agent agent", "chat scripted"):
        assert finished[name].status.status_code == StatusCode.ERROR
        assert (finished[name].attributes or {})["error.type"] == "ModelError"


def test_the_assistant_sends_its_spans_to_a_configured_otlp_collector(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import asyncio
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from cortana import Assistant, Settings
    from cortana.trust import sensitive_sections

    received: list[tuple[str, str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    settings = Settings(
        memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False},
        tracing={"otlp_endpoint": endpoint},
    )  # fmt: skip

    async def ask() -> None:
        async with Assistant(tmp_path, settings, client=ScriptedModel(["Hello."]), heartbeat=False) as assistant:
            await assistant.ask("What is the marmalade code?")

    asyncio.run(ask())
    server.shutdown()
    assert received and received[0][0] == "/v1/traces" and received[0][1] == "application/x-protobuf"
    assert b"invoke_agent cortana" in received[0][2] and b"chat scripted" in received[0][2]
    assert b"marmalade" not in received[0][2], "no content unless tracing.content"
    assert sensitive_sections({"tracing": {"otlp_endpoint": "http://collector.example:4318"}}) == {
        "tracing.otlp_endpoint": "http://collector.example:4318"
    }
    assert sensitive_sections({"tracing": {"otlp_endpoint": endpoint}}) == {}, "loopback needs no trust"
    with pytest.raises(ValueError, match="http\\(s\\) address"):
        Settings(tracing={"otlp_endpoint": "localhost:4318"})


def test_the_guides_example_runs_as_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import re
    import subprocess
    import sys
    from pathlib import Path

    guide = (Path(__file__).parents[2] / "docs" / "tracing.md").read_text()
    example = re.search(r"```python\n(.*?)```", guide, re.S)
    assert example is not None
    (tmp_path / "example.py").write_text(example.group(1))
    done = subprocess.run([sys.executable, str(tmp_path / "example.py")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    names = re.findall(r'"name": "([^"]+)"', done.stdout)
    assert names == ["chat scripted", "execute_tool add", "chat scripted", "invoke_agent agent"]
    assert done.stdout.strip().endswith("5")
