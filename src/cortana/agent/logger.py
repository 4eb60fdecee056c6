"""``AgentLogger``: live progress of a run in the terminal.

A spinner while the model thinks, one row per tool call (name, short
arguments, status, duration) and a summary line when the run ends. When the
output is not a terminal (piped, CI) it prints plain lines instead.
"""

from __future__ import annotations

import json
import time
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from cortana.agent.events import (
    ModelCallFinished,
    ModelCallStarted,
    RunEvent,
    RunFinished,
    TaskEvent,
    TaskFinished,
    TaskStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from cortana.display import printable
from cortana.messages import RunMetrics, ToolCall

__all__ = ["AgentLogger", "format_arguments", "summary_line"]


def format_arguments(call: ToolCall, width: int = 60) -> str:
    """``name(arg=value, ...)`` shortened to ``width`` characters."""
    if call.raw_arguments is not None and not call.arguments:
        inner = call.raw_arguments
    else:
        inner = ", ".join(
            f"{key}={json.dumps(value, ensure_ascii=False, default=str)}" for key, value in call.arguments.items()
        )
    return printable(f"{call.name}({_shorten(inner, width)})")


def _shorten(text: str, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summary_line(metrics: RunMetrics) -> str:
    """One line: model calls, tools, tokens in/out and cached, elapsed."""
    tools = f"{metrics.tool_calls} tool{'s' if metrics.tool_calls != 1 else ''}"
    if metrics.tool_errors:
        tools += f" ({metrics.tool_errors} failed)"
    cached = f", {metrics.cached_prompt_tokens:,} cached" if metrics.cached_prompt_tokens else ""
    return (
        f"{metrics.model_calls} model call{'s' if metrics.model_calls != 1 else ''} · {tools} · "
        f"{metrics.prompt_tokens:,} in{cached} / {metrics.completion_tokens:,} out tokens · {metrics.elapsed:.1f}s"
    )


class AgentLogger:
    """Shows a run's progress; pass it as ``Agent(logger=AgentLogger())``.

    Args:
        console: where to draw (default: a console on stderr, so stdout stays the answer's).
        file: a file to write to instead of ``console`` (plain lines).
        plain: force plain lines (True) or animation (False); default: animate only on a terminal.
    """

    def __init__(
        self, console: Console | None = None, *, file: IO[str] | None = None, plain: bool | None = None
    ) -> None:
        self.console = console or Console(file=file, stderr=file is None)
        self.plain = (not self.console.is_terminal) if plain is None else plain
        self._live: Live | None = None
        self._running: dict[str, tuple[str, float]] = {}  # tool call or task -> (its row's text, start time)
        self._thinking_since: float | None = None

    def handle(self, event: RunEvent | TaskEvent) -> None:
        """Update the display for one run or ``AgentRunner`` event."""
        if isinstance(event, ModelCallStarted):
            self._thinking_since = time.perf_counter()
            self._refresh()
        elif isinstance(event, TextDelta):
            if self._thinking_since is not None:
                self._thinking_since = None
                self._stop()  # the answer is streaming: get the spinner out of its way
        elif isinstance(event, ModelCallFinished):
            self._thinking_since = None
            self._refresh()
        elif isinstance(event, ToolCallStarted):
            self._running[event.call.id] = (format_arguments(event.call), time.perf_counter())
            self._refresh()
        elif isinstance(event, ToolCallProgress):
            row = self._running.get(event.call.id)
            if row is not None:  # the running row says what the call is doing now
                self._running[event.call.id] = (f"{format_arguments(event.call)} · {printable(event.text)}", row[1])
                self._refresh()
        elif isinstance(event, ToolCallFinished):
            self._running.pop(event.call.id, None)
            self._print(self._tool_row(event))
            self._refresh()
        elif isinstance(event, RunFinished):
            self._stop()
            self._print(Text(summary_line(event.result.metrics), style="dim"))
        elif isinstance(event, TaskStarted):
            self._running[f"task:{event.label}"] = (
                printable(_shorten(f"{event.label}: {event.prompt}")),
                time.perf_counter(),
            )
            self._refresh()
        elif isinstance(event, TaskFinished):
            self._running.pop(f"task:{event.label}", None)
            self._print(self._task_row(event))
            self._refresh()

    def close(self) -> None:
        """Stop any animation (after a run that raised)."""
        self._running.clear()
        self._thinking_since = None
        self._stop()

    @staticmethod
    def _task_row(event: TaskFinished) -> Text:
        if event.ok:
            metrics = event.metrics
            return Text.assemble(
                ("✓ ", "green"),
                printable(event.label),
                (f"  {event.duration:.2f}s · {metrics.model_calls} model calls · {metrics.tool_calls} tools", "dim"),
            )
        detail = printable((event.error or "failed")[:120])
        label = printable(event.label)
        return Text.assemble(("✗ ", "red"), label, (f"  {event.duration:.2f}s  ", "dim"), (detail, "red"))

    def _tool_row(self, event: ToolCallFinished) -> Text:
        status, style = ("✗", "red") if event.is_error else ("✓", "green")
        row = Text.assemble((f"{status} ", style), format_arguments(event.call), (f"  {event.duration:.2f}s", "dim"))
        if event.is_error:
            first_line = (event.result.content.splitlines() or [""])[0]
            row.append(f"  {printable(first_line[:100])}", style="red")
        return row

    def _print(self, renderable: Any) -> None:
        if self._live is not None:
            self._live.console.print(renderable)
        else:
            self.console.print(renderable, highlight=False, soft_wrap=True)

    def _renderable(self) -> Group:
        parts: list[Any] = []
        now = time.perf_counter()
        for row, since in self._running.values():
            parts.append(Spinner("dots", Text.assemble(row, (f"  {now - since:.1f}s", "dim"))))
        if self._thinking_since is not None:
            parts.append(Spinner("dots", Text(f"thinking… {now - self._thinking_since:.1f}s", style="dim")))
        return Group(*parts)

    def _refresh(self) -> None:
        if self.plain:
            return
        if not self._running and self._thinking_since is None:
            self._stop()
            return
        if self._live is None:
            self._live = Live(
                get_renderable=self._renderable, console=self.console, transient=True, refresh_per_second=10
            )
            self._live.start()
        else:
            self._live.refresh()

    def _stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
