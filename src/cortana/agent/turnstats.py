"""``TurnStats``: where a turn's time went, from the user's Enter to the answer's last token.

Feed it the events of ``Agent.run_stream`` (or give it to ``Agent(logger=...)``
beside a logger); it notes when the first token arrived and, per model call,
how long the engine took to start answering, how many prompt tokens it had to
read again and how many it reused from its cache, and how fast it generated.
On a laptop CPU the first of those is what users feel: a prompt whose prefix
changed is read again in full, and that shows here as re-read tokens and a
late first token. The terminal prints it with ``cortana --verbose`` and
``/stats``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cortana.agent.events import (
    ModelCallFinished,
    ModelCallStarted,
    RunEvent,
    RunFinished,
    TextDelta,
    ThinkingDelta,
)

__all__ = ["CallStats", "TurnStats"]


@dataclass(frozen=True)
class CallStats:
    """One model call of a turn.

    Attributes:
        duration: seconds from the request to the last token.
        first_token: seconds from the request to the first streamed token (None: nothing streamed,
            e.g. a tool call only); mostly the engine reading the prompt.
        prompt_tokens: tokens in the prompt, cached ones included.
        cached_tokens: prompt tokens the engine reused from its cache.
        completion_tokens: tokens generated.
    """

    duration: float
    first_token: float | None
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int

    @property
    def reread_tokens(self) -> int:
        """Prompt tokens the engine had to read (not in its cache)."""
        return max(self.prompt_tokens - self.cached_tokens, 0)

    @property
    def generation_rate(self) -> float | None:
        """Tokens generated per second after the first one (None when too little to say)."""
        generating = self.duration - (self.first_token or 0.0)
        if self.completion_tokens < 2 or generating <= 0:
            return None
        return (self.completion_tokens - 1) / generating


class TurnStats:
    """Timings and token counts of one turn, collected from its events.

    Args:
        started: ``time.perf_counter()`` when the user sent the message (default: now).
    """

    def __init__(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.calls: list[CallStats] = []
        self._call_started: float | None = None
        self._call_first: float | None = None

    def handle(self, event: RunEvent) -> None:
        """Note one event (an ``EventHandler``, so it can sit beside a logger)."""
        now = time.perf_counter()
        if isinstance(event, ModelCallStarted):
            self._call_started, self._call_first = now, None
        elif isinstance(event, TextDelta | ThinkingDelta) and event.text:
            if self.first_token_at is None:
                self.first_token_at = now
            if self._call_first is None:
                self._call_first = now
        elif isinstance(event, ModelCallFinished):
            usage = event.response.usage
            begun = self._call_started if self._call_started is not None else now - event.duration
            self.calls.append(
                CallStats(
                    duration=event.duration,
                    first_token=None if self._call_first is None else self._call_first - begun,
                    prompt_tokens=usage.prompt_tokens,
                    cached_tokens=usage.cached_tokens,
                    completion_tokens=usage.completion_tokens,
                )
            )
            self._call_started = self._call_first = None
        elif isinstance(event, RunFinished):
            self.finished_at = now

    @property
    def first_token(self) -> float | None:
        """Seconds from the user's message to the first streamed token (None: none yet)."""
        return None if self.first_token_at is None else self.first_token_at - self.started

    @property
    def total(self) -> float:
        """Seconds from the user's message to the end of the turn (so far, while it runs)."""
        return (self.finished_at if self.finished_at is not None else time.perf_counter()) - self.started

    def summary(self) -> str:
        """One line: first token, total time, model calls, prompt tokens re-read and cached, generation speed."""
        parts = [f"first token {self.first_token:.1f}s" if self.first_token is not None else "no text streamed"]
        parts.append(f"{self.total:.1f}s in all")
        calls = len(self.calls)
        parts.append(f"{calls} model call{'' if calls == 1 else 's'}")
        prompt = sum(call.prompt_tokens for call in self.calls)
        if prompt:
            reread = sum(call.reread_tokens for call in self.calls)
            parts.append(f"prompt {prompt:,} tokens ({reread:,} read, {prompt - reread:,} from cache)")
        generated = sum(call.completion_tokens for call in self.calls)
        rates = [rate for call in self.calls if (rate := call.generation_rate) is not None]
        speed = f" at {sum(rates) / len(rates):.1f} tokens/s" if rates else ""
        parts.append(f"{generated:,} generated{speed}")
        return " · ".join(parts)

    def lines(self) -> list[str]:
        """The summary, then a line per model call."""
        rows = [self.summary()]
        for number, call in enumerate(self.calls, 1):
            first = f"first token after {call.first_token:.1f}s, " if call.first_token is not None else ""
            rate = f" at {call.generation_rate:.1f} tokens/s" if call.generation_rate is not None else ""
            rows.append(
                f"  call {number}: {call.duration:.1f}s ({first}prompt {call.prompt_tokens:,}: "
                f"{call.reread_tokens:,} read, {call.cached_tokens:,} from cache; "
                f"{call.completion_tokens:,} generated{rate})"
            )
        return rows
