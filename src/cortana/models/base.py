"""The seam between the agent loop and an engine.

An engine adapter meets :class:`ModelClient`: it takes a :class:`ModelRequest`
(our messages, the offered tools, settings) and streams :class:`TextDelta` /
:class:`ThinkingDelta` events followed by exactly one :class:`ModelResponse`,
the complete answer in our own format. The loop always streams; a caller that
wants the whole answer drains the stream with :func:`complete`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, Self

from cortana.errors import ModelError, UserError
from cortana.messages import Image, Message, StopReason, Usage
from cortana.streams import closing

__all__ = [
    "THINKING_BUDGETS",
    "CallJudge",
    "ModelClient",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "TextDelta",
    "ThinkLevel",
    "ThinkingDelta",
    "ToolFit",
    "ToolSpec",
    "complete",
    "loose_name",
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


def loose_name(name: str) -> str:
    """A tool name with case and separators folded: small models write ``fs.read`` as ``fs_read``."""
    return re.sub(r"[._\-\s]+", "_", name.strip()).lower()


ThinkLevel = Literal["low", "medium", "high"]
"""How much a thinking model may think. Ollama takes the level as it is (its ``think`` levels);
llama.cpp caps the reasoning with ``thinking_budget_tokens`` (:data:`THINKING_BUDGETS`); OpenAI-style
servers get ``reasoning_effort``."""
THINKING_BUDGETS: dict[str, int] = {"low": 512, "medium": 2048, "high": -1}
"""Reasoning tokens per think level on llama.cpp (-1: no cap)."""


@dataclass(slots=True)
class ModelSettings:
    """Generation settings passed through to the engine; ``None`` keeps the engine's default.

    Attributes:
        temperature: sampling temperature.
        max_tokens: the most tokens to generate for one answer.
        seed: a fixed seed, for repeatable answers where the engine supports it.
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or the name of one tool to force.
        think: turn a thinking model's reasoning on or off, or ask for less or more of it
            (``"low"``, ``"medium"``, ``"high"``: each engine maps a level to its own control, see
            :data:`ThinkLevel`); sent only to engines whose client reports
            :attr:`ModelClient.supports_thinking`, so it does nothing for models that do not think.
        grammar: a GBNF grammar the answer must follow (llama.cpp's); only for engines whose client
            reports :attr:`ModelClient.supports_grammar` (others leave it out: check before relying on it).
        json_schema: the answer must be JSON matching this schema: llama.cpp's ``json_schema`` (a grammar
            made from it, so nothing else can be sampled), Ollama's ``format``, ``response_format`` with a
            ``json_schema`` on other OpenAI-compatible servers.
        extra: engine-specific fields, sent as they are.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    tool_choice: str | None = None
    think: bool | ThinkLevel | None = None
    grammar: str | None = None
    json_schema: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolFit:
    """A judge's opinion of the tools offered for one question.

    Attributes:
        allowed: the tools a call of which may run (a call of another is turned into prose).
        fitting: the tools that clearly fit: a call of one the model described in prose is made.
        detail: the scores behind it, for the log.
    """

    allowed: frozenset[str]
    fitting: frozenset[str] = frozenset()
    detail: str = ""


class CallJudge(Protocol):
    """A second opinion on a turn's first tool call that costs no model call (``cortana.agent.judge.ToolJudge``).

    The loop asks it before a turn's first call: when it allows no offered tool, the turn is sent without
    tools. Engines that guide tool calls (:attr:`ModelClient.guides_tool_calls`) ask it again for a turn
    that offers tools: a call of a tool it does not allow is turned into prose, and a call the model
    described in prose is made when the tool it named fits.
    """

    async def assess(self, question: str, tools: Sequence[ToolSpec]) -> ToolFit:
        """Which of ``tools`` a call for the user's ``question`` may use, and which clearly fit it."""
        ...


@dataclass(slots=True)
class ModelRequest:
    """Everything one model call needs.

    Attributes:
        messages: the conversation so far.
        tools: the tools offered.
        settings: how to generate.
        judge: a second opinion on the first tool call of a user's turn, for engines that guide calls.
        streamed: someone reads the answer as it arrives; ``False`` lets a client ask for it whole (one reply
            to parse instead of an event per token): its events are then the whole text at once, and the end.
    """

    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    settings: ModelSettings = field(default_factory=ModelSettings)
    judge: CallJudge | None = None
    streamed: bool = True


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


class ModelClient(Protocol):
    """The one contract between Cortana and an engine.

    An adapter implements :meth:`stream`; everything else has a default here,
    so adapters subclass this protocol and override what their engine can do.
    A capability is a property the caller reads before using it (never a
    ``hasattr`` probe): the optional methods of an engine without the
    capability raise :class:`ModelError` saying so.

    Clients are async context managers: ``async with await create_model_client() as client:``.

    Attributes:
        model: the model's name on the engine.
        engine: the engine's name, for people ("Ollama", "llama.cpp", ...).
    """

    model: str
    engine: str = "engine"

    @property
    def base_url(self) -> str | None:
        """The engine's address; ``None`` for an engine that is not reached over HTTP."""
        return None

    @property
    def context_window(self) -> int | None:
        """The context length the engine really serves, or ``None`` when unknown."""
        return None

    @property
    def supports_token_counting(self) -> bool:
        """Whether :meth:`count_tokens` counts with the engine's own tokenizer."""
        return False

    @property
    def supports_embeddings(self) -> bool:
        """Whether :meth:`embed` works."""
        return False

    @property
    def supports_thinking(self) -> bool:
        """Whether the model thinks, and :attr:`ModelSettings.think` turns it on or off."""
        return False

    @property
    def supports_grammar(self) -> bool:
        """Whether :attr:`ModelSettings.grammar` constrains the answer (a text answer, no tools offered)."""
        return False

    @property
    def supports_images(self) -> bool:
        """Whether the model may be shown images (``Message.images``): ``False`` when the engine says it cannot (a
        request with one is refused before it is sent, see :meth:`images_refused`); ``True`` also where the engine
        cannot tell (an OpenAI-compatible server: the request is sent, and the server says)."""
        return False

    @property
    def sends_image_urls(self) -> bool:
        """Whether an image given by its URL is sent as that URL (a server that fetches it); ``False``: only bytes."""
        return False

    def images_hint(self) -> str:
        """What to do when this engine's model cannot be shown images."""
        return "use a vision model, such as qwen2.5vl or gemma3"

    def images_refused(self, images: Sequence[Image]) -> Exception | None:
        """Why ``images`` cannot be sent to this model, as the error to raise before any request (``None``: they can).

        A model without vision (:attr:`supports_images`) is a :class:`ModelError` naming it and what to do; an image
        given by URL to an engine that takes only bytes (:attr:`sends_image_urls`) is a :class:`UserError`.
        """
        if not images:
            return None
        if not self.supports_images:
            return ModelError(f"{self.engine} ({self.model}) cannot be shown images: {self.images_hint()}.")
        if not self.sends_image_urls and (url := next((image.url for image in images if image.url), None)):
            return UserError(
                f"{self.engine} is sent images as bytes only (Cortana fetches nothing for a local engine), and "
                f"{url[:200]} is a URL: download it and give the file (Image.from_path) or its bytes (Image(data=...))."
            )
        return None

    @property
    def guides_tool_calls(self) -> bool:
        """Whether tool calls are written under a grammar and checked (``cortana.models.guided``)."""
        return False

    @property
    def can_list_models(self) -> bool:
        """Whether :meth:`list_models` works."""
        return False

    @property
    def can_switch_model(self) -> bool:
        """Whether :meth:`switch_model` works (an engine serving many models)."""
        return False

    @property
    def parallel_samples(self) -> int:
        """How many answers to one prompt :meth:`complete_many` gets from one request (1: one request each)."""
        return 1

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the answer to ``request``: deltas, then one final :class:`ModelResponse`."""
        ...

    async def complete_many(self, request: ModelRequest, count: int) -> list[ModelResponse]:
        """``count`` answers to ``request`` (a text answer: no tools), each sampled on its own.

        By default one request after another, each seed one more than the last; an engine that decodes several
        answers of one prompt together (:attr:`parallel_samples`) answers in one request.
        """
        answers = []
        for number in range(count):
            seed = None if request.settings.seed is None else request.settings.seed + number
            answers.append(await complete(self, replace(request, settings=replace(request.settings, seed=seed))))
        return answers

    async def count_tokens(self, messages: list[Message], tools: list[ToolSpec] | None = None) -> int:
        """The prompt's size in tokens, from the engine's tokenizer (see :attr:`supports_token_counting`)."""
        raise self._unsupported("count tokens")

    async def list_models(self) -> list[str]:
        """Names of the models the engine can serve (see :attr:`can_list_models`)."""
        raise self._unsupported("list its models")

    async def switch_model(self, model: str) -> None:
        """Serve the rest of the session with ``model`` (see :attr:`can_switch_model`)."""
        raise self._unsupported("switch models")

    async def embed(self, texts: list[str], *, model: str | None = None) -> list[list[float]]:
        """Embedding vectors for ``texts``, one per text, by ``model`` (default: the client's own).

        See :attr:`supports_embeddings`.
        """
        raise self._unsupported("embed text; configure an embedder instead")

    async def aclose(self) -> None:
        """Release connections (and, for the embedded engine, the server); nothing to release by default."""
        return None  # a body, not only a docstring: type checkers would take it for abstract otherwise

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _unsupported(self, what: str) -> ModelError:
        return ModelError(f"{self.engine} ({self.model}) cannot {what}.")


async def complete(client: ModelClient, request: ModelRequest) -> ModelResponse:
    """Drain :meth:`ModelClient.stream` and return its final :class:`ModelResponse`."""
    final: ModelResponse | None = None
    async with closing(client.stream(request)) as opened:
        async for event in opened:
            if isinstance(event, ModelResponse):
                final = event
    if final is None:
        raise ModelError(
            f"{type(client).__name__}.stream ended without a final ModelResponse; this is a bug in the adapter."
        )
    return final
