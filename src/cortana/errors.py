"""Every error Cortana raises, in one hierarchy.

Each message names the cause and the next step, so a user who sees only the
message knows what to change::

    CortanaError
     +-- ConfigError              bad cortana.yml / environment (names the key)
     +-- ModelError               the engine or the model failed
     |    +-- EngineUnavailable   nothing listening; says how to start an engine
     |    +-- ModelNotFound       the engine lacks the model; says how to get it
     |    +-- ContextOverflow     the prompt cannot fit the context window
     |    +-- StreamInterrupted   the engine stopped mid-answer
     +-- MaxToolIterationsError   the run used up its tool iterations
     +-- ToolError                a tool failed; sent back to the model as a
     |    |                       tool result, never raised to the user
     |    +-- PermissionDenied    the permission gate refused a tool call
     +-- UserError                the library was used wrongly (bad arguments)

`ToolError` and `PermissionDenied` are raised *inside* tools or the gate; the
agent loop turns them into tool results the model can read and correct.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cortana.messages import Message, RunMetrics

__all__ = [
    "ConfigError",
    "ContextOverflow",
    "CortanaError",
    "EngineUnavailable",
    "MaxToolIterationsError",
    "MemoryUnavailable",
    "ModelError",
    "ModelNotFound",
    "PermissionDenied",
    "StreamInterrupted",
    "ToolError",
    "UserError",
    "WorkerDiedError",
]


class CortanaError(Exception):
    """Base class of every error Cortana raises on purpose."""


class UserError(CortanaError):
    """The library was called wrongly: a bad argument, a tool defined badly."""


class ConfigError(CortanaError):
    """A bad value in cortana.yml or the environment.

    Attributes:
        key: the dotted configuration key at fault (``"engine"``, ``"mcp.servers.0.command"``).
        source: the file or environment variable the value came from, when known.
    """

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None) -> None:
        self.key = key
        self.source = source
        where = ", ".join(part for part in (source, f"key '{key}'" if key else None) if part)
        super().__init__(f"{where}: {message}" if where else message)


class MemoryUnavailable(CortanaError):
    """The memory database could not be reached, or kept failing, past the retry deadline.

    Raised instead of losing a write silently: the caller (the agent's run, the assistant) fails
    with it, and the message names the server (never its password) and what to check.
    """


class WorkerDiedError(CortanaError):
    """The Ray worker process running a task died (killed, out of memory, crashed) before the run finished.

    Only that task fails: ``AgentRunner`` replaces the worker and the rest of the batch runs on.
    ``__cause__`` is Ray's own error, with the worker's pid, node and exit detail.
    """


class ModelError(CortanaError):
    """The engine or the model failed to answer."""


class EngineUnavailable(ModelError):
    """Nothing answers at the engine's URL.

    Attributes:
        url: the address that was tried.
    """

    def __init__(self, message: str, *, url: str | None = None) -> None:
        self.url = url
        super().__init__(message)


class ModelNotFound(ModelError):
    """The engine runs, but does not have the requested model."""

    def __init__(self, message: str, *, model: str | None = None) -> None:
        self.model = model
        super().__init__(message)


class ContextOverflow(ModelError):
    """The prompt does not fit the context window the engine serves.

    Raised before the engine would silently drop the start of the prompt.

    Attributes:
        prompt_tokens: the (estimated or reported) size of the prompt.
        context_window: the window the engine serves.
    """

    def __init__(self, message: str, *, prompt_tokens: int | None = None, context_window: int | None = None) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window
        super().__init__(message)


class StreamInterrupted(ModelError):
    """The engine's stream broke before the answer was complete.

    Attributes:
        partial_text: what had arrived before the break; never presented as an answer.
    """

    def __init__(self, message: str, *, partial_text: str = "") -> None:
        self.partial_text = partial_text
        super().__init__(message)


class MaxToolIterationsError(CortanaError):
    """The model kept calling tools past ``max_tool_iterations``.

    Nothing is lost: ``messages`` holds every message of the run so far and
    ``metrics`` what it cost, so the caller can inspect or resume it.
    """

    def __init__(
        self,
        message: str,
        *,
        iterations: int,
        messages: list[Message] | None = None,
        metrics: RunMetrics | None = None,
    ) -> None:
        self.iterations = iterations
        self.messages: list[Message] = list(messages or [])
        self.metrics = metrics
        super().__init__(message)


class ToolError(CortanaError):
    """A tool could not do what was asked.

    Raise it from a tool to send a clear message back to the model; the run
    goes on and the model may correct its call.
    """

    def __init__(self, message: str, *, tool_name: str | None = None, details: Any = None) -> None:
        self.tool_name = tool_name
        self.details = details
        super().__init__(message)


class PermissionDenied(ToolError):
    """The permission gate refused a tool call; the model is told why."""
