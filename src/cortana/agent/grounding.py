"""Is a tool call the model wrote as text grounded in the conversation?

Measured on Qwen2.5-Coder 1.5B: for 6 of 12 questions that no offered tool
fits ("What is the capital of Japan?") the model writes a plausible call
anyway (``get_weather(city="Tokyo")``), and a system-prompt instruction
barely changes that (5 of 12). Such calls share a sign: their free-text arguments come from
nowhere in the conversation. A call is grounded when at least one of its
free-text arguments (not enum values, not numbers or expressions, not
abbreviations of three letters or fewer) appears in the conversation, or
when it has no such argument at all. In the recorded set
(tests/fixtures/toolcalls, scored by bench/toolcalls.py) the check keeps all
24 right calls of the 1.5B model and stops 5 of its 6 false ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from cortana.messages import Message, ToolCall
from cortana.tools import Tool

__all__ = ["conversation_evidence", "is_grounded"]

_TOKEN = re.compile(r"[a-z0-9@._/\-]+")


def _normalize(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


def conversation_evidence(messages: Iterable[Message]) -> str:
    """The text a grounded call may draw on: what the user said, tool results, and the model's own prose."""
    return _normalize("\n".join(m.content for m in messages if m.role != "system"))


def is_grounded(call: ToolCall, tool: Tool, evidence: str) -> bool:
    """Whether ``call`` has a free-text argument found in ``evidence`` (or no free-text argument)."""
    properties = tool.parameters.get("properties", {})
    values = [
        value
        for name, value in _strings(call.arguments)
        if "enum" not in properties.get(name, {}) and re.search(r"[A-Za-z]{4,}", value)
    ]
    if not values:
        return True
    for value in values:
        normalized = _normalize(value)
        if normalized and normalized in evidence:
            return True
        words = [word for word in normalized.split() if len(word) >= 3]
        if words and sum(word in evidence for word in words) / len(words) >= 0.5:
            return True
    return False


def _strings(arguments: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, str]]:
    for name, value in arguments.items():
        if isinstance(value, str):
            yield prefix or name, value
        elif isinstance(value, dict):
            yield from _strings(value, prefix or name)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    yield prefix or name, item
