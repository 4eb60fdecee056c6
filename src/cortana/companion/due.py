"""What is due soon: the times in the user's notes, worked out against the local time.

Small models cannot do clock arithmetic: shown "Take the pizza out at 18:30"
and "Local time: 18:25", the 1.5B model wrote both down and still answered
that nothing was due. So the check-in gets the arithmetic done for it: every
line of working memory (and of the recent messages) that names a time is read
for its day and its time, and the ones falling within the next hour are listed
with how long until they are due.

- Days: today, tomorrow, a weekday ("Friday", "Fri", "weds"; "next Monday" in a
  message said on a Monday: a week on), weekdays/weekends, a date ("4 December",
  "Dec 3rd", "22/12", "2026-12-23", "the 25th"; in "next Monday (25th)" the date
  says which Monday). A date something was moved *from*, and the days named
  before what it was moved *to*, are not its days.
- Times: ``15:00``, ``3pm``, ``3:30 p.m.``, "half past three", "half 4" (4:30),
  "quarter to nine", "at 11", "~9", "9ish", "around 9", "noon"; a range
  ("12:30-1pm", "2-3pm", "btw 1-2") is its start; a part of the day ("morning",
  "evening", "tonight") when no time is named, but not "this afternoon", which
  only says which day. "in 20 minutes" in a message counts from when it was said; "leave
  2h before" makes a time due that much earlier too.
- Am or pm, when not written: the half of the day named nearest the hour, in
  its clause (evening, dinner, bed, tonight, a pm time: after noon; morning, breakfast, an
  am time: before); in a message naming no day, the first one after it was
  said ("at 7" said at 17:35 is 19:00, "quarter past six" said at 04:50 is
  06:15); 5 and 6 with an early start (early shift, alarm) in the morning; else
  the waking hours ("at 9" is 09:00, "at 5:15" is 17:15).
- Left out: text struck out (``~~...~~``); lines marked done or cancelled, or
  paid when paying is the task ("slot 12:30-1pm, already paid" is still due);
  opening hours that ask for nothing ("gym closes at 10pm"); and what a message
  of today says was done or moved ("took my thyroid pill early today", "got
  pushed to next Monday", "just got off the phone with the plumber"): the notes
  sharing a word with it or the reply to it (pills, meds and tablets are one
  word), or due at a time it names ("my 8 o'clock pills").

It reads text, so it can be wrong; what it lists is a hint the model checks
against the notes, never an action.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
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
_JUST_BEFORE = timedelta(minutes=30)
"""An hour a message names without am or pm is the first one after it was said, less this."""
_DONE_AHEAD = timedelta(hours=3)
"""A message saying something was done settles what is due at most this long after it was said."""
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
    r"\b(half past|quarter past|quarter to|half)\s+" + _HOUR_WORD + r"\b|\b" + _HOUR_WORD + r"\s+o'?clock\b",
    re.IGNORECASE,
)
_AT_HOUR = re.compile(
    r"(?:\b(?:at|by|around|about|until|till|roughly|approx\.?|approximately)\s+|~\s*)(1[0-2]|[1-9])\b(?![:.,]?\d)"
    r"(?!\s*(?:%|st\b|nd\b|rd\b|th\b|[ap]\.?m))|(?<![\d.:/])(1[0-2]|[1-9])\s*-?ish\b",
    re.IGNORECASE,
)
_RANGE = re.compile(
    r"(?<![\d.:/-])(1[0-2]|0?[1-9])(?:[:.]([0-5]\d))?\s*(?:([ap])\.?m\.?)?\s*(?:-|\u2013|to)\s*"
    r"(1[0-2]|0?[1-9])(?:[:.]([0-5]\d))?(?!\d)\s*(?:([ap])\.?m\b\.?)?",
    re.IGNORECASE,
)
_BETWEEN = re.compile(r"\b(?:between|btw|from)\s*$", re.IGNORECASE)
_NOON = re.compile(r"\b(noon|midday|midnight)\b", re.IGNORECASE)
_PART_OF_DAY = {"morning": (9, 0), "afternoon": (15, 0), "evening": (19, 0), "tonight": (20, 0)}
_PARTS = re.compile(r"\b(?<!this )(morning|afternoon|evening|tonight)s?\b", re.IGNORECASE)
_HALF_OF_DAY = re.compile(
    r"\b(?:(evening|tonight|night|afternoon|dinner|supper|bed(?:time)?)|(morning|breakfast|sunrise))s?\b"
    r"|\d\s*(?:(p)|(a))\.?m\b",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[,;]|\.\s")
_EARLY = re.compile(r"\b(early|alarm|wake|waking|commute)\b", re.IGNORECASE)
_IN_A_WHILE = re.compile(r"\bin\s+(\d{1,3}|an?|half an)\s+(minutes?|mins?|hours?|hrs?)\b", re.IGNORECASE)
_WEEKDAY_SHORT = r"(Mon|Tue|Tues|Wed|Weds|Thu|Thur|Thurs|Fri|Sat|Sun|(?i:tues?|weds?|thu(?:rs?)?|fri))"
"""Capitalised for the short names that are words ("sat down" is no Saturday, nor "sun" Sunday)."""
_WEEKDAY = re.compile(r"\b(?i:(next\s+)?(" + "|".join(_WEEKDAYS) + r")s?)\b|\b(?i:(next\s+))?" + _WEEKDAY_SHORT + r"\b")
_WORKDAYS = re.compile(r"\b(weekdays|workdays|every working day|weekends|every weekend)\b", re.IGNORECASE)
_DAY_MONTH = re.compile(r"\b([0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"\b\.?(?:\s+(\d{4}))?", re.IGNORECASE)
_MONTH_DAY = re.compile(r"\b" + _MONTH + r"\.?\s+([0-3]?\d)(?:st|nd|rd|th)?\b(?:,?\s+(\d{4}))?", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d\d)-(\d\d)\b")
_DAY_OF_MONTH = re.compile(  # "the 25th", "(25th)", "Mon 25th": a day of this month or the next
    r"(?:\bthe\s+|\bon\s+|\(|\b(?i:" + "|".join(_WEEKDAYS) + "|" + _WEEKDAY_SHORT[1:-1] + r")\s+)"
    r"([0-3]?\d)(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?" + _MONTH + r")",
    re.IGNORECASE,
)
_SLASH_DATE = re.compile(r"(?<![\d/])([0-3]?\d)/([01]?\d)(?:/(\d{4}))?(?![\d/])")
_MOVED = r"\b(?:moved|rescheduled|postponed|pushed|changed|shifted|put off)\b[^.;]*?"
_MOVED_FROM = re.compile(_MOVED + r"\bfrom\s+", re.IGNORECASE)
_MOVED_TO = re.compile(_MOVED + r"\b(?:to|until|till)\s+", re.IGNORECASE)
_SETTLED = re.compile(
    r"\b(done|cancel+ed|finished|completed|went well|took place|already(?! paid)|no longer)\b", re.IGNORECASE
)
_BEFORE = re.compile(  # "leave 2h before", "be there 30 mins early": due that long before the time named
    r"\b(\d{1,3}(?:\.\d)?|an?|one|two|three|half an?)\s*(h|hrs?|hours?|m|mins?|minutes?)\s+"
    r"(?:before|beforehand|early|ahead)\b",
    re.IGNORECASE,
)
_OPENING_HOURS = re.compile(r"\b(closes|closing|shuts|open (?:till|until|late)|opening hours)\b", re.IGNORECASE)
_TASK = re.compile(
    r"\b(before|by|get|pick|collect|buy|return|drop|post|send|need|must|remember|go|grab|call|ring|book|renew)\b",
    re.IGNORECASE,
)
"""A line naming opening hours is a fact about a place, not a task, unless it asks for one of these."""
_STRUCK = re.compile(r"~~.*?~~")
_PAID = re.compile(r"\bpaid\b", re.IGNORECASE)
_PAYING = re.compile(r"\b(pay|payment|bill|rent|invoice|fee|fine|tax)\b", re.IGNORECASE)


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


def _days(line: str, now: datetime, written: date, said: bool = False) -> tuple[list[date], bool]:
    """The days a line speaks of: its dates and weekdays (the next of each), tomorrow, or today; and
    whether it named one. ``said``: ``written`` is when it was said ("next Monday" counts from it).

    A date a line says something was moved *from* is not one of them; nor, when it says something
    was moved *to* a day, the days named before that.
    """
    lowered = line.lower()
    moved = _MOVED_FROM.search(line)
    moved_from = moved.end() if moved else -1  # where the date right after "moved ... from" starts
    moved_to = _MOVED_TO.search(line)
    found: list[tuple[int, date]] = []

    def add(when: list[date], start: int) -> None:
        if start != moved_from:
            found.extend((start, day) for day in when)

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
    if not found:
        for match in _DAY_OF_MONTH.finditer(line):
            add(_day_of_month(int(match[1]), now.date()), match.start(1))
    dated = {day.weekday() for _, day in found}  # "Monday 14 Dec", "next Monday (25th)" name one day
    for match in _WEEKDAY.finditer(line):
        weekday = next(index for index, name in enumerate(_WEEKDAYS) if name[:3] == (match[2] or match[4])[:3].lower())
        its_date = any(match.end() <= start <= match.end() + 4 for start, _ in found)
        if weekday not in dated or ((match[1] or match[3]) and not its_date):
            if (match[1] or match[3]) and said:  # "next Monday" said on a Monday: a week on
                add([written + timedelta(days=(weekday - written.weekday()) % 7 or 7)], match.start())
            else:
                add([now.date() + timedelta(days=(weekday - now.weekday()) % 7)], match.start())
    for match in _WORKDAYS.finditer(line):
        weekend = "weekend" in match[1].lower()
        add([_next_matching(now.date(), weekend)], match.start())
    if moved_to and any(start >= moved_to.end() for start, _ in found):
        found = [(start, day) for start, day in found if start >= moved_to.end()]
    if found:
        return [day for _, day in found], True
    if "tomorrow" in lowered:
        return [written + timedelta(days=1)], True
    return [now.date()], False  # today, tonight, every day, or no day named: today


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


def _day_of_month(day: int, today: date) -> list[date]:
    """The next ``day`` of a month, from ``today`` on ("the 25th")."""
    month, year = today.month, today.year
    for _ in range(3):  # the 31st is not in every month
        if day >= today.day or (month, year) != (today.month, today.year):
            try:
                return [date(year, month, day)]
            except ValueError:
                pass
        month, year = (1, year + 1) if month == 12 else (month + 1, year)
    return []


def _hour_of(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS.index(text.lower()) + 1


def _read_hour(hour: int, minute: int, line: str, at: int, after: time | None) -> int:
    """A 1-12 hour without am or pm (said at ``at`` in the line), read as people mean it.

    In turn: the half of the day named nearest to it in the line (evening, dinner, bed, tonight or
    a pm time elsewhere: after noon; morning, breakfast or an am time: before); for a message of
    today (``after``: when it was said, less a while), the first of the two after that; an early
    start (early, alarm, wake) for 5 and 6; else the waking hours (7-11 in the morning, 12-6 after).
    """
    if hour >= 12:
        return hour
    halves = []
    for match in _HALF_OF_DAY.finditer(line):  # nearest: in the same clause, then before the hour, then closer
        between = line[min(at, match.end()) : max(at, match.start())]
        halves.append((bool(_CLAUSE_END.search(between)), match.start() > at, len(between), bool(match[1] or match[3])))
    if halves:
        return hour + 12 if min(halves)[3] else hour
    if after is not None:
        for reading in (hour, hour + 12):
            if time(reading, minute) >= after:
                return reading
    if hour in (5, 6) and _EARLY.search(line):
        return hour
    return hour if hour >= 7 else hour + 12


def _times(line: str, after: time | None = None) -> list[tuple[int, int]]:
    """The clock times a line names; a part of the day ("morning") when it names none.

    A range ("12:30-1pm", "2-3pm") is read as its start. ``after``: see :func:`_read_hour`.
    """
    times: list[tuple[int, int]] = []
    taken: list[tuple[int, int]] = []

    def add(hour: int, minute: int, meridiem: str | None, span: tuple[int, int], written: str = "") -> None:
        if any(start <= span[0] < end for start, end in taken):
            return
        if meridiem:
            hour = hour % 12 + (12 if meridiem.lower() == "p" else 0)
        elif not written.startswith("0") and hour < 12:
            hour = _read_hour(hour, minute, line, span[0], after)  # "at 5:15" said in the afternoon is 17:15
        times.append((hour, minute))
        taken.append(span)

    for match in _RANGE.finditer(line):
        start, end = int(match[1]), int(match[4])
        between = _BETWEEN.search(line, 0, match.start())  # "btw 1-2": a time range too
        if match[2] or match[3] or match[6] or between:  # "12:30-1pm", "2-3pm", "9am-5"; not "3-4 days"
            meridiem = match[3] or match[6]
            if not match[3] and meridiem and start % 12 > end % 12:  # "11-1pm": 11 in the morning
                meridiem = "a" if meridiem.lower() == "p" else "p"
            add(start, int(match[2] or 0), meridiem, match.span(), match[1])
    for match in _CLOCK.finditer(line):
        add(int(match[1]), int(match[2]), match[3], match.span(), match[1])
    for match in _HOUR_AMPM.finditer(line):
        add(int(match[1]), 0, match[2], match.span())
    for match in _SAID_TIME.finditer(line):
        if match[1]:
            minute = {"half past": 30, "half": 30, "quarter past": 15, "quarter to": 45}[match[1].lower()]
            hour = _hour_of(match[2]) - (1 if minute == 45 else 0) or 12
            add(hour, minute, None, match.span())
        else:
            add(_hour_of(match[3]), 0, None, match.span())
    for match in _AT_HOUR.finditer(line):
        group = 1 if match[1] else 2
        add(int(match[group]), 0, None, match.span(group))
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


def _ahead_of_time(line: str) -> list[timedelta]:
    """How long before the time it names a line asks for something ("leave 2h before")."""
    spans = []
    for match in _BEFORE.finditer(line):
        amount = {"a": 1.0, "an": 1.0, "one": 1.0, "two": 2.0, "three": 3.0}.get(match[1].lower())
        if amount is None:
            amount = 0.5 if match[1].lower().startswith("half") else float(match[1])
        spans.append(timedelta(minutes=amount * (1 if match[2].lower().startswith("m") else 60)))
    return spans


def _settled(line: str) -> bool:
    """Marked done or cancelled; or paid, when paying is what the line is about."""
    return bool(_SETTLED.search(line) or (_PAID.search(line) and _PAYING.search(line)))


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
        said_at: when the lines were written: "tomorrow" counts from its day, "in 20 minutes"
            from it, and an hour without am or pm that names no day is the first one after it;
            default: notes of no known time ("tomorrow" counts from today; "in 20 minutes"
            is not read).
    """
    items = lines.splitlines() if isinstance(lines, str) else list(lines)
    found: list[Due] = []
    for raw in items:
        line = _STRUCK.sub(" ", " ".join(raw.split())).lstrip("-*• ").strip()  # struck out: done with
        if not line or _settled(line) or (_OPENING_HOURS.search(line) and not _TASK.search(line)):
            continue
        days, named = _days(line, now, said_at.date() if said_at else now.date(), said_at is not None)
        after = None
        if said_at is not None and not named and said_at.date() == now.date():
            after = max(said_at - _JUST_BEFORE, said_at.replace(hour=0, minute=0)).time()
        times = _times(line, after)
        later = _after_a_while(line, said_at) if said_at is not None else []
        if not times and not later:
            continue
        moments = [
            datetime.combine(day, datetime.min.time(), tzinfo=now.tzinfo).replace(hour=hour, minute=minute) - ahead
            for day in days
            for hour, minute in times
            for ahead in (timedelta(0), *_ahead_of_time(line))
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
_DONE_SAID = re.compile(
    r"\b(took|taken|had my|done|finished|already|picked (?:\w+ )?up|collected|(?:just|got) back from|paid|sent"
    r"|submitted|handed in|got off the phone|spoke (?:to|with)|talked (?:to|with)|heard back)\b",
    re.IGNORECASE,
)
_MOVED_SAID = re.compile(
    r"\b(moved|rescheduled|postponed|pushed|put off|delayed|called off|cancel+ed)\b", re.IGNORECASE
)
_ASKS = re.compile(r"\b(remind|nudge|ping|check (?:in|on))\b|\?", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z-]*[a-z]", re.IGNORECASE)
_COMMON_WORDS = """the and for with from that this then than they them their there have has had just got get not but
    are was were you your yours i've you've i'll it's its about after before again every today tonight tomorrow
    morning afternoon evening night week weekend time minute hour later early now next last done took taken take
    takes finished already back went called paid sent moved pushed put off delayed remind reminder noted sure thanks
    okay please will would can could should what when where how all our out one two day days appointment meeting
    call"""
_COMMON = frozenset([*_COMMON_WORDS.split(), *_WEEKDAYS, *_MONTHS])
_SAME_THING = dict.fromkeys(("pill", "med", "medication", "medicine", "tablet", "dose"), "medication")
"""Words people use for the same thing: "took my pills" settles "meds at 8pm"."""


def _words(text: str) -> set[str]:
    """The words that say what a line is about ("pill", "levothyroxine"), not when or how."""
    words = set()
    for word in _WORD.findall(text.lower().replace("'s", "")):
        word = word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
        if len(word) >= 3 and word not in _COMMON:
            words.add(_SAME_THING.get(word, word))
    return words


def _still_due(
    item: Due, about: set[str], at: set[tuple[int, int]], said_at: datetime, ahead: timedelta | None
) -> bool:
    """Whether ``item`` is still due after a message about ``about`` (or naming its time, one of ``at``)
    said it was done (``ahead``: only what falls due within that of it: "done" said hours before is
    about something else) or moved."""
    same = bool(_words(item.text) & about) or (item.when.hour, item.when.minute) in at
    return not same or (ahead is not None and item.when - said_at > ahead)


def due_in_conversation(
    messages: Sequence[tuple[str, str, datetime]], now: datetime, *, notes: Sequence[Due] = ()
) -> list[Due]:
    """What is due soon in a conversation: ``(role, text, said_at)`` oldest first; and which of ``notes``
    (what working memory has due) still is.

    The user's messages and the assistant's replies (with what it promised) both count; a later
    message that calls things off ("no need for the reminder", "I already called him") drops what
    was found before it. A message of today that says something was done or moved ("took my pill
    early today", "got pushed to next Monday"), and asks for nothing, drops the notes and what was
    found before it that share a word with it or with the assistant's reply to it (for "done": only
    what falls due within three hours of it); a message saying something was done lists nothing.
    """
    kept = list(notes)
    found: list[Due] = []
    skip_reply = False
    for index, (role, text, said_at) in enumerate(messages):
        if role != "user":
            if not skip_reply:
                found.extend(due_soon(text, now, said_at=said_at))
            skip_reply = False
            continue
        if _CALLED_OFF.search(text) or _SETTLED.search(text):
            found = []  # what was asked for before is called off; this message may still ask for more
        done, moved = _DONE_SAID.search(text), _MOVED_SAID.search(text)
        if (done or moved) and not _ASKS.search(text) and said_at.date() == now.date() and said_at <= now:
            reply = messages[index + 1][1] if index + 1 < len(messages) and messages[index + 1][0] != "user" else ""
            about, at = _words(text) | _words(reply), set(_times(text))
            ahead = _DONE_AHEAD if done and not moved else None
            kept = [item for item in kept if _still_due(item, about, at, said_at, ahead)]
            found = [item for item in found if _still_due(item, about, at, said_at, ahead)]
            skip_reply = bool(done and not moved)
            if skip_reply:
                continue
        found.extend(due_soon(text, now, said_at=said_at))
    return kept + found


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
        notes = due_soon(await self.memory.get_working_memory(thread), now)
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
        found = due_in_conversation(
            [
                (
                    stored.message.role,
                    strip_turn_context(stored.message.content),
                    datetime.fromtimestamp(stored.created_at, tz=now.tzinfo),
                )
                for stored in said
            ],
            now,
            notes=notes,
        )
        unique = {(item.when, item.text): item for item in found if item.when not in self.reminded}
        return sorted(unique.values(), key=lambda item: item.when)[:MAX_ITEMS]
