"""The agent: configuration, the run loop, events and the live logger."""

from cortana.agent.agent import Agent
from cortana.agent.events import (
    ModelCallFinished,
    ModelCallStarted,
    RunEvent,
    RunFinished,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallStarted,
)

__all__ = [
    "Agent",
    "ModelCallFinished",
    "ModelCallStarted",
    "RunEvent",
    "RunFinished",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallFinished",
    "ToolCallStarted",
]
