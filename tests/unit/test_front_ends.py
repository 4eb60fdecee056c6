"""The same scripted conversation through all six front ends gives the same answer, the same tool call and the same
hooks: the interactive terminal, ``cortana "question"``, ``cortana -p``, ``cortana serve``, ``cortana acp`` and
``cortana mcp-serve``. Each submits its turn through ``Assistant.turn`` (issue 62); before, serve and acp ran no
``user_prompt``, ``stop`` or ``session_start`` hook, and their ``before_tool`` hooks saw no thread.

One loopback llama.cpp wire server (``scripted_engine``) answers every front end alike: a ``read_file`` call of
notes.txt, then the answer. The user's hooks (``~/.config/cortana/cortana.yml``; for the front ends run in this
process, the same settings) append each event to a log.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cortana import Assistant
from cortana.config import load_settings
from cortana.models.factory import create_model_client
from cortana.serve import ChatService, mcp_server, refuse_over_api
from tests.integration.test_cli_terminal import text_reply, tool_reply
from tests.unit.test_acp import Editor, cortana_acp, initialized, said

CHAT = "/v1/chat/completions"
ANSWER = "The launch is on Friday."
QUESTION = "What does notes.txt say about the launch?"
QUIET = (
    "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
    "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n"
)
LOG = '#!/bin/sh\ncat >> "$HOME/logs/events.jsonl"; echo >> "$HOME/logs/events.jsonl"\n'
EVENTS = ("session_start", "user_prompt", "before_tool", "after_tool", "stop")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user whose hooks log every event, and a project with a note; HOME points at the user for this process."""
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "log.sh").write_text(LOG)
    (home / "log.sh").chmod(0o755)
    config = home / ".config" / "cortana"
    config.mkdir(parents=True)
    hooks = "".join(f"  {event}: [{{command: '{home}/log.sh'}}]\n" for event in EVENTS)
    (config / "cortana.yml").write_text(f"sandbox:\n  writable: ['{home}/logs']\nhooks:\n{hooks}")
    root = home / "project"
    root.mkdir()
    (root / "cortana.yml").write_text(QUIET)
    (root / "notes.txt").write_text("The launch is on Friday.\n")
    monkeypatch.setenv("HOME", str(home))
    return home


def conversation(engine: Any) -> None:
    """The engine's two answers of the turn, afresh: read notes.txt, then the answer (the wire server repeats its
    last reply, so the route is set anew for each front end)."""
    words = ["The ", "launch ", "is ", "on ", "Friday."]
    engine.routes[("POST", CHAT)] = [tool_reply("read_file", '{"path": "notes.txt"}'), text_reply(words)]


def logged(home: Path) -> list[dict[str, Any]]:
    path = home / "logs" / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    path.unlink(missing_ok=True)
    return events


def command(home: Path, url: str, *args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", url, *args],
        cwd=home / "project", env=env, stdin=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


async def assistant_of(home: Path, url: str, **options: Any) -> Assistant:
    settings = load_settings(home / "project")  # the user's cortana.yml (HOME) and the project's
    client = await create_model_client("llamacpp", base_url=url, settings=settings)
    return Assistant(home / "project", settings, client=client, approve=refuse_over_api, **options)


async def through_the_terminal(home: Path, url: str) -> str:
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    from rich.console import Console

    from cortana.cli.fix import TerminalFixer
    from cortana.cli.repl import Repl

    assistant = await assistant_of(home, url)
    out = Console(file=io.StringIO(), width=200)
    try:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            console = Console(file=io.StringIO(), width=200)
            repl = Repl(assistant, console, loading=asyncio.ensure_future(assistant.agent()),
                        fixer=TerminalFixer(assistant, console, out.print))  # fmt: skip
            repl.out = out
            pipe.send_text(f"{QUESTION}\n/exit\n")
            async with asyncio.timeout(60):
                await repl.run()
    finally:
        await assistant.aclose()
    return out.file.getvalue()  # type: ignore[attr-defined,no-any-return]


async def through_serve(home: Path, url: str) -> str:
    import openai

    from cortana.serve import create_app
    from cortana.serve.http import serving

    assistant = await assistant_of(home, url, client_label="serve")
    service = ChatService(assistant)
    try:
        async with serving(create_app(service, key="k" * 20)) as served:
            client = openai.AsyncOpenAI(base_url=f"{served}/v1", api_key="k" * 20, max_retries=0)
            answer = await client.chat.completions.create(
                model="cortana", messages=[{"role": "user", "content": QUESTION}]
            )
            return answer.choices[0].message.content or ""
    finally:
        service.close()
        await assistant.aclose()


async def through_mcp(home: Path, url: str) -> str:
    from mcp import Client

    assistant = await assistant_of(home, url, client_label="mcp")
    service = ChatService(assistant)
    try:
        async with Client(mcp_server(service)) as mcp:
            result = await mcp.call_tool("ask", {"prompt": QUESTION})
        return "".join(getattr(block, "text", "") for block in result.content)
    finally:
        service.close()
        await assistant.aclose()


async def through_acp(home: Path, url: str) -> str:
    editor = Editor()
    async with cortana_acp(url, home / "project", editor) as conn:
        await initialized(conn)
        session = await conn.new_session(cwd=str(home / "project"), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=said(QUESTION))
    return editor.text()


def check(name: str, answer: str, events: list[dict[str, Any]]) -> None:
    assert ANSWER in answer, f"{name}: {answer!r}"
    names = [event["event"] for event in events]
    assert set(names) == set(EVENTS), f"{name}: the hooks that ran: {names}"
    turn = [event for event in names if event != "session_start"]
    assert turn == ["user_prompt", "before_tool", "after_tool", "stop"], f"{name}: {turn}"
    tool = next(event for event in events if event["event"] == "before_tool")
    assert tool["tool"] == "read_file" and tool["arguments"] == {"path": "notes.txt"}, f"{name}: {tool}"
    assert all(event["thread"] for event in events if event["event"] != "session_start"), f"{name}: {events}"
    stop = next(event for event in events if event["event"] == "stop")
    assert ANSWER in stop["answer"], f"{name}: {stop}"


async def test_the_same_conversation_through_all_six_front_ends(scripted_engine, home: Path) -> None:  # type: ignore[no-untyped-def]
    url = scripted_engine.url
    runs: list[tuple[str, Callable[[], Any]]] = [
        ("terminal", lambda: through_the_terminal(home, url)),
        ("one-shot", lambda: asyncio.to_thread(lambda: command(home, url, QUESTION).stdout)),
        ("-p", lambda: asyncio.to_thread(lambda: command(home, url, "-p", QUESTION).stdout)),
        ("serve", lambda: through_serve(home, url)),
        ("acp", lambda: through_acp(home, url)),
        ("mcp-serve", lambda: through_mcp(home, url)),
    ]
    for name, run in runs:
        conversation(scripted_engine)
        asked = len(scripted_engine.bodies(CHAT))
        answer = await run()
        bodies = scripted_engine.bodies(CHAT)[asked:]
        assert len(bodies) == 2, f"{name}: {len(bodies)} model calls, {[b.get('tools') is not None for b in bodies]}"
        check(name, answer, logged(home))
