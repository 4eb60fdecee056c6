"""Sliding windows over a sequence."""

from collections.abc import Sequence


def windows(values: Sequence[float], size: int) -> list[Sequence[float]]:
    """Every run of ``size`` consecutive values, in order: windows([1, 2, 3], 2) -> [[1, 2], [2, 3]]."""
    if size < 1:
        raise ValueError("size must be at least 1")
    return [values[start : start + size] for start in range(len(values) - size + 1)]
