"""The run lifecycle, written once for ``run`` and ``run_stream``.

    prompt + thread
      -> memory: history, long-term context, provider tools
      -> messages = system + history + (context + user message)
      -> model call
           no tool calls -> RunResult
           tool calls    -> screen them (ungrounded text calls, repeats of
                            answered calls: nudge, or ask again without tools)
                         -> authorize each, validate arguments, run them with
                            bounded concurrency, append results in request
                            order -> next model call

Every message is handed to memory as soon as it is final, so an engine that
dies mid-turn loses nothing already said.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TYPE_CHECKING

from cortana.agent.compaction import compact, compaction_threshold, effective_window, estimate_tokens, measure
from cortana.agent.events import (
    ModelCallFinished,
    ModelCallStarted,
    RunEvent,
    RunFinished,
    ToolCallFinished,
    ToolCallStarted,
)
from cortana.agent.grounding import conversation_evidence, is_grounded
from cortana.agent.toolbox import Toolbox
from cortana.errors import MaxToolIterationsError, ModelError, ToolError
from cortana.memory.base import MemoryProvider, resolve_memory
from cortana.messages import Message, RunMetrics, RunResult, ThreadRef, ToolCall
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, ToolSpec
from cortana.prompts import prompt_text
from cortana.tools.base import RunContext, Tool, as_tools, format_tool_result, loose_name
from cortana.tools.permissions import authorize_call

if TYPE_CHECKING:
    from cortana.agent.agent import Agent

__all__ = ["run_events"]


async def run_events(
    agent: Agent,
    prompt: str,
    *,
    thread: ThreadRef,
    context: str | None,
    history: Sequence[Message] | None,
    settings: ModelSettings,
) -> AsyncGenerator[RunEvent, None]:
    """Run one turn of ``agent`` and yield its events; the last is :class:`RunFinished`."""
    started = time.perf_counter()
    metrics = RunMetrics()
    memory = await resolve_memory(agent.memory, thread)
    past = list(history or [])
    if memory is not None:
        past += await memory.load_history(thread)
        recalled = await memory.retrieve_context(thread, prompt)
        context = "\n\n".join(part for part in (recalled, context) if part) or None
    provider_tools, _ = as_tools(memory.tools(thread)) if memory is not None else ([], [])
    toolbox = Toolbox([*agent.tools, *provider_tools], agent.tool_groups)
    await toolbox.load_eager()

    content = prompt_text("turn_context").format(context=context, prompt=prompt) if context else prompt
    new_messages = [Message.user(content)]
    await _persist(memory, thread, new_messages)
    system_prompt = agent.system_prompt(has_tools=bool(toolbox.specs()))
    system = [Message.system(system_prompt)] if system_prompt else []
    transcript = [*system, *past, *new_messages]
    run_context = RunContext(agent=agent, thread=thread, metrics=metrics, messages=transcript)

    iterations, budget = 0, agent.max_tool_iterations
    answered: set[str] = set()  # calls that already have a successful result in this run
    nudged = False
    withhold_tools = False  # the next model call gets no tools: the model must answer in text
    window = effective_window(agent)
    threshold = compaction_threshold() if window else 1.0
    turn_start = len(system) + len(past)  # index of this turn's first message in the transcript
    while True:
        response: ModelResponse | None = None
        tools = [] if withhold_tools else toolbox.specs()
        if window:
            turn_start = await _fit_window(
                agent, transcript, tools, window, threshold, turn_start, memory, thread, metrics
            )
        async for event in _call_model(agent, transcript, tools, settings, metrics, iterations):
            if isinstance(event, ModelCallFinished):
                response = event.response
            yield event
        assert response is not None
        reply, verdict = _screen_reply(agent, response.message, transcript, toolbox, answered, nudged)
        if verdict == "withhold":
            withhold_tools = True
            continue
        if verdict == "nudge":
            nudged = True
            nudge = Message(role="user", name="cortana", content=prompt_text("repeat_nudge").format(prompt=prompt))
            _append(transcript, new_messages, nudge)
            await _persist(memory, thread, [nudge])
            continue
        _append(transcript, new_messages, reply)
        if not reply.tool_calls:
            await _persist(memory, thread, [reply])
            break
        if iterations >= budget:
            if agent.on_max_iterations is None or not await agent.on_max_iterations(iterations):
                metrics.elapsed = time.perf_counter() - started
                raise await _stop_at_max_iterations(
                    agent, reply, iterations, transcript, new_messages, memory, thread, metrics
                )
            budget += agent.max_tool_iterations
        iterations += 1
        tool_started = time.perf_counter()
        results: list[Message] = []
        async for event in _run_tool_calls(agent, reply.tool_calls, toolbox, run_context, results):
            yield event
        metrics.tool_time += time.perf_counter() - tool_started
        _remember_answers(answered, reply.tool_calls, results, toolbox)
        _append(transcript, new_messages, *results)
        await _persist(memory, thread, [reply, *results])

    metrics.elapsed = time.perf_counter() - started
    yield RunFinished(
        RunResult(
            output=reply.content,
            new_messages=new_messages,
            metrics=metrics,
            thread=thread,
            stop_reason=response.finish_reason,
        )
    )


async def _fit_window(
    agent: Agent,
    transcript: list[Message],
    tools: list[ToolSpec],
    window: int,
    threshold: float,
    turn_start: int,
    memory: MemoryProvider | None,
    thread: ThreadRef,
    metrics: RunMetrics,
) -> int:
    """Compact the transcript in place when it reaches the threshold; returns the new ``turn_start``.

    Keeps the current turn, or when the turn alone is too big, its newest half-window.
    """
    if await measure(agent, transcript, tools) < threshold * window:
        return turn_start
    keep_from = _recent_start(transcript, tools, budget=window // 2, floor=turn_start)
    first = 1 if transcript and transcript[0].role == "system" else 0
    if keep_from <= first:
        return turn_start  # nothing older to summarize; the engine will say if it cannot fit
    result = await compact(agent, transcript, keep_from=keep_from, window=window)
    transcript[:] = result.messages
    metrics.compactions += 1
    if memory is not None:
        await memory.add_summary(thread, result.summary, kept=result.kept)
    return len(transcript) - result.kept


def _recent_start(transcript: list[Message], tools: list[ToolSpec], *, budget: int, floor: int) -> int:
    """The first index to keep: the current turn (``floor``) if it fits ``budget``, else its newest messages that do."""
    if estimate_tokens(transcript[floor:], tools) <= budget:
        return floor
    index = len(transcript) - 1  # the newest message is always kept
    while index - 1 > floor and estimate_tokens(transcript[index - 1 :], tools) <= budget:
        index -= 1
    return index


def _screen_reply(
    agent: Agent,
    reply: Message,
    transcript: list[Message],
    toolbox: Toolbox,
    answered: set[str],
    nudged: bool,
) -> tuple[Message, str]:
    """What to do with a reply's tool calls: ``run`` them, ``nudge`` the model, or ``withhold`` tools.

    Small models "call" a tool for questions no tool fits, with arguments that
    come from nowhere in the conversation: such text-written calls are dropped,
    and with none left the model is asked for a plain answer. They also call
    the same tool again instead of reading its result: re-running it would
    repeat side effects and loop, so the question is restated once, and then
    tools are withheld.
    """
    if reply.tool_calls and agent.check_grounding:
        evidence = conversation_evidence([*transcript, reply])
        kept = [call for call in reply.tool_calls if _grounded(call, toolbox, evidence)]
        if not kept:
            return reply, "withhold"
        reply = reply.model_copy(update={"tool_calls": kept})
    if reply.tool_calls and agent.nudge_repeated_calls and _all_repeated(reply.tool_calls, answered):
        return reply, "withhold" if nudged else "nudge"
    return reply, "run"


async def _stop_at_max_iterations(
    agent: Agent,
    reply: Message,
    iterations: int,
    transcript: list[Message],
    new_messages: list[Message],
    memory: MemoryProvider | None,
    thread: ThreadRef,
    metrics: RunMetrics,
) -> MaxToolIterationsError:
    """Answer the calls that will not run (so the stored history stays valid) and build the error."""
    unrun = [
        Message.tool(call, "Not run: the run stopped at max_tool_iterations.", is_error=True)
        for call in reply.tool_calls
    ]
    _append(transcript, new_messages, *unrun)
    await _persist(memory, thread, [reply, *unrun])
    return MaxToolIterationsError(
        f"The model was still calling tools after {iterations} tool iterations "
        f"(max_tool_iterations={agent.max_tool_iterations}). Raise max_tool_iterations, or pass "
        "on_max_iterations= to grant more; the run's messages are on this error's .messages.",
        iterations=iterations,
        messages=new_messages,
        metrics=metrics,
    )


async def _call_model(
    agent: Agent,
    transcript: list[Message],
    tools: list[ToolSpec],
    settings: ModelSettings,
    metrics: RunMetrics,
    iteration: int,
) -> AsyncIterator[RunEvent]:
    """One model call: stream its deltas, then a :class:`ModelCallFinished`."""
    yield ModelCallStarted(iteration)
    request = ModelRequest(messages=list(transcript), tools=tools, settings=settings)
    started = time.perf_counter()
    response: ModelResponse | None = None
    async for event in agent.model_client().stream(request):
        if isinstance(event, ModelResponse):
            response = event
        else:
            yield event
    duration = time.perf_counter() - started
    if response is None:
        raise ModelError("The engine's stream ended without an answer; retry the turn (nothing was lost).")
    metrics.model_calls += 1
    metrics.model_time += duration
    metrics.add_usage(response.usage)
    yield ModelCallFinished(response, duration, iteration)


async def _run_tool_calls(
    agent: Agent,
    calls: list[ToolCall],
    toolbox: Toolbox,
    context: RunContext,
    results: list[Message],
) -> AsyncIterator[RunEvent]:
    """Authorize and validate each call in order, run the valid ones with bounded concurrency.

    Fills ``results`` with one tool message per call, in request order, and
    yields a started/finished event pair per call as it happens.
    """
    context.metrics.tool_calls += len(calls)
    slots: list[Message | None] = [None] * len(calls)
    runnable: list[tuple[int, ToolCall, Tool, dict[str, object]]] = []
    reads: dict[str, str] = context.state.setdefault("read_cache", {})  # read call key -> id of its result
    for index, call in enumerate(calls):
        checked = await _check_call(agent, call, toolbox, context)
        if not isinstance(checked, Message) and checked[0].read_only and _call_key(call) in reads:
            checked = Message.tool(
                call,
                f"Same call as {reads[_call_key(call)]} earlier in this run, and nothing has been written or run "
                "since: its result above still holds.",
            )
        if isinstance(checked, Message):
            slots[index] = checked
            yield ToolCallStarted(call)
            yield ToolCallFinished(call, checked, 0.0)
        else:
            runnable.append((index, call, checked[0], checked[1]))

    limit = agent.max_parallel_tools if agent.parallel_tool_calls else 1
    if limit == 1 or len(runnable) <= 1:
        for index, call, tool, arguments in runnable:
            yield ToolCallStarted(call)
            slots[index], duration = await _invoke(tool, call, arguments, context)
            yield ToolCallFinished(call, slots[index], duration)  # type: ignore[arg-type]
    else:
        events: asyncio.Queue[RunEvent] = asyncio.Queue()
        semaphore = asyncio.Semaphore(limit)

        async def run_one(index: int, call: ToolCall, tool: Tool, arguments: dict[str, object]) -> None:
            async with semaphore:
                events.put_nowait(ToolCallStarted(call))
                slots[index], duration = await _invoke(tool, call, arguments, context)
                events.put_nowait(ToolCallFinished(call, slots[index], duration))  # type: ignore[arg-type]

        tasks = [asyncio.create_task(run_one(*item)) for item in runnable]
        try:
            for _ in range(2 * len(tasks)):
                yield await events.get()
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    if any(not tool.read_only for _, _, tool, _ in runnable):
        reads.clear()  # a write, a command or an outside server's call may change what a read returns
    for index, call, tool, _ in runnable:
        result = slots[index]
        if tool.read_only and result is not None and not result.is_error:
            reads[_call_key(call)] = call.id
    for message in slots:
        assert message is not None
        context.metrics.tool_errors += message.is_error
        results.append(message)


async def _check_call(
    agent: Agent, call: ToolCall, toolbox: Toolbox, context: RunContext
) -> Message | tuple[Tool, dict[str, object]]:
    """The tool and validated arguments for ``call``, or the error message the model gets instead."""
    tool = toolbox.resolve(call.name)
    if tool is None:
        return Message.tool(
            call,
            f"Unknown tool '{call.name}'. Available tools: {', '.join(toolbox.names()) or '(none)'}.",
            is_error=True,
        )
    decision = await authorize_call(agent.permissions, call, tool, context)
    if decision.action != "allow":
        return Message.tool(call, f"Permission denied for '{tool.name}': {decision.reason}.", is_error=True)
    if call.raw_arguments is not None and not call.arguments:
        return Message.tool(
            call,
            f"The arguments for '{tool.name}' are not a valid JSON object: {call.raw_arguments[:500]!r}. "
            f"Call it again with a JSON object matching: {tool.parameters.get('properties', {})}",
            is_error=True,
        )
    try:
        return tool, tool.validate(call.arguments)
    except ToolError as exc:
        return Message.tool(call, str(exc), is_error=True)


async def _invoke(
    tool: Tool, call: ToolCall, arguments: dict[str, object], context: RunContext
) -> tuple[Message, float]:
    """Run one validated call; an exception becomes an error result, never a crashed run."""
    started = time.perf_counter()
    try:
        value = await tool.invoke(arguments, context)
        message = Message.tool(call, format_tool_result(value))
    except ToolError as exc:
        message = Message.tool(call, f"Error: {exc}", is_error=True)
    except Exception as exc:
        message = Message.tool(call, f"Error: tool '{tool.name}' raised {type(exc).__name__}: {exc}", is_error=True)
    return message, time.perf_counter() - started


def _grounded(call: ToolCall, toolbox: Toolbox, evidence: str) -> bool:
    if not call.from_text:
        return True  # structured calls come from models that do tool calling natively
    tool = toolbox.resolve(call.name)
    return tool is None or is_grounded(call, tool, evidence)  # unknown names get their own error


def _call_key(call: ToolCall) -> str:
    return f"{loose_name(call.name)}:{json.dumps(call.arguments, sort_keys=True, default=str)}"


def _remember_answers(answered: set[str], calls: list[ToolCall], results: list[Message], toolbox: Toolbox) -> None:
    """Record the calls that got results; after a write or command, earlier reads may be stale."""
    tools = [toolbox.resolve(call.name) for call in calls]
    if any(tool is not None and not tool.read_only for tool in tools):
        answered.difference_update(key for key in list(answered) if key.startswith("read:"))
    for call, tool, result in zip(calls, tools, results, strict=True):
        if not result.is_error:
            answered.add(("read:" if tool is not None and tool.read_only else "") + _call_key(call))


def _all_repeated(calls: list[ToolCall], answered: set[str]) -> bool:
    return all(_call_key(call) in answered or "read:" + _call_key(call) in answered for call in calls)


def _append(transcript: list[Message], new_messages: list[Message], *messages: Message) -> None:
    transcript.extend(messages)
    new_messages.extend(messages)


async def _persist(memory: MemoryProvider | None, thread: ThreadRef, messages: list[Message]) -> None:
    if memory is not None and messages:
        await memory.append_messages(thread, messages)
