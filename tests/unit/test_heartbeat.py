"""The heartbeat on a manual clock: intervals, active hours, busy skips, HEARTBEAT_OK, idle backoff, failures."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from cortana import ConfigError, Heartbeat, UserError
from cortana.companion import ActiveHours, ManualClock, away_text, is_heartbeat_ok

LISBON = timezone(timedelta(hours=0))
MINUTE, HOUR = 60, 3600


def at(hour: int, minute: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=LISBON)


class Agent:
    """A check-in that answers from a list (the last answer repeats) and records the prompts and times."""

    def __init__(self, clock: ManualClock, *answers: str) -> None:
        self.clock = clock
        self.answers = list(answers) or ["HEARTBEAT_OK"]
        self.prompts: list[str] = []
        self.times: list[datetime] = []

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        self.times.append(self.clock.now())
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if answer == "raise":
            raise RuntimeError("the engine went away")
        return answer


async def test_a_beat_every_interval_with_the_checklist() -> None:
    clock = ManualClock(at(9))
    agent = Agent(clock)
    async with Heartbeat(agent, interval_seconds=30 * MINUTE, clock=clock):
        await clock.advance(29 * MINUTE)
        assert agent.prompts == []
        await clock.advance(MINUTE)
        await clock.advance(60 * MINUTE)
    assert agent.times == [at(9, 30), at(10), at(10, 30)]
    assert "HEARTBEAT_OK" in agent.prompts[0] and "checklist" in agent.prompts[0]


@pytest.mark.parametrize(
    ("window", "inside", "outside"),
    [("08:00-22:00", [at(8), at(21, 59)], [at(7, 59), at(22), at(3)]), ("22:00-06:00", [at(23), at(2)], [at(12)])],
)
def test_active_hours_including_across_midnight(window: str, inside: list[datetime], outside: list[datetime]) -> None:
    hours = ActiveHours.parse(window)
    assert all(hours.contains(moment) for moment in inside)
    assert not any(hours.contains(moment) for moment in outside)


@pytest.mark.parametrize("bad", ["8-22", "08:00", "25:00-06:00", "08:61-09:00", "09:00-09:00"])
def test_a_malformed_range_names_the_key_and_the_form(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"key 'heartbeat.active_hours'.*") as info:
        ActiveHours.parse(bad)
    assert info.value.key == "heartbeat.active_hours"


async def test_a_beat_outside_the_active_hours_waits_for_them_to_open() -> None:
    clock = ManualClock(at(21, 50))
    agent = Agent(clock)
    async with Heartbeat(agent, interval_seconds=30 * MINUTE, active_hours="08:00-22:00", clock=clock) as heartbeat:
        assert heartbeat.status().startswith("next checklist beat at Wed 08:00;"), "never a time outside the hours"
        await clock.advance(10 * HOUR)  # 07:50 the next day
        assert agent.prompts == []
        await clock.advance(15 * MINUTE)
    assert agent.times == [at(8, 0, day=2)]


async def test_a_busy_moment_delays_the_beat_to_the_next_free_moment_not_forever() -> None:
    clock = ManualClock(at(9))
    agent = Agent(clock)
    busy = [True]
    async with Heartbeat(agent, interval_seconds=30 * MINUTE, is_busy=lambda: busy[0], retry_seconds=15, clock=clock):
        await clock.advance(45 * MINUTE)
        assert agent.prompts == [], "never while busy"
        busy[0] = False
        await clock.advance(15)
    assert agent.times == [at(9, 45) + timedelta(seconds=15)]


async def test_heartbeat_ok_is_dropped_and_anything_else_is_delivered() -> None:
    clock = ManualClock(at(9))
    agent = Agent(clock, "HEARTBEAT_OK.", "`HEARTBEAT_OK`", "Your dentist appointment is at 10:00.")
    shown: list[str] = []

    async def show(text: str) -> None:
        shown.append(text)

    heartbeat = Heartbeat(agent, interval_seconds=10 * MINUTE, on_message=show, clock=clock)
    async with heartbeat:
        await clock.advance(30 * MINUTE)
    assert shown == ["Your dentist appointment is at 10:00."]
    assert [beat.delivered for beat in heartbeat.history] == [False, False, True]
    assert heartbeat.unanswered == 1


@pytest.mark.parametrize(
    "reply", ["HEARTBEAT_OK", " heartbeat_ok.\n", "**HEARTBEAT_OK**", "`HEARTBEAT_OK`", "HEARTBEAT OK!"]
)
def test_the_ok_variants_small_models_write(reply: str) -> None:
    assert is_heartbeat_ok(reply)


def test_a_reply_with_more_than_ok_is_a_message() -> None:
    assert not is_heartbeat_ok("HEARTBEAT_OK, but your meeting starts in 5 minutes")
    assert not is_heartbeat_ok("All good")


async def test_idle_check_ins_back_off_three_times_and_stop_at_max_unanswered() -> None:
    clock = ManualClock(at(9))
    agent = Agent(clock, "Hello! How did the interview go?")
    heartbeat = Heartbeat(
        agent, interval_seconds=1000 * HOUR, idle_checkin_seconds=4 * HOUR, max_unanswered=2, clock=clock
    )
    async with heartbeat:
        await clock.advance(4 * HOUR)
        assert agent.times == [at(13)] and "4 hours" in agent.prompts[0]
        await clock.advance(11 * HOUR)
        assert len(agent.times) == 1, "the second waits three times longer: 12 hours"
        await clock.advance(HOUR)
        assert agent.times[-1] == at(1, day=2) and heartbeat.unanswered == 2
        await clock.advance(200 * HOUR)
        assert len(agent.times) == 2, "quiet at max_unanswered"
        assert "quiet until you speak" in heartbeat.status()
        heartbeat.user_spoke()
        await clock.advance(4 * HOUR)
    assert len(agent.times) == 3 and heartbeat.unanswered == 1


async def test_a_beat_that_fails_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(at(9))
    agent = Agent(clock, "raise", "Time for your walk.")
    shown: list[str] = []
    async with Heartbeat(agent, interval_seconds=10 * MINUTE, on_message=shown.append, clock=clock) as heartbeat:
        await clock.advance(20 * MINUTE)
    assert shown == ["Time for your walk."] and heartbeat.history[0].reply == ""
    assert "the heartbeat's check-in failed" in caplog.text


async def test_stop_ends_the_beats_and_bad_settings_are_refused() -> None:
    clock = ManualClock(at(9))
    agent = Agent(clock)
    heartbeat = Heartbeat(agent, interval_seconds=10 * MINUTE, clock=clock)
    await heartbeat.start()
    assert heartbeat.running
    await heartbeat.stop()
    await clock.advance(HOUR)
    assert agent.prompts == [] and not heartbeat.running
    from cortana import UserError

    with pytest.raises(UserError, match="max_unanswered must be at least 1"):
        Heartbeat(agent, max_unanswered=0)


def test_away_time_in_words() -> None:
    assert [away_text(s) for s in (5, 60, 12 * MINUTE, HOUR, 5 * HOUR, 26 * HOUR, 3 * 86_400)] == [
        "a moment",
        "1 minute",
        "12 minutes",
        "1 hour",
        "5 hours",
        "1 day",
        "3 days",
    ]


class SlowAgent(Agent):
    """A check-in that waits on the clock before it answers, as a model call takes time."""

    def __init__(self, clock: ManualClock, seconds: float, *answers: str) -> None:
        super().__init__(clock, *answers)
        self.seconds = seconds

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        self.times.append(self.clock.now())
        await self.clock.sleep(self.seconds)
        return self.answers[0]


async def test_interrupting_a_check_in_runs_the_same_beat_at_the_next_free_moment() -> None:
    clock = ManualClock(at(9))
    agent = SlowAgent(clock, 2 * MINUTE, "Your meeting starts at ten.")
    shown: list[str] = []
    busy = False
    heartbeat = Heartbeat(
        agent,
        interval_seconds=30 * MINUTE,
        is_busy=lambda: busy,
        on_message=shown.append,
        retry_seconds=MINUTE,
        clock=clock,
    )
    async with heartbeat:
        await clock.advance(31 * MINUTE)  # the beat at 9:30 is under way
        assert heartbeat.checking_in
        busy = True  # the user sends a line: the turn starts and the check-in makes way
        assert heartbeat.interrupt()
        await clock.advance(0)
        assert not heartbeat.checking_in and shown == []
        assert heartbeat.history[-1].interrupted and heartbeat.unanswered == 0
        await clock.advance(10 * MINUTE)  # the turn runs: the beat waits
        assert len(agent.times) == 1
        busy = False
        await clock.advance(4 * MINUTE)
    assert agent.times[0] == at(9, 30) and at(9, 41) <= agent.times[1] <= at(9, 42)
    assert shown == ["Your meeting starts at ten."]
    assert not heartbeat.interrupt()  # nothing under way: nothing to interrupt


class Reflector:
    def __init__(self, clock: ManualClock, note: str | None = "updated", fail: bool = False) -> None:
        self.clock, self.note, self.fail = clock, note, fail
        self.times: list[datetime] = []

    async def __call__(self) -> str | None:
        self.times.append(self.clock.now())
        if self.fail:
            raise RuntimeError("the engine went away")
        return self.note


async def test_reflection_runs_on_its_own_schedule_at_any_hour_and_says_nothing() -> None:
    clock = ManualClock(at(20))
    agent, reflect, shown = Agent(clock), Reflector(clock), []
    heartbeat = Heartbeat(
        agent,
        interval_seconds=HOUR,
        active_hours="08:00-22:00",
        on_message=shown.append,
        reflect=reflect,
        reflect_seconds=6 * HOUR,
        last_reflected=at(17),
        clock=clock,
    )
    assert heartbeat.next_reflection == at(23)
    assert "next reflection 23:00" in heartbeat.status()
    async with heartbeat:
        await clock.advance(11 * HOUR)  # to 07:00 the next day
    assert reflect.times == [at(23), at(5, day=2)]  # outside the active hours: reflection is silent
    assert [t.hour for t in agent.times] == [21]  # beats only inside them
    assert shown == [] and heartbeat.last_reflected == at(5, day=2)
    assert [beat.kind for beat in heartbeat.history] == ["checklist", "reflect", "reflect"]


async def test_reflection_waits_while_busy_goes_on_after_max_unanswered_and_survives_failures() -> None:
    clock = ManualClock(at(9))
    agent, reflect = Agent(clock, "Hello!"), Reflector(clock, fail=True)
    busy = True
    heartbeat = Heartbeat(
        agent,
        interval_seconds=HOUR,
        is_busy=lambda: busy,
        max_unanswered=1,
        reflect=reflect,
        reflect_seconds=2 * HOUR,
        retry_seconds=MINUTE,
        clock=clock,
    )
    assert heartbeat.next_reflection == at(10)  # never reflected: one interval after the start
    async with heartbeat:
        await clock.advance(90 * MINUTE)
        assert reflect.times == []  # busy all along
        busy = False
        await clock.advance(MINUTE)  # the beat (10:00) and the reflection (10:00) run now
        await clock.advance(4 * HOUR)
    assert heartbeat.unanswered == 1 and len(agent.times) == 1  # quiet after one unanswered check-in
    assert len(reflect.times) == 3 and reflect.times[1] - reflect.times[0] == timedelta(hours=2)
    assert all(beat.failed for beat in heartbeat.history if beat.kind == "reflect")


def test_reflect_seconds_must_be_positive() -> None:
    with pytest.raises(UserError, match="reflect_seconds"):
        Heartbeat(Agent(ManualClock(at(9))), reflect=Reflector(ManualClock(at(9))), reflect_seconds=0)


async def test_no_idle_check_in_at_the_very_start_however_long_the_user_was_away() -> None:
    clock = ManualClock(at(9))
    agent = Agent(clock)
    heartbeat = Heartbeat(
        agent,
        interval_seconds=30 * MINUTE,
        idle_checkin_seconds=4 * HOUR,
        last_heard=at(9) - timedelta(days=2),
        clock=clock,
    )
    async with heartbeat:
        await clock.advance(29 * MINUTE)
        assert agent.prompts == []
        await clock.advance(2 * MINUTE)
    assert agent.times == [at(9, 30), at(9, 30)]
    assert "HEARTBEAT_OK" in agent.prompts[0] and "2 days" in agent.prompts[1]
