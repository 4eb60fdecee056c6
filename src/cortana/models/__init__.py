"""Engines: one adapter per local engine, all meeting :class:`ModelClient`."""

from cortana.models.base import (
    ModelClient,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
    complete,
    loose_name,
)

__all__ = [
    "ModelClient",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "TextDelta",
    "ThinkingDelta",
    "ToolSpec",
    "complete",
    "loose_name",
]
