"""OpenTelemetry spans of runs, model calls and tool calls, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from cortana import Agent, Instrumentation, RunContext, instrument, tool, uninstrument
from cortana.agent.extensions import TurnExtension
from cortana.errors import ModelError
from cortana.messages import ThreadRef
from cortana.models.base import ModelRequest, ModelSettings
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


async def test_content_on_with_a_typed_answer_puts_the_value_on_the_run_span(spans) -> None:  # type: ignore[no-untyped-def]
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        country: str

    provider, exporter = spans
    model = ScriptedModel(['{"name": "Paris", "country": "France"}'])
    agent = Agent(model, output_type=City, instrument=Instrumentation(include_content=True, tracer_provider=provider))
    city = (await agent.run("Which city is the Eiffel Tower in?")).output
    assert city == City(name="Paris", country="France")
    run = next(span for span in exporter.get_finished_spans() if span.name.startswith("invoke_agent"))
    answer = json.loads(str((run.attributes or {})["gen_ai.output.messages"]))
    assert answer == [{"role": "assistant", "content": '{"name":"Paris","country":"France"}'}]


async def test_a_subagent_run_from_a_tool_is_one_trace_and_each_step_is_the_current_span(spans) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry import trace

    provider, exporter = spans
    current: dict[str, str] = {}

    def name_of_current_span() -> str:
        return getattr(trace.get_current_span(), "name", "")

    @tool
    async def delegate(question: str, ctx: RunContext) -> str:
        """Ask a helper.

        Args:
            question: what to ask.
        """
        current["tool"] = name_of_current_span()
        assert ctx.agent is not None
        helper = ctx.agent.subagent("helper", instructions="Answer briefly.", tools=[])
        return (await helper.run(question)).output

    @tool
    def clock() -> str:
        """The time."""
        current["clock"] = name_of_current_span()
        return "noon"

    def engine_sees(answer: str, key: str):  # type: ignore[no-untyped-def]
        def step(request: ModelRequest) -> str:
            current[key] = name_of_current_span()  # what an instrumented HTTP client would nest under
            return answer

        return step

    model = ScriptedModel(
        [
            tool_call_response(tool_call("delegate", question="Capital of France?"), tool_call("clock")),
            engine_sees("Paris.", "helper's engine"),
            engine_sees("Paris, at noon.", "engine"),
        ]
    )

    class Recall(TurnExtension):
        async def context(self, thread: ThreadRef, prompt: str) -> str | None:
            current["extension"] = name_of_current_span()  # memory and extensions work inside the run's span
            return None

    agent = Agent(
        model, name="main", tools=[delegate, clock], extensions=[Recall()],
        instrument=Instrumentation(tracer_provider=provider),
    )  # fmt: skip
    outside = []
    async for _ in agent.run_stream("Capital of France, and the time?"):
        outside.append(name_of_current_span())
    finished = exporter.get_finished_spans()
    assert len({span.context.trace_id for span in finished}) == 1, [span.name for span in finished]
    by_name = {span.name: span for span in finished}
    helper, tool_span = by_name["invoke_agent helper"], by_name["execute_tool delegate"]
    assert helper.parent is not None and helper.parent.span_id == tool_span.context.span_id
    assert current == {
        "extension": "invoke_agent main",
        "tool": "execute_tool delegate",
        "clock": "execute_tool clock",  # the two calls ran in parallel, each under its own span
        "helper's engine": "chat scripted",
        "engine": "chat scripted",
    }
    helper_chat = next(s for s in finished if s.name == "chat scripted" and s.parent == helper.context)
    assert helper_chat.context.trace_id == by_name["invoke_agent main"].context.trace_id
    assert set(outside) == {""}, "between events the caller's own context is current, not the run's spans"


async def test_the_typed_answers_call_is_a_chat_span_of_the_same_run(spans) -> None:  # type: ignore[no-untyped-def]
    from pydantic import BaseModel

    class Answer(BaseModel):
        city: str

    provider, exporter = spans
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Paris")), "Sunny.", '{"city": "Paris"}'])
    agent = Agent(model, tools=[get_weather], output_type=Answer, instrument=Instrumentation(tracer_provider=provider))
    assert (await agent.run("Weather in Paris?")).output == Answer(city="Paris")
    finished = exporter.get_finished_spans()
    run = next(span for span in finished if span.name == "invoke_agent agent")
    chats = [span for span in finished if span.name == "chat scripted"]
    assert len(chats) == 3 and all(span.parent == run.context for span in chats)
    assert [(span.attributes or {}).get("gen_ai.output.type") for span in chats] == [None, None, "json"]
    assert (run.attributes or {})["cortana.output_calls"] == 1


async def test_a_refused_call_says_who_refused_it(spans) -> None:  # type: ignore[no-untyped-def]
    from cortana import PermissionGate

    provider, exporter = spans
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Paris")), "I may not look."])
    gate = PermissionGate(rules={"get_weather": "deny"})
    await Agent(model, tools=[get_weather], permissions=gate, instrument=Instrumentation(tracer_provider=provider)).run(
        "Weather in Paris?"
    )
    refused = next(span for span in exporter.get_finished_spans() if span.name == "execute_tool get_weather")
    assert refused.status.status_code == StatusCode.ERROR
    assert (refused.attributes or {})["cortana.tool.refusal"] == "policy"
