"""The heartbeat on a manual clock: intervals, active hours, busy skips, HEARTBEAT_OK, idle backoff, failures."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from cortana import ConfigError, Heartbeat
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
    async with Heartbeat(agent, interval_seconds=30 * MINUTE, active_hours="08:00-22:00", clock=clock):
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
