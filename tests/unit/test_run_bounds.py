"""Every run ends: each model call counts against a bound the run cannot escape, whatever the engine sends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana import Agent, MaxToolIterationsError, tool
from cortana.agent import run as run_module
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from tests.wire import Reply, WireServer


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Get the weather in a city."""
    return f"Sunny in {city}."


async def test_an_engine_that_calls_tools_it_was_not_offered_ends_with_a_note() -> None:
    """The loop withholds tools after repeats; an engine that answers with the same call anyway used to loop forever
    (no round of tool calls is spent on a reply whose calls cannot run)."""
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Paris"))] * 50)
    result = await Agent(model, tools=[get_weather], max_tool_iterations=3).run("Weather in Paris?")
    assert result.output.startswith("(The model gave no answer.")
    assert result.metrics.model_calls == 5, "the call, a repeat (nudge), a repeat (tools withheld), asked again, note"
    assert [spec.name for spec in model.requests[-1].tools] == []
    assert all(not m.tool_calls for m in result.new_messages[-3:]), "no call without its result is stored"


async def test_no_path_makes_more_model_calls_than_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_module, "EXTRA_MODEL_CALLS", 0)
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Paris")), "Sunny."])
    with pytest.raises(MaxToolIterationsError, match=r"made 1 model calls without an answer \(at most 1") as info:
        await Agent(model, tools=[get_weather], max_tool_iterations=1).run("Weather in Paris?")
    assert info.value.metrics is not None and info.value.metrics.model_calls == 1
    assert [m.role for m in info.value.messages] == ["user", "assistant", "tool"], "the run's messages, whole"
    assert model.remaining == 1


async def test_granted_rounds_raise_the_bound_with_them() -> None:
    grants = 0

    async def grant(iterations: int) -> bool:
        nonlocal grants
        grants += 1
        return grants <= 2

    calls = [tool_call_response(tool_call("get_weather", city=f"city {i}")) for i in range(20)]
    model = ScriptedModel([*calls, "Done."])
    with pytest.raises(MaxToolIterationsError, match="after 6 tool iterations"):
        await Agent(model, tools=[get_weather], max_tool_iterations=2, on_max_iterations=grant).run("Go.")
    assert len(model.requests) == 7, "2 + 2 + 2 granted rounds, then the reply that would have needed more"


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


def chunk(delta: dict[str, object], finish: str | None = None) -> str:
    """One streamed chunk of the OpenAI chat API."""
    data = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1764650000,
        "model": "local-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return "data: " + json.dumps(data)


def always_list_files() -> Reply:
    """A streamed answer that is a call of list_files, every time: an engine that ignores the empty tool list."""
    call = {"index": 0, "id": "call-1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    lines = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [call]}),
        chunk({}, finish="tool_calls"),
        "data: [DONE]",
    ]
    return Reply(lines=lines, content_type="text/event-stream", line_end="\n\n")


def test_the_command_ends_when_the_engine_answers_every_request_with_a_tool_call(
    wire: WireServer, tmp_path: Path
) -> None:
    """Reported: 5,156 model calls in 25 s through the CLI, max_tool_iterations never applying."""
    wire.add(
        "GET", "/v1/models", Reply.json({"object": "list", "data": [{"id": "local-model", "max_model_len": 8192}]})
    )
    wire.add("POST", "/v1/chat/completions", always_list_files())
    url = wire.start()
    (tmp_path / "notes.txt").write_text("hello\n")
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "CORTANA_API_KEY": "sk-local"}
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "openai", "--base-url", url, "--yes", "hello there"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path, env=env,
    )  # fmt: skip
    chats = wire.bodies("/v1/chat/completions")
    assert len(chats) == 5, f"{len(chats)} model calls: the call, a nudge, tools withheld, asked again, the note"
    assert "The model gave no answer" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
