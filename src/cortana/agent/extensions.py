"""Turn extensions: the one seam for what joins a turn.

Memory's per-turn part (long-term context, its tools: :class:`MemoryTurn`,
always first; its history opens the turn), the knowledge graph (a lookup for
the prompt, graph tools, a rebuild after a turn that changed files),
experience (recipes before, distilling after) and the companion (local time,
time away) all join a turn in the same places, so they meet one protocol::

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
on. An extension looks things up by the prompt's head and tail
(``MAX_LOOKUP_CHARS``): a pasted megabyte costs a lookup what eight thousand
characters cost (before, embedding and searching a 100 KB prompt ran past
the timeout and the turn waited for it). ``after_turn`` runs as a background task after the reply, so it never
delays one; :meth:`BackgroundWork.wait` (``await agent.aclose()``) waits for it.

An extension needs no agent of its own: while the run calls it,
:func:`current_turn` says which turn it serves (thread, engine, a handle on
the agent, whether a turn of the agent is running), so work after the reply
(experience distilling a recipe) uses the turn's engine and gives it back to
the user's next turn.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cortana.memory.base import MemoryProvider
from cortana.messages import RunResult, ThreadRef
from cortana.models.base import ModelClient, ModelSettings
from cortana.tools import Tool, ToolGroup, bound_output
from cortana.tools.context import AgentHandle

__all__ = [
    "CONTEXT_TIMEOUT_S",
    "MAX_CONTEXT_CHARS",
    "MAX_LOOKUP_CHARS",
    "BackgroundWork",
    "MemoryTurn",
    "TurnExtension",
    "TurnScope",
    "current_turn",
    "extension_tools",
    "gather_context",
    "gather_context_of",
    "looks_up_workspace",
    "turn_settings",
]

log = logging.getLogger("cortana.extensions")

CONTEXT_TIMEOUT_S = 30.0
"""The longest one extension may take to produce its context block before the turn goes on without it."""
MAX_CONTEXT_CHARS = 8_000
"""The most of one extension's block that joins the prompt (its head and tail are kept): a block built
from a repository's contents must not fill a small model's window."""
MAX_LOOKUP_CHARS = 8_000
"""The most of a prompt an extension looks things up by (its head and tail are kept)."""


@dataclass(frozen=True, slots=True)
class TurnScope:
    """The turn an extension's method is called for (:func:`current_turn`).

    Attributes:
        thread: the conversation.
        engine: the engine the turn runs on (work after the reply uses it too).
        agent: a narrow handle on the agent running the turn (its name, its tools' names).
        busy: whether a turn of that agent is running now; work after a reply waits while it is,
            since one engine serves one request at a time and the user comes first.
    """

    thread: ThreadRef
    engine: ModelClient
    agent: AgentHandle | None = None
    busy: Callable[[], bool] = lambda: False


_SCOPE: contextvars.ContextVar[TurnScope | None] = contextvars.ContextVar("cortana_turn_scope", default=None)


def current_turn() -> TurnScope:
    """The turn the calling extension method serves (in ``context``, ``turn_settings``, ``after_turn``).

    Raises:
        RuntimeError: called outside an extension method run by an agent.
    """
    scope = _SCOPE.get()
    if scope is None:
        raise RuntimeError(
            "current_turn() answers only inside a TurnExtension's context, turn_settings or after_turn while an "
            "agent runs them; pass the engine explicitly when you call the extension yourself."
        )
    return scope


def in_scope(scope: TurnScope | None) -> contextvars.Context:
    """A copy of the current context in which :func:`current_turn` returns ``scope``."""
    context = contextvars.copy_context()
    context.run(_SCOPE.set, scope)
    return context


class TurnExtension(Protocol):
    """Something that joins every turn of an agent: context for the prompt, tools, work after the reply.

    Subclass it and override what you need; every method has a do-nothing default.

    Attributes:
        name: shown in logs when the extension fails.

    Two optional attributes lift the limits on its context block: ``context_timeout``, the most
    seconds it may take before the turn goes on without it (default :data:`CONTEXT_TIMEOUT_S`,
    ``None``: no limit), and ``max_context_chars``, the most of it that joins the prompt (default
    :data:`MAX_CONTEXT_CHARS`, ``None``: all of it). A third, ``looks_up_workspace`` (default False),
    says its block is what the workspace holds for the message's words (lines found, the code graph's
    entries): it is left out of a turn the tool judge finds no tool for ("What is a mutex?"), where it
    would only pull a general answer towards the files.
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


class MemoryTurn(TurnExtension):
    """A memory provider's part in a turn: its long-term context and its tools (its history opens the turn).

    First among a turn's extensions, so its block leads the ``<context>``; no time or size limit of the
    extensions applies (a provider bounds what it retrieves itself).
    """

    name = "memory"
    context_timeout = None
    max_context_chars = None

    def __init__(self, memory: MemoryProvider) -> None:
        self.memory = memory

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """The provider's long-term context for ``prompt``."""
        return await self.memory.retrieve_context(thread, prompt)

    def tools(self, thread: ThreadRef) -> Sequence[Tool | ToolGroup]:
        """The provider's tools."""
        return self.memory.tools(thread)


async def gather_context(
    extensions: Sequence[TurnExtension], thread: ThreadRef, prompt: str, scope: TurnScope | None = None
) -> list[str]:
    """Every extension's context block, gathered concurrently, in the extensions' order; failures skipped."""
    return [block for _, block in await gather_context_of(extensions, thread, prompt, scope)]


async def gather_context_of(
    extensions: Sequence[TurnExtension], thread: ThreadRef, prompt: str, scope: TurnScope | None = None
) -> list[tuple[TurnExtension, str]]:
    """As :func:`gather_context`, each block with the extension that gave it."""
    if not extensions:
        return []
    context = in_scope(scope)
    if len(prompt) > MAX_LOOKUP_CHARS:
        half = MAX_LOOKUP_CHARS // 2
        prompt = f"{prompt[:half]}\n…\n{prompt[-half:]}"
    tasks = [asyncio.create_task(_context_of(e, thread, prompt), context=context) for e in extensions]
    blocks = await asyncio.gather(*tasks)
    return [(extension, block) for extension, block in zip(extensions, blocks, strict=True) if block]


def looks_up_workspace(extension: TurnExtension) -> bool:
    """Whether ``extension``'s block is a lookup of the message's words in the workspace (``looks_up_workspace``)."""
    return bool(getattr(extension, "looks_up_workspace", False))


async def _context_of(extension: TurnExtension, thread: ThreadRef, prompt: str) -> str | None:
    limit = getattr(extension, "context_timeout", CONTEXT_TIMEOUT_S)
    size = getattr(extension, "max_context_chars", MAX_CONTEXT_CHARS)
    try:
        async with asyncio.timeout(limit):
            block = await extension.context(thread, prompt)
        return bound_output(block, size) if block and size else block or None
    except TimeoutError:
        log.warning("extension %r gave no context within %.0fs; the turn goes on without it", extension.name, limit)
    except Exception:
        log.exception("extension %r failed to give its context; the turn goes on without it", extension.name)
    return None


def turn_settings(
    extensions: Sequence[TurnExtension], thread: ThreadRef, settings: ModelSettings, scope: TurnScope | None = None
) -> ModelSettings:
    """``settings`` as each extension adjusts them, in the extensions' order; an extension that raises is skipped."""
    if not extensions:
        return settings
    context = in_scope(scope)
    for extension in extensions:
        try:
            settings = context.run(extension.turn_settings, thread, settings)
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

    def start(self, work: Coroutine[Any, Any, None], name: str, scope: TurnScope | None = None) -> None:
        """Run ``work`` in the background (where :func:`current_turn` returns ``scope``)."""
        task = asyncio.get_running_loop().create_task(self._logged(work, name), name=name, context=in_scope(scope))
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
