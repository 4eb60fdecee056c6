"""The prompt shows while the engine loads: a first message waits for it with a note; a failed start is said."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from pathlib import Path

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from cortana import EngineUnavailable
from cortana.cli.repl import Repl
from cortana.testing import ScriptedModel
from tests.unit.test_assistant import assistant_on


class Watched(io.StringIO):
    """A console's file that runs `then` once `text` has been printed to it: the test's clock is the REPL's output."""

    def __init__(self, text: str = "", then: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.text, self.then, self.fired = text, then, False

    def write(self, s: str) -> int:
        written = super().write(s)
        if self.text and not self.fired and self.text in self.getvalue():
            self.fired = True
            asyncio.get_running_loop().call_soon(self.then)
        return written


async def session(
    tmp_path: Path,
    engine: asyncio.Future[ScriptedModel],
    typed: str,
    console_file: io.StringIO | None = None,
    out_file: io.StringIO | None = None,
) -> tuple[int, str, str]:
    """The REPL of an assistant whose engine is ``engine`` (still starting), given the agent to come, as the
    terminal gives it."""
    console = Console(file=console_file or io.StringIO(), width=200)
    out = Console(file=out_file or io.StringIO(), width=200)
    assistant = assistant_on(tmp_path, engine)
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        loading = asyncio.ensure_future(assistant.agent())
        repl = Repl(assistant, console, loading=loading, ready_note=lambda _: "engine: scripted")
        repl.out = out
        pipe.send_text(typed)
        async with asyncio.timeout(60):  # a REPL that never shows what the test waits for fails, not hangs
            code = await repl.run()
    await assistant.aclose()
    return code, console.file.getvalue(), out.file.getvalue()  # type: ignore[attr-defined]


async def test_a_message_typed_while_the_engine_loads_waits_and_is_answered(tmp_path: Path) -> None:
    engine: asyncio.Future[ScriptedModel] = asyncio.get_running_loop().create_future()
    # The engine finishes loading only after the message has been seen waiting for it.
    loaded = Watched("waiting for the engine", lambda: engine.set_result(ScriptedModel(["Hello, Ada."])))
    code, console, out = await session(tmp_path, engine, "hi, I'm Ada\n/exit\n", console_file=loaded)
    assert code == 0
    assert "The engine is loading; type away" in console
    assert "waiting for the engine to finish loading" in console and "engine: scripted" in console
    assert "Hello, Ada." in out


async def test_help_needs_no_engine_and_a_failed_start_ends_the_session_saying_why(tmp_path: Path) -> None:
    engine: asyncio.Future[ScriptedModel] = asyncio.get_running_loop().create_future()
    failure = EngineUnavailable("The embedded engine exited while loading model.gguf: out of memory")
    # The engine fails only after /help has been answered.
    answered = Watched("/stats", lambda: engine.set_exception(failure))
    code, console, out = await session(tmp_path, engine, "/help\nhello\n", out_file=answered)
    assert "/stats" in out, "/help answered at once"
    assert code == 1 and "EngineUnavailable: The embedded engine exited while loading model.gguf" in console
