"""``Agent``: what a model may do (instructions, tools, limits) and how to run it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from cortana.errors import UserError
from cortana.messages import Message, RunResult, ThreadRef
from cortana.models.base import ModelClient, ModelSettings
from cortana.tools.base import Tool, ToolGroup, as_tools
from cortana.tools.permissions import PermissionGate

if TYPE_CHECKING:
    from cortana.agent.events import RunEvent
    from cortana.memory.base import MemoryProvider, MemoryResolver

__all__ = ["Agent", "EventHandler"]


class EventHandler(Protocol):
    """Anything that watches a run's events, such as :class:`~cortana.agent.logger.AgentLogger`."""

    def handle(self, event: RunEvent) -> None: ...


class Agent:
    """A model with instructions and tools, run against a local engine.

    Args:
        model: the engine client (see ``cortana.models``); a ``ScriptedModel`` in tests.
        name: a short name, shown in logs and used by subagents.
        instructions: the system prompt. Kept byte-identical across turns so
            the engine can reuse its prompt cache.
        tools: tools (``Tool``, ``@tool`` functions or plain callables) and
            ``ToolGroup`` s the model loads on demand.
        max_tool_iterations: how many rounds of tool calls one run may make
            before it raises ``MaxToolIterationsError``.
        on_max_iterations: ``async (iterations) -> bool``; returning True
            grants another ``max_tool_iterations`` rounds.
        parallel_tool_calls: run the calls of one response concurrently
            (False: one by one, in order).
        max_parallel_tools: how many tool calls may run at once.
        memory: a ``MemoryProvider``, or a function of the thread that returns one.
        context_window: the context length to plan for, overriding what the engine reports.
        permissions: a ``PermissionGate`` every tool call passes (``None`` allows all).
        settings: generation settings sent with every model call.
        logger: receives every run event (``AgentLogger`` shows progress).
        nudge_repeated_calls: when the model repeats, with the same arguments, only calls
            that already have results in this run, do not run them again: restate the
            question once, and if it repeats again, ask for an answer without tools
            (small models loop on tool calls otherwise).
        tool_guidance: add a paragraph to the system prompt, when the agent has tools,
            telling the model to call a tool only when one fits (True: the shipped
            ``prompts/tool_guidance.md``; a string: your own). Off by default: measured on
            Qwen2.5-Coder 0.5B/1.5B it changed nothing (see docs/engines.md).
        check_grounding: do not run a call the model wrote as text when none of its free-text
            arguments appears in the conversation (a small model "calling" a tool for a
            question no tool fits); ask for an answer without tools instead.
    """

    __slots__ = (
        "_model",
        "check_grounding",
        "context_window",
        "instructions",
        "logger",
        "max_parallel_tools",
        "max_tool_iterations",
        "memory",
        "name",
        "nudge_repeated_calls",
        "on_max_iterations",
        "parallel_tool_calls",
        "permissions",
        "settings",
        "tool_groups",
        "tool_guidance",
        "tools",
    )

    def __init__(
        self,
        model: ModelClient | None = None,
        *,
        name: str = "agent",
        instructions: str = "",
        tools: Sequence[Tool | ToolGroup | Callable[..., Any]] = (),
        max_tool_iterations: int = 10,
        on_max_iterations: Callable[[int], Awaitable[bool]] | None = None,
        parallel_tool_calls: bool = True,
        max_parallel_tools: int = 4,
        memory: MemoryProvider | MemoryResolver | None = None,
        context_window: int | None = None,
        permissions: PermissionGate | None = None,
        settings: ModelSettings | None = None,
        logger: EventHandler | None = None,
        nudge_repeated_calls: bool = True,
        tool_guidance: bool | str = False,
        check_grounding: bool = True,
    ) -> None:
        if max_tool_iterations < 1:
            raise UserError(f"max_tool_iterations must be at least 1, got {max_tool_iterations}.")
        if max_parallel_tools < 1:
            raise UserError(f"max_parallel_tools must be at least 1, got {max_parallel_tools}.")
        self._model = model
        self.name = name
        self.instructions = instructions
        self.tools, self.tool_groups = as_tools(tools)
        self.max_tool_iterations = max_tool_iterations
        self.on_max_iterations = on_max_iterations
        self.parallel_tool_calls = parallel_tool_calls
        self.max_parallel_tools = max_parallel_tools
        self.memory = memory
        self.context_window = context_window
        self.permissions = permissions
        self.settings = settings
        self.logger = logger
        self.nudge_repeated_calls = nudge_repeated_calls
        self.tool_guidance = tool_guidance
        self.check_grounding = check_grounding

    def system_prompt(self, *, has_tools: bool) -> str:
        """The system prompt sent first in every request (byte-identical across turns)."""
        guidance = ""
        if has_tools and self.tool_guidance:
            from cortana.prompts import prompt_text

            guidance = self.tool_guidance if isinstance(self.tool_guidance, str) else prompt_text("tool_guidance")
        return "\n\n".join(part for part in (self.instructions, guidance) if part)

    @property
    def model(self) -> ModelClient | None:
        """The engine client this agent talks to."""
        return self._model

    @model.setter
    def model(self, value: ModelClient | None) -> None:
        self._model = value

    def model_client(self) -> ModelClient:
        """The model client, or a clear error when none was given."""
        if self._model is None:
            raise UserError(
                f"Agent '{self.name}' has no model. Pass model=create_model_client() (the local engine) "
                "or model=ScriptedModel([...]) in tests."
            )
        return self._model

    async def run_stream(
        self,
        prompt: str,
        *,
        thread: ThreadRef | str | None = None,
        context: str | None = None,
        history: Sequence[Message] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[RunEvent]:
        """Run one turn and yield its events as they happen; the last is ``RunFinished``.

        Args:
            prompt: the user's message.
            thread: the conversation (a ``ThreadRef`` or a thread id); a new one when omitted.
            context: per-turn text placed right before the prompt (after the history,
                so the cached prompt prefix stays valid).
            history: earlier messages to send before this turn, for callers without a memory provider.
            settings: generation settings for this run, replacing the agent's.
        """
        from cortana.agent.loop import run_events

        events = run_events(
            self,
            prompt,
            thread=_thread_ref(thread),
            context=context,
            history=history,
            settings=settings or self.settings or ModelSettings(),
        )
        try:
            async for event in events:
                if self.logger is not None:
                    self.logger.handle(event)
                yield event
        finally:
            await events.aclose()

    async def run(
        self,
        prompt: str,
        *,
        thread: ThreadRef | str | None = None,
        context: str | None = None,
        history: Sequence[Message] | None = None,
        settings: ModelSettings | None = None,
    ) -> RunResult:
        """Run one turn to completion and return its ``RunResult`` (``run_stream``, drained)."""
        from cortana.agent.events import RunFinished

        async for event in self.run_stream(prompt, thread=thread, context=context, history=history, settings=settings):
            if isinstance(event, RunFinished):
                return event.result
        raise AssertionError("run_stream ended without RunFinished")  # pragma: no cover

    async def compact(self, thread: ThreadRef | str, *, focus: str | None = None, keep_last: int = 2) -> Message:
        """Summarize the thread's history now (the CLI's ``/compact [focus]``) and return the summary.

        Args:
            thread: the conversation to compact.
            focus: what the summary should pay particular attention to.
            keep_last: how many of the newest messages stay as they are.
        """
        from cortana.agent.compaction import compact, effective_window
        from cortana.memory.base import resolve_memory

        ref = _thread_ref(thread)
        memory = await resolve_memory(self.memory, ref)
        if memory is None:
            raise UserError(f"Agent '{self.name}' has no memory to compact; pass memory= (e.g. SQLiteMemory()).")
        history = await memory.load_history(ref)
        keep_from = max(len(history) - keep_last, 0)
        if keep_from == 0:
            raise UserError("There is nothing to compact yet: the thread is shorter than keep_last.")
        result = await compact(self, history, keep_from=keep_from, window=effective_window(self) or 4096, focus=focus)
        await memory.add_summary(ref, result.summary, kept=result.kept)
        return result.summary

    generate = run
    """``run`` under the name the original systems' docs use."""

    def run_sync(self, prompt: str, **kwargs: Any) -> RunResult:
        """``run`` for code that has no event loop of its own."""
        return asyncio.run(self.run(prompt, **kwargs))

    def __repr__(self) -> str:
        model = getattr(self._model, "model", None)
        return f"Agent(name={self.name!r}, model={model!r}, tools={[t.name for t in self.tools]})"


def _thread_ref(thread: ThreadRef | str | None) -> ThreadRef:
    if isinstance(thread, ThreadRef):
        return thread
    return ThreadRef(thread_id=thread or uuid.uuid4().hex)
