"""Showing text a model, a tool, a file or a server produced, without letting it drive the terminal.

Such text may carry escape sequences (move the cursor, clear the line, hide
what follows), carriage returns that overwrite a line, and Unicode direction
overrides that make a command read differently from what runs. ``printable``
shows each of them as a visible escape instead; newlines and tabs stay.
Everything rendered from untrusted text is also rendered without rich markup,
so ``[conceal]`` or ``[/]`` in it are just characters.
"""

from __future__ import annotations

import re

__all__ = ["printable", "valid_text"]

_HIDING = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with control characters and direction overrides shown (``\\x1b``, ``\\u202e``), never obeyed."""
    return _HIDING.sub(_visible, text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with what is not Unicode (bytes that were not UTF-8 in a command line or a file name, a lone
    surrogate from JSON) replaced by U+FFFD: it can then be stored, sent and shown."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
