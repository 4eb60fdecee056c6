"""``workspace_gate``: the permission gate for the built-in tools.

- Reads are allowed; writes, edits and commands ask.
- A path outside the workspace (or one that is not a path) is refused before
  anyone is asked. No approval changes that: confinement is checked first, on
  every call.
- A write to a protected path (``.git/``, ``.cortana/``, ``cortana.yml``,
  ``personality/``, ``skills/``, and the files a trusted MCP server runs) is
  asked for every time, whatever ``allow`` rules, ``--yes`` or an earlier
  "always" say; so is a command that may reach one, however it spells it, or
  that the gate cannot show to stay clear of them (``reach.py``).
- "Always" covers a scope, shown in the prompt: writes and edits in one folder
  (and below); for a command, its argv prefix (``git status``, ``python -m
  pytest``), and only when the command is plain (``command_scope.py``): a
  command with a redirection, a substitution, or options that run code or
  change the program's config is never covered, and none is offered.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cortana.errors import ToolError
from cortana.tools.builtin.command_scope import command_prefixes, prefix_label
from cortana.tools.builtin.reach import command_reach
from cortana.tools.builtin.shell import parse_command
from cortana.tools.builtin.workspace import Workspace
from cortana.tools.permissions import Action, Approver, PermissionDecision, PermissionGate, Scope

if TYPE_CHECKING:
    from cortana.messages import ToolCall
    from cortana.tools.base import Tool
    from cortana.tools.context import RunContext

__all__ = ["PATH_ARGUMENTS", "command_scope", "workspace_gate", "workspace_scope"]

PATH_ARGUMENTS = ("path",)
COMMAND_TOOL = "run_command"


def command_scope(command: str, space: Workspace, tool: str = COMMAND_TOOL) -> Scope | None:
    """What "always" covers for ``command``: its argv prefix, or each part's for a list; None when it is not plain."""
    prefixes = command_prefixes(parse_command(command), lambda folder: _inside(space, folder))
    if prefixes is None:
        return None
    parts = tuple(Scope(tool, f"argv:{prefix_label(prefix)}", prefix_label(prefix)) for prefix in prefixes)
    if len(parts) == 1:
        return parts[0]
    return Scope(tool, None, ", ".join(part.label for part in parts), parts=parts)


def _inside(space: Workspace, folder: str) -> bool:
    try:
        space.resolve(folder)
    except ToolError:
        return False
    return True


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
            return command_scope(command, space, tool.name) if isinstance(command, str) else None
        return Scope(tool.name, None, f"every call of {tool.name}")

    return scope


def workspace_gate(
    workspace: Path | str | Workspace,
    *,
    approve: Approver | None = None,
    allow: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
    protected_files: tuple[Path, ...] = (),
) -> PermissionGate:
    """A gate for the built-in tools: reads allowed, writes/edits/commands ask, paths outside the workspace refused.

    Args:
        workspace: the folder.
        approve: asked for writes and commands, ``approve(call, tool, reason[, scope])`` (None: they are refused).
        allow: tool-name globs allowed without asking (cortana.yml ``permissions.allow``, or ``--yes``: ``("*",)``);
            never protected paths.
        deny: tool-name globs always refused (cortana.yml ``permissions.deny``); deny wins over allow.
        protected_files: more paths asked for every time (the files a trusted MCP server runs); with a
            :class:`Workspace`, its own ``protected_files`` count too.
    """
    if isinstance(workspace, Workspace):
        space = workspace
        if protected_files:
            space = Workspace(workspace.root, forbidden=workspace.forbidden,
                              protected_files=[*workspace.protected_files, *protected_files])  # fmt: skip
    else:
        space = Workspace(workspace, protected_files=protected_files)

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
            reach = command_reach(command, space)
            if reach is not None:
                return PermissionDecision.ask(f"{reach}: asked every time", every_time=True)
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
