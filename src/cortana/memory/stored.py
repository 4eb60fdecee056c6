"""``StoredMemory``: what every database-backed memory does the same way, whatever the database.

``SQLiteMemory`` (one file per workspace) and ``PostgresMemory`` (one server
for many processes and machines) store the same things: threads, messages as
the loop produces them, compaction summaries, working memory, and, with an
embedder, vectors for semantic recall. This base class holds the behaviour
the agent sees (which messages a run loads, what long-term context it gets,
the ``update_working_memory`` tool, how an interrupted turn is found), so the
two backends differ only in their SQL and cannot drift apart. A third backend
subclasses it and implements the abstract storage methods.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Sequence
from typing import Literal

from cortana.errors import ToolError
from cortana.memory.recall import Recall
from cortana.messages import STAND_IN_NAMES, Message, ThreadRef, is_users_own
from cortana.prompts import strip_turn_context
from cortana.tools import Tool

__all__ = [
    "WORKING_MEMORY_HEADER",
    "StoredMemory",
    "StoredMessage",
    "history_skip",
    "trim_cut_tool_results",
]

WORKING_MEMORY_HEADER = "Working memory (your notes; update them with update_working_memory):"
WORKING_MEMORY_SAVED = "Saved to working memory. Do not call update_working_memory again now: reply to the user."
WORKING_MEMORY_UNCHANGED = "Working memory already says exactly that; nothing changed. Reply to the user now."
"""Replies of ``update_working_memory`` that tell a small model what to do next: measured, the bundled models
copied a bare "Working memory updated." into the next update, erasing their notes, and then looped."""


class StoredMessage:
    """A message as stored: its row id, thread, kind and the message itself."""

    __slots__ = ("created_at", "id", "kind", "message", "thread")

    def __init__(self, id: int, thread: ThreadRef, kind: str, message: Message, created_at: float) -> None:
        self.id = id
        self.thread = thread
        self.kind = kind
        self.message = message
        self.created_at = created_at


def history_skip(total: int, last_messages: int) -> int:
    """How many of a thread's ``total`` messages (after its latest summary) a run leaves out.

    The window's start moves in steps of half the window, not one message a
    turn: every move changes the prompt's prefix and makes the engine re-read
    the whole history.
    """
    if total <= last_messages:
        return 0
    step = max(last_messages // 2, 1)
    return -(-(total - last_messages) // step) * step


def trim_cut_tool_results(recent: list[StoredMessage]) -> list[StoredMessage]:
    """``recent`` without leading tool results: never begin with results whose call was cut off."""
    start = 0
    while start < len(recent) and recent[start].message.role == "tool":
        start += 1
    return recent[start:]


class StoredMemory(ABC):
    """A ``MemoryProvider`` over a database: history, working memory, summaries, recall.

    Args:
        last_messages: how many recent messages a run loads.
        working_memory: ``"resource"`` (shared by the resource's threads), ``"thread"``, or None (off).
        recall: semantic recall (``Recall(embedder)``), or None for off.
    """

    client: str = ""
    """The client the threads this memory starts are labelled with (``cli``, ``serve``, ``mcp``, ``acp``; a front
    end sets it): a thread keeps the label of the client that started it, and :meth:`thread_clients` reads them."""

    def __init__(
        self,
        *,
        last_messages: int = 40,
        working_memory: Literal["resource", "thread"] | None = "resource",
        recall: Recall | None = None,
    ) -> None:
        self.last_messages = last_messages
        self.working_memory_scope = working_memory
        self.recall = recall

    # -- what each backend stores and reads ---------------------------------------------------

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the memory lives, safe to show (a file path; a server with no password)."""

    @abstractmethod
    async def history(self, thread: ThreadRef) -> list[StoredMessage]:
        """The thread's latest summary (if any) and the last ``last_messages`` messages after it."""

    @abstractmethod
    async def append_messages(self, thread: ThreadRef, messages: Sequence[Message]) -> None:
        """Store messages as they become final (and index them for recall)."""

    @abstractmethod
    async def add_summary(self, thread: ThreadRef, summary: Message, *, kept: int = 0) -> None:
        """Store a compaction summary replacing all but the ``kept`` latest messages; they all stay stored."""

    @abstractmethod
    async def messages(self, thread: ThreadRef) -> list[StoredMessage]:
        """Every stored message of the thread, summaries and compacted ones included, oldest first."""

    @abstractmethod
    async def threads(self, resource_id: str) -> list[tuple[ThreadRef, float]]:
        """The resource's threads, most recently updated first, with their update time."""

    @abstractmethod
    async def thread_clients(self, resource_id: str) -> dict[str, str]:
        """Each of the resource's threads that has a label -> the client that started it."""

    @abstractmethod
    async def last_user_message_at(
        self, resource_id: str, *, skip_names: Sequence[str] = STAND_IN_NAMES
    ) -> float | None:
        """When the user last wrote in any thread of ``resource_id`` (a Unix time), or ``None``.

        Messages named in ``skip_names`` do not count: the stand-ins a check-in or the loop stores are not the user's.
        """

    @abstractmethod
    async def read_working_memory(self, key: str) -> str:
        """The working memory stored under ``key`` (empty string when none)."""

    @abstractmethod
    async def write_working_memory(self, key: str, content: str) -> None:
        """Replace the working memory stored under ``key``."""

    @abstractmethod
    async def recalled(self, thread: ThreadRef, query: Awaitable[list[float]], *, exclude: set[int]) -> str | None:
        """Earlier messages near the prompt as a context block (recall is on when this is called).

        ``query`` gives the prompt's vector: its embedding started before the history was loaded, so the
        two overlap; a backend with no vectors yet returns ``None`` without awaiting it.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the database (the file, or the connections)."""

    # -- MemoryProvider ---------------------------------------------------------------------

    async def load_history(self, thread: ThreadRef) -> list[Message]:
        """The thread's latest summary (if any) and the last ``last_messages`` messages after it."""
        return [stored.message for stored in await self.history(thread)]

    async def retrieve_context(self, thread: ThreadRef, prompt: str) -> str | None:
        """Working memory (always, when on) and recalled earlier messages relevant to ``prompt``.

        The prompt's embedding starts first and runs while working memory and the history load.
        """
        query = (
            asyncio.ensure_future(self.recall.embedder.embed_query(prompt))
            if self.recall is not None and prompt.strip()
            else None
        )
        try:
            parts = []
            if self.working_memory_scope is not None:
                text = (await self.get_working_memory(thread)).strip()
                if text:  # empty, it would only be noise a small model repeats back
                    parts.append(f"{WORKING_MEMORY_HEADER}\n{text}")
            if query is not None:
                visible = {stored.id for stored in await self.history(thread)}
                recalled = await self.recalled(thread, query, exclude=visible)
                if recalled:
                    parts.append(recalled)
            return "\n\n".join(parts) or None
        finally:
            if query is not None and not query.done():
                query.cancel()
            elif query is not None and not query.cancelled():
                query.exception()  # retrieved: a failed embedding the backend never needed is not reported twice

    def tools(self, thread: ThreadRef) -> Sequence[Tool]:
        """``update_working_memory`` when working memory is on."""
        if self.working_memory_scope is None:
            return ()
        memory = self

        async def update_working_memory(content: str) -> str:
            note = content.strip()
            if not note or note.startswith(WORKING_MEMORY_SAVED[:24]) or note == WORKING_MEMORY_UNCHANGED:
                raise ToolError(
                    "Working memory is unchanged: content must be your notes, not empty and not this tool's reply. "
                    "Reply to the user now."
                )
            if note == (await memory.get_working_memory(thread)).strip():
                return WORKING_MEMORY_UNCHANGED
            await memory.set_working_memory(thread, note)
            return WORKING_MEMORY_SAVED

        return (
            Tool(
                update_working_memory,
                description="Replace your working memory (a Markdown document you always see) with `content`. "
                "Keep facts about the user and the task that must outlive this conversation; include "
                "everything still true, since the old text is replaced.",
                answer_after=True,
                kind="think",
            ),
        )

    # -- working memory ---------------------------------------------------------------------

    def working_memory_key(self, thread: ThreadRef) -> str:
        """Where ``thread``'s working memory is stored: per resource, or per thread."""
        if self.working_memory_scope == "thread":
            return f"thread:{thread.resource_id}/{thread.thread_id}"
        return f"resource:{thread.resource_id}"

    async def get_working_memory(self, thread: ThreadRef) -> str:
        """The working memory seen in ``thread`` (empty string when none)."""
        return await self.read_working_memory(self.working_memory_key(thread))

    async def set_working_memory(self, thread: ThreadRef, content: str) -> None:
        """Replace the working memory seen in ``thread``."""
        await self.write_working_memory(self.working_memory_key(thread), content)

    # -- inspection ---------------------------------------------------------------------------

    @property
    def recall_status(self) -> str:
        """Whether semantic recall is on, and with what; or why it is off and how to turn it on."""
        if self.recall is None:
            return (
                f"off: no embedder configured ({type(self).__name__}(recall=Recall(E5Embedder())) turns it on; "
                "`pip install 'cortana[recall]'` installs what it needs)"
            )
        return f"on: {self.recall.embedder.name}, top {self.recall.top_k} per {self.recall.scope}"

    async def interrupted_prompt(self, thread: ThreadRef) -> str | None:
        """The user's message of the thread's last turn if that turn never got its answer."""
        for stored in reversed(await self.history(thread)):
            message = stored.message
            if message.role == "assistant" and not message.tool_calls:
                return None
            if is_users_own(message):
                return strip_turn_context(message.content)
        return None
