"""Assembles one streamed answer into our ``Message``, whatever engine sent it.

Adapters feed it text, thinking and tool-call pieces as they arrive; it holds
back text that may be a tool call written as text, assembles tool calls from
deltas (tolerating servers that repeat the id and name in every chunk), and at
the end recovers text-written calls so every engine returns the same shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cortana.display import valid_text
from cortana.errors import StreamInterrupted
from cortana.messages import Message, StopReason, ToolCall, Usage
from cortana.models.base import ModelEvent, ModelResponse, TextDelta, ThinkingDelta, ToolSpec
from cortana.models.toolparse import TextToolCallFilter, make_tool_call, new_call_id, recover_tool_calls

__all__ = ["AnswerBuilder"]


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    parsed: dict[str, Any] | None = None


@dataclass
class AnswerBuilder:
    """Collects one answer's pieces.

    Args:
        tools: the tools offered in the request (text recovery only finds these).
        recover_text_calls: recover tool calls written as text (on by default).
    """

    tools: Sequence[ToolSpec]
    recover_text_calls: bool = True
    _text: list[str] = field(default_factory=list)
    _thinking: list[str] = field(default_factory=list)
    _calls: dict[int, _PartialCall] = field(default_factory=dict)
    _filter: TextToolCallFilter | None = None
    _shown: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._filter = TextToolCallFilter(self.tools) if self.recover_text_calls and self.tools else None

    @property
    def text_so_far(self) -> str:
        """Everything received as text (for error messages about a broken stream)."""
        return "".join(self._text)

    def add_text(self, delta: str) -> TextDelta | None:
        """Add answer text; returns the event to show now, or None while text is held back."""
        self._text.append(delta)
        shown = self._filter.feed(delta) if self._filter else delta
        self._shown.append(shown)
        return TextDelta(shown) if shown else None

    def add_thinking(self, delta: str) -> ThinkingDelta:
        """Add reasoning text; returns the event to show."""
        self._thinking.append(delta)
        return ThinkingDelta(delta)

    def add_call_delta(self, index: int, *, id: str | None, name: str | None, arguments: str | None) -> None:
        """Add a piece of a streamed structured tool call (OpenAI-style deltas)."""
        call = self._calls.setdefault(index, _PartialCall())
        if id and not call.id:
            call.id = id
        if name and name != call.name:
            # Some servers repeat the whole name in every chunk; others send it once.
            call.name = name if not call.name or call.arguments else call.name + name
        if arguments:
            call.arguments += arguments

    def add_call(self, name: str, arguments: dict[str, Any] | str, id: str | None = None) -> None:
        """Add a whole structured tool call (engines that send calls complete)."""
        index = len(self._calls)
        if isinstance(arguments, dict):
            self._calls[index] = _PartialCall(id=id or "", name=name, parsed=arguments)
        else:
            self._calls[index] = _PartialCall(id=id or "", name=name, arguments=arguments)

    def interrupted(self, where: str) -> StreamInterrupted:
        """The error for a stream that ended before the answer was complete."""
        return StreamInterrupted(
            f"{where} closed the stream before the answer was complete; the partial answer was discarded. "
            "Retry the turn.",
            partial_text=self.text_so_far,
        )

    def final_events(self, usage: Usage, finish_reason: StopReason, model: str) -> list[ModelEvent]:
        """The last events of a stream: any held-back text still to show, then the ``ModelResponse``."""
        tail, message = self.finish()
        response = ModelResponse(message=message, usage=usage, finish_reason=finish_reason, model=model)
        return [TextDelta(tail), response] if tail else [response]

    def finish(self) -> tuple[str, Message]:
        """End of the answer: (text still to show, the complete assistant message)."""
        content = valid_text("".join(self._text))  # an engine's JSON may carry a lone surrogate: stored, it would fail
        thinking = valid_text("".join(self._thinking)) or None
        calls = [self._to_tool_call(call) for _, call in sorted(self._calls.items())]
        tail = ""
        if self._filter is not None:
            tail = self._filter.flush()
            if not calls:
                content, calls = recover_tool_calls(content, self.tools)
                tail += _unshown(content, "".join(self._shown) + tail)
        return tail, Message(role="assistant", content=content, tool_calls=calls, thinking=thinking)

    @staticmethod
    def _to_tool_call(call: _PartialCall) -> ToolCall:
        arguments = call.parsed if call.parsed is not None else call.arguments
        return make_tool_call(call.id or new_call_id(), call.name, arguments, None, from_text=False)


def _unshown(content: str, shown: str) -> str:
    """Text of the answer that streaming held back as a possible call and that is not one after all.

    The whole answer decides what the calls are; the stream decided block by
    block and may have hidden text the whole answer keeps. That text is shown
    at the end rather than lost (in place when it was the last thing held).
    """
    if shown == content:
        return ""
    if content.startswith(shown):
        return content[len(shown) :]
    head = _same_start(content, shown)
    rest_content, rest_shown = content[head:], shown[head:]
    missing = rest_content[: len(rest_content) - _same_start(rest_content[::-1], rest_shown[::-1])]
    return f"\n{missing}" if missing.strip() else ""


def _same_start(first: str, second: str) -> int:
    """How many characters ``first`` and ``second`` share at their start."""
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return index
    return min(len(first), len(second))
