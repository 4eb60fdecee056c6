"""Turns waiting for the one engine: in order per thread, bounded across threads.

A local engine answers a few requests at a time (its slots). Requests wait
in arrival order; two on one thread never run together (the second continues
the first's conversation); and no more than ``max_waiting`` wait at all: past
that, :class:`Busy` says how long to wait before trying again (HTTP 429 with
``Retry-After``), estimated from how long recent turns took.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["Busy", "RunQueue"]


class Busy(Exception):
    """Too many requests wait already; try again in ``retry_after`` seconds."""

    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(
            f"The assistant is busy: {waiting} requests are waiting for the engine. Try again in {retry_after} s."
        )
        self.retry_after = retry_after


class Place:
    """A place among the waiting turns, taken by :meth:`RunQueue.reserve`; given up once, by its turn or unused."""

    def __init__(self, queue: RunQueue) -> None:
        self._queue: RunQueue | None = queue

    def give_up(self) -> None:
        """Leave the waiting turns (the turn started, or never will); a second call does nothing."""
        if self._queue is not None:
            self._queue.waiting -= 1
            self._queue = None


class RunQueue:
    """Admits turns to the engine's ``slots``, one at a time per thread, with at most ``max_waiting`` waiting.

    Args:
        slots: turns that may run at once (the engine's parallel slots).
        max_waiting: turns that may wait; one more is refused with :class:`Busy`.
        typical_seconds: what a turn is assumed to take before any has finished (for ``Retry-After``).
    """

    def __init__(self, slots: int = 1, max_waiting: int = 64, *, typical_seconds: float = 20.0) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self.slots = slots
        self.max_waiting = max_waiting
        self.waiting = 0
        self.running = 0
        self._engine = asyncio.Semaphore(slots)
        self._threads: dict[str, tuple[asyncio.Lock, int]] = {}
        self._typical = typical_seconds

    def retry_after(self) -> int:
        """Seconds until a slot is likely free for one more request: the waiting turns' share of the slots."""
        return max(1, min(600, math.ceil(self._typical * (self.waiting + 1) / self.slots)))

    def reserve(self) -> Place:
        """A place among the waiting turns, at once; :class:`Busy` when ``max_waiting`` wait already."""
        if self.waiting >= self.max_waiting:
            raise Busy(self.waiting, self.retry_after())
        self.waiting += 1
        return Place(self)

    @asynccontextmanager
    async def turn(self, thread: str, place: Place | None = None) -> AsyncIterator[None]:
        """Wait for ``thread``'s earlier turns and a free slot, then run the body.

        ``place`` is one :meth:`reserve` gave; without one, a place is reserved now (:class:`Busy` if full).
        """
        place = place or self.reserve()
        lock, users = self._threads.get(thread, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._threads[thread] = (lock, users + 1)
        try:
            async with lock, self._engine:
                place.give_up()
                self.running += 1
                started = asyncio.get_running_loop().time()
                try:
                    yield
                finally:
                    self.running -= 1
                    took = asyncio.get_running_loop().time() - started
                    self._typical = 0.8 * self._typical + 0.2 * took
        finally:
            place.give_up()
            held, count = self._threads[thread]
            if count <= 1:
                del self._threads[thread]
            else:
                self._threads[thread] = (held, count - 1)
