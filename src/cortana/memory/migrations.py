"""Named, append-only schema migrations for the SQLite memory file.

Each migration runs once, in order, inside a transaction, and is recorded in
``_migrations``. Never edit or reorder a shipped migration: add a new one.
``MIGRATIONS`` is the core schema, applied when the file opens; a feature
with tables of its own (recall's vector index, whose width depends on the
embedder) keeps its migrations beside its code and applies them through
``SQLiteStore.migrate`` when it first needs them, recorded in the same table.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

__all__ = ["MIGRATIONS", "Migration", "apply_migrations"]

Migration = tuple[str, str]
"""A migration: its unique name and its SQL script."""

MIGRATIONS: list[Migration] = [
    (
        "0001_threads_messages_working_memory",
        """
        CREATE TABLE threads (
            resource_id TEXT NOT NULL,
            thread_id   TEXT NOT NULL,
            title       TEXT,
            created_at  REAL NOT NULL,
            updated_at  REAL NOT NULL,
            PRIMARY KEY (resource_id, thread_id)
        );
        CREATE TABLE messages (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            resource_id TEXT NOT NULL,
            thread_id   TEXT NOT NULL,
            role        TEXT NOT NULL,
            kind        TEXT NOT NULL DEFAULT 'message',  -- 'message' or 'summary'
            body        TEXT NOT NULL,                   -- the Message as JSON, exactly as sent
            created_at  REAL NOT NULL
        );
        CREATE INDEX messages_by_thread ON messages (resource_id, thread_id, id);
        CREATE TABLE working_memory (
            scope       TEXT PRIMARY KEY,                -- 'resource:<id>' or 'thread:<resource>/<thread>'
            content     TEXT NOT NULL,
            updated_at  REAL NOT NULL
        );
        """,
    ),
    (
        "0002_summary_keeps_recent_messages",
        """
        -- a summary replaces the messages before keep_from_id; those from it on stay in the history
        ALTER TABLE messages ADD COLUMN keep_from_id INTEGER;
        """,
    ),
    (
        "0003_thread_client",
        """
        -- the client that started the thread: cli, serve, mcp, acp (NULL: started before labels)
        ALTER TABLE threads ADD COLUMN client TEXT;
        """,
    ),
]


def apply_migrations(connection: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Apply the ``migrations`` this file lacks, in order; returns their names."""
    connection.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    applied: list[str] = []
    for name, script in migrations:
        connection.execute("BEGIN IMMEDIATE")
        try:
            if connection.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                connection.execute("COMMIT")
                continue
            for statement in _statements(script):
                connection.execute(statement)
            connection.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
            connection.execute("COMMIT")
            applied.append(name)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    return applied


def _statements(script: str) -> list[str]:
    """Split a migration into statements (sqlite3's executescript would commit our transaction)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [statement.strip() for statement in "\n".join(lines).split(";") if statement.strip()]
