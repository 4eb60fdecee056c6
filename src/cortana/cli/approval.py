"""The approval prompt: what a tool call will do, shown whole and as it is, and the user's answer.

Every argument is shown (a long one as its head, its tail and its size, never
cut silently), wrapped, and as plain text: no rich markup and no terminal
control characters from the model reach the screen. The answers are: yes
once, always (for the scope shown, when the call has one), no (with an
optional reason the model reads), and deny always.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.text import Text

from cortana.display import printable
from cortana.messages import ToolCall
from cortana.tools import Tool
from cortana.tools.permissions import PermissionDecision, Scope

__all__ = ["TerminalApprover", "describe_call", "terminal_approver"]

WHOLE_CHARS = 4_000
"""An argument up to this long is shown whole."""
HEAD_CHARS = 1_500
TAIL_CHARS = 700


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _shown(text: str) -> str:
    """``text`` whole when it is short; else its head, its size and its tail."""
    if len(text) <= WHOLE_CHARS:
        return text
    left_out = len(text) - HEAD_CHARS - TAIL_CHARS
    lines = text.count("\n") + 1
    return (
        f"{text[:HEAD_CHARS]}\n    … [{len(text):,} characters, {lines:,} lines in all; {left_out:,} not shown] …\n"
        f"{text[-TAIL_CHARS:]}"
    )


def describe_call(call: ToolCall, tool: Tool) -> Text:
    """The call as the prompt shows it: the tool's name, then every argument on its own lines."""
    text = Text()
    text.append("? ", style="yellow")
    text.append(printable(tool.name), style="bold")
    if call.raw_arguments is not None and not call.arguments:
        text.append("\n  (arguments that are not JSON) ")
        text.append(printable(_shown(call.raw_arguments)))
    for name, value in call.arguments.items():
        text.append(f"\n  {printable(str(name))}: ", style="cyan")
        body = printable(_shown(_value_text(value)))
        text.append(body.replace("\n", "\n    ") if "\n" in body else body)
    return text


def _choices(scope: Scope | None) -> str:
    always = f"[a]lways: {printable(scope.label)}" if scope is not None else "no 'always' for this call"
    return f"  allow? [y]es once / {always} / [n]o / [d]eny always: "


class TerminalApprover:
    """Asks on the terminal. ``read`` reads one answer (``input`` by default, run off the event loop).

    ``open`` is true while a question waits for its answer: the heartbeat does not speak over it.
    """

    def __init__(self, console: Console, read: Callable[[str], str] = input) -> None:
        self.console = console
        self.read = read
        self.open = False

    async def __call__(self, call: ToolCall, tool: Tool, reason: str | None, scope: Scope | None) -> PermissionDecision:
        self.open = True
        try:
            return await self._ask(call, tool, reason, scope)
        finally:
            self.open = False

    async def _ask(self, call: ToolCall, tool: Tool, reason: str | None, scope: Scope | None) -> PermissionDecision:
        loop = asyncio.get_running_loop()
        self.console.print(describe_call(call, tool), soft_wrap=False)
        if reason:
            self.console.print(Text(f"  ({printable(reason)})", style="dim"))
        answer = (await loop.run_in_executor(None, self.read, _choices(scope))).strip().lower()
        if answer in ("y", "yes"):
            return PermissionDecision.allow()
        if answer in ("a", "always"):
            return PermissionDecision.allow(remember=scope is not None)  # no scope: this once
        if answer in ("d", "deny"):
            return PermissionDecision.deny("the user denies this for the session", remember=True)
        why = (await loop.run_in_executor(None, self.read, "  reason (optional): ")).strip()
        return PermissionDecision.deny(why or "the user declined")


def terminal_approver(console: Console, read: Callable[[str], str] = input) -> TerminalApprover:
    """Ask on the terminal (see :class:`TerminalApprover`)."""
    return TerminalApprover(console, read)
