"""The run's frozen config, the narrow handle tools get, and the one seam for a turn (memory, extensions, scope)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from cortana import (
    Agent,
    Experience,
    InMemoryHistory,
    ModelSettings,
    RunConfig,
    RunContext,
    RunResult,
    ThreadRef,
    Tool,
    ToolGroup,
    TurnExtension,
    TurnScope,
    UserError,
    current_turn,
    tool,
)
from cortana.agent.extensions import MemoryTurn
from cortana.models.base import ModelRequest
from cortana.sandbox.policy import Sandbox
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response
from cortana.tools.hooks import CommandHooks

T = ThreadRef(resource_id="me", thread_id="t")


def test_the_agent_keeps_its_policies_in_a_frozen_config_that_a_setting_replaces() -> None:
    agent = Agent(ScriptedModel([]), name="dev", max_tool_iterations=3, tool_timeouts={"run_*": 5})
    before = agent.config
    assert isinstance(before, RunConfig) and before.name == "dev" and before.max_tool_iterations == 3
    with pytest.raises(AttributeError):
        before.max_tool_iterations = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        before.tool_timeouts["run_*"] = 9  # type: ignore[index]
    agent.settings = ModelSettings(temperature=0.2)
    assert agent.config is not before and agent.config.settings == ModelSettings(temperature=0.2)
    assert before.settings is None  # a snapshot a run holds does not change


def test_every_agent_argument_lands_in_the_config_field_of_its_name() -> None:
    from cortana import PermissionGate
    from cortana.agent.judge import ToolJudge

    async def grant(iterations: int) -> bool:
        return False

    given: dict[str, object] = {
        "name": "n",
        "instructions": "i",
        "max_tool_iterations": 7,
        "on_max_iterations": grant,
        "parallel_tool_calls": False,
        "max_parallel_tools": 3,
        "context_window": 4096,
        "compaction_threshold": 0.5,
        "permissions": PermissionGate(),
        "settings": ModelSettings(seed=2),
        "logger": None,
        "nudge_repeated_calls": False,
        "retry_failed_calls": True,
        "tool_guidance": "guide",
        "tool_timeout": 9.0,
        "tool_timeouts": {"x*": 2.0},
        "max_tool_output": 5_000,
        "check_grounding": False,
        "instrument": False,
        "output_type": list[int],
        "output_retries": 1,
        "tool_judge": ToolJudge(),
        "tool_hooks": CommandHooks(Path("."), {}, Sandbox(Path("."), enabled=False)),
    }
    assert set(given) == set(RunConfig._fields)
    from cortana.agent.agent import _AgentOptions

    assert set(RunConfig._fields) - {"output_type"} <= set(_AgentOptions.__annotations__), "each one typed"
    config = Agent(ScriptedModel([]), **given).config  # type: ignore[arg-type]
    assert {field: getattr(config, field) for field in RunConfig._fields} == given


def test_a_limit_set_out_of_range_is_refused_with_its_name() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(UserError, match="max_tool_iterations must be at least 1, got 0"):
        agent.max_tool_iterations = 0
    assert agent.max_tool_iterations == 10
    with pytest.raises(UserError, match="context_window must be at least 256 tokens"):
        Agent(context_window=100)


async def test_a_run_in_flight_keeps_the_config_it_started_with() -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    model = ScriptedModel([tool_call_response(tool_call("wait_here")), "done"])

    @tool
    async def wait_here() -> str:
        """Wait until the test lets go."""
        started.set()
        await release.wait()
        return "waited"

    agent = Agent(model, tools=[wait_here], instructions="first")
    run = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(started.wait(), timeout=5)
    agent.instructions = "second"
    agent.settings = ModelSettings(temperature=0.9)
    release.set()
    await asyncio.wait_for(run, timeout=5)
    assert [r.messages[0].content for r in model.requests] == ["first", "first"]
    assert all(r.settings.temperature is None for r in model.requests)


async def test_a_tool_sees_a_narrow_handle_not_the_agent() -> None:
    seen: list[RunContext] = []

    def whoami(ctx: RunContext) -> str:
        """Say which agent runs this."""
        seen.append(ctx)
        return "ok"

    agent = Agent(ScriptedModel([tool_call_response(tool_call("whoami")), "done"]), name="dev", tools=[whoami])
    await agent.run("who?", thread=T)
    [ctx] = seen
    assert ctx.agent is not None and not isinstance(ctx.agent, Agent)
    assert ctx.agent.name == "dev" and ctx.agent.tool_names == ("whoami",)
    assert ctx.thread == T and ctx.metrics.tool_calls == 1
    assert not hasattr(ctx.agent, "memory") and not hasattr(ctx.agent, "extensions")


def test_a_subagent_from_the_handle_gets_the_parents_engine_gate_and_limits_and_only_its_tools() -> None:
    @tool(read_only=True)
    def look() -> str:
        """Look."""
        return "seen"

    @tool
    def write() -> str:
        """Write."""
        return "written"

    from cortana import PermissionGate

    model = ScriptedModel([])
    gate = PermissionGate(default="ask", rules={"write": "deny"})
    parent = Agent(model, tools=[look, write], permissions=gate, max_tool_iterations=4, settings=ModelSettings(seed=1))
    handle = parent.handle()
    assert handle.tool_names == ("look",)  # the gate refuses write outright: it is not handed on
    child = handle.subagent("agent/sub1", instructions="help", tools=None)
    assert isinstance(child, Agent)
    assert child.model is model and child.permissions is gate and child.max_tool_iterations == 4
    assert [t.name for t in child.tools] == ["look"] and child.settings == ModelSettings(seed=1)
    from cortana.errors import ToolError

    with pytest.raises(ToolError, match="refuses write"):
        handle.subagent("agent/sub2", instructions="", tools=["write"])
    with pytest.raises(ToolError, match="No such tools to give: fly"):
        handle.subagent("agent/sub3", instructions="", tools=["fly"])


class Scoped(TurnExtension):
    """Records the turn scope each method runs in."""

    name = "scoped"

    def __init__(self) -> None:
        self.scopes: dict[str, TurnScope] = {}

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        self.scopes["context"] = current_turn()
        return None

    def turn_settings(self, thread: ThreadRef, settings: ModelSettings) -> ModelSettings:
        self.scopes["turn_settings"] = current_turn()
        return settings

    async def after_turn(self, result: RunResult) -> None:
        self.scopes["after_turn"] = current_turn()


async def test_an_extension_learns_its_turns_engine_and_thread_from_the_scope_without_binding() -> None:
    first, second = ScriptedModel(["one"]), ScriptedModel(["two"])
    shared = Scoped()
    a, b = Agent(first, name="a", extensions=[shared]), Agent(second, name="b", extensions=[shared])
    await a.run("hi", thread=T)
    await a.background.wait()
    assert {s.engine for s in shared.scopes.values()} == {first}
    assert {s.thread for s in shared.scopes.values()} == {T}
    await b.run("hi", thread="other")
    await b.background.wait()
    assert {s.engine for s in shared.scopes.values()} == {second}
    assert shared.scopes["after_turn"].agent is not None and shared.scopes["after_turn"].agent.name == "b"
    assert not shared.scopes["after_turn"].busy()  # the turn is over when its after_turn runs
    with pytest.raises(RuntimeError, match="current_turn"):
        current_turn()  # outside an extension's method: a clear error, not a stale turn


class FailingMemory(InMemoryHistory):
    """History works; long-term context raises."""

    async def retrieve_context(self, thread: ThreadRef, prompt: str) -> str | None:
        raise OSError("the recall index is locked")

    def tools(self, thread: ThreadRef) -> Sequence[Tool]:
        @tool(read_only=True)
        def remember(fact: str) -> str:
            """Remember a fact."""
            return "remembered"

        return [remember]


async def test_memorys_context_and_tools_join_through_the_turn_seam_first(caplog: pytest.LogCaptureFixture) -> None:
    class Block(TurnExtension):
        name = "block"

        async def context(self, thread: ThreadRef, prompt: str) -> str | None:
            return "From the block."

    class Remembering(InMemoryHistory):
        async def retrieve_context(self, thread: ThreadRef, prompt: str) -> str | None:
            return "The user likes tea."

    model = ScriptedModel(["ok"])
    await Agent(model, memory=Remembering(), extensions=[Block()]).run("Tea?", thread=T)
    sent = model.requests[0].messages[-1].content
    assert sent.index("The user likes tea.") < sent.index("From the block.") < sent.index("Tea?")

    model = ScriptedModel(["still answered"])
    memory = FailingMemory()
    with caplog.at_level(logging.ERROR, logger="cortana.extensions"):
        result = await Agent(model, memory=memory).run("Tea?", thread=T)
    assert result.output == "still answered"
    assert "memory" in caplog.text and "the recall index is locked" in caplog.text
    assert [spec.name for spec in model.requests[0].tools] == ["remember"]
    assert [m.content for m in await memory.load_history(T)][-2:] == ["Tea?", "still answered"]
    assert MemoryTurn(memory).name == "memory"


async def test_one_experience_serves_two_agents_and_distills_on_the_engine_of_the_run(tmp_path: object) -> None:
    from pathlib import Path

    from tests.unit.test_experience import RECIPE_REPLY, BagOfWords, grep_files, read_file, three_calls

    folder = Path(str(tmp_path))
    experience = Experience(folder / "experience.db", embedder=BagOfWords(), workspace=folder, threshold=0.5)
    try:
        idle = ScriptedModel(["fine"])
        worker = ScriptedModel([*three_calls(), ScriptedResponse(text=RECIPE_REPLY)])
        chat = Agent(idle, experience=experience)
        work = Agent(worker, tools=[grep_files, read_file], experience=experience)
        assert chat.extensions == (experience,) and work.extensions == (experience,)
        await chat.run("hello")
        await work.run("What is PAYMENT_TERMS and which modules use it?")
        await work.background.wait()
        await chat.background.wait()
        assert len(await experience.recipes()) == 1
        distilling = [r for r in worker.requests if not r.tools]
        assert len(distilling) == 1 and isinstance(distilling[0], ModelRequest)
        assert idle.remaining == 0 and len(idle.requests) == 1  # the other agent's engine was not used
    finally:
        experience.close()


def test_knowledge_graph_and_experience_are_plain_entries_in_order() -> None:
    class Named(TurnExtension):
        def __init__(self, name: str) -> None:
            self.name = name

        def tools(self, thread: ThreadRef) -> Sequence[Tool | ToolGroup]:
            return ()

    graph, middle, experience = Named("graph"), Named("middle"), Named("experience")
    agent = Agent(ScriptedModel([]), extensions=[middle], knowledge_graph=graph, experience=experience)
    assert [e.name for e in agent.extensions] == ["graph", "middle", "experience"]
    caller_order = Agent(ScriptedModel([]), extensions=[experience, middle, graph])
    assert [e.name for e in caller_order.extensions] == ["experience", "middle", "graph"]


def test_an_agent_takes_its_options_as_one_config_and_keywords_still_work() -> None:
    """``Agent(model, config=RunConfig(...))``: options built once and shared; a keyword beside it changes it for
    that agent only; a misspelt keyword is a TypeError that names it, as before."""
    from cortana import Agent
    from cortana.agent.run_config import RunConfig
    from cortana.testing import ScriptedModel

    shared = RunConfig(name="reviewer", instructions="Be brief.", max_tool_iterations=4)
    one = Agent(ScriptedModel([]), config=shared)
    other = Agent(ScriptedModel([]), config=shared, max_tool_iterations=2)
    assert one.config is shared and (one.name, one.max_tool_iterations) == ("reviewer", 4)
    assert (other.name, other.instructions, other.max_tool_iterations) == ("reviewer", "Be brief.", 2)
    assert shared.max_tool_iterations == 4, "the shared config is not changed"
    plain = Agent(ScriptedModel([]), name="plain", tool_timeouts=None)
    assert (plain.name, dict(plain.tool_timeouts)) == ("plain", {})
    with pytest.raises(TypeError, match="nmae"):
        Agent(ScriptedModel([]), nmae="typo")  # type: ignore[call-overload]
