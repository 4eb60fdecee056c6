"""``Workspace``: the folder the built-in tools are confined to, and opening files in it without escaping.

A path is resolved (symlinks, ``..``) and must stay inside the workspace.
Then it is read or written through :class:`cortana.safefs.SafeTree`, one
component at a time from the workspace's root with ``O_NOFOLLOW``: if a
folder on the way was swapped for a symlink after the check (a race), the
open fails instead of following it out, and a write replaces the file by
rename, never writing through a link or a hard link. Only regular files are
read (never a FIFO, a device or ``/proc``), and a path that cannot be a path
(a NUL byte, a symlink loop) is a ``ToolError`` the model reads.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pathspec

from cortana.config import NOT_PROJECT_FOLDERS, not_project_folders
from cortana.errors import PermissionDenied, ToolError
from cortana.safefs import PathRefused, SafeTree
from cortana.sandbox.policy import PROTECTED, Sandbox

__all__ = ["ALWAYS_IGNORED", "PROTECTED", "Workspace"]

ALWAYS_IGNORED = NOT_PROJECT_FOLDERS
"""Folders listings and searches never enter: the folders that are not the project (``cortana.config.NOT_THE_PROJECT``
says which, and why)."""


class Workspace:
    """A folder the tools may touch.

    Args:
        root: the folder.
        forbidden: folders no tool may write to even inside the workspace (the user's
            Cortana config, which holds the trusted-folders list).
        protected_files: more protected paths inside the workspace, besides :data:`PROTECTED`
            (the files a trusted MCP server runs: a write there is asked for every time).
        sandbox: confine the commands the tools start by the kernel (``cortana.sandbox``): True (where the kernel
            can), False (never: every command is asked), or a :class:`~cortana.sandbox.Sandbox` of the caller's.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        forbidden: Sequence[Path] = (),
        protected_files: Sequence[Path] = (),
        sandbox: Sandbox | bool = True,
    ) -> None:
        self.root = Path(root).resolve()
        self.forbidden = [Path(path).resolve() for path in forbidden]
        self.protected_files = [self.root / Path(path) for path in protected_files]
        self.protected_files = [path.resolve() for path in self.protected_files if self.contains(path.resolve())]
        self.sandbox = (
            sandbox
            if isinstance(sandbox, Sandbox)
            else Sandbox(self.root, protected_files=self.protected_files, forbidden=self.forbidden, enabled=sandbox)
        )
        """What the commands started here may touch, and how the kernel holds them to it."""
        self.tree = SafeTree(self.root)
        """Cortana's one writer for this folder: every read and write of a file tool goes through it."""
        self.ignored = not_project_folders()
        """Folder names listings and searches skip (with ``GRAPHIFY_OUT``'s folder, when it is one name)."""

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the workspace, or absolute) resolved.

        Raises:
            PermissionDenied: it resolves outside the workspace.
            ToolError: it cannot be a path (a NUL byte, a symlink loop).
        """
        if "\x00" in path:
            raise ToolError(f"The path {path[:200]!r} contains a NUL byte; give a plain path.")
        try:
            target = (self.root / os.path.expanduser(path)).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # RuntimeError: a symlink loop
            raise ToolError(f"The path '{path[:200]}' cannot be resolved: {exc}") from None
        if not self.contains(target):
            raise PermissionDenied(
                f"'{path[:200]}' resolves to {target}, outside the workspace {self.root}; "
                "only paths inside it are allowed"
            )
        return target

    def contains(self, target: Path) -> bool:
        """Whether a resolved path is the workspace or inside it."""
        return target == self.root or self.root in target.parents

    def relative(self, target: Path) -> str:
        """``target`` relative to the workspace root, for display."""
        return str(target.relative_to(self.root)) if target != self.root else "."

    def protected(self, target: Path) -> str | None:
        """The protected path ``target`` is or is in (``.git/``, ``cortana.yml``...), if any."""
        if not self.contains(target) or target == self.root:
            return None
        for path in self.protected_files:
            if target == path or path in target.parents:
                return f"{self.relative(path)} (run by a trusted MCP server)"
        top = target.relative_to(self.root).parts[0]
        if self.sandbox.too_wide is not None and top.startswith("."):  # ~/.bashrc, ~/.ssh/, ~/.local/bin/...
            return f"{top} in {self.root}"
        return PROTECTED.get(top)

    def protected_files_in(self, folder: Path) -> dict[str, str]:
        """The extra protected files directly in ``folder``: name -> how the gate shows it."""
        return {
            path.name: f"{self.relative(path)} (run by a trusted MCP server)"
            for path in self.protected_files
            if path.parent == folder
        }

    def check_writable(self, target: Path, shown: str) -> None:
        """Refuse a write to a forbidden folder (whatever was approved)."""
        for folder in self.forbidden:
            if target == folder or folder in target.parents:
                raise PermissionDenied(
                    f"'{shown}' is in {folder}, which holds Cortana's own settings; no tool writes there"
                )

    # -- opening ------------------------------------------------------------------------------

    def open_regular(self, target: Path, shown: str) -> tuple[int, os.stat_result]:
        """A read-only descriptor of the regular file ``target``, and its stat, reached through no link."""
        try:
            return self.tree.open_regular(target, shown=shown)
        except OSError as exc:
            raise _path_error(exc, shown) from None

    def write(self, target: Path, shown: str, data: bytes) -> None:
        """Make ``target`` hold ``data`` (created, with its folders, when missing) through Cortana's one writer
        (:class:`cortana.safefs.SafeTree`): no link followed, a regular file only, replaced whole."""
        self.check_writable(target, shown)
        try:
            self.tree.write_bytes(target, data, shown=shown)
        except OSError as exc:
            raise _path_error(exc, shown) from None

    # -- listing ------------------------------------------------------------------------------

    def files(self, start: Path) -> Iterator[Path]:
        """Files under ``start``, skipping what .gitignore (and version-control folders) exclude.

        Folder symlinks are not followed; file symlinks are listed as they are.
        """
        spec = self._gitignore()
        for folder, dirnames, filenames in os.walk(start):
            base = Path(folder)
            dirnames[:] = sorted(
                d for d in dirnames if d not in self.ignored and not self._ignored(spec, base / d, is_dir=True)
            )
            for name in sorted(filenames):
                path = base / name
                if not self._ignored(spec, path, is_dir=False):
                    yield path

    def _gitignore(self) -> Any:
        lines: list[str] = []
        ignore_file = self.root / ".gitignore"
        try:
            fd, _ = self.open_regular(ignore_file, ".gitignore")
        except ToolError:
            return pathspec.GitIgnoreSpec.from_lines(lines)
        with os.fdopen(fd, "rb") as handle:
            lines = handle.read(1 << 20).decode("utf-8", "replace").splitlines()
        return pathspec.GitIgnoreSpec.from_lines(lines)

    def _ignored(self, spec: Any, path: Path, *, is_dir: bool) -> bool:
        relative = self.relative(path) + ("/" if is_dir else "")
        return bool(spec.match_file(relative))


def _path_error(exc: OSError, shown: str) -> ToolError:
    """An ``OSError`` from opening ``shown`` as the error the model reads."""
    if isinstance(exc, PathRefused):
        return PermissionDenied(str(exc)) if exc.errno in (errno.EPERM, errno.EACCES) else ToolError(str(exc))
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return PermissionDenied(
            f"'{shown}' goes through a symlink or a file where a folder should be, or changed while it was "
            "being opened; it was not followed"
        )
    if exc.errno == errno.ENOENT:
        return ToolError(f"No file '{shown}'. Use list_files to see what exists.")
    if exc.errno == errno.ENXIO:
        return ToolError(f"'{shown}' is not a regular file (a pipe with no reader); only regular files are written.")
    return ToolError(f"'{shown}' cannot be opened: {exc.strerror or exc}")
