"""The seam between the agent loop and an engine.

An engine adapter meets :class:`ModelClient`: it takes a :class:`ModelRequest`
(our messages, the offered tools, settings) and streams :class:`TextDelta` /
:class:`ThinkingDelta` events followed by exactly one :class:`ModelResponse`,
the complete answer in our own format. The loop always streams; a caller that
wants the whole answer drains the stream with :func:`complete`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from cortana.errors import ModelError
from cortana.messages import Message, StopReason, Usage

__all__ = [
    "BaseModelClient",
    "ModelClient",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "TextDelta",
    "ThinkingDelta",
    "ToolSpec",
    "complete",
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def as_function(self) -> dict[str, Any]:
        """The tool in the ``{"type": "function", "function": {...}}`` shape OpenAI and Ollama share."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(slots=True)
class ModelSettings:
    """Generation settings passed through to the engine; ``None`` keeps the engine's default.

    Attributes:
        temperature: sampling temperature.
        max_tokens: the most tokens to generate for one answer.
        seed: a fixed seed, for repeatable answers where the engine supports it.
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or the name of one tool to force.
        extra: engine-specific fields, sent as they are.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    tool_choice: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ModelRequest:
    """Everything one model call needs."""

    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    settings: ModelSettings = field(default_factory=ModelSettings)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of answer text, as it arrives."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of reasoning text, as it arrives (engines that separate it)."""

    text: str


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The complete answer of one model call, in our own format.

    Attributes:
        message: the assistant message, tool calls included.
        usage: the tokens the engine reported.
        finish_reason: ``stop`` or ``length`` (hit ``max_tokens``).
        model: the model name the engine reported, when it did.
    """

    message: Message
    usage: Usage = field(default_factory=Usage)
    finish_reason: StopReason = "stop"
    model: str | None = None


ModelEvent = TextDelta | ThinkingDelta | ModelResponse
"""What :meth:`ModelClient.stream` yields; the last event is always a :class:`ModelResponse`."""


@runtime_checkable
class ModelClient(Protocol):
    """What the agent loop needs from an engine.

    Attributes:
        model: the model's name on the engine.
        context_window: the context length the engine really serves, or ``None`` when unknown.
    """

    model: str

    @property
    def context_window(self) -> int | None: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the answer to ``request``: deltas, then one final :class:`ModelResponse`."""
        ...

    async def aclose(self) -> None:
        """Release connections (and, for the embedded engine, the server)."""
        ...


class BaseModelClient:
    """Shared defaults for adapters: capabilities are flags, not try/except at call sites."""

    supports_tools: ClassVar[bool] = True
    supports_streaming: ClassVar[bool] = True
    supports_embeddings: ClassVar[bool] = False

    model: str = ""
    _context_window: int | None = None

    @property
    def context_window(self) -> int | None:
        """The context length the engine serves, ``None`` when unknown."""
        return self._context_window

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def count_tokens(self, messages: list[Message], tools: list[ToolSpec] | None = None) -> int | None:
        """Tokens the prompt would take, from the engine's tokenizer; ``None`` when it has none."""
        return None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """Embedding vectors for ``texts``, one per text."""
        raise ModelError(f"{type(self).__name__} has no embedding endpoint; configure an embedder instead.")

    async def aclose(self) -> None:
        """Release connections; the default has none."""


async def complete(client: ModelClient, request: ModelRequest) -> ModelResponse:
    """Drain :meth:`ModelClient.stream` and return its final :class:`ModelResponse`."""
    final: ModelResponse | None = None
    async for event in client.stream(request):
        if isinstance(event, ModelResponse):
            final = event
    if final is None:
        raise ModelError(
            f"{type(client).__name__}.stream ended without a final ModelResponse; this is a bug in the adapter."
        )
    return final
