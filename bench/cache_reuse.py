"""Prompt-cache reuse on the real embedded engine: the same 10-turn conversation in Cortana, pydantic-ai and agno.

Every framework keeps the conversation with its own memory feature, as its
docs show it:

- Cortana: ``SQLiteMemory`` (thread history; semantic recall too where
  ``cortana[recall]`` is installed), plus a per-turn context line (the local
  time) that changes every turn. Working memory is off by default, as the
  peers have none; ``--working-memory`` turns it on (with the bundled models
  it currently sends the run into a loop of ``update_working_memory`` calls,
  see docs/benchmarks.md);
- Cortana "plain" (``cortana-plain``): ``SQLiteMemory`` history only, no
  recall and no per-turn line, the same information the peers send;
- pydantic-ai: ``message_history=result.all_messages()`` from the previous run;
- agno: ``SqliteDb`` with ``add_history_to_context=True`` (its default window
  of the last 3 runs).

All talk to one embedded llama.cpp server (one slot, so a conversation can
only reuse its own cache) through a recording proxy that reads llama.cpp's
``timings`` from each answer: ``prompt_n`` tokens evaluated, ``cache_n``
tokens served from the cache, ``prompt_ms``. Same model, instructions,
prompts and settings (temperature 0, seed 1, at most 120 tokens) for all.
Fewer evaluated tokens means a faster turn on a CPU; from turn 2 on, an
append-only prompt needs to evaluate only the new messages.

    python bench/cache_reuse.py [--model qwen2.5-coder-0.5b] [--turns 10] [--frameworks cortana agno]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prefix_cache import PROMPTS
from report import RESULTS, save, table

INSTRUCTIONS = "You are a helpful travel assistant. Answer in at most three sentences."
FRAMEWORKS = ("cortana", "cortana-plain", "pydantic-ai", "agno")


class RecordingProxy:
    """Forwards requests to the engine and records llama.cpp's ``timings`` of every answer."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.calls: list[dict[str, Any]] = []
        self.label = ""

    def start(self) -> str:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                connection = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=600)
                connection.request(method, self.path, body=body or None, headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                data = response.read()
                connection.close()
                if self.path.endswith("/chat/completions"):
                    proxy.record(data)
                self.send_response(response.status)
                self.send_header("Content-Type", response.getheader("Content-Type") or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def record(self, data: bytes) -> None:
        timings: dict[str, Any] = {}
        text = data.decode()
        if text.lstrip().startswith("{"):
            timings = json.loads(text).get("timings") or {}
        else:
            for line in text.splitlines():
                if line.startswith("data:") and '"timings"' in line:
                    timings = json.loads(line[5:]).get("timings") or timings
        if not timings:
            raise RuntimeError("the engine's answer had no timings: is it llama.cpp?")
        self.calls.append(
            {
                "framework": self.label,
                "prompt_tokens": timings.get("cache_n", 0) + timings["prompt_n"],
                "cached_tokens": timings.get("cache_n", 0),
                "evaluated_tokens": timings["prompt_n"],
                "prompt_ms": timings.get("prompt_ms", 0.0),
                "completion_tokens": timings.get("predicted_n", 0),
            }
        )

    def stop(self) -> None:
        self.server.shutdown()


WORKING_MEMORY = False


async def cortana_plain_session(url: str, turns: int, folder: Path) -> list[str]:
    """Cortana with thread history only: no recall, no per-turn line; what the peers do."""
    return await cortana_session(url, turns, folder, plain=True)


async def cortana_session(url: str, turns: int, folder: Path, plain: bool = False) -> list[str]:
    from cortana import Agent
    from cortana.memory.sqlite import SQLiteMemory
    from cortana.messages import ThreadRef
    from cortana.models.base import ModelSettings
    from cortana.models.llamacpp import LlamaCppClient

    recall = None
    try:
        from cortana.memory.recall import E5Embedder, Recall

        recall = None if plain else Recall(E5Embedder(), top_k=2)
    except ImportError:
        pass
    client = LlamaCppClient("embedded", base_url=url)
    memory = SQLiteMemory(folder / "cortana.db", recall=recall, working_memory="resource" if WORKING_MEMORY else None)
    agent = Agent(
        client,
        instructions=INSTRUCTIONS,
        memory=memory,
        settings=ModelSettings(temperature=0, seed=1, max_tokens=120),
    )
    thread = ThreadRef(resource_id="maya", thread_id="lisbon")
    answers = []
    try:
        for turn, prompt in enumerate(PROMPTS[:turns], start=1):
            context = None if plain else f"Local time: 2026-05-0{1 + turn % 9} 1{turn % 10}:00"
            result = await agent.run(prompt, thread=thread, context=context)
            print(f"  cortana{' (plain)' if plain else ''} turn {turn}: {result.output[:80]!r}", file=sys.stderr)
            answers.append(result.output)
    finally:
        memory.close()
        await client.aclose()
    return answers


async def pydantic_ai_session(url: str, turns: int, folder: Path) -> list[str]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("embedded", provider=OpenAIProvider(base_url=f"{url}/v1", api_key="not-needed"))
    agent = Agent(model, instructions=INSTRUCTIONS, model_settings={"temperature": 0, "seed": 1, "max_tokens": 120})
    history: list[Any] = []
    answers = []
    for turn, prompt in enumerate(PROMPTS[:turns], start=1):
        result = await agent.run(prompt, message_history=history)
        history = result.all_messages()
        print(f"  pydantic-ai turn {turn}: {result.output[:80]!r}", file=sys.stderr)
        answers.append(result.output)
    return answers


async def agno_session(url: str, turns: int, folder: Path) -> list[str]:
    from agno.agent import Agent
    from agno.db.sqlite import SqliteDb
    from agno.models.openai import OpenAILike

    model = OpenAILike(id="embedded", base_url=f"{url}/v1", api_key="not-needed", temperature=0, seed=1, max_tokens=120)
    agent = Agent(
        model=model,
        instructions=INSTRUCTIONS,
        db=SqliteDb(db_file=str(folder / "agno.db")),
        add_history_to_context=True,
        telemetry=False,
    )
    answers = []
    for turn, prompt in enumerate(PROMPTS[:turns], start=1):
        result = await agent.arun(prompt, user_id="maya", session_id="lisbon")
        print(f"  agno turn {turn}: {str(result.content)[:80]!r}", file=sys.stderr)
        answers.append(str(result.content))
    return answers


SESSIONS = {
    "cortana": cortana_session,
    "cortana-plain": cortana_plain_session,
    "pydantic-ai": pydantic_ai_session,
    "agno": agno_session,
}
PACKAGES = {"cortana": "cortana", "cortana-plain": "cortana", "pydantic-ai": "pydantic_ai", "agno": "agno"}


async def measure(
    model: str, turns: int, threads: int, names: list[str]
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    from cortana.models.embedded import EmbeddedClient

    engine = await EmbeddedClient.start(model, context_window=8192, threads=threads, parallel=1)
    proxy = RecordingProxy(engine.base_url)
    url = proxy.start()
    answers = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for name in names:
                print(f"{name}:", file=sys.stderr)
                proxy.label = name
                answers[name] = await SESSIONS[name](url, turns, Path(folder))
    finally:
        proxy.stop()
        await engine.aclose()
    return proxy.calls, answers


def main() -> None:
    import importlib.util

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--working-memory", action="store_true", help="turn Cortana's working memory on")
    parser.add_argument("--json", type=Path, default=RESULTS / "cache_reuse.json")
    args = parser.parse_args()
    global WORKING_MEMORY
    WORKING_MEMORY = args.working_memory
    names = [name for name in args.frameworks if importlib.util.find_spec(PACKAGES[name])]
    missing = [name for name in args.frameworks if name not in names]
    calls, answers = asyncio.run(measure(args.model, args.turns, args.threads, names))
    summary: dict[str, dict[str, Any]] = {}
    for name in names:
        mine = [call for call in calls if call["framework"] == name]
        later = mine[1:]  # from the second model call on, a cache could serve the prefix
        prompt = sum(call["prompt_tokens"] for call in later)
        summary[name] = {
            "model_calls": len(mine),
            "evaluated_per_call": [call["evaluated_tokens"] for call in mine],
            "prompt_per_call": [call["prompt_tokens"] for call in mine],
            "evaluated_after_first": sum(call["evaluated_tokens"] for call in later),
            "prompt_after_first": prompt,
            "cache_share_after_first": sum(call["cached_tokens"] for call in later) / prompt if prompt else 0.0,
            "prompt_seconds_after_first": sum(call["prompt_ms"] for call in later) / 1000,
            "last_prompt_tokens": mine[-1]["prompt_tokens"] if mine else 0,
        }
    print(f"{args.turns}-turn conversation on the embedded engine ({args.model}); model calls after the first")
    table(
        ["framework", "model calls", "prompt tokens", "evaluated", "from cache", "prompt eval s", "last prompt"],
        [
            [
                name,
                row["model_calls"],
                row["prompt_after_first"],
                row["evaluated_after_first"],
                f"{row['cache_share_after_first']:.0%}",
                row["prompt_seconds_after_first"],
                row["last_prompt_tokens"],
            ]
            for name, row in summary.items()
        ],
    )
    for name, row in summary.items():
        print(f"{name:<12} evaluated per call: {row['evaluated_per_call']}")
    if missing:
        print(f"not installed (pip install -r bench/requirements.txt): {', '.join(missing)}")
    report = {
        "model": args.model,
        "turns": args.turns,
        "cortana_working_memory": args.working_memory,
        "missing": missing,
        "summary": summary,
        "calls": calls,
        "answers": answers,
    }
    save(args.json, report)


if __name__ == "__main__":
    main()
