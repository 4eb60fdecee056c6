"""Turn extensions: the one seam for what joins a turn besides the memory provider.

The knowledge graph (a lookup for the prompt, graph tools, a rebuild after a
turn that changed files), experience (recipes before, distilling after) and
the companion (local time, time away) all join a turn in the same three
places, so they meet one protocol::

    context(thread, prompt) -> str | None   a block for the <context> of this turn's user message
    tools(thread) -> tools and groups       offered to the model for this turn
    turn_settings(thread, settings)         this turn's generation settings, after every context block
                                            (experience lowers thinking for trusted recipes)
    after_turn(result)                      background work once the reply is out

Context blocks go, in the order the extensions were given, into the
``<context>`` block of the user message (after the memory provider's, before
the caller's ``context=``), never into the system prompt: the prompt prefix
the engine has cached stays byte-identical. The blocks are gathered
concurrently. An extension that raises, or takes longer than
``CONTEXT_TIMEOUT_S`` for its context, is logged and skipped; the turn goes
on. ``after_turn`` runs as a background task after the reply, so it never
delays one; :meth:`BackgroundWork.wait` (``await agent.aclose()``) waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol

from cortana.messages import RunResult, ThreadRef
from cortana.models.base import ModelSettings
from cortana.tools import Tool, ToolGroup, bound_output

__all__ = [
    "CONTEXT_TIMEOUT_S",
    "MAX_CONTEXT_CHARS",
    "BackgroundWork",
    "TurnExtension",
    "extension_tools",
    "gather_context",
    "turn_settings",
]

log = logging.getLogger("cortana.extensions")

CONTEXT_TIMEOUT_S = 30.0
"""The longest one extension may take to produce its context block before the turn goes on without it."""
MAX_CONTEXT_CHARS = 8_000
"""The most of one extension's block that joins the prompt (its head and tail are kept): a block built
from a repository's contents must not fill a small model's window."""


class TurnExtension(Protocol):
    """Something that joins every turn of an agent: context for the prompt, tools, work after the reply.

    Subclass it and override what you need; every method has a do-nothing default.

    Attributes:
        name: shown in logs when the extension fails.
    """

    name: str = "extension"

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """A block of text for this turn's ``<context>``, or ``None`` for nothing."""
        return None

    def tools(self, thread: ThreadRef) -> Sequence[Tool | ToolGroup]:
        """Tools (and tool groups) the model may use in this thread."""
        return ()

    def turn_settings(self, thread: ThreadRef, settings: ModelSettings) -> ModelSettings:
        """This turn's generation settings, called once every extension's context is in; unchanged by default."""
        return settings

    async def after_turn(self, result: RunResult) -> None:
        """Work after a completed turn (in the background: the reply is already out)."""
        return None


async def gather_context(extensions: Sequence[TurnExtension], thread: ThreadRef, prompt: str) -> list[str]:
    """Every extension's context block, gathered concurrently, in the extensions' order; failures skipped."""
    if not extensions:
        return []
    blocks = await asyncio.gather(*(_context_of(extension, thread, prompt) for extension in extensions))
    return [block for block in blocks if block]


async def _context_of(extension: TurnExtension, thread: ThreadRef, prompt: str) -> str | None:
    try:
        async with asyncio.timeout(CONTEXT_TIMEOUT_S):
            block = await extension.context(thread, prompt)
        return bound_output(block, MAX_CONTEXT_CHARS) if block else None
    except TimeoutError:
        log.warning(
            "extension %r gave no context within %.0fs; the turn goes on without it", extension.name, CONTEXT_TIMEOUT_S
        )
    except Exception:
        log.exception("extension %r failed to give its context; the turn goes on without it", extension.name)
    return None


def turn_settings(extensions: Sequence[TurnExtension], thread: ThreadRef, settings: ModelSettings) -> ModelSettings:
    """``settings`` as each extension adjusts them, in the extensions' order; an extension that raises is skipped."""
    for extension in extensions:
        try:
            settings = extension.turn_settings(thread, settings)
        except Exception:
            log.exception("extension %r failed to adjust the settings; the turn goes on without it", extension.name)
    return settings


def extension_tools(extensions: Sequence[TurnExtension], thread: ThreadRef) -> list[Tool | ToolGroup]:
    """Every extension's tools for ``thread``, in the extensions' order; an extension that raises is skipped."""
    offered: list[Tool | ToolGroup] = []
    for extension in extensions:
        try:
            offered.extend(extension.tools(thread))
        except Exception:
            log.exception("extension %r failed to give its tools; the turn goes on without them", extension.name)
    return offered


class BackgroundWork:
    """Tasks that run after a reply (extensions' ``after_turn``), kept until they end; failures are logged."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``work`` in the background."""
        task = asyncio.get_running_loop().create_task(self._logged(work, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def pending(self) -> int:
        """How many tasks are still running."""
        return len(self._tasks)

    async def wait(self, timeout: float | None = None) -> None:
        """Wait until every task has ended (at most ``timeout`` seconds; the rest are cancelled then)."""
        tasks = [task for task in self._tasks if task.get_loop() is asyncio.get_running_loop()]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=timeout)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    @staticmethod
    async def _logged(work: Coroutine[Any, Any, None], name: str) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s failed", name)
