"""Cortana: local-first agents for Python, tuned for small local models.

    from cortana import Agent, tool

    @tool
    def add(a: int, b: int) -> int:
        "Add two numbers."
        return a + b

    agent = Agent(model, instructions="Be brief.", tools=[add])
    result = await agent.run("What is 2 + 3?")

Heavy parts (the rich logger, engine SDKs, the CLI) are imported lazily so
that ``import cortana`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from cortana.errors import (
    ConfigError,
    ContextOverflow,
    CortanaError,
    EngineUnavailable,
    MaxToolIterationsError,
    ModelError,
    ModelNotFound,
    PermissionDenied,
    StreamInterrupted,
    ToolError,
    UserError,
)
from cortana.memory.base import InMemoryHistory, MemoryProvider
from cortana.messages import Message, RunMetrics, RunResult, ThreadRef, ToolCall, Usage
from cortana.models.base import ModelClient, ModelRequest, ModelResponse, ModelSettings
from cortana.tools.base import RunContext, Tool, ToolGroup, tool
from cortana.tools.permissions import PermissionDecision, PermissionGate

if TYPE_CHECKING:
    from cortana.agent.logger import AgentLogger

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentLogger",
    "ConfigError",
    "ContextOverflow",
    "CortanaError",
    "EngineUnavailable",
    "InMemoryHistory",
    "MaxToolIterationsError",
    "MemoryProvider",
    "Message",
    "ModelCallFinished",
    "ModelCallStarted",
    "ModelClient",
    "ModelError",
    "ModelNotFound",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "PermissionDecision",
    "PermissionDenied",
    "PermissionGate",
    "RunContext",
    "RunEvent",
    "RunFinished",
    "RunMetrics",
    "RunResult",
    "StreamInterrupted",
    "TextDelta",
    "ThinkingDelta",
    "ThreadRef",
    "Tool",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolError",
    "ToolGroup",
    "Usage",
    "UserError",
    "__version__",
    "tool",
]

_LAZY = {"AgentLogger": "cortana.agent.logger"}


def __getattr__(name: str) -> Any:
    """Import rarely needed, heavier names (the rich logger) on first use."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cortana' has no attribute {name!r}")
