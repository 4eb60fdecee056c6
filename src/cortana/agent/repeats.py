"""``RepeatGuard``: what one run has already answered, so repeated calls are neither re-run nor looped on.

Small models call the same tool again instead of reading its result. The
guard remembers the calls of the run that got a result, and answers two
questions the loop asks:

- ``earlier_read(call)``: a read-only call identical to one answered since
  the last write is not run again; the model is pointed at that result. Not
  for a tool whose result changes by itself (``Tool.live``: a background
  command's output), which is neither remembered nor counted as answered.
- ``all_repeated(calls)``: a reply made only of calls already answered is
  not run at all (re-running would repeat side effects, or the same error):
  the loop restates the question once, then asks for an answer without
  tools. A call that failed counts as answered: small models repeat a call of
  a tool that does not exist, forever, each time told it does not.

A call that changed something (a write, a command, an outside server's
call, which is never read-only) may change what a read returns, so it makes
the guard forget earlier reads; calls that changed something are remembered
for the rest of the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from cortana.messages import Message, ToolCall
from cortana.models.base import loose_name
from cortana.tools import Tool

__all__ = ["RepeatGuard", "call_key"]


def call_key(call: ToolCall) -> str:
    """Two calls with the same key do the same thing: loosely equal names, equal arguments."""
    return f"{loose_name(call.name)}:{json.dumps(call.arguments, sort_keys=True, default=str)}"


class RepeatGuard:
    """The calls one run has answered (see the module docstring)."""

    def __init__(self) -> None:
        self._reads: dict[str, str] = {}  # key of a read-only call -> id of the call whose result still holds
        self._changes: set[str] = set()  # keys of calls that changed something and succeeded
        self._failed: set[str] = set()  # keys of calls that got an error (the same call would get it again)

    def earlier_read(self, call: ToolCall) -> str | None:
        """The id of an identical read-only call whose result still holds, if there is one."""
        return self._reads.get(call_key(call))

    def all_repeated(self, calls: Iterable[ToolCall]) -> bool:
        """Whether every one of ``calls`` already has a result in this run."""
        known = (self._reads, self._changes, self._failed)
        return all(any(call_key(call) in seen for seen in known) for call in calls)

    def record_failures(self, calls: Iterable[ToolCall]) -> None:
        """Remember calls that got an error: refused before running (unknown tool, denied, invalid) or failing."""
        self._failed.update(call_key(call) for call in calls)

    def record(self, ran: Sequence[tuple[ToolCall, Tool, Message]]) -> None:
        """Remember a batch of calls that ran, with their tools and results."""
        if any(not tool.read_only for _, tool, _ in ran):
            self._reads.clear()
        for call, tool, result in ran:
            if result.is_error:
                continue
            if tool.live:  # read again, it may say something new
                continue
            if tool.read_only:
                self._reads[call_key(call)] = call.id
            else:
                self._changes.add(call_key(call))
