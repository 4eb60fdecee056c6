"""``cortana serve`` under load: many clients streaming at once through the official ``openai`` package.

Two rounds of ``--streams`` clients at once: the first timed, the second under tracemalloc (not timed) for
what Python memory stays. The server is the one ``cortana serve`` runs (``ChatService`` + ``create_app``
on uvicorn, a real loopback socket, the assistant's memory in SQLite); the engine is scripted, so what is
measured is Cortana's part: the queue, threads, memory writes, the event stream. Every client sends its
own question and must get back, in order and complete, the answer written for it; after the run, the file
descriptors and Python memory (tracemalloc) are compared with a warmed-up start.

    python bench/serve_load.py [--streams 50] [--words 100] [--slots 1]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import openai

from cortana import Assistant, Settings
from cortana.models.base import ModelRequest
from cortana.serve import ChatService, RunQueue, create_app, refuse_over_api
from cortana.serve.http import serving
from cortana.testing import ScriptedModel, ScriptedResponse

KEY = "load-test-key-0123456789"
QUIET = Settings(
    memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False}, agent={"local_time": False}
)
RESULTS = Path(__file__).resolve().parent / "results" / "serve_load.json"


def expected(prompt: str, words: int) -> str:
    """The answer the engine writes for ``prompt``: numbered words, so order and completeness can be checked."""
    return f"Answer to {prompt}: " + " ".join(f"w{index}" for index in range(words))


class EchoModel(ScriptedModel):
    """Answers any request with :func:`expected` of its last user message; keeps no requests (no growth)."""

    def __init__(self, words: int) -> None:
        super().__init__([])
        self.words = words
        self.answered = 0

    async def stream(self, request: ModelRequest):  # type: ignore[no-untyped-def,override]
        prompt = request.messages[-1].content.rsplit("\n", 1)[-1]
        self.script = [ScriptedResponse(expected(prompt, self.words))]
        self.requests = []
        self.answered += 1
        async for event in super().stream(request):
            yield event


def clients(url: str) -> openai.AsyncOpenAI:
    """One ``openai`` client whose connection pool opens a connection per concurrent stream."""
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def one_client(client: openai.AsyncOpenAI, name: str) -> dict[str, Any]:
    """One client's streamed answer (its own connection): its text, when its first and last chunks came."""
    started = time.perf_counter()
    first: float | None = None
    text, chunks = "", 0
    stream = await client.chat.completions.create(
        model="cortana", messages=[{"role": "user", "content": name}], stream=True
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.perf_counter() - started
            text += chunk.choices[0].delta.content
            chunks += 1
    return {"text": text, "first": first or 0.0, "total": time.perf_counter() - started, "chunks": chunks}


async def load(workspace: Path, *, streams: int = 50, words: int = 100, slots: int = 1) -> dict[str, Any]:
    """Serve the assistant of ``workspace``, warm it up with one client, then run ``streams`` clients at once."""
    model = EchoModel(words)
    assistant = Assistant(workspace, QUIET, client=model, approve=refuse_over_api, heartbeat=False)
    service = ChatService(assistant, queue=RunQueue(slots, max_waiting=max(streams, 64)))
    try:
        async with serving(create_app(service, key=KEY)) as url:
            names = [f"client-{index:03d}" for index in range(streams)]
            async with clients(url) as client:
                await one_client(client, "warm-up")
            gc.collect()
            fds_before = open_descriptors()
            async with clients(url) as client:
                started = time.perf_counter()
                results = await asyncio.gather(*(one_client(client, name) for name in names))
                wall = time.perf_counter() - started
            # The same load again under tracemalloc (which slows everything, so it is not timed): what stays.
            gc.collect()
            tracemalloc.start()
            memory_before = tracemalloc.get_traced_memory()[0]
            async with clients(url) as client:
                again = await asyncio.gather(*(one_client(client, f"again-{name}") for name in names))
            await asyncio.sleep(0.2)  # the server's side of the closed connections
            gc.collect()
            memory_after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            fds_after = open_descriptors()
    finally:
        service.close()
        await assistant.aclose()
    wrong = [name for name, result in zip(names, results, strict=True) if result["text"] != expected(name, words)]
    wrong += [
        f"again-{name}"
        for name, result in zip(names, again, strict=True)
        if result["text"] != expected(f"again-{name}", words)
    ]
    with sqlite3.connect(workspace / ".cortana" / "memory.db") as db:
        stored, threads = db.execute("SELECT count(*), count(DISTINCT thread_id) FROM messages").fetchone()
    firsts = sorted(result["first"] for result in results)
    totals = sorted(result["total"] for result in results)
    return {
        "streams": streams,
        "words": words,
        "slots": slots,
        "wall_s": round(wall, 3),
        "complete_and_in_order": 2 * streams - len(wrong),
        "wrong": wrong,
        "turns_answered": model.answered - 1,  # both rounds, the warm-up aside
        "stored_messages": stored - 2,  # a question and its answer per turn, the warm-up's aside
        "stored_threads": threads - 1,
        "first_chunk_p50_s": round(statistics.median(firsts), 3),
        "first_chunk_max_s": round(firsts[-1], 3),
        "answer_p50_s": round(statistics.median(totals), 3),
        "answer_max_s": round(totals[-1], 3),
        "chunks_per_answer": results[0]["chunks"],
        "turns_per_s": round(streams / wall, 1),
        "descriptors_before": fds_before,
        "descriptors_after": fds_after,
        "python_memory_growth_kib": round((memory_after - memory_before) / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--words", type=int, default=100)
    parser.add_argument("--slots", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        figures = asyncio.run(load(Path(folder), streams=args.streams, words=args.words, slots=args.slots))
    figures["python"] = sys.version.split()[0]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    for name, value in figures.items():
        print(f"{name:28} {value}")
    return 0 if not figures["wrong"] else 1


if __name__ == "__main__":
    sys.exit(main())
