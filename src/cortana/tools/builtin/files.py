"""The built-in tools and the workspace they are confined to."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pathspec

from cortana.errors import PermissionDenied, ToolError
from cortana.tools.base import Tool
from cortana.tools.permissions import Approver, PermissionDecision, PermissionGate

if TYPE_CHECKING:
    from cortana.messages import ToolCall
    from cortana.tools.context import RunContext

__all__ = ["MAX_OUTPUT_CHARS", "Workspace", "builtin_tools", "workspace_gate"]

MAX_OUTPUT_CHARS = 12_000
PATH_ARGUMENTS = ("path",)
ALWAYS_IGNORED = {".git", ".cortana", "__pycache__", ".venv", "node_modules"}


class Workspace:
    """A folder the tools may touch; ``resolve`` refuses paths that leave it."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the workspace, or absolute) resolved; raises ``PermissionDenied`` outside it."""
        target = (self.root / os.path.expanduser(path)).resolve()
        if not self.contains(target):
            raise PermissionDenied(
                f"'{path}' resolves to {target}, outside the workspace {self.root}; only paths inside it are allowed"
            )
        return target

    def contains(self, target: Path) -> bool:
        """Whether a resolved path is the workspace or inside it."""
        return target == self.root or self.root in target.parents

    def relative(self, target: Path) -> str:
        """``target`` relative to the workspace root, for display."""
        return str(target.relative_to(self.root)) if target != self.root else "."

    def files(self, start: Path) -> Iterator[Path]:
        """Files under ``start``, skipping what .gitignore (and version-control folders) exclude."""
        spec = self._gitignore()
        for folder, dirnames, filenames in os.walk(start):
            base = Path(folder)
            dirnames[:] = sorted(
                d for d in dirnames if d not in ALWAYS_IGNORED and not self._ignored(spec, base / d, is_dir=True)
            )
            for name in sorted(filenames):
                path = base / name
                if not self._ignored(spec, path, is_dir=False):
                    yield path

    def _gitignore(self) -> Any:
        lines: list[str] = []
        for ignore_file in (self.root / ".gitignore",):
            if ignore_file.is_file():
                lines += ignore_file.read_text(errors="replace").splitlines()
        return pathspec.GitIgnoreSpec.from_lines(lines)

    def _ignored(self, spec: Any, path: Path, *, is_dir: bool) -> bool:
        relative = self.relative(path) + ("/" if is_dir else "")
        return bool(spec.match_file(relative))


def _cut(text: str, hint: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return text[:MAX_OUTPUT_CHARS] + f"\n[... output cut at {MAX_OUTPUT_CHARS:,} of {len(text):,} characters; {hint}]"


def builtin_tools(workspace: Path | str | Workspace, *, command_timeout: float = 120.0) -> list[Tool]:
    """The six built-in tools, confined to ``workspace``."""
    space = workspace if isinstance(workspace, Workspace) else Workspace(workspace)

    def read_file(path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Read a text file, with line numbers.

        Args:
            path: the file, relative to the workspace.
            start_line: the first line to show (1-based).
            end_line: the last line to show (default: to the end).
        """
        target = space.resolve(path)
        if not target.is_file():
            raise ToolError(f"No file '{path}'. Use list_files to see what exists.")
        lines = target.read_text(errors="replace").splitlines()
        last = len(lines) if end_line is None else min(end_line, len(lines))
        if start_line < 1 or start_line > max(last, 1):
            raise ToolError(f"'{path}' has {len(lines)} lines; start_line {start_line} is out of range.")
        shown = "\n".join(f"{number:>5}  {lines[number - 1]}" for number in range(start_line, last + 1))
        return _cut(shown or "(empty file)", "call read_file again with start_line/end_line to see more")

    def list_files(path: str = ".", pattern: str = "*") -> str:
        """List files under a folder (respecting .gitignore).

        Args:
            path: the folder, relative to the workspace.
            pattern: a glob on file names, e.g. "*.py".
        """
        target = space.resolve(path)
        if not target.is_dir():
            raise ToolError(f"No folder '{path}'.")
        found = [space.relative(f) for f in space.files(target) if fnmatch.fnmatch(f.name, pattern)]
        return _cut("\n".join(found) or "(no files)", "narrow it with path= or pattern=")

    def grep_files(pattern: str, path: str = ".", context: int = 0, glob: str = "*") -> str:
        """Search files for a regular expression, showing file:line matches.

        Args:
            pattern: a Python regular expression.
            path: the folder or file to search, relative to the workspace.
            context: lines of context to show around each match.
            glob: a glob on file names to search, e.g. "*.py".
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {pattern!r}: {exc}") from None
        target = space.resolve(path)
        files = [target] if target.is_file() else [f for f in space.files(target) if fnmatch.fnmatch(f.name, glob)]
        out: list[str] = []
        for file in files:
            try:
                lines = file.read_text(errors="strict").splitlines()
            except (UnicodeDecodeError, OSError):
                continue  # binary or unreadable
            for index, line in enumerate(lines):
                if regex.search(line):
                    low, high = max(index - context, 0), min(index + context + 1, len(lines))
                    for number in range(low, high):
                        marker = ":" if number == index else "-"
                        out.append(f"{space.relative(file)}{marker}{number + 1}{marker}{lines[number]}")
                    if context:
                        out.append("--")
        return _cut("\n".join(out) or "(no matches)", "narrow it with path= or glob=")

    def write_file(path: str, content: str) -> str:
        """Create or overwrite a file with the given content.

        Args:
            path: the file, relative to the workspace.
            content: the whole new content.
        """
        target = space.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return f"Wrote {space.relative(target)} ({len(content.splitlines())} lines)."

    def edit_file(path: str, old_text: str, new_text: str) -> str:
        """Replace one exact piece of text in a file.

        Args:
            path: the file, relative to the workspace.
            old_text: the exact text to replace; it must appear exactly once.
            new_text: the replacement.
        """
        target = space.resolve(path)
        if not target.is_file():
            raise ToolError(f"No file '{path}'.")
        text = target.read_text()
        count = text.count(old_text)
        if count == 0:
            raise ToolError(f"old_text was not found in '{path}'; read the file and copy the text exactly.")
        if count > 1:
            raise ToolError(
                f"old_text appears {count} times in '{path}'; include more surrounding lines so it is unique."
            )
        target.write_text(text.replace(old_text, new_text, 1))
        return f"Edited {space.relative(target)}."

    async def run_command(command: str, timeout: float = command_timeout) -> str:
        """Run a shell command in the workspace and return its exit code and output.

        Args:
            command: the command line (run by /bin/sh).
            timeout: seconds before it is stopped.
        """
        process = await asyncio.create_subprocess_shell(
            command, cwd=space.root, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise ToolError(f"'{command}' did not finish within {timeout:g}s and was stopped.") from None
        text = output.decode(errors="replace")
        return _cut(f"exit code {process.returncode}\n{text}", "redirect the output to a file and read parts of it")

    return [
        Tool(read_file, read_only=True),
        Tool(list_files, read_only=True),
        Tool(grep_files, read_only=True),
        Tool(write_file),
        Tool(edit_file),
        Tool(run_command),
    ]


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
                except PermissionDenied as exc:
                    return PermissionDecision.deny(str(exc))
        return None

    rules = dict.fromkeys(allow, "allow")
    return PermissionGate(default="ask", read_only_default="allow", rules=rules, check=check, approve=approve)  # type: ignore[arg-type]
