"""Helpers for lists."""

from collections.abc import Callable, Hashable, Iterable
from typing import Any


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    """``items`` cut into lists of ``size`` items, the last one possibly shorter."""
    if size < 1:
        raise ValueError("size must be at least 1")
    return [items[start : start + size] for start in range(0, len(items), size)]


def flatten(nested: Iterable[Iterable[Any]]) -> list[Any]:
    """The items of each inner iterable, in order, in one list."""
    return [item for inner in nested for item in inner]


def dedupe(items: Iterable[Any], key: Callable[[Any], Hashable] | None = None) -> list[Any]:
    """A new list of ``items`` without repeats, in the order they first appear.

    Two items repeat each other when ``key`` gives the same value for both, or, when ``key`` is None,
    when they are equal. Only the first of them is kept. ``items`` can be any iterable and is not changed.
    """
    seen: set[Hashable] = set()
    kept = []
    for item in items:
        marker = item if key is None else key(item)
        if marker not in seen:
            seen.add(marker)
            kept.append(item)
    return kept
