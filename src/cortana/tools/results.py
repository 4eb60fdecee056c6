"""The text the model reads for a tool's return value."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic import BaseModel

__all__ = ["bound_output", "format_tool_result"]


def format_tool_result(value: Any) -> str:
    """The text the model reads for a tool's return value: strings as they are, models and data as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError):
        return str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def bound_output(text: str, limit: int) -> str:
    """``text``, or its head and tail within ``limit`` characters and a note of how much was left out.

    Applied to every tool result before it reaches the prompt or memory: a tool
    that returns 50 MB must not become a 50 MB prompt.
    """
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[len(text) - limit // 4 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail):,} of {len(text):,} characters left out ...]\n{tail}"
