"""``PostgresMemory``: the memory of ``SQLiteMemory``, in a PostgreSQL server, with recall on pgvector.

For the user who outgrew one machine: several processes or machines (a
heartbeat on one box, turns on another, a batch of runners) share one
memory. It is the same ``MemoryProvider`` as ``SQLiteMemory`` (both subclass
:class:`~cortana.memory.stored.StoredMemory`): the same history window,
working memory, summaries and interrupted turns; only the SQL differs.

- **Schema**: named, append-only migrations (``POSTGRES_MIGRATIONS``), every
  table prefixed ``cortana_`` so the memory can share a database with other
  applications.
- **Many writers**: each call is one short transaction; message rows carry a
  unique id chosen before the first try, so a retried write after a lost
  connection never stores a message twice.
- **Semantic recall**: vectors in a pgvector table with an HNSW index (cosine),
  made by its own migration once the embedder's width is known. The
  ``vector`` extension must be available to the database (``CREATE
  EXTENSION vector`` needs a superuser once; the error says so).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from cortana.errors import ConfigError
from cortana.memory.migrations import Migration
from cortana.memory.pgstore import PostgresStore, psycopg_module, redact_dsn
from cortana.memory.recall import Recall, RecalledMessage
from cortana.memory.stored import StoredMemory, StoredMessage, history_skip, trim_cut_tool_results
from cortana.memory.vectors import Neighbour, VectorEntry
from cortana.messages import STAND_IN_NAMES, Message, ThreadRef

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["POSTGRES_MIGRATIONS", "PgVectorIndex", "PostgresMemory", "postgres_vector_migrations", "redact_dsn"]

POSTGRES_MIGRATIONS: list[Migration] = [
    (
        "0001_threads_messages_working_memory",
        """
        CREATE TABLE cortana_threads (
            resource_id TEXT NOT NULL,
            thread_id   TEXT NOT NULL,
            title       TEXT,
            created_at  DOUBLE PRECISION NOT NULL,
            updated_at  DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (resource_id, thread_id)
        );
        CREATE TABLE cortana_messages (
            id           BIGSERIAL PRIMARY KEY,
            uid          UUID NOT NULL UNIQUE,      -- chosen by the writer: a retried insert finds its row
            resource_id  TEXT NOT NULL,
            thread_id    TEXT NOT NULL,
            role         TEXT NOT NULL,
            kind         TEXT NOT NULL DEFAULT 'message',  -- 'message' or 'summary'
            body         TEXT NOT NULL,             -- the Message as JSON, exactly as sent
            created_at   DOUBLE PRECISION NOT NULL,
            keep_from_id BIGINT                     -- a summary: the first message kept after it
        );
        CREATE INDEX cortana_messages_by_thread ON cortana_messages (resource_id, thread_id, id);
        CREATE INDEX cortana_messages_user_by_resource ON cortana_messages (resource_id, id) WHERE role = 'user';
        CREATE TABLE cortana_working_memory (
            scope       TEXT PRIMARY KEY,           -- 'resource:<id>' or 'thread:<resource>/<thread>'
            content     TEXT NOT NULL,
            updated_at  DOUBLE PRECISION NOT NULL
        );
        """,
    ),
    (
        "0002_thread_client",
        """
        -- the client that started the thread: cli, serve, mcp, acp (NULL: started before labels)
        ALTER TABLE cortana_threads ADD COLUMN client TEXT;
        """,
    ),
]
"""The core schema. Never edit or reorder a shipped migration: add a new one."""

VECTOR_TABLE_PREFIX = "cortana_recall_vectors_"


def postgres_vector_migrations(dimensions: int) -> list[Migration]:
    """The migrations that make the pgvector table and HNSW index for ``dimensions``-wide embeddings."""
    table = f"{VECTOR_TABLE_PREFIX}{int(dimensions)}"
    return [
        (
            f"recall_0001_vectors_{int(dimensions)}",
            f"""
            CREATE EXTENSION IF NOT EXISTS vector;
            CREATE TABLE {table} (
                message_id  BIGINT PRIMARY KEY REFERENCES cortana_messages (id) ON DELETE CASCADE,
                resource_id TEXT NOT NULL,
                thread_id   TEXT NOT NULL,
                embedding   vector({int(dimensions)}) NOT NULL
            );
            CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops);
            CREATE INDEX {table}_by_resource ON {table} (resource_id, thread_id);
            """,
        )
    ]


def _vector(values: Sequence[float]) -> str:
    """A vector as pgvector's text form (``[0.1,0.2]``), sent as text and cast: no extra client package."""
    return "[" + ",".join(format(float(v), ".7g") for v in values) + "]"


class PgVectorIndex:
    """A :class:`~cortana.memory.vectors.VectorIndex` on pgvector: one table per width with an HNSW index (cosine).

    Keys are message ids (the table references ``cortana_messages``), groups resources, subgroups threads.

    Args:
        store: the database.
        who: the embedder, named in the error when a vector's width differs from the table's.
    """

    def __init__(self, store: PostgresStore, *, who: str = "the embedder") -> None:
        self.store = store
        self.who = who
        self._dimensions: int | None = None

    async def dimensions(self) -> int | None:
        """The width of the vector table this database already has (``None``: no vectors yet)."""
        if self._dimensions is None:

            async def find(c: AsyncConnection[Any]) -> list[str]:
                cursor = await c.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                    "AND table_name LIKE %s",
                    (VECTOR_TABLE_PREFIX + "%",),
                )
                return [str(row[0]) for row in await cursor.fetchall()]

            tables = await self.store.run(find)
            self._dimensions = int(tables[0].rsplit("_", 1)[1]) if tables else None
        return self._dimensions

    async def prepare(self, dimensions: int) -> str:
        """The table for ``dimensions``-wide vectors, made by its migration on first use."""
        stored = await self.dimensions()
        if stored is None:
            psycopg = psycopg_module()
            try:
                await self.store.migrate(postgres_vector_migrations(dimensions))
            except psycopg.Error as error:
                raise ConfigError(
                    f"semantic recall on PostgreSQL needs the pgvector extension, and {self.store.location} could "
                    f"not enable it ({str(error).strip().splitlines()[0]}); install pgvector on the server and run "
                    "`CREATE EXTENSION vector;` once as a superuser in this database, or turn recall off",
                    key="memory.recall",
                ) from error
            self._dimensions = stored = dimensions
        if dimensions != stored:
            raise ConfigError(
                f"the recall index holds {stored}-dimensional vectors but {self.who} makes {dimensions}; "
                "keep one embedder per memory database",
                key="memory.recall.embedder",
            )
        return f"{VECTOR_TABLE_PREFIX}{dimensions}"

    async def add(self, entries: Sequence[VectorEntry]) -> None:
        """Index ``entries`` in a transaction of their own."""
        if entries:
            table = await self.prepare(len(entries[0].vector))
            await self.store.run(lambda c: self.insert(c, table, entries))

    async def insert(self, c: AsyncConnection[Any], table: str, entries: Sequence[VectorEntry]) -> None:
        """Index ``entries`` in the caller's transaction (the messages they belong to are written in it too)."""
        if not entries:
            return
        # one multi-row statement: measured 4x faster than executemany into an HNSW-indexed table
        await c.execute(
            f"INSERT INTO {table} (message_id, resource_id, thread_id, embedding) VALUES "
            + ", ".join(["(%s, %s, %s, %s::vector)"] * len(entries))
            + " ON CONFLICT (message_id) DO NOTHING",
            [value for entry in entries for value in (entry.key, entry.group, entry.subgroup, _vector(entry.vector))],
        )

    async def nearest(
        self,
        query: Sequence[float],
        count: int,
        *,
        group: str,
        subgroup: str | None = None,
        exclude: Collection[int] = (),
    ) -> list[Neighbour]:
        """HNSW first; an exact scan of the group when the graph finds too few of its vectors."""
        dimensions = await self.dimensions()
        if dimensions is None:
            return []
        table = f"{VECTOR_TABLE_PREFIX}{dimensions}"
        where, scope = "resource_id = %s", [group]
        if subgroup is not None:
            where += " AND thread_id = %s"
            scope.append(subgroup)
        wanted = count + len(exclude)
        vector = _vector(query)

        async def search(c: AsyncConnection[Any]) -> list[Any]:
            # HNSW filters after it searches: ask it for enough candidates that the group's are among them
            await c.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(4 * wanted, 1000))}")
            nearest = (
                f"SELECT message_id, thread_id, 1 - (embedding <=> %s::vector) FROM {table} WHERE {where} "
                "ORDER BY embedding <=> %s::vector"
            )
            hits = await (await c.execute(f"{nearest} LIMIT %s", (vector, *scope, vector, wanted))).fetchall()
            if len(hits) < wanted:  # a small group in a large table: its rows fell outside the graph's reach
                exact = nearest.replace("ORDER BY embedding <=> %s::vector", "ORDER BY (embedding <=> %s::vector) + 0")
                hits = await (await c.execute(f"{exact} LIMIT %s", (vector, *scope, vector, wanted))).fetchall()
            return list(hits)

        hits = await self.store.run(search)
        found = [Neighbour(int(row[0]), str(row[1]), float(row[2])) for row in hits if row[0] not in exclude]
        return found[:count]

    async def keys(self, group: str) -> set[int]:
        """The message ids the index holds for ``group``."""
        dimensions = await self.dimensions()
        if dimensions is None:
            return set()
        table = f"{VECTOR_TABLE_PREFIX}{dimensions}"

        async def read(c: AsyncConnection[Any]) -> set[int]:
            cursor = await c.execute(f"SELECT message_id FROM {table} WHERE resource_id = %s", (group,))
            return {int(row[0]) for row in await cursor.fetchall()}

        return await self.store.run(read)


class PostgresMemory(StoredMemory):
    """A ``MemoryProvider`` in PostgreSQL, shared by every process and machine that uses the same database.

    Args:
        dsn: a libpq connection string or URI (``postgresql://user:password@host:5432/dbname``).
        last_messages: how many recent messages a run loads.
        working_memory: ``"resource"`` (shared by the resource's threads), ``"thread"``, or None (off).
        recall: semantic recall (``Recall(embedder)``) on pgvector, or None for off.
        max_connections: connections this process opens at most.
        retry_s: how long a call retries a lost connection before raising ``MemoryUnavailable``.
    """

    def __init__(
        self,
        dsn: str,
        *,
        last_messages: int = 40,
        working_memory: Literal["resource", "thread"] | None = "resource",
        recall: Recall | None = None,
        max_connections: int = 4,
        retry_s: float = 15.0,
    ) -> None:
        super().__init__(last_messages=last_messages, working_memory=working_memory, recall=recall)
        self.store = PostgresStore(dsn, schema=POSTGRES_MIGRATIONS, max_connections=max_connections, retry_s=retry_s)
        """The database's connections, shared with recall."""
        self.vectors: PgVectorIndex | None = (
            PgVectorIndex(self.store, who=f"the embedder '{recall.embedder.name}'") if recall is not None else None
        )
        """Recall's vector index on pgvector (``None`` when recall is off)."""

    @property
    def location(self) -> str:
        """The server and database, without the password."""
        return self.store.location

    def close(self) -> None:
        """Close the idle connections."""
        self.store.close()

    async def aclose(self) -> None:
        """Close the idle connections from inside the running loop."""
        await self.store.aclose()

    # -- history ------------------------------------------------------------------------------

    async def history(self, thread: ThreadRef) -> list[StoredMessage]:
        """The thread's latest summary (if any) and the last ``last_messages`` messages after it."""

        async def read(c: AsyncConnection[Any]) -> list[StoredMessage]:
            key = (thread.resource_id, thread.thread_id)
            latest = await (
                await c.execute(
                    "SELECT id, keep_from_id FROM cortana_messages WHERE resource_id = %s AND thread_id = %s "
                    "AND kind = 'summary' ORDER BY id DESC LIMIT 1",
                    key,
                )
            ).fetchone()
            summary, start = (latest[0], latest[1] or latest[0]) if latest else (None, 0)
            since = "resource_id = %s AND thread_id = %s AND id >= %s AND kind = 'message'"
            count = await (
                await c.execute(f"SELECT COUNT(*) FROM cortana_messages WHERE {since}", (*key, start))
            ).fetchone()
            skip = history_skip(int(count[0]) if count else 0, self.last_messages)
            recent = await self._select(c, f"{since} ORDER BY id OFFSET %s", (*key, start, skip))
            head = await self._select(c, "id = %s", (summary,)) if summary else []
            return head + trim_cut_tool_results(recent)

        return await self.store.run(read)

    async def messages(self, thread: ThreadRef) -> list[StoredMessage]:
        """Every stored message of the thread, summaries and compacted ones included, oldest first."""
        return await self.store.run(
            lambda c: self._select(
                c, "resource_id = %s AND thread_id = %s ORDER BY id", (thread.resource_id, thread.thread_id)
            )
        )

    async def append_messages(self, thread: ThreadRef, messages: Sequence[Message]) -> None:
        """Store messages as they become final, with their recall vectors in the same transaction."""
        uids = [uuid.uuid4() for _ in messages]  # chosen once: a retry finds these rows instead of doubling them
        entries: list[VectorEntry] = []
        table = None
        if self.recall is not None and self.vectors is not None:
            try:  # keyed by position until the messages have their ids
                entries = await self.recall.entries(thread, list(enumerate(messages)))
                table = await self.vectors.prepare(len(entries[0].vector)) if entries else None
            except BaseException:
                await self.store.run(lambda c: self._insert(c, thread, messages, "message", uids))
                raise  # the messages are kept; only their recall vectors are missing

        async def write(c: AsyncConnection[Any]) -> None:
            ids = await self._insert(c, thread, messages, "message", uids)
            if table is not None and self.vectors is not None:
                keyed = [replace(entry, key=ids[entry.key]) for entry in entries]
                await self.vectors.insert(c, table, keyed)

        await self.store.run(write)

    async def add_summary(self, thread: ThreadRef, summary: Message, *, kept: int = 0) -> None:
        """Store a compaction summary replacing all but the ``kept`` latest messages; they all stay stored."""
        uid = uuid.uuid4()

        async def store(c: AsyncConnection[Any]) -> None:
            boundary = (
                await (
                    await c.execute(
                        "SELECT id FROM cortana_messages WHERE resource_id = %s AND thread_id = %s "
                        "AND kind = 'message' AND uid <> %s ORDER BY id DESC LIMIT 1 OFFSET %s",
                        (thread.resource_id, thread.thread_id, uid, kept - 1),
                    )
                ).fetchone()
                if kept
                else None
            )
            [summary_id] = await self._insert(c, thread, [summary], "summary", [uid])
            keep_from = boundary[0] if boundary else summary_id
            await c.execute("UPDATE cortana_messages SET keep_from_id = %s WHERE id = %s", (keep_from, summary_id))

        await self.store.run(store)

    async def threads(self, resource_id: str) -> list[tuple[ThreadRef, float]]:
        """The resource's threads, most recently updated first, with their update time."""

        async def read(c: AsyncConnection[Any]) -> list[tuple[ThreadRef, float]]:
            cursor = await c.execute(
                "SELECT thread_id, updated_at FROM cortana_threads WHERE resource_id = %s ORDER BY updated_at DESC",
                (resource_id,),
            )
            return [(ThreadRef(resource_id=resource_id, thread_id=row[0]), row[1]) for row in await cursor.fetchall()]

        return await self.store.run(read)

    async def last_user_message_at(
        self, resource_id: str, *, skip_names: Sequence[str] = STAND_IN_NAMES
    ) -> float | None:
        """When the user last wrote in any thread of ``resource_id`` (a Unix time), or ``None``."""

        async def read(c: AsyncConnection[Any]) -> float | None:
            cursor = await c.execute(
                "SELECT created_at FROM cortana_messages WHERE resource_id = %s AND role = 'user' "
                "AND kind = 'message' AND NOT (COALESCE(body::jsonb ->> 'name', '') = ANY(%s)) "
                "ORDER BY id DESC LIMIT 1",
                (resource_id, list(skip_names)),
            )
            row = await cursor.fetchone()
            return float(row[0]) if row else None

        return await self.store.run(read)

    # -- working memory ---------------------------------------------------------------------

    async def read_working_memory(self, key: str) -> str:
        """The working memory stored under ``key``."""

        async def read(c: AsyncConnection[Any]) -> str:
            cursor = await c.execute("SELECT content FROM cortana_working_memory WHERE scope = %s", (key,))
            row = await cursor.fetchone()
            return str(row[0]) if row else ""

        return await self.store.run(read)

    async def write_working_memory(self, key: str, content: str) -> None:
        """Replace the working memory stored under ``key``."""

        async def write(c: AsyncConnection[Any]) -> None:
            await c.execute(
                "INSERT INTO cortana_working_memory (scope, content, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (scope) DO UPDATE SET content = EXCLUDED.content, updated_at = EXCLUDED.updated_at",
                (key, content, time.time()),
            )

        await self.store.run(write)

    # -- semantic recall ----------------------------------------------------------------------

    async def recalled(self, thread: ThreadRef, query: Awaitable[list[float]], *, exclude: set[int]) -> str | None:
        """Earlier messages near the prompt (pgvector: HNSW, then an exact scan when it finds too few)."""
        recall, vectors = self.recall, self.vectors
        assert recall is not None and vectors is not None
        if await vectors.dimensions() is None:
            return None
        hits = await recall.nearest(vectors, thread, await query, exclude=exclude)
        if not hits:
            return None

        async def windows(c: AsyncConnection[Any]) -> list[list[RecalledMessage]]:
            groups: list[list[RecalledMessage]] = []
            for hit in hits:
                window = await self._neighbours(c, thread.resource_id, hit.subgroup, hit.key, recall.neighbours)
                groups.append([item for item_id, item in window if item_id not in exclude])
            return groups

        return recall.render(await self.store.run(windows))

    # -- SQL ----------------------------------------------------------------------------------

    async def thread_clients(self, resource_id: str) -> dict[str, str]:
        """Each of the resource's threads that has a label -> the client that started it."""

        async def read(c: AsyncConnection[Any]) -> dict[str, str]:
            cursor = await c.execute(
                "SELECT thread_id, client FROM cortana_threads WHERE resource_id = %s AND client IS NOT NULL",
                (resource_id,),
            )
            return {row[0]: row[1] for row in await cursor.fetchall()}

        return await self.store.run(read)

    async def _insert(
        self,
        c: AsyncConnection[Any],
        thread: ThreadRef,
        messages: Sequence[Message],
        kind: str,
        uids: Sequence[uuid.UUID],
    ) -> list[int]:
        now = time.time()
        await c.execute(
            "INSERT INTO cortana_threads (resource_id, thread_id, created_at, updated_at, client) "
            "VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (resource_id, thread_id) DO UPDATE SET updated_at = EXCLUDED.updated_at",
            (thread.resource_id, thread.thread_id, now, now, self.client or None),
        )
        if not messages:
            return []
        rows = [
            (uid, thread.resource_id, thread.thread_id, m.role, kind, m.model_dump_json(exclude_defaults=True), now)
            for uid, m in zip(uids, messages, strict=True)
        ]
        # a retry after a lost commit meets its own rows: DO UPDATE (a no-op) makes RETURNING give their ids too
        cursor = await c.execute(
            "INSERT INTO cortana_messages (uid, resource_id, thread_id, role, kind, body, created_at) VALUES "
            + ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(rows))
            + " ON CONFLICT (uid) DO UPDATE SET uid = EXCLUDED.uid RETURNING uid, id",
            [value for row in rows for value in row],
        )
        ids = {row[0]: int(row[1]) for row in await cursor.fetchall()}
        return [ids[uid] for uid in uids]

    async def _select(self, c: AsyncConnection[Any], where: str, parameters: Sequence[object]) -> list[StoredMessage]:
        cursor = await c.execute(
            f"SELECT id, resource_id, thread_id, kind, body, created_at FROM cortana_messages WHERE {where}",
            tuple(parameters),
        )
        return [
            StoredMessage(
                int(row[0]),
                ThreadRef(resource_id=row[1], thread_id=row[2]),
                row[3],
                Message.model_validate_json(row[4]),
                float(row[5]),
            )
            for row in await cursor.fetchall()
        ]

    async def _neighbours(
        self, c: AsyncConnection[Any], resource_id: str, thread_id: str, message_id: int, neighbours: int
    ) -> list[tuple[int, RecalledMessage]]:
        """The hit and up to ``neighbours`` user/assistant messages on each side of it, oldest first."""
        spoken = "resource_id = %s AND thread_id = %s AND kind = 'message' AND role IN ('user', 'assistant')"
        columns = "SELECT id, role, body, created_at FROM cortana_messages"
        cursor = await c.execute(
            f"({columns} WHERE {spoken} AND id < %s ORDER BY id DESC LIMIT %s) "
            f"UNION ALL ({columns} WHERE {spoken} AND id >= %s ORDER BY id LIMIT %s) ORDER BY id",
            (resource_id, thread_id, message_id, neighbours, resource_id, thread_id, message_id, neighbours + 1),
        )
        return [
            (int(row[0]), (thread_id, row[1], float(row[3]), Message.model_validate_json(row[2])))
            for row in await cursor.fetchall()
        ]
