"""The typed events ``Agent.run_stream`` yields, in the order they happen, and those ``AgentRunner`` reports.

Anything with a ``handle(event)`` method (an :class:`EventHandler`, such as
``AgentLogger``) can watch both kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cortana.messages import Message, RunMetrics, RunResult, ToolCall
from cortana.models.base import ModelResponse, TextDelta, ThinkingDelta

if TYPE_CHECKING:
    from cortana.tools import Tool

__all__ = [
    "EventHandler",
    "ModelCallFinished",
    "ModelCallStarted",
    "PartialOutput",
    "PromptCut",
    "RunEvent",
    "RunFinished",
    "TaskEvent",
    "TaskFinished",
    "TaskStarted",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
]


@dataclass(frozen=True, slots=True)
class ModelCallStarted:
    """A request is about to go to the model (the logger starts its spinner).

    Attributes:
        iteration: rounds of tool calls so far.
        for_output: the call asks for the typed answer (``output_type``), held to its JSON schema.
    """

    iteration: int
    for_output: bool = False


@dataclass(frozen=True, slots=True)
class PartialOutput:
    """The typed answer so far, while the model writes it (``output_type``, on a call held to its schema).

    ``value`` validated as the output type with the unfinished end of the JSON left out (pydantic's partial
    validation): a list grows item by item; a model appears once every required field has begun. Each value
    differs from the one before; the last word is ``RunFinished``'s ``result.output``.
    """

    value: Any


@dataclass(frozen=True, slots=True)
class ModelCallFinished:
    """The model answered; ``response.usage`` has its token counts."""

    response: ModelResponse
    duration: float
    iteration: int


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call begins running (or is about to be answered with an error); ``tool``: the tool it calls (None:
    no tool of that name), whose ``kind`` and ``writes`` a front end reads (an editor's icon, a diff)."""

    call: ToolCall
    tool: Tool | None = None


@dataclass(frozen=True, slots=True)
class ToolCallProgress:
    """A running tool call says how it is getting on (``RunContext.report``): one short line, between its
    :class:`ToolCallStarted` and :class:`ToolCallFinished` (a helper's own tool calls, say)."""

    call: ToolCall
    text: str
    tool: Tool | None = None


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call ended; ``result`` is the tool message the model will read; ``tool`` as in
    :class:`ToolCallStarted`."""

    call: ToolCall
    result: Message
    duration: float
    tool: Tool | None = None

    @property
    def is_error(self) -> bool:
        """Whether the call failed (unknown tool, denied, invalid arguments, raised)."""
        return self.result.is_error

    @property
    def refused(self) -> bool:
        """Whether the call was refused before it ran (``result.refusal`` says why: policy, approval or hook)."""
        return self.result.refusal is not None


@dataclass(frozen=True, slots=True)
class PromptCut:
    """The user's message was longer than the model's window allows: it was cut to its head and tail before the
    run read it (``cortana.agent.fitting``), and ``note`` says how (shown once). It comes before the first model
    call."""

    note: str


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run is complete; the last event of every successful run."""

    result: RunResult


RunEvent = (
    TextDelta
    | ThinkingDelta
    | ModelCallStarted
    | ModelCallFinished
    | ToolCallStarted
    | ToolCallProgress
    | ToolCallFinished
    | PartialOutput
    | PromptCut
    | RunFinished
)


@dataclass(frozen=True, slots=True)
class TaskStarted:
    """An ``AgentRunner`` task began running (it had waited for a free slot)."""

    label: str
    prompt: str


@dataclass(frozen=True, slots=True)
class TaskFinished:
    """An ``AgentRunner`` task ended.

    Attributes:
        label: the task's name.
        duration: seconds it ran.
        metrics: what it cost (partial when it failed, where known).
        error: how it failed, as ``Type: message``; ``None`` when it completed.
    """

    label: str
    duration: float
    metrics: RunMetrics
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the task completed."""
        return self.error is None


TaskEvent = TaskStarted | TaskFinished


@runtime_checkable
class EventHandler(Protocol):
    """Anything that watches run and task events, such as :class:`~cortana.agent.logger.AgentLogger`."""

    def handle(self, event: RunEvent | TaskEvent) -> None:
        """Called with each event as it happens."""
        ...
