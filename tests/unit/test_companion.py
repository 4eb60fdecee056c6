"""The companion on real SQLite: the time line, check-ins that leave no trace, unattended calls, reflection."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cortana import Agent, AgentCheckIn, Heartbeat, LocalTime, PermissionGate, Reflection, ThreadRef, tool
from cortana.companion import ManualClock, last_reflected, local_time_text
from cortana.companion.companion import CHECK_IN_NOTE, reflection_section
from cortana.memory.sqlite import SQLiteMemory
from cortana.testing import ScriptedModel, tool_call, tool_call_response

ZONE = timezone(timedelta(hours=1))
THREAD = ThreadRef(resource_id="cli", thread_id="one")


def at(hour: int, minute: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=ZONE)


async def beat(clock: ManualClock, heartbeat: Heartbeat, seconds: float) -> None:
    """Move the clock to the next beat and wait for its check-in, which does real I/O (SQLite), to end."""
    runs = len(heartbeat.history)
    await clock.advance(seconds)
    for _ in range(500):
        if len(heartbeat.history) > runs and not heartbeat.checking_in:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the check-in did not end")


@pytest.fixture
def memory(tmp_path: Path) -> SQLiteMemory:
    store = SQLiteMemory(tmp_path / "memory.db")
    yield store
    store.close()


@pytest.mark.parametrize(
    ("previous", "words"),
    [
        (at(14, 48), ""),  # a reply 12 minutes on: nobody was away
        (at(13, 30), "; the user last wrote 1 hour ago (13:30)."),
        (at(9), "; the user last wrote 6 hours ago (09:00)."),
        (at(15) - timedelta(days=3), "; the user last wrote 3 days ago (Saturday 28 November, 15:00)."),
        (None, "; the user writes for the first time."),
    ],
)
def test_the_time_line_says_the_local_time_and_the_time_away(previous: datetime | None, words: str) -> None:
    text = local_time_text(at(15), previous)
    assert text == "Local time: Tuesday 1 December 2026, 15:00 (UTC+01:00)" + (words or ".")


async def test_the_time_away_is_read_from_memory_across_sessions_and_joins_the_context(memory: SQLiteMemory) -> None:
    clock = ManualClock(datetime.now(ZONE))
    model = ScriptedModel(["Hi.", "Hello again."])
    first = Agent(model, memory=memory, extensions=[LocalTime(memory, clock=clock)])
    await first.run("hello", thread=THREAD)
    assert "the user writes for the first time." in model.requests[0].messages[-1].content
    # a later session, in a new thread of the same resource, three hours on
    await clock.advance(3 * 3600 + 60)
    second = Agent(model, memory=memory, extensions=[LocalTime(memory, clock=clock)])
    await second.run("me again", thread=ThreadRef(resource_id="cli", thread_id="two"))
    sent = model.requests[1].messages[-1].content
    assert "the user last wrote 3 hours ago" in sent and sent.endswith("me again")
    assert model.requests[1].messages[0].role != "system" or "Local time" not in model.requests[1].messages[0].content


async def test_a_heartbeat_ok_check_in_leaves_no_trace_and_a_message_is_kept(memory: SQLiteMemory) -> None:
    model = ScriptedModel(["Sure, noted.", "`HEARTBEAT_OK.`", "Your call with Sam starts in ten minutes."])
    agent = Agent(model, memory=memory)
    await agent.run("Remind me of my call with Sam at 15:00.", thread=THREAD)
    before = [stored.message for stored in await memory.messages(THREAD)]
    check_in = AgentCheckIn(agent, lambda: THREAD)
    clock = ManualClock(at(14, 20))
    shown: list[str] = []
    async with Heartbeat(check_in, interval_seconds=1200, on_message=shown.append, clock=clock) as heartbeat:
        await beat(clock, heartbeat, 1200)  # nothing due: HEARTBEAT_OK
        assert [stored.message for stored in await memory.messages(THREAD)] == before
        assert shown == [] and heartbeat.history[-1].reply == "`HEARTBEAT_OK.`"
        await beat(clock, heartbeat, 1200)  # due: said, shown and kept
    assert shown == ["Your call with Sam starts in ten minutes."]
    # the check-in saw the conversation
    assert "Remind me of my call with Sam" in model.requests[1].messages[-3].content
    after = [stored.message for stored in await memory.messages(THREAD)]
    assert after[: len(before)] == before
    note, reply = after[len(before) :]
    assert (note.role, note.name, note.content) == ("user", "heartbeat", CHECK_IN_NOTE)
    assert (reply.role, reply.content) == ("assistant", "Your call with Sam starts in ten minutes.")
    # a stand-in is not the user speaking: the time away still counts from the user's own message
    last = await memory.last_user_message_at("cli")
    assert last is not None and last < time.time() + 1
    stored = await memory.messages(THREAD)
    assert last == stored[0].created_at


async def test_the_loops_own_words_in_a_check_in_are_not_the_user_speaking(memory: SQLiteMemory) -> None:
    # The check-in's first reply is empty: the loop asks again in the user's role (name "cortana"), and the
    # check-in stores that stand-in with its answer. The time away still counts from the user's own message.
    model = ScriptedModel(["Sure, noted.", "", "Your call with Sam starts in ten minutes."])
    agent = Agent(model, memory=memory)
    await agent.run("Remind me of my call with Sam at 15:00.", thread=THREAD)
    check_in = AgentCheckIn(agent, lambda: THREAD)
    clock = ManualClock(at(14, 40))
    async with Heartbeat(check_in, interval_seconds=1200, on_message=lambda text: None, clock=clock) as heartbeat:
        await asyncio.sleep(0.05)  # the stand-ins are stored a moment after the user's message
        await beat(clock, heartbeat, 1200)
    stored = await memory.messages(THREAD)
    assert [(s.message.role, s.message.name) for s in stored if s.message.role == "user"] == [
        ("user", None), ("user", "heartbeat"), ("user", "cortana")
    ], "the loop's own stand-in was stored with the check-in"  # fmt: skip
    assert await memory.last_user_message_at("cli") == stored[0].created_at


async def test_an_ask_in_a_check_in_is_refused_never_approved(memory: SQLiteMemory) -> None:
    written: list[str] = []
    approvals: list[str] = []

    @tool
    def write_note(text: str) -> str:
        """Write a note to disk."""
        written.append(text)
        return "written"

    def approve(call: object, tool: object, reason: str | None) -> bool:
        approvals.append(str(reason))
        return True

    model = ScriptedModel(
        [tool_call_response(tool_call("write_note", text="ten o'clock")), "I could not write the note."]
    )
    agent = Agent(model, tools=[write_note], memory=memory, permissions=PermissionGate(default="ask", approve=approve))
    reply = await AgentCheckIn(agent, THREAD)("checklist")
    assert written == [] and approvals == []
    result = model.requests[1].messages[-1]
    assert result.role == "tool" and result.is_error and "nobody is there" in result.content
    assert reply == "I could not write the note."


async def test_a_check_in_runs_without_the_agents_own_extensions(memory: SQLiteMemory) -> None:
    class Loud(LocalTime):
        async def context(self, thread: ThreadRef, prompt: str) -> str | None:
            return "SEARCH RESULTS FOR THE CHECKLIST"

    model = ScriptedModel(["HEARTBEAT_OK"])
    agent = Agent(model, memory=memory, extensions=[Loud(memory)])
    await AgentCheckIn(agent, THREAD, extensions=[LocalTime(memory)])("checklist")
    sent = model.requests[0].messages[-1].content
    assert "Local time:" in sent and "SEARCH RESULTS" not in sent


REPLY = """Open threads:
- The call with Sam on Friday.
- **Fixing** the flaky test in test_io.py
Curious about:
- none
How to be with the user:
* Short answers, no emoji.
"""


async def test_reflection_writes_its_section_keeps_the_rest_and_skips_when_nothing_is_new(memory: SQLiteMemory) -> None:
    await memory.set_working_memory(THREAD, "# Notes\n- The user's name is Ana.\n")
    model = ScriptedModel(["Noted.", REPLY])
    agent = Agent(model, memory=memory)
    await agent.run("I have a call with Sam on Friday; keep answers short.", thread=THREAD)
    clock = ManualClock(datetime.now(ZONE))
    reflect = Reflection(agent, memory, THREAD, clock=clock)
    section = await reflect()
    assert section is not None
    notes = await memory.get_working_memory(THREAD)
    assert notes.startswith("# Notes\n- The user's name is Ana.\n")
    assert "Open threads:\n- The call with Sam on Friday.\n- Fixing the flaky test in test_io.py" in notes
    assert "Curious about:\n- none\nHow to be with the user:\n- Short answers, no emoji." in notes
    prompt = model.requests[1].messages[0].content
    assert "The user's name is Ana." in prompt and "I have a call with Sam on Friday" in prompt
    assert "<context>" not in prompt
    stamp = last_reflected(notes, clock)
    assert stamp is not None and abs((stamp - clock.now()).total_seconds()) < 60
    # nothing said since: no model call, nothing changed
    await clock.advance(120)
    assert await reflect() is None
    assert len(model.requests) == 2
    # something new: the section is replaced, not repeated
    model.add(
        "Fine.", "Open threads:\n- none\nCurious about:\n- Which team Sam is on.\nHow to be with the user:\n- none"
    )
    await agent.run("Sam moved the call.", thread=THREAD)
    await clock.advance(120)
    assert await reflect() is not None
    notes = await memory.get_working_memory(THREAD)
    assert notes.count("## Reflection") == 1 and "Which team Sam is on." in notes and "Friday" not in notes
    assert "The user's name is Ana." in notes
    assert "Sam moved the call." in model.requests[3].messages[0].content
    assert "I have a call with Sam on Friday" not in model.requests[3].messages[0].content


def test_a_reflection_reply_without_the_lists_changes_nothing_and_items_are_bounded() -> None:
    assert reflection_section("I reviewed the conversation and all is well.", at(9)) is None
    many = "Open threads:\n" + "\n".join(f"- item {n} " + "x" * 500 for n in range(9))
    section = reflection_section(many, at(9))
    assert section is not None
    items = [line for line in section.splitlines() if line.startswith("- item")]
    assert len(items) == 5 and all(len(line) <= 202 for line in items)


def test_a_first_list_under_another_heading_counts_and_copied_hints_and_known_notes_are_left_out() -> None:
    reply = (
        "# Notes\n- The user works on a Python project.\n- Fix the flaky test before Friday.\n\n"
        "# Curious about\n- (something you would like to ask the user about next time)\n- How Miso the cat is.\n"
        "# How to be with the user\n- Short answers.\n# Extra\n- not ours"
    )
    section = reflection_section(reply, at(9), known="# Notes\n- The user works on a Python project.")
    assert section is not None
    assert section.splitlines()[1:] == [
        "Open threads:",
        "- Fix the flaky test before Friday.",
        "Curious about:",
        "- How Miso the cat is.",
        "How to be with the user:",
        "- Short answers.",
    ]


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ('{\n  "name": "Is a reminder due?",\n  "arguments": {}\n}', "a tool call written as text"),
        ("(The model gave no answer. This turn ran 5 tool call(s): unknown_tool ×3.)", "no answer"),
        ("Yes, I have the tool results you need above.", "its prompt read back"),
        ("The user asked: Go through this checklist using what you know about the user", "its prompt read back"),
        (",\n" * 50, "no words"),  # the 0.5B model's reply to a check-in of held-out set 9
        ("... --- ...", "no words"),
        ("Your call with Sam starts in ten minutes.", None),
        ("17:50", None),
    ],
)
def test_replies_that_are_no_message_are_told_apart(reply: str, why: str | None) -> None:
    from cortana.companion.companion import _loop_prompts, not_a_message
    from cortana.prompts import prompt_text

    assert not_a_message(reply, [prompt_text("heartbeat"), *_loop_prompts()]) == why


def test_a_reminder_that_names_its_item_is_a_message_whatever_else_it_copies() -> None:
    from cortana.companion.companion import not_a_message
    from cortana.prompts import prompt_text

    reply = "Reminder: the vet appointment at 17:50. Due soon, from your notes and the user's messages say is due now."
    prompts = [prompt_text("heartbeat_due")]
    assert not_a_message(reply, prompts) == "its prompt read back"
    assert not_a_message(reply, prompts, items=["Vet appointment for the cat at 17:50 today"]) is None


async def test_a_check_in_that_is_no_message_is_dropped_and_leaves_no_trace(memory: SQLiteMemory) -> None:
    model = ScriptedModel(['{"name": "check_in", "arguments": {"due": "no"}}'])
    check_in = AgentCheckIn(Agent(model, memory=memory), THREAD)
    assert await check_in("checklist") == "HEARTBEAT_OK"
    assert await memory.messages(THREAD) == []
