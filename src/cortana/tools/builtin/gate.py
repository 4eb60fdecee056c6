"""``workspace_gate``: the permission gate for the built-in tools.

- Reads are allowed; writes and edits ask.
- Commands: where the kernel confines them (``cortana.sandbox``: writes only
  in the workspace, its protected paths read-only, no network), a confined
  command runs without asking (``ask_confined=True`` asks anyway); one the
  model wants outside the sandbox (``sandbox=false``) is asked for every
  time, with the reason, and no "always" covers it. Where the kernel cannot
  confine, every command asks. In a workspace that is the home folder or
  ``/`` (``Sandbox.too_wide``), no command is confined to it: each is asked
  every time, ``--yes`` included, and the dotfiles at its top are protected
  paths. In a turn nobody watches (a heartbeat's check-in) commands are
  asked, so refused, as before the sandbox.
- A path outside the workspace (or one that is not a path) is refused before
  anyone is asked. No approval changes that: confinement is checked first, on
  every call.
- A write to a protected path (``.git/``, ``.cortana/``, ``cortana.yml``,
  ``personality/``, ``skills/``, and the files a trusted MCP server runs) is
  asked for every time, whatever ``allow`` rules, ``--yes`` or an earlier
  "always" say. For an unconfined command, what the text shows of such a path
  (``reach.py``) is the reason it is asked every time; for a confined one the
  kernel keeps those paths read-only, whatever the spelling.
- A fetch from the web (``web_fetch``) is asked for once per host; "always"
  covers that host. A URL that is not http(s), or a literal private,
  link-local or metadata address, is refused before anyone is asked.
- "Always" covers a scope, shown in the prompt: writes and edits in one folder
  (and below). For a command where the kernel cannot confine it, the exact
  command, or a short list of read-only programs with any arguments
  (``command_scope.py``); for a confined command asked anyway, its argv
  prefix (``git status``, ``python -m pytest``). A command with a
  redirection, a substitution or a program that runs its arguments is never
  covered, and none is offered.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cortana.errors import ToolError
from cortana.tools.builtin.command_scope import command_prefixes, prefix_label
from cortana.tools.builtin.commands import SANDBOX_ARGUMENT
from cortana.tools.builtin.reach import command_reach
from cortana.tools.builtin.shell import parse_command
from cortana.tools.builtin.web import host_scope_key, refused_before_asking
from cortana.tools.builtin.workspace import Workspace
from cortana.tools.permissions import Action, Approver, PermissionDecision, PermissionGate, Scope

if TYPE_CHECKING:
    from cortana.messages import ToolCall
    from cortana.tools.base import Tool
    from cortana.tools.context import RunContext

__all__ = ["PATH_ARGUMENTS", "command_scope", "workspace_gate", "workspace_scope"]

PATH_ARGUMENTS = ("path",)
COMMAND_TOOL = "run_command"
OUTSIDE_THE_SANDBOX = (
    "it runs outside the sandbox: it may use the network, write outside the workspace and change .git/ and the "
    "other protected paths; asked every time"
)
_CONFINED_VALUES = (None, True, "true", "True", 1)
"""Values of ``sandbox`` the gate reads as "confined"; anything else is asked (what validation makes of an odd
value must never run a command outside the sandbox unasked)."""


def command_scope(command: str, space: Workspace, tool: str = COMMAND_TOOL, *, exact: bool = False) -> Scope | None:
    """What "always" covers for ``command``: its argv prefix (``exact``: the whole command, but for read-only
    programs), or each part's for a list; None when it is not plain."""
    prefixes = command_prefixes(parse_command(command), lambda folder: _inside(space, folder), exact=exact)
    if prefixes is None:
        return None
    parts = tuple(Scope(tool, f"argv:{prefix_label(prefix)}", prefix_label(prefix)) for prefix in prefixes)
    if len(parts) == 1:
        return parts[0]
    return Scope(tool, None, ", ".join(part.label for part in parts), parts=parts)


def _command_decision(
    command: str, sandbox_argument: object, space: Workspace, ask_confined: bool
) -> PermissionDecision | None:
    """A command's decision before the rules: a confined one runs (or asks with a scope), one outside the sandbox
    is asked every time; where nothing confines it, what its text may reach decides whether it is asked every time.
    """
    reach = command_reach(command, space)
    wide = space.sandbox.too_wide
    if wide is not None:  # the home folder or /: nothing may confine a command to it, and --yes does not cover it
        return PermissionDecision.ask(f"{wide}, where commands are not confined: asked every time", every_time=True)
    if space.sandbox.confines:
        if sandbox_argument not in _CONFINED_VALUES:
            return PermissionDecision.ask(OUTSIDE_THE_SANDBOX + (f" ({reach})" if reach else ""), every_time=True)
        return None if ask_confined else PermissionDecision.allow()
    if reach is not None:
        return PermissionDecision.ask(f"{reach}: asked every time", every_time=True)
    return None


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
        if tool.kind == "fetch" and (host := host_scope_key(call.arguments.get("url"))) is not None:
            return Scope(tool.name, f"host:{host}", f"{tool.name} from {host}")
        if tool.name == COMMAND_TOOL:
            command = call.arguments.get("command")
            exact = not space.sandbox.confines  # where nothing confines it, options must not widen an answer
            return command_scope(command, space, tool.name, exact=exact) if isinstance(command, str) else None
        return Scope(tool.name, None, f"every call of {tool.name}")

    return scope


def workspace_gate(
    workspace: Path | str | Workspace,
    *,
    approve: Approver | None = None,
    allow: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
    protected_files: tuple[Path, ...] = (),
    ask_confined: bool = False,
) -> PermissionGate:
    """A gate for the built-in tools: reads allowed, writes and edits ask, confined commands run, unconfined ones
    ask, paths outside the workspace refused (see the module docstring).

    Args:
        workspace: the folder.
        approve: asked for writes and commands, ``approve(call, tool, reason[, scope])`` (None: they are refused).
        allow: tool-name globs allowed without asking (cortana.yml ``permissions.allow``, or ``--yes``: ``("*",)``);
            never protected paths.
        deny: tool-name globs always refused (cortana.yml ``permissions.deny``); deny wins over allow.
        protected_files: more paths asked for every time (the files a trusted MCP server runs); with a
            :class:`Workspace`, its own ``protected_files`` count too.
        ask_confined: ask for commands the kernel confines too (cortana.yml ``sandbox.ask: true``).
    """
    if isinstance(workspace, Workspace):
        space = workspace
        if protected_files:
            space = Workspace(workspace.root, forbidden=workspace.forbidden, sandbox=workspace.sandbox.enabled,
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
        if tool.kind == "fetch" and (why := refused_before_asking(call.arguments.get("url"))) is not None:
            return PermissionDecision.deny(why)
        command = call.arguments.get("command")
        if tool.name == COMMAND_TOOL and isinstance(command, str):
            # a turn nobody watches (a check-in) speaks first; it does not act: commands are asked, so refused
            ask = ask_confined or context.unattended
            return _command_decision(command, call.arguments.get(SANDBOX_ARGUMENT), space, ask)
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
