"""The memory backends the memory test suites run against: SQLite files, and a real PostgreSQL with pgvector.

PostgreSQL comes from the ``pgserver`` wheel (PostgreSQL and pgvector bundled; a dev dependency):
one server per test session, in a temp folder, reached over a unix socket; each test gets fresh
databases, so tests never see each other's rows.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from cortana.memory.postgres import PostgresMemory
from cortana.memory.sqlite import SQLiteMemory
from cortana.memory.stored import StoredMemory


class Backend:
    """Makes memories of one backend for one test; the same ``name`` reopens the same database."""

    def __init__(self, kind: str, folder: Path, server: Any = None) -> None:
        self.kind = kind
        self.folder = folder
        self.server = server
        self.databases: dict[str, str] = {}
        self.opened: list[StoredMemory] = []

    def location(self, name: str = "memory") -> str:
        """The file path or the DSN of database ``name`` (made on first use)."""
        if self.kind == "sqlite":
            return str(self.folder / f"{name}.db")
        if name not in self.databases:
            database = f"t_{uuid.uuid4().hex[:12]}"
            self.server.psql(f"CREATE DATABASE {database};")
            from psycopg.conninfo import make_conninfo

            self.databases[name] = make_conninfo(self.server.get_uri(), dbname=database)
        return self.databases[name]

    def make(self, name: str = "memory", **options: Any) -> StoredMemory:
        """A memory on database ``name`` with ``options`` (``last_messages``, ``working_memory``, ``recall``)."""
        memory: StoredMemory
        if self.kind == "sqlite":
            memory = SQLiteMemory(self.location(name), **options)
        else:
            memory = PostgresMemory(self.location(name), **options)
        self.opened.append(memory)
        return memory

    @property
    def constructor(self) -> str:
        """The class name, for code run in a subprocess (``from cortana.memory.<kind> import <it>``)."""
        return "SQLiteMemory" if self.kind == "sqlite" else "PostgresMemory"

    def close(self) -> None:
        for memory in self.opened:
            memory.close()
