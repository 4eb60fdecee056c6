"""What is due soon: times and days read from notes and messages, against the local time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
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


@pytest.mark.parametrize(
    ("note", "now", "due"),
    [
        ("- Heartworm tablet with breakfast ~9", at(1, 8, 40), at(1, 9)),  # about nine
        ("- Call Jo 9ish", at(1, 8, 40), at(1, 9)),
        ("- Pick up Ana around 4", at(1, 15, 40), at(1, 16)),
        ("- Drop the car off at quarter to nine", at(1, 8, 5), at(1, 8, 45)),
        ("- Collect the turkey, slot 12:30-1pm, already paid", at(1, 12, 25), at(1, 12, 30)),  # a range: its start
        ("- Workshop 2-3pm", at(1, 13, 30), at(1, 14)),
        ("- Brunch 11-1pm", at(1, 10, 30), at(1, 11)),
        ("- Bus leaves at 6:52 for the early shift", at(1, 6, 10), at(1, 6, 52)),  # an early start: morning
        ("- Pancakes for breakfast at 7:30, dinner at 6", at(1, 7, 0), at(1, 7, 30)),  # the nearest half of the day
        ("- Pancakes for breakfast at 7:30, dinner at 6", at(1, 17, 30), at(1, 18)),
        ("- Flat viewing Sat at 2", at(5, 13, 30), at(5, 14)),  # "Sat" is Saturday
        ("- Parents' evening Monday 7 Dec, pushed to next Monday at 6pm", at(14, 17, 30), at(14, 18)),
        ("- Finally sat down with Jo at 2", at(3, 13, 30), at(3, 14)),  # "sat" is no Saturday
        ("- tues: pick up Leo from karate half 4", at(8, 15, 45), at(8, 16, 30)),  # "half 4" is 4:30
        ("- Flight to Lisbon Fri 18:40 from LGW, leave 2h before", at(18, 16, 10), at(18, 16, 40)),
        ("- Be there 30 mins early: eye test 11:15", at(2, 10, 30), at(2, 10, 45)),
        ("- next Monday (21st) 10am: MRI", at(21, 9, 30), at(21, 10)),  # the date says which Monday
        ("- Mon 21st: boiler service at 10", at(21, 9, 30), at(21, 10)),
        ("- Pharmacy closes at 6, pick up the prescription", at(1, 17, 30), at(1, 18)),  # a deadline
        ("- call Jan at 3 about May's party", at(1, 14, 30), at(1, 15)),  # Jan and May are people here
        ("- gp tel appt wed btw 1-2, they call me", at(2, 13, 5), at(2, 13)),  # "btw 1-2": a time range
        ("- Weds 4.45pm parents' evening", at(2, 16, 30), at(2, 16, 45)),
        ("- card payment due the 31st, bank cut-off midnight!!", at(31, 23, 15), datetime(2027, 1, 1, tzinfo=ZONE)),
        ("- NYE 8pm at Luca's", at(31, 19, 30), at(31, 20)),
        ("- Essay done by 5pm", at(1, 16, 30), at(1, 17)),  # "done by" is a deadline, not done
        ("- dentst 1045 Tues, get there 10 min early for forms", at(1, 10, 5), at(1, 10, 35)),  # four digits
        ("- Dec 3rd: MOT 8:00 at Kwik Fit, they'll ring when done", at(3, 7, 20), at(3, 8)),
        ("- CVS pickup: ready after 12, pharmacy closes 1pm Sat!!", at(5, 12, 25), at(5, 13)),  # a pickup
        ("- dentst tues 8th @ 9, dr okafor", at(8, 8, 15), at(8, 9)),
        ("- amoxicillin 3x a day: 8am / 2pm / 10pm, course ends sat 12th", at(5, 21, 50), at(5, 22)),
        ("- FRI 4 DEC flight LHR to LIS 09:05, leave house 6:45 at the latest!!", at(4, 6, 10), at(4, 6, 45)),
        ("- expense report!! finance closes the portal 5pm fri", at(4, 16, 20), at(4, 17)),  # a deadline
        ("- sun roast at the in-laws 1pm", at(6, 12, 40), at(6, 13)),  # "sun" opening a note: Sunday
    ],
)
def test_approximate_times_ranges_and_the_half_of_the_day_are_read(note: str, now: datetime, due: datetime) -> None:
    (item,) = due_soon(note, now)
    assert item.when == due


@pytest.mark.parametrize(
    ("note", "now"),
    [
        ("- Book the venue for 3-4 days", at(1, 14, 30)),  # no time range
        ("- Workshop 2-3pm", at(1, 14, 30)),  # a range is due at its start, not its end
        ("- Pay the electricity bill by 10am (already paid)", at(1, 9, 50)),  # paid, and paying is the task
        ("- School pickup at 3:15 (early dismissal)", at(1, 2, 50)),  # "early" reads only 5 and 6 as morning
        ("- Dentist this afternoon", at(1, 14, 50)),  # "this afternoon" says which day, not when
        ("- I am meeting Sarah at 6:45", at(1, 6, 30)),  # "am" the verb is no morning
        ("- Boiler service Mon 21st at 10am, moved it to Jan 7", at(21, 9, 30)),  # the day it was moved from
        ("- next Monday (21st) 10am: MRI", at(14, 9, 30)),  # a Monday, but the 21st is next week
        ("- Gym closes at 10pm on fridays", at(4, 21, 30)),  # opening hours are a fact, not a task
        ("- Pharmacy open till 11 weekdays", at(2, 22, 20)),
        ("- Fasting bloods the 3rd at 8:30", at(2, 8, 0)),  # the 3rd is tomorrow
        ("- Weds 4.45pm parents' evening", at(1, 16, 30)),  # "Weds" is tomorrow
        ("- thurs: bins out at 7pm", at(1, 18, 30)),
        ("- ~~badminton tues 7pm~~ courts closed for repairs all wk", at(1, 18, 30)),  # struck out
        ("- Book the hall for 1-2 weeks", at(1, 12, 50)),  # no time range
        ("- NYE 8pm at Luca's", at(27, 19, 30)),  # New Year's Eve is the 31st
        ("- is my accountant call at 2 or 3?", at(1, 13, 45)),  # unsure: neither is listed
        ("- the 2:15 call is off, they emailed instead", at(1, 14)),
        ("- Midnight: bank cut-off", at(1, 0, 5)),  # midnight ends the day: tonight's, not last night's
        ("- Lidl: 8am-8pm Sun, 7am-10pm Mon-Sat", at(1, 7, 10)),  # opening hours
        ("- Octopus electricity \u00a384.20 due by 5pm today, PAID in app 9:12am \u2713", at(1, 16, 0)),
        ("- grant report due 12:00 Tue 1 Dec, SUBMITTED last night", at(1, 11, 30)),
        ("- July hols: Oban ferry 09:15, 13:40 or 18:00 (book by May!)", at(1, 8, 30)),  # another month
        ("- Flight ref 2291 to Rome", at(1, 22, 50)),  # four digits that are no time
        ("- book club tonight at 8, moving it to next jan", at(1, 19, 30)),  # another month
        ("- sun roast at the in-laws 1pm", at(5, 12, 40)),  # Sunday is tomorrow
        ("- amoxicillin 8am / 2pm / 10pm, course ends 5 Dec", at(7, 21, 50)),  # the course has ended
        ("- amoxicillin 8am / 2pm / 10pm, course ends Sat 5 Dec", at(12, 21, 50)),  # ended last Saturday
        ("- meeting 14:00, pick up Ana at 5", at(1, 4, 30)),  # only a morning 24-hour time makes "5" 05:00
    ],
)
def test_approximate_times_ranges_and_the_half_of_the_day_do_not_misfire(note: str, now: datetime) -> None:
    assert due_soon(note, now) == []


def test_an_hour_said_in_a_message_is_the_next_one_after_it_was_said() -> None:
    early = [("user", "Flight is at 9:10, remind me to book the taxi at quarter past six?", at(20, 4, 50))]
    assert [item.when for item in due_in_conversation(early, at(20, 5, 50))] == [at(20, 6, 15)]
    late = [("user", "The lamb went in at 4. Remind me to take it out at 7?", at(26, 17, 35))]
    assert [item.when for item in due_in_conversation(late, at(26, 18, 35))] == [at(26, 19)]
    # a day named, or a half of the day: read as before, not from when it was said
    tomorrow = [("user", "Remind me at 7 tomorrow to water the plants.", at(1, 21))]
    assert [item.when for item in due_in_conversation(tomorrow, at(2, 6, 30))] == [at(2, 7)]
    morning = [("user", "Next dose is at 8 this morning", at(4, 6, 30))]
    assert [item.when for item in due_in_conversation(morning, at(4, 7, 30))] == [at(4, 8)]
    assert due_in_conversation([("user", "got the dentist this afternoon, ugh", at(1, 14))], at(1, 15, 5)) == []
    pushed = [("user", "Parents' evening got pushed to next Monday, 6pm", at(7, 9))]  # said on a Monday
    assert due_in_conversation(pushed, at(7, 17, 30)) == []
    assert [item.when for item in due_in_conversation(pushed, at(14, 17, 30))] == [at(14, 18)]


def test_a_message_saying_a_note_was_done_or_moved_drops_it() -> None:
    (pill,) = due_soon("- Takes levothyroxine at 9am on an empty stomach", at(30, 8, 50))
    took = [
        ("user", "took my thyroid pill early today, 8:30, before my run", at(30, 7, 50)),
        ("assistant", "Noted, you've had your levothyroxine for today.", at(30, 7, 50)),
    ]
    assert due_in_conversation(took, at(30, 8, 50), notes=[pill]) == []
    (evening,) = due_soon("- Parent-teacher evening Monday Jan 4, 6pm", datetime(2027, 1, 4, 17, 20, tzinfo=ZONE))
    pushed = [
        ("user", "school emailed, parent-teacher night got pushed to next Monday", evening.when - timedelta(hours=2)),
        ("assistant", "Got it, it's now Monday 11 January at 6pm.", evening.when - timedelta(hours=2)),
    ]
    assert due_in_conversation(pushed, evening.when - timedelta(minutes=40), notes=[evening]) == []
    # no word in common, but the same time: "pills" at 8 o'clock with dinner are the meds at 8pm
    (meds,) = due_soon("- take meds every day at 8pm", at(20, 19, 55))
    early = [("user", "just took my 8 o'clock pills early with dinner", at(20, 18, 55))]
    assert due_in_conversation(early, at(20, 19, 55), notes=[meds]) == []
    (lease,) = due_soon("- tues 4pm: send signed lease back to the agent", at(8, 15, 40))
    emailed = [("user", "just emailed the signed lease back to the agent, one less thing", at(8, 14, 40))]
    assert due_in_conversation(emailed, at(8, 15, 40), notes=[lease]) == []
    (plumber,) = due_soon("- call plumber re leak under sink ~5pm", at(14, 17, 5))
    phoned = [("user", "just got off the phone with the plumber, he's coming Saturday morning", at(14, 16, 5))]
    assert due_in_conversation(phoned, at(14, 17, 5), notes=[plumber]) == []
    (water,) = due_soon("- water the tomatoes at 7pm", at(20, 18, 50))
    assert due_in_conversation([("user", "already did the 7pm job", at(20, 18))], at(20, 18, 50), notes=[water]) == []


def test_a_message_about_something_else_being_done_leaves_the_note() -> None:
    (call,) = due_soon("- Call Mum at 19:15, it's her birthday", at(1, 19))
    unrelated = [("user", "Finished the quarterly report, finally.", at(1, 18))]
    assert due_in_conversation(unrelated, at(1, 19), notes=[call]) == [call]  # no word in common
    card = [("user", "Already sent the birthday card to Mum", at(1, 10))]
    assert due_in_conversation(card, at(1, 19), notes=[call]) == [call]  # said hours before: something else
    asking = [("user", "I've done the shopping, remind me to call Mum at 7:15?", at(1, 18, 30))]
    assert call in due_in_conversation(asking, at(1, 19), notes=[call])  # asks for a reminder
    yesterday = [("user", "took my pill", at(1, 8))]
    (pill,) = due_soon("- Pill at 9am", at(2, 8, 50))
    assert due_in_conversation(yesterday, at(2, 8, 50), notes=[pill]) == [pill]  # said yesterday


def test_a_conversation_counts_what_was_asked_what_was_promised_and_what_was_called_off() -> None:
    said = at(1, 14)
    asked = [("user", "Remind me in 45 minutes to take the bread out.", said)]
    (item,) = due_in_conversation(asked, at(1, 14, 30))
    assert item.when == at(1, 14, 45)
    promised = [("user", "Can you check on me later?", said), ("assistant", "Sure, I'll check in at 3.", said)]
    assert [item.when for item in due_in_conversation(promised, at(1, 14, 30))] == [at(1, 15)]
    called_off = [*promised, ("user", "No need for the reminder, I'm done already.", said)]
    assert due_in_conversation(called_off, at(1, 14, 30)) == []
    dropped = [
        *promised,
        ("user", "oh never mind, all sorted", said),
        ("assistant", "Great, I'll drop that 3 o'clock check-in.", said),
    ]
    assert due_in_conversation(dropped, at(1, 14, 30)) == []
    skipping = [("user", "I'll skip lunch today, remind me at 3 to call the bank", said)]
    assert [item.when for item in due_in_conversation(skipping, at(1, 14, 30))] == [at(1, 15)]
    finished = [("user", "done with work already, remind me at 3 to call the bank", said)]
    assert [item.when for item in due_in_conversation(finished, at(1, 14, 30))] == [at(1, 15)]
    half = [
        ("user", "the permit portal closes at 11 today and I've only done half the form", at(1, 9, 30)),
        ("assistant", "I'll remind you before 11 so you can finish the permit renewal.", at(1, 9, 30)),
    ]
    assert [item.when for item in due_in_conversation(half, at(1, 10, 30))] == [at(1, 11)]
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
    assert due_text([], now) is None  # (a note's text is escaped by the run: tests/security/test_context_blocks.py)


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


async def test_a_check_ins_own_words_are_not_promises_even_after_the_loop_asked_again(tmp_path: Path) -> None:
    from cortana.companion import ManualClock

    memory = SQLiteMemory(tmp_path / "memory.db")
    thread = ThreadRef(resource_id="cli", thread_id="t")
    try:
        await memory.append_messages(
            thread,
            [
                Message.user("Remind me in 30 minutes to move the car."),
                Message.assistant("Will do."),
                Message(role="user", name="heartbeat", content="(a check-in)"),
                Message(role="user", name="cortana", content="Answer the question."),  # the loop asked again
                Message.assistant("I'll remind you in 20 minutes to call the vet."),  # still the check-in's words
            ],
        )
        said = at(1, 17, 10).timestamp()
        await memory.store.write(lambda c: c.execute("UPDATE messages SET created_at = ?", (said,)))
        items = await DueSoon(memory, clock=ManualClock(at(1, 17, 30))).items(thread)
        assert [item.text for item in items] == ["Remind me in 30 minutes to move the car."]
    finally:
        memory.close()


def test_a_relative_time_on_its_own_line_counts_from_the_line_above() -> None:
    notes = "- flight to Lisbon Sat 5 Dec 09:10 (TP1361)\n- online check-in opens 24h before -> window seat"
    (item,) = due_soon(notes, at(4, 8, 18))
    assert item.when == at(4, 9, 10) and item.text.startswith("online check-in")
    assert due_soon("- online check-in opens 24h before", at(4, 8, 18)) == []  # before nothing
    leave = "- Fri 4 Dec: BA2490 LGW to Lisbon dep 18:05\n- leave the house 2.5 hrs before dep"
    (item,) = due_soon(leave, at(4, 15, 10))
    assert item.when == at(4, 15, 35) and "LGW to Lisbon" in item.text  # shown with what it is before


def test_a_promise_in_a_reply_is_listed_with_what_it_answers() -> None:
    said = at(23, 9, 50)
    chat = [
        ("user", "put a wash on, it's the 1h45 cycle. remind me to move it to the dryer when it finishes?", said),
        ("assistant", "Will do - that should be done around 11:35, I'll remind you then.", said),
    ]
    (item,) = due_in_conversation(chat, at(23, 10, 50))
    assert item.when == at(23, 11, 35)
    assert "should be done around 11:35" in item.text and "move it to the dryer" in item.text
    assert len(item.text) <= 200


@pytest.mark.parametrize("odd", ["9999-12-31 midnight", "0001-01-01 midnight", "on 9999-12-31 at 23:59 deploy"])
def test_a_note_past_the_calendars_end_is_never_due_and_loses_no_other_note(odd: str) -> None:
    """Reported: "9999-12-31 midnight" raised OverflowError and the check-in lost its whole due-soon list."""
    now = datetime(2026, 12, 3, 22, 0, tzinfo=UTC)
    found = due_soon([odd, "call mom at 23:00"], now, said_at=now)
    assert [item.text for item in found] == ["call mom at 23:00"]
