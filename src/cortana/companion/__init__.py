"""The companion: the agent that speaks first.

companion/heartbeat.py   Heartbeat: checklist beats every interval, idle check-ins with backoff,
                         active hours, busy skips; ManualClock for tests
"""

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

__all__ = [
    "HEARTBEAT_OK",
    "ActiveHours",
    "Beat",
    "Clock",
    "Heartbeat",
    "ManualClock",
    "SystemClock",
    "away_text",
    "is_heartbeat_ok",
]
