"""Tools: pydantic-validated callables, groups loaded on demand, and the permission gate."""

from cortana.tools.base import RunContext, Tool, ToolArgumentsError, ToolGroup, format_tool_result, tool
from cortana.tools.permissions import PermissionDecision, PermissionGate

__all__ = [
    "PermissionDecision",
    "PermissionGate",
    "RunContext",
    "Tool",
    "ToolArgumentsError",
    "ToolGroup",
    "format_tool_result",
    "tool",
]
