"""The text the model reads for a tool's return value."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic import BaseModel

__all__ = ["format_tool_result"]


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
