"""Numbers that summarize a list of values."""


def average(values: list[float]) -> float | None:
    """The mean of ``values``, or None when there are none."""
    if not values:
        return None
    return sum(values) / len(values)


def spread(values: list[float]) -> float | None:
    """The largest value minus the smallest, or None when there are none."""
    if not values:
        return None
    return max(values) - min(values)
