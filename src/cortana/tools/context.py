"""``RunContext``: what a tool may know about the run that called it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the agent package imports this one, never the reverse at run time
    from cortana.agent.agent import Agent
    from cortana.messages import Message, RunMetrics, ThreadRef

__all__ = ["RunContext"]


@dataclasses.dataclass(slots=True)
class RunContext:
    """What a tool may know about the run that called it.

    Declare a parameter annotated ``RunContext`` to receive it; it is not part
    of the tool's schema.

    Attributes:
        agent: the agent running the tool.
        thread: the conversation the run belongs to.
        metrics: the run's live metrics.
        messages: the run's messages so far (read-only by convention).
        state: a per-run scratch dict shared by all tools of the run.
        unattended: nobody is there to approve anything (a scheduled check-in): calls the
            permission gate would ask about are refused.
    """

    agent: Agent
    thread: ThreadRef
    metrics: RunMetrics
    messages: list[Message]
    state: dict[str, Any] = dataclasses.field(default_factory=dict)
    unattended: bool = False
