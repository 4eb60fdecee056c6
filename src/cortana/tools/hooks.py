"""Hooks: the user's own commands at the moments of a session, as Claude Code and Codex run them.

cortana.yml's ``hooks:`` names commands for five events: ``session_start``, ``user_prompt`` (before a message
goes to the model), ``before_tool`` and ``after_tool`` (around each tool call; ``tools:`` globs narrow them to
some tools), and ``stop`` (the answer is out). Each command runs with ``sh -c`` in the workspace, the event as
one JSON object on its stdin (``event``, ``cwd``, ``thread``, and ``prompt``, ``tool`` and ``arguments``,
``result`` and ``ok``, or ``answer`` as the event has them) and ``CORTANA_HOOK_EVENT`` in its environment,
confined like a command the model runs (it writes the workspace, no network) for at most its ``timeout``.

Exit status 2 means no: a ``before_tool`` hook blocks the call and its stderr is the reason the model reads; a
``user_prompt`` hook keeps the message from the model and its stderr is shown; an ``after_tool`` hook's stderr is
added to the result, for the model to act on. Any other failure (another status, a command that cannot start or
runs past its time) is logged and the session goes on. A folder's own hooks need the user's trust, like any
command its cortana.yml starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cortana.messages import Message, ToolCall
from cortana.prompts import prompt_text
from cortana.sandbox.policy import Sandbox
from cortana.sandbox.processes import stop_kept_async
from cortana.tools.base import Tool
from cortana.turnstate import turn_state

__all__ = [
    "BLOCK_STATUS",
    "COMMAND_TOOLS_REFUSAL",
    "EVENTS",
    "PLAN_MODE_REFUSAL",
    "CommandHooks",
    "HookEntry",
    "HookOutcome",
    "ToolHooks",
    "ToolRules",
]

log = logging.getLogger(__name__)

EVENTS = ("session_start", "user_prompt", "before_tool", "after_tool", "stop")
BLOCK_STATUS = 2
"""The exit status by which a hook says no (as in Claude Code)."""
MAX_STDERR_CHARS = 2_000
MAX_PAYLOAD_CHARS = 100_000
"""The most of a tool result or answer put in a hook's JSON."""


class ToolHooks(Protocol):
    """Something the loop asks around every tool call it runs (``Agent(tool_hooks=...)``)."""

    async def before_tool(self, call: ToolCall, tool: Tool) -> str | None:
        """None: the call goes on; a reason: it is blocked (before the gate would ask), and the model reads it."""
        ...

    async def after_tool(self, call: ToolCall, tool: Tool, result: Message) -> str | None:
        """Text added to the call's result for the model (None: nothing)."""
        ...


@dataclass(frozen=True)
class HookEntry:
    """One hook: its shell command, the tool-name globs it is for (empty: every tool), and its time limit."""

    command: str
    tools: tuple[str, ...] = ()
    timeout: float = 30.0

    def matches(self, tool: str | None) -> bool:
        return tool is None or not self.tools or any(fnmatch.fnmatchcase(tool, glob) for glob in self.tools)


@dataclass(frozen=True)
class HookOutcome:
    """What one hook run said: its exit status (None: it did not run to the end) and its stderr, bounded."""

    entry: HookEntry
    status: int | None
    stderr: str

    @property
    def blocked(self) -> bool:
        return self.status == BLOCK_STATUS


class CommandHooks:
    """The hooks of one workspace (see the module docstring).

    Args:
        root: the workspace (the commands run there).
        hooks: event -> its entries (cortana.yml's ``hooks:``).
        sandbox: what confines the commands.
    """

    def __init__(self, root: Path, hooks: Mapping[str, Sequence[HookEntry]], sandbox: Sandbox) -> None:
        self.root = root
        self.hooks = {event: tuple(entries) for event, entries in hooks.items() if entries}
        self.sandbox = sandbox

    def __bool__(self) -> bool:
        return bool(self.hooks)

    async def run(self, event: str, payload: Mapping[str, Any], *, tool: str | None = None) -> list[HookOutcome]:
        """Run ``event``'s hooks (those for ``tool``), one after another; what each said. The event names the
        conversation of the turn it happens in (:func:`cortana.turn.turn_state`; "" outside any turn)."""
        outcomes = []
        turn = turn_state()
        thread = turn.thread.thread_id if turn is not None else ""
        body = json.dumps({"event": event, "cwd": str(self.root), "thread": thread, **payload}, default=str)
        for entry in self.hooks.get(event, ()):
            if entry.matches(tool):
                outcome = await self._run_one(entry, event, body)
                if outcome.status not in (0, BLOCK_STATUS):
                    log.warning("the %s hook %r failed (%s): %s", event, entry.command, outcome.status, outcome.stderr)
                outcomes.append(outcome)
                if outcome.blocked:
                    break  # a no ends the event: later hooks would act on something that will not happen
        return outcomes

    async def _run_one(self, entry: HookEntry, event: str, body: str) -> HookOutcome:
        """One hook, under the keeper: confined, no terminal, nothing it starts left running after it, its stderr
        read up to a bound, and a protected path it made moved out of the workspace (and said)."""
        with self.sandbox.confined() as confined:
            environment = confined.environment(self.sandbox.child_environment({"CORTANA_HOOK_EVENT": event}))
            try:
                process = await asyncio.create_subprocess_exec(
                    *confined.argv(["sh", "-c", entry.command]),
                    cwd=self.root,
                    env=environment,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as error:
                return HookOutcome(entry, None, f"could not start: {error.strerror or error}")
            try:
                async with asyncio.timeout(entry.timeout):
                    stderr = await _talk(process, body.encode("utf-8"))
            except BaseException as stopped:  # its time limit, or the turn was cancelled: nothing of it goes on
                await stop_kept_async(process)
                if not isinstance(stopped, TimeoutError):
                    raise
                return HookOutcome(entry, None, f"stopped after {entry.timeout:g}s")
        text = stderr.decode("utf-8", "replace").strip()[:MAX_STDERR_CHARS]
        if confined.moved:
            log.warning("the %s hook %r: %s", event, entry.command, confined.notes())
            text = f"{text}\n{confined.notes()}".strip()
        return HookOutcome(entry, process.returncode, text)

    # -- the events ---------------------------------------------------------------------------------------------

    async def before_turn(self, prompt: str, *, starting: bool = False) -> str | None:
        """The current turn is about to send ``prompt`` (``starting``: the first of a session, so ``session_start``
        runs first): None to go on, or why a ``user_prompt`` hook kept the message back."""
        if starting:
            await self.session_start()
        return await self.user_prompt(prompt)

    async def session_start(self) -> None:
        """The session begins."""
        await self.run("session_start", {})

    async def user_prompt(self, prompt: str) -> str | None:
        """Before ``prompt`` goes to the model: None to go on, or why a hook kept it back."""
        for outcome in await self.run("user_prompt", {"prompt": prompt[:MAX_PAYLOAD_CHARS]}):
            if outcome.blocked:
                return outcome.stderr or f"the user_prompt hook {outcome.entry.command!r} kept it back"
        return None

    async def before_tool(self, call: ToolCall, tool: Tool) -> str | None:
        """Before a call runs: None to go on, or the reason a hook blocked it."""
        payload = {"tool": tool.name, "arguments": call.arguments}
        for outcome in await self.run("before_tool", payload, tool=tool.name):
            if outcome.blocked:
                return f"a hook blocked it: {outcome.stderr or outcome.entry.command}"
        return None

    async def after_tool(self, call: ToolCall, tool: Tool, result: Message) -> str | None:
        """After a call ran: what the hooks' stderr says for the model, when one exits 2."""
        payload = {
            "tool": tool.name,
            "arguments": call.arguments,
            "result": result.content[:MAX_PAYLOAD_CHARS],
            "ok": not result.is_error,
        }
        said = [outcome.stderr for outcome in await self.run("after_tool", payload, tool=tool.name) if outcome.blocked]
        return "\n".join(text for text in said if text) or None

    async def stop(self, answer: str) -> None:
        """The answer is out."""
        await self.run("stop", {"answer": answer[:MAX_PAYLOAD_CHARS]})


async def _talk(process: asyncio.subprocess.Process, body: bytes) -> bytes:
    """Give a hook its event on stdin and read its stderr, keeping at most ``MAX_STDERR_CHARS`` bytes of it (a hook
    that prints gigabytes costs kilobytes), until it exits."""
    assert process.stdin is not None and process.stderr is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a hook need not read its event
        process.stdin.write(body)
        await process.stdin.drain()
    process.stdin.close()
    kept = bytearray()
    while chunk := await process.stderr.read(1 << 16):
        kept += chunk[: max(0, MAX_STDERR_CHARS * 4 - len(kept))]
    await process.wait()
    return bytes(kept)


PLAN_MODE_REFUSAL = (
    "plan mode: only reading tools run until the user accepts a plan. Do not try it again: write the change into "
    "your plan instead"
)
"""The reason the model reads for a call that would change something while the user asked for a plan first."""


COMMAND_TOOLS_REFUSAL = (
    "the user's command allows only these tools: {tools}. Do not call another: do what these can, or say what you "
    "would need"
)
"""The reason the model reads for a call of a tool the user's command (its ``allowed-tools``) leaves out."""


class ToolRules:
    """The assistant's rules around every tool call: plan mode (in a turn in plan mode, :attr:`TurnState.plan
    <cortana.turn.TurnState.plan>`, only read-only tools run: a write, an edit or a command is refused with
    :data:`PLAN_MODE_REFUSAL`), the tools a user command allows (:attr:`TurnState.tools
    <cortana.turn.TurnState.tools>`: any other is refused with :data:`COMMAND_TOOLS_REFUSAL`), then the user's
    hooks."""

    def __init__(self, hooks: CommandHooks | None = None) -> None:
        self.hooks = hooks if hooks else None

    @staticmethod
    def plan_context() -> str:
        """What a turn in plan mode is told (a context block of its message): read, then answer with a plan."""
        return prompt_text("plan_mode")

    @staticmethod
    def command_context(name: str, tools: tuple[str, ...]) -> str:
        """What a turn of the user's command ``/name`` is told when the command allows only ``tools``."""
        return prompt_text("command_tools").format(name=name, tools=", ".join(tools) or "none")

    @staticmethod
    def plan_accepted() -> str:
        """The message that carries an accepted plan out (plan mode is off by then)."""
        return prompt_text("plan_accepted")

    async def before_tool(self, call: ToolCall, tool: Tool) -> str | None:
        turn = turn_state()
        if turn is not None and turn.plan and not tool.read_only:
            return PLAN_MODE_REFUSAL
        if turn is not None and not turn.allows(tool.name):
            return COMMAND_TOOLS_REFUSAL.format(tools=", ".join(turn.tools or ()) or "none")
        return await self.hooks.before_tool(call, tool) if self.hooks is not None else None

    async def after_tool(self, call: ToolCall, tool: Tool, result: Message) -> str | None:
        return await self.hooks.after_tool(call, tool, result) if self.hooks is not None else None
