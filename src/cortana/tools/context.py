"""``RunContext``: what a tool may know about the run that called it.

Not the ``Agent``: a tool sees the run (thread, metrics, messages, scratch
state, whether anyone is there to approve) and a narrow :class:`AgentHandle`
on the agent running it: its name, its tools' names, and a way to start a
subagent like it, which is all ``SubagentManager`` needs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only
    from cortana.messages import Message, RunMetrics, RunResult, ThreadRef

__all__ = ["AgentHandle", "RunContext", "SubagentRunner"]


class SubagentRunner(Protocol):
    """A subagent an :class:`AgentHandle` started: its name, and its runs."""

    @property
    def name(self) -> str:
        """The subagent's name (``parent/subN``)."""
        ...

    async def run(self, prompt: str, *, thread: ThreadRef) -> RunResult:
        """Run one turn of the subagent in ``thread``."""
        ...


class AgentHandle(Protocol):
    """What a tool may know of the agent running it: its name, its tools' names, and how to start a subagent.

    ``cortana.Agent`` gives its runs one; a subagent gets the parent's engine, permission gate,
    generation settings and ``max_tool_iterations``, and only tools the parent has.
    """

    @property
    def name(self) -> str:
        """The agent's name."""
        ...

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the agent's own tools (not those of its groups or extensions)."""
        ...

    @property
    def read_only_tool_names(self) -> tuple[str, ...]:
        """The names of the agent's own tools that only read, which a helper for side work may get."""
        ...

    def subagent(
        self,
        name: str,
        *,
        instructions: str,
        tools: Sequence[str] | None,
        extra_tools: Sequence[Callable[..., Any]] = (),
        memory: object = None,
        logger: object = None,
    ) -> SubagentRunner:
        """A new agent like this one, named ``name``, with the named tools of this agent (``None``: all).

        Args:
            name: the subagent's name.
            instructions: its system prompt.
            tools: which of this agent's tools it gets (``None``: every one the permission gate does not refuse).
            extra_tools: tools it gets besides (the subagent tools of a manager that allows deeper nesting).
            memory: a ``MemoryProvider`` for its threads (``None``: it remembers nothing between runs).
            logger: an ``EventHandler`` that sees each of its run events (what a helper is doing).

        Raises:
            ToolError: a named tool the gate refuses, or one this agent does not have.
        """
        ...


@dataclasses.dataclass(slots=True)
class RunContext:
    """What a tool may know about the run that called it.

    Declare a parameter annotated ``RunContext`` to receive it; it is not part
    of the tool's schema.

    Attributes:
        thread: the conversation the run belongs to.
        metrics: the run's live metrics.
        messages: the run's messages so far (read-only by convention).
        state: a per-run scratch dict shared by all tools of the run.
        unattended: nobody is there to approve anything (a scheduled check-in): calls the
            permission gate would ask about are refused.
        agent: a narrow handle on the agent running the tool (its name, its tools' names, and
            subagents); ``None`` when a tool is called outside an agent's run.
        progress: where :meth:`report` sends a line (set by the run for each call; ``None``: nowhere).
    """

    thread: ThreadRef
    metrics: RunMetrics
    messages: list[Message]
    state: dict[str, Any] = dataclasses.field(default_factory=dict)
    unattended: bool = False
    agent: AgentHandle | None = None
    progress: Callable[[str], None] | None = None

    def report(self, text: str) -> None:
        """Tell the user how this call is getting on: one short line, shown while it runs (``ToolCallProgress``)."""
        if self.progress is not None:
            self.progress(" ".join(text.split())[:200])
