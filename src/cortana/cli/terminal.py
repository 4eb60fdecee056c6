"""The terminal under the interactive session: typed-ahead input, and the mode that makes Ctrl-C a signal."""

from __future__ import annotations

import select
import sys
from collections.abc import Callable

try:
    import termios
except ImportError:  # not a POSIX system: no terminal modes to fix
    termios = None  # type: ignore[assignment]

__all__ = ["input_waiting", "signals_from_keyboard"]


def input_waiting() -> bool:
    """Whether the user typed ahead: bytes wait on a terminal's input that nobody has read yet."""
    if not sys.stdin.isatty():
        return False
    try:
        readable, _, _ = select.select([sys.stdin], [], [], 0)
    except (OSError, ValueError):
        return False
    return bool(readable)


def signals_from_keyboard() -> Callable[[], None]:
    """Make Ctrl-C raise SIGINT while a turn runs; returns a function restoring the terminal.

    prompt_toolkit leaves some terminals (TERM=dumb) in raw mode after reading a line, where
    Ctrl-C is only a character in the input.
    """
    if termios is None:
        return lambda: None
    try:
        descriptor = sys.stdin.fileno()
        saved = termios.tcgetattr(descriptor)
    except (OSError, ValueError, termios.error):
        return lambda: None
    wanted = list(saved)
    wanted[3] |= termios.ISIG
    termios.tcsetattr(descriptor, termios.TCSANOW, wanted)
    return lambda: termios.tcsetattr(descriptor, termios.TCSANOW, saved)
