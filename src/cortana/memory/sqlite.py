"""``SQLiteMemory``: thread history, working memory and semantic recall in one SQLite file.

One file per workspace (``.cortana/memory.db`` by default), WAL mode, schema
from named append-only migrations. Several processes may use it at once (the
heartbeat and a turn): every write is a short ``BEGIN IMMEDIATE`` transaction
and waiters queue on ``busy_timeout`` instead of failing with "database is
locked".

- **History**: the recent messages of the thread (at most ``last_messages``,
  the cut moving in steps of half that so the prompt prefix, and the engine's
  cache, survive most turns), starting at its latest compaction summary; the
  cut never separates tool results from the call that asked for them.
- **Working memory**: a Markdown document per resource (or per thread), shown
  to the model in every turn once it has content, replaced by the model through
  ``update_working_memory``.
- **Semantic recall**: see ``recall.py``; on when an embedder is given.
- **Nothing typed is lost**: messages are written as the loop produces them, so
  an interrupted turn is in the file and visible in the thread.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from cortana.memory.recall import Recall, RecalledMessage
from cortana.memory.store import SQLiteStore
from cortana.memory.stored import (
    WORKING_MEMORY_HEADER,
    StoredMemory,
    StoredMessage,
    history_skip,
    trim_cut_tool_results,
)
from cortana.memory.vectors import SQLiteVectorIndex
from cortana.messages import STAND_IN_NAMES, Message, ThreadRef

__all__ = ["WORKING_MEMORY_HEADER", "SQLiteMemory", "StoredMessage"]

DEFAULT_PATH = Path(".cortana") / "memory.db"


class SQLiteMemory(StoredMemory):
    """The default ``MemoryProvider``: one SQLite file.

    Args:
        path: the SQLite file (created with its folder).
        last_messages: how many recent messages a run loads.
        working_memory: ``"resource"`` (shared by the resource's threads), ``"thread"``, or None (off).
        recall: semantic recall (``Recall(embedder)``), or None for off.
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        last_messages: int = 40,
        working_memory: Literal["resource", "thread"] | None = "resource",
        recall: Recall | None = None,
    ) -> None:
        super().__init__(last_messages=last_messages, working_memory=working_memory, recall=recall)
        self.store = SQLiteStore(path, load_extensions=recall is not None, on_open=self._opening(recall))
        """The file, shared with recall (and any feature that keeps its tables beside the history)."""
        self.vectors: SQLiteVectorIndex | None = recall.index_in(self.store) if recall is not None else None
        """Recall's vector index in the file (``None`` when recall is off)."""

    def _opening(self, recall: Recall | None) -> list[Callable[[Any], None]]:
        """What runs on the new connection: sqlite-vec, then reading the width of the vectors already there."""
        if recall is None:
            return []

        def find_dimensions(connection: Any) -> None:
            if self.vectors is not None:
                self.vectors.find_dimensions(connection)

        return [recall.attach, find_dimensions]

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self.store.path

    @property
    def location(self) -> str:
        """The SQLite file's path."""
        return str(self.store.path)

    def close(self) -> None:
        """Close the file."""
        self.store.close()

    async def history(self, thread: ThreadRef) -> list[StoredMessage]:
        """The thread's latest summary (if any) and the last ``last_messages`` messages after it."""
        return await self.store.read(lambda c: self._history(c, thread))

    async def recalled(self, thread: ThreadRef, query: Awaitable[list[float]], *, exclude: set[int]) -> str | None:
        """Earlier messages near the prompt: binary codes in memory, re-ranked exactly (``codes.py``)."""
        recall, vectors = self.recall, self.vectors
        assert recall is not None and vectors is not None
        if vectors.dimensions is None and not await self.store.read(lambda _: vectors.dimensions):
            return None  # opening the file found no vectors: nothing to recall, nothing to wait for
        hits = await recall.nearest(vectors, thread, await query, exclude=exclude)
        if not hits:
            return None
        span = 4 * recall.neighbours + 4

        def windows(connection: Any) -> list[list[RecalledMessage]]:
            groups = []
            for hit in hits:
                rows = connection.execute(
                    "SELECT id, role, body, created_at FROM messages WHERE resource_id = ? AND thread_id = ? "
                    "AND kind = 'message' AND role IN ('user', 'assistant') AND id BETWEEN ? AND ? ORDER BY id",
                    (thread.resource_id, hit.subgroup, hit.key - span, hit.key + span),
                ).fetchall()
                position = next((i for i, row in enumerate(rows) if row[0] == hit.key), None)
                if position is None:
                    continue  # the message is gone (its vector outlived it)
                window = rows[max(position - recall.neighbours, 0) : position + recall.neighbours + 1]
                groups.append(
                    [
                        (hit.subgroup, row[1], row[3], Message.model_validate_json(row[2]))
                        for row in window
                        if row[0] not in exclude
                    ]
                )
            return groups

        return recall.render(await self.store.read(windows))

    async def append_messages(self, thread: ThreadRef, messages: Sequence[Message]) -> None:
        """Store messages as they become final (and queue them for recall)."""
        ids = await self.store.write(lambda c: self._insert(c, thread, messages, "message"))
        if self.recall is not None and self.vectors is not None:
            await self.recall.index(self.vectors, thread, list(zip(ids, messages, strict=True)))

    async def read_working_memory(self, key: str) -> str:
        """The working memory stored under ``key``."""
        row = await self.store.read(
            lambda c: c.execute("SELECT content FROM working_memory WHERE scope = ?", (key,)).fetchone()
        )
        return str(row[0]) if row else ""

    async def write_working_memory(self, key: str, content: str) -> None:
        """Replace the working memory stored under ``key``."""
        await self.store.write(
            lambda c: c.execute(
                "INSERT INTO working_memory (scope, content, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (scope) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
                (key, content, time.time()),
            )
        )

    # -- threads, summaries, inspection -------------------------------------------------------

    async def threads(self, resource_id: str) -> list[tuple[ThreadRef, float]]:
        """The resource's threads, most recently updated first, with their update time."""
        rows = await self.store.read(
            lambda c: c.execute(
                "SELECT thread_id, updated_at FROM threads WHERE resource_id = ? ORDER BY updated_at DESC",
                (resource_id,),
            ).fetchall()
        )
        return [(ThreadRef(resource_id=resource_id, thread_id=row[0]), row[1]) for row in rows]

    async def thread_clients(self, resource_id: str) -> dict[str, str]:
        """Each of the resource's threads that has a label -> the client that started it."""
        rows = await self.store.read(
            lambda c: c.execute(
                "SELECT thread_id, client FROM threads WHERE resource_id = ? AND client IS NOT NULL", (resource_id,)
            ).fetchall()
        )
        return {row[0]: row[1] for row in rows}

    async def last_user_message_at(
        self, resource_id: str, *, skip_names: Sequence[str] = STAND_IN_NAMES
    ) -> float | None:
        """When the user last wrote in any thread of ``resource_id`` (a Unix time), or ``None``.

        Messages named in ``skip_names`` do not count: the stand-ins a check-in or the loop stores are not the user's.
        """
        marks = ", ".join("?" for _ in skip_names) or "NULL"

        def last(connection: sqlite3.Connection) -> float | None:
            row = connection.execute(
                "SELECT created_at FROM messages WHERE resource_id = ? AND role = 'user' AND kind = 'message' "
                f"AND COALESCE(json_extract(body, '$.name'), '') NOT IN ({marks}) ORDER BY id DESC LIMIT 1",
                (resource_id, *skip_names),
            ).fetchone()
            return float(row[0]) if row else None

        return await self.store.read(last)

    async def messages(self, thread: ThreadRef) -> list[StoredMessage]:
        """Every stored message of the thread, summaries and compacted ones included, oldest first."""
        return await self.store.read(
            lambda c: self._select(c, "resource_id = ? AND thread_id = ?", (thread.resource_id, thread.thread_id))
        )

    async def add_summary(self, thread: ThreadRef, summary: Message, *, kept: int = 0) -> None:
        """Store a compaction summary replacing all but the ``kept`` latest messages; they all stay stored."""

        def store(connection: sqlite3.Connection) -> None:
            boundary = (
                connection.execute(
                    "SELECT id FROM messages WHERE resource_id = ? AND thread_id = ? AND kind = 'message' "
                    "ORDER BY id DESC LIMIT 1 OFFSET ?",
                    (thread.resource_id, thread.thread_id, kept - 1),
                ).fetchone()
                if kept
                else None
            )
            [summary_id] = self._insert(connection, thread, [summary], "summary")
            keep_from = boundary[0] if boundary else summary_id
            connection.execute("UPDATE messages SET keep_from_id = ? WHERE id = ?", (keep_from, summary_id))

        await self.store.write(store)

    # -- SQL ----------------------------------------------------------------------------------

    def _insert(
        self, connection: sqlite3.Connection, thread: ThreadRef, messages: Sequence[Message], kind: str
    ) -> list[int]:
        now = time.time()
        connection.execute(
            "INSERT INTO threads (resource_id, thread_id, created_at, updated_at, client) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (resource_id, thread_id) DO UPDATE SET updated_at = excluded.updated_at",
            (thread.resource_id, thread.thread_id, now, now, self.client or None),
        )
        ids = []
        for message in messages:
            cursor = connection.execute(
                "INSERT INTO messages (resource_id, thread_id, role, kind, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    thread.resource_id,
                    thread.thread_id,
                    message.role,
                    kind,
                    message.model_dump_json(exclude_defaults=True),
                    now,
                ),
            )
            ids.append(int(cursor.lastrowid or 0))
        return ids

    def _select(
        self, connection: sqlite3.Connection, where: str, parameters: tuple[object, ...]
    ) -> list[StoredMessage]:
        rows = connection.execute(
            f"SELECT id, resource_id, thread_id, kind, body, created_at FROM messages WHERE {where} ORDER BY id",
            parameters,
        ).fetchall()
        return [
            StoredMessage(
                row[0],
                ThreadRef(resource_id=row[1], thread_id=row[2]),
                row[3],
                Message.model_validate_json(row[4]),
                row[5],
            )
            for row in rows
        ]

    def _history(self, connection: sqlite3.Connection, thread: ThreadRef) -> list[StoredMessage]:
        key = (thread.resource_id, thread.thread_id)
        latest = connection.execute(
            "SELECT id, keep_from_id FROM messages WHERE resource_id = ? AND thread_id = ? AND kind = 'summary' "
            "ORDER BY id DESC LIMIT 1",
            key,
        ).fetchone()
        summary, start = (latest[0], latest[1] or latest[0]) if latest else (None, 0)
        since = "resource_id = ? AND thread_id = ? AND id >= ? AND kind = 'message'"
        total = connection.execute(f"SELECT COUNT(*) FROM messages WHERE {since}", (*key, start)).fetchone()[0]
        skip = history_skip(total, self.last_messages)
        row = connection.execute(
            f"SELECT id FROM messages WHERE {since} ORDER BY id LIMIT 1 OFFSET ?", (*key, start, skip)
        ).fetchone()
        first = row[0] if row else None
        recent = (
            self._select(
                connection, "resource_id = ? AND thread_id = ? AND id >= ? AND kind = 'message'", (*key, first)
            )
            if first is not None
            else []
        )
        head = self._select(connection, "id = ?", (summary,)) if summary else []
        return head + trim_cut_tool_results(recent)
