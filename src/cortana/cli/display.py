"""How the terminal shows an engine (one line: name, model, window), and what it sends it of a long message."""

from __future__ import annotations

from cortana.agent.fitting import fit_prompt
from cortana.display import printable
from cortana.models.base import ModelClient

__all__ = ["describe_client", "fit_prompt"]


def describe_client(client: ModelClient) -> str:
    """``engine: model, N tokens`` (the window only when the engine reports one)."""
    window = f", {client.context_window:,} tokens" if client.context_window else ""
    return printable(f"{client.engine}: {client.model}{window}")
