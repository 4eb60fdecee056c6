"""``StreamedRun``: one run's events as they happen, then its result, typed by the agent's output type."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Generic, Self, cast

from cortana.agent.events import ModelCallStarted, PartialOutput, RunEvent, RunFinished, TextDelta
from cortana.errors import UserError
from cortana.messages import OutputT, RunResult

__all__ = ["StreamedRun"]

Keep = Callable[[RunResult[Any]], None]
"""Where a run hands its result, before it yields ``RunFinished``."""


class StreamedRun(Generic[OutputT]):
    """What ``Agent[T].run_stream`` returns: iterate it for the run's events, then read ``result``.

    ``async for event in agent.run_stream(...)`` sees every event, the last being ``RunFinished``;
    :meth:`stream_output` sees only the answer as it grows; :meth:`get_result` waits for the end. The run
    starts with the first event asked for, and runs once: iterate one of the three ways.
    """

    __slots__ = ("_events", "_result", "_typed")

    def __init__(self, events: Callable[[Keep], AsyncGenerator[RunEvent, None]], *, typed: bool = False) -> None:
        """``events(keep)`` makes the run's events; the run hands its result to ``keep`` before it yields
        ``RunFinished``. Iterating this iterates those events themselves: nothing stands between the caller and
        the run."""
        self._typed = typed
        self._result: RunResult[OutputT] | None = None
        self._events = events(self._keep)

    def _keep(self, result: RunResult[Any]) -> None:
        self._result = result

    def __aiter__(self) -> AsyncGenerator[RunEvent, None]:
        return self._events

    async def aclose(self) -> None:
        """Stop the run here (a run not yet finished is cancelled, as leaving an ``async for`` early does)."""
        await self._events.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def result(self) -> RunResult[OutputT]:
        """The run's result, once its events are all read.

        Raises:
            UserError: the run has not finished yet.
        """
        if self._result is None:
            raise UserError(
                "The run has not finished: read its events to the end first (or `await stream.get_result()`)."
            )
        return self._result

    async def get_result(self) -> RunResult[OutputT]:
        """Read the rest of the run's events and return its result."""
        async for _ in self:
            pass
        return self.result

    async def stream_output(self) -> AsyncIterator[OutputT]:
        """The answer as it grows, then the final value (``result.output``); each differs from the one before.

        With an ``output_type``: the partial values (:class:`~cortana.agent.events.PartialOutput`) of the call
        held to its schema. Without: the text of the current model call so far (it starts again at each call:
        words a model says before its tool calls are not the answer).
        """
        text = ""
        last: tuple[Any, ...] = ()
        async for event in self:
            value: Any
            if isinstance(event, PartialOutput):
                value = event.value
            elif isinstance(event, TextDelta) and not self._typed:
                if not event.text:
                    continue
                text += event.text
                value = text
            elif isinstance(event, ModelCallStarted):
                text = ""
                continue
            elif isinstance(event, RunFinished):
                value = event.result.output
            else:
                continue
            if not last or last[0] != value:
                last = (value,)
                yield cast(OutputT, value)
