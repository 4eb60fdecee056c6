"""The companion: the agent that speaks first, knows the time, and reflects.

companion/heartbeat.py   Heartbeat: checklist beats every interval, idle check-ins with backoff,
                         reflection, active hours, busy skips, interrupts; ManualClock for tests
companion/companion.py   LocalTime (the time and the time away in each turn), AgentCheckIn (a
                         check-in turn that leaves no trace when nothing is due), Reflection
companion/due.py         DueSoon: the notes that fall due within the hour, worked out against the local time
companion/voice.py       Voice: replies spoken through a local TTS engine (espeak-ng)
"""

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
