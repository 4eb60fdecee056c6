"""``PostgresStore``: a few connections to one PostgreSQL database, with migrations and retries.

What ``SQLiteStore`` is to the SQLite file, this is to a PostgreSQL server:
:meth:`PostgresStore.run` runs an async function inside one transaction on a
pooled connection (psycopg 3, async), and :meth:`PostgresStore.migrate`
applies named, append-only migrations, all processes serialized on an
advisory lock so two machines starting at once never race on the schema.

A connection lost mid-call (the server restarted, a network blip, an admin
ending the session) is retried with a fresh connection until ``retry_s``
runs out, then raised as :class:`~cortana.errors.MemoryUnavailable`: never
dropped silently. Retrying is safe because every write is idempotent (rows
carry a unique id chosen before the first try), so a commit whose answer was
lost cannot be written twice.

psycopg is optional (``pip install 'cortana[postgres]'``) and imported on
first use.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from cortana.errors import ConfigError, MemoryUnavailable
from cortana.memory.migrations import Migration

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresStore", "redact_dsn"]

T = TypeVar("T")
MIGRATION_LOCK = 0x636F7274  # "cort": the advisory lock every process takes to migrate
CONNECT_TIMEOUT_S = 10


def psycopg_module() -> ModuleType:
    """psycopg 3, or a ConfigError saying how to install it."""
    try:
        import psycopg  # optional (cortana[postgres]): loaded only when PostgreSQL memory is used
    except ImportError:
        raise ConfigError(
            "PostgreSQL memory needs psycopg 3; install it with `pip install 'cortana[postgres]'`",
            key="memory.backend",
        ) from None
    return psycopg


def redact_dsn(dsn: str) -> str:
    """``dsn`` as ``postgresql://user@host:port/dbname``: safe to log (no password, no other options)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:  # unparsable, or psycopg missing: say nothing that could hold the password
        return "postgresql://(unreadable connection string)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


class PostgresStore:
    """Connections to one PostgreSQL database, at most ``max_connections`` at once.

    Args:
        dsn: a libpq connection string or URI (``postgresql://user:pw@host:5432/db``).
        schema: the migrations applied on first use.
        max_connections: connections this process opens at most (calls beyond wait their turn).
        retry_s: how long a call keeps retrying a lost connection before raising ``MemoryUnavailable``.
    """

    def __init__(
        self, dsn: str, *, schema: Sequence[Migration] = (), max_connections: int = 4, retry_s: float = 15.0
    ) -> None:
        if max_connections < 1:
            raise ConfigError(f"max_connections must be at least 1, got {max_connections}", key="memory")
        self.dsn = dsn
        self.schema = list(schema)
        self.max_connections = max_connections
        self.retry_s = retry_s
        self.location = redact_dsn(dsn)
        """Where the database is, safe to show: no password."""
        self._idle: list[AsyncConnection[Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._ready = False

    async def run(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run ``work(connection)`` inside one transaction; retried on a lost connection.

        ``work`` must be safe to run again (idempotent): a retry follows a failure whose commit
        may or may not have happened.
        """
        psycopg = psycopg_module()
        slots = self._bind_loop()
        give_up = time.monotonic() + self.retry_s
        pause = 0.05
        async with slots:
            while True:
                connection = None
                try:
                    connection = await self._acquire()
                    if not self._ready:
                        await self._create_schema(connection)
                    async with connection.transaction():
                        result = await work(connection)
                except psycopg.OperationalError as error:  # lost, refused, shut down, deadlock, serialization
                    self._discard(connection)
                    if time.monotonic() + pause > give_up:
                        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                        raise MemoryUnavailable(
                            f"PostgreSQL memory at {self.location} failed and kept failing for {self.retry_s:g}s "
                            f"({reason}). Check that the server is running and reachable, and memory.dsn in "
                            "cortana.yml."
                        ) from error
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 1.0)
                    continue
                except Exception:
                    self._release(connection)  # the transaction was rolled back; the connection is fine
                    raise
                except BaseException:
                    self._discard(connection)  # cancelled mid-statement: the connection's state is unknown
                    raise
                self._release(connection)
                return result

    async def migrate(self, migrations: Sequence[Migration]) -> list[str]:
        """Apply the ``migrations`` the database lacks; returns their names."""
        applied: list[str] = []

        async def apply(connection: AsyncConnection[Any]) -> None:
            applied[:] = await self._apply(connection, migrations)

        await self.run(apply)
        return applied

    def close(self) -> None:
        """Close the idle connections (in-flight calls close theirs when they finish)."""
        for connection in self._idle:
            connection.pgconn.finish()
        self._idle.clear()

    async def aclose(self) -> None:
        """Close the idle connections, politely (from inside the loop that opened them)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.close()

    # -- connections ----------------------------------------------------------------------

    def _bind_loop(self) -> asyncio.Semaphore:
        """The call slots of the running loop; connections made by another (finished) loop are dropped."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop or self._slots is None:
            self.close()
            self._loop = loop
            self._slots = asyncio.Semaphore(self.max_connections)
        return self._slots

    async def _acquire(self) -> AsyncConnection[Any]:
        psycopg = psycopg_module()
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and not connection.broken:
                return connection
        fresh: AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        )
        return fresh

    def _release(self, connection: AsyncConnection[Any] | None) -> None:
        if connection is None:
            return
        if connection.closed or connection.broken:
            self._discard(connection)
        else:
            self._idle.append(connection)

    def _discard(self, connection: AsyncConnection[Any] | None) -> None:
        if connection is not None and not connection.closed:
            connection.pgconn.finish()

    async def _create_schema(self, connection: AsyncConnection[Any]) -> None:
        """Apply the core schema once per store; a user who may not create tables is told what to grant."""
        psycopg = psycopg_module()
        try:
            await self._apply(connection, self.schema)
        except psycopg.errors.InsufficientPrivilege as error:
            raise ConfigError(
                f"the memory's database user cannot create Cortana's tables in {self.location} "
                f"({str(error).strip().splitlines()[0]}); run Cortana once as the database's owner, or "
                "GRANT CREATE ON SCHEMA public TO the user",
                key="memory.dsn",
            ) from error
        self._ready = True

    async def _apply(self, connection: AsyncConnection[Any], migrations: Sequence[Migration]) -> list[str]:
        """Apply missing migrations in one transaction, holding the migration lock."""
        applied: list[str] = []
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await connection.execute(
                "CREATE TABLE IF NOT EXISTS cortana_migrations (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION "
                "NOT NULL)"
            )
            cursor = await connection.execute("SELECT name FROM cortana_migrations")
            done = {row[0] for row in await cursor.fetchall()}
            for name, script in migrations:
                if name in done:
                    continue
                await connection.execute(script.encode())  # bytes, no parameters: several statements at once
                await connection.execute(
                    "INSERT INTO cortana_migrations (name, applied_at) VALUES (%s, %s)", (name, time.time())
                )
                applied.append(name)
        return applied
