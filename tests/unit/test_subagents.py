"""SubagentManager with scripted models: spawn, wait, follow-up, cancel, depth, permissions, metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cortana import Agent, PermissionDecision, PermissionGate, tool
from cortana.agent.subagents import SubagentManager
from cortana.errors import ToolError
from cortana.messages import Usage
from cortana.models.base import ModelClient, ModelEvent, ModelRequest
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response


class Router(ModelClient):
    """One engine for parent and subagents: the parent is the one offered spawn_subagent at depth 0."""

    def __init__(self, parent: ScriptedModel, child: ScriptedModel) -> None:
        self.model = "router"
        self.parent, self.child = parent, child

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        is_parent = request.messages and request.messages[0].content == "You are the lead."
        return (self.parent if is_parent else self.child).stream(request)


@tool(read_only=True)
def read_notes(topic: str) -> str:
    """Read the notes on a topic."""
    return f"notes on {topic}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return "deleted"


def lead(router: Router, manager: SubagentManager, **options: object) -> Agent:
    return Agent(router, instructions="You are the lead.", tools=[read_notes, delete_file, *manager.tools()], **options)  # type: ignore[arg-type]


def results(run_messages: list) -> list[str]:  # type: ignore[type-arg]
    return [m.content for m in run_messages if m.role == "tool"]


async def test_spawn_wait_follow_up_and_metrics() -> None:
    manager = SubagentManager()
    parent = ScriptedModel(
        [
            tool_call_response(tool_call("spawn_subagent", task="Summarize the notes on rust", tools=["read_notes"])),
            tool_call_response(tool_call("wait_subagents", ids=["sub1"])),
            tool_call_response(tool_call("follow_up_subagent", id="sub1", message="And in one word?")),
            tool_call_response(tool_call("wait_subagents")),
            "Done.",
        ]
    )
    child = ScriptedModel(
        [
            tool_call_response(tool_call("read_notes", topic="rust")),
            ScriptedResponse(text="Rust is memory-safe.", usage=Usage(prompt_tokens=50, completion_tokens=5)),
            ScriptedResponse(text="Safe.", usage=Usage(prompt_tokens=70, completion_tokens=2)),
        ]
    )
    result = await lead(Router(parent, child), manager).run("Research rust")
    assert results(result.new_messages) == [
        "Started subagent sub1. Call wait_subagents to get its result.",
        "sub1 (done): Rust is memory-safe.",
        "Sent to sub1; it is running. Call wait_subagents to get its answer.",
        "sub1 (done): Safe.",
    ]
    assert [spec.name for spec in child.requests[0].tools] == ["read_notes"], "only the tools it was given"
    assert child.requests[0].messages[-1].content == "Summarize the notes on rust"
    follow_up = child.requests[2].messages
    assert [m.content for m in follow_up[-2:]] == ["Rust is memory-safe.", "And in one word?"], "it keeps its history"
    assert result.metrics.subagent_spawns == 1
    assert (result.metrics.subagent_prompt_tokens, result.metrics.subagent_completion_tokens) >= (120, 7)
    assert manager.metrics.model_calls == 3
    assert "sub1 · done · depth 1" in manager.listing()


async def test_cancel_stops_a_running_subagent() -> None:
    manager = SubagentManager()
    parent = ScriptedModel(
        [
            tool_call_response(tool_call("spawn_subagent", task="Think for a long time")),
            tool_call_response(tool_call("cancel_subagent", id="sub1")),
            tool_call_response(tool_call("wait_subagents", ids=["sub1"])),
            "Stopped it.",
        ]
    )
    child = ScriptedModel([ScriptedResponse(text="never", delay=30)])
    started = asyncio.get_running_loop().time()
    result = await lead(Router(parent, child), manager).run("go")
    assert asyncio.get_running_loop().time() - started < 5
    assert results(result.new_messages)[1:] == ["sub1 is cancelled.", "sub1 (cancelled)"]


async def test_depth_limit() -> None:
    flat = SubagentManager(max_depth=1)
    parent = ScriptedModel(
        [
            tool_call_response(tool_call("spawn_subagent", task="t")),
            tool_call_response(tool_call("wait_subagents")),
            "ok",
        ]
    )
    child = ScriptedModel(["child done"])
    await lead(Router(parent, child), flat).run("go")
    assert "spawn_subagent" not in [spec.name for spec in child.requests[0].tools]

    deep = SubagentManager(max_depth=2)
    parent = ScriptedModel(
        [
            tool_call_response(tool_call("spawn_subagent", task="t")),
            tool_call_response(tool_call("wait_subagents")),
            "ok",
        ]
    )
    child = ScriptedModel(
        [
            tool_call_response(tool_call("spawn_subagent", task="deeper")),
            tool_call_response(tool_call("wait_subagents")),
            "mid done",
            "leaf done",
        ]
    )
    await lead(Router(parent, child), deep).run("go")
    assert "spawn_subagent" in [spec.name for spec in child.requests[0].tools]
    leaf = deep.subagents["sub2"]
    assert isinstance(leaf.agent, Agent) and leaf.agent is not None
    assert leaf.depth == 2 and "spawn_subagent" not in [t.name for t in leaf.agent.tools]
    with pytest.raises(ToolError, match="max_depth=2"):
        from cortana.messages import RunMetrics, ThreadRef
        from cortana.tools import RunContext

        await deep.spawn(
            RunContext(thread=ThreadRef(), metrics=RunMetrics(), messages=[], agent=leaf.agent.handle()), "too deep"
        )


async def test_subagents_inherit_the_permission_gate() -> None:
    asked: list[str] = []

    def approve(call, t, reason):  # type: ignore[no-untyped-def]
        asked.append(call.name)
        return PermissionDecision.allow()

    gate = PermissionGate(rules={"delete_*": "deny", "read_*": "ask"}, approve=approve)
    manager = SubagentManager()
    parent = ScriptedModel(
        [
            tool_call_response(tool_call("spawn_subagent", task="clean up", tools=["delete_file"])),
            tool_call_response(tool_call("spawn_subagent", task="read up")),
            tool_call_response(tool_call("wait_subagents")),
            "ok",
        ]
    )
    child = ScriptedModel([tool_call_response(tool_call("read_notes", topic="x")), "read"])
    gated = lead(Router(parent, child), manager, permissions=gate)
    gate.rules.update({"spawn_subagent": "allow", "wait_subagents": "allow"})
    result = await gated.run("go")
    refused, started = results(result.new_messages)[:2]
    assert "The permission policy refuses delete_file" in refused
    assert started.startswith("Started subagent")
    assert [spec.name for spec in child.requests[0].tools] == ["read_notes"], "a refused tool is never given"
    assert asked == ["read_notes"], "the subagent's call went to the parent's approver"


async def test_concurrency_limit_across_subagents() -> None:
    running, peak = 0, 0

    async def slow(request: ModelRequest) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(0.1)
        finally:
            running -= 1
        return "done"

    manager = SubagentManager(max_concurrent=2)
    parent = ScriptedModel(
        [
            tool_call_response(*(tool_call("spawn_subagent", task=f"job {i}") for i in range(4))),
            tool_call_response(tool_call("wait_subagents")),
            "all done",
        ]
    )
    result = await lead(Router(parent, ScriptedModel([slow] * 4)), manager).run("go")
    assert peak == 2
    assert results(result.new_messages)[-1].count("(done): done") == 4
    assert result.metrics.subagent_spawns == 4


async def test_unknown_ids_and_tools_are_tool_errors() -> None:
    manager = SubagentManager()
    parent = ScriptedModel(
        [
            tool_call_response(
                tool_call("wait_subagents", ids=["sub9"]), tool_call("spawn_subagent", task="t", tools=["fly"])
            ),
            "ok",
        ]
    )
    result = await lead(Router(parent, ScriptedModel([])), manager).run("go")
    missing, bad_tool = [m for m in result.new_messages if m.role == "tool"]
    assert missing.is_error and "No subagent 'sub9'. Known: none." in missing.content
    assert bad_tool.is_error and "No such tools to give: fly" in bad_tool.content


async def test_a_subagent_waiting_for_all_does_not_wait_for_itself() -> None:
    manager = SubagentManager(max_depth=2)
    parent = ScriptedModel(
        [
            tool_call_response(tool_call("spawn_subagent", task="t")),
            tool_call_response(tool_call("wait_subagents")),
            "ok",
        ]
    )
    child = ScriptedModel([tool_call_response(tool_call("wait_subagents")), "nothing to wait for"])
    started = asyncio.get_running_loop().time()
    result = await lead(Router(parent, child), manager).run("go")
    assert asyncio.get_running_loop().time() - started < 5
    assert results(result.new_messages)[-1] == "sub1 (done): nothing to wait for"


async def test_delegate_runs_a_read_only_helper_and_returns_its_report_with_progress() -> None:
    from cortana.agent.events import ToolCallProgress

    manager = SubagentManager()
    asked = tool_call_response(tool_call("delegate", task="What do the notes on rust say?"))
    parent = ScriptedModel([asked, "Rust is fast, says a helper."])
    child = ScriptedModel([tool_call_response(tool_call("read_notes", topic="rust")), "The notes say: notes on rust."])
    agent = Agent(Router(parent, child), instructions="You are the lead.",
                  tools=[read_notes, delete_file, manager.delegate_tool()])  # fmt: skip
    async with agent.run_stream("Ask a helper about rust.") as stream:
        events = [event async for event in stream]
        result = stream.result
    [report] = results(result.new_messages)
    assert report == "The helper's report (1 tool call):\nThe notes say: notes on rust."
    progress = [event.text for event in events if isinstance(event, ToolCallProgress)]
    assert progress == ["helper helper1 started: What do the notes on rust say?", 'helper: read_notes(topic="rust")']
    offered = {spec.name for spec in child.requests[0].tools}
    assert offered == {"read_notes"}, "only read-only tools: no delete_file, no delegate"
    assert child.requests[0].messages[0].content.startswith("You are a helper"), "its own, fresh context"
    assert result.metrics.subagent_spawns == 1 and result.output == "Rust is fast, says a helper."


async def test_a_helpers_long_report_is_bounded_and_a_failed_helper_is_a_tool_error() -> None:
    manager = SubagentManager()
    parent = ScriptedModel([tool_call_response(tool_call("delegate", task="Read everything.")), "ok"])
    child = ScriptedModel(["x" * 5000])
    agent = Agent(Router(parent, child), instructions="You are the lead.", tools=[read_notes, manager.delegate_tool()])
    result = await agent.run("go")
    [report] = results(result.new_messages)
    assert len(report) < 2_200 and "3,000 more characters left out" in report
    lonely = Agent(ScriptedModel([tool_call_response(tool_call("delegate", task="x")), "ok"]),
                   tools=[delete_file, manager.delegate_tool()])  # fmt: skip
    [refused] = results((await lonely.run("go")).new_messages)
    assert "no read-only tools to give a helper" in refused


def test_cortana_delegates_to_a_helper_whose_report_reaches_the_model(tmp_path: Path, scripted_engine: Any) -> None:
    """Through the real ``cortana -p`` and a loopback llama.cpp wire server: the model calls ``delegate`` (its
    group loads on the call), the helper reads notes.txt with read-only tools and reports, the model answers."""
    import json
    import os
    import subprocess
    import sys

    from tests.integration.test_cli_terminal import text_reply, tool_reply

    home, project = tmp_path / "home", tmp_path / "home" / "project"
    project.mkdir(parents=True)
    (project / "cortana.yml").write_text(
        "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
        "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n  tool_judge: false\n"
    )
    (project / "notes.txt").write_text("The launch is on Friday.\n")
    task = json.dumps({"task": "What does notes.txt say about the launch?"})
    scripted_engine.routes[("POST", "/v1/chat/completions")] = [
        tool_reply("delegate", task),
        tool_reply("read_file", '{"path": "notes.txt"}'),
        text_reply(["The notes say ", "the launch is on Friday (notes.txt:1)."]),
        text_reply(["The launch is on Friday."]),
    ]
    ran = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url,
         "-p", "--output-format", "stream-json", "When is the launch? Ask a helper."],
        cwd=project, env={"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    lines = [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]
    progress = [line["item"]["progress"] for line in lines if line["type"] == "item.updated"]
    assert progress[-1] == 'helper: read_file(path="notes.txt")', progress
    bodies = scripted_engine.bodies("/v1/chat/completions")
    parent_first, helper_first, _, parent_last = bodies
    helper_tools = {tool["function"]["name"] for tool in helper_first["tools"]}
    assert helper_tools == {"read_file", "list_files", "grep_files"}, "read-only tools only"
    assert "When is the launch" not in json.dumps(helper_first["messages"]), "the helper has its own context"
    report = next(m for m in parent_last["messages"] if m["role"] == "tool")["content"]
    assert "the launch is on Friday (notes.txt:1)" in report
    assert "The launch is on Friday." in ran.stdout
    assert "delegate" not in {tool["function"]["name"] for tool in parent_first.get("tools", [])}, "on demand"
