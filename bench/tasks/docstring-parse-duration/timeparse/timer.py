"""A countdown timer set with a duration such as "5m"."""

from timeparse.durations import format_duration, parse_duration


class Timer:
    def __init__(self, seconds: int) -> None:
        self.remaining = seconds

    @classmethod
    def from_text(cls, text: str) -> "Timer":
        """A timer for the duration ``text``, e.g. "1h30m"."""
        return cls(parse_duration(text))

    def tick(self, seconds: int = 1) -> None:
        """Let ``seconds`` pass, stopping at zero."""
        self.remaining = max(0, self.remaining - seconds)

    def __str__(self) -> str:
        return format_duration(self.remaining)
