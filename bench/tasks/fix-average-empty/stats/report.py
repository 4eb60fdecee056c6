"""One line describing a list of values."""

from stats.summary import average, spread


def describe(values: list[float]) -> str:
    """``mean 2.0, spread 2``, or ``no data``."""
    mean = average(values)
    if mean is None:
        return "no data"
    return f"mean {mean:.1f}, spread {spread(values)}"
