"""A user's turn, as every front end takes it: the events :meth:`cortana.Assistant.turn` yields (``events.py``), and
the state that belongs to one turn alone (``cortana.turnstate``, a core module the parts that act for a turn read).

The terminal (interactive and one-shot), ``cortana -p``, ``cortana serve``, ``cortana acp`` and ``cortana
mcp-serve`` each submit a turn to the assistant and only render what comes back, as Codex's front ends submit one
``UserTurn`` and render its events.
"""

from __future__ import annotations

from cortana.turn.events import (
    FixFinished,
    FixFound,
    FixProgress,
    FixStarted,
    ImagesAttached,
    PromptCut,
    TurnEvent,
    TurnFinished,
    TurnHeld,
    TurnResult,
)
from cortana.turnstate import TurnState, in_turn, turn_state

__all__ = [
    "FixFinished",
    "FixFound",
    "FixProgress",
    "FixStarted",
    "ImagesAttached",
    "PromptCut",
    "TurnEvent",
    "TurnFinished",
    "TurnHeld",
    "TurnResult",
    "TurnState",
    "in_turn",
    "turn_state",
]
