"""Built-in tools for working in a folder: read, list, search, write and edit files, run commands.

    tools = builtin_tools(Path.cwd())
    agent = Agent(client, tools=tools, permissions=workspace_gate(Path.cwd(), approve=ask_user))

Every path is resolved (symlinks, ``..``) and must stay inside the workspace:
``workspace_gate`` refuses an escape before anyone is asked, and the tools
refuse it again themselves. Reads are allowed by default; writes, edits and
commands ask.
Large outputs are cut with a note saying how to see more.
"""

from cortana.tools.builtin.files import MAX_OUTPUT_CHARS, Workspace, builtin_tools, workspace_gate

__all__ = ["MAX_OUTPUT_CHARS", "Workspace", "builtin_tools", "workspace_gate"]
