"""How the terminal shows an engine (one line: name, model, window)."""

from __future__ import annotations

from cortana.display import printable
from cortana.models.base import ModelClient

__all__ = ["describe_client"]


def describe_client(client: ModelClient) -> str:
    """``engine: model, N tokens`` (the window only when the engine reports one)."""
    window = f", {client.context_window:,} tokens" if client.context_window else ""
    return printable(f"{client.engine}: {client.model}{window}")
