"""What is due soon: times and days read from notes and messages, against the local time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cortana import Agent, ThreadRef
from cortana.companion import DueSoon, due_soon
from cortana.companion.companion import companion_check_in
from cortana.companion.due import due_in_conversation, due_text
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import Message
from cortana.testing import ScriptedModel

ZONE = timezone(timedelta(hours=1))


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=ZONE)  # 1 December 2026 is a Tuesday


@pytest.mark.parametrize(
    ("note", "now", "due"),
    [
        ("- Call the bank at 14:30.", at(1, 14), at(1, 14, 30)),
        ("- Pick up the kids at 3:15", at(1, 14, 40), at(1, 15, 15)),  # no am/pm: the afternoon, as meant
        ("- Yoga at 9:30", at(1, 9), at(1, 9, 30)),
        ("- Dinner with Lee tonight at 8", at(1, 19, 20), at(1, 20)),
        ("- Team call at 4 pm", at(1, 15, 30), at(1, 16)),
        ("- Feed the fish at half past six this evening", at(1, 18), at(1, 18, 30)),
        ("- Lunch with Omar at noon on Friday", at(4, 11, 15), at(4, 12)),
        ("- Haircut on Thursday 3 Dec at 10:00", at(3, 9, 45), at(3, 10)),
        ("- Parcel pickup Dec 2nd, 11am", at(2, 10, 30), at(2, 11)),
        ("- Invoice due 2026-12-08 at 17:00", at(8, 16, 30), at(8, 17)),
        ("- Bins out every Monday at 7pm", at(7, 18, 30), at(7, 19)),
        ("- Stand-up weekdays at 9:15", at(2, 9), at(2, 9, 15)),
        ("- Check-in for the flight opens on Friday at 10:00 (flight Saturday 5 Dec)", at(4, 9, 40), at(4, 10)),
        ("- Water the plants every Sunday morning", at(6, 8, 55), at(6, 9)),
        ("- Pills at 22:00 every day", at(1, 22, 5), at(1, 22)),  # five minutes ago still counts
    ],
)
def test_a_note_due_within_the_hour_is_found(note: str, now: datetime, due: datetime) -> None:
    (item,) = due_soon(note, now)
    assert item.when == due and item.text == note.lstrip("- ")


@pytest.mark.parametrize(
    ("note", "now"),
    [
        ("- Call the bank at 14:30.", at(1, 12)),  # two and a half hours away
        ("- Call the bank at 14:30.", at(1, 15)),  # half an hour ago
        ("- Call the bank at 14:30 (done)", at(1, 14, 15)),
        ("- Book club at 19:00 tonight, cancelled", at(1, 18, 30)),
        ("- Haircut on Thursday 3 Dec at 10:00", at(1, 9, 45)),  # another day
        ("- Dentist Monday 14 Dec at 9:45", at(7, 9, 30)),  # a Monday, but not that Monday
        ("- Stand-up weekdays at 9:15", at(5, 9)),  # a Saturday
        ("- Bins out every Monday at 7pm", at(1, 18, 30)),
        ("- Optician moved from 1 Dec to 8 Dec, still at 11am", at(1, 10, 40)),
        ("- Flight to Oslo on 14 January at 06:40", at(1, 6, 20)),
        ("- Buy a present for Mum", at(1, 10)),  # no time at all
        ("- Release 2.3 ships soon", at(1, 2, 0)),  # a version number is not a time
    ],
)
def test_a_note_that_is_not_due_is_left_out(note: str, now: datetime) -> None:
    assert due_soon(note, now) == []


def test_a_conversation_counts_what_was_asked_what_was_promised_and_what_was_called_off() -> None:
    said = at(1, 14)
    asked = [("user", "Remind me in 45 minutes to take the bread out.", said)]
    (item,) = due_in_conversation(asked, at(1, 14, 30))
    assert item.when == at(1, 14, 45)
    promised = [("user", "Can you check on me later?", said), ("assistant", "Sure, I'll check in at 3.", said)]
    assert [item.when for item in due_in_conversation(promised, at(1, 14, 30))] == [at(1, 15)]
    called_off = [*promised, ("user", "No need for the reminder, I'm done already.", said)]
    assert due_in_conversation(called_off, at(1, 14, 30)) == []
    tomorrow = [("user", "Remind me tomorrow at 9 to call Ana.", at(1, 20))]
    assert [item.when for item in due_in_conversation(tomorrow, at(2, 8, 40))] == [at(2, 9)]


def test_the_block_says_how_long_until_each_item() -> None:
    now = at(1, 18, 25)
    items = due_soon("- Pizza out of the oven at 18:30\n- Call Sam at 19:10\n- Gym on Friday", now)
    block = due_text(items, now)
    assert block is not None
    assert block.splitlines()[1:] == [
        "- in 5 minutes (18:30): Pizza out of the oven at 18:30",
        "- in 45 minutes (19:10): Call Sam at 19:10",
    ]
    assert due_text([], now) is None


async def test_a_due_item_turns_the_check_in_into_a_reminder_once(tmp_path: Path) -> None:
    from cortana.companion import ManualClock

    memory = SQLiteMemory(tmp_path / "memory.db")
    thread = ThreadRef(resource_id="cli", thread_id="t")
    await memory.set_working_memory(thread, "- Take the pizza out of the oven at 18:30.")
    clock = ManualClock(at(1, 18, 25))
    model = ScriptedModel(["Reminder: the pizza comes out at 18:30, in 5 minutes.", "HEARTBEAT_OK"])
    check_in = companion_check_in(Agent(model, memory=memory), memory, thread, clock=clock)
    try:
        reply = await check_in("the checklist")
        first = model.requests[0]
        assert reply.startswith("Reminder: the pizza")
        assert "Due soon" in first.messages[-1].content and "in 5 minutes (18:30)" in first.messages[-1].content
        assert "the checklist" not in first.messages[-1].content and "Write the reminder" in first.messages[-1].content
        assert first.tools == [], "a reminder needs no tools"
        # the next beat: already reminded, so the checklist runs again
        await clock.advance(60)
        assert await check_in("the checklist") == "HEARTBEAT_OK"
        assert model.requests[1].messages[-1].content.endswith("the checklist")
        assert "Due soon" not in model.requests[1].messages[-1].content
        stored = [s.message for s in await memory.messages(thread)]
        assert [(m.role, m.name) for m in stored] == [("user", "heartbeat"), ("assistant", None)]
    finally:
        memory.close()


async def test_due_soon_reads_working_memory_and_the_threads_messages(tmp_path: Path) -> None:
    from cortana.companion import ManualClock

    memory = SQLiteMemory(tmp_path / "memory.db")
    thread = ThreadRef(resource_id="cli", thread_id="t")
    try:
        await memory.set_working_memory(thread, "- Vet at 17:50")
        await memory.append_messages(
            thread, [Message.user("Remind me in 30 minutes to move the car."), Message.assistant("Will do.")]
        )
        said = at(1, 17, 10).timestamp()  # the messages were said at 17:10
        await memory.store.write(lambda c: c.execute("UPDATE messages SET created_at = ?", (said,)))
        due = DueSoon(memory, clock=ManualClock(at(1, 17, 30)))
        items = await due.items(thread)
        assert [(item.when, item.text) for item in items] == [
            (at(1, 17, 40), "Remind me in 30 minutes to move the car."),
            (at(1, 17, 50), "Vet at 17:50"),
        ]
        due.mark_reminded(items)
        assert await due.items(thread) == []
    finally:
        memory.close()
