"""Tools: pydantic-validated callables, groups loaded on demand, and the permission gate.

base.py         Tool, SchemaTool, @tool
schema.py       the JSON schema from a function's signature
docstrings.py   descriptions from Google / Sphinx / NumPy docstrings
validation.py   checking the model's arguments; ToolArgumentsError
groups.py       ToolGroup (loaded on demand), as_tools
results.py      a return value as the text the model reads
executor.py     the thread pool sync tools run in
context.py      RunContext, what a tool may know about its run
permissions.py  the permission gate
builtin/        read, list, search, write and edit files; run commands
"""

from cortana.tools.base import SchemaTool, Tool, tool
from cortana.tools.context import RunContext
from cortana.tools.groups import ToolGroup, as_tools
from cortana.tools.permissions import PermissionDecision, PermissionGate
from cortana.tools.results import bound_output, format_tool_result
from cortana.tools.validation import ToolArgumentsError

__all__ = [
    "PermissionDecision",
    "PermissionGate",
    "RunContext",
    "SchemaTool",
    "Tool",
    "ToolArgumentsError",
    "ToolGroup",
    "as_tools",
    "bound_output",
    "format_tool_result",
    "tool",
]
