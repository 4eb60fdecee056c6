"""Engines: one adapter per local engine, all meeting :class:`ModelClient`."""

from cortana.models.base import (
    BaseModelClient,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
    complete,
)

__all__ = [
    "BaseModelClient",
    "ModelClient",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "TextDelta",
    "ThinkingDelta",
    "ToolSpec",
    "complete",
]
