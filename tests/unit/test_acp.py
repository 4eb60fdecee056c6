"""``cortana acp`` driven by the ``agent-client-protocol`` package's own client side, over a real subprocess on a
scripted engine: initialize, sessions, a prompt with tool calls, permission requests answered both ways, the
editor's buffers read and written, cancel mid-turn with the file put back, a second prompt that remembers the
first, and a stored session loaded again in a new process."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema

from tests.integration.test_cli_terminal import text_reply, tool_reply

CHAT = "/v1/chat/completions"
QUIET = (
    "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
    "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n"
)


class Editor:
    """The editor's side: buffers (unsaved text), the permission answers it gives, and every update it got."""

    def __init__(self, answers: list[str] | None = None, buffers: dict[str, str] | None = None) -> None:
        self.answers = list(answers or [])
        self.buffers = dict(buffers or {})
        self.asked: list[tuple[schema.ToolCallUpdate, list[schema.PermissionOption]]] = []
        self.updates: list[Any] = []
        self.written: list[tuple[str, str]] = []
        self.seen = asyncio.Event()

    async def request_permission(
        self, options: list[schema.PermissionOption], session_id: str, tool_call: schema.ToolCallUpdate, **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        self.asked.append((tool_call, options))
        answer = self.answers.pop(0) if self.answers else "reject_once"  # past the script: the user says no
        return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected", option_id=answer))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.seen.set()

    async def read_text_file(
        self, path: str, session_id: str, limit: int | None = None, line: int | None = None, **kwargs: Any
    ) -> schema.ReadTextFileResponse:
        if path in self.buffers:
            return schema.ReadTextFileResponse(content=self.buffers[path])
        return schema.ReadTextFileResponse(content=await asyncio.to_thread(Path(path).read_text))

    async def write_text_file(
        self, content: str, path: str, session_id: str, **kwargs: Any
    ) -> schema.WriteTextFileResponse | None:
        self.written.append((path, content))
        self.buffers[path] = content
        await asyncio.to_thread(Path(path).write_text, content)  # the editor saves it
        return schema.WriteTextFileResponse()

    def of(self, kind: str) -> list[Any]:
        return [update for update in self.updates if update.session_update == kind]

    def text(self) -> str:
        return "".join(update.content.text for update in self.of("agent_message_chunk"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "cortana.yml").write_text(QUIET)
    (root / "notes.txt").write_text("On disk: the launch is on Monday.\n")
    return root


@asynccontextmanager
async def cortana_acp(url: str, root: Path, editor: Editor, *args: str) -> AsyncIterator[acp.Agent]:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent), "NO_COLOR": "1"}
    command = ("-m", "cortana.cli.main", "acp", "--engine", "llamacpp", "--base-url", url, *args)
    async with acp.spawn_agent_process(editor, sys.executable, *command, cwd=root, env=env) as (conn, _process):
        yield conn


async def initialized(conn: acp.Agent, *, fs: bool = True) -> schema.InitializeResponse:
    capabilities = schema.ClientCapabilities(
        fs=schema.FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=False
    )
    return await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=capabilities)


def said(text: str) -> list[schema.TextContentBlock]:
    return [acp.text_block(text)]


async def test_a_session_with_tool_calls_permissions_both_ways_and_memory(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    notes = str(workspace / "notes.txt")
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("read_file", '{"path": "notes.txt"}'),
        text_reply(["The launch ", "is on Friday."]),
        tool_reply("write_file", '{"path": "todo.txt", "content": "ship it\\n"}'),
        text_reply(["Written."]),
        tool_reply("edit_file", '{"path": "notes.txt", "old_text": "Unsaved", "new_text": "Edited"}'),
        text_reply(["I did not run it."]),
        text_reply(["You asked about the launch first."]),
    )
    editor = Editor(answers=["allow_once", "reject_once"], buffers={notes: "Unsaved: the launch is on Friday.\n"})
    async with cortana_acp(scripted_engine.url, workspace, editor) as conn:
        hello = await initialized(conn)
        assert hello.agent_capabilities.load_session is True and hello.agent_info.name == "cortana"
        assert hello.agent_capabilities.prompt_capabilities.embedded_context is True
        session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id

        first = await conn.prompt(session_id=session, prompt=said("When is the launch?"))
        assert first.stop_reason == "end_turn"
        assert editor.text() == "The launch is on Friday."
        [start] = editor.of("tool_call")
        assert start.kind == "read" and start.title == "read_file notes.txt" and start.status == "in_progress"
        assert start.locations[0].path == notes
        [done] = editor.of("tool_call_update")
        assert done.tool_call_id == start.tool_call_id and done.status == "completed"
        assert "Unsaved: the launch is on Friday." in done.raw_output, "the editor's buffer, not the disk"

        editor.updates.clear()
        second = await conn.prompt(session_id=session, prompt=said("Write todo.txt."))
        assert second.stop_reason == "end_turn"
        [(asked, options)] = editor.asked
        assert asked.title.startswith("write_file todo.txt") and asked.kind == "edit"
        kinds = {option.kind for option in options}
        assert kinds == {"allow_once", "allow_always", "reject_once", "reject_always"}
        always = next(option for option in options if option.kind == "allow_always")
        assert "todo.txt" in always.name or "write_file" in always.name, "the scope Cortana would remember"
        assert editor.written == [(str(workspace / "todo.txt"), "ship it\n")], "written through the editor"
        [update] = editor.of("tool_call_update")
        diff = next(item for item in update.content if item.type == "diff")
        assert diff.path == str(workspace / "todo.txt") and diff.new_text == "ship it\n" and diff.old_text is None

        editor.updates.clear()
        third = await conn.prompt(session_id=session, prompt=said("Edit the notes."))
        assert third.stop_reason == "end_turn"
        assert editor.asked[-1][0].title.startswith("edit_file notes.txt"), "asked again: not allowed always"
        [refused] = editor.of("tool_call_update")
        assert refused.status == "failed" and "declined" in refused.raw_output
        assert editor.buffers[notes].startswith("Unsaved"), "rejected: the buffer is as it was"

        await conn.prompt(session_id=session, prompt=said("What did I ask first?"))
        last = scripted_engine.bodies(CHAT)[-1]["messages"]
        assert any("When is the launch?" in str(m.get("content")) for m in last if m["role"] == "user")

    editor = Editor()
    async with cortana_acp(scripted_engine.url, workspace, editor) as conn:
        await initialized(conn)
        listed = await conn.list_sessions(cwd=str(workspace))
        assert session in [item.session_id for item in listed.sessions]
        await conn.load_session(cwd=str(workspace), session_id=session, mcp_servers=[])
        for _ in range(50):  # the replay's notifications may trail the answer by a moment
            if any(u.session_update == "agent_message_chunk" for u in editor.updates[-3:]):
                break
            await asyncio.sleep(0.05)
        shown = [u.content.text for u in editor.of("user_message_chunk")]
        assert shown[0] == "When is the launch?" and shown[-1] == "What did I ask first?"
        assert "You asked about the launch first." in editor.text()


async def test_cancel_stops_the_turn_and_puts_files_back(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    words = [f"word{i} " for i in range(200)]
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("write_file", '{"path": "notes.txt", "content": "Overwritten.\\n"}'),
        text_reply(words, line_delay=0.1),
    )
    editor = Editor()
    async with cortana_acp(scripted_engine.url, workspace, editor, "--yes") as conn:
        await initialized(conn, fs=False)
        session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=session, prompt=said("Rewrite the notes.")))
        for _ in range(200):
            if "word3 " in editor.text():
                break
            await asyncio.sleep(0.05)
        assert (workspace / "notes.txt").read_text() == "Overwritten.\n", "written on disk (no editor buffers)"
        await conn.cancel(session_id=session)
        response = await asyncio.wait_for(turn, 30)
        assert response.stop_reason == "cancelled"
        assert "word199" not in editor.text()
        assert (workspace / "notes.txt").read_text() == "On disk: the launch is on Monday.\n", "put back"
        assert editor.asked == [], "--yes: nothing asked"


async def test_bad_requests_are_protocol_errors(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    editor = Editor()
    async with cortana_acp(scripted_engine.url, workspace, editor) as conn:
        await initialized(conn)
        with pytest.raises(acp.RequestError, match="not an absolute path"):
            await conn.new_session(cwd="relative/folder", mcp_servers=[])
        with pytest.raises(acp.RequestError, match="no session"):
            await conn.prompt(session_id="nope", prompt=said("Hi"))
        with pytest.raises(acp.RequestError, match="no conversation"):
            await conn.load_session(cwd=str(workspace), session_id="feedbeef", mcp_servers=[])
        from tests.wire import Reply

        scripted_engine.add("POST", CHAT, Reply(status=500, body=b'{"error": {"message": "out of memory"}}'))
        session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        with pytest.raises(acp.RequestError, match="out of memory"):
            await conn.prompt(session_id=session, prompt=said("Hello?"))
    from cortana.memory.sqlite import SQLiteMemory
    from cortana.messages import ThreadRef

    memory = SQLiteMemory(workspace / ".cortana" / "memory.db")
    try:
        kept = await memory.history(ThreadRef(resource_id="cli", thread_id=session))
        assert any("Hello?" in row.message.content for row in kept), "the user's message is kept"
        assert (await memory.thread_clients("cli"))[session] == "acp", "labelled by its client; memory is shared"
    finally:
        memory.close()


async def test_a_fix_shows_its_plan_progress_and_diff(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.unit.test_fix_command import project
    from tests.unit.test_repair import FIX

    root = project(tmp_path)
    (root / "cortana.yml").write_text(QUIET + "fix:\n  per_location: 1\n")
    scripted_engine.add("POST", CHAT, text_reply([FIX]))
    editor = Editor()
    async with cortana_acp(scripted_engine.url, root, editor, "--yes") as conn:
        await initialized(conn, fs=False)
        session = (await conn.new_session(cwd=str(root), mcp_servers=[])).session_id
        done = await conn.prompt(session_id=session, prompt=said("Fix the failing test."))
    assert done.stop_reason == "end_turn"
    plans = editor.of("plan")
    assert plans[0].entries[0].status == "in_progress" and all(e.status == "completed" for e in plans[-1].entries)
    [start] = editor.of("tool_call")
    assert start.title.startswith("fix: Fix the failing test") and start.kind == "edit"
    updates = editor.of("tool_call_update")
    assert len(updates) >= 2 and updates[-1].status == "completed", "progress, then the end"
    diff = next(item for item in updates[-1].content if item.type == "diff")
    assert diff.path == str(root / "shop" / "money.py") and "round(cents * 0.2)" in diff.new_text
    assert "int(cents * 0.2)" in diff.old_text
    assert "round(cents * 0.2)" in (root / "shop" / "money.py").read_text()
    assert "test_total_rounds_the_vat now passes" in editor.text()


class FussyEditor(Editor):
    """An editor that reads only the buffers it holds and refuses to write one file."""

    async def read_text_file(
        self, path: str, session_id: str, limit: int | None = None, line: int | None = None, **kwargs: Any
    ) -> schema.ReadTextFileResponse:
        if path not in self.buffers:
            raise acp.RequestError(-32002, f"no buffer for {path}")
        return schema.ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, content: str, path: str, session_id: str, **kwargs: Any
    ) -> schema.WriteTextFileResponse | None:
        raise acp.RequestError(-32603, "the buffer is read-only")


async def test_an_editor_that_cannot_read_or_write_a_file(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("read_file", '{"path": "notes.txt"}'),
        tool_reply("write_file", '{"path": "notes.txt", "content": "x"}'),
        text_reply(["Done."]),
    )
    editor = FussyEditor()
    async with cortana_acp(scripted_engine.url, workspace, editor, "--yes") as conn:
        await initialized(conn)
        session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=said("Read and rewrite the notes."))
    read, write = editor.of("tool_call_update")
    assert read.status == "completed" and "On disk: the launch is on Monday." in read.raw_output, "the disk's text"
    assert write.status == "failed" and "The editor did not write 'notes.txt'" in write.raw_output
    assert (workspace / "notes.txt").read_text() == "On disk: the launch is on Monday.\n"


def test_an_attached_file_is_fenced_so_its_own_backticks_cannot_close_it() -> None:
    from cortana.serve.acp import prompt_text

    resource = schema.TextResourceContents(uri="file:///p/README.md", text="intro\n```\ncode\n```\nend")
    text = prompt_text(
        [acp.text_block("Summarize"), schema.EmbeddedResourceContentBlock(type="resource", resource=resource)]
    )
    assert text.startswith("Summarize\n\n/p/README.md:\n````\nintro") and text.endswith("end\n````")
