"""The seam between the agent loop and memory.

A run names its :class:`ThreadRef` (the resource that owns conversations and
one thread of it). For each run the agent asks its provider for the thread's
history, for long-term context relevant to the prompt, and for extra tools;
it appends every message as soon as it is final, so a crash mid-turn loses
nothing that had already happened.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from cortana.messages import Message, ThreadRef

if TYPE_CHECKING:
    from cortana.tools import Tool

__all__ = ["InMemoryHistory", "MemoryProvider", "MemoryResolver", "ThreadRef", "resolve_memory"]


@runtime_checkable
class MemoryProvider(Protocol):
    """What the agent needs from a memory backend."""

    async def load_history(self, thread: ThreadRef) -> list[Message]:
        """The thread's short-term history, oldest first, ready to send."""
        ...

    async def retrieve_context(self, thread: ThreadRef, prompt: str) -> str | None:
        """Long-term context relevant to ``prompt`` (working memory, recalled messages), or ``None``."""
        ...

    def tools(self, thread: ThreadRef) -> Sequence[Tool]:
        """Tools the provider offers the model for this thread (e.g. ``update_working_memory``)."""
        ...

    async def append_messages(self, thread: ThreadRef, messages: Sequence[Message]) -> None:
        """Persist messages of the current turn; called as each becomes final."""
        ...

    async def add_summary(self, thread: ThreadRef, summary: Message, *, kept: int) -> None:
        """Store a compaction summary that replaces all but the ``kept`` most recent stored messages.

        Later loads start with the summary; the replaced messages stay stored.
        """
        ...


MemoryResolver = Callable[[ThreadRef], "MemoryProvider | Awaitable[MemoryProvider]"]
"""A function that picks the provider for a run from its thread identity."""


async def resolve_memory(memory: MemoryProvider | MemoryResolver | None, thread: ThreadRef) -> MemoryProvider | None:
    """The provider for ``thread``: ``memory`` itself, or what the resolver function returns."""
    if memory is None or isinstance(memory, MemoryProvider):
        return memory
    provider = memory(thread)
    if inspect.isawaitable(provider):
        provider = await provider
    return provider


class InMemoryHistory:
    """A process-local provider that keeps each thread's messages in a dict.

    Useful in tests and short scripts; it offers no long-term context and
    forgets everything when the process ends.

    Args:
        last_messages: how many recent messages to load per run (``None``: all).
            The cut never separates tool results from the call that requested them.
    """

    def __init__(self, last_messages: int | None = None) -> None:
        self.last_messages = last_messages
        self.threads: dict[ThreadRef, list[Message]] = {}

    async def load_history(self, thread: ThreadRef) -> list[Message]:
        messages = self.threads.get(thread, [])
        if self.last_messages is None or len(messages) <= self.last_messages:
            return list(messages)
        start = len(messages) - self.last_messages
        while start < len(messages) and messages[start].role == "tool":
            start += 1  # never begin with results whose call was cut off
        return list(messages[start:])

    async def retrieve_context(self, thread: ThreadRef, prompt: str) -> str | None:
        return None

    def tools(self, thread: ThreadRef) -> Sequence[Tool]:
        return ()

    async def append_messages(self, thread: ThreadRef, messages: Sequence[Message]) -> None:
        self.threads.setdefault(thread, []).extend(messages)

    async def add_summary(self, thread: ThreadRef, summary: Message, *, kept: int) -> None:
        stored = self.threads.setdefault(thread, [])
        stored[:] = [summary, *(stored[-kept:] if kept else [])]
