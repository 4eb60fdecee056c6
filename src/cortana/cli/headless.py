"""``cortana -p``: one answer for a script or a CI step, as text, one JSON object, or JSON lines as it happens.

``--output-format text`` writes the answer to stdout and nothing else. ``json`` writes one object when the turn
ends (the answer, the thread, usage, time, every tool call, the fix's diff and tests). ``stream-json`` writes
one event per line while the turn runs, in the shape of ``codex exec --json``: ``thread.started``,
``turn.started``, ``item.started`` / ``item.delta`` / ``item.updated`` / ``item.completed``, then
``turn.completed`` with usage, or ``turn.failed`` (``error`` for what fails outside a turn). docs/headless.md is
the schema. Nothing is asked: with no terminal, what needs approval is refused unless ``--yes`` or cortana.yml
allows it. The exit status is 0 for an answer, 1 for an error (with the error as an event in the JSON formats).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console

from cortana.assistant import Assistant
from cortana.cli.session import import_turn_modules, workspace_assistant
from cortana.display import printable
from cortana.errors import CortanaError
from cortana.streams import closing
from cortana.turn.events import (
    FixFinished,
    FixFound,
    FixProgress,
    FixStarted,
    ImagesAttached,
    PromptCut,
    TurnEvent,
    TurnFinished,
    TurnHeld,
    TurnResult,
)

if TYPE_CHECKING:
    from cortana.agent.events import RunEvent
    from cortana.messages import RunMetrics, ThreadRef
    from cortana.repair.run import FixOutcome, Progress
    from cortana.repair.testrun import TestReport

__all__ = ["HeadlessOutput", "Usage", "run_print"]

SCHEMA_VERSION = 1
"""The version of the events' shape (docs/headless.md); a change that removes or renames a field bumps it."""


@dataclass
class Usage:
    """Tokens one turn used, over all its model calls (the fix workflow's included)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0

    def add_metrics(self, metrics: RunMetrics) -> None:
        """Count a run's tokens."""
        self.input_tokens += metrics.prompt_tokens
        self.cached_input_tokens += metrics.cached_prompt_tokens
        self.output_tokens += metrics.completion_tokens
        self.model_calls += metrics.model_calls

    def as_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "model_calls": self.model_calls,
        }


def _tests(report: TestReport | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return {
        "ok": report.ok,
        "passed": len(report.passed),
        "failed": sorted(report.failed),
        "seconds": round(report.seconds, 3),
        "timed_out": report.timed_out,
    }


def fix_item(outcome: FixOutcome) -> dict[str, Any]:
    """The fix workflow's result as an item's fields: status, the diff, the files written, the tests before and
    after, and what it cost."""
    result = outcome.result
    return {
        "status": result.status.value,
        "complete": outcome.complete,
        "message": result.message,
        "diff": result.diff if result.patch is not None else "",
        "closest_diff": result.closest,
        "set_aside_diff": result.set_aside,
        "set_aside_why": result.set_aside_why,
        "files_written": list(outcome.written),
        "tests_before": _tests(result.before),
        "tests_after": _tests(result.after),
        "samples": result.samples,
        "candidates": result.candidates,
        "seconds": round(result.seconds, 3),
    }


@dataclass
class _Turn:
    """What the JSON formats collect about one turn."""

    answer: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    fix: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)


class HeadlessOutput:
    """Writes one turn to ``out`` in ``format`` (``text``, ``json`` or ``stream-json``); see the module docstring.

    A front end calls :meth:`started`, then :meth:`event` with each of the run's events (or :meth:`fix_progress`
    and :meth:`fix_finished` for a fix), then :meth:`finished` or :meth:`failed`; :meth:`error` reports what
    failed before a turn began.
    """

    def __init__(self, format: str, out: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.format = format
        self.out = out if out is not None else sys.stdout
        self._clock = clock
        self._start = clock()
        self._turn = _Turn()
        self._thread: str | None = None
        self._items = 0
        self._message: str | None = None  # the id of the agent message being streamed
        self._open_calls: dict[str, str] = {}  # the model's call id -> the item's id
        self._fix_item: str | None = None
        self._last_char = "\n"

    # -- writing ----------------------------------------------------------------------------------------------

    def _emit(self, event: dict[str, Any]) -> None:
        if self.format == "stream-json":
            self.out.write(json.dumps(event, ensure_ascii=False) + "\n")
            self.out.flush()

    def _next_id(self) -> str:
        item = f"item_{self._items}"
        self._items += 1
        return item

    def _text(self, text: str) -> None:
        if self.format == "text" and text:
            self.out.write(printable(text) if self.out.isatty() else text)
            self.out.flush()
            self._last_char = text[-1]

    # -- the turn ---------------------------------------------------------------------------------------------

    def started(self, thread: ThreadRef, *, resumed: bool) -> None:
        """The turn begins on ``thread`` (``resumed``: a stored conversation the user named)."""
        self._thread = thread.thread_id
        self._start = self._clock()
        self._emit(
            {"type": "thread.started", "thread_id": thread.thread_id, "resumed": resumed, "schema": SCHEMA_VERSION}
        )
        self._emit({"type": "turn.started"})

    def event(self, event: RunEvent) -> None:
        """One of the agent's run events."""
        from cortana.agent.events import (
            ModelCallFinished,
            RunFinished,
            TextDelta,
            ToolCallFinished,
            ToolCallProgress,
            ToolCallStarted,
        )

        if isinstance(event, TextDelta) and event.text:
            self._turn.answer.append(event.text)
            self._text(event.text)
            if self._message is None:
                self._message = self._next_id()
                self._emit({"type": "item.started", "item": {"id": self._message, "type": "agent_message"}})
            self._emit({"type": "item.delta", "item_id": self._message, "delta": event.text})
        elif isinstance(event, ModelCallFinished):
            self._end_message(event.response.message.content)
        elif isinstance(event, ToolCallStarted):
            item = self._next_id()
            self._open_calls[event.call.id] = item
            self._emit({"type": "item.started", "item": self._call_item(item, event.call, "in_progress")})
        elif isinstance(event, ToolCallProgress):
            item = self._open_calls.get(event.call.id, "")
            self._emit({"type": "item.updated", "item": {"id": item, "type": "tool_call", "progress": event.text}})
        elif isinstance(event, ToolCallFinished):
            item = self._open_calls.pop(event.call.id, "") or self._next_id()
            status = "failed" if event.result.is_error else "completed"
            fields = self._call_item(item, event.call, status)
            fields["output"] = event.result.content
            fields["duration_ms"] = round(event.duration * 1000)
            self._turn.tool_calls.append({key: value for key, value in fields.items() if key not in ("id", "type")})
            self._emit({"type": "item.completed", "item": fields})
        elif isinstance(event, RunFinished):
            self._turn.usage.add_metrics(event.result.metrics)

    @staticmethod
    def _call_item(item: str, call: Any, status: str) -> dict[str, Any]:
        arguments: Any = call.arguments if call.arguments or call.raw_arguments is None else call.raw_arguments
        return {"id": item, "type": "tool_call", "name": call.name, "arguments": arguments, "status": status}

    def _end_message(self, text: str) -> None:
        if self._message is None:
            return
        self._emit({"type": "item.completed", "item": {"id": self._message, "type": "agent_message", "text": text}})
        self._message = None
        if self._last_char != "\n":
            self._text("\n")

    # -- a fix --------------------------------------------------------------------------------------------------

    def turn_event(self, event: TurnEvent, console: Console) -> None:
        """One event of the turn, in the format (a cut prompt and a held message also on stderr)."""
        if isinstance(event, PromptCut):
            console.print(event.note, style="yellow", markup=False, highlight=False, soft_wrap=True)
        elif isinstance(event, ImagesAttached):
            console.print(event.note, style="dim", markup=False, highlight=False, soft_wrap=True)
        elif isinstance(event, TurnHeld):
            self.failed(event.message)
        elif isinstance(event, FixStarted):
            self.fix_started(event.request)
        elif isinstance(event, FixProgress):
            self.fix_progress(event.progress)
        elif isinstance(event, FixFinished):
            self.fix_finished(event.outcome)
        elif not isinstance(event, FixFound | TurnFinished):  # a fix is written as the gate allows: nothing to ask
            self.event(event)

    def fix_started(self, request: str) -> None:
        """The fix workflow starts on ``request``."""
        self._fix_item = self._next_id()
        self._emit({"type": "item.started", "item": {"id": self._fix_item, "type": "fix", "request": request}})

    def fix_progress(self, progress: Progress) -> None:
        """One of the fix workflow's steps."""
        self._emit(
            {
                "type": "item.updated",
                "item": {
                    "id": self._fix_item,
                    "type": "fix",
                    "stage": str(progress.stage),
                    "message": progress.message,
                    "seconds": round(progress.seconds, 3),
                },
            }
        )

    def fix_finished(self, outcome: FixOutcome) -> None:
        """The fix ended: its result, then its answer as the turn's message."""
        result = outcome.result
        self._turn.fix = fix_item(outcome)
        self._turn.usage.input_tokens += result.prompt_tokens
        self._turn.usage.cached_input_tokens += result.cached_tokens
        self._turn.usage.output_tokens += result.completion_tokens
        self._turn.usage.model_calls += result.model_calls
        self._emit({"type": "item.completed", "item": {"id": self._fix_item, "type": "fix", **self._turn.fix}})
        answer = outcome.answer
        self._turn.answer.append(answer)
        self._text(answer)
        message = self._next_id()
        self._emit({"type": "item.completed", "item": {"id": message, "type": "agent_message", "text": answer}})
        if self._last_char != "\n":
            self._text("\n")

    @property
    def answer(self) -> str:
        """Everything the model wrote in the turn so far."""
        return "".join(self._turn.answer)

    # -- the end ------------------------------------------------------------------------------------------------

    def _elapsed_ms(self) -> int:
        return round((self._clock() - self._start) * 1000)

    def finished(self) -> None:
        """The turn ended with an answer."""
        self._end_message("".join(self._turn.answer))
        usage = self._turn.usage.as_json()
        self._emit({"type": "turn.completed", "usage": usage, "duration_ms": self._elapsed_ms()})
        if self.format == "json":
            self._result(error=None)

    def failed(self, message: str) -> None:
        """The turn (or what came before it) ended with an error: said on stderr, and as an event."""
        print(f"cortana: {message}", file=sys.stderr)
        if self._thread is not None:
            self._emit({"type": "turn.failed", "error": {"message": message}, "duration_ms": self._elapsed_ms()})
        else:
            self._emit({"type": "error", "message": message})
        if self.format == "json":
            self._result(error=message)

    def _result(self, error: str | None) -> None:
        turn = self._turn
        result = {
            "type": "result",
            "schema": SCHEMA_VERSION,
            "is_error": error is not None,
            "error": error,
            "answer": "".join(turn.answer),
            "thread_id": self._thread,
            "duration_ms": self._elapsed_ms(),
            "usage": turn.usage.as_json(),
            "tool_calls": turn.tool_calls,
            "fix": turn.fix,
        }
        self.out.write(json.dumps(result, ensure_ascii=False) + "\n")
        self.out.flush()


async def run_print(args: argparse.Namespace, prompt: str, output: HeadlessOutput, *, fix: bool = False) -> int:
    """``cortana -p``: answer ``prompt`` once for a script, writing to ``output``; nothing is asked on the terminal.

    Every error, from the engine's start to the turn's end, is written as the format's error (and on stderr), with
    exit status 1; the user's message is kept in the thread even when the turn fails.
    """
    if not prompt.strip() and not fix:
        output.failed("-p needs a question: give it as arguments, or pipe it in")
        return 2
    console = Console(stderr=True)
    assistant: Assistant | None = None
    try:
        assistant = await workspace_assistant(args, console, allow_all=args.yes, voice=False, heartbeat=False)
        settings = assistant.settings
        resumed = bool(args.resume)
        thread = await assistant.find_thread(args.resume) if args.resume else assistant.thread
        if not fix and not assistant.wants_fix(prompt):
            await asyncio.to_thread(import_turn_modules)
        warning = assistant.sandbox_warning()
        if warning is not None:  # on stderr, as the terminal says it at its start: stdout is the script's
            console.print(warning, style="yellow", markup=False, highlight=False, soft_wrap=True)
        plan = bool(getattr(args, "plan", False))
        output.started(thread, resumed=resumed)
        result: TurnResult | None = None
        turn = assistant.turn(prompt, thread=thread, plan=plan, fix=True if fix else None, starting=True, attach=True)
        async with closing(turn) as events:
            async for event in events:
                if isinstance(event, TurnFinished):
                    result = event.result
                else:
                    output.turn_event(event, console)
        assert result is not None, "a turn that ends without an error ends with TurnFinished"
        if result.held is not None:
            return 1
        output.finished()
        agent = assistant.ready_agent
        if agent is not None and agent.background.pending:  # what the turn taught is learned before the end
            await agent.background.wait(timeout=settings.learning.distill_wait_seconds)
        return 0 if result.complete else 1
    except BrokenPipeError:
        raise  # the reader went away: nothing to tell it (``main`` ends quietly)
    except (CortanaError, OSError) as error:
        message = str(error) if isinstance(error, CortanaError) else f"{error.strerror or error}"
        output.failed(message)
        return 1
    finally:
        if assistant is not None:
            await assistant.aclose()
