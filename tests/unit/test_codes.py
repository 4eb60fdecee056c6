"""Recall's binary codes (SQLite): the shortlist, the exact re-rank, files from before codes, other writers."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import pytest

from cortana import Message, ThreadRef
from cortana.memory.codes import CodeIndex, binary_code
from cortana.memory.recall import E5Embedder, Recall, vector_migrations
from cortana.memory.sqlite import SQLiteMemory
from cortana.memory.store import SQLiteStore

ME = ThreadRef(resource_id="me", thread_id="a")


class SeededEmbedder:
    """384-dim unit vectors seeded by the text: the same text, the same vector."""

    name = "seeded-384"

    @staticmethod
    def vector(text: str) -> list[float]:
        rng = random.Random(text)
        values = [rng.gauss(0, 1) for _ in range(384)]
        norm = sum(v * v for v in values) ** 0.5
        return [v / norm for v in values]

    async def embed_query(self, text: str) -> list[float]:
        return self.vector(text)

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(text) for text in texts]


def test_codes_are_bits_above_the_centre_in_sqlite_vecs_order() -> None:
    zero = np.zeros(9, dtype=np.float32)
    assert binary_code([0.5, -1, 0, 2, -3, 4, 5, -6, 7], zero) == bytes([0b01101001, 0b00000001])
    centre = np.full(9, 1.0, dtype=np.float32)
    assert binary_code([0.5, -1, 0, 2, -3, 4, 5, -6, 7], centre) == bytes([0b01101000, 0b00000001])


def test_the_nearest_codes_respect_thread_and_exclusions() -> None:
    import sqlite3

    connection = sqlite3.connect(":memory:")
    connection.execute(
        "CREATE TABLE codes (seq INTEGER PRIMARY KEY, message_id INTEGER, resource_id TEXT, thread_id TEXT, bits BLOB)"
    )
    rows = [(1, 10, "me", "a", bytes([0b0000])), (2, 11, "me", "b", bytes([0b0001])), (3, 12, "you", "a", b"\x00")]
    connection.executemany("INSERT INTO codes VALUES (?, ?, ?, ?, ?)", rows)
    index = CodeIndex()
    query, centre = [-1.0] * 8, np.zeros(8, dtype=np.float32)  # all bits clear: nearest is message 10, then 11
    assert index.nearest(connection, "codes", "me", query, centre, 5) == [10, 11]
    assert index.nearest(connection, "codes", "me", query, centre, 1) == [10]
    assert index.nearest(connection, "codes", "me", query, centre, 5, thread_id="b") == [11]
    assert index.nearest(connection, "codes", "me", query, centre, 5, exclude={10}) == [11]
    assert index.nearest(connection, "codes", "me", query, centre, 5, thread_id="zzz") == []
    connection.execute("INSERT INTO codes VALUES (4, 13, 'me', 'a', ?)", (bytes([0b11111111]),))
    assert index.nearest(connection, "codes", "me", query, centre, 5) == [10, 11, 13], "rows added later are read"


async def recalled_texts(memory: SQLiteMemory, probe: str) -> list[str]:
    context = await memory.retrieve_context(ThreadRef(resource_id="me", thread_id="new"), probe)
    assert context is not None
    return [line.split("user: ", 1)[1] for line in context.splitlines() if "user: " in line]


@pytest.mark.parametrize(("stored", "shortlist"), [(200, 20), (300, 1000)])
async def test_before_the_centre_or_with_everything_shortlisted_recall_is_exact(
    tmp_path: Path, stored: int, shortlist: int
) -> None:
    embedder = SeededEmbedder()
    recall = Recall(embedder, top_k=3, neighbours=0, shortlist=shortlist)
    memory = SQLiteMemory(tmp_path / "m.db", working_memory=None, recall=recall)
    texts = [f"message number {i}" for i in range(stored)]
    for start in range(0, stored, 50):
        await memory.append_messages(ME, [Message.user(text) for text in texts[start : start + 50]])
    vectors = np.array([embedder.vector(text) for text in texts])
    memory.last_messages = 2  # almost nothing is in the history, so almost everything may be recalled
    for probe in ("alpha", "beta", "gamma"):
        exact = [texts[i] for i in np.argsort(-(vectors @ np.array(embedder.vector(probe))))[:3]]
        assert await recalled_texts(memory, probe) == exact
    memory.close()


async def test_the_centre_is_made_once_and_every_writer_codes_around_it(tmp_path: Path) -> None:
    first = SQLiteMemory(tmp_path / "m.db", working_memory=None, recall=Recall(SeededEmbedder()))
    second = SQLiteMemory(tmp_path / "m.db", working_memory=None, recall=Recall(SeededEmbedder()))
    await first.append_messages(ME, [Message.user(f"early {i}") for i in range(10)])
    for start in range(0, 300, 50):
        await second.append_messages(ME, [Message.user(f"later {i}") for i in range(start, start + 50)])
    await first.append_messages(ME, [Message.user("after the centre")])  # `first` has not seen the centre yet
    connection = first.store.connection()
    assert connection.execute("SELECT sample FROM recall_centre_384").fetchall() == [(256,)]
    assert connection.execute("SELECT COUNT(*) FROM recall_codes_384 WHERE bits IS NULL").fetchone() == (0,)
    assert connection.execute("SELECT COUNT(*) FROM recall_codes_384").fetchone() == (311,)
    first.close()
    second.close()


async def test_a_shortlist_smaller_than_the_resource_still_finds_a_near_duplicate(tmp_path: Path) -> None:
    embedder = SeededEmbedder()
    recall = Recall(embedder, top_k=1, neighbours=0, shortlist=20)
    memory = SQLiteMemory(tmp_path / "m.db", working_memory=None, recall=recall)
    await memory.append_messages(ME, [Message.user(f"filler {i}") for i in range(500)])
    await memory.append_messages(ME, [Message.user("the needle")])
    memory.last_messages = 2
    context = await memory.retrieve_context(ThreadRef(resource_id="me", thread_id="new"), "the needle")
    assert context is not None and "user: the needle" in context.splitlines()[-1]
    memory.close()


async def test_another_writers_messages_are_recalled_without_reopening(tmp_path: Path) -> None:
    reader = SQLiteMemory(tmp_path / "m.db", working_memory=None, recall=Recall(SeededEmbedder(), top_k=1))
    await reader.append_messages(ME, [Message.user("first")])
    assert await reader.retrieve_context(ThreadRef(resource_id="me", thread_id="b"), "x") is not None  # codes loaded
    writer = SQLiteMemory(tmp_path / "m.db", working_memory=None, recall=Recall(SeededEmbedder(), top_k=1))
    await writer.append_messages(ThreadRef(resource_id="me", thread_id="other"), [Message.user("from the heartbeat")])
    context = await reader.retrieve_context(ThreadRef(resource_id="me", thread_id="b"), "from the heartbeat")
    assert context is not None and "from the heartbeat" in context
    writer.close()
    reader.close()


def write_old_file(path: Path, texts: list[str], vectors: list[list[float]]) -> None:
    """A memory file as written before codes: messages, and their vectors in the vec0 table only."""
    old = SQLiteStore(path, load_extensions=True, on_open=[Recall(SeededEmbedder()).attach])
    connection = old.connection()
    old.migrate(connection, vector_migrations(384)[:1])
    for text, vector in zip(texts, vectors, strict=True):
        message_id = connection.execute(
            "INSERT INTO messages (resource_id, thread_id, role, body, created_at) VALUES ('me', 'a', 'user', ?, 0)",
            (Message.user(text).model_dump_json(),),
        ).lastrowid
        connection.execute(
            "INSERT INTO recall_vectors_384 (message_id, embedding, resource_id, thread_id) VALUES (?, ?, 'me', 'a')",
            (message_id, struct.pack("384f", *vector)),
        )
    old.close()


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


async def test_a_file_from_before_codes_gets_them_and_recalls_as_before(tmp_path: Path, e5: E5Embedder) -> None:
    path = tmp_path / "old.db"
    said = ["By the way, my dog is called Biscuit.", "What is the capital of Peru?"]
    write_old_file(path, said, await e5.embed_passages(said))
    memory = SQLiteMemory(path, working_memory=None, recall=Recall(e5, top_k=1, neighbours=0))
    context = await memory.retrieve_context(ThreadRef(resource_id="me", thread_id="b"), "What is my dog's name?")
    assert context is not None and "Biscuit" in context
    copied = memory.store.connection().execute("SELECT COUNT(*) FROM recall_codes_384").fetchone()[0]
    assert copied == 2, "the old vectors were copied, with their codes, by migration recall_0002_codes_384"
    memory.close()


async def test_a_full_file_from_before_codes_gets_its_centre_on_first_recall(tmp_path: Path) -> None:
    path, embedder = tmp_path / "old.db", SeededEmbedder()
    texts = [f"old message {i}" for i in range(300)]
    write_old_file(path, texts, [embedder.vector(text) for text in texts])
    memory = SQLiteMemory(path, working_memory=None, recall=Recall(embedder, top_k=1, neighbours=0))
    memory.last_messages = 2
    assert await recalled_texts(memory, "old message 7") == ["old message 7"]
    connection = memory.store.connection()
    assert connection.execute("SELECT COUNT(*) FROM recall_codes_384 WHERE bits IS NOT NULL").fetchone() == (300,)
    memory.close()


async def test_the_prompt_is_embedded_while_the_history_loads(tmp_path: Path) -> None:
    import asyncio

    events: list[str] = []

    class SlowEmbedder(SeededEmbedder):
        async def embed_query(self, text: str) -> list[float]:
            events.append("embedding started")
            await asyncio.sleep(0.05)
            events.append("embedding done")
            return self.vector(text)

    class Watched(SQLiteMemory):
        async def history(self, thread: ThreadRef):  # type: ignore[no-untyped-def]
            events.append("history started")
            loaded = await super().history(thread)
            await asyncio.sleep(0.05)
            events.append("history done")
            return loaded

    memory = Watched(tmp_path / "m.db", working_memory=None, recall=Recall(SlowEmbedder()))
    await memory.append_messages(ME, [Message.user("hello there")])
    await memory.retrieve_context(ThreadRef(resource_id="me", thread_id="b"), "hello")
    assert events.index("embedding started") < events.index("history done")
    assert events.index("history started") < events.index("embedding done"), "the two overlap"
    memory.close()


async def test_one_recall_shared_by_two_files_keeps_each_files_tables(tmp_path: Path) -> None:
    shared = Recall(SeededEmbedder(), top_k=1, neighbours=0)
    first = SQLiteMemory(tmp_path / "a.db", working_memory=None, recall=shared)
    second = SQLiteMemory(tmp_path / "b.db", working_memory=None, recall=shared)
    await first.append_messages(ME, [Message.user("only in a")])
    await second.append_messages(ME, [Message.user("only in b")])
    for memory, text in ((first, "only in a"), (second, "only in b")):
        memory.last_messages = 2
        context = await memory.retrieve_context(ThreadRef(resource_id="me", thread_id="new"), text)
        assert context is not None and f"user: {text}" in context
        memory.close()
