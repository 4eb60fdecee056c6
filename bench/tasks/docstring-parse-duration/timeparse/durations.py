"""Durations such as "1h30m", in seconds."""


def format_duration(seconds: int) -> str:
    """``seconds`` written as hours, minutes and seconds, leaving out the zero parts: 5400 -> "1h30m"."""
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (seconds, "s")) if value]
    return "".join(parts) or "0s"


def parse_duration(text: str) -> int:
    """The number of seconds in a duration such as "1h30m", "45s" or "2m5s".

    The duration is one or more parts, each a whole number followed by ``h`` (hours), ``m`` (minutes)
    or ``s`` (seconds), with no spaces between them. The parts come in that order, each at most once.
    Spaces around the duration are ignored. Raises ValueError for anything else, such as "", "5",
    "1x", "1h 30m" or "30m1h".
    """
    raise NotImplementedError
