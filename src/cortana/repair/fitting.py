"""Patches that fit a test instead of fixing the code.

Told that a test expected 2519 and got 2518, a small model often adds the
difference to whatever expression is at hand: the 1.5B rewrote
``return int(cents * 0.2)`` as ``return round(cents * 0.2) + 1`` (the right fix
plus the test's difference), and ``return amount + vat(amount)`` as
``return amount + vat(amount) + 1`` (the test passes; every other amount is now
wrong). Two guards, neither a model call, both built on what the failing
assertions computed (``assert 2518 == 2519``: a gap of 1):

- :func:`without_gap`: a sample that ends a line it wrote with ``+ gap`` or
  ``- gap`` is also tried without it, first; when what remains still changes
  the code, that is the candidate worth having.
- :func:`adds_gap`: a passing patch that ends a line with the gap is held
  while the round goes on and kept only when nothing else passes, with a word
  to the user (an off-by-one fixed by ``+ 1`` is a real fix too, which is why it
  is held, not refused).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation

from cortana.repair.patches import Block, Patch, apply_patch
from cortana.repair.testrun import Failure

__all__ = ["adds_gap", "gaps", "without_gap"]

_EQUALITY = re.compile(r"\bassert (-?\d+(?:\.\d+)?) == (-?\d+(?:\.\d+)?)\s*$")


def gaps(failures: Iterable[Failure]) -> set[str]:
    """The differences of the failing numeric equalities (``assert 2518 == 2519`` gives ``"1"``), as code writes
    them."""
    found: set[str] = set()
    for failure in failures:
        first = failure.message.splitlines()[0] if failure.message else ""
        match = _EQUALITY.search(first)
        if match is None:
            continue
        try:
            gap = abs(Decimal(match[1]) - Decimal(match[2]))
        except InvalidOperation:
            continue
        if gap:
            found.add(format(gap.normalize(), "f"))
    return found


def _tail(gap: str) -> re.Pattern[str]:
    """A line whose expression ends with ``+ gap`` or ``- gap`` (``1`` also as ``1.0``)."""
    number = re.escape(gap) + (r"(?:\.0*)?" if "." not in gap else "0*")
    return re.compile(rf"^(?P<head>.*[\w)\]}}])\s*[+-]\s*{number}(?P<end>\s*(?:#.*)?)$")


def _stripped(block: Block, patterns: Sequence[re.Pattern[str]]) -> Block:
    """``block`` with the gap taken off the end of each line it writes (lines it keeps from SEARCH stay)."""
    kept = set(block.search.splitlines())
    lines: list[str] = []
    for line in block.replace.splitlines():
        if line not in kept:
            for pattern in patterns:
                match = pattern.match(line)
                if match is not None:
                    line = match["head"] + match["end"].rstrip()
                    break
        lines.append(line)
    return Block(block.file, block.search, "\n".join(lines) + ("\n" if block.replace.endswith("\n") else ""))


def without_gap(patch: Patch, originals: Mapping[str, str], found: set[str]) -> Patch | None:
    """``patch`` less the gap at the end of the lines it writes, or None when it adds none. The result may change
    nothing (``Patch.files`` empty): then the gap was the patch's only change."""
    if not found:
        return None
    patterns = [_tail(gap) for gap in sorted(found)]
    blocks = [_stripped(block, patterns) for block in patch.blocks]
    if blocks == list(patch.blocks):
        return None
    blocks = [block for block in blocks if block.search.rstrip() != block.replace.rstrip()]
    if not blocks:
        return Patch((), {})
    applied = apply_patch(blocks, originals)
    if isinstance(applied, str):
        return None
    return Patch(applied.blocks, {path: text for path, text in applied.files.items() if text != originals[path]})


def adds_gap(patch: Patch, originals: Mapping[str, str], found: set[str]) -> bool:
    """Whether ``patch`` ends a line it writes with a failing assertion's gap."""
    return without_gap(patch, originals, found) is not None
