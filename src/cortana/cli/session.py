"""A session with the assistant: one answer (``cortana "question"``) or a simple interactive loop."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid

from rich.console import Console

from cortana.agent.agent import Agent
from cortana.agent.events import ModelCallFinished, TextDelta
from cortana.agent.logger import AgentLogger
from cortana.memory.base import InMemoryHistory
from cortana.messages import ThreadRef
from cortana.prompts import prompt_text

__all__ = ["run_session"]


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
    try:
        window = f", {client.context_window:,} tokens" if client.context_window else ""
        console.print(f"[dim]{type(client).__name__.removesuffix('Client')}: {client.model}{window}[/dim]")
        agent = Agent(
            client,
            name="cortana",
            instructions=prompt_text("assistant"),
            memory=InMemoryHistory(),
            logger=AgentLogger(console),
        )
        thread = ThreadRef(resource_id="cli", thread_id=uuid.uuid4().hex)
        if prompt is not None:
            await _answer(agent, prompt, thread)
            return 0
        return await _interactive(agent, thread, console)
    finally:
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
