"""PostgresMemory's own promises, on a real PostgreSQL with pgvector (the pgserver wheel).

What both backends share is tested once for both (test_memory.py, test_recall.py); here is what
only a server has: connections that die mid-turn, a server that is gone, several processes
migrating at once, pgvector's HNSW filtering, and an extension the user may not create.
"""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from cortana import Agent, ConfigError, MemoryUnavailable, Message, ThreadRef
from cortana.memory.postgres import PostgresMemory
from cortana.memory.recall import Recall
from cortana.testing import ScriptedModel

ME = ThreadRef(resource_id="me", thread_id="t1")


def database(server: Any, owner: str = "postgres") -> str:
    name = f"t_{uuid.uuid4().hex[:12]}"
    server.psql(f"CREATE DATABASE {name} OWNER {owner};")
    return make_conninfo(server.get_uri(), dbname=name)


@pytest.fixture
def dsn(postgres_server: Any) -> str:
    return database(postgres_server)


@pytest.fixture
def memory(dsn: str) -> Iterator[PostgresMemory]:
    made = PostgresMemory(dsn, retry_s=20)
    yield made
    made.close()


def terminate_sessions(dsn: str) -> int:
    """End every other session on the database, as an admin or a restart would."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


class HashEmbedder:
    """Deterministic 8-dimensional vectors from the text: meaning plays no part in these tests."""

    name = "hash-8"

    @staticmethod
    def vector(text: str) -> list[float]:
        rng = random.Random(text)
        return [rng.gauss(0, 1) for _ in range(8)]

    async def embed_query(self, text: str) -> list[float]:
        return self.vector(text)

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(text) for text in texts]


async def test_a_connection_lost_between_calls_is_retried_on_a_fresh_one(memory: PostgresMemory, dsn: str) -> None:
    await memory.append_messages(ME, [Message.user("before")])
    assert terminate_sessions(dsn) >= 1, "the memory's idle connection was ended"
    await memory.append_messages(ME, [Message.user("after")])
    assert [s.message.content for s in await memory.messages(ME)] == ["before", "after"]


def test_connections_killed_mid_turn_lose_nothing_and_double_nothing(dsn: str) -> None:
    """Sessions are ended every 20-60 ms while 150 turns are written: every write lands exactly once."""
    stop = threading.Event()
    kills = 0

    def killer() -> None:
        nonlocal kills
        rng = random.Random(3)
        while not stop.is_set():
            kills += terminate_sessions(dsn)
            stop.wait(rng.uniform(0.02, 0.06))

    async def write() -> list[str]:
        memory = PostgresMemory(dsn, retry_s=30)
        for turn in range(150):
            await memory.append_messages(ME, [Message.user(f"q{turn}"), Message.assistant(f"a{turn}")])
            await memory.set_working_memory(ME, f"turn {turn}")
        stored = [s.message.content for s in await memory.messages(ME)]
        await memory.aclose()
        return stored

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        stored = asyncio.run(write())
    finally:
        stop.set()
        thread.join()
    assert kills >= 5, f"the test must actually cut connections (cut {kills})"
    assert stored == [text for turn in range(150) for text in (f"q{turn}", f"a{turn}")]


async def test_a_server_that_is_gone_raises_a_clear_error_without_the_password(tmp_path: Path) -> None:
    dead = f"postgresql://ada:hunter2@/memory?host={tmp_path}"  # no server listens on this socket folder
    memory = PostgresMemory(dead, retry_s=0.3)
    with pytest.raises(MemoryUnavailable) as caught:
        await memory.append_messages(ME, [Message.user("hello")])
    message = str(caught.value)
    assert f"postgresql://ada@{tmp_path}/memory" in message and "kept failing for 0.3s" in message
    assert "memory.dsn" in message and "hunter2" not in message
    agent = Agent(ScriptedModel(["hi"]), memory=memory)
    with pytest.raises(MemoryUnavailable):
        await agent.run("hello", thread=ME)  # a turn whose message cannot be kept fails; it is never dropped


def test_processes_migrating_at_once_record_each_migration_once(dsn: str) -> None:
    async def open_and_list() -> list[str]:
        memory = PostgresMemory(dsn)
        await memory.threads("me")
        migrations = await memory.store.run(
            lambda c: _names(c, "SELECT name FROM cortana_migrations ORDER BY name")  # type: ignore[arg-type]
        )
        await memory.aclose()
        return migrations

    async def both() -> list[list[str]]:
        return list(await asyncio.gather(*(open_and_list() for _ in range(6))))

    results = asyncio.run(both())
    assert results == [["0001_threads_messages_working_memory", "0002_thread_client"]] * 6


async def _names(connection: Any, sql: str) -> list[str]:
    return [row[0] for row in await (await connection.execute(sql)).fetchall()]


async def test_a_small_resource_in_a_large_table_is_still_recalled(dsn: str) -> None:
    """HNSW filters by resource after its search: the exact scan finds what the graph's candidates left out."""
    memory = PostgresMemory(dsn, working_memory=None, recall=Recall(HashEmbedder(), top_k=1, neighbours=0))
    big = ThreadRef(resource_id="big", thread_id="t")
    for batch in range(15):
        await memory.append_messages(big, [Message.user(f"big message {batch}-{i}") for i in range(100)])
    small = ThreadRef(resource_id="small", thread_id="old")
    await memory.append_messages(small, [Message.user("the needle")])
    context = await memory.retrieve_context(ThreadRef(resource_id="small", thread_id="new"), "a probe")
    assert context is not None and "user: the needle" in context and "big message" not in context
    migrations = await memory.store.run(
        lambda c: _names(c, "SELECT name FROM cortana_migrations ORDER BY name")  # type: ignore[arg-type]
    )
    assert migrations == ["0001_threads_messages_working_memory", "0002_thread_client", "recall_0001_vectors_8"]
    await memory.aclose()


async def test_a_user_who_cannot_create_pgvector_is_told_how_and_keeps_the_messages(postgres_server: Any) -> None:
    role = f"app_{uuid.uuid4().hex[:8]}"
    postgres_server.psql(f"CREATE ROLE {role} LOGIN;")
    dsn = make_conninfo(database(postgres_server, owner=role), user=role)
    memory = PostgresMemory(dsn, recall=Recall(HashEmbedder()))
    with pytest.raises(ConfigError) as caught:
        await memory.append_messages(ME, [Message.user("keep me")])
    message = str(caught.value)
    assert "key 'memory.recall'" in message and "pgvector" in message and "CREATE EXTENSION vector" in message
    assert [s.message.content for s in await memory.messages(ME)] == ["keep me"], "the message was stored first"
    await memory.aclose()


async def test_it_shares_a_database_with_other_tables(memory: PostgresMemory, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as other_app:
        other_app.execute("CREATE TABLE messages (id int, body text)")  # an application's own table
        other_app.execute("INSERT INTO messages VALUES (1, 'theirs')")
    await memory.append_messages(ME, [Message.user("ours")])
    assert [s.message.content for s in await memory.messages(ME)] == ["ours"]
    with psycopg.connect(dsn, autocommit=True) as other_app:
        assert other_app.execute("SELECT body FROM messages").fetchall() == [("theirs",)]


def test_cortana_yml_selects_it_and_names_the_missing_key(tmp_path: Path, dsn: str) -> None:
    from cortana.assistant import workspace_memory
    from cortana.config import Settings

    chosen = workspace_memory(tmp_path, Settings.model_validate({"memory": {"backend": "postgres", "dsn": dsn}}))
    assert isinstance(chosen, PostgresMemory) and chosen.location.startswith("postgresql://postgres@")
    assert not (tmp_path / ".cortana").exists(), "no SQLite file is made beside it"
    with pytest.raises(ConfigError, match=r"key 'memory.dsn'.*CORTANA_MEMORY_DSN"):
        workspace_memory(tmp_path, Settings.model_validate({"memory": {"backend": "postgres"}}))
    with pytest.raises(Exception, match=r"memory.backend"):
        Settings.model_validate({"memory": {"backend": "mysql"}})


async def test_a_user_who_cannot_create_tables_is_told_what_to_grant(postgres_server: Any) -> None:
    role = f"reader_{uuid.uuid4().hex[:8]}"
    postgres_server.psql(f"CREATE ROLE {role} LOGIN;")
    dsn = make_conninfo(database(postgres_server), user=role)  # owned by postgres: no CREATE on public for others
    memory = PostgresMemory(dsn)
    with pytest.raises(ConfigError) as caught:
        await memory.append_messages(ME, [Message.user("hello")])
    assert "key 'memory.dsn'" in str(caught.value) and "GRANT CREATE ON SCHEMA public" in str(caught.value)
    await memory.aclose()


async def test_doctor_says_whether_the_server_answers_and_never_shows_the_password(dsn: str, tmp_path: Path) -> None:
    from cortana.cli.doctor import memory_doctor_line

    with_password = make_conninfo(dsn, password="hunter2")
    alive = PostgresMemory(with_password)
    await alive.append_messages(ThreadRef(resource_id="cli", thread_id="t"), [Message.user("hi")])
    line = await memory_doctor_line(alive)
    assert line.endswith(": reachable, 1 assistant threads") and "hunter2" not in line
    await alive.aclose()
    gone = PostgresMemory(f"postgresql://ada:hunter2@/memory?host={tmp_path}", retry_s=30)
    line = await memory_doctor_line(gone, timeout=0.5)
    assert line == f"postgresql://ada@{tmp_path}/memory: no answer within 0.5s (is the server running and reachable?)"
