"""Test your agents without an engine: a scripted model that meets ``ModelClient``.

    model = ScriptedModel([
        tool_call_response(tool_call("get_weather", city="Paris")),
        "It is sunny in Paris.",
    ])
    agent = Agent(model, tools=[get_weather])
    result = await agent.run("Weather in Paris?")
    assert model.requests[1].messages[-1].content == "sunny"

A scripted model tests the loop and your tools; it is never evidence that an
engine works.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cortana.errors import ModelError
from cortana.messages import Message, StopReason, ToolCall, Usage, images_of
from cortana.models.base import ModelClient, ModelEvent, ModelRequest, ModelResponse, TextDelta, ThinkingDelta

__all__ = ["ScriptedModel", "ScriptedResponse", "tool_call", "tool_call_response"]

_ids = itertools.count(1)


def tool_call(name: str, /, **arguments: Any) -> ToolCall:
    """A ``ToolCall`` with a fresh id, for scripts."""
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=arguments)


@dataclass
class ScriptedResponse:
    """One scripted model answer.

    Attributes:
        text: the answer text, streamed word by word.
        tool_calls: calls the answer requests.
        thinking: reasoning text, streamed before the answer.
        usage: token counts to report (default: a rough count of words).
        finish_reason: ``stop`` or ``length``.
        delay: seconds to wait before answering, to simulate a slow engine.
        error: raise this instead of answering (after streaming ``text``), to simulate a failing engine.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: str | None = None
    usage: Usage | None = None
    finish_reason: StopReason = "stop"
    delay: float = 0.0
    error: BaseException | None = None


def tool_call_response(*calls: ToolCall, text: str = "") -> ScriptedResponse:
    """A scripted answer that requests ``calls``."""
    return ScriptedResponse(text=text, tool_calls=list(calls))


Step = str | ScriptedResponse | Callable[[ModelRequest], "str | ScriptedResponse | Awaitable[str | ScriptedResponse]"]


class ScriptedModel(ModelClient):
    """Replays a list of answers in order, and records every request it gets.

    Each step is a string (a plain answer), a :class:`ScriptedResponse`, or a
    function of the :class:`ModelRequest` returning either, for answers that
    depend on what the agent sent.

    Args:
        script: the answers, in order. Running past the end raises ``ModelError``.
        model: the name to report.
        context_window: the window to report (``None``: unknown).
        reads_images: whether it stands for a model that may be shown images (``False``: one without vision, whose
            requests with images are refused before they are recorded, as an engine's adapter refuses them).
    """

    engine = "scripted model"

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        model: str = "scripted",
        context_window: int | None = None,
        reads_images: bool = True,
    ) -> None:
        self.script: list[Step] = list(script)
        self.model = model
        self._context_window = context_window
        self.reads_images = reads_images
        self.requests: list[ModelRequest] = []

    @property
    def supports_images(self) -> bool:
        """As given (``reads_images``)."""
        return self.reads_images

    @property
    def sends_image_urls(self) -> bool:
        """``True``: a scripted model takes an image by URL as it is."""
        return True

    @property
    def context_window(self) -> int | None:
        """The window given to the constructor."""
        return self._context_window

    def add(self, *steps: Step) -> ScriptedModel:
        """Append answers to the script; returns ``self`` for chaining."""
        self.script.extend(steps)
        return self

    @property
    def remaining(self) -> int:
        """Answers not yet replayed."""
        return len(self.script) - len(self.requests)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        refused = self.images_refused(images_of(request.messages))
        if refused is not None:
            raise refused
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.script):
            raise ModelError(
                f"ScriptedModel has {len(self.script)} scripted answers and got request #{index + 1}; "
                "add more answers to the script (or check why the agent called the model again)."
            )
        step = self.script[index]
        if callable(step):
            produced = step(request)
            step = await produced if inspect.isawaitable(produced) else produced
        response = ScriptedResponse(text=step) if isinstance(step, str) else step
        if response.delay:
            await asyncio.sleep(response.delay)
        if response.thinking:
            yield ThinkingDelta(response.thinking)
        for piece in re.findall(r"\S+\s*|\s+", response.text):
            yield TextDelta(piece)
        if response.error is not None:
            raise response.error
        usage = response.usage or Usage(
            prompt_tokens=sum(len(m.content.split()) + 4 for m in request.messages),
            completion_tokens=len(response.text.split()) + 8 * len(response.tool_calls),
        )
        message = Message(
            role="assistant", content=response.text, tool_calls=list(response.tool_calls), thinking=response.thinking
        )
        yield ModelResponse(message=message, usage=usage, finish_reason=response.finish_reason, model=self.model)
