"""A durable run's ``Recorder`` on DBOS (``agent/recorder.py``): each piece of the run's outside work one DBOS step.

Every step draws its ID when the run asks for it (``DBOS.reserve_step``), whatever task then runs it, so the calls
of one round that run at once are numbered in request order, and a replay numbers them the same way. Each outcome is
kept as JSON (messages as their pydantic JSON), never as a pickled object of ours: a record outlives the code that
wrote it. Replayed, a step returns its record without running: the model is not asked, the tool not called, memory
not written again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from cortana.errors import ModelError
from cortana.messages import Message, ThreadRef, Usage
from cortana.models.base import ModelResponse, TextDelta, ThinkingDelta
from cortana.streams import closing

if TYPE_CHECKING:
    from cortana.agent.compaction import Compaction
    from cortana.memory.base import MemoryProvider
    from cortana.messages import ToolCall
    from cortana.models.base import ModelClient, ModelEvent, ModelRequest
    from cortana.tools import Tool
    from cortana.tools.permissions import PermissionDecision

__all__ = ["DbosRecorder", "RecordedMemory"]

_MESSAGES = TypeAdapter(list[Message])


def _reserve(name: str) -> Callable[[Callable[[], Coroutine[Any, Any, str]]], Awaitable[str]]:
    """Draw the workflow's next step ID now (in the order the run asks, whatever task runs it) for a step ``name``."""
    from dbos import DBOS

    reservation = DBOS.reserve_step()
    return lambda work: reservation.run_async({"name": name}, work)


class DbosRecorder:
    """``Recorder`` on DBOS (``agent/recorder.py``): each piece of work one step, its outcome kept as JSON."""

    def model_call(self, client: ModelClient, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The engine's events as they arrive (a step records the response); replayed, the recorded response."""
        return self._model_call(client, request)

    async def _model_call(self, client: ModelClient, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        run = _reserve("cortana.model_call")
        events: asyncio.Queue[ModelEvent | None] = asyncio.Queue()
        ran = False

        async def call() -> str:
            nonlocal ran
            ran = True
            response = None
            async with closing(client.stream(request)) as stream:
                async for event in stream:
                    if isinstance(event, ModelResponse):
                        response = event
                    else:
                        events.put_nowait(event)
            if response is None:
                raise ModelError("The engine's stream ended without an answer; retry the turn (nothing was lost).")
            return _dump_response(response)

        step = asyncio.ensure_future(run(call))
        step.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            response = _load_response(await step)
        finally:
            if not step.done():  # left early: the call stops, nothing is recorded, and a resume asks again
                step.cancel()
                await asyncio.wait([step])
        if not ran:  # replayed: what the engine streamed then, at once
            if response.message.thinking:
                yield ThinkingDelta(response.message.thinking)
            if response.message.content:
                yield TextDelta(response.message.content)
        yield response

    async def tool_call(
        self, call: ToolCall, run: Callable[[], Awaitable[tuple[Message, float]]]
    ) -> tuple[Message, float]:
        """One tool call's result; replayed, never run again."""

        async def invoke() -> str:
            message, seconds = await run()
            return json.dumps({"message": message.model_dump(mode="json"), "seconds": seconds})

        record = json.loads(await _reserve(f"cortana.tool:{call.name}")(invoke))
        return Message.model_validate(record["message"]), float(record["seconds"])

    async def decision(self, call: ToolCall, decide: Callable[[], Awaitable[PermissionDecision]]) -> PermissionDecision:
        """The gate's decision; replayed, nobody is asked again."""
        from cortana.tools.permissions import PermissionDecision

        async def ask() -> str:
            return json.dumps(asdict(await decide()))

        return PermissionDecision(**json.loads(await _reserve(f"cortana.decision:{call.name}")(ask)))

    async def compaction(self, compact: Callable[[], Awaitable[Compaction]]) -> Compaction:
        """A compaction; replayed, the recorded summary and transcript."""
        from cortana.agent.compaction import Compaction

        async def summarize() -> str:
            done = await compact()
            messages = _MESSAGES.dump_python(done.messages, mode="json")
            summary = done.summary.model_dump(mode="json")
            return json.dumps({"messages": messages, "summary": summary, "kept": done.kept, "fallback": done.fallback})

        record = json.loads(await _reserve("cortana.compaction")(summarize))
        messages = _MESSAGES.validate_python(record["messages"])
        return Compaction(messages, Message.model_validate(record["summary"]), record["kept"], record["fallback"])

    def memory(self, memory: MemoryProvider) -> MemoryProvider:
        """``memory`` with its reads and writes recorded."""
        return RecordedMemory(memory)


class RecordedMemory:
    """A run's memory whose history, context, appends and summaries are steps: replayed, the history is what the run
    started with, and nothing stored before the crash is stored again."""

    def __init__(self, memory: MemoryProvider) -> None:
        self._memory = memory

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)

    async def load_history(self, thread: ThreadRef) -> list[Message]:
        """The history the run started with (replayed: as it was then, not as the run's own messages grew it)."""

        async def load() -> str:
            return _MESSAGES.dump_json(await self._memory.load_history(thread)).decode()

        return _MESSAGES.validate_json(await _reserve("cortana.memory.history")(load))

    async def retrieve_context(self, thread: ThreadRef, prompt: str) -> str | None:
        """Memory's long-term context for the prompt, as it was when the run started."""

        async def retrieve() -> str:
            return json.dumps(await self._memory.retrieve_context(thread, prompt))

        context: str | None = json.loads(await _reserve("cortana.memory.context")(retrieve))
        return context

    def tools(self, thread: ThreadRef) -> Sequence[Tool]:
        """Memory's tools (their calls are recorded as any tool's)."""
        return self._memory.tools(thread)

    async def append_messages(self, thread: ThreadRef, messages: Sequence[Message]) -> None:
        """Store the messages once: replayed, they are in memory already."""

        async def append() -> str:
            await self._memory.append_messages(thread, messages)
            return "stored"

        await _reserve("cortana.memory.append")(append)

    async def add_summary(self, thread: ThreadRef, summary: Message, *, kept: int) -> None:
        """Store a compaction's summary once."""

        async def add() -> str:
            await self._memory.add_summary(thread, summary, kept=kept)
            return "stored"

        await _reserve("cortana.memory.summary")(add)


def _dump_response(response: ModelResponse) -> str:
    return json.dumps(
        {
            "message": response.message.model_dump(mode="json"),
            "usage": response.usage.model_dump(mode="json"),
            "finish_reason": response.finish_reason,
            "model": response.model,
        }
    )


def _load_response(text: str) -> ModelResponse:
    record = json.loads(text)
    return ModelResponse(
        Message.model_validate(record["message"]),
        Usage.model_validate(record["usage"]),
        record["finish_reason"],
        record["model"],
    )
