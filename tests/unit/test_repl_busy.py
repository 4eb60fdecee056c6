"""The interactive session's four reasons a check-in waits, each holding a real heartbeat on a manual clock."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from cortana import Heartbeat
from cortana.cli.approval import TerminalApprover
from cortana.cli.repl import Repl
from cortana.companion import ManualClock
from cortana.testing import ScriptedModel
from tests.unit.test_assistant import assistant_on


@pytest.fixture
def repl(tmp_path: Path) -> Iterator[Repl]:
    console = Console(file=io.StringIO())
    assistant = assistant_on(tmp_path, ScriptedModel())
    with create_pipe_input() as pipe:
        session = Repl(assistant, console, approver=TerminalApprover(console, read=lambda _: "y"))
        session._session = PromptSession(input=pipe, output=DummyOutput())
        yield session
    assistant.memory.close()


@pytest.fixture
def terminal_input(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """stdin is a real terminal (a pty); the test writes what the user types ahead to the returned fd."""
    typist, terminal = os.openpty()
    stdin = os.fdopen(terminal, "r", closefd=False)
    monkeypatch.setattr(sys, "stdin", stdin)
    yield typist
    stdin.close()
    os.close(typist)
    os.close(terminal)


def hold(repl: Repl, reason: str, terminal_input: int) -> None:
    if reason == "a turn is running":
        repl._busy = True
    elif reason == "input is queued":
        os.write(terminal_input, b"what about tomorrow?\n")
    elif reason == "a prompt is half-typed":
        assert repl._session is not None
        repl._session.default_buffer.text = "hello wor"
    else:
        assert repl.approver is not None
        repl.approver.open = True


def release(repl: Repl, reason: str, terminal_input: int) -> None:
    repl._busy = False
    assert repl._session is not None and repl.approver is not None
    repl._session.default_buffer.text = ""
    repl.approver.open = False
    if reason == "input is queued":
        os.read(sys.stdin.fileno(), 1024)  # the prompt reads the line


REASONS = ["a turn is running", "input is queued", "a prompt is half-typed", "an approval is open"]


@pytest.mark.parametrize("reason", REASONS)
async def test_a_beat_waits_while_busy_and_runs_at_the_next_free_moment(
    repl: Repl, terminal_input: int, reason: str
) -> None:
    clock = ManualClock(datetime(2026, 12, 1, 10, 0, tzinfo=UTC))
    times: list[datetime] = []

    async def check_in(prompt: str) -> str:
        times.append(clock.now())
        return "HEARTBEAT_OK"

    assert not repl.busy()
    hold(repl, reason, terminal_input)
    assert repl.busy()
    async with Heartbeat(check_in, interval_seconds=600, is_busy=repl.busy, retry_seconds=15, clock=clock):
        await clock.advance(25 * 60)  # the beat of 10:10 and the one of 10:20 fall due meanwhile
        assert times == []
        release(repl, reason, terminal_input)
        assert not repl.busy()
        await clock.advance(30)
    assert len(times) == 1, "the waiting beat ran once, not once for every interval it missed"
    assert datetime(2026, 12, 1, 10, 25, tzinfo=UTC) <= times[0] <= datetime(2026, 12, 1, 10, 25, 30, tzinfo=UTC)
