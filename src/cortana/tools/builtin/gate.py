"""``workspace_gate``: the permission gate for the built-in tools.

- Reads are allowed; writes, edits and commands ask.
- A path outside the workspace (or one that is not a path) is refused before
  anyone is asked. No approval changes that: confinement is checked first, on
  every call.
- A write to a protected path (``.git/``, ``.cortana/``, ``cortana.yml``,
  ``personality/``, ``skills/``) is asked for every time, whatever ``allow``
  rules, ``--yes`` or an earlier "always" say.
- "Always" covers a scope, shown in the prompt: writes and edits in one folder
  (and below), commands of one program without chaining, redirection or
  substitution (``pytest …``, never ``ls && curl … | sh``). A command that
  chains is asked for every time.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cortana.errors import ToolError
from cortana.tools.builtin.workspace import PROTECTED, Workspace
from cortana.tools.permissions import Action, Approver, PermissionDecision, PermissionGate, Scope

if TYPE_CHECKING:
    from cortana.messages import ToolCall
    from cortana.tools.base import Tool
    from cortana.tools.context import RunContext

__all__ = ["PATH_ARGUMENTS", "command_program", "workspace_gate", "workspace_scope"]

PATH_ARGUMENTS = ("path",)
COMMAND_TOOL = "run_command"
_SHELL_SYNTAX = re.compile(r"[;&|<>`$(){}\n\r\\*?\[\]~!#]")
"""Characters that chain, redirect, substitute or expand: a command with any of them is never covered by "always"."""


def command_program(command: str) -> str | None:
    """The program of a plain command (``pytest -q tests`` -> ``pytest``); None when it chains or expands."""
    if _SHELL_SYNTAX.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or "=" in words[0]:  # VAR=value cmd: the environment changes what runs
        return None
    return words[0]


def workspace_scope(space: Workspace) -> Callable[[ToolCall, Tool], Scope | None]:
    """What "always" covers for a built-in tool's call (see the module docstring)."""

    def scope(call: ToolCall, tool: Tool) -> Scope | None:
        path = next(
            (call.arguments[name] for name in PATH_ARGUMENTS if isinstance(call.arguments.get(name), str)), None
        )
        if path is not None and not tool.read_only:
            try:
                target = space.resolve(path)
            except ToolError:
                return None
            if target == space.root:
                return None  # the workspace itself ("." or ""): no scope; the tool says what is wrong with it
            folder = space.relative(target.parent)
            if folder == ".":  # the top folder only: an answer here does not reach into every subfolder
                return Scope(tool.name, "folder:", f"{tool.name} in the workspace's top folder")
            return Scope(tool.name, f"folder:{folder}", f"{tool.name} in {folder}/ and below")
        if tool.name == COMMAND_TOOL:
            command = call.arguments.get("command")
            program = command_program(command) if isinstance(command, str) else None
            if program is None:
                return None
            return Scope(tool.name, f"program:{program}", f"{tool.name}: {program} … (without ; && | > $( ` )")
        return Scope(tool.name, None, f"every call of {tool.name}")

    return scope


def workspace_gate(
    workspace: Path | str | Workspace,
    *,
    approve: Approver | None = None,
    allow: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
) -> PermissionGate:
    """A gate for the built-in tools: reads allowed, writes/edits/commands ask, paths outside the workspace refused.

    Args:
        workspace: the folder.
        approve: asked for writes and commands, ``approve(call, tool, reason[, scope])`` (None: they are refused).
        allow: tool-name globs allowed without asking (cortana.yml ``permissions.allow``, or ``--yes``: ``("*",)``);
            never protected paths.
        deny: tool-name globs always refused (cortana.yml ``permissions.deny``); deny wins over allow.
    """
    space = workspace if isinstance(workspace, Workspace) else Workspace(workspace)

    def check(call: ToolCall, tool: Tool, context: RunContext) -> PermissionDecision | None:
        for name in PATH_ARGUMENTS:
            value = call.arguments.get(name)
            if not isinstance(value, str):
                continue
            try:
                target = space.resolve(value)
            except ToolError as exc:  # outside the workspace, or not a path at all
                return PermissionDecision.deny(str(exc))
            protected = space.protected(target)
            if protected is not None and not tool.read_only:
                return PermissionDecision.ask(f"{protected} is protected: asked every time", every_time=True)
        command = call.arguments.get("command")
        if tool.name == COMMAND_TOOL and isinstance(command, str):
            named = sorted({shown for name, shown in PROTECTED.items() if name in command})
            if named:
                return PermissionDecision.ask(f"it names {', '.join(named)}: asked every time", every_time=True)
        return None

    rules: dict[str, Action] = {**dict.fromkeys(allow, "allow"), **dict.fromkeys(deny, "deny")}
    return PermissionGate(
        default="ask",
        read_only_default="allow",
        rules=rules,
        check=check,
        approve=approve,
        scope=workspace_scope(space),
    )
