"""AgentLogger: plain lines when not on a terminal, and a summary at the end."""

from __future__ import annotations

import io
import re

from rich.console import Console

from cortana import Agent, AgentLogger, ToolCall, tool
from cortana.agent.logger import format_arguments, summary_line
from cortana.messages import RunMetrics
from cortana.testing import ScriptedModel, tool_call, tool_call_response


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    if term == "bad":
        raise ValueError("no such term")
    return "found"


async def test_plain_output_has_a_row_per_tool_and_a_summary() -> None:
    buffer = io.StringIO()
    logger = AgentLogger(file=buffer)
    assert logger.plain, "a StringIO is not a terminal"
    model = ScriptedModel([tool_call_response(tool_call("lookup", term="cats"), tool_call("lookup", term="bad")), "ok"])
    await Agent(model, tools=[lookup], logger=logger).run("x")
    lines = buffer.getvalue().splitlines()
    assert lines[0].startswith('✓ lookup(term="cats")')
    assert lines[1].startswith('✗ lookup(term="bad")') and "no such term" in lines[1]
    assert lines[2].startswith("2 model calls · 2 tools (1 failed) · ")
    assert "\x1b[" not in buffer.getvalue(), "no escape codes when piped"


async def test_terminal_mode_animates_and_cleans_up() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100)
    logger = AgentLogger(console)
    assert not logger.plain
    model = ScriptedModel([tool_call_response(tool_call("lookup", term="cats")), "ok"])
    await Agent(model, tools=[lookup], logger=logger).run("x")
    text = buffer.getvalue()
    plain_text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert re.search(r'✓ lookup\(term="cats"\)  \d+\.\d\ds\n', plain_text), "the finished tool's row stays on screen"
    assert "\x1b[" in text, "a terminal gets styling and animation"
    assert "2 model calls · 1 tool · " in text
    assert logger._live is None


def test_argument_formatting_is_short() -> None:
    call = ToolCall(id="1", name="write", arguments={"path": "a.txt", "text": "x" * 200})
    assert format_arguments(call, width=30) == 'write(path="a.txt", text="xxxxxxxxx…)'
    assert format_arguments(ToolCall(id="2", name="f", raw_arguments="{oops")) == "f({oops)"


def test_summary_line() -> None:
    metrics = RunMetrics(
        model_calls=1, tool_calls=0, prompt_tokens=1234, completion_tokens=56, cached_prompt_tokens=1000, elapsed=2.25
    )
    assert summary_line(metrics) == "1 model call · 0 tools · 1,234 in, 1,000 cached / 56 out tokens · 2.2s"
