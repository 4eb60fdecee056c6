"""What is due soon: the times in the user's notes, worked out against the local time.

Small models cannot do clock arithmetic: shown "Take the pizza out at 18:30"
and "Local time: 18:25", the 1.5B model wrote both down and still answered
that nothing was due. So the check-in gets the arithmetic done for it: every
line of working memory (and of the user's recent messages) that names a time
is read for its day (today, tomorrow, a weekday, weekdays, a date such as "4
December", "Dec 3rd", "22/12" or "2026-12-23") and its time (``15:00``, ``3pm``,
``3:30 p.m.``, "half past three", "at 11", "noon", or "morning", "evening",
"tonight"; "in 20 minutes" in a message counts from when it was said), and the
ones falling within the next hour are listed with how long until they are due.
An hour without am or pm is read as people mean it ("at 5:15" is 17:15, "at 9"
is 09:00, "at 7 tonight" is 19:00). Lines marked done, paid or cancelled, and a
date something was moved from, are left out.

It reads text, so it can be wrong; what it lists is a hint the model checks
against the notes, never an action.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from cortana.agent.extensions import TurnExtension
from cortana.companion.heartbeat import CHECK_IN_NAME, Clock, SystemClock
from cortana.prompts import strip_turn_context

if TYPE_CHECKING:
    from cortana.memory.stored import StoredMessage
    from cortana.messages import ThreadRef

__all__ = ["Due", "DueSoon", "due_in_conversation", "due_soon", "due_text"]

WITHIN = timedelta(hours=1)
GRACE = timedelta(minutes=10)
"""A time up to this long ago still counts as due now."""
MAX_LINE_CHARS = 200
MAX_ITEMS = 5

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_CLOCK = re.compile(r"(?<![\d.:/])([01]?\d|2[0-3])[:h.]([0-5]\d)(?!\d|:\d)(?:\s*([ap])\.?m\b\.?)?", re.IGNORECASE)
_HOUR_AMPM = re.compile(r"(?<![\d.:/])(1[0-2]|0?[1-9])\s*([ap])\.?m\b\.?", re.IGNORECASE)
_NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_HOUR_WORD = r"(1[0-2]|[1-9]|" + "|".join(_NUMBERS) + r")"
_SAID_TIME = re.compile(
    r"\b(half past|quarter past|quarter to)\s+" + _HOUR_WORD + r"\b|\b" + _HOUR_WORD + r"\s+o'?clock\b", re.IGNORECASE
)
_AT_HOUR = re.compile(
    r"\b(?:at|by|around|about|until|till)\s+(1[0-2]|[1-9])\b(?![:.,]?\d)(?!\s*(?:%|st\b|nd\b|rd\b|th\b|[ap]\.?m))",
    re.IGNORECASE,
)
_NOON = re.compile(r"\b(noon|midday|midnight)\b", re.IGNORECASE)
_PART_OF_DAY = {"morning": (9, 0), "afternoon": (15, 0), "evening": (19, 0), "tonight": (20, 0)}
_PARTS = re.compile(r"\b(morning|afternoon|evening|tonight)s?\b", re.IGNORECASE)
_EVENING_WORDS = re.compile(r"\b(evening|tonight|night|afternoon|dinner|supper|pm)\b", re.IGNORECASE)
_MORNING_WORDS = re.compile(r"\b(morning|breakfast|am)\b", re.IGNORECASE)
_IN_A_WHILE = re.compile(r"\bin\s+(\d{1,3}|an?|half an)\s+(minutes?|mins?|hours?|hrs?)\b", re.IGNORECASE)
_WEEKDAY = re.compile(r"\b(" + "|".join(_WEEKDAYS) + r")(s)?\b", re.IGNORECASE)
_WORKDAYS = re.compile(r"\b(weekdays|workdays|every working day|weekends|every weekend)\b", re.IGNORECASE)
_DAY_MONTH = re.compile(r"\b([0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"\b\.?(?:\s+(\d{4}))?", re.IGNORECASE)
_MONTH_DAY = re.compile(r"\b" + _MONTH + r"\.?\s+([0-3]?\d)(?:st|nd|rd|th)?\b(?:,?\s+(\d{4}))?", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d\d)-(\d\d)\b")
_SLASH_DATE = re.compile(r"(?<![\d/])([0-3]?\d)/([01]?\d)(?:/(\d{4}))?(?![\d/])")
_MOVED_FROM = re.compile(r"\b(?:moved|rescheduled|postponed|pushed|changed|shifted)\b[^.;]*?\bfrom\s+", re.IGNORECASE)
_SETTLED = re.compile(
    r"\b(done|paid|cancel+ed|finished|completed|went well|took place|already|no longer)\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Due:
    """One note that falls due soon.

    Attributes:
        when: the local time it is due.
        text: the note's line, as written (bounded).
    """

    when: datetime
    text: str

    def describe(self, now: datetime) -> str:
        """``in 5 minutes (18:30): Take the pizza out...``."""
        seconds = (self.when - now).total_seconds()
        if abs(seconds) < 60:
            relative = "now"
        elif seconds > 0:
            relative = f"in {_minutes(seconds)}"
        else:
            relative = f"{_minutes(-seconds)} ago"
        return f"{relative} ({self.when:%H:%M}): {self.text}"


def _minutes(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes} minute{'' if minutes == 1 else 's'}"


def _month(name: str) -> int:
    return next(index for index, month in enumerate(_MONTHS, start=1) if month.startswith(name.lower()[:3]))


def _days(line: str, now: datetime, written: date) -> list[date]:
    """The days a line speaks of: its dates and weekdays (the next of each), tomorrow, or today.

    A date a line says something was moved *from* is not one of them.
    """
    lowered = line.lower()
    moved = _MOVED_FROM.search(line)
    moved_from = moved.end() if moved else -1  # where the date right after "moved ... from" starts
    found: list[date] = []

    def add(when: list[date], start: int) -> None:
        if start != moved_from:
            found.extend(when)

    for match in _ISO_DATE.finditer(line):
        try:
            add([date(int(match[1]), int(match[2]), int(match[3]))], match.start())
        except ValueError:
            continue
    for match in _DAY_MONTH.finditer(line):
        add(_date_of(int(match[1]), _month(match[2]), match[3], now), match.start())
    for match in _MONTH_DAY.finditer(line):
        add(_date_of(int(match[2]), _month(match[1]), match[3], now), match.start())
    for match in _SLASH_DATE.finditer(line):
        add(_date_of(int(match[1]), int(match[2]), match[3], now), match.start())
    dated = {day.weekday() for day in found}  # "Monday 14 Dec" names one day, not also the next Monday
    for match in _WEEKDAY.finditer(line):
        weekday = _WEEKDAYS.index(match[1].lower())
        if weekday not in dated:
            add([now.date() + timedelta(days=(weekday - now.weekday()) % 7)], match.start())
    for match in _WORKDAYS.finditer(line):
        weekend = "weekend" in match[1].lower()
        add([_next_matching(now.date(), weekend)], match.start())
    if found:
        return found
    if "tomorrow" in lowered:
        return [written + timedelta(days=1)]
    return [now.date()]  # today, tonight, every day, or no day named: today


def _next_matching(today: date, weekend: bool) -> date:
    """Today if it is a weekday (a weekend day, for ``weekend``), else the next one that is."""
    day = today
    while (day.weekday() >= 5) != weekend:
        day += timedelta(days=1)
    return day


def _date_of(day: int, month: int, year: str | None, now: datetime) -> list[date]:
    try:
        when = date(int(year) if year else now.year, month, day)
    except ValueError:
        return []
    if not year and when < now.date() - timedelta(days=180):
        when = when.replace(year=now.year + 1)  # "14 January" said in December: next year's
    return [when]


def _hour_of(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS.index(text.lower()) + 1


def _read_hour(hour: int, line: str) -> int:
    """A 1-12 hour without am or pm, read as people mean it: pm when the line says evening or
    afternoon, am when it says morning, else the waking hours (7-11 in the morning, 12-6 after noon)."""
    if hour == 12 or hour > 12:
        return hour
    if _EVENING_WORDS.search(line) and not _MORNING_WORDS.search(line):
        return hour + 12
    if _MORNING_WORDS.search(line):
        return hour
    return hour if hour >= 7 else hour + 12


def _times(line: str) -> list[tuple[int, int]]:
    """The clock times a line names; a part of the day ("morning") when it names none."""
    times: list[tuple[int, int]] = []
    taken: list[tuple[int, int]] = []
    for match in _CLOCK.finditer(line):
        hour, minute = int(match[1]), int(match[2])
        if match[3]:
            hour = hour % 12 + (12 if match[3].lower() == "p" else 0)
        elif not match[1].startswith("0") and hour < 12:
            hour = _read_hour(hour, line)  # "at 5:15" said in the afternoon is 17:15; "06:30" is as written
        times.append((hour, minute))
        taken.append(match.span())
    for match in _HOUR_AMPM.finditer(line):
        times.append((int(match[1]) % 12 + (12 if match[2].lower() == "p" else 0), 0))
        taken.append(match.span())
    for match in _SAID_TIME.finditer(line):
        if match[1]:
            hour = _read_hour(_hour_of(match[2]), line)
            minute = {"half past": 30, "quarter past": 15, "quarter to": 45}[match[1].lower()]
            times.append(((hour - 1) % 24 if minute == 45 else hour, minute))
        else:
            times.append((_read_hour(_hour_of(match[3]), line), 0))
        taken.append(match.span())
    for match in _AT_HOUR.finditer(line):
        if not any(start <= match.start(1) < end for start, end in taken):
            times.append((_read_hour(int(match[1]), line), 0))
    for match in _NOON.finditer(line):
        times.append((0, 0) if match[1].lower() == "midnight" else (12, 0))
    if not times:
        for match in _PARTS.finditer(line):
            times.append(_PART_OF_DAY[match[1].lower()])
    return times


def _after_a_while(line: str, said_at: datetime) -> list[datetime]:
    """ "in 20 minutes", "in an hour", counted from when the line was said."""
    moments = []
    for match in _IN_A_WHILE.finditer(line):
        amount = {"a": 1.0, "an": 1.0, "half an": 0.5}.get(match[1].lower()) or float(match[1])
        unit = 60 if match[2].lower().startswith("m") else 3600
        moments.append(said_at + timedelta(seconds=amount * unit))
    return moments


def due_soon(
    lines: Sequence[str] | str,
    now: datetime,
    *,
    said_at: datetime | None = None,
    within: timedelta = WITHIN,
    grace: timedelta = GRACE,
) -> list[Due]:
    """The lines that fall due between ``grace`` ago and ``within`` from ``now``, soonest first.

    Args:
        lines: notes, one per line (a string is split into lines).
        now: the local time.
        said_at: when the lines were written: "tomorrow" counts from its day and "in 20 minutes"
            from it; default: notes of no known time ("tomorrow" counts from today; "in 20 minutes"
            is not read).
    """
    items = lines.splitlines() if isinstance(lines, str) else list(lines)
    found: list[Due] = []
    for raw in items:
        line = " ".join(raw.split()).lstrip("-*• ").strip()
        if not line or _SETTLED.search(line):
            continue
        times = _times(line)
        later = _after_a_while(line, said_at) if said_at is not None else []
        if not times and not later:
            continue
        moments = [
            datetime.combine(day, datetime.min.time(), tzinfo=now.tzinfo).replace(hour=hour, minute=minute)
            for day in _days(line, now, said_at.date() if said_at else now.date())
            for hour, minute in times
        ] + later
        near = [moment for moment in moments if -grace <= moment - now <= within]
        if near:
            found.append(Due(min(near), line[:MAX_LINE_CHARS]))
    return sorted(found, key=lambda due: due.when)[:MAX_ITEMS]


def due_text(items: Sequence[Due], now: datetime) -> str | None:
    """The context block for ``items``; ``None`` when there are none."""
    if not items:
        return None
    lines = ["Due soon, from your notes and the user's messages (worked out from the local time):"]
    lines.extend(f"- {item.describe(now)}" for item in items)
    return "\n".join(lines)


_CALLED_OFF = re.compile(
    r"\b(no need|never ?mind|forget (?:it|that|about)|don'?t (?:need to )?remind|cancel|called off|not any ?more)\b",
    re.IGNORECASE,
)


def due_in_conversation(messages: Sequence[tuple[str, str, datetime]], now: datetime) -> list[Due]:
    """What is due soon in a conversation: ``(role, text, said_at)`` oldest first.

    The user's messages and the assistant's replies (with what it promised) both count; a later
    message that calls things off ("no need for the reminder", "I already called him") drops what
    was found before it.
    """
    found: list[Due] = []
    for role, text, said_at in messages:
        if role == "user" and (_CALLED_OFF.search(text) or _SETTLED.search(text)):
            found = []  # what was asked for before is called off; this message may still ask for more
        found.extend(due_soon(text, now, said_at=said_at))
    return found


class DueMemory(Protocol):
    """Where the notes come from (``SQLiteMemory`` has it)."""

    async def get_working_memory(self, thread: ThreadRef) -> str:
        """The working memory seen in ``thread``."""
        ...

    async def messages(self, thread: ThreadRef) -> list[StoredMessage]:
        """Every stored message of the thread, oldest first."""
        ...


class DueSoon(TurnExtension):
    """A turn extension for check-ins: what in working memory and the user's recent messages is due soon.

    Args:
        memory: the working memory and the conversation.
        clock: the local time.
        recent: how many of the thread's latest messages (the user's, and the assistant's replies
            with what it promised) are read too.
    """

    name = "due_soon"

    def __init__(self, memory: DueMemory, *, clock: Clock | None = None, recent: int = 20) -> None:
        self.memory = memory
        self.clock: Clock = clock or SystemClock()
        self.recent = recent
        self.reminded: set[datetime] = set()
        """The times the user was already reminded of (:meth:`mark_reminded`): not listed again."""

    def mark_reminded(self, items: Sequence[Due]) -> None:
        """The user was told about ``items``: leave them (and whatever else is due at their times) out."""
        self.reminded.update(item.when for item in items)

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """The block, or ``None`` when nothing is due."""
        return due_text(await self.items(thread), self.clock.now())

    async def items(self, thread: ThreadRef) -> list[Due]:
        """What is due soon in working memory and the user's recent messages, less what was reminded of."""
        now = self.clock.now()
        found = due_soon(await self.memory.get_working_memory(thread), now)
        # what the user said, and what the assistant promised ("I'll remind you at 3:30")
        stored_messages = await self.memory.messages(thread)
        said = [
            stored
            for index, stored in enumerate(stored_messages)
            if stored.kind == "message"
            and stored.message.role in ("user", "assistant")
            and not stored.message.name
            and not stored.message.tool_calls
            and not (index and stored_messages[index - 1].message.name == CHECK_IN_NAME)  # a check-in's own words
        ][-self.recent :]
        found.extend(
            due_in_conversation(
                [
                    (
                        stored.message.role,
                        strip_turn_context(stored.message.content),
                        datetime.fromtimestamp(stored.created_at, tz=now.tzinfo),
                    )
                    for stored in said
                ],
                now,
            )
        )
        unique = {(item.when, item.text): item for item in found if item.when not in self.reminded}
        return sorted(unique.values(), key=lambda item: item.when)[:MAX_ITEMS]
