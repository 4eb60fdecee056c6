"""One turn for every front end (``Assistant.turn``), with per-turn state two conversations cannot mix: two served
requests on two threads at once, each writing a file and each undone alone; a served and an ACP ``user_prompt``
hook that keeps the message from the model; ``cortana -p --plan --yes`` that writes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cortana import Assistant, Settings
from cortana.messages import ThreadRef
from cortana.models.base import ModelRequest
from cortana.serve import RunQueue
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response
from cortana.turn import TurnFinished, TurnHeld
from tests.integration.test_cli_terminal import text_reply, tool_reply
from tests.unit import test_acp
from tests.unit.test_acp import Editor, cortana_acp, initialized, said
from tests.unit.test_serve import serve

workspace = test_acp.workspace  # the fixture: a project folder with a quiet cortana.yml

CHAT = "/v1/chat/completions"
QUIET_PARTS: dict[str, Any] = {
    "memory": {"recall": False},
    "graphify": {"enabled": False},
    "learning": {"enabled": False},
}
WRITES = Settings(**QUIET_PARTS, permissions={"allow": ["write_file"]})


def interleaved() -> tuple[ScriptedModel, dict[str, asyncio.Event]]:
    """A model serving two conversations at once, in this order: A's turn starts, B's turn starts, A writes a.txt,
    then B writes b.txt; each says "done" after its write."""
    seen = {name: asyncio.Event() for name in ("A asked", "B asked", "A wrote")}

    async def respond(request: ModelRequest) -> str | ScriptedResponse:
        last = request.messages[-1]
        asked = next(m.content for m in reversed(request.messages) if m.role == "user")
        name = "a" if "a.txt" in asked else "b"
        if last.role == "tool":
            if name == "a":
                seen["A wrote"].set()
            return "done"
        if name == "a":
            seen["A asked"].set()
            await asyncio.wait_for(seen["B asked"].wait(), 10)  # B's turn has begun before A writes
        else:
            seen["B asked"].set()
            await asyncio.wait_for(seen["A wrote"].wait(), 10)
        return tool_call_response(tool_call("write_file", path=f"{name}.txt", content=f"{name.upper()}\n"))

    return ScriptedModel([respond] * 4), seen


async def test_two_served_turns_on_two_threads_at_once_each_write_under_their_own_checkpoint(tmp_path: Path) -> None:
    workspace = tmp_path / "w"
    workspace.mkdir()
    model, _ = interleaved()
    async with serve(workspace, model, settings=WRITES, queue=RunQueue(slots=2)) as served:
        client = served.client()

        async def ask(thread: str, prompt: str) -> str:
            answer = await client.chat.completions.create(
                model="cortana",
                messages=[{"role": "user", "content": prompt}],
                extra_headers={"X-Cortana-Thread": thread},
            )
            return answer.choices[0].message.content or ""

        answers = await asyncio.gather(ask("thread-a", "write a.txt"), ask("thread-b", "write b.txt"))
        assert answers == ["done", "done"], answers
        checkpoints = served.service.assistant.checkpoints
        a = ThreadRef(resource_id="cli", thread_id="thread-a")
        b = ThreadRef(resource_id="cli", thread_id="thread-b")
        mine, theirs = checkpoints.last_with_files(thread=a), checkpoints.last_with_files(thread=b)
        assert mine is not None and theirs is not None
        assert mine.files == ("a.txt",) and theirs.files == ("b.txt",), (mine, theirs)
        restored = checkpoints.restore(mine.id, thread=a)  # /undo on A
        assert restored.restored == ["a.txt"], restored
        assert not (workspace / "a.txt").exists() and (workspace / "b.txt").read_text() == "B\n", "B's file stays"
        assert checkpoints.restore(theirs.id, thread=b).restored == ["b.txt"]
        assert not (workspace / "b.txt").exists()


def blocking_hook(home: Path) -> Settings:
    """The user's ``user_prompt`` hook that keeps back any message with a password in it (exit 2)."""
    script = home / "no-secrets.sh"
    script.write_text('#!/bin/sh\nif grep -qi password; then echo "that message holds a password" >&2; exit 2; fi\n')
    script.chmod(0o755)
    return Settings(**QUIET_PARTS, hooks={"user_prompt": [{"command": str(script)}]})


async def test_a_served_user_prompt_hook_keeps_the_message_from_the_model(tmp_path: Path) -> None:
    workspace = tmp_path / "w"
    workspace.mkdir()
    model = ScriptedModel(["the model answered"])
    async with serve(workspace, model, settings=blocking_hook(tmp_path)) as served:
        answer = await served.client().chat.completions.create(
            model="cortana", messages=[{"role": "user", "content": "my password is hunter2"}]
        )
        text = answer.choices[0].message.content or ""
        assert "that message holds a password" in text and "Not sent" in text, text
        assert model.requests == [], "the model never saw it"
        answer = await served.client().chat.completions.create(
            model="cortana", messages=[{"role": "user", "content": "hello"}]
        )
        assert answer.choices[0].message.content == "the model answered"


async def test_an_acp_user_prompt_hook_keeps_the_message_from_the_model(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    """The editor's session runs the user's hooks as the terminal does: the message never reaches the engine."""
    config = workspace.parent / ".config" / "cortana"
    config.mkdir(parents=True)
    hooks = blocking_hook(workspace.parent).hooks.user_prompt
    (config / "cortana.yml").write_text(f"hooks:\n  user_prompt: [{{command: '{hooks[0].command}'}}]\n")
    scripted_engine.add("POST", CHAT, text_reply(["the ", "model ", "answered"]))
    editor = Editor()
    async with cortana_acp(scripted_engine.url, workspace, editor) as conn:
        await initialized(conn)
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        done = await conn.prompt(session_id=session.session_id, prompt=said("my password is hunter2"))
        assert done.stop_reason == "refusal"
        assert "that message holds a password" in editor.text()
        assert scripted_engine.bodies(CHAT) == [], "the engine never saw it"
        done = await conn.prompt(session_id=session.session_id, prompt=said("hello"))
        assert done.stop_reason == "end_turn" and "the model answered" in editor.text()


async def test_turn_events_end_with_one_result_for_a_held_message(tmp_path: Path) -> None:
    workspace = tmp_path / "w"
    workspace.mkdir()
    model = ScriptedModel([])
    async with Assistant(workspace, blocking_hook(tmp_path), client=model) as assistant:
        events = [event async for event in assistant.turn("the password is x")]
    assert isinstance(events[0], TurnHeld) and isinstance(events[-1], TurnFinished)
    assert events[-1].result.route == "held" and not events[-1].result.complete


def test_print_mode_with_plan_and_yes_writes_nothing(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``cortana -p --plan --yes``: plan mode holds in a one-shot for scripts too, --yes or not."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "cortana.yml").write_text(
        "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
        "learning:\n  enabled: false\n"
    )
    call = json.dumps({"path": "plan.txt", "content": "written\n"})
    for _ in range(3):  # the model keeps asking to write; plan mode keeps refusing
        scripted_engine.add("POST", CHAT, tool_reply("write_file", call))
    scripted_engine.add("POST", CHAT, text_reply(["The ", "plan: ", "write ", "plan.txt."]))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url,
         "-p", "--plan", "--yes", "--output-format", "json", "write plan.txt"],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert not (root / "plan.txt").exists(), done.stdout + done.stderr
    assert "plan mode" in done.stdout, done.stdout


async def test_a_tool_declares_its_kind_and_what_it_writes_and_the_events_carry_it(tmp_path: Path) -> None:
    """What an editor shows of a call (its kind, the file it writes) is the tool's own declaration, not a table of
    names in a front end: a new writing tool is shown as one."""
    from cortana import Agent, Tool
    from cortana.agent.events import ToolCallFinished, ToolCallStarted
    from cortana.tools.builtin import Workspace, builtin_tools

    def save_note(path: str, text: str) -> str:
        """Save a note."""
        return "saved"

    note = Tool(save_note, kind="edit", writes="path")
    model = ScriptedModel([tool_call_response(tool_call("save_note", path="n.txt", text="x")), "done"])
    agent = Agent(model, tools=[note])
    async with agent.run_stream("save a note") as stream:
        events = [event async for event in stream]
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert started.tool is note and finished.tool is note and note.kind == "edit" and note.writes == "path"
    tools = {tool.name: tool for tool in builtin_tools(Workspace(tmp_path))}
    assert (tools["write_file"].kind, tools["write_file"].writes) == ("edit", "path")
    assert (tools["read_file"].kind, tools["grep_files"].kind, tools["run_command"].kind) == (
        "read",
        "search",
        "execute",
    )


async def test_two_acp_sessions_in_one_folder_each_put_back_only_their_own_writes(tmp_path: Path) -> None:
    """Two editor sessions on one folder's assistant, at once: A writes a.txt and is cancelled while it waits for
    the model; B writes b.txt and finishes. A's cancel puts back a.txt (from A's turn's checkpoint) and leaves b.txt,
    and B's write is filed under B's checkpoint."""
    from acp import schema

    from cortana.serve.acp import CortanaAgent

    workspace = tmp_path / "w"
    workspace.mkdir()
    seen = {name: asyncio.Event() for name in ("A wrote", "B done", "never")}

    async def respond(request: ModelRequest) -> str | ScriptedResponse:
        asked = next(m.content for m in reversed(request.messages) if m.role == "user")
        name = "a" if "a.txt" in asked else "b"
        if request.messages[-1].role == "tool":
            if name == "a":
                seen["A wrote"].set()
                await seen["never"].wait()  # A's turn waits here until it is cancelled
            return "done"
        if name == "b":
            await asyncio.wait_for(seen["A wrote"].wait(), 10)
        return tool_call_response(tool_call("write_file", path=f"{name}.txt", content=f"{name.upper()}\n"))

    model = ScriptedModel([respond] * 4)
    agent = CortanaAgent(model, lambda folder: WRITES, allow_all=True)
    agent.on_connect(Editor())  # type: ignore[arg-type]
    try:
        await agent.initialize(protocol_version=1, client_capabilities=schema.ClientCapabilities())
        a = (await agent.new_session(cwd=str(workspace))).session_id
        b = (await agent.new_session(cwd=str(workspace))).session_id
        first = asyncio.ensure_future(agent.prompt(session_id=a, prompt=said("write a.txt")))
        second = await agent.prompt(session_id=b, prompt=said("write b.txt"))
        assert second.stop_reason == "end_turn" and (workspace / "a.txt").exists()
        await agent.cancel(session_id=a)
        assert (await first).stop_reason == "cancelled"
        assert not (workspace / "a.txt").exists(), "A's write is put back"
        assert (workspace / "b.txt").read_text() == "B\n", "B's is not"
        checkpoints = agent._assistants[workspace.resolve()].checkpoints
        kept = checkpoints.last_with_files()
        assert kept is not None and kept.files == ("b.txt",) and kept.thread.thread_id == b
    finally:
        await agent.aclose()


async def test_a_run_joins_the_turn_of_its_thread_and_keeps_its_own_on_another() -> None:
    """An agent's run inside a turn on its thread is that turn (its plan mode, its checkpoint); on another thread
    (a subagent's) or outside any turn it is a turn of its own, gone when the run ends."""
    from cortana import Agent, tool
    from cortana.turn import TurnState, in_turn, turn_state

    seen: list[TurnState | None] = []

    @tool
    def where() -> str:
        """Say which turn this is."""
        seen.append(turn_state())
        return "noted"

    step = [tool_call_response(tool_call("where")), "done"]
    agent = Agent(ScriptedModel(step * 3), tools=[where])
    await agent.run("alone", thread="solo")
    assert seen[0] is not None and seen[0].thread.thread_id == "solo" and seen[0].prompt == "alone"
    assert turn_state() is None
    outer = TurnState(ThreadRef(thread_id="A"), "the user's words", plan=True)
    with in_turn(outer):
        await agent.run("inside", thread=ThreadRef(thread_id="A"))
        await agent.run("aside", thread=ThreadRef(thread_id="B"))
        assert turn_state() is outer
    assert seen[1] is outer
    assert seen[2] is not outer and seen[2] is not None
    assert (seen[2].thread.thread_id, seen[2].prompt, seen[2].plan) == ("B", "aside", False)
