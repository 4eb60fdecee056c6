"""The prompt shows while the engine loads: a first message waits for it with a note; a failed start is said."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from cortana import Agent, EngineUnavailable
from cortana.cli.repl import Repl
from cortana.memory.sqlite import SQLiteMemory
from cortana.testing import ScriptedModel


async def session(tmp_path: Path, loading: asyncio.Future[Agent], typed: str) -> tuple[int, str, str]:
    console, out = Console(file=io.StringIO(), width=200), Console(file=io.StringIO(), width=200)
    memory = SQLiteMemory(tmp_path / "m.db")
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        repl = Repl(loading, memory, tmp_path, console, ready_note=lambda _: "engine: scripted")
        repl.out = out
        pipe.send_text(typed)
        code = await repl.run()
    memory.close()
    return code, console.file.getvalue(), out.file.getvalue()  # type: ignore[attr-defined]


async def test_a_message_typed_while_the_engine_loads_waits_and_is_answered(tmp_path: Path) -> None:
    loading: asyncio.Future[Agent] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.3, loading.set_result, Agent(ScriptedModel(["Hello, Ada."])))
    code, console, out = await session(tmp_path, loading, "hi, I'm Ada\n/exit\n")
    assert code == 0
    assert "The engine is loading; type away" in console
    assert "waiting for the engine to finish loading" in console and "engine: scripted" in console
    assert "Hello, Ada." in out


async def test_help_needs_no_engine_and_a_failed_start_ends_the_session_saying_why(tmp_path: Path) -> None:
    loading: asyncio.Future[Agent] = asyncio.get_running_loop().create_future()
    failure = EngineUnavailable("The embedded engine exited while loading model.gguf: out of memory")
    asyncio.get_running_loop().call_later(0.3, loading.set_exception, failure)
    code, console, out = await session(tmp_path, loading, "/help\nhello\n")
    assert "/stats" in out, "/help answered at once"
    assert code == 1 and "EngineUnavailable: The embedded engine exited while loading model.gguf" in console
