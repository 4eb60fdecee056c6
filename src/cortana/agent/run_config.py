"""``RunConfig``: how an agent's runs go, frozen, and ``RunDeps``: what a run works with.

An ``Agent`` is a name for a pair of these. ``RunConfig`` holds the policies
(instructions, limits, the permission gate, generation settings, the loop's
small-model guards); ``RunDeps`` holds the parts (the engine client, memory,
tools, turn extensions, the background work after replies). A run takes one
snapshot of each when it starts and reads nothing else of the agent, so
changing an agent (``agent.settings = ...``) never changes a turn in flight.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Self

from cortana.errors import UserError
from cortana.prompts import prompt_text

if TYPE_CHECKING:
    from cortana.agent.events import EventHandler
    from cortana.agent.extensions import BackgroundWork, TurnExtension
    from cortana.agent.tracing import Instrumentation, RunTracer
    from cortana.memory.base import MemoryProvider, MemoryResolver
    from cortana.models.base import CallJudge, ModelClient, ModelSettings
    from cortana.tools import Tool, ToolGroup
    from cortana.tools.context import AgentHandle
    from cortana.tools.hooks import ToolHooks
    from cortana.tools.permissions import PermissionGate

__all__ = ["NO_TIMEOUTS", "OPTION_NAMES", "RunConfig", "RunDeps"]

NO_TIMEOUTS: Mapping[str, float] = MappingProxyType({})
"""No per-tool timeouts (shared: an agent without any allocates nothing)."""


class _Policies(NamedTuple):
    """The fields of :class:`RunConfig` (a tuple: building one costs a fraction of a microsecond)."""

    name: str = "agent"
    instructions: str = ""
    max_tool_iterations: int = 10
    on_max_iterations: Callable[[int], Awaitable[bool]] | None = None
    parallel_tool_calls: bool = True
    max_parallel_tools: int = 4
    context_window: int | None = None
    compaction_threshold: float | None = None
    permissions: PermissionGate | None = None
    settings: ModelSettings | None = None
    logger: EventHandler | None = None
    nudge_repeated_calls: bool = True
    retry_failed_calls: bool = False
    tool_guidance: bool | str = False
    tool_timeout: float | None = 120.0
    tool_timeouts: Mapping[str, float] = NO_TIMEOUTS
    max_tool_output: int = 20_000
    check_grounding: bool = True
    instrument: bool | Instrumentation | None = None
    output_type: Any = None
    output_retries: int = 2
    tool_judge: CallJudge | None = None
    tool_hooks: ToolHooks | None = None


OPTION_NAMES: frozenset[str] = frozenset(_Policies.__annotations__)
"""The names of :class:`RunConfig`'s fields (the ``Agent`` keywords that land in its config)."""


class RunConfig(_Policies):
    """How an agent's runs go: one frozen snapshot per run (the ``Agent`` arguments of the same names).

    Immutable; :meth:`replace` makes a changed copy, checked like a new one.

    Raises:
        UserError: a limit out of range, naming it and the range.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        self = super().__new__(cls, *args, **kwargs)
        if (  # one test on the common path: building an agent is measured in microseconds
            self.max_tool_iterations < 1
            or self.max_parallel_tools < 1
            or self.max_tool_output < 1_000
            or (self.compaction_threshold is not None and not 0.1 <= self.compaction_threshold <= 1)
            or (self.tool_timeout is not None and not 0 < self.tool_timeout < math.inf)
            or (self.context_window is not None and self.context_window < 256)
            or self.output_retries < 0
        ):
            self._refuse()
        if self.tool_timeouts and not isinstance(self.tool_timeouts, MappingProxyType):
            self = self._replace(tool_timeouts=MappingProxyType(dict(self.tool_timeouts)))  # checked already
        return self

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes``, checked like a new config."""
        return RunConfig(**{**self._asdict(), **changes})

    def system_prompt(self, *, has_tools: bool) -> str:
        """The system prompt sent first in every request (byte-identical across turns)."""
        guidance = ""
        if has_tools and self.tool_guidance:
            guidance = self.tool_guidance if isinstance(self.tool_guidance, str) else prompt_text("tool_guidance")
        return "\n\n".join(part for part in (self.instructions, guidance) if part)

    def _refuse(self) -> None:
        """Raise the ``UserError`` for the first out-of-range limit."""
        if self.max_tool_iterations < 1:
            raise UserError(f"max_tool_iterations must be at least 1, got {self.max_tool_iterations}.")
        if self.max_parallel_tools < 1:
            raise UserError(f"max_parallel_tools must be at least 1, got {self.max_parallel_tools}.")
        if self.max_tool_output < 1_000:
            raise UserError(f"max_tool_output must be at least 1,000 characters, got {self.max_tool_output}.")
        if self.compaction_threshold is not None and not 0.1 <= self.compaction_threshold <= 1:
            raise UserError(f"compaction_threshold must be between 0.1 and 1, got {self.compaction_threshold}.")
        if self.tool_timeout is not None and not 0 < self.tool_timeout < math.inf:
            raise UserError(f"tool_timeout must be a positive number of seconds or None, got {self.tool_timeout}.")
        if self.output_retries < 0:
            raise UserError(f"output_retries must be 0 or more, got {self.output_retries}.")
        raise UserError(f"context_window must be at least 256 tokens, got {self.context_window}.")


@dataclass(frozen=True, slots=True)
class RunDeps:
    """What one run works with, resolved when it starts.

    Attributes:
        client: the engine.
        memory: the memory provider, or a function of the thread that returns one.
        tools: the agent's own tools; ``tool_groups``: its groups loaded on demand.
        extensions: the turn extensions that join every turn (a turn may replace them).
        background: where the extensions' work after the reply runs.
        handle: what a tool may know of the agent (``RunContext.agent``).
        busy: whether a turn of the agent is running (work after a reply gives the engine back to one).
        tracer: the run's spans (``agent/tracing.py``); ``None``: the run is not traced.
    """

    client: ModelClient
    memory: MemoryProvider | MemoryResolver | None
    tools: Sequence[Tool]
    tool_groups: Sequence[ToolGroup]
    extensions: Sequence[TurnExtension]
    background: BackgroundWork
    handle: AgentHandle | None = None
    busy: Callable[[], bool] = field(default=lambda: False)
    tracer: RunTracer | None = None
