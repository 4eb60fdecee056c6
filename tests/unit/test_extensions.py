"""Turn extensions: context blocks in a fixed order, tools, background after_turn, failures skipped."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import pytest

from cortana import Agent, InMemoryHistory, RunResult, ThreadRef, Tool, ToolGroup, TurnExtension, tool
from cortana.agent import extensions
from cortana.testing import ScriptedModel, tool_call, tool_call_response

T = ThreadRef(resource_id="me", thread_id="t")


class Clock(TurnExtension):
    """A context block that changes every turn, like the companion's local time."""

    name = "clock"

    def __init__(self) -> None:
        self.turn = 0

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        self.turn += 1
        return f"Local time: 10:0{self.turn}"


class Lookup(TurnExtension):
    """Context that depends on the prompt, one tool, and a record of finished turns."""

    name = "lookup"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.finished: list[RunResult] = []
        self.span: tuple[float, float] | None = None

        @tool(read_only=True)
        def find_symbol(symbol: str) -> str:
            """Where a symbol is defined."""
            return f"{symbol} is defined in agent.py:42"

        self.tool = find_symbol

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        start = time.perf_counter()
        await asyncio.sleep(self.delay)
        self.span = (start, time.perf_counter())
        return "Graph: Agent.run_stream (agent.py:120)" if "run_stream" in prompt else None

    def tools(self, thread: ThreadRef) -> Sequence[Tool | ToolGroup]:
        return [self.tool]

    async def after_turn(self, result: RunResult) -> None:
        await asyncio.sleep(0.05)
        self.finished.append(result)


class Broken(TurnExtension):
    name = "broken"

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        raise RuntimeError("index is corrupt")

    def tools(self, thread: ThreadRef) -> Sequence[Tool | ToolGroup]:
        raise RuntimeError("no tools today")

    async def after_turn(self, result: RunResult) -> None:
        raise RuntimeError("rebuild failed")


async def test_context_blocks_go_in_order_into_the_user_message_and_the_prefix_stays_the_same() -> None:
    model = ScriptedModel(["first", "second"])
    memory = InMemoryHistory()
    agent = Agent(model, instructions="Be brief.", memory=memory, extensions=[Lookup(), Clock()])
    await agent.run("hello", thread=T)
    await agent.run("What calls run_stream?", thread=T, context="Caller's note")
    first, second = model.requests
    assert second.messages[-1].content == (
        "<context>\nGraph: Agent.run_stream (agent.py:120)\n\nLocal time: 10:02\n\nCaller's note\n</context>\n\n"
        "What calls run_stream?"
    ), "extensions in the order given, the caller's context last"
    assert second.messages[: len(first.messages)] == first.messages, "the second prompt starts with the first one"
    assert first.tools == second.tools and second.messages[0].content == "Be brief."
    assert first.messages[-1].content == "<context>\nLocal time: 10:01\n</context>\n\nhello"
    await agent.aclose()


async def test_extension_tools_are_offered_after_the_agents_own() -> None:
    @tool
    def own(x: str) -> str:
        """The agent's own tool."""
        return x

    lookup = Lookup()
    model = ScriptedModel([tool_call_response(tool_call("find_symbol", symbol="Agent")), "It is in agent.py."])
    result = await Agent(model, tools=[own], extensions=[lookup]).run("Where is Agent?")
    assert [spec.name for spec in model.requests[0].tools] == ["own", "find_symbol"]
    assert result.new_messages[2].content == "Agent is defined in agent.py:42"


async def test_an_extension_tool_cannot_replace_one_of_the_agents() -> None:
    @tool(name="find_symbol")
    def mine(symbol: str) -> str:
        """The agent's own find_symbol."""
        return "mine"

    model = ScriptedModel([tool_call_response(tool_call("find_symbol", symbol="Agent")), "ok"])
    result = await Agent(model, tools=[mine], extensions=[Lookup()]).run("x")
    assert [spec.name for spec in model.requests[0].tools] == ["find_symbol"]
    assert result.new_messages[2].content == "mine"


async def test_after_turn_runs_in_the_background_and_aclose_waits_for_it() -> None:
    lookup = Lookup()
    agent = Agent(ScriptedModel(["done"]), extensions=[lookup])
    result = await agent.run("hi")
    assert lookup.finished == [], "the reply does not wait for after_turn"
    assert agent.background.pending == 1
    await agent.aclose()
    assert lookup.finished == [result] and agent.background.pending == 0


async def test_a_failing_extension_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    lookup = Lookup()
    model = ScriptedModel(["still answered"])
    agent = Agent(model, extensions=[Broken(), lookup])
    with caplog.at_level(logging.WARNING, logger="cortana.extensions"):
        result = await agent.run("What calls run_stream?")
        await agent.aclose()
    assert result.output == "still answered"
    assert model.requests[0].messages[-1].content.startswith("<context>\nGraph: Agent.run_stream")
    assert [spec.name for spec in model.requests[0].tools] == ["find_symbol"], "the broken one's tools are skipped"
    assert lookup.finished == [result], "the other extension's after_turn still runs"
    logged = [record.getMessage() for record in caplog.records]
    assert any("'broken' failed to give its context" in line for line in logged)
    assert any("'broken' failed to give its tools" in line for line in logged)
    assert any("broken.after_turn failed" in line for line in logged)


async def test_a_slow_extension_is_skipped_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extensions, "CONTEXT_TIMEOUT_S", 0.05)
    model = ScriptedModel(["ok"])
    await Agent(model, extensions=[Lookup(delay=5), Clock()]).run("What calls run_stream?")
    sent = model.requests[0].messages[-1].content
    assert sent == "<context>\nLocal time: 10:01\n</context>\n\nWhat calls run_stream?"


async def test_extension_contexts_are_gathered_at_once() -> None:
    model = ScriptedModel(["ok"])
    slow = [Lookup(delay=0.1) for _ in range(3)]
    await Agent(model, extensions=slow).run("run_stream?")
    assert model.requests[0].messages[-1].content.count("Graph:") == 3
    spans = [lookup.span for lookup in slow if lookup.span is not None]
    assert max(start for start, _ in spans) < min(end for _, end in spans), "the three lookups ran at once"


async def test_a_huge_context_block_is_bounded() -> None:
    class Dump(TurnExtension):
        name = "dump"

        async def context(self, thread: ThreadRef, prompt: str) -> str | None:
            return "x" * 1_000_000

    model = ScriptedModel(["ok"])
    await Agent(model, extensions=[Dump()]).run("hi")
    sent = model.requests[0].messages[-1].content
    assert len(sent) < extensions.MAX_CONTEXT_CHARS + 200 and "characters left out" in sent


async def test_a_turn_may_run_with_other_extensions_and_without_being_remembered() -> None:
    lookup = Lookup()
    memory = InMemoryHistory()
    model = ScriptedModel(["First.", "Checked.", "Second."])
    agent = Agent(model, memory=memory, extensions=[lookup])
    await agent.run("about run_stream", thread=T)
    stored = len(await memory.load_history(T))
    # a check-in: the history is read, only the given extensions join, nothing is stored
    result = await agent.run("about run_stream again", thread=T, remember=False, extensions=[Clock()])
    sent = model.requests[1]
    assert "about run_stream" in sent.messages[0].content and sent.messages[1].content == "First."
    assert "Local time: 10:01" in sent.messages[-1].content and "Graph:" not in sent.messages[-1].content
    assert [t.name for t in sent.tools] == []  # the agent's extension tools are not offered either
    assert len(await memory.load_history(T)) == stored and result.output == "Checked."
    await agent.aclose()
    assert len(lookup.finished) == 1, "after_turn ran for the first turn only"
    await agent.run("third", thread=T)
    assert len(await memory.load_history(T)) == stored + 2
    assert [t.name for t in model.requests[2].tools] == ["find_symbol"]
