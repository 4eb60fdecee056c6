"""Cortana: local-first agents for Python, tuned for small local models.

    from cortana import Agent, tool

    @tool
    def add(a: int, b: int) -> int:
        "Add two numbers."
        return a + b

    agent = Agent(model, instructions="Be brief.", tools=[add])
    result = await agent.run("What is 2 + 3?")

Every public name is imported on first use (PEP 562), so ``import cortana``
and ``cortana --help`` stay fast; engine SDKs load only inside their adapters.
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
        PromptCut,
        RunEvent,
        RunFinished,
        TextDelta,
        ThinkingDelta,
        ToolCallFinished,
        ToolCallProgress,
        ToolCallStarted,
    )
    from cortana.agent.extensions import TurnExtension, TurnScope, current_turn
    from cortana.agent.judge import ToolJudge
    from cortana.agent.logger import AgentLogger
    from cortana.agent.output import OutputValidationError
    from cortana.agent.run_config import RunConfig
    from cortana.agent.runner import AgentOutcome, AgentRunner, AgentTask
    from cortana.agent.streamed import StreamedRun
    from cortana.agent.subagents import SubagentManager
    from cortana.agent.tracing import Instrumentation, instrument, uninstrument
    from cortana.assistant import Assistant
    from cortana.companion.companion import AgentCheckIn, LocalTime, Reflection
    from cortana.companion.heartbeat import Heartbeat
    from cortana.companion.voice import Voice
    from cortana.config import Settings
    from cortana.errors import (
        ConfigError,
        ContextOverflow,
        CortanaError,
        EngineUnavailable,
        MaxToolIterationsError,
        MemoryUnavailable,
        ModelError,
        ModelNotFound,
        PermissionDenied,
        StreamInterrupted,
        ToolError,
        UserError,
        WorkerDiedError,
    )
    from cortana.knowledge.files import NamedFiles
    from cortana.knowledge.graph import KnowledgeGraph
    from cortana.knowledge.search import PromptSearch
    from cortana.learning.experience import Experience, RecipeImpact, RecipeInfo
    from cortana.learning.recipes import Recipe
    from cortana.learning.skills import Skill, SkillRegistry
    from cortana.learning.teach import TeachSession
    from cortana.memory.base import InMemoryHistory, MemoryProvider
    from cortana.messages import (
        Image,
        ImageError,
        Message,
        PendingApproval,
        RunMetrics,
        RunResult,
        RunState,
        ThreadRef,
        ToolCall,
        Usage,
    )
    from cortana.models.base import ModelClient, ModelRequest, ModelResponse, ModelSettings
    from cortana.models.factory import create_model_client
    from cortana.tools.base import SchemaTool, Tool, tool
    from cortana.tools.context import AgentHandle, RunContext
    from cortana.tools.groups import ToolGroup
    from cortana.tools.permissions import PermissionDecision, PermissionGate

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentCheckIn",
    "AgentHandle",
    "AgentLogger",
    "AgentOutcome",
    "AgentRunner",
    "AgentTask",
    "Assistant",
    "ConfigError",
    "ContextOverflow",
    "CortanaError",
    "EngineUnavailable",
    "Experience",
    "Heartbeat",
    "Image",
    "ImageError",
    "InMemoryHistory",
    "Instrumentation",
    "KnowledgeGraph",
    "LocalTime",
    "MaxToolIterationsError",
    "MemoryProvider",
    "MemoryUnavailable",
    "Message",
    "ModelCallFinished",
    "ModelCallStarted",
    "ModelClient",
    "ModelError",
    "ModelNotFound",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "NamedFiles",
    "OutputValidationError",
    "PartialOutput",
    "PendingApproval",
    "PermissionDecision",
    "PermissionDenied",
    "PermissionGate",
    "PromptCut",
    "PromptSearch",
    "Recipe",
    "RecipeImpact",
    "RecipeInfo",
    "Reflection",
    "RunConfig",
    "RunContext",
    "RunEvent",
    "RunFinished",
    "RunMetrics",
    "RunResult",
    "RunState",
    "SchemaTool",
    "Settings",
    "Skill",
    "SkillRegistry",
    "StreamInterrupted",
    "StreamedRun",
    "SubagentManager",
    "TeachSession",
    "TextDelta",
    "ThinkingDelta",
    "ThreadRef",
    "Tool",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolError",
    "ToolGroup",
    "ToolJudge",
    "TurnExtension",
    "TurnScope",
    "Usage",
    "UserError",
    "Voice",
    "WorkerDiedError",
    "__version__",
    "create_model_client",
    "current_turn",
    "instrument",
    "tool",
    "uninstrument",
]

_LAZY = {
    "Agent": "cortana.agent.agent",
    "Instrumentation": "cortana.agent.tracing",
    "ToolJudge": "cortana.agent.judge",
    "instrument": "cortana.agent.tracing",
    "uninstrument": "cortana.agent.tracing",
    "Assistant": "cortana.assistant",
    "Settings": "cortana.config",
    "AgentLogger": "cortana.agent.logger",
    "AgentOutcome": "cortana.agent.runner",
    "AgentRunner": "cortana.agent.runner",
    "AgentTask": "cortana.agent.runner",
    "ConfigError": "cortana.errors",
    "ContextOverflow": "cortana.errors",
    "CortanaError": "cortana.errors",
    "EngineUnavailable": "cortana.errors",
    "Experience": "cortana.learning.experience",
    "RecipeImpact": "cortana.learning.experience",
    "RecipeInfo": "cortana.learning.experience",
    "Recipe": "cortana.learning.recipes",
    "Skill": "cortana.learning.skills",
    "SkillRegistry": "cortana.learning.skills",
    "TeachSession": "cortana.learning.teach",
    "AgentCheckIn": "cortana.companion.companion",
    "Heartbeat": "cortana.companion.heartbeat",
    "LocalTime": "cortana.companion.companion",
    "Reflection": "cortana.companion.companion",
    "Voice": "cortana.companion.voice",
    "InMemoryHistory": "cortana.memory.base",
    "KnowledgeGraph": "cortana.knowledge.graph",
    "NamedFiles": "cortana.knowledge.files",
    "PromptSearch": "cortana.knowledge.search",
    "MaxToolIterationsError": "cortana.errors",
    "MemoryUnavailable": "cortana.errors",
    "MemoryProvider": "cortana.memory.base",
    "Image": "cortana.messages",
    "ImageError": "cortana.messages",
    "Message": "cortana.messages",
    "ModelCallFinished": "cortana.agent.events",
    "ModelCallStarted": "cortana.agent.events",
    "PartialOutput": "cortana.agent.events",
    "PromptCut": "cortana.agent.events",
    "ModelClient": "cortana.models.base",
    "ModelError": "cortana.errors",
    "ModelNotFound": "cortana.errors",
    "ModelRequest": "cortana.models.base",
    "ModelResponse": "cortana.models.base",
    "ModelSettings": "cortana.models.base",
    "OutputValidationError": "cortana.agent.output",
    "PermissionDecision": "cortana.tools.permissions",
    "PermissionDenied": "cortana.errors",
    "PermissionGate": "cortana.tools.permissions",
    "RunContext": "cortana.tools.context",
    "AgentHandle": "cortana.tools.context",
    "RunConfig": "cortana.agent.run_config",
    "RunEvent": "cortana.agent.events",
    "RunFinished": "cortana.agent.events",
    "RunMetrics": "cortana.messages",
    "RunResult": "cortana.messages",
    "RunState": "cortana.messages",
    "PendingApproval": "cortana.messages",
    "SchemaTool": "cortana.tools.base",
    "StreamInterrupted": "cortana.errors",
    "StreamedRun": "cortana.agent.streamed",
    "SubagentManager": "cortana.agent.subagents",
    "TextDelta": "cortana.agent.events",
    "ThinkingDelta": "cortana.agent.events",
    "ThreadRef": "cortana.messages",
    "Tool": "cortana.tools.base",
    "ToolCall": "cortana.messages",
    "ToolCallFinished": "cortana.agent.events",
    "ToolCallProgress": "cortana.agent.events",
    "ToolCallStarted": "cortana.agent.events",
    "ToolError": "cortana.errors",
    "ToolGroup": "cortana.tools.groups",
    "TurnExtension": "cortana.agent.extensions",
    "TurnScope": "cortana.agent.extensions",
    "current_turn": "cortana.agent.extensions",
    "Usage": "cortana.messages",
    "create_model_client": "cortana.models.factory",
    "UserError": "cortana.errors",
    "WorkerDiedError": "cortana.errors",
    "tool": "cortana.tools.base",
}


__getattr__ = lazy_names(__name__, _LAZY)
