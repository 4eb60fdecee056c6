"""Assembles one streamed answer into our ``Message``, whatever engine sent it.

Adapters feed it text, thinking and tool-call pieces as they arrive; it holds
back text that may be a tool call written as text, assembles tool calls from
deltas (tolerating servers that repeat the id and name in every chunk), and at
the end recovers text-written calls so every engine returns the same shape.

Reasoning a server leaves in the text is told apart from the answer: an answer
that opens with ``<think>`` is thinking until ``</think>`` (a llama-server run
with ``--reasoning-format none``, LM Studio or vLLM without a reasoning parser,
an Ollama model imported without its thinking template), and so is the text
before a lone ``</think>`` whose opening tag the chat template wrote into the
prompt (DeepSeek-R1's distills, QwQ): that one is only known at the end, so it
streams as text, but the stored answer and its tool calls leave it out. A call
drafted while thinking is never run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cortana.display import valid_text
from cortana.errors import StreamInterrupted
from cortana.messages import Message, StopReason, ToolCall, Usage
from cortana.models.base import ModelEvent, ModelResponse, TextDelta, ThinkingDelta, ToolSpec
from cortana.models.toolparse import TextToolCallFilter, make_tool_call, new_call_id, recover_tool_calls

__all__ = ["AnswerBuilder"]

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_LONE_CLOSE = re.compile(r"(?:\A|\n)[ \t]*</think>[ \t]*(?:\n|\Z)")
"""A closing tag on a line of its own, as a model whose thinking the prompt opened ends it (not one in a
sentence or a piece of code)."""


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
    _split: _ThinkSplit = field(default_factory=lambda: _ThinkSplit())

    def __post_init__(self) -> None:
        self._filter = TextToolCallFilter(self.tools) if self.recover_text_calls and self.tools else None

    @property
    def text_so_far(self) -> str:
        """Everything received as text (for error messages about a broken stream)."""
        return "".join(self._text)

    def add_text(self, delta: str) -> list[TextDelta | ThinkingDelta]:
        """Add text as the engine sent it; returns the events to show now (none while text is held back: a possible
        tool call, or the start of a ``<think>`` tag)."""
        events: list[TextDelta | ThinkingDelta] = []
        for reasoning, piece in self._split.feed(delta):
            event = self.add_thinking(piece) if reasoning else self._add_answer(piece)
            if event is not None:
                events.append(event)
        return events

    def _add_answer(self, delta: str) -> TextDelta | None:
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
        """The last events of a stream: any held-back thinking or text still to show, then the ``ModelResponse``."""
        events: list[ModelEvent] = []
        tail, message = self.finish(events)
        response = ModelResponse(message=message, usage=usage, finish_reason=finish_reason, model=model)
        return [*events, TextDelta(tail), response] if tail else [*events, response]

    def finish(self, events: list[ModelEvent] | None = None) -> tuple[str, Message]:
        """End of the answer: (text still to show, the complete assistant message). Thinking still held (a stream
        cut inside ``<think>``) goes to ``events``."""
        tail = ""
        for reasoning, piece in self._split.flush():
            if reasoning:
                held = self.add_thinking(piece)
                if events is not None:
                    events.append(held)
            elif shown := self._add_answer(piece):
                tail += shown.text
        content = "".join(self._text)
        lone = None if self._split.opened else _LONE_CLOSE.search(content)
        if lone is not None and THINK_OPEN not in content[: lone.start()]:
            self._thinking.append(content[: lone.start()])  # the template opened the thinking in the prompt
            content = content[lone.end() :].lstrip()
        content = valid_text(content)  # an engine's JSON may carry a lone surrogate: stored, it would fail
        thinking = valid_text("".join(self._thinking)) or None
        calls = [self._to_tool_call(call) for _, call in sorted(self._calls.items())]
        if self._filter is not None:
            tail += self._filter.flush()
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


@dataclass
class _ThinkSplit:
    """Tells reasoning left in the text apart from the answer as it streams: an answer that opens with
    ``<think>`` (after blank space) is thinking until ``</think>``; anything else is answer from its first
    character. Text that may still be the start of a tag is held back."""

    state: Literal["start", "think", "text"] = "start"
    held: str = ""
    opened: bool = False
    """Whether the answer opened with ``<think>``."""
    trim: bool = False
    """Blank space after ``</think>`` is dropped (the answer starts at its first word)."""

    def feed(self, delta: str) -> list[tuple[bool, str]]:
        """``delta`` as (is thinking, text) pieces to take now."""
        if self.state == "text":
            if self.trim:
                delta = delta.lstrip()
                self.trim = not delta
            return [(False, delta)] if delta else []
        self.held += delta
        if self.state == "start":
            start = self.held.lstrip()
            if not start or (len(start) < len(THINK_OPEN) and THINK_OPEN.startswith(start)):
                return []  # blank so far, or the tag's first characters: wait
            if not start.startswith(THINK_OPEN):
                self.state, text, self.held = "text", self.held, ""
                return [(False, text)]
            self.state, self.opened, self.held = "think", True, start[len(THINK_OPEN) :]
        end = self.held.find(THINK_CLOSE)
        if end >= 0:
            thinking, rest = self.held[:end], self.held[end + len(THINK_CLOSE) :]
            self.state, self.held, self.trim = "text", "", True
            return [(True, thinking), *self.feed(rest)] if thinking else self.feed(rest)
        keep = _tag_start(self.held, THINK_CLOSE)
        thinking, self.held = self.held[: len(self.held) - keep], self.held[len(self.held) - keep :]
        return [(True, thinking)] if thinking else []

    def flush(self) -> list[tuple[bool, str]]:
        """What is still held at the end of the answer: thinking cut before its end, or text that began like a
        tag and was not one."""
        held, self.held = self.held, ""
        if not held:
            return []
        return [(self.state == "think", held)]


def _tag_start(text: str, tag: str) -> int:
    """How many of ``text``'s last characters are the start of ``tag`` (held back: the tag may follow)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0
