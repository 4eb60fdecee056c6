"""Served conversations as the rest of Cortana sees them: threads labelled by the client that started them (one
memory for all), check-ins marked with the thread they were written on and filtered by it, and ``serve.db`` made
and changed by migrations (a file from before them adopted as it is)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import httpx
from mcp import Client

from cortana import Assistant
from cortana.messages import ThreadRef
from cortana.serve import ChatService, mcp_server, refuse_over_api
from cortana.serve.conversations import SERVE_MIGRATIONS, ConversationMap
from cortana.testing import ScriptedModel
from tests.unit.test_serve import KEY, QUIET, _first, serve


async def test_threads_are_labelled_by_their_client_and_share_one_memory(tmp_path: Path) -> None:
    async with serve(tmp_path, ScriptedModel(["Served."])) as served, served.client() as client:
        answer = await client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "hi"}])
        served_thread = answer.model_extra["cortana"]["thread"]  # type: ignore[index]
    model = ScriptedModel(["Over MCP."])
    assistant = Assistant(tmp_path, QUIET, client=model, approve=refuse_over_api, client_label="mcp")
    service = ChatService(assistant)
    try:
        async with Client(mcp_server(service)) as mcp:
            await mcp.call_tool("ask", {"prompt": "hello"})
        mcp_thread = service.last_thread.thread_id
        await assistant.memory.append_messages(ThreadRef(resource_id="cli", thread_id="terminal-one"), [])
    finally:
        service.close()
        await assistant.aclose()
    terminal = Assistant(tmp_path, QUIET, client=ScriptedModel(["Terminal."]))
    try:
        await terminal.ask("from the terminal")
        labels = await terminal.memory.thread_clients("cli")
        threads = [thread.thread_id for thread, _ in await terminal.memory.threads("cli")]
        found = await terminal.find_thread(served_thread[:6])
    finally:
        await terminal.aclose()
    assert labels[served_thread] == "serve" and labels[mcp_thread] == "mcp"
    assert labels[terminal.thread.thread_id] == "cli"
    assert {served_thread, mcp_thread, terminal.thread.thread_id} <= set(threads), "one memory, every client's"
    assert found.thread_id == served_thread, "a served conversation can be resumed in the terminal"


async def test_check_ins_belong_to_the_thread_they_were_written_on(tmp_path: Path) -> None:
    (tmp_path / "personality").mkdir()
    (tmp_path / "personality" / "HEARTBEAT.md").write_text("- Remind the user to stretch.\n")
    beats = {"interval_minutes": 0.01, "active_hours": None, "idle_checkin_hours": None, "reflect_hours": None}
    settings = QUIET.model_copy(update={"heartbeat": QUIET.heartbeat.model_copy(update=beats)})
    model = ScriptedModel(["Time to stretch."])
    async with (
        serve(tmp_path, model, settings=settings, heartbeat=True) as served,
        httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as raw,
    ):
        service = served.service
        first = ThreadRef(resource_id="cli", thread_id="first")
        service.last_thread = first
        original = service.publish

        def publish(text: str, thread: ThreadRef | None = None) -> object:
            service.last_thread = ThreadRef(resource_id="cli", thread_id="second")  # a request came in meanwhile
            return original(text, thread)

        service.publish = publish  # type: ignore[method-assign]
        assert await service.start_heartbeat()
        check_in = await asyncio.wait_for(_first(raw, {}), 10)
        assert check_in["text"] == "Time to stretch." and check_in["thread"] == "first", "where it was written"
        stored = await service.assistant.memory.messages(first)
        assert any("Time to stretch." in row.message.content for row in stored), "and it joined that thread"

        service.publish = original  # type: ignore[method-assign]
        original("For the other thread.", ThreadRef(resource_id="cli", thread_id="other"))
        original("For this one.", first)
        mine = await asyncio.wait_for(_filtered(raw, "first"), 10)
        assert [event["text"] for event in mine] == ["Time to stretch.", "For this one."]


async def _filtered(raw: httpx.AsyncClient, thread: str) -> list[dict[str, object]]:
    import json

    seen: list[dict[str, object]] = []
    async with raw.stream("GET", "/v1/cortana/events", params={"thread": thread}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if len(seen) == 2:
                    return seen
    return seen


def test_serve_db_is_made_by_migrations_and_an_old_file_is_adopted(tmp_path: Path) -> None:
    fresh = ConversationMap(tmp_path / "fresh" / "serve.db")
    fresh.advance("t1", "k1")
    fresh.close()
    with sqlite3.connect(tmp_path / "fresh" / "serve.db") as db:
        applied = [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY name")]
    assert applied == [name for name, _ in SERVE_MIGRATIONS]

    old = tmp_path / "old" / "serve.db"
    old.parent.mkdir()
    with sqlite3.connect(old) as db:  # the schema serve.db had before migrations, with a conversation in it
        db.executescript(
            "CREATE TABLE histories (key TEXT PRIMARY KEY, thread TEXT NOT NULL, used REAL NOT NULL);"
            "CREATE TABLE heads (thread TEXT PRIMARY KEY, key TEXT NOT NULL);"
            "INSERT INTO histories VALUES ('k-old', 'thread-old', strftime('%s','now'));"
            "INSERT INTO heads VALUES ('thread-old', 'k-old');"
        )
    adopted = ConversationMap(old)
    try:
        assert adopted.find("k-old") == ("thread-old", True), "the conversation continues after the upgrade"
    finally:
        adopted.close()
    with sqlite3.connect(old) as db:
        assert [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY name")] == applied
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'histories_by_use'").fetchone()
