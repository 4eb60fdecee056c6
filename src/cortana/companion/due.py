"""What is due soon: the times in the user's notes, worked out against the local time.

Small models cannot do clock arithmetic: shown "Take the pizza out at 18:30"
and "Local time: 18:25", the 1.5B model wrote both down and still answered
that nothing was due. So the check-in gets the arithmetic done for it: every
line of working memory (and of the recent messages) that names a time is read
for its day and its time, and the ones falling within the next hour are listed
with how long until they are due.

- Days: today, tomorrow, a weekday ("Friday", "Fri", "weds"; "next Monday" in a
  message said on a Monday: a week on), weekdays/weekends, a date ("4 December",
  "Dec 3rd", "22/12", "2026-12-23", "the 25th", "NYE", "Christmas Eve"; in "next
  Monday (25th)" the date says which Monday; "sun roast" opening a note is
  Sunday's; "3x a day ... course ends sat 27th" is every day until then). A date
  something was moved *from*, and the days named before what it was moved *to*,
  are not its days.
- Times: ``15:00``, ``3pm``, ``3:30 p.m.``, "1045 Tues", "half past three",
  "half 4" (4:30), "quarter to nine", "at 11", "@ 9", "before 11", "~9", "9ish",
  "around 9", "noon"; a range ("12:30-1pm", "2-3pm", "btw 1-2") is its start; a
  part of the day ("morning", "evening", "tonight") when no time is named, but
  not "this afternoon", which only says which day; "midnight" ends the day
  named; "at 2 or 3?" and "09:15, 13:40 or 18:00" are a choice, none of them
  due; a line naming only another month ("July hols") is not about today. "in 20
  minutes" in a message counts from when it was said; "leave 2h before" makes a
  time due that much earlier too (on a line of its own, the time of the line
  above: "online check-in opens 24h before"). A reply's promise ("I'll remind
  you at 11:35") is listed with the message it answers.
- Am or pm, when not written: the half of the day named nearest the hour, in its
  clause (evening, dinner, bed, tonight, a pm time: after noon; morning,
  breakfast, an am time: before); in a message naming no day, the first one
  after it was said ("at 7" said at 17:35 is 19:00, "quarter past six" said at
  04:50 is 06:15); 5 and 6 with an early start (early shift, alarm) in the
  morning; on a line that writes a morning time on a 24-hour clock ("flight
  09:05, leave 6:45"), the morning; else the waking hours ("at 9" is 09:00, "at
  5:15" is 17:15).
- Left out: text struck out (``~~...~~``); lines marked done, cancelled, off,
  submitted or with a tick, or paid when paying is the task ("slot 12:30-1pm,
  already paid" is still due); opening hours that ask for nothing ("gym closes
  at 10pm", "8am-8pm Sun, 7am-10pm Mon-Sat"; but "closes the portal 5pm fri" is
  a deadline); a reply that drops what it promised ("I'll drop that 3 o'clock
  check-in"); and what a message of today says was done or moved ("took my
  thyroid pill early today", "got pushed to next Monday", "just got off the
  phone with the plumber"): the notes sharing a word with it or the reply to it
  (pills, meds and tablets are one word), or due at a time it names ("my 8
  o'clock pills").

It reads text, so it can be wrong; what it lists is a hint the model checks
against the notes, never an action.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from cortana.agent.extensions import TurnExtension
from cortana.companion.heartbeat import CHECK_IN_NAME, Clock, SystemClock
from cortana.companion.when import MONTHS, WEEKDAYS, after_a_while, ahead_of_time, days_named, times_named
from cortana.messages import is_users_own
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

_NOT_YET = r"(?<!be )(?<!when )(?<!once )(?<!only )(?<!not )(?<!n't )(?<!half )"
"""Before "done": "should be done", "when done", "only done half" say it is not."""
_SETTLED = re.compile(
    r"\b(" + _NOT_YET + r"done(?! by\b| at\b| around\b| before\b| in\b| half)|cancel+ed|finished|completed"
    r"|went well|took place|already(?! paid)|no longer|(?:is|are|'s) off|called off|submitted|handed in"
    r"|(?:I'll|I will) (?:drop|skip|scrap|cancel) (?:that|the|this|your)\b[^.;]*?\b(?:check-in|reminder|nudge)"
    r"|won't (?:remind|check))\b"
    r"|[\u2713\u2714\u2611\u2705]",  # a tick
    re.IGNORECASE,
)
_OPENING_HOURS = re.compile(
    r"\b(?:closes|closing|shuts)(?:\s+at)?\s+\d|\b(?:open (?:till|until|late)|opening hours)\b"
    r"|\d\s*(?:[ap]m)?\s*-\s*\d{1,2}(?::\d\d)?\s*(?:[ap]m)?\s+(?:mon|tue|wed|thu|fri|sat|sun)\w*\s*-\s*(?:mon|tue|wed|thu|fri|sat|sun)"
    r"|\d\s*(?:[ap]m)?\s*-\s*\d{1,2}(?::\d\d)?\s*(?:[ap]m)?\s+(?:mon|tue|wed|thu|fri|sat|sun)\w*\s*,",
    re.IGNORECASE,
)
_TASK = re.compile(
    r"\b(before|by|get|pick(?:\s?-?up)?|collect|buy|return|drop|post|send|need|must|remember|go|grab|call|ring|book"
    r"|renew)\b",
    re.IGNORECASE,
)
"""A line naming opening hours is a fact about a place, not a task, unless it asks for one of these."""
_STRUCK = re.compile(r"~~.*?~~")
_PAID = re.compile(r"\bpaid\b", re.IGNORECASE)
_PAYING = re.compile(r"\b(pay|payment|bill|rent|invoice|fee|fine|tax)\b|[£$€]\s?\d", re.IGNORECASE)


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
    asked: bool = False,
) -> list[Due]:
    """The lines that fall due between ``grace`` ago and ``within`` from ``now``, soonest first.

    Args:
        lines: notes, one per line (a string is split into lines).
        now: the local time.
        said_at: when the lines were written: "tomorrow" counts from its day, "in 20 minutes"
            from it, and an hour without am or pm that names no day is the first one after it;
            default: notes of no known time ("tomorrow" counts from today; "in 20 minutes"
            is not read).
        asked: the lines ask for a reminder ("I'm done with work, remind me at 6"): what they
            say was done is something else, so such words do not leave them out.
    """
    items = lines.splitlines() if isinstance(lines, str) else list(lines)
    found: list[Due] = []
    above: list[datetime] = []  # the times of the last line that named one: "check-in opens 24h before" them
    above_text = ""
    for raw in items:
        line = _STRUCK.sub(" ", " ".join(raw.split())).lstrip("-*• ").strip()  # struck out: done with
        if not line or (_settled(line) and not asked) or (_OPENING_HOURS.search(line) and not _TASK.search(line)):
            continue
        days, named = days_named(line, now, said_at.date() if said_at else now.date(), said_at is not None)
        after = None
        if said_at is not None and not named and said_at.date() == now.date():
            after = max(said_at - _JUST_BEFORE, said_at.replace(hour=0, minute=0)).time()
        times = times_named(line, after)
        later = after_a_while(line, said_at) if said_at is not None else []
        early = ahead_of_time(line)
        borrowed = not times and not named and bool(early and above)  # "check-in opens 24h before"
        if not times and not later and not borrowed:
            continue
        try:
            named_times = [
                datetime.combine(day, datetime.min.time(), tzinfo=now.tzinfo) + timedelta(hours=hour, minutes=minute)
                for day in days
                for hour, minute in times
            ]
            moments = [moment - ahead for moment in (above if borrowed else named_times) for ahead in early]
        except OverflowError:  # "9999-12-31 midnight": past the calendar's end, so never due; the other lines are
            continue
        moments += named_times + later
        text = f"{line} (before: {above_text})" if borrowed else line
        if named_times:
            above, above_text = named_times, line
        near = [moment for moment in moments if -grace <= moment - now <= within]
        if near:
            found.append(Due(min(near), text[:MAX_LINE_CHARS]))
    return sorted(found, key=lambda due: due.when)[:MAX_ITEMS]


def due_text(items: Sequence[Due], now: datetime) -> str | None:
    """The context block for ``items``; ``None`` when there are none."""
    if not items:
        return None
    lines = ["Due soon, from your notes and the user's messages (worked out from the local time):"]
    lines.extend(f"- {item.describe(now)}" for item in items)
    return "\n".join(lines)  # untrusted notes and messages: the run escapes the block (cortana.prompts.as_data)


_CALLED_OFF = re.compile(
    r"\b(no need|never ?mind|forget (?:it|that|about)|don'?t (?:need to )?remind|cancel|called off|not any ?more)\b",
    re.IGNORECASE,
)
_DONE_SAID = re.compile(
    r"\b(took|taken|had my|" + _NOT_YET + r"done(?! half)|finished|already|picked (?:\w+ )?up|collected"
    r"|(?:just|got) back from|paid|sent|emailed|mailed|posted|submitted|handed in|got off the phone"
    r"|spoke (?:to|with)|talked (?:to|with)|heard back|all sorted)\b",
    re.IGNORECASE,
)
_MOVED_SAID = re.compile(
    r"\b(moved|rescheduled|postponed|pushed|put off|delayed|called off|cancel+ed)\b", re.IGNORECASE
)
_REMIND = re.compile(r"\b(remind|nudge|ping)\s+me\b", re.IGNORECASE)
_ASKS = re.compile(r"\b(remind|nudge|ping|check (?:in|on))\b|\?", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z-]*[a-z]", re.IGNORECASE)
_COMMON_WORDS = """the and for with from that this then than they them their there have has had just got get not but
    are was were you your yours i've you've i'll it's its about after before again every today tonight tomorrow
    morning afternoon evening night week weekend time minute hour later early now next last done took taken take
    takes finished already back went called paid sent moved pushed put off delayed remind reminder noted sure thanks
    okay please will would can could should what when where how all our out one two day days appointment meeting
    call"""
_COMMON = frozenset([*_COMMON_WORDS.split(), *WEEKDAYS, *MONTHS])
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
                request = messages[index - 1][1] if index and messages[index - 1][0] == "user" else ""
                found.extend(_answering(item, request) for item in due_soon(text, now, said_at=said_at))
            skip_reply = False
            continue
        if _CALLED_OFF.search(text) or _SETTLED.search(text):
            found = []  # what was asked for before is called off; this message may still ask for more
        done, moved = _DONE_SAID.search(text), _MOVED_SAID.search(text)
        if (done or moved) and not _ASKS.search(text) and said_at.date() == now.date() and said_at <= now:
            reply = messages[index + 1][1] if index + 1 < len(messages) and messages[index + 1][0] != "user" else ""
            about, at = _words(text) | _words(reply), set(times_named(text))
            ahead = _DONE_AHEAD if done and not moved else None
            kept = [item for item in kept if _still_due(item, about, at, said_at, ahead)]
            found = [item for item in found if _still_due(item, about, at, said_at, ahead)]
            skip_reply = bool(done and not moved)
            if skip_reply:
                continue
        reminder = bool(_REMIND.search(text)) and not _CALLED_OFF.search(text)
        found.extend(due_soon(text, now, said_at=said_at, asked=reminder))
    return kept + found


def _answering(item: Due, asked: str) -> Due:
    """A promise in a reply ("I'll remind you at 11:35"), shown with what it answers ("move the wash")."""
    if not asked:
        return item
    asked = " ".join(asked.split())
    room = max(MAX_LINE_CHARS - len(item.text) - 16, 40)
    asked = asked if len(asked) <= room else asked[: room - 3] + "..."
    return Due(item.when, f'{item.text} (asked: "{asked}")')


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
        said: list[StoredMessage] = []
        in_check_in = False  # a check-in's own words run from its note to the user's next message
        for stored in await self.memory.messages(thread):
            message = stored.message
            if stored.kind != "message":
                continue
            if message.name == CHECK_IN_NAME:
                in_check_in = True
            elif is_users_own(message):
                in_check_in = False
                said.append(stored)
            elif message.role == "assistant" and not message.name and not message.tool_calls and not in_check_in:
                said.append(stored)
        said = said[-self.recent :]
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
