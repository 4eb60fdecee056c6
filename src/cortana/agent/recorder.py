"""``Recorder``: the seam a durable run records its outside work through (``cortana.durable`` implements it).

A run given a recorder (``TurnRequest.recorder``) hands it each piece of work whose outcome is not a pure function
of the run's state, and uses what it gives back: the model's answers, the tools' results, the permission gate's
decisions, a compaction's summary, and what it reads from and writes to memory. A recorder that ran the work before
(in a process that died) gives back what it recorded instead of running it again; the loop itself runs as it always
does, so the same calls come in the same order, and each is answered from the record until the record ends.

The loop knows nothing of how the work is recorded: this module imports no engine, store or library.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cortana.agent.compaction import Compaction
    from cortana.memory.base import MemoryProvider
    from cortana.messages import Message, ToolCall
    from cortana.models.base import ModelClient, ModelEvent, ModelRequest
    from cortana.tools.permissions import PermissionDecision

__all__ = ["Recorder"]


class Recorder(Protocol):
    """Runs (or replays) a run's outside work, one piece at a time, in the order the run asks for it."""

    def model_call(self, client: ModelClient, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """``client.stream(request)``: its events as they arrive, the last a ``ModelResponse`` (replayed: the
        recorded response, its text as one delta)."""
        ...

    async def tool_call(
        self, call: ToolCall, run: Callable[[], Awaitable[tuple[Message, float]]]
    ) -> tuple[Message, float]:
        """``run()``, one validated call of a tool: its result message and seconds (replayed: never run again)."""
        ...

    async def decision(self, call: ToolCall, decide: Callable[[], Awaitable[PermissionDecision]]) -> PermissionDecision:
        """``decide()``, the permission gate's answer for ``call`` (replayed: nobody is asked again)."""
        ...

    async def compaction(self, compact: Callable[[], Awaitable[Compaction]]) -> Compaction:
        """``compact()``, a summary of the older conversation (replayed: the recorded summary)."""
        ...

    def memory(self, memory: MemoryProvider) -> MemoryProvider:
        """``memory`` as the run uses it: what it loads, and what it stores, recorded."""
        ...
