"""Is a tool call the model wrote as text grounded in the conversation?

Small models "call" a tool for questions no offered tool answers, when one
looks close: ``music_set_volume(level=50)`` for "how loud is my music?",
``shop_get_order_status(order_id="A-1001")`` for "how many loyalty points do I
have?". Such calls share a sign: their arguments come from nowhere in the
conversation. A call is **grounded** when it has no argument that can be
checked, or when at least one of them appears in what the user said or a tool
returned (the model's own prose does not count: it would vouch for itself).

Checked arguments:

- **text** with four letters in a row: it appears (normalized), or at least
  half of its words of three letters or more do (a plural ``s`` folded;
  ``Europe/London`` is two words);
- **numbers**: the conversation holds the number, as digits (``1,000``), as a
  percentage or its hundredth (``5%``: 5 or 0.05), in words ("fifteen",
  "one hundred and fifty", "twice", "a dozen"), or as "half"/"halfway" (0.5
  or 50); 0 and 1 always count (off, a single one).

Keys that are not parameters of the tool are not looked at.

Not checked: enum values, booleans, a parameter's declared default, and short
capitalised codes (``AAPL``, ``EUR``, ``BRK.B``) that a model may rightly
derive from a name.

How the rule was chosen: on the development half of ``bench/toolcall_set``
(Qwen2.5-Coder 0.5B and 1.5B, calls recovered from text), against the earlier
rule (free text only, the model's prose counted). On the held-out half it
stops more false calls than the earlier rule (1.5B: 17 of 34 no-fit questions
still get a call, against 20) and drops a few more right ones;
``docs/engines.md`` has both halves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cortana.messages import Message, ToolCall
from cortana.prompts import strip_turn_context
from cortana.tools import Tool

__all__ = ["Evidence", "conversation_evidence", "is_fully_grounded", "is_grounded", "is_grounded_addition"]

_TOKEN = re.compile(r"[a-z0-9@._/\-]+")
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
_NUMBER_WORDS = {
    **dict(zip(("zero", "one", "two", "three", "four", "five"), (0.0, 1.0, 2.0, 3.0, 4.0, 5.0), strict=True)),
    **dict(zip(("six", "seven", "eight", "nine", "ten"), (6.0, 7.0, 8.0, 9.0, 10.0), strict=True)),
    **{"eleven": 11.0, "twelve": 12.0, "thirteen": 13.0, "fourteen": 14.0, "fifteen": 15.0, "sixteen": 16.0},
    **{"seventeen": 17.0, "eighteen": 18.0, "nineteen": 19.0, "twenty": 20.0, "thirty": 30.0, "forty": 40.0},
    **{"fifty": 50.0, "sixty": 60.0, "seventy": 70.0, "eighty": 80.0, "ninety": 90.0, "hundred": 100.0},
    **{"thousand": 1000.0, "dozen": 12.0, "once": 1.0, "twice": 2.0},
}
_ALWAYS = frozenset({0.0, 1.0})
_SEVERAL = re.compile(r"\b(?:and|plus|also|as well|both)\b|[;&]|\n\s*(?:[-*\u2022]|\d+[.)])", re.IGNORECASE)
"""A message asking for several things joins them ("..., and lock the front door") or lists them."""
_CODE = re.compile(r"^[A-Z0-9]{2,5}(?:[./:-][A-Z0-9]{1,5})?$")
"""A short code a model may rightly derive from a name: a ticker (AAPL), a currency (EUR), an airport (LIS)."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the user said and tools returned: its words, the same with plurals folded, and its numbers;
    and the user's latest message (``request``), as typed (without the turn's ``<context>`` block)."""

    text: str
    stems: str
    numbers: frozenset[float]
    request: str = ""


def _normalize(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


def _stem(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def conversation_evidence(messages: Iterable[Message]) -> Evidence:
    """The evidence a grounded call may draw on: user messages and tool results (not the model's own text)."""
    messages = list(messages)
    raw = "\n".join(m.content for m in messages if m.role in ("user", "tool"))
    text = _normalize(raw)
    request = next((strip_turn_context(m.content) for m in reversed(messages) if m.role == "user"), "")
    return Evidence(text, " ".join(_stem(word) for word in text.split()), _numbers(raw) | _ALWAYS, request)


def _numbers(text: str) -> frozenset[float]:
    """The numbers ``text`` holds, as digits, percentages and words."""
    found: set[float] = set()
    for match in _NUMBER.finditer(text):
        try:
            value = float(match.group(0).replace(",", ""))
        except ValueError:
            continue
        found.update((value, abs(value)))
        after = text[match.end() : match.end() + 9].lstrip().lower()
        if after.startswith(("%", "percent")):
            found.add(value / 100)
    total = current = 0.0
    counting = False
    for word in [*re.findall(r"[a-z]+", text.lower()), ""]:  # "" ends the last run of number words
        spelled = _NUMBER_WORDS.get(word)
        if spelled is not None:
            found.add(spelled)
            if spelled == 1000:
                total, current = total + max(current, 1) * 1000, 0.0
            elif spelled == 100:
                current = max(current, 1) * 100
            else:
                current += spelled
            counting = True
        elif counting and word != "and":  # "one hundred and fifty" is one number
            found.add(total + current)
            total = current = 0.0
            counting = False
        if word in ("half", "halfway"):
            found.update((0.5, 50.0))
    return frozenset(found)


def is_grounded(call: ToolCall, tool: Tool, evidence: Evidence) -> bool:
    """Whether ``call`` has no checkable argument, or one that the conversation holds (module docstring)."""
    properties = tool.parameters.get("properties", {})
    checks = [
        grounded
        for name, value in _leaves(call.arguments)
        if name in properties  # keys the tool does not have are the model's noise, not evidence either way
        and (grounded := _check(value, properties[name], evidence)) is not None
    ]
    return not checks or any(checks)


def is_fully_grounded(call: ToolCall, tool: Tool, evidence: Evidence) -> bool:
    """Whether the conversation holds every checkable argument of ``call`` (true when none is checkable).

    Stricter than :func:`is_grounded`, which wants one: for calls a model adds after the one it
    set out to make, where an argument copied from the question (a city) must not carry invented
    ones (an amount, a place). Enum values, booleans, defaults and short codes are not checked,
    as there: "lock the front and back doors" adds ``lock(door="back")`` with nothing to check.
    """
    properties = tool.parameters.get("properties", {})
    checks = [
        grounded
        for name, value in _leaves(call.arguments)
        if name in properties and (grounded := _check(value, properties[name], evidence)) is not None
    ]
    return all(checks)


def is_grounded_addition(
    call: ToolCall, tool: Tool, evidence: Evidence, earlier: Sequence[tuple[ToolCall, Tool]]
) -> bool:
    """Whether a call the model added after ``earlier`` ones (in the same answer) should run.

    Every checkable argument must be grounded (:func:`is_fully_grounded`). Another call of a
    tool already called ("lock the front and back doors") then runs. A call of a tool the
    answer has not called yet runs only when the user's latest message asks for several things
    (joined by "and", "plus", "also", "both", ";" or "&", or listed line by line: not "then",
    which names a later step that needs the first one's result), and it brings a checked
    value of its own (or has nothing checkable, ``task_list(status="open")``): small models
    spray the question's inputs over every offered tool (the median of a list, then its
    standard deviation; a stock quote, then the same symbol's news and profile). 0 and 1 pass
    every check, so they are a value of its own only when the message says them. Chosen on
    the development half of ``bench/toolcall_set``.
    """
    if not is_fully_grounded(call, tool, evidence):
        return False
    if call.name in {previous.name for previous, _ in earlier}:
        return True
    if not _SEVERAL.search(evidence.request):
        return False
    properties = tool.parameters.get("properties", {})
    checked = [
        value
        for name, value in _leaves(call.arguments)
        if name in properties and _check(value, properties[name], evidence) is not None
    ]
    if not checked:
        return True
    used = {
        _normalize(str(value))
        for previous, previous_tool in earlier
        for name, value in _leaves(previous.arguments)
        if name in previous_tool.parameters.get("properties", {})
    }
    said = _numbers(evidence.request)  # 0 and 1 always pass the check: they are its own only when said
    own = [value for value in checked if not (isinstance(value, (int, float)) and value in _ALWAYS - said)]
    return any(_normalize(str(value)) not in used for value in own)


def _check(value: Any, schema: Any, evidence: Evidence) -> bool | None:
    """True/False for a checkable value, None for one that is not checked."""
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(value, bool) or "enum" in schema or ("default" in schema and value == schema["default"]):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
        return any(abs(number - known) <= 1e-9 + 1e-6 * abs(known) for known in evidence.numbers)
    if isinstance(value, str) and re.search(r"[A-Za-z]{4,}", value) and not _CODE.match(value):
        normalized = _normalize(value)
        if normalized and normalized in evidence.text:
            return True
        words = [_stem(word) for word in re.findall(r"[a-z0-9]+", normalized) if len(word) >= 3]
        return bool(words) and sum(word in evidence.stems for word in words) / len(words) >= 0.5
    return None


def _leaves(arguments: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(top-level parameter name, value) for every scalar in the arguments, lists and objects opened."""
    for name, value in arguments.items():
        key = prefix or name
        if isinstance(value, dict):
            yield from _leaves(value, key)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield from _leaves(item, key)
                else:
                    yield key, item
        else:
            yield key, value
