"""The companion: the agent that speaks first, knows the time, and reflects.

companion/heartbeat.py   Heartbeat: checklist beats every interval, idle check-ins with backoff,
                         reflection, active hours, busy skips, interrupts; ManualClock for tests
companion/companion.py   LocalTime (the time and the time away in each turn), AgentCheckIn (a
                         check-in turn that leaves no trace when nothing is due), Reflection
companion/due.py         DueSoon: the notes that fall due within the hour, worked out against the local time
companion/voice.py       Voice: replies spoken through a local TTS engine (espeak-ng)

Names are imported on first use (PEP 562): the terminal needs the voice before its prompt shows,
the check-ins (and the agent they bring) only once the engine is up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortana.lazy import lazy_names

if TYPE_CHECKING:
    from cortana.companion.companion import (
        AgentCheckIn,
        LocalTime,
        Reflection,
        companion_check_in,
        last_reflected,
        local_time_text,
    )
    from cortana.companion.due import DueSoon, due_soon
    from cortana.companion.heartbeat import (
        HEARTBEAT_OK,
        ActiveHours,
        Beat,
        Clock,
        Heartbeat,
        ManualClock,
        SystemClock,
        away_text,
        is_heartbeat_ok,
    )
    from cortana.companion.voice import Voice, speakable_text

__all__ = [
    "HEARTBEAT_OK",
    "ActiveHours",
    "AgentCheckIn",
    "Beat",
    "Clock",
    "DueSoon",
    "Heartbeat",
    "LocalTime",
    "ManualClock",
    "Reflection",
    "SystemClock",
    "Voice",
    "away_text",
    "companion_check_in",
    "due_soon",
    "is_heartbeat_ok",
    "last_reflected",
    "local_time_text",
    "speakable_text",
]

_LAZY = {
    "ActiveHours": "cortana.companion.heartbeat",
    "AgentCheckIn": "cortana.companion.companion",
    "Beat": "cortana.companion.heartbeat",
    "Clock": "cortana.companion.heartbeat",
    "DueSoon": "cortana.companion.due",
    "HEARTBEAT_OK": "cortana.companion.heartbeat",
    "Heartbeat": "cortana.companion.heartbeat",
    "LocalTime": "cortana.companion.companion",
    "ManualClock": "cortana.companion.heartbeat",
    "Reflection": "cortana.companion.companion",
    "SystemClock": "cortana.companion.heartbeat",
    "Voice": "cortana.companion.voice",
    "away_text": "cortana.companion.heartbeat",
    "companion_check_in": "cortana.companion.companion",
    "due_soon": "cortana.companion.due",
    "is_heartbeat_ok": "cortana.companion.heartbeat",
    "last_reflected": "cortana.companion.companion",
    "local_time_text": "cortana.companion.companion",
    "speakable_text": "cortana.companion.voice",
}


__getattr__ = lazy_names(__name__, _LAZY)
