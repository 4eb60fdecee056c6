"""Teach mode: the user does a task by hand while Cortana watches, then the model drafts a ``SKILL.md`` from it.

A :class:`TeachSession` records what the user does in the terminal assistant
between ``/teach [name]`` and ``/teach done``:

* the ``!`` shell commands they run, with the exit code and the head of the
  output (:meth:`TeachSession.record_command`);
* free-text notes (:meth:`TeachSession.record_note`);
* the files they change in the workspace: the session takes a snapshot of the
  workspace when it starts and :meth:`TeachSession.file_changes` compares it
  with the workspace as it is now (added, modified and deleted files, with a
  unified diff for text files).

:meth:`TeachSession.draft` sends all of it to the model with the
``teach_draft`` prompt and parses the answer into a :class:`~cortana.learning.skills.Skill`;
:func:`save_skill` writes it under ``<folder>/skills/<name>/SKILL.md`` once the
user says yes. Nothing here writes anything else.

The snapshot is git-aware: inside a git repository the files are those ``git
ls-files -co --exclude-standard`` lists (tracked and untracked, ignores
respected); elsewhere the folder is walked, skipping ``.git``, ``.cortana``,
``.venv``, ``node_modules`` and ``__pycache__`` and what the workspace's
``.gitignore`` ignores. ``.cortana/`` (the assistant's own files) is never
watched and symlinks are never followed (a link is recorded by its target).

Everything recorded is untrusted text on its way into a prompt, so all of it is
bounded: at most 5,000 files are watched, a file over 256 KiB or a binary file
is compared by size, time and hash only, a command's output is cut to its first
20 lines / 2,000 characters, the diffs to 20,000 characters in all, and the
prompt to about 12,000 characters (the newest events kept). Nothing recorded is
ever run.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import os
import re
import stat
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import pathspec

from cortana.errors import CortanaError, UserError
from cortana.learning.skills import SKILL_FILE, Skill, SkillError, parse_skill, render_skill
from cortana.messages import Message
from cortana.models.base import ModelClient, ModelRequest, ModelSettings, complete
from cortana.prompts import prompt_text

__all__ = [
    "MAX_DIFF_CHARS",
    "MAX_FILES",
    "MAX_OUTPUT_CHARS",
    "MAX_OUTPUT_LINES",
    "MAX_PROMPT_CHARS",
    "MAX_TEXT_FILE_BYTES",
    "FileChange",
    "RecordedCommand",
    "RecordedNote",
    "TeachError",
    "TeachEvent",
    "TeachSession",
    "normalize_skill_name",
    "save_skill",
    "skill_file",
    "skill_text",
]

MAX_FILES = 5_000
"""The most files a snapshot watches (the first in path order); the rest are not compared."""
MAX_TEXT_FILE_BYTES = 256 << 10
"""Files up to this size (256 KiB) are diffed; larger ones are compared by size, time and hash only."""
MAX_OUTPUT_LINES = 20
"""The most lines of a command's output kept."""
MAX_OUTPUT_CHARS = 2_000
"""The most characters of a command's output kept."""
MAX_DIFF_CHARS = 20_000
"""The most diff text :meth:`TeachSession.file_changes` returns, all files together."""
MAX_PROMPT_CHARS = 12_000
"""About the most characters of the drafting prompt, so it fits a small model's 8k-token window."""

_MAX_COMMAND_CHARS = 1_000
_MAX_NOTE_CHARS = 2_000
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
_SKIPPED_FOLDERS = frozenset({".git", ".cortana", ".venv", "node_modules", "__pycache__"})
_OWN_FOLDER = ".cortana"
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NON_BLOCK = getattr(os, "O_NONBLOCK", 0)

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NAME_DISALLOWED = re.compile(r"[^A-Za-z0-9_.-]+")

_RETRY = (
    "That answer is not a valid SKILL.md: {reason}.\n"
    "Write the whole SKILL.md again, and nothing else: a line `---`, a line `name: short-kebab-name`, "
    "a line `description: one line saying what it does and when to use it`, a line `---`, "
    "then the numbered steps."
)


class TeachError(CortanaError):
    """The model could not draft a usable skill (or there was nothing to draft from); the message says why.

    Attributes:
        reason: what was wrong with the model's last draft ("" when there was none).
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True)
class RecordedCommand:
    """A ``!`` shell command the user ran while teaching.

    Attributes:
        command: the command line (cut to 1,000 characters).
        exit_code: its exit status.
        output_head: the first 20 lines / 2,000 characters of its output, terminal escapes
            removed; a last line in brackets says how much was cut.
        at: when it was recorded (the session's clock, seconds).
    """

    command: str
    exit_code: int
    output_head: str
    at: float


@dataclass(frozen=True)
class RecordedNote:
    """A free-text note the user wrote while teaching.

    Attributes:
        text: the note (cut to 2,000 characters).
        at: when it was recorded (the session's clock, seconds).
    """

    text: str
    at: float


TeachEvent = RecordedCommand | RecordedNote
"""One thing recorded in a teach session, in the order it happened."""


@dataclass(frozen=True)
class FileChange:
    """A file that differs between the session's start and now.

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


def normalize_skill_name(name: str) -> str:
    """``name`` in the form a skill's name must have: letters, digits, ``_``, ``.``, ``-``; at most 64.

    Other characters (spaces, slashes) become ``-``; ``..`` becomes ``.``; it starts with a
    letter or digit. Returns "" when nothing usable is left.
    """
    text = _NAME_DISALLOWED.sub("-", name.strip())
    text = re.sub(r"\.{2,}", ".", text)
    text = re.sub(r"-{2,}", "-", text)
    text = re.sub(r"^[^A-Za-z0-9]+", "", text)[:64]
    return text.rstrip("-.")


class TeachSession:
    """Records a task the user does by hand, and drafts a skill from it.

    Creating one takes the "before" snapshot of ``workspace`` at once (synchronously:
    a ``git ls-files`` or a folder walk, and reading the files up to 256 KiB).

    Args:
        workspace: the folder the user works in.
        name: the name the user wants for the skill; normalized with :func:`normalize_skill_name`.
        clock: the time source for the events' ``at``.

    Raises:
        UserError: ``name`` has nothing usable in it.

    Attributes:
        name: the skill's name the user gave (normalized), or None.
        workspace: the folder being watched.
        events: the commands and notes recorded, in order.
    """

    def __init__(self, workspace: Path, name: str | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.workspace = Path(workspace).resolve()
        self.name: str | None = None
        if name is not None and name.strip():
            normalized = normalize_skill_name(name)
            if not normalized:
                raise UserError(
                    f"'{name[:80]}' cannot be a skill's name: use letters, digits and '-' (for example 'deploy-docs')"
                )
            self.name = normalized
        self.events: list[RecordedCommand | RecordedNote] = []
        self._clock = clock
        self._use_git = _in_git(self.workspace)
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

    # -- recording ----------------------------------------------------------------------------

    def record_command(self, command: str, exit_code: int, output: str) -> None:
        """Record a shell command, its exit code and the head of its output (20 lines / 2,000 characters)."""
        self.events.append(
            RecordedCommand(
                command=_cut(_clean(command).strip(), _MAX_COMMAND_CHARS),
                exit_code=int(exit_code),
                output_head=_output_head(output),
                at=self._clock(),
            )
        )

    def record_note(self, text: str) -> None:
        """Record a free-text note (cut to 2,000 characters)."""
        self.events.append(RecordedNote(text=_cut(_clean(text).strip(), _MAX_NOTE_CHARS), at=self._clock()))

    @property
    def empty(self) -> bool:
        """True when nothing was recorded and no file changed."""
        return not self.events and not self.file_changes()

    # -- comparing ----------------------------------------------------------------------------

    def file_changes(self) -> list[FileChange]:
        """The files that differ between the start of the session and now, by path.

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
        listed = _git_files(self.workspace) if self._use_git else None
        if listed is None:
            listed = _walk(self.workspace)
        return sorted(path for path in listed if _OWN_FOLDER not in path.split("/"))

    # -- drafting -----------------------------------------------------------------------------

    def draft_prompt(self) -> str:
        """The text sent to the model: the ``teach_draft`` prompt with the name, the events and the file changes.

        Bounded to about 12,000 characters: the oldest events and the end of the diffs go first.
        """
        return self._prompt(self.file_changes())

    def _prompt(self, changes: list[FileChange]) -> str:
        template = prompt_text("teach_draft")
        name_hint = (
            f"The user named this skill `{self.name}`: write `name: {self.name}` in the front matter.\n"
            if self.name
            else ""
        )
        fixed = len(template.format(name_hint=name_hint, events="", changes=""))
        budget = max(MAX_PROMPT_CHARS - fixed, 2_000)
        blocks = [_render_event(number, event) for number, event in enumerate(self.events, start=1)]
        changes_text = _render_changes(changes)
        events_length = sum(len(block) + 1 for block in blocks)
        changes_budget = min(len(changes_text), max(budget - events_length, budget // 2))
        events_text = _newest(blocks, budget - changes_budget)
        return template.format(
            name_hint=name_hint, events=events_text, changes=_cut_lines(changes_text, changes_budget, what="changes")
        )

    async def draft(self, client: ModelClient) -> Skill:
        """Ask the model for a ``SKILL.md`` drafted from what was recorded, and parse it.

        One model call; when the answer is not a valid ``SKILL.md``, one more, quoting
        what was wrong. A name the user gave replaces the drafted one. The skill is not
        saved: see :func:`save_skill`.

        Raises:
            TeachError: nothing was recorded, or both answers were not valid ``SKILL.md`` text.
            ModelError: the engine failed.
        """
        changes = await asyncio.to_thread(self.file_changes)
        if not self.events and not changes:
            raise TeachError(
                "Nothing was recorded to draft a skill from: run the task's commands with '!', "
                "write notes, or change files first (or cancel teach mode)."
            )
        messages = [Message.user(self._prompt(changes))]
        settings = ModelSettings(temperature=0.2, max_tokens=1024)
        reason = ""
        for _ in range(2):
            response = await complete(client, ModelRequest(messages=list(messages), settings=settings))
            reply = response.message.content
            try:
                skill = parse_skill(skill_text(reply))
                name = self.name or normalize_skill_name(skill.name)
                return replace(skill, name=name) if name != skill.name else skill
            except SkillError as exc:
                reason = str(exc)
            messages += [Message.assistant(reply), Message.user(_RETRY.format(reason=reason))]
        raise TeachError(
            f"The model did not write a valid SKILL.md after two tries: {reason}. "
            "Run /teach done again, or write the skill by hand.",
            reason=reason,
        )


def skill_text(reply: str) -> str:
    """The ``SKILL.md`` inside a model's reply: from the first ``---`` line, without a fence around it.

    Text before the first ``---`` line (a sentence, an opening fence such as
    ```` ```markdown ````) is dropped, and so is an unmatched closing fence and what follows it.
    A reply without a ``---`` line is returned stripped, for :func:`parse_skill` to say what is wrong.
    """
    lines = reply.strip().replace("\r\n", "\n").split("\n")
    start = next((index for index, line in enumerate(lines) if line.strip() == "---"), None)
    if start is None:
        return reply.strip()
    body = lines[start:]
    body[0] = "---"
    fences = [index for index, line in enumerate(body) if line.strip().startswith("```")]
    if len(fences) % 2 == 1 and body[fences[-1]].strip() == "```":
        body = body[: fences[-1]]
    return "\n".join(body).strip() + "\n"


# -- saving -----------------------------------------------------------------------------------


def skill_file(folder: Path, name: str) -> Path:
    """Where the skill ``name`` lives under ``folder``: ``folder / "skills" / name / "SKILL.md"``.

    Raises:
        UserError: ``name`` is empty, or holds a path separator, ``..`` or a control character.
    """
    if (
        not name
        or name in (".", "..")
        or ".." in name
        or "/" in name
        or "\\" in name
        or _CONTROL.search(name)
        or name != name.strip()
    ):
        raise UserError(
            f"{name[:80]!r} cannot be a skill's folder name: use letters, digits, '-', '_' or '.', "
            "without '/', '\\' or '..' (for example 'deploy-docs')"
        )
    return Path(folder) / "skills" / name / SKILL_FILE


def save_skill(folder: Path, skill: Skill, *, overwrite: bool = False) -> Path:
    """Write ``skill`` as ``folder/skills/<name>/SKILL.md`` and return that path.

    The folders are made as needed. An existing file is replaced only with
    ``overwrite`` (atomically; a symlink there is replaced, not followed).

    Raises:
        UserError: the file exists and ``overwrite`` is false, or the name cannot be a folder name.
        SkillError: the skill's text would be over 64 KiB.
    """
    path = skill_file(folder, skill.name)
    text = render_skill(skill).encode("utf-8")
    exists = UserError(f"{path} exists already: pick another name for the skill, or pass overwrite=True to replace it.")
    if not overwrite and os.path.lexists(path):
        raise exists
    path.parent.mkdir(parents=True, exist_ok=True)
    if not overwrite:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o644)
        except FileExistsError:
            raise exists from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(text)
        return path
    temporary = path.with_name(f".{SKILL_FILE}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(text)
        os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            temporary.unlink()
    return path


# -- snapshots --------------------------------------------------------------------------------


def _in_git(workspace: Path) -> bool:
    result = _git(workspace, "rev-parse", "--show-toplevel")
    return result is not None and bool(result.strip())


def _git(workspace: Path, *args: str) -> bytes | None:
    """``git`` run in ``workspace`` (fsmonitor off: no hook runs); its output, or None when it fails."""
    try:
        result = subprocess.run(
            ["git", "-c", "core.fsmonitor=false", "-C", str(workspace), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def _git_files(workspace: Path) -> list[str] | None:
    """Tracked and untracked files under ``workspace``, ignores respected; None when git fails."""
    output = _git(workspace, "ls-files", "-co", "--exclude-standard", "-z")
    if output is None:
        return None
    paths = [item.decode("utf-8", "surrogateescape") for item in output.split(b"\0") if item]
    return list(dict.fromkeys(paths))[:_MAX_LISTED]  # a file in conflict is listed once per stage


def _walk(workspace: Path) -> list[str]:
    """The files under ``workspace`` (relative, posix), skipping the usual folders and what .gitignore ignores."""
    spec = _gitignore(workspace)
    found: list[str] = []
    for folder, dirnames, filenames in os.walk(workspace):
        base = Path(folder)
        prefix = base.relative_to(workspace).as_posix()
        prefix = "" if prefix == "." else prefix + "/"
        kept = []
        for name in sorted(dirnames):
            rel = prefix + name
            if name in _SKIPPED_FOLDERS:
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
        return _Entry("link", info.st_size, info.st_mtime_ns, _cut(_clean(target), 500))
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
    return _cut_lines("\n".join(lines), _MAX_FILE_DIFF_CHARS, what="diff")


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
                diff = _cut_lines(diff, left, what="diff")
            else:
                diff = (
                    f"(diff left out: the diffs of all changed files come to more than {MAX_DIFF_CHARS:,} characters)"
                )
        left = max(left - len(diff), 0)
        bounded.append(replace(change, diff=diff) if diff != change.diff else change)
    return bounded


# -- text ---------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    """``text`` without terminal escapes, carriage-return overwrites and control characters (tabs and newlines kept)."""
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return _CONTROL.sub("", text)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _cut_lines(text: str, limit: int, *, what: str) -> str:
    """``text`` cut to about ``limit`` characters at a line end, with a line saying how much was cut."""
    if len(text) <= limit:
        return text
    head = text[: max(limit - 60, 0)]
    if "\n" in head:
        head = head.rsplit("\n", 1)[0]
    more = text.count("\n") - head.count("\n")
    return f"{head}\n[... {what} cut: {more} more lines]"


def _output_head(output: str) -> str:
    text = _clean(output).rstrip()
    lines = text.split("\n") if text else []
    head = "\n".join(lines[:MAX_OUTPUT_LINES])
    if len(head) > MAX_OUTPUT_CHARS:
        head = head[:MAX_OUTPUT_CHARS]
    kept = head.count("\n") + 1 if head else 0
    if len(head) < len(text):
        more = len(lines) - kept
        head += f"\n[... output cut: {more} more lines]" if more else "\n[... output cut]"
    return head


def _indent(text: str, prefix: str = "   | ") -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


def _render_event(number: int, event: TeachEvent) -> str:
    if isinstance(event, RecordedNote):
        return f"{number}. Note from the user:\n{_indent(event.text)}"
    outcome = "succeeded" if event.exit_code == 0 else "failed"
    lines = [f"{number}. Ran: {event.command}", f"   Exit code: {event.exit_code} ({outcome})"]
    if event.output_head:
        lines += ["   Output (start):", _indent(event.output_head)]
    else:
        lines.append("   Output: (none)")
    return "\n".join(lines)


def _render_changes(changes: Iterable[FileChange]) -> str:
    blocks = [f"{change.status}: {change.path}\n{change.diff}".rstrip() for change in changes]
    return "\n\n".join(blocks) if blocks else "(no files changed)"


def _newest(blocks: list[str], budget: int) -> str:
    """The newest ``blocks`` that fit ``budget`` characters, in order, after a line saying how many were left out."""
    if not blocks:
        return "(no commands or notes)"
    kept: list[str] = []
    used = 0
    for block in reversed(blocks):
        if used + len(block) + 1 > budget:
            if not kept:  # the newest alone is too long: cut it
                kept.append(_cut_lines(block, max(budget - 60, 200), what="event"))
            break
        kept.append(block)
        used += len(block) + 1
    kept.reverse()
    left_out = len(blocks) - len(kept)
    if left_out:
        kept.insert(0, f"({left_out} earlier events left out to keep this short)")
    return "\n".join(kept)
