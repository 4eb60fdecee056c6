"""Workspace snapshots for teach mode: which files a folder holds now, and what changed in them since.

A :class:`WorkspaceSnapshot` records the files of a workspace when it is made;
:meth:`WorkspaceSnapshot.changes` compares it with the workspace as it is now and
returns a :class:`FileChange` per added, modified or deleted file, with a unified
diff for text files. Nothing here writes anything.

The snapshot is git-aware: inside a git repository the files are those ``git
ls-files -co --exclude-standard`` lists (tracked and untracked, ignores
respected); elsewhere the folder is walked, skipping what the workspace's
``.gitignore`` ignores. Either way the folders that are not the project
(``cortana.config.NOT_THE_PROJECT``: ``.git``, ``.cortana``, virtual
environments, ``node_modules``, caches) are never watched, and symlinks are
never followed (a link is recorded by its target).

The diffs are untrusted text on their way into a prompt, so they are bounded:
at most 5,000 files are watched, a file over 256 KiB or a binary file is
compared by size, time and hash only, one file's diff is cut to 6,000
characters and the diffs to 20,000 characters in all. The text helpers that do
the cutting (:func:`clean_text`, :func:`cut_text`, :func:`cut_lines`) are public
so that teach mode bounds its other records the same way.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import stat
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import pathspec

from cortana.config import not_project_folders
from cortana.safegit import safe_git_environment
from cortana.sandbox.policy import Sandbox
from cortana.sandbox.processes import run_kept

__all__ = [
    "MAX_DIFF_CHARS",
    "MAX_FILES",
    "MAX_TEXT_FILE_BYTES",
    "FileChange",
    "WorkspaceSnapshot",
    "clean_text",
    "cut_lines",
    "cut_text",
]

MAX_FILES = 5_000
"""The most files a snapshot watches (the first in path order); the rest are not compared."""
MAX_TEXT_FILE_BYTES = 256 << 10
"""Files up to this size (256 KiB) are diffed; larger ones are compared by size, time and hash only."""
MAX_DIFF_CHARS = 20_000
"""The most diff text :meth:`WorkspaceSnapshot.changes` returns, all files together."""

_MAX_FILE_DIFF_CHARS = 6_000
"""One file's diff is cut here, so that one big change does not crowd out the others."""
_MAX_KEPT_TEXT_CHARS = 32 << 20
"""The most text of the before snapshot kept in memory in all; files past it are compared by hash."""
_MAX_HASHED_BYTES = 64 << 20
"""Larger files are compared by size and modification time only (hashing them would take too long)."""
_MAX_LISTED = 50_000
"""The most paths a folder walk collects before it stops (the first ``MAX_FILES`` in order are watched)."""
_BINARY_PROBE = 8 << 10
_GIT_TIMEOUT_S = 10.0
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NON_BLOCK = getattr(os, "O_NONBLOCK", 0)

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class FileChange:
    """A file that differs between the snapshot and now.

    Attributes:
        path: the path relative to the workspace, with ``/`` separators.
        status: ``added``, ``modified`` or ``deleted``.
        diff: a unified diff (cut when long), or for a file that cannot be diffed a note in
            parentheses: ``(binary file changed)``, ``(large file changed)``, a symlink's target.
    """

    path: str
    status: Literal["added", "modified", "deleted"]
    diff: str


@dataclass(frozen=True, slots=True)
class _Entry:
    """One file of a snapshot."""

    kind: Literal["text", "binary", "large", "link", "unread"]
    size: int
    mtime_ns: int
    digest: str
    """sha256 of the content ("" when not hashed); a link's target."""
    text: str | None = None
    """The content, for a text file whose before copy is kept."""


class WorkspaceSnapshot:
    """The files of a workspace at one moment, to compare with the workspace later.

    Creating one takes the snapshot at once (synchronously: a ``git ls-files`` or a
    folder walk, and reading the files up to 256 KiB).

    Args:
        workspace: the folder to watch.

    Attributes:
        workspace: the folder being watched (resolved).
    """

    def __init__(self, workspace: Path, sandbox: Sandbox | None = None) -> None:
        self.workspace = Path(workspace).resolve()
        self._sandbox = sandbox if sandbox is not None else Sandbox(self.workspace)
        environment = self._sandbox.child_environment()
        self._git_environment = safe_git_environment(self.workspace, environment, sandbox=self._sandbox)
        self._use_git = _in_git(self.workspace, self._git_environment, self._sandbox)
        paths, self._truncated = _limited(self._list())
        self._last_watched = paths[-1] if paths else ""
        self._before: dict[str, _Entry] = {}
        budget = _MAX_KEPT_TEXT_CHARS
        for rel in paths:
            entry = _read_entry(self.workspace, rel)
            if entry is None:
                continue
            kept = len(entry.text) if entry.text is not None else 0
            if kept > budget:
                entry = replace(entry, text=None)
            else:
                budget -= kept
            self._before[rel] = entry

    def changes(self) -> list[FileChange]:
        """The files that differ between the snapshot and the workspace now, by path.

        Added, modified and deleted files are listed, unchanged ones are not. The diffs
        come to at most 20,000 characters in all; past that, a change's diff is a note
        saying it was left out.
        """
        changes: list[FileChange] = []
        now, _ = _limited(self._list(), limit=_MAX_LISTED)
        listed = set(now)
        new_files = 0
        for rel in now:
            before = self._before.get(rel)
            if before is None:
                if self._truncated and rel > self._last_watched:
                    continue  # past the files watched at the start: unknown whether it is new
                if new_files >= MAX_FILES:
                    continue
                new_files += 1
            change = self._compare(rel, before)
            if change is not None:
                changes.append(change)
        for rel, before in self._before.items():
            if rel not in listed:  # gone, or no longer listed (ignored now): look at the file itself
                change = self._compare(rel, before)
                if change is not None:
                    changes.append(change)
        changes.sort(key=lambda change: change.path)
        return _bound_diffs(changes)

    def _compare(self, rel: str, before: _Entry | None) -> FileChange | None:
        after = _read_entry(self.workspace, rel, previous=before)
        if before is None:
            return None if after is None else FileChange(rel, "added", _added_diff(rel, after))
        if after is None:
            return FileChange(rel, "deleted", _deleted_diff(rel, before))
        if not _changed(before, after):
            return None
        return FileChange(rel, "modified", _modified_diff(rel, before, after))

    def _list(self) -> list[str]:
        """The workspace's files (relative, posix), sorted: git's list in a repository, else a walk."""
        listed = _git_files(self.workspace, self._git_environment, self._sandbox) if self._use_git else None
        if listed is None:
            listed = _walk(self.workspace)
        skipped = not_project_folders()
        return sorted(path for path in listed if skipped.isdisjoint(path.split("/")))


# -- listing and reading ---------------------------------------------------------------------


def _in_git(workspace: Path, environment: dict[str, str], sandbox: Sandbox) -> bool:
    result = _git(workspace, environment, sandbox, "rev-parse", "--show-toplevel")
    return result is not None and bool(result.strip())


def _git(workspace: Path, environment: dict[str, str], sandbox: Sandbox, *args: str) -> bytes | None:
    """``git`` run in ``workspace`` with no program of the repository's (``cortana.safegit``), confined by the
    kernel to reading; its output, or None."""
    try:
        with sandbox.confined(workspace=False) as confined:
            result = run_kept(
                confined.argv(["git", "-C", str(workspace), *args]),
                env=confined.environment(environment),
                timeout=_GIT_TIMEOUT_S,
            )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def _git_files(workspace: Path, environment: dict[str, str], sandbox: Sandbox) -> list[str] | None:
    """Tracked and untracked files under ``workspace``, ignores respected; None when git fails."""
    output = _git(workspace, environment, sandbox, "ls-files", "-co", "--exclude-standard", "-z")
    if output is None:
        return None
    paths = [item.decode("utf-8", "surrogateescape") for item in output.split(b"\0") if item]
    return list(dict.fromkeys(paths))[:_MAX_LISTED]  # a file in conflict is listed once per stage


def _walk(workspace: Path) -> list[str]:
    """The files under ``workspace`` (relative, posix), skipping the usual folders and what .gitignore ignores."""
    spec = _gitignore(workspace)
    skipped = not_project_folders()
    found: list[str] = []
    for folder, dirnames, filenames in os.walk(workspace):
        base = Path(folder)
        prefix = base.relative_to(workspace).as_posix()
        prefix = "" if prefix == "." else prefix + "/"
        kept = []
        for name in sorted(dirnames):
            rel = prefix + name
            if name in skipped:
                continue
            if os.path.islink(base / name):  # a link to a folder: recorded as a link, never entered
                if not spec.match_file(rel):
                    found.append(rel)
            elif not spec.match_file(rel + "/"):
                kept.append(name)
        dirnames[:] = kept
        found.extend(prefix + name for name in sorted(filenames) if not spec.match_file(prefix + name))
        if len(found) >= _MAX_LISTED:
            break
    return found


def _gitignore(workspace: Path) -> pathspec.GitIgnoreSpec:
    lines: list[str] = []
    entry = _read_entry(workspace, ".gitignore")
    if entry is not None and entry.text is not None:
        lines = entry.text.splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _limited(paths: list[str], limit: int = MAX_FILES) -> tuple[list[str], bool]:
    return paths[:limit], len(paths) > limit


def _read_entry(workspace: Path, rel: str, previous: _Entry | None = None) -> _Entry | None:
    """The snapshot entry of one file; None when it is not there or not a regular file or link.

    A large file whose size and time match ``previous`` is not read again.
    """
    path = workspace / rel
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return None
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return _Entry("link", info.st_size, info.st_mtime_ns, cut_text(clean_text(target), 500))
    if not stat.S_ISREG(info.st_mode):
        return None
    size, mtime = info.st_size, info.st_mtime_ns
    if size > MAX_TEXT_FILE_BYTES:
        if previous is not None and previous.kind == "large" and (previous.size, previous.mtime_ns) == (size, mtime):
            return previous
        digest = _hash_file(path) if size <= _MAX_HASHED_BYTES else ""
        return _Entry("large", size, mtime, digest or "")
    try:
        fd = os.open(path, os.O_RDONLY | _NO_FOLLOW | _NON_BLOCK)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(MAX_TEXT_FILE_BYTES + 1)
    except OSError:
        return _Entry("unread", size, mtime, "")
    digest = hashlib.sha256(data).hexdigest()
    if len(data) > MAX_TEXT_FILE_BYTES:  # it grew while being read
        return _Entry("large", len(data), mtime, "")
    if b"\0" in data[:_BINARY_PROBE]:
        return _Entry("binary", len(data), mtime, digest)
    return _Entry("text", len(data), mtime, digest, data.decode("utf-8", "replace"))


def _hash_file(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | _NO_FOLLOW | _NON_BLOCK)
        with os.fdopen(fd, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _changed(before: _Entry, after: _Entry) -> bool:
    if before.kind == "link" or after.kind == "link":
        return before.kind != after.kind or before.digest != after.digest
    if before.digest and after.digest:
        return before.digest != after.digest
    return (before.size, before.mtime_ns) != (after.size, after.mtime_ns)


# -- diffs --------------------------------------------------------------------------------------


def _note(entry: _Entry, verb: str) -> str | None:
    """The note for a file that is not diffed, or None for a text file."""
    if entry.kind == "link":
        return f"(symbolic link to '{entry.digest}' {verb})"
    if entry.kind in ("binary", "large"):
        return f"({entry.kind} file {verb})"
    if entry.kind == "unread":
        return f"(unreadable file {verb})"
    return None


def _unified(old: str, new: str, *, old_name: str, new_name: str) -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), fromfile=old_name, tofile=new_name, lineterm="")
    return cut_lines("\n".join(lines), _MAX_FILE_DIFF_CHARS, what="diff")


def _added_diff(rel: str, after: _Entry) -> str:
    note = _note(after, "added")
    if note is not None or after.text is None:
        return note or "(file added)"
    return _unified("", after.text, old_name="/dev/null", new_name=f"b/{rel}")


def _deleted_diff(rel: str, before: _Entry) -> str:
    note = _note(before, "deleted")
    if note is not None:
        return note
    if before.text is None:
        return "(file deleted; no copy of it was kept)"
    return _unified(before.text, "", old_name=f"a/{rel}", new_name="/dev/null")


def _modified_diff(rel: str, before: _Entry, after: _Entry) -> str:
    if before.kind == "link" or after.kind == "link":
        old = f"a link to '{before.digest}'" if before.kind == "link" else f"a {before.kind} file"
        new = f"a link to '{after.digest}'" if after.kind == "link" else f"a {after.kind} file"
        return f"(was {old}, now {new})"
    for kind in ("large", "binary", "unread"):
        if kind in (before.kind, after.kind):
            return f"({'unreadable' if kind == 'unread' else kind} file changed)"
    if before.text is None or after.text is None:
        return "(file changed; no copy of the earlier version was kept)"
    return _unified(before.text, after.text, old_name=f"a/{rel}", new_name=f"b/{rel}")


def _bound_diffs(changes: list[FileChange]) -> list[FileChange]:
    """``changes`` with their diffs cut to ``MAX_DIFF_CHARS`` in all; the ones left out say so."""
    left = MAX_DIFF_CHARS
    bounded: list[FileChange] = []
    for change in changes:
        diff = change.diff
        if len(diff) > left:
            if left >= 200:
                diff = cut_lines(diff, left, what="diff")
            else:
                diff = (
                    f"(diff left out: the diffs of all changed files come to more than {MAX_DIFF_CHARS:,} characters)"
                )
        left = max(left - len(diff), 0)
        bounded.append(replace(change, diff=diff) if diff != change.diff else change)
    return bounded


# -- text ---------------------------------------------------------------------------------------


def clean_text(text: str) -> str:
    """``text`` without terminal escapes, carriage-return overwrites and control characters (tabs and newlines kept)."""
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return _CONTROL.sub("", text)


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ``…`` when it was cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def cut_lines(text: str, limit: int, *, what: str) -> str:
    """``text`` cut to about ``limit`` characters at a line end, with a line saying how much was cut."""
    if len(text) <= limit:
        return text
    head = text[: max(limit - 60, 0)]
    if "\n" in head:
        head = head.rsplit("\n", 1)[0]
    more = text.count("\n") - head.count("\n")
    return f"{head}\n[... {what} cut: {more} more lines]"
