"""The heartbeat: the agent speaks first.

Every ``interval_seconds`` the heartbeat runs one check-in turn whose prompt is
the checklist (``personality/HEARTBEAT.md``, or the shipped one). A reply that
is just ``HEARTBEAT_OK`` is dropped; anything else goes to ``on_message``. After
``idle_checkin_seconds`` without hearing from the user it checks in on its own,
waits three times longer after each check-in nobody answered, and stops at
``max_unanswered`` until :meth:`Heartbeat.user_spoke` is called. Every
``reflect_seconds`` it runs ``reflect`` (review recent conversations into
working memory), silently.

A beat is never run over the user: while ``is_busy()`` is true (a turn running,
input queued, a prompt half-typed, an approval open) it waits, polling every
``retry_seconds``, and runs at the first free moment; a beat still waiting when
the next one falls due is the same beat, not two. Outside ``active_hours``
(local time, ``"08:00-22:00"``, or across midnight ``"22:00-06:00"``) nothing
runs. The user comes first: :meth:`Heartbeat.interrupt` cancels a check-in under
way (the user started a turn) and the beat runs again at the next free moment.
A beat that raises is logged and the next one happens all the same.

Time comes from a :class:`Clock`; :class:`ManualClock` lets tests move it
instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import inspect
import itertools
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Protocol, Self

from cortana.errors import ConfigError, UserError
from cortana.messages import CHECK_IN_NAME
from cortana.prompts import prompt_text

__all__ = [
    "CHECK_IN_NAME",
    "HEARTBEAT_OK",
    "ActiveHours",
    "Beat",
    "Clock",
    "Heartbeat",
    "ManualClock",
    "SystemClock",
    "away_text",
    "is_heartbeat_ok",
]

log = logging.getLogger("cortana.heartbeat")

HEARTBEAT_OK = "HEARTBEAT_OK"
"""What a check-in replies when nothing needs the user: that reply is dropped."""

_OK = re.compile(r"^[\s`*_\"'.!>:-]*heartbeat[ _-]?ok[\s`*_\"'.!]*$", re.IGNORECASE)
_HOURS = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


def is_heartbeat_ok(reply: str) -> bool:
    """Whether a check-in's reply is just ``HEARTBEAT_OK``, as small models write it.

    Spaces, a trailing period or exclamation mark, backticks, bold or quotes around it,
    ``HEARTBEAT OK`` and any case all count; a reply with anything more is a message.
    """
    return bool(_OK.match(reply))


@dataclass(frozen=True, slots=True)
class ActiveHours:
    """A daily window of local time; ``start > end`` crosses midnight (``22:00-06:00``)."""

    start: time
    end: time

    @classmethod
    def parse(cls, text: str, *, key: str = "heartbeat.active_hours") -> ActiveHours:
        """``"HH:MM-HH:MM"``; anything else is a :class:`ConfigError` naming ``key`` and the form."""
        match = _HOURS.match(text) if isinstance(text, str) else None
        hours = [int(part) for part in match.groups()] if match else []
        if not match or hours[0] > 23 or hours[2] > 23 or hours[1] > 59 or hours[3] > 59:
            raise ConfigError(
                f"must be a range of local times like '08:00-22:00' (or '22:00-06:00' across midnight), got {text!r}",
                key=key,
            )
        start, end = time(hours[0], hours[1]), time(hours[2], hours[3])
        if start == end:
            raise ConfigError(f"starts and ends at the same time ({text!r}); use null for any hour", key=key)
        return cls(start, end)

    def contains(self, moment: datetime) -> bool:
        """Whether ``moment`` (local time) is inside the window (its start included, its end not)."""
        now = moment.time().replace(tzinfo=None)
        if self.start < self.end:
            return self.start <= now < self.end
        return now >= self.start or now < self.end

    def next_start(self, moment: datetime) -> datetime:
        """The next time the window opens, after ``moment``."""
        opening = moment.replace(hour=self.start.hour, minute=self.start.minute, second=0, microsecond=0)
        return opening if opening > moment else opening + timedelta(days=1)

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"


def away_text(seconds: float) -> str:
    """How long the user was away, in words: "12 minutes", "3 hours", "2 days" ("a moment" under a minute)."""
    if seconds < 60:
        return "a moment"
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return "a moment"  # not reached


class Clock(Protocol):
    """Where the heartbeat gets the time and waits."""

    def now(self) -> datetime:
        """The local time, timezone-aware."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


class SystemClock:
    """The real clock: local time and ``asyncio.sleep``."""

    def now(self) -> datetime:
        """The local time, timezone-aware."""
        return datetime.now().astimezone()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when told (:meth:`advance`), for tests that must not sleep.

    Args:
        start: the time it starts at (timezone-aware).
    """

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        """The clock's time."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been advanced past ``seconds`` from now."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + timedelta(seconds=max(0.0, seconds)), next(self._order), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move the time on by ``seconds``, waking every sleeper due on the way, in order, and letting each run."""
        target = self._now + timedelta(seconds=seconds)
        await _settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            due, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, due)
            if not future.done():
                future.set_result(None)
            await _settle()
        self._now = target
        await _settle()


async def _settle() -> None:
    """Let woken tasks run until they wait again (a few loop turns; enough for the heartbeat's awaits)."""
    for _ in range(20):
        await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class Beat:
    """One beat that ran.

    Attributes:
        at: when it ran.
        kind: ``"checklist"`` (every interval), ``"idle"`` (the user has been away) or ``"reflect"``.
        reply: what the check-in answered (``""`` when it raised or was interrupted; a reflection's note).
        delivered: whether the reply went to ``on_message`` (not ``HEARTBEAT_OK``, not an error).
        interrupted: the user started a turn while it ran; it runs again at the next free moment.
        failed: it raised (the error is in the log).
    """

    at: datetime
    kind: str
    reply: str
    delivered: bool
    interrupted: bool = False
    failed: bool = False


class Heartbeat:
    """Runs a check-in turn every interval and when the user has been away (see the module docstring).

    Args:
        check_in: ``async (prompt) -> reply text``: one turn of the agent on the user's conversation.
        interval_seconds: time between checklist beats.
        active_hours: the local hours beats may run in (``"08:00-22:00"``); ``None``: any hour.
        is_busy: true while a beat must wait (a turn running, input queued, a prompt half-typed).
        on_message: receives every reply that is not ``HEARTBEAT_OK``.
        checklist: the checklist prompt; default ``prompts/heartbeat.md``.
        idle_checkin_seconds: check in after this long without hearing from the user; ``None``: never.
        max_unanswered: stop speaking first after this many messages nobody answered.
        retry_seconds: how often a beat that is waiting for a free moment looks again.
        last_heard: when the user last spoke (e.g. read from memory); default: the start. An idle
            check-in never falls due within the first interval (or idle wait, if shorter) after the start.
        reflect: ``async () -> note | None``: review recent conversations (into working memory);
            runs every ``reflect_seconds`` at a free moment, at any hour, and says nothing.
        reflect_seconds: time between reflections; ``None``: never.
        last_reflected: when the last reflection ran (e.g. from an earlier session); default:
            none yet, so the first one falls due one interval after the start.
        clock: where time comes from (tests pass a :class:`ManualClock`).
    """

    def __init__(
        self,
        check_in: Callable[[str], Awaitable[str]],
        *,
        interval_seconds: float = 30 * 60,
        active_hours: str | ActiveHours | None = None,
        is_busy: Callable[[], bool] | None = None,
        on_message: Callable[[str], Awaitable[None] | None] | None = None,
        checklist: str | None = None,
        idle_checkin_seconds: float | None = None,
        max_unanswered: int = 2,
        retry_seconds: float = 15.0,
        last_heard: datetime | None = None,
        reflect: Callable[[], Awaitable[str | None]] | None = None,
        reflect_seconds: float | None = None,
        last_reflected: datetime | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not interval_seconds > 0 or not retry_seconds > 0:
            raise UserError(
                f"interval_seconds and retry_seconds must be positive, got {interval_seconds} and {retry_seconds}."
            )
        if idle_checkin_seconds is not None and not idle_checkin_seconds > 0:
            raise UserError(f"idle_checkin_seconds must be positive or None, got {idle_checkin_seconds}.")
        if reflect_seconds is not None and not reflect_seconds > 0:
            raise UserError(f"reflect_seconds must be positive or None, got {reflect_seconds}.")
        if max_unanswered < 1:
            raise UserError(f"max_unanswered must be at least 1, got {max_unanswered}.")
        self.check_in = check_in
        self.interval = timedelta(seconds=interval_seconds)
        self.active_hours = ActiveHours.parse(active_hours) if isinstance(active_hours, str) else active_hours
        self.is_busy = is_busy or (lambda: False)
        self.on_message = on_message
        self.checklist = checklist if checklist is not None else prompt_text("heartbeat")
        self.idle = timedelta(seconds=idle_checkin_seconds) if idle_checkin_seconds else None
        self.max_unanswered = max_unanswered
        self.retry = timedelta(seconds=retry_seconds)
        self.clock: Clock = clock or SystemClock()
        now = self.clock.now()
        self.last_heard = last_heard or now
        self.next_beat = now + self.interval
        self.reflect = reflect
        self.reflect_every = timedelta(seconds=reflect_seconds) if reflect_seconds and reflect else None
        self.last_reflected = last_reflected
        self.next_reflection: datetime | None = None
        """When the next reflection falls due; ``None`` without ``reflect``."""
        if self.reflect_every is not None:
            self.next_reflection = (last_reflected + self.reflect_every) if last_reflected else now + self.interval
        self.unanswered = 0
        self.history: list[Beat] = []
        """The beats that ran, oldest first (bounded to the last 100)."""
        self._last_checkin: datetime | None = None
        # Not in the first interval: whoever just started the heartbeat is there, however long ago
        # the user last wrote (the per-turn time line says how long they were away).
        self._idle_not_before: datetime | None = now + min(self.interval, self.idle) if self.idle else None
        self._task: asyncio.Task[None] | None = None
        self._current: asyncio.Future[str | None] | None = None
        self._wake = asyncio.Event()

    # -- control ----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start beating in the background (a second call does nothing)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="heartbeat")

    async def stop(self) -> None:
        """Stop beating; a check-in turn under way is cancelled."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def aclose(self) -> None:
        """The same as :meth:`stop`."""
        await self.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        """Whether the heartbeat is started."""
        return self._task is not None and not self._task.done()

    @property
    def checking_in(self) -> bool:
        """Whether a check-in (or a reflection) is running now."""
        return self._current is not None and not self._current.done()

    def interrupt(self) -> bool:
        """Cancel the check-in or reflection under way, if any: the user comes first.

        The beat is not lost: it runs again at the next free moment. Returns whether one was running.
        """
        if not self.checking_in:
            return False
        assert self._current is not None
        self._current.cancel()
        return True

    def user_spoke(self, at: datetime | None = None) -> None:
        """The user said something: the unanswered count starts again, and so does the idle wait."""
        self.last_heard = at or self.clock.now()
        self.unanswered = 0
        self._last_checkin = None
        self._idle_not_before = None
        self._wake.set()  # the schedule changed: the loop looks again now

    # -- schedule ---------------------------------------------------------------------------------

    def next_idle_checkin(self) -> datetime | None:
        """When the next idle check-in falls due: ``idle`` after the user spoke, then 3x longer each time."""
        if self.idle is None or self.unanswered >= self.max_unanswered:
            return None
        if self._last_checkin is None:
            due = self.last_heard + self.idle
        else:
            due = self._last_checkin + self.idle * (3**self.unanswered)
        return max(due, self._idle_not_before) if self._idle_not_before else due

    def next_beat_due(self) -> tuple[datetime, str] | None:
        """The next beat that may speak: when (inside the active hours: a beat due outside them waits for them to
        open), and which kind; ``None`` while max_unanswered is reached."""
        if self.unanswered >= self.max_unanswered:
            return None
        due = [(self.next_beat, "checklist")]
        idle = self.next_idle_checkin()
        if idle is not None:
            due.append((idle, "idle"))
        when, kind = min(due, key=lambda item: item[0])
        if self.active_hours is not None and not self.active_hours.contains(when):
            when = self.active_hours.next_start(when)
        return when, kind

    def next_due(self) -> tuple[datetime, str] | None:
        """The next thing to run (a beat, or a reflection): when, and which kind; ``None`` for nothing."""
        due = [item for item in (self.next_beat_due(),) if item is not None]
        if self.next_reflection is not None:
            due.append((self.next_reflection, "reflect"))
        return min(due, key=lambda item: item[0]) if due else None

    def status(self) -> str:
        """One line for people: the next beat, the active hours, the unanswered count, the next reflection."""
        due = self.next_beat_due()
        when = f"next {due[1]} beat at {_when(due[0], self.clock.now())}" if due else "quiet until you speak"
        hours = f"active {self.active_hours}" if self.active_hours else "any hour"
        line = f"{when}; {hours}; {self.unanswered}/{self.max_unanswered} unanswered"
        if self.next_reflection is not None:
            line += f"; next reflection {_when(self.next_reflection, self.clock.now())}"
        return line

    # -- the loop ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            due = self.next_due()
            if due is None:
                await self._nap(self.interval.total_seconds())  # quiet until the user speaks
                continue
            when, kind = due
            now = self.clock.now()
            if when > now:
                await self._nap((when - now).total_seconds())
                continue  # the schedule may have changed while asleep (the user spoke)
            if kind != "reflect" and self.active_hours and not self.active_hours.contains(now):
                self._defer(kind, self.active_hours.next_start(now))
                continue  # the schedule now says when: a reflection due meanwhile still runs
            if self.is_busy():
                await self.clock.sleep(self.retry.total_seconds())  # the same beat, at the next free moment
                continue
            await self._beat(kind)

    async def _nap(self, seconds: float) -> None:
        """Sleep ``seconds`` on the clock, or until :meth:`user_spoke` changes the schedule."""
        self._wake.clear()
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    def _defer(self, kind: str, until: datetime) -> None:
        """Move a beat that fell due outside the active hours to when they open."""
        if kind == "checklist":
            self.next_beat = until
        else:
            self._idle_not_before = until

    async def _beat(self, kind: str) -> None:
        started = self.clock.now()
        saved = (self.next_beat, self._last_checkin, self._idle_not_before, self.next_reflection)
        if kind == "reflect":
            assert self.reflect is not None and self.reflect_every is not None
            self.next_reflection = started + self.reflect_every
            work: Awaitable[str | None] = self.reflect()
        elif kind == "checklist":
            self.next_beat = started + self.interval
            work = self.check_in(self.checklist)
        else:
            self._last_checkin, self._idle_not_before = started, None
            away = away_text((started - self.last_heard).total_seconds())
            work = self.check_in(prompt_text("heartbeat_idle").format(away=away))
        self._current = asyncio.ensure_future(work)
        try:
            reply = ((await self._current) or "").strip()
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the heartbeat is stopping
            # interrupt(): the user started a turn. The same beat runs at the next free moment.
            self.next_beat, self._last_checkin, self._idle_not_before, self.next_reflection = saved
            self._record(Beat(started, kind, "", delivered=False, interrupted=True))
            return
        except Exception:
            log.exception(
                "the heartbeat's %s failed; the next beat goes on", "reflection" if kind == "reflect" else "check-in"
            )
            self._record(Beat(started, kind, "", delivered=False, failed=True))
            return
        finally:
            self._current = None
        if kind == "reflect":
            self.last_reflected = started
            self._record(Beat(started, kind, reply, delivered=False))
            return
        if is_heartbeat_ok(reply) or not reply:
            self._record(Beat(started, kind, reply, delivered=False))
            return
        self.unanswered += 1
        self._record(Beat(started, kind, reply, delivered=True))
        if self.on_message is not None:
            try:
                shown = self.on_message(reply)
                if inspect.isawaitable(shown):
                    await shown
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("on_message failed for a check-in")

    def _record(self, beat: Beat) -> None:
        self.history.append(beat)
        del self.history[:-100]


def _when(moment: datetime, now: datetime) -> str:
    """``14:30`` today, else ``Wed 14:30`` within a week, else the date."""
    if moment.date() == now.date():
        return f"{moment:%H:%M}"
    if abs((moment - now).days) < 6:
        return f"{moment:%a %H:%M}"
    return f"{moment:%Y-%m-%d %H:%M}"
