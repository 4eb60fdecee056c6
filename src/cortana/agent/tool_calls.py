"""Running one reply's tool calls: resolve, authorize and validate each in order, then run them.

Calls are checked in request order, so approval prompts never overlap and a
denial is decided before any sibling call starts; the valid ones then run at
most ``max_parallel_tools`` at a time (one by one with
``parallel_tool_calls=False``). Every failure (unknown tool, denied, invalid
or unparseable arguments, an exception) becomes a tool message with
``is_error=True`` that the model reads; results come back in request order.

In a run that defers approvals, a call a person must allow neither runs nor
gets a result: it waits in :attr:`CallRunner.pending` while the round's other
calls run, and :meth:`CallRunner.resume` finishes the round once a person
answered (``agent/approvals.py``): the waiting calls run or are refused, and
the others keep the results they got before, so none runs twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import time
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from cortana.agent.approvals import refusal_reason
from cortana.agent.events import RunEvent, ToolCallFinished, ToolCallProgress, ToolCallStarted
from cortana.agent.recorder import Recorder
from cortana.agent.repeats import RepeatGuard
from cortana.agent.run_config import RunConfig
from cortana.agent.toolbox import Toolbox
from cortana.errors import ToolError
from cortana.messages import Approval, Message, PendingApproval, Refusal, ToolCall
from cortana.prompts import as_data
from cortana.streams import closing
from cortana.tools import RunContext, Tool, bound_output, format_tool_result
from cortana.tools.permissions import AskBudget, authorize_call

if TYPE_CHECKING:
    from cortana.agent.tracing import RunTracer

__all__ = ["CallRunner"]

_DENIED = "Permission denied for "


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A call that passed the checks: its place in the reply, its tool and validated arguments."""

    index: int
    call: ToolCall
    tool: Tool
    arguments: dict[str, object]
    waits: str | None = None
    """Why a person must allow it first (a run that defers approvals pauses at it); ``None``: it may run."""


class CallRunner:
    """Runs the tool calls of one run's replies (see the module docstring).

    ``defer``: a call a person must allow waits (:attr:`pending`) instead of going to the gate's approver.
    ``recorder``: a durable run's; the gate's decisions and the calls that run go through it (``agent/recorder.py``).
    """

    def __init__(
        self,
        config: RunConfig,
        toolbox: Toolbox,
        context: RunContext,
        tracer: RunTracer | None = None,
        *,
        defer: bool = False,
        recorder: Recorder | None = None,
    ) -> None:
        self.config = config
        self.toolbox = toolbox
        self.context = context
        self.tracer = tracer
        self.defer = defer
        self.recorder = recorder
        self.guard = RepeatGuard()
        self.changed_by: list[str] = []
        """Names of the tools that ran and are not read-only, in order (``RunResult.changed_by``)."""
        self.failed: list[Message] = []
        """The last round's results when every call in it failed for the model's own reasons (none refused)."""
        self.pending: list[_Prepared] = []
        """The last round's calls that wait for a person's answer (only with ``defer``): the run pauses."""

    @property
    def waiting(self) -> list[PendingApproval]:
        """The calls that wait for a person's answer, as the paused run's result lists them."""
        return [
            PendingApproval(call_id=item.call.id, tool=item.tool.name, arguments=item.call.arguments, reason=item.waits)
            for item in self.pending
            if item.waits
        ]

    async def run(self, calls: list[ToolCall], results: list[Message]) -> AsyncIterator[RunEvent]:
        """Run ``calls``; fills ``results`` with one tool message per call, in request order.

        Yields a started/finished event pair per call as it happens. A call that waits for a person (``defer``)
        neither runs nor gets a result: it is left in :attr:`pending`, and ``results`` holds the others'.
        """
        self.context.metrics.tool_calls += len(calls)
        slots: list[Message | None] = [None] * len(calls)
        runnable: list[_Prepared] = []
        self.pending = []
        gate = self.config.permissions
        asks = AskBudget(gate.max_asks_per_response) if gate is not None else None
        for index, call in enumerate(calls):
            if self.toolbox.resolve(call.name) is None:  # not offered: never started, no event; the model reads why
                slots[index] = self._unknown(call)
                self.context.metrics.unknown_tool_calls += 1
                continue
            checked = await self._check(index, call, asks)
            if isinstance(checked, _Prepared):
                (runnable if checked.waits is None else self.pending).append(checked)
                continue
            slots[index] = checked
            for event in self._not_run(call, checked):
                yield event
        async with closing(self._run_all(runnable, slots)) as opened:
            async for event in opened:
                yield event
        results.extend(self._settle(calls, runnable, slots))

    async def resume(
        self, calls: list[ToolCall], held: Sequence[Message], answers: Mapping[str, Approval], results: list[Message]
    ) -> AsyncIterator[RunEvent]:
        """Finish a round that paused: each call without a result in ``held`` runs if its answer is ``True``, else
        is refused with the answer's reason; the others keep their results from before the pause (they do not
        run again). Fills ``results`` with the whole round's, in request order."""
        before = {message.tool_call_id: message for message in held}
        slots: list[Message | None] = [before.get(call.id) for call in calls]
        runnable: list[_Prepared] = []
        for index, call in enumerate(calls):
            if slots[index] is not None:
                continue
            tool = self.toolbox.resolve(call.name)
            if tool is None:  # not so: the tools were checked to be the ones the run paused with
                slots[index] = self._unknown(call)
                continue
            answer = answers[call.id]
            try:
                if answer is True:
                    runnable.append(_Prepared(index, call, tool, tool.validate(call.arguments)))
                    continue
                message = _refused(call, tool, refusal_reason(answer), "approval")
            except ToolError as exc:  # the tools are the ones it paused with, so its arguments still validate
                message = Message.tool(call, str(exc), is_error=True)
            slots[index] = message
            for event in self._not_run(call, message):
                yield event
        async with closing(self._run_all(runnable, slots)) as opened:
            async for event in opened:
                yield event
        results.extend(self._settle(calls, runnable, slots, held=before.keys()))

    def recall(self, turn: Sequence[Message]) -> None:
        """Remember the calls of a turn's rounds and their results (a run that goes on after a pause, maybe in
        another process, repeats no read the turn made and is nudged on repeated calls as before)."""
        answers = {message.tool_call_id: message for message in turn if message.role == "tool"}
        for message in turn:
            answered = [(call, answers[call.id]) for call in message.tool_calls if call.id in answers]
            ran = [(call, self.toolbox.known(call.name), result) for call, result in answered if not result.refusal]
            self.guard.record([(call, tool, result) for call, tool, result in ran if tool is not None])
            self.guard.record_failures(call for call, result in answered if result.is_error)

    def _not_run(self, call: ToolCall, message: Message) -> list[RunEvent]:
        """The events of a call answered without running (refused, invalid, a repeated read), traced as a call."""
        if self.tracer is not None:
            with self.tracer.tool_call(call) as traced:
                traced(message)
        tool = self.toolbox.known(call.name)
        return [ToolCallStarted(call, tool), ToolCallFinished(call, message, 0.0, tool)]

    def _settle(
        self,
        calls: list[ToolCall],
        ran: list[_Prepared],
        slots: list[Message | None],
        *,
        held: Collection[str | None] = (),
    ) -> list[Message]:
        """The round's results (as data), in request order, and what the run keeps of them: the guard, the tools
        that changed something, the errors; whether the whole round failed, once none of its calls waits.

        ``held``: the ids of the calls whose results came from before a pause (their errors were counted then).
        """
        # Every result is what a tool, a server or a file said: data that must not forge the prompt's structure.
        done = {index: message.model_copy(update={"content": as_data(message.content)})
                for index, message in enumerate(slots) if message is not None}  # fmt: skip
        assert len(done) + len(self.pending) == len(calls), "every call has its result, or waits"
        self.guard.record([(item.call, item.tool, done[item.index]) for item in ran])
        self.guard.record_failures(calls[index] for index, message in done.items() if message.is_error)
        self.changed_by.extend(item.tool.name for item in ran if not item.tool.read_only)
        self.context.metrics.tool_errors += sum(m.is_error for m in done.values() if m.tool_call_id not in held)
        results = list(done.values())
        all_failed = all(message.is_error for message in results) and not any(m.refusal for m in results)
        self.failed = results if all_failed and not self.pending else []
        return results

    def _unknown(self, call: ToolCall) -> Message:
        """The result of a call of a tool that was not offered."""
        return Message.tool(
            call,
            f"Unknown tool '{call.name}'. Available tools: {', '.join(self.toolbox.names()) or '(none)'}.",
            is_error=True,
        )

    async def _check(self, index: int, call: ToolCall, asks: AskBudget | None) -> Message | _Prepared:
        """The tool and validated arguments for ``call``, or the message the model gets instead."""
        tool = self.toolbox.resolve(call.name)
        if tool is None:
            return self._unknown(call)
        hooks = self.config.tool_hooks
        blocked = await hooks.before_tool(call, tool) if hooks is not None else None
        if blocked is not None:  # a rule of the user's said no, before anyone is asked: the model reads why
            return _refused(call, tool, blocked, "hook")
        decide = partial(authorize_call, self.config.permissions, call, tool, self.context, asks, defer=self.defer)
        if self.recorder is not None and self.config.permissions is not None:  # no gate: nobody asked, nothing kept
            decision = await self.recorder.decision(call, decide)
        else:
            decision = await decide()
        waits = (decision.reason or "policy: ask") if self.defer and decision.action == "ask" else None
        if decision.action != "allow" and waits is None:
            return _refused(call, tool, f"{decision.reason}.", "approval" if decision.needed_approval else "policy")
        if call.raw_arguments is not None and not call.arguments:
            return Message.tool(
                call,
                f"The arguments for '{tool.name}' are not a valid JSON object: {call.raw_arguments[:500]!r}. "
                f"Call it again with a JSON object matching: {tool.parameters.get('properties', {})}",
                is_error=True,
            )
        try:
            arguments = tool.validate(call.arguments)
        except ToolError as exc:
            return Message.tool(call, str(exc), is_error=True)
        earlier = self.guard.earlier_read(call) if tool.read_only else None
        if earlier is not None:
            return Message.tool(
                call,
                f"Same call as {earlier} earlier in this run, and nothing has been written or run since: "
                "its result above still holds.",
            )
        return _Prepared(index, call, tool, arguments, waits)

    async def _run_all(self, runnable: list[_Prepared], slots: list[Message | None]) -> AsyncIterator[RunEvent]:
        """Run the calls (at most ``max_parallel_tools`` at once, else one after another, in order), yielding each
        one's started, progress and finished events as they happen."""
        limit = self.config.max_parallel_tools if self.config.parallel_tool_calls else 1
        events: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        semaphore = asyncio.Semaphore(limit)  # waiters are served first come, first served: order is kept at 1

        async def run_one(item: _Prepared) -> None:
            try:
                async with semaphore:
                    events.put_nowait(ToolCallStarted(item.call, item.tool))
                    result, duration = await self._invoke(item, events)
                    slots[item.index] = result
                    events.put_nowait(ToolCallFinished(item.call, result, duration, item.tool))
            finally:
                events.put_nowait(None)  # this call is over, however it ended

        tasks = [asyncio.create_task(run_one(item)) for item in runnable]
        try:
            ended = 0
            while ended < len(tasks):
                event = await events.get()
                if event is None:
                    ended += 1
                else:
                    yield event
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    def timeout_for(self, tool: Tool) -> float | None:
        """The seconds one call of ``tool`` may run: the agent's rule for it, else the tool's own, else the default."""
        for pattern, seconds in self.config.tool_timeouts.items():
            if fnmatch.fnmatchcase(tool.name, pattern):
                return seconds
        return tool.timeout if tool.timeout is not None else self.config.tool_timeout

    async def _invoke(self, item: _Prepared, events: asyncio.Queue[RunEvent | None]) -> tuple[Message, float]:
        """Run one validated call, bounded in time and output; an exception becomes an error result. What it
        reports (``RunContext.report``) goes to ``events`` as :class:`ToolCallProgress`.

        Traced, the call's ``execute_tool`` span is current while it runs, in whichever task runs it.
        """

        def progress(text: str) -> None:
            events.put_nowait(ToolCallProgress(item.call, text, item.tool))

        context = dataclasses.replace(self.context, progress=progress)
        run = partial(self._invoke_untraced, item, context)
        if self.tracer is None:
            return await (run() if self.recorder is None else self.recorder.tool_call(item.call, run))
        with self.tracer.tool_call(item.call) as traced:
            message, duration = await (run() if self.recorder is None else self.recorder.tool_call(item.call, run))
            traced(message)
        return message, duration

    async def _invoke_untraced(self, item: _Prepared, context: RunContext) -> tuple[Message, float]:
        started = time.perf_counter()
        limit = self.config.max_tool_output
        timeout = self.timeout_for(item.tool)
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                value = await item.tool.invoke(item.arguments, context)
            message = Message.tool(item.call, bound_output(format_tool_result(value), limit))
        except TimeoutError as exc:
            if not deadline.expired():
                message = _failure(item, exc, limit)
            else:
                message = Message.tool(
                    item.call,
                    f"Error: '{item.tool.name}' did not finish within {timeout:g}s and was stopped "
                    "(tool_timeout). Try a smaller piece of the work.",
                    is_error=True,
                )
        except ToolError as exc:
            message = Message.tool(item.call, bound_output(f"Error: {exc}", limit), is_error=True)
        except Exception as exc:
            message = _failure(item, exc, limit)
        hooks = self.config.tool_hooks
        said = await hooks.after_tool(item.call, item.tool, message) if hooks is not None else None
        if said:
            message = message.model_copy(
                update={"content": f"{message.content}\n[a hook after {item.tool.name}: {said}]"}
            )
        return message, time.perf_counter() - started


def _refused(call: ToolCall, tool: Tool, reason: str, refusal: Refusal) -> Message:
    """The result of a call refused before it ran: why, in words for the model, and as a typed fact (``refusal``)."""
    message = Message.tool(call, f"{_DENIED}'{tool.name}': {reason}", is_error=True)
    return message.model_copy(update={"refusal": refusal})


def _failure(item: _Prepared, exc: BaseException, limit: int) -> Message:
    text = f"Error: tool '{item.tool.name}' raised {type(exc).__name__}: {exc}"
    return Message.tool(item.call, bound_output(text, limit), is_error=True)
