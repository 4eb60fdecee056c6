"""The run loop: parallel tools, ordering, validation retries, limits, permissions, streaming."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from pathlib import Path
from typing import Literal

import pytest

from cortana import (
    Agent,
    EngineUnavailable,
    InMemoryHistory,
    MaxToolIterationsError,
    Message,
    ModelError,
    PermissionDecision,
    PermissionGate,
    RunFinished,
    TextDelta,
    ThreadRef,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolError,
    ToolGroup,
    Usage,
    tool,
)
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response


class Recorder:
    """Tools that record when they start and end, to observe concurrency."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}
        self.running = 0
        self.max_running = 0

    def make(self):  # type: ignore[no-untyped-def]
        async def nap(label: str, seconds: float = 0.2) -> str:
            """Sleep, then say which call this was."""
            start = time.perf_counter()
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            try:
                await asyncio.sleep(seconds)
            finally:
                self.running -= 1
            self.spans[label] = (start, time.perf_counter())
            return f"done {label}"

        return nap


def naps(*labels: str, seconds: float = 0.2) -> ScriptedResponse:
    return tool_call_response(*(tool_call("nap", label=label, seconds=seconds) for label in labels))


def tool_results(result_messages: list[Message]) -> list[str]:
    return [m.content for m in result_messages if m.role == "tool"]


def overlap(spans: list[tuple[float, float]]) -> bool:
    """Whether every span was running at one same moment (the latest start comes before the earliest end)."""
    return max(start for start, _ in spans) < min(end for _, end in spans)


async def test_four_calls_run_in_parallel_and_results_keep_request_order() -> None:
    recorder = Recorder()
    model = ScriptedModel([naps("a", "b", "c", "d"), "all done"])
    agent = Agent(model, tools=[recorder.make()])
    result = await agent.run("nap four times")
    assert overlap(list(recorder.spans.values())), f"the four naps did not all run at once: {recorder.spans}"
    assert recorder.max_running == 4
    assert tool_results(result.new_messages) == ["done a", "done b", "done c", "done d"]
    assert result.output == "all done"
    assert result.metrics.tool_calls == 4 and result.metrics.model_calls == 2


async def test_results_keep_request_order_when_later_calls_finish_first() -> None:
    recorder = Recorder()
    calls = [tool_call("nap", label=str(i), seconds=0.05 * (4 - i)) for i in range(4)]
    model = ScriptedModel([tool_call_response(*calls), "ok"])
    result = await Agent(model, tools=[recorder.make()]).run("go")
    finish_order = sorted(recorder.spans, key=lambda label: recorder.spans[label][1])
    assert finish_order == ["3", "2", "1", "0"]
    tool_messages = [m for m in result.new_messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == [c.id for c in calls]
    # the next request carries the results in request order too
    assert [m.content for m in model.requests[1].messages if m.role == "tool"] == [f"done {i}" for i in range(4)]


async def test_sync_tools_also_run_in_parallel() -> None:
    spans: dict[str, tuple[float, float]] = {}

    @tool
    def block(label: str) -> str:
        """A blocking tool."""
        start = time.perf_counter()
        time.sleep(0.2)
        spans[label] = (start, time.perf_counter())
        return label

    model = ScriptedModel([tool_call_response(*(tool_call("block", label=x) for x in "abcd")), "ok"])
    result = await Agent(model, tools=[block]).run("go")
    assert overlap(list(spans.values())), f"the four blocking calls did not all run at once: {spans}"
    assert tool_results(result.new_messages) == ["a", "b", "c", "d"]


async def test_parallel_tool_calls_false_runs_one_at_a_time_in_order() -> None:
    recorder = Recorder()
    model = ScriptedModel([naps("a", "b", "c", "d", seconds=0.05), "ok"])
    await Agent(model, tools=[recorder.make()], parallel_tool_calls=False).run("go")
    assert recorder.max_running == 1
    spans = [recorder.spans[label] for label in "abcd"]
    for (_, end), (next_start, _) in itertools.pairwise(spans):
        assert next_start >= end


async def test_fifth_and_sixth_calls_wait_for_a_free_slot() -> None:
    recorder = Recorder()
    model = ScriptedModel([naps("1", "2", "3", "4", "5", "6"), "ok"])
    agent = Agent(model, tools=[recorder.make()], max_parallel_tools=4)
    result = await agent.run("six naps")
    assert recorder.max_running == 4
    first_free = min(recorder.spans[label][1] for label in "1234")
    for label in "56":
        assert recorder.spans[label][0] >= first_free, f"call {label} started before a slot was free"
    assert overlap([recorder.spans["5"], recorder.spans["6"]]), "the two waiting calls ran together, in one wave"
    assert tool_results(result.new_messages) == [f"done {i}" for i in "123456"]


async def test_invalid_arguments_go_back_to_the_model_and_the_corrected_call_succeeds() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = ScriptedModel(
        [
            tool_call_response(tool_call("add", a="two", b=3)),
            tool_call_response(tool_call("add", a=2, b=3)),
            "2 + 3 = 5",
        ]
    )
    result = await Agent(model, tools=[add]).run("add 2 and 3")
    first, second = [m for m in result.new_messages if m.role == "tool"]
    assert first.is_error and "Invalid arguments for tool 'add'" in first.content and "- a:" in first.content
    assert model.requests[1].messages[-1] == first, "the model must receive the validation error"
    assert not second.is_error and second.content == "5"
    assert result.output == "2 + 3 = 5"
    assert result.metrics.tool_errors == 1 and result.metrics.tool_calls == 2


async def test_arguments_that_did_not_parse_become_a_tool_error() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    broken = ToolCall(id="c1", name="echo", raw_arguments='{"text": "hi"')
    model = ScriptedModel([tool_call_response(broken), "sorry", tool_call_response(tool_call("echo", text="hi")), "hi"])
    result = await Agent(model, tools=[echo], retry_failed_calls=True).run("echo")
    error = result.new_messages[2]
    assert error.is_error and "not a valid JSON object" in error.content and '{"text": "hi"' in error.content
    assert result.output == "hi", "the model that gave up at its malformed call was asked to correct it, and did"


async def test_max_tool_iterations_raises_with_the_messages_so_far() -> None:
    recorder = Recorder()
    model = ScriptedModel([naps(str(i), seconds=0) for i in range(4)])
    agent = Agent(model, tools=[recorder.make()], max_tool_iterations=3)
    with pytest.raises(MaxToolIterationsError) as info:
        await agent.run("loop forever")
    error = info.value
    assert error.iterations == 3
    assert "max_tool_iterations=3" in str(error) and "on_max_iterations" in str(error)
    assert len(recorder.spans) == 3, "the 4th round must not run"
    assert error.messages[0].content == "loop forever"
    assert error.messages[-1].role == "tool" and error.messages[-1].is_error, "every call keeps a result"
    assert error.metrics is not None and error.metrics.model_calls == 4


async def test_on_max_iterations_can_grant_more() -> None:
    recorder = Recorder()
    model = ScriptedModel([*(naps(str(i), seconds=0) for i in range(5)), "finished"])
    asked: list[int] = []

    async def grant(iterations: int) -> bool:
        asked.append(iterations)
        return True

    agent = Agent(model, tools=[recorder.make()], max_tool_iterations=3, on_max_iterations=grant)
    result = await agent.run("keep going")
    assert result.output == "finished"
    assert asked == [3]
    assert len(recorder.spans) == 5


async def test_refusing_on_max_iterations_raises() -> None:
    model = ScriptedModel([naps(str(i), seconds=0) for i in range(3)])

    async def refuse(iterations: int) -> bool:
        return False

    agent = Agent(model, tools=[Recorder().make()], max_tool_iterations=2, on_max_iterations=refuse)
    with pytest.raises(MaxToolIterationsError):
        await agent.run("x")


def script() -> list[ScriptedResponse | str]:
    return [
        ScriptedResponse(text="Let me check.", tool_calls=[tool_call("nap", label="x", seconds=0)], thinking="hmm"),
        naps("y", "z", seconds=0),
        "The answer is 42.",
    ]


async def test_run_and_run_stream_produce_equal_histories() -> None:
    steps = script()
    agent_a = Agent(ScriptedModel(steps), tools=[Recorder().make()])
    agent_b = Agent(ScriptedModel(steps), tools=[Recorder().make()])
    ran = await agent_a.run("question", thread="t")
    events = [event async for event in agent_b.run_stream("question", thread="t")]
    streamed = events[-1]
    assert isinstance(streamed, RunFinished)
    assert streamed.result.new_messages == ran.new_messages
    assert streamed.result.output == ran.output == "The answer is 42."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me check.The answer is 42."
    started = [e.call.id for e in events if isinstance(e, ToolCallStarted)]
    finished = [e.call.id for e in events if isinstance(e, ToolCallFinished)]
    assert sorted(started) == sorted(finished) and len(started) == 3
    assert ran.new_messages[1].thinking == "hmm"


async def test_a_denied_call_is_reported_to_the_model_and_does_not_run() -> None:
    deleted: list[str] = []

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return "deleted"

    @tool(read_only=True)
    def read_file(path: str) -> str:
        """Read a file."""
        return "contents"

    def no_deleting(call: ToolCall, t, ctx):  # type: ignore[no-untyped-def]
        if call.name == "delete_file":
            return PermissionDecision.deny("deleting is not allowed in this workspace")
        return None

    model = ScriptedModel(
        [tool_call_response(tool_call("delete_file", path="a.txt"), tool_call("read_file", path="a.txt")), "ok"]
    )
    result = await Agent(model, tools=[delete_file, read_file], permissions=PermissionGate(check=no_deleting)).run("x")
    denied, read = [m for m in result.new_messages if m.role == "tool"]
    assert deleted == []
    assert denied.is_error and "Permission denied for 'delete_file'" in denied.content
    assert "deleting is not allowed in this workspace" in denied.content
    assert read.content == "contents"
    assert model.requests[1].messages[-2] == denied


async def test_ask_goes_to_the_approver_and_can_be_remembered() -> None:
    ran: list[str] = []

    @tool
    def write(text: str) -> str:
        """Write."""
        ran.append(text)
        return "written"

    asked: list[str] = []

    def approve(call, t, reason):  # type: ignore[no-untyped-def]
        asked.append(call.arguments["text"])
        return PermissionDecision.allow(remember=True)

    gate = PermissionGate(rules={"write": "ask"}, approve=approve)
    model = ScriptedModel(
        [tool_call_response(tool_call("write", text="1")), tool_call_response(tool_call("write", text="2")), "ok"]
    )
    await Agent(model, tools=[write], permissions=gate).run("x")
    assert ran == ["1", "2"]
    assert asked == ["1"], "an approval for the session is asked once"


async def test_ask_without_an_approver_denies_with_the_reason() -> None:
    @tool
    def write(text: str) -> str:
        """Write."""
        raise AssertionError("must not run")

    model = ScriptedModel([tool_call_response(tool_call("write", text="1")), "ok"])
    result = await Agent(model, tools=[write], permissions=PermissionGate(default="ask")).run("x")
    assert "needs approval and no one can approve it here" in result.new_messages[2].content


async def test_a_tool_that_raises_becomes_an_error_result() -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    @tool
    def refuse() -> str:
        """Fails on purpose."""
        raise ToolError("the file is locked; try again later")

    model = ScriptedModel([tool_call_response(tool_call("explode"), tool_call("refuse")), "sorry"])
    result = await Agent(model, tools=[explode, refuse]).run("x")
    boom, locked = result.new_messages[2:4]
    assert boom.is_error and "RuntimeError: disk on fire" in boom.content
    assert locked.is_error and locked.content == "Error: the file is locked; try again later"
    assert result.metrics.tool_errors == 2
    assert result.output == "sorry"


async def test_unknown_tool_lists_the_available_ones_and_loose_names_match() -> None:
    @tool(name="fs.read")
    def read(path: str) -> str:
        """Read."""
        return "text"

    model = ScriptedModel([tool_call_response(tool_call("browse", url="x"), tool_call("fs_read", path="a")), "ok"])
    result = await Agent(model, tools=[read]).run("x")
    unknown, loose = result.new_messages[2:4]
    assert unknown.is_error and unknown.content == "Unknown tool 'browse'. Available tools: fs.read."
    assert loose.content == "text"


async def test_tool_groups_load_on_demand() -> None:
    @tool
    def forecast(city: str) -> str:
        """Forecast for a city."""
        return f"sun in {city}"

    group = ToolGroup("weather", "Weather forecasts", [forecast])
    model = ScriptedModel(
        [
            tool_call_response(tool_call("load_tools", group="weather")),
            tool_call_response(tool_call("forecast", city="Rome")),
            "Sunny.",
        ]
    )
    result = await Agent(model, tools=[group]).run("weather in Rome?")
    first_tools = [spec.name for spec in model.requests[0].tools]
    assert first_tools == ["load_tools"]
    assert "'weather': Weather forecasts" in model.requests[0].tools[0].description
    assert model.requests[0].tools[0].parameters["properties"]["group"]["enum"] == ["weather"]
    assert [spec.name for spec in model.requests[1].tools] == ["load_tools", "forecast"]
    assert "forecast (Forecast for a city.)" in result.new_messages[2].content
    assert result.new_messages[4].content == "sun in Rome"


async def test_usage_and_metrics_add_up() -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[tool_call("nap", label="a", seconds=0)],
                usage=Usage(prompt_tokens=100, completion_tokens=10, cached_tokens=0),
            ),
            ScriptedResponse(text="done", usage=Usage(prompt_tokens=130, completion_tokens=5, cached_tokens=100)),
        ]
    )
    result = await Agent(model, tools=[Recorder().make()]).run("x")
    m = result.metrics
    assert (m.model_calls, m.tool_calls, m.tool_errors) == (2, 1, 0)
    assert (m.prompt_tokens, m.completion_tokens, m.cached_prompt_tokens) == (230, 15, 100)
    assert m.elapsed >= m.model_time + m.tool_time > 0


async def test_system_prompt_history_and_context_layout() -> None:
    model = ScriptedModel(["first", "second"])
    memory = InMemoryHistory()
    agent = Agent(model, instructions="You are terse.", memory=memory)
    thread = ThreadRef(resource_id="me", thread_id="t1")
    await agent.run("hello", thread=thread)
    await agent.run("again", thread=thread, context="Local time: 10:00")
    sent = model.requests[1].messages
    assert [(m.role, m.content) for m in sent] == [
        ("system", "You are terse."),
        ("user", "hello"),
        ("assistant", "first"),
        ("user", "<context>\nLocal time: 10:00\n</context>\n\nagain"),
    ]
    # the stored turn is exactly what was sent, so the next prompt starts with this one
    assert memory.threads[thread][-2].content == "<context>\nLocal time: 10:00\n</context>\n\nagain"


async def test_the_user_message_is_saved_when_the_engine_fails() -> None:
    memory = InMemoryHistory()
    model = ScriptedModel([ScriptedResponse(text="partial answ", error=ModelError("engine died"))])
    agent = Agent(model, memory=memory)
    with pytest.raises(ModelError, match="engine died"):
        await agent.run("do not lose me", thread="t")
    assert [m.content for m in memory.threads[ThreadRef(thread_id="t")]] == ["do not lose me"]


async def test_history_limit_never_splits_a_tool_call_from_its_results() -> None:
    memory = InMemoryHistory(last_messages=3)
    model = ScriptedModel([naps("a", "b", seconds=0), "done", "next"])
    agent = Agent(model, tools=[Recorder().make()], memory=memory)
    await agent.run("one", thread="t")
    await agent.run("two", thread="t")
    sent = model.requests[2].messages
    # stored: user, assistant(calls), tool, tool, assistant; the last 3 would start with a tool result
    assert [m.role for m in sent] == ["assistant", "user"]


async def test_scripted_model_says_when_the_script_runs_out() -> None:
    with pytest.raises(ModelError, match="1 scripted answers and got request #2"):
        await Agent(ScriptedModel([naps("a", seconds=0)]), tools=[Recorder().make()]).run("x")


async def test_agent_without_model_uses_the_configured_engine_and_says_when_it_is_not_running(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CORTANA_ENGINE", "llamacpp")
    monkeypatch.setenv("CORTANA_BASE_URL", closed)
    with pytest.raises(EngineUnavailable, match=r"llama-server -m MODEL\.gguf") as info:
        await Agent().run("hi")
    assert closed in str(info.value), "the error names the configured address"


async def test_closing_the_stream_early_cancels_running_tools() -> None:
    recorder = Recorder()
    agent = Agent(ScriptedModel([naps("a", "b", seconds=5), "never"]), tools=[recorder.make()])
    stream = agent.run_stream("x")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            break
    assert recorder.running >= 1
    await stream.aclose()
    await asyncio.sleep(0.05)
    assert recorder.running == 0, "closing the stream must cancel the tools still running"
    assert recorder.spans == {}, "no 5 s nap may have finished"


async def test_tool_guidance_joins_the_system_prompt_only_when_asked_and_there_are_tools() -> None:
    from cortana.prompts import prompt_text

    model = ScriptedModel(["a", "b", "c", "d"])
    await Agent(model, instructions="Be brief.", tool_guidance=True).run("x")
    await Agent(model, instructions="Be brief.", tools=[Recorder().make()], tool_guidance=True).run("x")
    await Agent(model, instructions="Be brief.", tools=[Recorder().make()]).run("x")
    await Agent(model, tools=[Recorder().make()], tool_guidance="Use tools sparingly.").run("x")
    systems = [request.messages[0].content for request in model.requests]
    assert systems[0] == "Be brief.", "no tools, no guidance"
    assert systems[1] == "Be brief.\n\n" + prompt_text("tool_guidance")
    assert "Only call a tool when" in systems[1]
    assert systems[2] == "Be brief.", "off by default"
    assert systems[3] == "Use tools sparingly."


async def test_a_repeated_call_is_not_run_again_and_the_question_is_restated() -> None:
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return "sent"

    call = tool_call("send_email", to="ann@example.com")
    again = tool_call("send_email", to="ann@example.com")
    model = ScriptedModel([tool_call_response(call), tool_call_response(again), "Email sent to Ann."])
    result = await Agent(model, tools=[send_email]).run("Email Ann")
    assert ran == ["ann@example.com"], "a repeat must not send the email twice"
    nudge = result.new_messages[3]
    assert (nudge.role, nudge.name) == ("user", "cortana")
    assert nudge.content.startswith('The user asked: "Email Ann"')
    assert model.requests[2].messages[-1] == nudge
    assert result.output == "Email sent to Ann."
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool", "user", "assistant"]


async def test_a_model_that_repeats_after_the_nudge_is_asked_to_answer_without_tools() -> None:
    ran: list[str] = []

    @tool
    def status() -> str:
        """Build status."""
        ran.append("x")
        return "running"

    model = ScriptedModel([tool_call_response(tool_call("status")) for _ in range(3)] + ["The build is running."])
    result = await Agent(model, tools=[status]).run("is the build done?")
    assert ran == ["x"]
    assert [len(request.tools) for request in model.requests] == [1, 1, 1, 0]
    assert result.output == "The build is running."


def text_call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=f"t_{name}", name=name, arguments=arguments, from_text=True)


async def test_an_ungrounded_text_call_is_not_run_and_the_model_answers_without_tools() -> None:
    asked: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        asked.append(city)
        return "sunny"

    model = ScriptedModel(
        [tool_call_response(text_call("get_weather", city="Tokyo")), "Tokyo is the capital of Japan."]
    )
    result = await Agent(model, tools=[get_weather]).run("What is the capital of Japan?")
    assert asked == []
    assert model.requests[1].tools == [], "the second request withholds the tools"
    assert result.output == "Tokyo is the capital of Japan."
    assert [m.role for m in result.new_messages] == ["user", "assistant"]


async def test_grounded_text_calls_and_structured_calls_run() -> None:
    asked: list[str] = []

    @tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
        """Weather for a city."""
        asked.append(city)
        return "sunny"

    model = ScriptedModel(
        [
            tool_call_response(text_call("get_weather", city="Paris", unit="fahrenheit")),
            tool_call_response(tool_call("get_weather", city="Lyon")),  # structured: not checked
            "Sunny in both.",
        ]
    )
    await Agent(model, tools=[get_weather]).run("Weather in paris?")
    assert asked == ["Paris", "Lyon"]
    off = ScriptedModel([tool_call_response(text_call("get_weather", city="Tokyo")), "ok"])
    await Agent(off, tools=[get_weather], check_grounding=False).run("What is the capital of Japan?")
    assert asked[-1] == "Tokyo"


async def test_calls_a_guided_answer_adds_run_only_when_every_argument_checks_out() -> None:
    paid: list[tuple[str, float]] = []

    @tool
    def pay(to: str, amount: float) -> str:
        """Pay someone."""
        paid.append((to, amount))
        return "paid"

    first = tool_call("pay", to="Maria", amount=20)
    copied = tool_call("pay", to="Jonas", amount=35).model_copy(update={"extra": True})
    invented = tool_call("pay", to="Jonas", amount=500).model_copy(update={"extra": True})
    model = ScriptedModel([tool_call_response(first, copied, invented), "Paid both."])
    await Agent(model, tools=[pay]).run("Pay Maria 20 and Jonas 35.")
    assert paid == [("Maria", 20), ("Jonas", 35)], "the added call with an amount from nowhere is dropped"


async def test_an_added_call_handing_the_same_input_to_another_tool_is_dropped() -> None:
    ran: list[str] = []

    @tool
    def median(values: list[float]) -> str:
        """The median of some numbers."""
        ran.append("median")
        return "6.0"

    @tool
    def standard_deviation(values: list[float]) -> str:
        """The standard deviation of some numbers."""
        ran.append("standard_deviation")
        return "2.9"

    first = tool_call("median", values=[3, 9, 1, 7])
    sprayed = tool_call("standard_deviation", values=[3, 9, 1, 7]).model_copy(update={"extra": True})
    model = ScriptedModel([tool_call_response(first, sprayed), "The median is 6."])
    await Agent(model, tools=[median, standard_deviation]).run("What's the median of 3, 9, 1, 7?")
    assert ran == ["median"], "the deviation was never asked for: it only reuses the first call's input"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tool_iterations": 0}, "max_tool_iterations must be at least 1"),
        ({"max_parallel_tools": 0}, "max_parallel_tools must be at least 1"),
        ({"max_tool_output": 10}, "max_tool_output must be at least 1,000"),
        ({"compaction_threshold": 2.0}, "compaction_threshold must be between 0.1 and 1"),
        ({"tool_timeout": float("inf")}, "tool_timeout must be a positive number"),
        ({"context_window": 10}, "context_window must be at least 256"),
    ],
)
def test_a_limit_out_of_range_is_refused_naming_it(options: dict[str, object], message: str) -> None:
    from cortana import UserError

    with pytest.raises(UserError, match=message):
        Agent(ScriptedModel([]), **options)  # type: ignore[arg-type]


# -- empty answers ------------------------------------------------------------------------------------


async def test_an_empty_answer_is_asked_for_once_more() -> None:
    model = ScriptedModel(["", "Paris."])
    memory = InMemoryHistory()
    thread = ThreadRef(thread_id="empty")
    result = await Agent(model, memory=memory).run("Capital of France?", thread=thread)
    assert result.output == "Paris."
    again = model.requests[1].messages[-1]
    assert again.role == "user" and again.name == "cortana" and "Your last reply gave them no answer" in again.content
    assert [m.role for m in await memory.load_history(thread)] == ["user", "assistant", "user", "assistant"]


async def test_an_answer_that_stays_empty_shows_a_note_with_what_the_tools_did() -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return "x = 1"

    model = ScriptedModel(
        [
            tool_call_response(tool_call("read_file", path="a.py"), tool_call("read_file", path="b.py")),
            ScriptedResponse(text="", thinking="hmm"),
            "  ",
        ]
    )
    events = [event async for event in Agent(model, tools=[read_file]).run_stream("Fix the bug.")]
    result = events[-1].result  # type: ignore[attr-defined]
    note = "(The model gave no answer. This turn ran 2 tool call(s): read_file ×2.)"
    assert result.output == note
    assert TextDelta(note) in events, "the note is streamed, so the terminal shows it"
    assert len(model.requests) == 3


async def test_a_reply_that_replays_the_text_of_its_call_is_no_answer() -> None:
    """Seen on the 1.5B: its call's narration written again after the results, and nothing else."""

    @tool
    def grep_files(pattern: str) -> str:
        """Search the files."""
        return "netclient/config.py:3:MAX_RETRIES = 4"

    narration = "To answer this, I'll use the `grep_files` function. Here's the JSON response:"
    model = ScriptedModel(
        [
            tool_call_response(tool_call("grep_files", pattern="retries"), text=narration),
            narration.replace(" Here", "\nHere") + "\n",  # the same words, other whitespace
            "fetch retries 4 times by default (MAX_RETRIES).",
        ]
    )
    result = await Agent(model, tools=[grep_files]).run("How many times does fetch retry?")
    assert result.output == "fetch retries 4 times by default (MAX_RETRIES)."
    assert "Your last reply gave them no answer" in model.requests[2].messages[-1].content

    stuck = ScriptedModel(
        [tool_call_response(tool_call("grep_files", pattern="retries"), text=narration)] + [narration] * 2
    )
    stuck_result = await Agent(stuck, tools=[grep_files]).run("How many times does fetch retry?")
    assert stuck_result.output == "(The model gave no answer. This turn ran 1 tool call(s): grep_files.)"


async def test_an_answer_that_repeats_words_of_a_reply_without_a_call_is_kept() -> None:
    model = ScriptedModel(["Paris.", "Paris."])
    assert (await Agent(model).run("Capital of France?")).output == "Paris."
    assert len(model.requests) == 1


async def test_an_empty_answer_without_tools_says_so() -> None:
    result = await Agent(ScriptedModel(["", ""])).run("Hello?")
    assert result.output == "(The model gave no answer. Try rephrasing the question.)"


async def test_a_call_written_as_text_when_tools_are_withheld_is_not_shown_as_the_answer() -> None:
    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return "sunny"

    call_text = '{"name": "get_weather", "arguments": {"city": "Tokyo"}}'
    model = ScriptedModel([tool_call_response(text_call("get_weather", city="Tokyo")), call_text, "Tokyo."])
    result = await Agent(model, tools=[get_weather]).run("What is the capital of Japan?")
    assert result.output == "Tokyo."
    assert "Your last reply gave them no answer" in model.requests[2].messages[-1].content


async def test_a_call_of_a_missing_tool_repeated_is_a_repeat_not_a_loop() -> None:
    """The 0.5B model "called" play_cello five times, each time told there is no such tool."""

    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return "sunny"

    invented = tool_call("play_cello", content="I play the cello.")
    model = ScriptedModel([tool_call_response(invented), tool_call_response(invented), "Lovely, the cello!"])
    result = await Agent(model, tools=[get_weather], max_tool_iterations=4).run("I play the cello.")
    assert result.output == "Lovely, the cello!"
    nudge = model.requests[2].messages[-1]
    assert nudge.name == "cortana" and nudge.content.startswith('The user asked: "I play the cello."')


# -- a failed call, then prose ------------------------------------------------------------------------


def _editor() -> tuple[list[str], object]:
    edits: list[str] = []

    @tool
    def edit(old_text: str) -> str:
        """Replace text in the file."""
        if old_text != "return a - b":
            raise ToolError("old_text was not found; the file says: return a - b")
        edits.append(old_text)
        return "Edited."

    return edits, edit


async def test_prose_right_after_a_failed_call_is_asked_once_to_correct_the_call() -> None:
    edits, edit = _editor()
    model = ScriptedModel(
        [
            tool_call_response(tool_call("edit", old_text="return a-b")),
            "To fix it, copy the exact text into edit.",  # the give-up the 1.5B model wrote
            tool_call_response(tool_call("edit", old_text="return a - b")),
            "Fixed add().",
        ]
    )
    result = await Agent(model, tools=[edit], retry_failed_calls=True).run("add() subtracts. Fix it.")
    assert edits == ["return a - b"] and result.output == "Fixed add()."
    retry = model.requests[2].messages[-1]
    assert retry.role == "user" and retry.name == "cortana"
    assert (
        "Your edit call failed: Error: old_text was not found" in retry.content and "add() subtracts" in retry.content
    )


async def test_the_retry_is_asked_once_and_not_for_calls_the_user_refused() -> None:
    _, edit = _editor()
    model = ScriptedModel(
        [
            tool_call_response(tool_call("edit", old_text="x")),
            "I could not.",
            tool_call_response(tool_call("edit", old_text="y")),
            "Still no.",
        ]
    )
    result = await Agent(model, tools=[edit], retry_failed_calls=True).run("Fix it.")
    assert result.output == "Still no." and len(model.requests) == 4, "asked once, then the answer stands"

    refused = ScriptedModel(
        [tool_call_response(tool_call("edit", old_text="return a - b")), "You said no, so I stopped."]
    )
    gate = PermissionGate(default="ask")  # no approver: refused
    result = await Agent(refused, tools=[edit], permissions=gate, retry_failed_calls=True).run("Fix it.")
    assert result.output == "You said no, so I stopped." and len(refused.requests) == 2

    off = ScriptedModel([tool_call_response(tool_call("edit", old_text="x")), "I could not."])
    result = await Agent(off, tools=[edit]).run("Fix it.")
    assert result.output == "I could not." and len(off.requests) == 2, "off by default"


def test_run_sync_runs_without_a_loop_and_inside_one_says_what_to_use() -> None:
    from cortana import UserError

    model = ScriptedModel(["Hello."])
    agent = Agent(model)
    assert agent.run_sync("hi").output == "Hello."

    async def in_a_notebook() -> None:
        with pytest.raises(UserError, match=r"use `await agent\.run\('hi there'\)` there instead"):
            agent.run_sync("hi there")

    asyncio.run(in_a_notebook())
    assert len(model.requests) == 1, "nothing ran inside the loop"


async def test_a_call_of_a_tool_nobody_offered_is_never_started_and_a_groups_tool_loads_its_group() -> None:
    """Issue 63: a call to a name that is no offered tool is the model saying the tool it needs is missing: no
    call event, no tool run; the model is told which tools exist and answers with none offered. A tool of a group
    not loaded yet is not unknown: its group loads and it runs."""
    from cortana.agent.events import ToolCallFinished, ToolCallStarted

    @tool
    def forecast(city: str) -> str:
        """Forecast for a city."""
        return f"sun in {city}"

    group = ToolGroup("weather", "Weather forecasts", [forecast])
    model = ScriptedModel([tool_call_response(tool_call("find_roots", a=1, b=-4, c=4)), "x = 2 (no tool needed)."])
    agent = Agent(model, tools=[group])
    async with agent.run_stream("Solve x^2 - 4x + 4 = 0.") as stream:
        events = [event async for event in stream]
        result = stream.result
    assert not any(isinstance(event, ToolCallStarted | ToolCallFinished) for event in events)
    assert result.output == "x = 2 (no tool needed)." and result.metrics.unknown_tool_calls == 1
    assert model.requests[1].tools == [], "asked again with no tools"
    told = model.requests[1].messages[-1].content
    assert "There is no tool named 'find_roots'" in told and "load_tools" in told
    model = ScriptedModel([tool_call_response(tool_call("forecast", city="Rome")), "Sunny."])
    loaded = await Agent(model, tools=[group]).run("weather in Rome?")
    assert loaded.new_messages[2].content == "sun in Rome" and loaded.metrics.unknown_tool_calls == 0


async def test_a_message_longer_than_the_window_is_cut_by_the_run_for_every_caller(tmp_path: Path) -> None:
    """The run fits the user's message (not a front end): a library caller's run says so first with ``PromptCut``,
    the engine and memory get the head and tail, and a message that fits is sent as it was."""
    from cortana.agent.events import ModelCallStarted, PromptCut
    from cortana.memory.sqlite import SQLiteMemory

    model = ScriptedModel(["A log.", "Short."], context_window=2048)
    agent = Agent(model, memory=SQLiteMemory(tmp_path / "m.db"))
    thread = ThreadRef(thread_id="t", resource_id="me")
    long = "what is this? " + "log line " * 5_000
    async with agent.run_stream(long, thread=thread) as stream:
        events = [event async for event in stream]
    cut = [event for event in events if isinstance(event, PromptCut)]
    assert len(cut) == 1 and "more than the model's window takes" in cut[0].note
    assert events.index(cut[0]) < next(i for i, event in enumerate(events) if isinstance(event, ModelCallStarted))
    sent = model.requests[0].messages[-1].content
    assert "characters left out" in sent and sent.startswith("what is this?") and len(sent) < len(long) // 4
    stored = await agent.memory.load_history(thread)  # type: ignore[union-attr]
    assert stored[0].content == sent
    result = await agent.run("a short one", thread=thread)
    assert result.output == "Short." and model.requests[1].messages[-1].content.endswith("a short one")
