"""Reading what an engine streams: each field of a JSON chunk checked for the type it must have.

An engine's output is untrusted input. A chunk whose ``choices`` is a number, a delta that is a
list, a token count that is text: each becomes a :class:`~cortana.errors.ModelError` that names the
engine and the field (or, for usage, which is only reported, a count of 0), never an
``AttributeError`` from deep in an adapter (property-tested in ``tests/security``).
"""

from __future__ import annotations

import json
from typing import Any

from cortana.errors import ModelError

__all__ = ["MAX_CALLS_IN_ONE_ANSWER", "call_index", "json_items", "json_object", "json_text", "token_count"]

MAX_CALLS_IN_ONE_ANSWER = 64
"""The highest tool-call index a stream may use (one answer with more calls than this is an engine's fault)."""


def json_object(value: object, what: str, where: str) -> dict[str, Any]:
    """``value`` as a JSON object (``None``: an empty one); anything else is the engine's error."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelError(f"{where} sent {what} that is not an object: {json.dumps(value)[:200]}")
    return value


def json_items(value: object, what: str, where: str) -> list[Any]:
    """``value`` as a JSON array (``None``: an empty one); anything else is the engine's error."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ModelError(f"{where} sent {what} that is not a list: {json.dumps(value)[:200]}")
    return value


def json_text(value: object, what: str, where: str) -> str | None:
    """``value`` as text (``None`` stays ``None``); anything else is the engine's error."""
    if value is None or isinstance(value, str):
        return value
    raise ModelError(f"{where} sent {what} that is not text: {json.dumps(value)[:200]}")


def call_index(value: object, where: str) -> int:
    """A streamed tool call's index: a whole number from 0 to ``MAX_CALLS_IN_ONE_ANSWER``."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_CALLS_IN_ONE_ANSWER:
        return value
    raise ModelError(f"{where} sent a tool call index {json.dumps(value)[:50]}, not 0 to {MAX_CALLS_IN_ONE_ANSWER}")


def token_count(value: object) -> int:
    """A token count as reported: a whole number of at least 0, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
