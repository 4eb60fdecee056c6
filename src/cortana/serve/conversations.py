"""Which Cortana thread a client's chat history continues.

An OpenAI-style client sends the whole conversation with every request. The
assistant keeps conversations itself (memory, recall, compaction), so each
request is mapped onto a thread: the history before the new message is
hashed, and a history the server answered before continues the thread it
was answered on. Only the new message and the answer are stored; the history
is never stored again. A history the server has not seen (a conversation
begun elsewhere, or edited by the user) starts a new thread, seeded once with
the client's earlier messages. A history whose thread has moved on since (the
client regenerated an answer, or branched) is a new branch: a new thread too.

The map lives in the workspace's ``.cortana/serve.db`` (SQLite, its schema made
and changed by ``SERVE_MIGRATIONS``), so a client's conversation continues after
the server restarts.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from cortana.memory.migrations import Migration, apply_migrations
from cortana.memory.store import private_folder

__all__ = ["SERVE_MIGRATIONS", "ConversationMap", "conversation_key"]

SERVE_MIGRATIONS: list[Migration] = [
    (
        "serve_0001_histories_heads",
        """
        -- IF NOT EXISTS: a serve.db made before migrations (the same two tables) takes this one as applied
        CREATE TABLE IF NOT EXISTS histories (key TEXT PRIMARY KEY, thread TEXT NOT NULL, used REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS heads (thread TEXT PRIMARY KEY, key TEXT NOT NULL);
        """,
    ),
    (
        "serve_0002_histories_by_use",
        """
        -- the daily forgetting of unused digests reads them by age
        CREATE INDEX IF NOT EXISTS histories_by_use ON histories (used);
        """,
    ),
]
"""The schema of ``serve.db``, applied as it opens like every other store's (``cortana.memory.migrations``): never
edit or reorder a shipped migration, add one."""

Turn = tuple[str, str]
"""One message of a client's history as the map sees it: (role, text), role ``user`` or ``assistant``."""


def conversation_key(dialogue: Sequence[Turn]) -> str:
    """A digest of ``dialogue`` (roles and texts, outer whitespace ignored): equal histories, equal keys."""
    data = json.dumps([[role, text.strip()] for role, text in dialogue], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class ConversationMap:
    """History digests -> threads, and each thread's newest digest (its head), in a SQLite file.

    Args:
        path: the database file (made, in a private folder, if missing); ``":memory:"`` for tests.
        keep_days: digests unused this long are forgotten (the threads stay in memory).
    """

    def __init__(self, path: Path | str, *, keep_days: float = 90) -> None:
        if str(path) != ":memory:":
            private_folder(Path(path).parent)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout = 30000")
        self._db.execute("PRAGMA journal_mode = WAL")
        apply_migrations(self._db, SERVE_MIGRATIONS)
        cutoff = time.time() - keep_days * 86400
        with self._lock:
            self._db.execute("DELETE FROM histories WHERE used < ?", (cutoff,))

    def find(self, key: str) -> tuple[str, bool] | None:
        """The thread ``key``'s history was answered on, and whether it is still that thread's newest history."""
        with self._lock:
            row = self._db.execute(
                "SELECT h.thread, heads.key = h.key FROM histories h LEFT JOIN heads ON heads.thread = h.thread "
                "WHERE h.key = ?",
                (key,),
            ).fetchone()
        return None if row is None else (str(row[0]), bool(row[1]))

    def advance(self, thread: str, key: str) -> None:
        """``thread`` now ends with the history whose digest is ``key``."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT OR REPLACE INTO histories (key, thread, used) VALUES (?, ?, ?)", (key, thread, now)
            )
            self._db.execute("INSERT OR REPLACE INTO heads (thread, key) VALUES (?, ?)", (thread, key))
            self._db.execute("COMMIT")

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
