"""A scratch copy of the workspace, where candidate patches are tried: the user's files are never touched.

The copy holds the files git lists (tracked and untracked, ignores respected,
through :func:`cortana.safegit.safe_git_environment`), so the user's
uncommitted changes, a test they just wrote included, are in it; outside git,
the folder's files. Either way the folders that are not the project
(``cortana.config.NOT_THE_PROJECT``: version control, Cortana's own, virtual
environments, ``node_modules`` and caches) stay where they are (the tests run
with the project's own Python, which the runner finds). A candidate is written
into the copy, its tests run, and the copy's files are put back as they were
before the next one. The copy is bounded (``MAX_FILES``, ``MAX_BYTES``) and removed when
the workflow ends, however it ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from cortana.config import not_project_folders
from cortana.errors import UserError
from cortana.safefs import PathRefused, SafeTree
from cortana.sandbox.policy import Sandbox
from cortana.sandbox.processes import run_kept

__all__ = ["MAX_BYTES", "MAX_FILES", "ScratchCopy"]

MAX_FILES = 20_000
MAX_BYTES = 512 * 1024 * 1024


class ScratchCopy:
    """A temporary copy of ``workspace`` (see the module docstring); a context manager.

    Args:
        workspace: the folder to copy.
        git_environment: the environment git runs with to list the files (no repository programs).
        sandbox: the workspace's sandbox: git lists the files confined by it, reading only.
    """

    def __init__(self, workspace: Path, git_environment: Mapping[str, str], sandbox: Sandbox | None = None) -> None:
        self.workspace = workspace.resolve()
        self._git_environment = git_environment
        self._sandbox = sandbox
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        self.root = Path()
        self._tree: SafeTree | None = None
        self._saved: dict[str, bytes | None] = {}

    def __enter__(self) -> ScratchCopy:
        self._temporary = tempfile.TemporaryDirectory(prefix="cortana-fix-")
        self.root = Path(self._temporary.name) / self.workspace.name
        self.root.mkdir()
        self._tree = SafeTree(self.root)
        total = 0
        files = self._files()
        if len(files) > MAX_FILES:
            self.close()
            raise UserError(
                f"{self.workspace} has {len(files):,} files, more than the {MAX_FILES:,} a scratch copy may hold; "
                "run the fix in the project's own folder"
            )
        source_tree = SafeTree(self.workspace)
        for relative in files:
            try:
                fd, info = source_tree.open_regular(relative)  # a symlink (on the way too) is not copied
            except OSError:
                continue
            with os.fdopen(fd, "rb") as source:
                total += info.st_size
                if total > MAX_BYTES:
                    self.close()
                    raise UserError(
                        f"{self.workspace} holds more than {MAX_BYTES >> 20} MiB of files to copy; "
                        "run the fix in the project's own folder"
                    )
                try:
                    with os.fdopen(self.tree.create(relative, mode=stat.S_IMODE(info.st_mode)), "wb") as target:
                        shutil.copyfileobj(source, target)
                except OSError:
                    continue
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Remove the copy."""
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None

    @property
    def tree(self) -> SafeTree:
        """The copy, as Cortana's one writer reaches it."""
        if self._tree is None:
            raise UserError("the scratch copy is not made yet (enter it first)")
        return self._tree

    def write(self, files: Mapping[str, str]) -> None:
        """Write ``files`` (relative path -> text) into the copy, remembering what was there.

        The copy is written by the tests it runs, confined to it: a folder there may have become a symlink out of
        it, so every write goes through Cortana's one writer (:class:`cortana.safefs.SafeTree`), which follows none.

        Raises:
            UserError: a path that leaves the copy, or goes through a symlink.
        """
        for relative, text in files.items():
            try:
                if relative not in self._saved:
                    self._saved[relative] = self._content(relative)
                self.tree.write_text(relative, text)
            except PathRefused as refused:
                raise UserError(f"{refused} (in the scratch copy)") from None

    def restore(self) -> None:
        """Put back what :meth:`write` replaced (a file a test run swapped for a symlink is removed, not followed)."""
        for relative, content in self._saved.items():
            with contextlib.suppress(OSError):
                if content is None:
                    self.tree.unlink(relative)
                else:
                    self.tree.write_bytes(relative, content)
        self._saved.clear()

    def _content(self, relative: str) -> bytes | None:
        try:
            return self.tree.read_bytes(relative)
        except FileNotFoundError:
            return None

    def _files(self) -> list[str]:
        listed = self._git_files()
        if listed is not None:
            return listed
        found: list[str] = []
        skipped = not_project_folders()
        for folder, dirnames, filenames in os.walk(self.workspace):
            dirnames[:] = [d for d in dirnames if d not in skipped]
            base = Path(folder).relative_to(self.workspace)
            found += [(base / name).as_posix() for name in filenames]
            if len(found) > MAX_FILES:
                break
        return found

    def _git_files(self) -> list[str] | None:
        argv = ["git", "-C", str(self.workspace), "ls-files", "-co", "--exclude-standard", "-z"]
        environment = dict(self._git_environment)
        sandbox = self._sandbox or Sandbox(self.workspace, enabled=False)
        try:
            with sandbox.confined(workspace=False) as confined:
                done = run_kept(confined.argv(argv), env=confined.environment(environment), timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode != 0:
            return None
        names = [item.decode("utf-8", "surrogateescape") for item in done.stdout.split(b"\0") if item]
        skipped = not_project_folders()
        return [name for name in dict.fromkeys(names) if skipped.isdisjoint(name.split("/"))]
