"""What belongs to one turn alone: its thread, its checkpoint, plan mode, the tools it may call. Kept in a context
variable, so that two turns running at once (``cortana serve`` with ``parallel`` 2, two editor sessions in one
folder, a fix inside a turn) never read each other's.

A turn's code and everything it starts (tool calls in their own tasks, hooks, the fix's writes) run in the turn's
context, and read :func:`turn_state`; the shared objects (checkpoints, hooks, the tool rules) keep no turn's
state of their own. The state is a mutable object, so a tool call's task, which copies the context, still sees the
checkpoint the turn began.

Not to be confused with :class:`cortana.TurnScope` (``cortana.current_turn()``): that is what a turn extension is
told, while one of its methods runs, about the turn it serves (its engine, a handle on the agent); this is the
turn's own state, for the whole turn, read by the parts that act for it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass

from cortana.messages import ThreadRef

__all__ = ["TurnState", "in_turn", "thread_turn", "turn_state"]


@dataclass(eq=False)
class TurnState:
    """One turn's own state.

    Attributes:
        thread: the conversation it continues.
        prompt: what the user asked.
        plan: plan mode: only reading tools run (a write, an edit or a command is refused with the reason).
        checkpoint: the checkpoint its writes are filed under (``Checkpoints.begin``), once begun.
        tools: the tool-name globs it may call (a user command's ``allowed-tools``); None: every tool.
    """

    thread: ThreadRef
    prompt: str = ""
    plan: bool = False
    checkpoint: int | None = None
    tools: tuple[str, ...] | None = None

    def allows(self, tool: str) -> bool:
        """Whether the turn may call ``tool``: any tool, unless :attr:`tools` narrows them (globs, case-sensitive)."""
        return self.tools is None or any(fnmatch.fnmatchcase(tool, glob) for glob in self.tools)


_CURRENT: ContextVar[TurnState | None] = ContextVar("cortana_turn", default=None)


def turn_state() -> TurnState | None:
    """The turn the calling code runs in (None outside any turn: a library call of a tool, a test)."""
    return _CURRENT.get()


@contextmanager
def in_turn(state: TurnState) -> Iterator[TurnState]:
    """Run the block as ``state``'s turn (and what it starts: tasks copy the context they are made in)."""
    token = _CURRENT.set(state)
    try:
        yield state
    finally:
        with suppress(ValueError):  # left from another context (a generator closed by the collector): nothing to undo
            _CURRENT.reset(token)


@contextmanager
def thread_turn(thread: ThreadRef, prompt: str = "") -> Iterator[TurnState]:
    """Run the block in the caller's turn when it is one on ``thread`` (the assistant's turn, with its plan mode and
    checkpoint, around its agent's run), else in a turn of its own (a library call of ``Agent.run``, a subagent's
    run on its own thread)."""
    outer = _CURRENT.get()
    if outer is not None and outer.thread == thread:
        yield outer
        return
    with in_turn(TurnState(thread, prompt)) as state:
        yield state
