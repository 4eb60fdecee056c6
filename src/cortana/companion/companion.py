"""The companion: the local time in every turn, check-ins that leave no trace, and reflection.

- :class:`LocalTime` is a turn extension: every turn's ``<context>`` says the local
  time and how long the user was away since their previous message (read from
  memory, so it counts across sessions). It never touches the system prompt, so
  the prefix the engine has cached stays byte-identical.
- :class:`AgentCheckIn` is the heartbeat's ``check_in`` for an agent: one turn on
  the user's conversation that nobody attends (a call the permission gate would
  ask about is refused) and that is stored only when it is a message, so a
  ``HEARTBEAT_OK`` leaves nothing behind.
- :class:`Reflection` is the heartbeat's ``reflect``: it reviews the
  conversations since the last reflection and writes a short section of working
  memory (open threads, what it is curious about, how to be with the user),
  replacing the previous one and leaving the rest of working memory as it is.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from cortana.agent.compaction import render_transcript
from cortana.agent.extensions import TurnExtension
from cortana.companion.due import DueMemory, DueSoon
from cortana.companion.heartbeat import CHECK_IN_NAME, HEARTBEAT_OK, Clock, SystemClock, away_text, is_heartbeat_ok
from cortana.memory.base import resolve_memory
from cortana.messages import Message, RunResult, ThreadRef, is_users_own
from cortana.models.base import ModelRequest, ModelSettings, complete
from cortana.prompts import prompt_text, strip_turn_context

if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.memory.stored import StoredMessage

__all__ = [
    "CHECK_IN_NOTE",
    "REFLECTION_HEADING",
    "AgentCheckIn",
    "LocalTime",
    "Reflection",
    "companion_check_in",
    "last_reflected",
    "local_time_text",
    "not_a_message",
]

log = logging.getLogger("cortana.heartbeat")


def _loop_prompts() -> list[str]:
    """What the loop itself says to the model, which small models read back as their answer."""
    return [prompt_text(name).replace("{prompt}", "") for name in ("repeat_nudge", "empty_answer")]


CHECK_IN_NOTE = "(A scheduled check-in: the user said nothing; you wrote to them first.)"
"""What a delivered check-in stores in the user's place, so the conversation reads as it happened."""
REFLECTION_HEADING = "## Reflection"
REFLECTION_LISTS = ("Open threads", "Curious about", "How to be with the user")
AWAY_AFTER = timedelta(hours=1)
"""How long since the user's previous message before the turn's time line says how long they were away."""
MAX_ITEMS = 5
MAX_ITEM_CHARS = 200
MAX_CONVERSATION_CHARS = 12_000
"""The most conversation text one reflection reads (the newest part): a small model's window is small."""


class LastHeard(Protocol):
    """Where the time of the user's previous message comes from (``SQLiteMemory`` has it)."""

    async def last_user_message_at(self, resource_id: str) -> float | None:
        """A Unix time, or ``None`` when the user never wrote."""
        ...


_WORD = re.compile(r"[a-z0-9_']+")
ECHO_WORDS = 6
"""A reply sharing this many words in a row with a prompt of ours is an echo of it, not a message."""


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def not_a_message(reply: str, prompts: Sequence[str], *, items: Sequence[str] = ()) -> str | None:
    """Why a check-in's reply is no message for the user (``None`` when it is one).

    A reply that names one of ``items`` (the notes due soon: three of their words in a row) is a
    message whatever else it copies.

    Small models answer a check-in with a tool call written as JSON, the loop's own note that
    the model gave no answer, punctuation without a word, or their prompt read back ("Yes, I
    have the tool results you need above"): measured on the 0.5B model, 39 of its 40 replies to
    development check-ins with nothing due. Shown every half hour, those would be noise.
    """
    text = reply.strip()
    if not re.search(r"[^\W_]", text):
        return "no words"  # the 0.5B model once answered a check-in with fifty lines of commas
    if text.startswith(("{", "[", "<tool_call>", "```json")):
        return "a tool call written as text"
    if text.startswith("(The model gave no answer"):
        return "no answer"
    words = _words(text)
    threes = {tuple(words[i : i + 3]) for i in range(len(words) - 2)}
    for item in items:
        said = _words(item)
        if any(tuple(said[i : i + 3]) in threes for i in range(len(said) - 2)):
            return None
    runs = {tuple(words[i : i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)}
    for prompt in prompts:
        said = _words(prompt)
        if any(tuple(said[i : i + ECHO_WORDS]) in runs for i in range(len(said) - ECHO_WORDS + 1)):
            return "its prompt read back"
    return None


def local_time_text(now: datetime, previous: datetime | None) -> str:
    """The companion's line: the local time, and how long the user was away when it was a while.

    The time away is said from ``AWAY_AFTER`` on: "2 minutes ago" tells the model nothing, and
    given the time away every turn the 0.5B model answered each message from the second on by
    repeating it (bench/prefix_cache.py --via local_time, 47 minutes between turns; the 1.5B
    model answered them all right).
    """
    offset = now.strftime("%z")
    zone = f"UTC{offset[:3]}:{offset[3:]}" if offset else "local"
    line = f"Local time: {now:%A} {now.day} {now:%B %Y, %H:%M} ({zone})"
    if previous is None:
        return f"{line}; the user writes for the first time."
    if now - previous < AWAY_AFTER:
        return f"{line}."
    away = (now - previous).total_seconds()
    when = (
        f"{previous:%H:%M}" if previous.date() == now.date() else f"{previous:%A} {previous.day} {previous:%B, %H:%M}"
    )
    return f"{line}; the user last wrote {away_text(away)} ago ({when})."


class LocalTime(TurnExtension):
    """A turn extension: the local time and the time away in each turn's ``<context>``.

    Args:
        memory: where the user's previous message time is read (``SQLiteMemory``).
        clock: the local time (tests pass a ``ManualClock``).
    """

    name = "local_time"

    def __init__(self, memory: LastHeard, *, clock: Clock | None = None) -> None:
        self.memory = memory
        self.clock: Clock = clock or SystemClock()

    async def last_heard(self, resource_id: str) -> datetime | None:
        """When the user last wrote (local time), from memory."""
        at = await self.memory.last_user_message_at(resource_id)
        now = self.clock.now()
        return datetime.fromtimestamp(at, tz=now.tzinfo) if at is not None else None

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """The lines for this turn (gathered before the turn's own message is stored)."""
        return local_time_text(self.clock.now(), await self.last_heard(thread.resource_id))


class CompanionMemory(LastHeard, DueMemory, Protocol):
    """What the companion's check-in reads (``SQLiteMemory`` has it)."""


def companion_check_in(
    agent: Agent,
    memory: CompanionMemory,
    thread: ThreadRef | Callable[[], ThreadRef],
    *,
    clock: Clock | None = None,
    durable: bool = False,
) -> AgentCheckIn:
    """The check-in the ``cortana`` command runs: the local time and what is due soon join it, and
    something due turns the checklist into a reminder (see :class:`AgentCheckIn`)."""
    due = DueSoon(memory, clock=clock)
    return AgentCheckIn(agent, thread, extensions=[LocalTime(memory, clock=clock), due], due=due, durable=durable)


class AgentCheckIn:
    """The heartbeat's ``check_in`` for ``agent``: a turn on the user's thread, kept only if it says something.

    Args:
        agent: the agent (its memory, tools and permission gate).
        thread: the user's conversation, or a function returning it (it changes with ``/clear``).
        extensions: the turn extensions of a check-in (default: none; pass :class:`LocalTime`
            so it knows the time). The agent's own are left out: a search of the workspace for
            the checklist's words would only add noise.
        due: what is due soon. When it lists something the user was not yet reminded of, the
            check-in's prompt asks for a reminder (``prompts/heartbeat_due.md``) instead of the
            checklist: shown the list and told to answer ``HEARTBEAT_OK`` when nothing is due, the
            1.5B model answered ``HEARTBEAT_OK`` every time (0 of 10). Include it in ``extensions``
            too, so the model sees the list.
        durable: run each check-in as a durable run (``cortana.durable``), its id ``check-in-`` and a random
            part: one cut off is listed by ``cortana.durable.unfinished()`` and finished by
            ``cortana.durable.resume_run(agent, run_id, extensions=check_in.extensions)``, no finished tool call
            run again.
    """

    def __init__(
        self,
        agent: Agent,
        thread: ThreadRef | Callable[[], ThreadRef],
        *,
        extensions: Sequence[TurnExtension] = (),
        due: DueSoon | None = None,
        durable: bool = False,
    ) -> None:
        self.agent = agent
        self._thread = thread
        self.extensions = tuple(extensions)
        self.due = due
        self.durable = durable
        self.last_result: RunResult | None = None
        """The latest check-in's run (its metrics, its tool calls)."""

    @property
    def thread(self) -> ThreadRef:
        """The thread the next check-in runs on."""
        return self._thread() if callable(self._thread) else self._thread

    async def __call__(self, prompt: str) -> str:
        """Run one check-in with ``prompt``; store it on the thread unless it is ``HEARTBEAT_OK``.

        A reply that is no message for the user (:func:`not_a_message`: a tool call written as
        text, the prompt read back) is logged and answered as ``HEARTBEAT_OK``, so it is dropped.
        """
        thread = self.thread
        due = await self.due.items(thread) if self.due is not None else []
        if due:
            prompt = prompt_text("heartbeat_due")
        # A reminder needs no tools: offered them, the 1.5B model "wrote" reminders to files.
        run_id = f"check-in-{uuid.uuid4().hex}" if self.durable else None
        result = await self.agent.run(
            prompt,
            thread=thread,
            remember=False,
            unattended=True,
            extensions=self.extensions,
            use_tools=not due,
            run_id=run_id,
        )
        self.last_result = result
        reply: str = result.output.strip()
        why = (
            not_a_message(reply, [prompt, *_loop_prompts()], items=[item.text for item in due])
            if reply and not is_heartbeat_ok(reply)
            else None
        )
        if why is not None:
            log.info("a check-in's reply was dropped (%s): %.200r", why, reply)
            return HEARTBEAT_OK
        if reply and not is_heartbeat_ok(reply):
            if self.due is not None:
                self.due.mark_reminded(due)
            memory = await resolve_memory(self.agent.memory, thread)
            if memory is not None:
                note = Message(role="user", name=CHECK_IN_NAME, content=CHECK_IN_NOTE)
                await memory.append_messages(thread, [note, *result.new_messages[1:]])
        return reply


class ReflectionMemory(Protocol):
    """What a reflection reads and writes (``SQLiteMemory`` has it)."""

    async def threads(self, resource_id: str) -> list[tuple[ThreadRef, float]]:
        """The resource's threads, newest first, with their update time."""
        ...

    async def messages(self, thread: ThreadRef) -> list[StoredMessage]:
        """Every stored message of a thread, oldest first."""
        ...

    async def get_working_memory(self, thread: ThreadRef) -> str:
        """The working memory seen in ``thread``."""
        ...

    async def set_working_memory(self, thread: ThreadRef, content: str) -> None:
        """Replace the working memory seen in ``thread``."""
        ...


_STAMP = re.compile(rf"^{re.escape(REFLECTION_HEADING)} \((\d{{4}}-\d\d-\d\d \d\d:\d\d)\)\s*$", re.MULTILINE)


def last_reflected(working_memory: str, clock: Clock | None = None) -> datetime | None:
    """When the reflection section of ``working_memory`` was written (its heading says), or ``None``."""
    match = _STAMP.search(working_memory)
    if match is None:
        return None
    now = (clock or SystemClock()).now()
    try:
        return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M").replace(tzinfo=now.tzinfo)
    except ValueError:
        return None


class Reflection:
    """The heartbeat's ``reflect``: conversations since the last reflection, reviewed into working memory.

    Args:
        agent: whose engine writes the reflection (one plain model call, no tools).
        memory: the conversations and the working memory.
        thread: where working memory is read and written (its resource's threads are reviewed);
            a function returning it, when it changes.
        clock: the local time (for the section's heading).
    """

    def __init__(
        self,
        agent: Agent,
        memory: ReflectionMemory,
        thread: ThreadRef | Callable[[], ThreadRef],
        *,
        clock: Clock | None = None,
    ) -> None:
        self.agent = agent
        self.memory = memory
        self._thread = thread
        self.clock: Clock = clock or SystemClock()
        self.reviewed_to: float | None = None
        """The time of the newest message reviewed in this process (the section's heading, to the
        minute, says it across sessions)."""

    @property
    def thread(self) -> ThreadRef:
        """The thread whose working memory the next reflection writes."""
        return self._thread() if callable(self._thread) else self._thread

    async def __call__(self) -> str | None:
        """Reflect once; returns a note of what it did (``None`` when there was nothing new)."""
        thread = self.thread
        notes = await self.memory.get_working_memory(thread)
        stamp = last_reflected(notes, self.clock)
        since = self.reviewed_to if self.reviewed_to is not None else stamp.timestamp() if stamp else 0.0
        conversation, newest = await self._recent(thread.resource_id, since)
        if not conversation:
            return None
        prompt = prompt_text("reflection").format(
            notes=_without_reflection(notes).strip() or "(none yet)", conversations=conversation
        )
        client = await self.agent.client()
        response = await complete(
            client,
            ModelRequest(messages=[Message.user(prompt)], settings=ModelSettings(temperature=0.2, max_tokens=400)),
        )
        section = reflection_section(response.message.content, self.clock.now(), known=notes)
        if section is None:
            return "the model's reflection had none of the lists; working memory is unchanged"
        await self.memory.set_working_memory(thread, _with_reflection(notes, section))
        self.reviewed_to = newest
        return section

    async def _recent(self, resource_id: str, since: float) -> tuple[str, float]:
        """The resource's messages after ``since`` as text (newest last, at most ``MAX_CONVERSATION_CHARS``),
        and the time of the newest."""
        parts: list[str] = []
        used, newest = 0, since
        for thread, updated in await self.memory.threads(resource_id):
            if updated <= since or used >= MAX_CONVERSATION_CHARS:
                break
            stored = [
                s
                for s in await self.memory.messages(thread)
                if s.created_at > since and s.kind == "message" and s.message.role in ("user", "assistant")
            ]
            shown = [
                Message(role=s.message.role, content=strip_turn_context(s.message.content).strip(), name=s.message.name)
                for s in stored
                if s.message.content.strip() and (s.message.role == "assistant" or is_users_own(s.message))
            ]
            text = render_transcript(shown)
            if not text:
                continue
            newest = max(newest, max(s.created_at for s in stored))
            text = text[-(MAX_CONVERSATION_CHARS - used) :]
            parts.append(text)
            used += len(text)
        return "\n\n---\n\n".join(reversed(parts)), newest


def reflection_section(reply: str, now: datetime, *, known: str = "") -> str | None:
    """The working-memory section from the model's reply: the three lists, bounded; ``None`` without them.

    Items before the first of the headings (the 1.5B model headed its first list "# Notes") go to
    the first list; items already in ``known`` (the notes as they were) are left out.
    """
    lists: dict[str, list[str]] = {name: [] for name in REFLECTION_LISTS}
    already = {_normal(line) for line in known.splitlines() if line.strip()}
    current: str | None = REFLECTION_LISTS[0]
    found = False
    for raw in reply.splitlines():
        line = raw.strip()
        title = line.strip("*#_ ").rstrip(":").strip("*_ ").lower()
        heading = next((name for name in REFLECTION_LISTS if title == name.lower()), None)
        if heading is not None:
            current, found = heading, True
            continue
        if line.startswith("#") and found:
            current = None  # an unknown heading after the known ones: not ours
            continue
        if current is None or not line.startswith(("-", "•", "* ")):
            continue
        item = " ".join(line.lstrip("-•* ").replace("**", "").replace("__", "").split())
        if item.startswith("(") and item.endswith(")"):
            continue  # the form's own hint, copied
        fresh = item and item.lower().rstrip(".") != "none" and _normal(item) not in already
        if fresh and len(lists[current]) < MAX_ITEMS:
            lists[current].append(item[:MAX_ITEM_CHARS])
    if not found:
        return None
    lines = [f"{REFLECTION_HEADING} ({now:%Y-%m-%d %H:%M})"]
    for name, items in lists.items():
        lines.append(f"{name}:")
        lines.extend(f"- {item}" for item in items or ["none"])
    return "\n".join(lines)


def _normal(line: str) -> str:
    return " ".join(_words(line.lstrip("-•* ")))


def _reflection_span(notes: str) -> tuple[int, int] | None:
    """Where the reflection section is in ``notes``: from its heading to the next ``## `` heading or the end."""
    match = _STAMP.search(notes)
    if match is None:
        return None
    following = re.compile(r"^## ", re.MULTILINE).search(notes, match.end())
    return match.start(), following.start() if following else len(notes)


def _without_reflection(notes: str) -> str:
    span = _reflection_span(notes)
    return notes if span is None else notes[: span[0]] + notes[span[1] :]


def _with_reflection(notes: str, section: str) -> str:
    """``notes`` with its reflection section replaced by ``section`` (added at the end when there was none)."""
    span = _reflection_span(notes)
    if span is None:
        return f"{notes.rstrip()}\n\n{section}\n".lstrip()
    return f"{notes[: span[0]]}{section}\n{notes[span[1] :]}".rstrip() + "\n"
