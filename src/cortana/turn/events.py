"""The events of a user's turn, as :meth:`cortana.Assistant.turn` yields them; front ends render them.

A turn that goes to the agent yields the agent's own events (``cortana.agent.events``: text as it comes, tool calls
and their results, each model call); one that goes to the fix workflow yields :class:`FixStarted`, its
:class:`FixProgress` steps, :class:`FixFound` (before a found fix is written: the terminal shows its diff then) and
:class:`FixFinished`. Either may start with :class:`ImagesAttached`; the agent's run starts with
:class:`~cortana.agent.events.PromptCut` when the message was cut to the window. A turn a ``user_prompt`` hook keeps
back yields :class:`TurnHeld`. Every turn ends with one :class:`TurnFinished`, whose :class:`TurnResult` is the same
shape for both routes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from cortana.agent.events import PromptCut, RunEvent
from cortana.messages import Image, Message, RunMetrics, RunResult, ThreadRef

if TYPE_CHECKING:
    from cortana.repair.run import FixOutcome, Progress, RepairResult

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
    "fix_run_result",
]

Route = Literal["agent", "fix", "held"]


@dataclass(frozen=True, slots=True)
class ImagesAttached:
    """Images the typed message pointed at (``@shot.png``, a pasted path) go with it (``cortana.turn.attach``).

    Attributes:
        images: the images attached.
        left: pasted paths that were not, each with why.
    """

    images: tuple[Image, ...]
    left: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """What every front end tells the user (one wording)."""
        lines = [f"attached {image.describe()}" for image in self.images]
        return "\n".join([*lines, *self.left])


@dataclass(frozen=True, slots=True)
class TurnHeld:
    """A ``user_prompt`` hook kept the message back: it never reached the model. ``reason`` is the hook's."""

    reason: str

    @property
    def message(self) -> str:
        """What every front end tells the user (one wording)."""
        return f"Not sent: a user_prompt hook kept it back: {self.reason}"


@dataclass(frozen=True, slots=True)
class FixStarted:
    """The turn goes through the fix workflow: the tests judge the change (``plan``: plan mode, the plan only)."""

    request: str
    plan: bool = False


@dataclass(frozen=True, slots=True)
class FixProgress:
    """One step of the fix (the terminal's dim ``fix 12s: …`` lines)."""

    progress: Progress


@dataclass(frozen=True, slots=True)
class FixFound:
    """A fix passed the tests and is about to be written (through the gate): its diff can be shown first."""

    result: RepairResult


@dataclass(frozen=True, slots=True)
class FixFinished:
    """The fix ended: what it found, what was written, and the answer."""

    outcome: FixOutcome


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended, the same for both routes.

    Attributes:
        thread: the conversation.
        route: ``agent`` (the tool loop), ``fix`` (the fix workflow) or ``held`` (a hook kept the message back).
        answer: what the user was told.
        run: the run's result (for a fix, one made of its answer and its model use); None when held.
        fix: the fix's outcome, when it went through the workflow.
        held: why a hook kept the message back.
    """

    thread: ThreadRef
    route: Route
    answer: str
    run: RunResult | None = None
    fix: FixOutcome | None = None
    held: str | None = None

    @property
    def complete(self) -> bool:
        """The turn did what was asked: an answer, or a fix found and written whole (or nothing to fix)."""
        if self.route == "held":
            return False
        return self.fix.complete if self.fix is not None else True


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """The turn's last event."""

    result: TurnResult


TurnEvent: TypeAlias = (
    RunEvent | ImagesAttached | TurnHeld | FixStarted | FixProgress | FixFound | FixFinished | TurnFinished
)
"""What :meth:`cortana.Assistant.turn` yields."""


def fix_run_result(outcome: FixOutcome, thread: ThreadRef, prompt: str, started: float) -> RunResult:
    """A fix as a run's result (what a caller of either route reads): its answer, the request and the answer as the
    turn's new messages, and its model use (``started``: ``time.perf_counter()`` when it began)."""
    result = outcome.result
    metrics = RunMetrics(
        elapsed=time.perf_counter() - started,
        model_calls=result.model_calls,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )
    messages = [Message.user(prompt), Message.assistant(outcome.answer)]
    return RunResult(output=outcome.answer, new_messages=messages, metrics=metrics, thread=thread, prompt=prompt)
