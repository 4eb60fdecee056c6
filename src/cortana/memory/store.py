"""``SQLiteStore``: one SQLite file that memory features share, and how they reach it.

History, working memory and semantic recall (later: experience and the
heartbeat's state) keep their tables in one WAL-mode file per workspace.
Each feature goes through the store's public methods: :meth:`SQLiteStore.read`
and :meth:`SQLiteStore.write` run a function with the connection on a worker
thread (a write inside a ``BEGIN IMMEDIATE`` transaction), and
:meth:`SQLiteStore.migrate` applies named, append-only migrations, the core
ones when the file opens and a feature's own (recall's vector table) when the
feature first needs them. A second backend (PostgreSQL) replaces this class,
not the features' SQL calls through private names.

Several processes may use one file at once (the heartbeat and a turn): every
write is a short transaction, and waiters queue on ``busy_timeout`` instead of
failing with "database is locked".
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from cortana.errors import UserError
from cortana.memory.migrations import MIGRATIONS, Migration, apply_migrations

__all__ = ["SQLiteStore", "private_file", "private_folder", "sqlite_module"]

T = TypeVar("T")
SETUP_DEADLINE_S = 30.0


def sqlite_module() -> ModuleType | None:
    """A sqlite3-compatible module that can load extensions: the standard one, else sqlean, else pysqlite3."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.enable_load_extension(False)  # missing when the interpreter's sqlite3 was built without it
        return sqlite3
    except AttributeError:
        pass
    finally:
        probe.close()
    for name in ("sqlean", "pysqlite3.dbapi2"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def private_folder(folder: Path) -> Path:
    """``folder`` for Cortana's own files: made, or narrowed, to its owner only (0700), git told to ignore it.

    Conversations, working memory and typed history are the user's private
    data: no other local user may read them, and ``git add .`` must not sweep
    them into a repository.

    Cortana never makes a symlink here, so a symlink here (the folder itself, or a ``memory.db-wal``, ``history``
    or ``cortana.log`` in it: a repository may ship any of them) is refused: SQLite, the terminal's history and the
    log would write through it, into a file of the user's elsewhere.

    Raises:
        UserError: the folder, or something in it, is a symlink.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    links = (
        [folder] if folder.is_symlink() else [Path(entry.path) for entry in os.scandir(folder) if entry.is_symlink()]
    )
    if links:
        raise UserError(
            f"{links[0]} is a symlink (to {os.readlink(links[0])!r}); Cortana keeps its private files only in a real "
            "folder of real files: remove the link (Cortana makes what it needs itself)"
        )
    folder.chmod(0o700)
    try:  # O_EXCL and O_NOFOLLOW: a link there is never followed, an existing file never changed
        fd = os.open(folder / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return folder
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("# Cortana's own files (memory, history): never commit them.\n*\n")
    return folder


def private_file(path: Path) -> Path:
    """``path`` created empty if missing, readable and writable by its owner only (0600); a symlink there is refused
    (:class:`~cortana.errors.UserError`), never followed."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        if os.path.islink(path):
            raise UserError(f"{path} is a symlink; Cortana keeps its private files only as real files") from None
        raise
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path


def _retry_while_locked(
    step: Callable[[], object],
    error_type: type[Exception] = sqlite3.OperationalError,
    deadline_s: float = SETUP_DEADLINE_S,
) -> None:
    """Run a setup step, retrying while another process holds the file.

    SQLite answers "database is locked" at once, without waiting on
    ``busy_timeout``, when two connections meet while one switches the file to
    WAL or creates its schema (the busy handler is skipped where waiting could
    deadlock). Both steps are idempotent, so waiting briefly and trying again
    is the fix; past the deadline the error is raised as it came. ``error_type``
    is the driver's ``OperationalError`` (sqlean's is not sqlite3's).
    """
    give_up = time.monotonic() + deadline_s
    pause = 0.005
    while True:
        try:
            step()
            return
        except error_type as error:
            message = str(error).lower()
            if ("locked" not in message and "busy" not in message) or time.monotonic() > give_up:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


class SQLiteStore:
    """One SQLite file, opened on first use, with the core schema applied.

    Args:
        path: the file (created with its folder).
        load_extensions: pick a SQLite driver that can load extensions (sqlite-vec),
            where one is installed.
        on_open: called with the new connection once it is configured and migrated
            (recall loads its extension here).
        schema: the migrations applied when the file opens: memory's core schema by default; a
            feature with a file of its own (experience's ``experience.db``) passes its own.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        load_extensions: bool = False,
        on_open: Sequence[Callable[[Any], None]] = (),
        schema: Sequence[Migration] = MIGRATIONS,
    ) -> None:
        self.path = Path(path)
        self.schema = list(schema)
        self.load_extensions = load_extensions
        self.on_open = list(on_open)
        self._lock = threading.Lock()
        self._connection: Any = None
        self._driver: Any = sqlite3

    def connection(self) -> Any:
        """The open connection (opened, configured and migrated on first use); hold the store's lock."""
        if self._connection is None:
            if not self.path.parent.exists():
                self.path.parent.mkdir(mode=0o700, parents=True)
            private_file(self.path)  # SQLite gives its -wal and -shm files the same mode
            driver: Any = sqlite3
            if self.load_extensions:
                driver = sqlite_module() or sqlite3  # one that can load sqlite-vec, where installed
            connection = driver.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA busy_timeout = 30000")
            _retry_while_locked(lambda: connection.execute("PRAGMA journal_mode = WAL"), driver.OperationalError)
            connection.execute("PRAGMA synchronous = NORMAL")
            self._driver = driver
            self.migrate(connection, self.schema)
            for hook in self.on_open:
                hook(connection)
            self._connection = connection
        return self._connection

    def migrate(self, connection: Any, migrations: Sequence[Migration]) -> list[str]:
        """Apply the ``migrations`` this file lacks (retrying while another process creates them)."""
        applied: list[str] = []
        _retry_while_locked(
            lambda: applied.extend(apply_migrations(connection, migrations)), self._driver.OperationalError
        )
        return applied

    async def read(self, work: Callable[[Any], T]) -> T:
        """Run ``work(connection)`` on a worker thread, holding the store's lock."""

        def locked() -> T:
            with self._lock:
                return work(self.connection())

        return await asyncio.to_thread(locked)

    async def write(self, work: Callable[[Any], T]) -> T:
        """Run ``work(connection)`` inside one ``BEGIN IMMEDIATE`` transaction (rolled back if it raises)."""

        def transaction(connection: Any) -> T:
            connection.execute("BEGIN IMMEDIATE")
            try:
                result = work(connection)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            return result

        return await self.read(transaction)

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
