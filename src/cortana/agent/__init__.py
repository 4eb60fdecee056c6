"""The agent: configuration, the run loop, events and the live logger.

Names are imported on first use (PEP 562): the terminal imports ``cortana.agent.events`` before its
prompt shows, and ``Agent`` (the loop, compaction, the tools) only once the engine is loading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortana.lazy import lazy_names

if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.agent.events import (
        ModelCallFinished,
        ModelCallStarted,
        PartialOutput,
        RunEvent,
        RunFinished,
        TextDelta,
        ThinkingDelta,
        ToolCallFinished,
        ToolCallProgress,
        ToolCallStarted,
    )

__all__ = [
    "Agent",
    "ModelCallFinished",
    "ModelCallStarted",
    "PartialOutput",
    "RunEvent",
    "RunFinished",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
]


_LAZY = {
    "Agent": "cortana.agent.agent",
    "ModelCallFinished": "cortana.agent.events",
    "ModelCallStarted": "cortana.agent.events",
    "PartialOutput": "cortana.agent.events",
    "RunEvent": "cortana.agent.events",
    "RunFinished": "cortana.agent.events",
    "TextDelta": "cortana.agent.events",
    "ThinkingDelta": "cortana.agent.events",
    "ToolCallFinished": "cortana.agent.events",
    "ToolCallProgress": "cortana.agent.events",
    "ToolCallStarted": "cortana.agent.events",
}


__getattr__ = lazy_names(__name__, _LAZY)
