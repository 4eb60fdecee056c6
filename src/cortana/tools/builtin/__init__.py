"""Built-in tools for working in a folder: read, list, search, write and edit files, run commands.

    tools = builtin_tools(Path.cwd())
    agent = Agent(client, tools=tools, permissions=workspace_gate(Path.cwd(), approve=ask_user))

Every path is resolved (symlinks, ``..``) and must stay inside the workspace:
``workspace_gate`` refuses an escape before anyone is asked, and the tools
refuse it again themselves, opening files without following a symlink that
appears on the way. Reads are allowed by default; writes, edits and commands
ask. Outputs are bounded, with a note saying how to see more.

    workspace.py   Workspace: resolving and opening paths inside the folder
    files.py       read_file, list_files, grep_files, write_file, edit_file
    commands.py    run_command
    background.py  BackgroundCommands: run_command(background=true), command_output, stop_command
    shellprocess.py    start_shell: the one way these tools start a process (under the keeper)
    gate.py        workspace_gate
    shell.py       reading a command as sh does: words, operators, redirections, expansions
    command_scope.py   what an "always" for a command covers (an argv prefix, plain commands only)
    reach.py       whether a command may reach a protected path, however it spells it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from cortana.tools import Tool
from cortana.tools.builtin.background import BackgroundCommands
from cortana.tools.builtin.commands import command_tool
from cortana.tools.builtin.files import MAX_OUTPUT_CHARS, EditorBuffers, WriteLog, file_tools
from cortana.tools.builtin.gate import workspace_gate
from cortana.tools.builtin.lint import Linter
from cortana.tools.builtin.workspace import PROTECTED, Workspace

__all__ = [
    "MAX_OUTPUT_CHARS",
    "PROTECTED",
    "BackgroundCommands",
    "EditorBuffers",
    "Workspace",
    "WriteLog",
    "builtin_tools",
    "workspace_gate",
]


def builtin_tools(
    workspace: Path | str | Workspace,
    *,
    command_timeout: float = 120.0,
    forbidden: Sequence[Path] = (),
    trusted_git: bool = False,
    buffers: EditorBuffers | None = None,
    lint: Mapping[str, str] | None = None,
    write_log: WriteLog | None = None,
    background: BackgroundCommands | None = None,
) -> list[Tool]:
    """The six built-in tools, confined to ``workspace`` (eight with ``background``).

    Args:
        workspace: the folder.
        command_timeout: the default timeout of ``run_command`` (the model may ask for up to 600 s).
        forbidden: folders inside the workspace no tool may write to (when ``workspace`` is a path).
        trusted_git: let the git that commands run use the repository's hooks and configured programs
            (off by default: a folder's ``.git/config`` is the folder's text, not its user's).
        buffers: an editor whose buffers the file tools read and write (``cortana acp``), else the disk.
        lint: cortana.yml's ``lint:`` (file-name glob -> command); None: no check after a write beyond Python's
            syntax. ``{}``: the project's ruff for Python files (:mod:`cortana.tools.builtin.lint`).
        write_log: told of each write of the file tools just before it (the assistant's checkpoints).
        background: where ``run_command(background=true)`` keeps the commands it starts, which its owner ends (the
            assistant's, closed with it); with it come ``command_output`` and ``stop_command``. None: commands are
            only waited for.
    """
    space = workspace if isinstance(workspace, Workspace) else Workspace(workspace, forbidden=forbidden)
    linter = Linter(space, lint, trusted=trusted_git) if lint is not None else None
    return [
        *file_tools(space, buffers, linter, write_log),
        command_tool(space, command_timeout, trusted_git=trusted_git, background=background),
        *(background.tools() if background is not None else ()),
    ]
