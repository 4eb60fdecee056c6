"""``workspace_gate``: the permission gate for the built-in tools.

Reads are allowed; writes, edits and commands ask. A path outside the
workspace is refused before anyone is asked, and no approval changes that:
confinement is checked on every call, first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cortana.errors import ToolError
from cortana.tools.builtin.workspace import Workspace
from cortana.tools.permissions import Approver, PermissionDecision, PermissionGate

if TYPE_CHECKING:
    from cortana.messages import ToolCall
    from cortana.tools.base import Tool
    from cortana.tools.context import RunContext

__all__ = ["PATH_ARGUMENTS", "workspace_gate"]

PATH_ARGUMENTS = ("path",)


def workspace_gate(
    workspace: Path | str | Workspace, *, approve: Approver | None = None, allow: tuple[str, ...] = ()
) -> PermissionGate:
    """A gate for the built-in tools: reads allowed, writes/edits/commands ask, paths outside the workspace refused.

    Args:
        workspace: the folder.
        approve: asked for writes, commands and escapes (None: they are refused).
        allow: tool-name globs allowed without asking (cortana.yml ``permissions.allow``, or ``--yes``: ``("*",)``).
    """
    space = workspace if isinstance(workspace, Workspace) else Workspace(workspace)

    def check(call: ToolCall, tool: Tool, context: RunContext) -> PermissionDecision | None:
        for name in PATH_ARGUMENTS:
            value = call.arguments.get(name)
            if isinstance(value, str):
                try:
                    space.resolve(value)
                except ToolError as exc:  # outside the workspace, or not a path at all
                    return PermissionDecision.deny(str(exc))
        return None

    rules = dict.fromkeys(allow, "allow")
    return PermissionGate(default="ask", read_only_default="allow", rules=rules, check=check, approve=approve)  # type: ignore[arg-type]
