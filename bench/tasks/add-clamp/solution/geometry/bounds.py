"""Ranges of numbers."""


def inside(value: float, low: float, high: float) -> bool:
    """Whether ``value`` is between ``low`` and ``high``, both included."""
    return low <= value <= high


def width(low: float, high: float) -> float:
    """How wide the range from ``low`` to ``high`` is."""
    return abs(high - low)


def clamp(value: float, low: float, high: float) -> float:
    """``value`` limited to the range ``low``..``high``."""
    if low > high:
        raise ValueError("low must not be greater than high")
    return max(low, min(value, high))
