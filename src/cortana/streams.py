"""Async iterators closed where they are left, not whenever the collector or the loop's shutdown gets to them.

A turn's events come through a chain of async generators (the agent's run, the loop, the model call, the engine's
adapter, the HTTP stream). When the reader stops early (``cortana -p ... | head -1``, a cancelled request), each
generator must be closed by the one that iterates it, in order; otherwise ``asyncio.run`` closes the ones left at
its shutdown, all at once, and an outer one's ``finally`` and the shutdown close the same inner one together:
``RuntimeError: aclose(): asynchronous generator is already running`` on the user's terminal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

__all__ = ["closing"]

T = TypeVar("T")


@asynccontextmanager
async def closing(stream: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """``async with closing(gen()) as events: async for event in events: ...``: ``stream``, closed on the way out
    (when it has ``aclose``: an async generator does; a plain iterator has nothing to close)."""
    try:
        yield stream
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
