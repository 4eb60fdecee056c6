"""TurnStats: the first token, each model call's prompt read and cached, tokens/s; and /stats, --verbose."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from cortana import Agent, Message, Usage
from cortana.agent import turnstats
from cortana.agent.events import ModelCallFinished, ModelCallStarted, TextDelta
from cortana.agent.turnstats import TurnStats
from cortana.cli.main import build_parser
from cortana.cli.repl import Repl
from cortana.models.base import ModelResponse
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response
from tests.unit.test_assistant import assistant_on


def finished(duration: float, prompt: int, cached: int, generated: int) -> ModelCallFinished:
    usage = Usage(prompt_tokens=prompt, cached_tokens=cached, completion_tokens=generated)
    return ModelCallFinished(ModelResponse(Message.assistant("x"), usage=usage), duration=duration, iteration=0)


def test_counts_and_times_come_from_the_events(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = TurnStats(started=100.0)
    clock = iter([100.5, 101.0, 101.2, 103.0])
    monkeypatch.setattr(turnstats.time, "perf_counter", lambda: next(clock))
    stats.handle(ModelCallStarted(iteration=0))  # 100.5
    stats.handle(TextDelta("Hel"))  # 101.0: first token, 0.5 s into the call
    stats.handle(TextDelta("lo"))  # 101.2
    stats.handle(finished(duration=2.5, prompt=1200, cached=1100, generated=41))  # 103.0
    monkeypatch.undo()
    [call] = stats.calls
    assert stats.first_token == 1.0 and call.first_token == 0.5
    assert call.reread_tokens == 100 and call.generation_rate == 40 / 2.0
    assert stats.summary().startswith("first token 1.0s · ")
    assert "prompt 1,200 tokens (100 read, 1,100 from cache)" in stats.summary()
    assert "41 generated at 20.0 tokens/s" in stats.summary()
    assert stats.lines()[1] == (
        "  call 1: 2.5s (first token after 0.5s, prompt 1,200: 100 read, 1,100 from cache; "
        "41 generated at 20.0 tokens/s)"
    )


async def test_a_real_turn_with_a_tool_call_has_one_row_per_model_call() -> None:
    def lookup(term: str) -> str:
        """Look up."""
        return "found"

    model = ScriptedModel([tool_call_response(tool_call("lookup", term="x")), ScriptedResponse(text="It is x.")])
    agent = Agent(model, tools=[lookup], tool_guidance=False)
    stats = TurnStats()
    async for event in agent.run_stream("find x"):
        stats.handle(event)
    assert len(stats.calls) == 2 and stats.calls[0].first_token is None, "a call of tools only streams nothing"
    assert stats.first_token is not None and stats.finished_at is not None
    assert "2 model calls" in stats.summary() and len(stats.lines()) == 3


async def test_slash_stats_shows_the_last_turn_and_verbose_prints_a_line_after_each(tmp_path: Path) -> None:
    console, out = Console(file=io.StringIO(), width=200), Console(file=io.StringIO(), width=200)
    assistant = assistant_on(tmp_path, ScriptedModel(["Hello there."]))
    await assistant.agent()
    repl = Repl(assistant, console, verbose=True)
    repl.out = out
    await repl._command("/stats")
    assert "No turn yet" in console.file.getvalue()  # type: ignore[attr-defined]
    await repl._turn("hi")
    assert "1 model call" in console.file.getvalue()  # type: ignore[attr-defined]
    await repl._command("/stats")
    shown = out.file.getvalue()  # type: ignore[attr-defined]
    assert "first token" in shown and "call 1:" in shown
    await assistant.aclose()
    assert build_parser().parse_args(["--verbose"]).verbose and build_parser().parse_args(["-v"]).verbose
