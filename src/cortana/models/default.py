"""The engine an ``Agent`` uses when it is given none.

``Agent(name="dev", tools=[...])`` with no ``model`` runs on the configured
engine: :func:`create_model_client` (cortana.yml and the environment, else the
first engine running, else the embedded one) is called on the first run, and
every agent of the process without a model of its own shares that client.

It lives as long as its event loop: it is closed when the loop ends
(``asyncio.run`` returning), or earlier by :func:`close_default_model_client`
(``await agent.aclose()`` of an agent that uses it). The next run after a
close starts a new one. A client belongs to the loop it was made in, so each
``asyncio.run`` (and each ``Agent.run_sync``) gets its own: a script that
calls ``run_sync`` in a loop pays the engine's start every time, and should
run its turns inside one ``asyncio.run`` instead.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field

from cortana.models.base import ModelClient

__all__ = ["close_default_model_client", "default_model_client"]


@dataclass
class _Shared:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    client: ModelClient | None = None
    keeper: asyncio.Task[None] | None = None


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Shared] = weakref.WeakKeyDictionary()


async def default_model_client() -> ModelClient:
    """The shared client of this event loop, created (and connected) on first use."""
    loop = asyncio.get_running_loop()
    shared = _by_loop.setdefault(loop, _Shared())
    async with shared.lock:
        if shared.client is None:
            # Imported here: the factory brings httpx (~150 ms to import on a small machine),
            # which an agent given its own model never needs.
            from cortana.models.factory import create_model_client

            shared.client = await create_model_client()
            shared.keeper = loop.create_task(_close_when_the_loop_ends(shared), name="cortana-default-engine")
        return shared.client


async def close_default_model_client() -> None:
    """Close this event loop's shared client, if one was made; the next run makes a new one."""
    shared = _by_loop.get(asyncio.get_running_loop())
    if shared is None:
        return
    async with shared.lock:
        client, keeper = shared.client, shared.keeper
        shared.client = shared.keeper = None
        if keeper is not None:
            keeper.cancel()
        if client is not None:
            await client.aclose()


async def _close_when_the_loop_ends(shared: _Shared) -> None:
    """Wait forever; ``asyncio.run`` cancels this task when its main coroutine returns, which closes the client."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        client, shared.client = shared.client, None
        if client is not None:
            await client.aclose()
        raise
