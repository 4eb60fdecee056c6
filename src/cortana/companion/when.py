"""Days and times in a line of notes, read the way people write them.

``days_named`` finds the days a line speaks of (dates, weekdays, tomorrow, holidays, what a
move leaves behind), ``times_named`` its clock times with am or pm worked out, and
``ahead_of_time`` / ``after_a_while`` the spans it counts from ("leave 2h before", "in 20
minutes"). :mod:`cortana.companion.due` says which rules apply and why.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

__all__ = ["MONTHS", "WEEKDAYS", "after_a_while", "ahead_of_time", "days_named", "times_named"]

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
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
_FOUR_DIGITS = re.compile(
    r"(?:(?<=\bat )|(?<=@ )|(?<=@)|(?<=\bby ))([01]\d|2[0-3])([0-5]\d)\b"
    r"|(?<![\w#£$€.,/-])([01]\d|2[0-3])([0-5]\d)(?=\s*(?:h\b|hrs\b|hours\b|(?i:mon|tue|wed|thu|fri|sat|sun)))",
    re.IGNORECASE,
)
"""A time written as four digits, where one is meant: "at 0930", "1045 Tues", "1530 hrs" (not "ref 2291")."""
_HOUR_AMPM = re.compile(r"(?<![\d.:/])(1[0-2]|0?[1-9])\s*([ap])\.?m\b\.?", re.IGNORECASE)
_NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_HOUR_WORD = r"(1[0-2]|[1-9]|" + "|".join(_NUMBERS) + r")"
_SAID_TIME = re.compile(
    r"\b(half past|quarter past|quarter to|half)\s+" + _HOUR_WORD + r"\b|\b" + _HOUR_WORD + r"\s+o'?clock\b",
    re.IGNORECASE,
)
_AT_HOUR = re.compile(
    r"(?:\b(?:at|by|before|around|about|until|till|roughly|approx\.?|approximately)\s+|[~@]\s*)(1[0-2]|[1-9])\b"
    r"(?![:.,]?\d)"
    r"(?!\s*(?:%|st\b|nd\b|rd\b|th\b|[ap]\.?m))|(?<![\d.:/])(1[0-2]|[1-9])\s*-?ish\b",
    re.IGNORECASE,
)
_RANGE = re.compile(
    r"(?<![\d.:/-])(1[0-2]|0?[1-9])(?:[:.]([0-5]\d))?\s*(?:([ap])\.?m\.?)?\s*(?:-|\u2013|to)\s*"
    r"(1[0-2]|0?[1-9])(?:[:.]([0-5]\d))?(?!\d)\s*(?:([ap])\.?m\b\.?)?",
    re.IGNORECASE,
)
_EITHER = re.compile(
    r"(?<![\d.:/])(?:\d{1,2}(?:[:.]\d\d)?\s*(?:[ap]\.?m\.?)?\s*,\s*)*"
    r"\d{1,2}(?:[:.]\d\d)?\s*(?:[ap]\.?m\.?)?\s+or\s+\d{1,2}(?:[:.]\d\d)?(?!\d)\s*(?:[ap]\.?m\b\.?)?",
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
"""Capitalised for the short names that are words ("sat down" is no Saturday); lower-case "mon", "sat" and
"sun" are days only opening a note ("sun roast at 1pm")."""
_WEEKDAY = re.compile(
    r"\b(?i:(next\s+)?(" + "|".join(WEEKDAYS) + r")s?)\b|\b(?i:(next\s+))?" + _WEEKDAY_SHORT + r"\b"
    r"|^(?i:(mon|sat|sun)):?(?=\s)"  # opening a note, "sun roast" and "sat 3pm" are days
)
_WORKDAYS = re.compile(r"\b(weekdays|workdays|every working day|weekends|every weekend)\b", re.IGNORECASE)
_DAY_MONTH = re.compile(r"\b([0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"\b\.?(?:\s+(\d{4}))?", re.IGNORECASE)
_MONTH_DAY = re.compile(r"\b" + _MONTH + r"\.?\s+([0-3]?\d)(?:st|nd|rd|th)?\b(?:,?\s+(\d{4}))?", re.IGNORECASE)
_MONTH_ALONE = re.compile(  # "July hols", "in jan", "by May"; not "call Jan" or "May's party": people
    r"\b((?i:january|february|april|june|july|august|september|october|november|december)|March)\b"
    r"|\b(?i:in|by|until|till|next|mid|late|early)[- ]+((?i:jan|feb|mar|apr|may|jun|jul|aug|sept?|oct|nov|dec))\b"
)
_UNTIL = re.compile(
    r"\b(?:ends?|ending|until|till|through|thru)\s+(?:on\s+)?(?:(?i:" + "|".join(WEEKDAYS) + r"|mon|tue|tues|wed|weds"
    r"|thu|thur|thurs|fri|sat|sun)\s+)?(?:the\s+)?$",
    re.IGNORECASE,
)
_TWENTY_FOUR_HOUR = re.compile(r"(?<![\d.:/])0\d[:h.][0-5]\d(?!\d)")
"""A morning time written on a 24-hour clock ("09:05"): the line's other bare hours are the morning's."""
_ISO_DATE = re.compile(r"\b(\d{4})-(\d\d)-(\d\d)\b")
_DAY_OF_MONTH = re.compile(  # "the 25th", "(25th)", "Mon 25th": a day of this month or the next
    r"(?:\bthe\s+|\bon\s+|\(|\b(?i:" + "|".join(WEEKDAYS) + "|" + _WEEKDAY_SHORT[1:-1] + r")\s+)"
    r"([0-3]?\d)(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?" + _MONTH + r")",
    re.IGNORECASE,
)
_HOLIDAYS = {
    "new year's eve": (12, 31),
    "nye": (12, 31),
    "christmas eve": (12, 24),
    "xmas eve": (12, 24),
    "christmas day": (12, 25),
    "xmas day": (12, 25),
    "boxing day": (12, 26),
    "new year's day": (1, 1),
    "valentine's day": (2, 14),
    "halloween": (10, 31),
}
_HOLIDAY = re.compile(r"\b(" + "|".join(_HOLIDAYS) + r")\b", re.IGNORECASE)
_SLASH_DATE = re.compile(r"(?<![\d/])([0-3]?\d)/([01]?\d)(?:/(\d{4}))?(?![\d/])")
_MOVED = r"\b(?:moved|rescheduled|postponed|pushed|changed|shifted|put off)\b[^.;]*?"
_MOVED_FROM = re.compile(_MOVED + r"\bfrom\s+", re.IGNORECASE)
_MOVED_TO = re.compile(_MOVED + r"\b(?:to|until|till)\s+", re.IGNORECASE)
_BEFORE = re.compile(  # "leave 2h before", "be there 30 mins early": due that long before the time named
    r"\b(\d{1,3}(?:\.\d)?|an?|one|two|three|half an?)\s*(h|hrs?|hours?|m|mins?|minutes?)\s+"
    r"(?:before|beforehand|early|ahead)\b",
    re.IGNORECASE,
)


def _month(name: str) -> int:
    return next(index for index, month in enumerate(MONTHS, start=1) if month.startswith(name.lower()[:3]))


def days_named(line: str, now: datetime, written: date, said: bool = False) -> tuple[list[date], bool]:
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
    ended: list[int] = []

    def add(when: list[date], start: int) -> None:
        if start == moved_from:
            return
        if _UNTIL.search(line, 0, start):  # "3x a day ... course ends sat 27th": every day until then
            ended.append(start)
            when = [now.date() for day in when if now.date() <= day]
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
    for match in _HOLIDAY.finditer(line.replace("\u2019", "'")):
        month, day = _HOLIDAYS[match[1].lower()]
        add(_date_of(day, month, None, now), match.start())
    if not found:
        for match in _DAY_OF_MONTH.finditer(line):
            add(_day_of_month(int(match[1]), now.date()), match.start(1))
    dated = {day.weekday() for _, day in found}  # "Monday 14 Dec", "next Monday (25th)" name one day
    for match in _WEEKDAY.finditer(line):
        weekday = next(
            index for index, name in enumerate(WEEKDAYS) if name[:3] == (match[2] or match[4] or match[5])[:3].lower()
        )
        if any(match.end() <= start <= match.end() + 4 for start in [*(start for start, _ in found), *ended]):
            continue  # "Mon 25th", "next Monday (25th)", "ends sat 27th": the weekday names the date after it
        if weekday not in dated or match[1] or match[3]:
            if (match[1] or match[3]) and said:  # "next Monday" said on a Monday: a week on
                add([written + timedelta(days=(weekday - written.weekday()) % 7 or 7)], match.start())
            else:
                add([now.date() + timedelta(days=(weekday - now.weekday()) % 7)], match.start())
    for match in _WORKDAYS.finditer(line):
        weekend = "weekend" in match[1].lower()
        add([_next_matching(now.date(), weekend)], match.start())
    if moved_to and any(start >= moved_to.end() for start, _ in found):
        found = [(start, day) for start, day in found if start >= moved_to.end()]
    if found or ended:  # a course that has ended is due on no day
        return [day for _, day in found], True
    months = {_month(match[1] or match[2]) for match in _MONTH_ALONE.finditer(line)}
    if months and now.month not in months:  # "July hols: ferry 09:15", "book by May": not today
        return [], True
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
    Listing both readings of a 7-10 was tried: it found two evening notes ("eye drops quarter to
    8") and raised a false alarm on a school drop-off at 8:15 read as the evening.
    """
    if hour >= 12:
        return hour
    halves = []
    for match in _HALF_OF_DAY.finditer(line):  # nearest: in the same clause, then before the hour, then closer
        between = line[min(at, match.end()) : max(at, match.start())]
        halves.append((bool(_CLAUSE_END.search(between)), match.start() > at, len(between), bool(match[1] or match[3])))
    if halves:
        return hour + 12 if min(halves)[3] else hour
    if _TWENTY_FOUR_HOUR.search(line):  # "flight 09:05, leave 6:45": a morning on a 24-hour clock
        return hour
    if after is not None:
        for reading in (hour, hour + 12):
            if time(reading, minute) >= after:
                return reading
    if hour in (5, 6) and _EARLY.search(line):
        return hour
    return hour if hour >= 7 else hour + 12


def times_named(line: str, after: time | None = None) -> list[tuple[int, int]]:
    """The clock times a line names; a part of the day ("morning") when it names none.

    A range ("12:30-1pm", "2-3pm") is read as its start. ``after``: see :func:`_read_hour`.
    """
    times: list[tuple[int, int]] = []
    taken: list[tuple[int, int]] = [match.span() for match in _EITHER.finditer(line)]  # "at 2 or 3?": unsure

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
    for match in _FOUR_DIGITS.finditer(line):
        hour, minute = (match[1], match[2]) if match[1] else (match[3], match[4])
        add(int(hour), int(minute), None, match.span(), hour)
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
        times.append((24, 0) if match[1].lower() == "midnight" else (12, 0))  # midnight ends the day named
    if not times:
        for match in _PARTS.finditer(line):
            times.append(_PART_OF_DAY[match[1].lower()])
    return times


def after_a_while(line: str, said_at: datetime) -> list[datetime]:
    """ "in 20 minutes", "in an hour", counted from when the line was said."""
    moments = []
    for match in _IN_A_WHILE.finditer(line):
        amount = {"a": 1.0, "an": 1.0, "half an": 0.5}.get(match[1].lower()) or float(match[1])
        unit = 60 if match[2].lower().startswith("m") else 3600
        moments.append(said_at + timedelta(seconds=amount * unit))
    return moments


def ahead_of_time(line: str) -> list[timedelta]:
    """How long before the time it names a line asks for something ("leave 2h before")."""
    spans = []
    for match in _BEFORE.finditer(line):
        amount = {"a": 1.0, "an": 1.0, "one": 1.0, "two": 2.0, "three": 3.0}.get(match[1].lower())
        if amount is None:
            amount = 0.5 if match[1].lower().startswith("half") else float(match[1])
        spans.append(timedelta(minutes=amount * (1 if match[2].lower().startswith("m") else 60)))
    return spans
