"""A check after every edit: the problems a file tool's write brought in, handed back in its result.

After ``write_file`` or ``edit_file`` writes a Python file that parses, the project's ruff checks it (the one in
its ``.venv/`` or ``venv/``, else a ``ruff`` on ``PATH`` when the project configures ruff): the text is checked
as it was and as it is now, through ruff's stdin, and only the problems the write added are reported, so a
model is not sent to fix what was there before. Other files (and Python, to replace ruff) are checked by the
commands in cortana.yml's ``lint:`` (a file-name glob -> a command, ``{file}`` its path), whose whole output is
reported when they fail.

The linter is the folder's program: it runs confined by the sandbox, reading the workspace and writing nothing
in it, with no network, for at most ``LINT_TIMEOUT`` seconds; where the kernel cannot confine it, only a folder
the user trusted runs its own linter. A linter that is missing, fails to start or takes too long adds nothing:
the write stands, and the check is a help, never a gate.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from cortana.sandbox.processes import run_kept
from cortana.tools.builtin.workspace import Workspace

__all__ = ["LINT_TIMEOUT", "Linter"]

LINT_TIMEOUT = 20.0
"""Seconds one check may take."""
MAX_REPORT_CHARS = 2_000
"""The most of a linter's output a result carries."""
_RUFF_LINE = re.compile(r"^(?P<place>[^:\n]+:\d+:\d+): (?P<problem>.+)$")


class Linter:
    """The check after an edit (see the module docstring).

    Args:
        space: the workspace (its root, and its sandbox).
        commands: cortana.yml's ``lint:``: a file-name glob -> a command with ``{file}`` (an empty command turns
            the check off for those files, ruff included).
        trusted: the user trusted the folder (its own linter may run where the sandbox cannot confine it).
    """

    def __init__(self, space: Workspace, commands: Mapping[str, str] | None = None, *, trusted: bool = False) -> None:
        self.space = space
        self.commands = dict(commands or {})
        self.trusted = trusted
        self._ruff: str | bool | None = False  # False: not looked for yet

    def check(self, target: Path, before: str | None, after: str) -> str:
        """What to add to a write's result: the problems the write brought into ``target`` ("" for none)."""
        relative = self.space.relative(target)
        command = next((cmd for glob, cmd in self.commands.items() if fnmatch.fnmatch(relative, glob)), None)
        if command is not None:
            return self._configured(command, relative) if command.strip() else ""
        if target.suffix == ".py":
            ruff = self._find_ruff()
            if ruff is not None:
                return self._ruff_check(ruff, relative, before, after)
        return ""

    # -- ruff -----------------------------------------------------------------------------------------------------

    def _find_ruff(self) -> str | None:
        if self._ruff is False:
            root = self.space.root
            own = next(
                (
                    root / venv / "bin" / "ruff"
                    for venv in (".venv", "venv")
                    if (root / venv / "bin" / "ruff").is_file()
                ),
                None,
            )
            if own is not None and (self.space.sandbox.confines or self.trusted):
                self._ruff = str(own)
            elif own is None and _configures_ruff(root):
                self._ruff = shutil.which("ruff")
            else:
                self._ruff = None
        return self._ruff if isinstance(self._ruff, str) else None

    def _ruff_check(self, ruff: str, relative: str, before: str | None, after: str) -> str:
        argv = [ruff, "check", "--no-cache", "--quiet", "--output-format", "concise", "--stdin-filename", relative, "-"]
        now = self._run(argv, after)
        if now is None or not now.strip():
            return ""
        found = [match for line in now.splitlines() if (match := _RUFF_LINE.match(line.strip()))]
        if not found:
            return ""
        earlier = (
            Counter(
                match["problem"]
                for line in (self._run(argv, before) or "").splitlines()
                if (match := _RUFF_LINE.match(line.strip()))
            )
            if before is not None
            else Counter()
        )
        added = []
        for match in found:
            if earlier[match["problem"]] > 0:
                earlier[match["problem"]] -= 1  # there before this write: not this edit's to fix
            else:
                added.append(f"{match['place']}: {match['problem']}")
        if not added:
            return ""
        return _report(f"ruff check finds {len(added)} new problem{'' if len(added) == 1 else 's'}", "\n".join(added))

    # -- cortana.yml's lint: --------------------------------------------------------------------------------------

    def _configured(self, command: str, relative: str) -> str:
        if not (self.space.sandbox.confines or self.trusted):
            return ""  # a folder's own command, and nothing to confine it: only where the user trusted the folder
        try:
            argv = [part.replace("{file}", relative) for part in shlex.split(command)]
        except ValueError:
            return _report("lint: the command in cortana.yml cannot be read", command)
        if not argv:
            return ""
        output = self._run(argv, None, failed_only=True)
        return _report(f"lint ({argv[0]}) reports", output) if output else ""

    # -- running --------------------------------------------------------------------------------------------------

    def _run(self, argv: list[str], stdin: str | None, *, failed_only: bool = False) -> str | None:
        """``argv`` confined (reading the workspace, writing nothing in it) with ``stdin``; its output, or None when
        it could not run. With ``failed_only``, "" when it exits 0."""
        environment = self.space.sandbox.child_environment()
        try:
            with self.space.sandbox.confined(workspace=False, watch=False) as confined:
                done = run_kept(  # under the keeper: no terminal to write escapes to, nothing left running
                    confined.argv(argv),
                    cwd=self.space.root,
                    env=confined.environment(environment),
                    input=stdin if stdin is not None else "",
                    text=True,
                    timeout=LINT_TIMEOUT,
                )
        except (OSError, subprocess.SubprocessError):
            return None
        if failed_only and done.returncode == 0:
            return ""
        return str(done.stdout + done.stderr).strip()


def _configures_ruff(root: Path) -> bool:
    """Whether the project configures ruff (``ruff.toml``, ``.ruff.toml``, or ``[tool.ruff]`` in pyproject.toml)."""
    if (root / "ruff.toml").is_file() or (root / ".ruff.toml").is_file():
        return True
    try:
        return "[tool.ruff" in (root / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _report(title: str, body: str) -> str:
    if len(body) > MAX_REPORT_CHARS:
        body = body[:MAX_REPORT_CHARS] + f"\n[... {len(body) - MAX_REPORT_CHARS:,} more characters]"
    return f"\n{title}:\n{body}\nFix them before you go on, unless the user asked for them."
