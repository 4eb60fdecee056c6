"""The typed events ``Agent.run_stream`` yields, in the order they happen."""

from __future__ import annotations

from dataclasses import dataclass

from cortana.messages import Message, RunResult, ToolCall
from cortana.models.base import ModelResponse, TextDelta, ThinkingDelta

__all__ = [
    "ModelCallFinished",
    "ModelCallStarted",
    "RunEvent",
    "RunFinished",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallFinished",
    "ToolCallStarted",
]


@dataclass(frozen=True, slots=True)
class ModelCallStarted:
    """A request is about to go to the model (the logger starts its spinner)."""

    iteration: int


@dataclass(frozen=True, slots=True)
class ModelCallFinished:
    """The model answered; ``response.usage`` has its token counts."""

    response: ModelResponse
    duration: float
    iteration: int


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call begins running (or is about to be answered with an error)."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call ended; ``result`` is the tool message the model will read."""

    call: ToolCall
    result: Message
    duration: float

    @property
    def is_error(self) -> bool:
        """Whether the call failed (unknown tool, denied, invalid arguments, raised)."""
        return self.result.is_error


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run is complete; the last event of every successful run."""

    result: RunResult


RunEvent = (
    TextDelta | ThinkingDelta | ModelCallStarted | ModelCallFinished | ToolCallStarted | ToolCallFinished | RunFinished
)
