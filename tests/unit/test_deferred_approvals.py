"""Deferred approvals (issue 65, item 1): a run pauses at calls a person must allow, and goes on from its JSON.

``run(..., defer_approvals=True)`` ends the turn ``paused`` with ``pending_approvals`` and a ``RunState``;
``resume(state, approvals)`` finishes the round (allowed calls run once, refused ones reach the model as
refusals) and goes on, in this process or another, on the same memory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cortana import Agent, PendingApproval, RunState, tool
from cortana.agent.events import RunFinished, ToolCallFinished, ToolCallStarted
from cortana.errors import UserError
from cortana.memory.base import InMemoryHistory
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import LOOP_NAME, Message, ThreadRef, ToolCall
from cortana.models.base import ModelRequest
from cortana.testing import ScriptedModel, tool_call_response
from cortana.tools import Tool
from cortana.tools.permissions import PermissionGate

ROOT = Path(__file__).resolve().parents[2]
THREAD = ThreadRef(thread_id="t1")


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    """A call with an id the test names (the scripted model's own ids count up per process)."""
    return ToolCall(id=call_id, name=name, arguments=arguments)


def said(request: ModelRequest) -> str:
    """A scripted answer that repeats the results the model was shown last: what it read of the round."""
    results: list[str] = []
    for message in reversed(request.messages):
        if message.role != "tool":
            break
        results.insert(0, f"{message.name}: {message.content}")
    return "Read: " + " | ".join(results)


class Files:
    """Two tools that count their runs: ``delete_file`` requires approval, ``list_files`` does not."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.listed = 0

    def tools(self) -> list[Tool]:
        @tool(requires_approval=True)
        def delete_file(path: str) -> str:
            """Delete a file."""
            self.deleted.append(path)
            return f"deleted {path}"

        @tool(read_only=True)
        def list_files() -> str:
            """List the files."""
            self.listed += 1
            return "a.txt b.txt"

        return [delete_file, list_files]


def stored(memory: InMemoryHistory) -> list[tuple[str, str, str | None]]:
    return [(m.role, m.content, m.tool_call_id) for m in memory.threads.get(THREAD, [])]


def as_stored(messages: list[Message]) -> list[tuple[str, str, str | None]]:
    return [(m.role, m.content, m.tool_call_id) for m in messages]


# -- a second process ----------------------------------------------------------------------------------------

SCRIPT = '''
import asyncio, json, sys
from pathlib import Path

from cortana import Agent, RunState, tool
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import ThreadRef, ToolCall
from cortana.testing import ScriptedModel, tool_call_response

folder, step = Path(sys.argv[1]), sys.argv[2]


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    with open(folder / "ran.txt", "a") as ran:
        ran.write(path + "\\n")
    return f"deleted {path}"


def said(request):
    last = request.messages[-1]
    return f"Read: {last.content}"


first = tool_call_response(ToolCall(id="call_del", name="delete_file", arguments={"path": "a.txt"}))
memory = SQLiteMemory(folder / "memory.db")
agent = Agent(ScriptedModel([first, said] if step == "pause" else [said]), name="files", tools=[delete_file],
              memory=memory)
if step == "pause":
    result = agent.run_sync("Delete a.txt", thread="t1", defer_approvals=True)
    (folder / "state.json").write_text(result.state.model_dump_json())
else:
    answer = True if sys.argv[3] == "allow" else sys.argv[3]
    state = RunState.model_validate_json((folder / "state.json").read_text())
    result = agent.resume_sync(state, {"call_del": answer})
rows = asyncio.run(memory.messages(ThreadRef(thread_id="t1")))
print(json.dumps({
    "status": result.status,
    "output": result.output,
    "pending": [p.model_dump() for p in result.pending_approvals],
    "refusals": [m.refusal for m in result.new_messages if m.role == "tool"],
    "stored": [[row.message.role, row.message.content, row.message.tool_call_id] for row in rows],
}))
'''


def in_a_process(folder: Path, *args: str) -> dict[str, Any]:
    """Run the script in a new Python process (the worktree's sources first on its path); its printed JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(folder / "script.py"), str(folder), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if done.returncode != 0:
        return {"error": done.stderr}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_paused_run_goes_on_in_a_second_process_and_the_allowed_call_runs_exactly_once(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    paused = in_a_process(tmp_path, "pause")
    assert paused["status"] == "paused", paused
    assert paused["pending"] == [
        {"call_id": "call_del", "tool": "delete_file", "arguments": {"path": "a.txt"},
         "reason": "'delete_file' requires a person's approval"}
    ]  # fmt: skip
    assert not (tmp_path / "ran.txt").exists(), "nothing runs before a person allows it"
    assert [row[0] for row in paused["stored"]] == ["user"], "the round is stored once it is whole, not before"

    done = in_a_process(tmp_path, "resume", "allow")
    assert done.get("status") == "done", done
    assert (tmp_path / "ran.txt").read_text() == "a.txt\n", "the allowed call ran, once"
    assert done["output"] == "Read: deleted a.txt"
    assert done["stored"] == [
        ["user", "Delete a.txt", None],
        ["assistant", "", None],
        ["tool", "deleted a.txt", "call_del"],
        ["assistant", "Read: deleted a.txt", None],
    ], "each message of the turn stored once, in order"

    again = in_a_process(tmp_path, "resume", "allow")
    assert "has moved on since this run paused" in again.get("error", ""), again
    assert (tmp_path / "ran.txt").read_text() == "a.txt\n", "a second resume of the same state runs nothing"


def test_a_call_refused_in_a_second_process_reaches_the_model_with_the_reason_and_never_runs(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    assert in_a_process(tmp_path, "pause")["status"] == "paused"
    done = in_a_process(tmp_path, "resume", "not on a Friday")
    assert done.get("status") == "done", done
    assert not (tmp_path / "ran.txt").exists(), "a refused call never runs"
    assert done["output"] == "Read: Permission denied for 'delete_file': the user declined: not on a Friday."
    assert done["refusals"] == ["approval"], "a refusal, typed as one"
    assert [row[0] for row in done["stored"]] == ["user", "assistant", "tool", "assistant"]


# -- in this process -----------------------------------------------------------------------------------------


async def test_a_mixed_round_runs_the_call_that_needs_no_one_before_the_pause_and_never_again() -> None:
    files, memory = Files(), InMemoryHistory()
    round_ = tool_call_response(call("c1", "list_files"), call("c2", "delete_file", path="a.txt"))
    model = ScriptedModel([round_, said])
    agent = Agent(model, tools=files.tools(), memory=memory)

    paused = await agent.run("Delete a.txt", thread=THREAD, defer_approvals=True)
    assert paused.status == "paused" and paused.state is not None
    assert [p.call_id for p in paused.pending_approvals] == ["c2"], "only the call that needs a person waits"
    assert (files.listed, files.deleted) == (1, []), "the call that needs no one ran before the pause"
    assert [m.tool_call_id for m in paused.state.results] == ["c1"]
    assert stored(memory) == as_stored(paused.new_messages[:1]), "only the user message is stored yet"

    state = RunState.model_validate_json(paused.state.model_dump_json())
    done = await Agent(model, tools=files.tools(), memory=memory).resume(state, {"c2": True})
    assert done.status == "done" and done.state is None and done.pending_approvals == []
    assert (files.listed, files.deleted) == (1, ["a.txt"]), "each call ran once"
    assert done.output == "Read: list_files: a.txt b.txt | delete_file: deleted a.txt", "results in request order"
    assert [m.role for m in done.new_messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert stored(memory) == as_stored(done.new_messages), "memory holds the turn once, as a run that never paused"
    assert done.metrics.tool_calls == 2 and done.metrics.model_calls == 2, "the metrics go on from the pause"


async def test_a_turn_that_pauses_twice_is_stored_once_in_order(tmp_path: Path) -> None:
    files = Files()
    script: list[Any] = [
        tool_call_response(call("c1", "delete_file", path="a.txt")),
        tool_call_response(call("c2", "delete_file", path="b.txt")),
        said,
    ]
    model = ScriptedModel(script)
    memory = SQLiteMemory(tmp_path / "memory.db")
    agent = Agent(model, tools=files.tools(), memory=memory)
    first = await agent.run("Delete a.txt and b.txt", thread=THREAD, defer_approvals=True)
    assert first.state is not None
    second = await agent.resume(first.state, {"c1": True})
    assert second.status == "paused" and [p.call_id for p in second.pending_approvals] == ["c2"], "paused again"
    assert second.state is not None and second.state.iterations == 2
    done = await agent.resume(second.state, {"c2": False})
    assert files.deleted == ["a.txt"]
    assert done.output == "Read: delete_file: Permission denied for 'delete_file': the user declined."
    rows = [(row.message.role, row.message.content, row.message.tool_call_id) for row in await memory.messages(THREAD)]
    assert rows == as_stored(done.new_messages)
    assert [role for role, _, _ in rows] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


async def test_a_read_made_before_the_pause_is_not_run_again_after_it() -> None:
    """The repeat guard knows the turn's rounds from before the pause: the same read again is a repeat."""
    files = Files()

    @tool(read_only=True, requires_approval=True)
    def read_secret() -> str:
        """Read the secret."""
        return "42"

    script: list[Any] = [
        tool_call_response(call("c1", "list_files")),
        tool_call_response(call("c2", "read_secret")),
        tool_call_response(call("c3", "list_files")),
        said,
    ]
    model = ScriptedModel(script)
    paused = await Agent(model, tools=[*files.tools(), read_secret]).run("What is there?", defer_approvals=True)
    assert paused.state is not None and files.listed == 1
    state = RunState.model_validate_json(paused.state.model_dump_json())
    done = await Agent(model, tools=[*files.tools(), read_secret]).resume(state, {"c2": True})
    assert files.listed == 1, "the resumed run knows the turn's earlier read: the same read is not run again"
    nudge = done.new_messages[-2]
    assert nudge.name == LOOP_NAME and "You already have the tool result" in nudge.content, "it is nudged instead"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("rename", "'delete_file' is gone; 'remove_file' is new"),
        ("parameters", "'delete_file' has other parameters"),
        ("name", "This run paused in agent 'files'; agent 'other' cannot resume it"),
    ],
)
async def test_a_changed_agent_cannot_resume_and_says_what_changed(change: str, named: str) -> None:
    files = Files()
    model = ScriptedModel([tool_call_response(call("c1", "delete_file", path="a.txt")), said])
    paused = await Agent(model, name="files", tools=files.tools()).run("Delete a.txt", defer_approvals=True)
    assert paused.state is not None

    def remove(path: str, force: bool = False) -> str:
        """Delete a file."""
        files.deleted.append(path)
        return "deleted"

    delete, listing = files.tools()
    tools = {
        "rename": [Tool(remove, name="remove_file", requires_approval=True), listing],
        "parameters": [Tool(remove, name="delete_file", requires_approval=True), listing],
        "name": [delete, listing],
    }[change]
    agent = Agent(model, name="other" if change == "name" else "files", tools=tools)
    with pytest.raises(UserError, match=re.escape(named)):
        await agent.resume(paused.state, {"c1": True})
    assert files.deleted == [] and model.remaining == 1, "nothing ran, and the model was not asked"
    done = await Agent(model, name="files", tools=files.tools()).resume(paused.state, {"c1": True})
    assert done.status == "done" and files.deleted == ["a.txt"], "the agent as it was goes on"


async def test_a_missing_or_unknown_answer_is_an_error_naming_the_calls_and_runs_nothing() -> None:
    files, memory = Files(), InMemoryHistory()
    round_ = tool_call_response(call("c1", "delete_file", path="a.txt"), call("c2", "delete_file", path="b.txt"))
    model = ScriptedModel([round_, said])
    agent = Agent(model, tools=files.tools(), memory=memory)
    paused = await agent.run("Delete both", thread=THREAD, defer_approvals=True)
    assert paused.state is not None and [p.call_id for p in paused.pending_approvals] == ["c1", "c2"]
    with pytest.raises(UserError, match=r"No answer for the pending call\(s\) c2 \(delete_file\)"):
        await agent.resume(paused.state, {"c1": True})
    with pytest.raises(UserError, match=r"not waiting on 'c3'"):
        await agent.resume(paused.state, {"c1": True, "c2": True, "c3": True})
    with pytest.raises(UserError, match=r"No answer for the pending call\(s\) c1 \(delete_file\), c2"):
        await agent.resume(paused.state, {})
    assert files.deleted == [] and len(stored(memory)) == 1, "nothing ran, nothing was stored"
    done = await agent.resume(paused.state, {"c1": True, "c2": "keep b.txt"})
    assert files.deleted == ["a.txt"]
    assert "the user declined: keep b.txt." in done.output


async def test_run_stream_ends_with_the_paused_result_and_resume_stream_goes_on() -> None:
    files = Files()
    round_ = tool_call_response(call("c1", "list_files"), call("c2", "delete_file", path="a.txt"))
    model = ScriptedModel([round_, said])
    agent = Agent(model, tools=files.tools())
    events = [event async for event in agent.run_stream("Delete a.txt", defer_approvals=True)]
    assert isinstance(events[-1], RunFinished) and events[-1].result.status == "paused"
    assert events[-1].result.pending_approvals == [
        PendingApproval(call_id="c2", tool="delete_file", arguments={"path": "a.txt"},
                        reason="'delete_file' requires a person's approval")
    ]  # fmt: skip
    started = [event.call.id for event in events if isinstance(event, ToolCallStarted)]
    assert started == ["c1"], "the waiting call is not started"
    state = events[-1].result.state
    assert state is not None

    stream = agent.resume_stream(state, {"c2": True})
    resumed = [event async for event in stream]
    assert [event.call.id for event in resumed if isinstance(event, ToolCallFinished)] == ["c2"]
    assert stream.result.status == "done" and files.deleted == ["a.txt"] and files.listed == 1


async def test_a_call_the_gate_would_ask_about_waits_too_and_the_approver_is_not_called() -> None:
    asked: list[str] = []

    def approve(call: ToolCall, tool: Tool, reason: str | None) -> bool:
        asked.append(call.name)
        return True

    @tool
    def write_note(text: str) -> str:
        """Write a note."""
        return "written"

    gate = PermissionGate(rules={"write_*": "ask"}, approve=approve)
    model = ScriptedModel([tool_call_response(call("c1", "write_note", text="hi")), said])
    agent = Agent(model, tools=[write_note], permissions=gate)
    paused = await agent.run("Note hi", defer_approvals=True)
    assert paused.status == "paused" and asked == []
    assert paused.pending_approvals[0].reason == "rule 'write_*: ask'"
    assert paused.state is not None
    assert (await agent.resume(paused.state, {"c1": True})).output == "Read: write_note: written"
    assert asked == []


async def test_without_defer_a_tool_that_requires_approval_is_asked_for_or_refused() -> None:
    files = Files()
    model = ScriptedModel([tool_call_response(call("c1", "delete_file", path="a.txt")), said])
    refused = await Agent(model, tools=files.tools()).run("Delete a.txt")
    assert refused.status == "done" and files.deleted == [], "no gate, nobody to ask: refused"
    assert [m.refusal for m in refused.new_messages if m.role == "tool"] == ["approval"]

    asked: list[str] = []

    def approve(call: ToolCall, tool: Tool, reason: str | None) -> bool:
        asked.append(reason or "")
        return True

    model = ScriptedModel([tool_call_response(call("c1", "delete_file", path="a.txt")), said])
    gate = PermissionGate(rules={"*": "allow"}, approve=approve)
    await Agent(model, tools=files.tools(), permissions=gate).run("Delete a.txt")
    assert asked == ["'delete_file' requires a person's approval"], "asked whatever the rules allow"
    assert files.deleted == ["a.txt"]


def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "approvals.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/approvals.md has its example"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    (tmp_path / "example.py").write_text(blocks[0])
    done = subprocess.run(
        [sys.executable, "example.py"], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "paused: delete_file {'path': 'notes.txt'}" in done.stdout
    assert "I deleted notes.txt." in done.stdout
