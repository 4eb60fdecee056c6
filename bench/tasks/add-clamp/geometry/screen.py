"""Keeping a cursor on the screen."""

from geometry.bounds import clamp

SCREEN_WIDTH = 80


def keep_on_screen(column: int) -> int:
    """``column`` moved onto the screen when it is off it."""
    return clamp(column, 0, SCREEN_WIDTH - 1)
