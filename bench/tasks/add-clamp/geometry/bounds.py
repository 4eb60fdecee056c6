"""Ranges of numbers."""


def inside(value: float, low: float, high: float) -> bool:
    """Whether ``value`` is between ``low`` and ``high``, both included."""
    return low <= value <= high


def width(low: float, high: float) -> float:
    """How wide the range from ``low`` to ``high`` is."""
    return abs(high - low)
