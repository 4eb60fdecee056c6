"""The file tools: read, list, search, write and edit files in the workspace.

Every one is bounded: it reads at most what it will show (a 2 GB file costs
what its first screen costs), reads only regular files, and never follows a
symlink out of the workspace. Searches use RE2, whose matching time grows
linearly with the text, so a pattern such as ``(a+)+$`` cannot freeze the
process.
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import io
import keyword
import os
import re
from pathlib import Path
from typing import Annotated, BinaryIO, Protocol

import re2
from pydantic import Field

from cortana.errors import PermissionDenied, ToolError
from cortana.safefs import PathRefused
from cortana.tools import Tool
from cortana.tools.builtin.lint import Linter
from cortana.tools.builtin.workspace import Workspace

__all__ = [
    "MAX_OUTPUT_CHARS",
    "EditorBuffers",
    "WriteLog",
    "closest_text",
    "cut",
    "file_tools",
    "loose_edit",
    "new_definition",
    "searchable_text",
]

MAX_OUTPUT_CHARS = 12_000
MAX_LINE_CHARS = 2_000
"""A longer line is shown cut, with a note."""
MAX_SCAN_BYTES = 64 << 20
"""How far into a file ``read_file`` reads to reach ``start_line``."""
MAX_SEARCH_FILE_BYTES = 8 << 20
MAX_SEARCH_BYTES = 256 << 20
MAX_EDIT_BYTES = 8 << 20
MAX_SHOWN_ON_MISS = 3_000
"""A file this small is shown whole when ``old_text`` is not in it; a larger one, its closest lines."""
_LOOSE = re.compile(r"[\s\"'`]+")
_KEPT = re.compile(r"[^\s\"'`]")
"""What a loose match of ``old_text`` leaves out: spaces, tabs and quote marks."""
MAX_WINDOWS_ON_MISS = 5_000
MAX_COMPARED_CHARS = 20_000
"""The most of one window of lines compared with a missing old_text (difflib's time grows with the product)."""
MIN_PARTIAL = 8
"""The shortest loose ``old_text`` line that may match part of a file's line (its start or its end)."""
MAX_LOOSE_LINES = 20_000
"""A file with more lines than this gets no loose match of ``old_text`` (only the exact one)."""
"""The most line windows compared with a missing ``old_text`` (the rest of a huge file is not searched)."""
BINARY_PROBE = 8192

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the model's to fix, not a line on the user's terminal


def cut(text: str, hint: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """``text``, or its first ``limit`` characters with a note saying how much there was and what to do."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... output cut at {limit:,} of {len(text):,} characters; {hint}]"


def _is_binary(handle: BinaryIO) -> bool:
    head = handle.read(BINARY_PROBE)
    handle.seek(0)
    return b"\x00" in head


def _line(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").rstrip("\r\n")
    if len(text) > MAX_LINE_CHARS:
        return text[:MAX_LINE_CHARS] + f" …[line cut at {MAX_LINE_CHARS:,} characters]"
    return text


_KEPT_LINE_BYTES = MAX_LINE_CHARS * 4


def _read_line(handle: BinaryIO) -> tuple[bytes, int, bool]:
    """The next line (its first ``_KEPT_LINE_BYTES`` kept), the bytes it took, and whether it ended.

    A line longer than ``MAX_SCAN_BYTES`` is not read to its end.
    """
    kept = handle.readline(_KEPT_LINE_BYTES)
    used = len(kept)
    if len(kept) < _KEPT_LINE_BYTES or kept.endswith(b"\n"):
        return kept, used, True
    while used <= MAX_SCAN_BYTES:  # the rest of a very long line: skipped, counted
        rest = handle.readline(1 << 20)
        used += len(rest)
        if not rest or rest.endswith(b"\n"):
            return kept, used, True
    return kept, used, False


class EditorBuffers(Protocol):
    """An editor that holds the user's files (``cortana acp``): the file tools read what its buffers hold, saved or
    not, and write through it, so what the model sees and changes is what the user sees.

    Both are called from a tool's thread, with a path the workspace has checked already (inside it, a regular
    file, writable): the editor is trusted with the text, never with where it goes.
    """

    def read_text(self, path: Path) -> str | None:
        """The text of ``path`` as the editor holds it; None: read the disk (the editor does not offer it)."""
        ...

    def write_text(self, path: Path, text: str) -> bool:
        """Write ``text`` to ``path`` through the editor; False: write the disk instead."""
        ...


class WriteLog(Protocol):
    """Told of every write the file tools make, just before it (the file still holds its old content): the
    assistant's checkpoints (``/undo``, ``/rewind``, an editor's cancel)."""

    def writing(self, path: Path, text: str, held: str | None = None) -> None:
        """``path`` (checked, inside the workspace) is about to hold ``text``; ``held``: what the user's editor
        holds for it (its buffer, saved or not) when the write goes through the editor, else None (the disk's)."""
        ...


def file_tools(
    space: Workspace,
    buffers: EditorBuffers | None = None,
    linter: Linter | None = None,
    write_log: WriteLog | None = None,
) -> list[Tool]:
    """read_file, list_files, grep_files, write_file and edit_file, confined to ``space`` (:class:`WorkspaceFiles`);
    with ``buffers``, files are read and written through the user's editor; with ``linter``, a write's result
    says what problems it brought in; ``write_log`` is told of each write before it is made."""
    files = WorkspaceFiles(space, buffers, linter, write_log)
    return [
        Tool(files.read_file, read_only=True),
        Tool(files.list_files, read_only=True, kind="search"),
        Tool(files.grep_files, read_only=True, kind="search"),
        Tool(files.write_file, kind="edit", writes="path"),
        Tool(files.edit_file, kind="edit", writes="path"),
    ]


class WorkspaceFiles:
    """The file tools of one workspace, a method each.

    Their docstrings are the model's prompt, on every request: an argument whose name says what it
    is (``path``, ``new_text``) has no description. ``bench/tool_prompt.py`` measures what a change
    costs and whether the model still calls them right; read_file's wording is as it is because
    shorter ones made Qwen2.5-Coder 1.5B read the first 10 lines of a file it was asked to show.
    """

    def __init__(
        self,
        space: Workspace,
        buffers: EditorBuffers | None = None,
        linter: Linter | None = None,
        write_log: WriteLog | None = None,
    ) -> None:
        self.space = space
        self.buffers = buffers
        self.linter = linter
        self.write_log = write_log

    def _checked(self, target: Path, before: str | None, after: str) -> str:
        """The linter's word on a write that parses ("" without a linter, or when nothing new is wrong)."""
        return self.linter.check(target, before, after) if self.linter is not None else ""

    def _held(self, target: Path, path: str) -> str | None:
        """The editor's text of ``target`` (checked on disk first: a regular file in the workspace), or None."""
        if self.buffers is None:
            return None
        os.close(self.space.open_regular(target, path)[0])
        return self.buffers.read_text(target)

    def _write(self, target: Path, path: str, text: str) -> None:
        """Write ``text`` to ``target``: through the editor when it takes it, else to the disk."""
        self.space.check_writable(target, path)
        if self.write_log is not None:
            try:
                self.write_log.writing(target, text, self._held_before(target, path))
            except PathRefused as refused:  # swapped for a symlink since it was resolved: not written either
                raise PermissionDenied(str(refused)) from None
        if self.buffers is not None:
            self.space.check_writable(target, path)
            # checked as the disk write would be (again: the log may have taken a while): reached by no symlink,
            # and a regular file when there is one
            try:
                there = self.space.tree.lstat(target)
            except PathRefused as refused:
                raise PermissionDenied(str(refused)) from None
            if there is not None:
                os.close(self.space.open_regular(target, path)[0])
            if self.buffers.write_text(target, text):
                return
        self.space.write(target, path, text.encode("utf-8"))

    def _held_before(self, target: Path, path: str) -> str | None:
        """What the editor holds for ``target`` before a write through it (what the turn's checkpoint keeps to put
        back); None without an editor, or for a new file."""
        if self.buffers is None:
            return None
        try:
            there = self.space.tree.lstat(target)
        except PathRefused as refused:
            raise PermissionDenied(str(refused)) from None
        return self._held(target, path) if there is not None else None

    def read_file(
        self,
        path: str,
        start_line: Annotated[int, Field(ge=1)] = 1,
        end_line: Annotated[int, Field(ge=1)] | None = None,
    ) -> str:
        """Read a text file, with line numbers.

        Args:
            path: the file, relative to the workspace.
            start_line: the first line to show (1-based).
            end_line: the last line to show (default: to the end).
        """
        target = self.space.resolve(path)
        held = self._held(target, path)
        if held is not None:
            data = held.encode("utf-8", "replace")
            source: BinaryIO = io.BytesIO(data)
            size = len(data)
        else:
            fd, info = self.space.open_regular(target, path)
            source, size = os.fdopen(fd, "rb"), info.st_size
        with source as handle:
            if _is_binary(handle):
                return f"'{path}' is a binary file ({size:,} bytes); it is not shown."
            shown: list[str] = []
            size = number = scanned = 0
            while True:
                raw, used, ended = _read_line(handle)
                if not raw:
                    break
                number += 1
                scanned += used
                if not ended:
                    if number >= start_line:
                        shown.append(f"{number:>5}  {_line(raw)}")
                    shown.append(f"[... line {number} is longer than {MAX_SCAN_BYTES >> 20} MiB; stopped reading]")
                    return "\n".join(shown)
                if number < start_line:
                    if scanned > MAX_SCAN_BYTES:
                        raise ToolError(
                            f"Line {start_line} of '{path}' is more than {MAX_SCAN_BYTES >> 20} MiB into it; "
                            "read_file does not go that far. Use grep_files to find what you need."
                        )
                    continue
                if end_line is not None and number > end_line:
                    break
                entry = f"{number:>5}  {_line(raw)}"
                if size + len(entry) > MAX_OUTPUT_CHARS and shown:
                    shown.append(
                        f"[... output cut at line {number - 1}; call read_file again with start_line={number} "
                        "to see more]"
                    )
                    return "\n".join(shown)
                shown.append(entry)
                size += len(entry) + 1
        if number and start_line > number:
            raise ToolError(f"'{path}' has {number} lines; start_line {start_line} is out of range.")
        return "\n".join(shown) or "(empty file)"

    def list_files(self, path: str = ".", pattern: str = "*") -> str:
        """List files under a folder (respecting .gitignore).

        Args:
            pattern: a glob on file names, e.g. "*.py".
        """
        target = self.space.resolve(path)
        if not target.is_dir():
            raise ToolError(f"No folder '{path}'.")
        found: list[str] = []
        size = 0
        for file in self.space.files(target):
            if fnmatch.fnmatch(file.name, pattern):
                found.append(self.space.relative(file))
                size += len(found[-1]) + 1
                if size > MAX_OUTPUT_CHARS:
                    found.append("[... more files; narrow it with path= or pattern=]")
                    break
        return "\n".join(found) or "(no files)"

    def grep_files(
        self, pattern: str, path: str = ".", context: Annotated[int, Field(ge=0, le=20)] = 0, glob: str = "*"
    ) -> str:
        """Search files for a regular expression, showing file:line matches.

        Args:
            pattern: RE2 syntax (no backreferences or lookaround).
            path: the folder or file to search.
            context: lines of context to show around each match.
            glob: a glob on file names, e.g. "*.py".
        """
        try:
            regex = re2.compile(pattern, options=_RE2_OPTIONS)
        except re2.error as exc:
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
            raise ToolError(
                f"Invalid regular expression {pattern[:200]!r}: {reason}. Patterns use RE2 syntax "
                "(no backreferences or lookaround)."
            ) from None
        target = self.space.resolve(path)
        candidates = (
            [target] if target.is_file() else [f for f in self.space.files(target) if fnmatch.fnmatch(f.name, glob)]
        )
        out: list[str] = []
        size = searched = 0
        skipped: list[str] = []
        for file in candidates:
            text = searchable_text(self.space, file, skipped)
            if text is None:
                continue
            searched += len(text)
            lines = text.splitlines()
            shown = self.space.relative(file)
            for index, line in enumerate(lines):
                if not regex.search(line):
                    continue
                low, high = max(index - context, 0), min(index + context + 1, len(lines))
                for number in range(low, high):
                    marker = ":" if number == index else "-"
                    out.append(f"{shown}{marker}{number + 1}{marker}{lines[number][:MAX_LINE_CHARS]}")
                    size += len(out[-1]) + 1
                if context:
                    out.append("--")
                if size > MAX_OUTPUT_CHARS:
                    return cut("\n".join(out), "narrow it with path= or glob=")
            if searched > MAX_SEARCH_BYTES:
                out.append(f"[... stopped after {MAX_SEARCH_BYTES >> 20} MiB of files; narrow it with path= or glob=]")
                break
        if skipped:
            out.append(f"[not searched: {', '.join(skipped[:10])}{' …' if len(skipped) > 10 else ''}]")
        return "\n".join(out) or "(no matches)"

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file.

        Args:
            content: the whole new content.
        """
        target = self.space.resolve(path)
        dropped = _dropped_definitions(self.space, target, path, content)
        if dropped:
            names = ", ".join(dropped[:8]) + (" …" if len(dropped) > 8 else "")
            raise ToolError(
                f"Not written: the new content of '{path}' leaves out {names}, which the file defines now "
                "(write_file replaces the whole file). To add code, call edit_file with old_text empty: it adds "
                "new_text at the end. To change code, edit_file the lines that change."
            )
        before = self._before(target, path) if self.linter is not None else None
        self._write(target, path, content)
        lines = len(content.splitlines())
        done = f"Wrote {self.space.relative(target)} ({lines} line{'' if lines == 1 else 's'})"
        _check_python(target, content, done)
        return done + "." + self._checked(target, before, content)

    def edit_file(self, path: str, old_text: str, new_text: str, replace_all: bool = False) -> str:
        """Replace text in a file, or add text at its end.

        Args:
            old_text: copied exactly from the file, and found once unless replace_all. Empty: new_text
                is added at the end.
            replace_all: replace every occurrence.
        """
        target = self.space.resolve(path)
        text = self._editable_text(target, path)
        edited, done = _edited(text, target, path, self.space.relative(target), old_text, new_text, replace_all)
        self._write(target, path, edited)
        checked = ""
        if _parses(target, text):  # a file that was broken before is not this edit's fault
            _check_python(target, edited, done)
            checked = self._checked(target, text, edited)
        return done + "." + still_named(self.space, target, old_text, new_text) + checked

    def _before(self, target: Path, path: str) -> str | None:
        """The text ``write_file`` replaces (None: a new file, or one that is not UTF-8 text within the bound)."""
        if not target.exists():
            return None
        try:
            return self._editable_text(target, path)
        except ToolError:
            return None

    def _editable_text(self, target: Path, path: str) -> str:
        """The text of the file ``edit_file`` edits (a regular file inside the workspace, UTF-8, not too big)."""
        held = self._held(target, path)
        if held is not None:
            if len(held) > MAX_EDIT_BYTES:
                raise ToolError(
                    f"'{path}' is {len(held):,} characters; edit_file edits files up to {MAX_EDIT_BYTES:,}."
                )
            return held
        fd, info = self.space.open_regular(target, path)
        with os.fdopen(fd, "rb") as handle:
            if info.st_size > MAX_EDIT_BYTES:
                raise ToolError(f"'{path}' is {info.st_size:,} bytes; edit_file edits files up to {MAX_EDIT_BYTES:,}.")
            data = handle.read(MAX_EDIT_BYTES + 1)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"'{path}' is not UTF-8 text; edit_file edits text files.") from None


def _edited(
    text: str, target: Path, path: str, shown: str, old_text: str, new_text: str, replace_all: bool
) -> tuple[str, str]:
    """``text`` with the edit made, and what to tell the model: an exact match, a loose one, or an addition.

    Raises:
        ToolError: nothing to change, ``old_text`` found more than once, or not found (with the closest lines).
    """
    if not old_text:
        if not new_text.strip():
            raise ToolError("old_text and new_text are both empty: there is nothing to change.")
        return text + _gap(text) + new_text, f"Added {len(new_text.splitlines())} line(s) at the end of {shown}"
    count = text.count(old_text)
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_text appears {count} times in '{path}'; include more surrounding lines so it is unique, "
            "or pass replace_all=true to replace every one."
        )
    if count:
        edited = text.replace(old_text, new_text, -1 if replace_all else 1)
        return edited, f"Edited {shown}" + (f" ({count} replacements)" if count > 1 else "")
    loose = loose_edit(text, old_text, new_text)
    if loose:
        edited, (first, last) = loose
        return edited, (
            f"Edited {shown}: old_text matched lines {first}-{last} once when spaces, quote marks and "
            "left-out comment or docstring lines are ignored; your change was made there, keeping the "
            "file's own text where you changed nothing"
        )
    added = new_definition(target, text, old_text, new_text)
    if added:
        return text + _gap(text) + new_text.strip("\n") + "\n", (
            f"Added {added} at the end of {shown}: old_text is not in the file, and new_text defines "
            f"{added}, which the file did not have"
        )
    raise ToolError(f"old_text was not found in '{path}'. {closest_text(text, old_text)}")


def _definitions(text: str) -> list[str] | None:
    """The top-level functions and classes of Python ``text`` (``None`` when it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return [
        f"{node.name}()" if not isinstance(node, ast.ClassDef) else node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]


def _dropped_definitions(space: Workspace, target: Path, shown: str, content: str) -> list[str]:
    """What a write_file of ``content`` over an existing ``.py`` file would delete: its functions and classes.

    Asked to add one function, small models rewrite the whole file from memory and lose the rest
    of it (the 1.5B model kept one of three functions). Both texts must parse for the check to apply.
    """
    if not os.fspath(target).endswith(".py"):
        return []
    try:
        fd, info = space.open_regular(target, shown)
    except ToolError:
        return []  # a new file (or not a regular one: writing it will say so)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_EDIT_BYTES + 1) if info.st_size <= MAX_EDIT_BYTES else b""
    before, after = _definitions(data.decode("utf-8", errors="replace")), _definitions(content)
    if not before or after is None:
        return []
    kept = set(after)
    return [name for name in before if name not in kept]


def _parses(target: os.PathLike[str], text: str) -> bool:
    """Whether ``text`` is valid Python, for a ``.py`` file (other files: always true)."""
    if not os.fspath(target).endswith(".py"):
        return True
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _check_python(target: os.PathLike[str], text: str, done: str) -> None:
    """Raise a ToolError saying what is wrong when a ``.py`` file no longer parses (it was written all the same).

    Small models drop quotes or indentation when they rewrite a file; the next test run would fail
    far from the cause, so the model hears of it at once, with the line.
    """
    if not os.fspath(target).endswith(".py"):
        return
    try:
        ast.parse(text)
    except SyntaxError as exc:
        line = (exc.text or "").strip()[:200]
        raise ToolError(
            f"{done}, but it is not valid Python now: line {exc.lineno}: {exc.msg}"
            + (f" ({line!r})" if line else "")
            + ". Fix the file: read_file shows it as it is."
        ) from None
    except (ValueError, RecursionError, MemoryError):
        return  # null bytes, or nesting too deep for the parser: not something a syntax hint can help with


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
MAX_RENAME_FILES = 2_000
"""The most workspace files looked at for other uses of a renamed name."""


def still_named(space: Workspace, edited: Path, old_text: str, new_text: str) -> str:
    """After an edit that renamed something, where else the old name still appears (``""``: nowhere, or no rename).

    A rename is an edit whose old_text loses one or two names that new_text does not have, while
    new_text brings as many new ones. Small models rename in the file they are looking at and stop
    (the 1.5B model renamed a class in models.py, leaving three files using the old name); a line
    listing the other files lets it go on.
    """
    removed = sorted(
        name
        for name in set(_IDENTIFIER.findall(old_text)) - set(_IDENTIFIER.findall(new_text))
        if not keyword.iskeyword(name)
    )
    added = set(_IDENTIFIER.findall(new_text)) - set(_IDENTIFIER.findall(old_text))
    if not removed or len(removed) > 2 or len(added) != len(removed):
        return ""
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, removed)) + r")(?![A-Za-z0-9_])")
    found: dict[str, int] = {}
    for count, path in enumerate(space.files(space.root)):
        if count >= MAX_RENAME_FILES or len(found) >= 10:
            break
        text = searchable_text(space, path)
        if text is None:
            continue
        hits = len(pattern.findall(text))
        if hits:
            found[space.relative(path)] = hits
    if not found:
        return ""
    where = ", ".join(f"{name} ({hits})" for name, hits in found.items())
    return f" {' and '.join(removed)} still appear{'s' if len(removed) == 1 else ''} in: {where}."


def _gap(text: str) -> str:
    """What goes between a file's text and what is added at its end: a blank line."""
    return "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"


_DEFINITION = re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")


def new_definition(target: os.PathLike[str], text: str, old_text: str, new_text: str) -> str | None:
    """The function or class a missing ``old_text`` was meant to create in a ``.py`` file, or ``None``.

    Asked to add ``count_words``, the 1.5B model calls ``edit_file`` with ``old_text`` set to the new
    function's own first line, which the file cannot hold yet, and the body in ``new_text``. When
    ``old_text`` is a ``def``/``class`` line for a name the file does not define and ``new_text``
    starts with it, the intent is plain: the definition is added at the end of the file.
    """
    if not os.fspath(target).endswith(".py"):
        return None
    wanted = old_text.strip()
    if old_text.lstrip("\n")[:1].isspace():
        return None  # an indented def is a method: where it belongs is not the end of the file
    match = _DEFINITION.match(wanted)
    defined = _definitions(text)
    if match is None or defined is None or not new_text.strip().startswith(wanted):
        return None
    name = match.group(1)
    if name in {item.removesuffix("()") for item in defined}:
        return None
    return f"{name}()" if not wanted.startswith("class") else name


def _loose(line: str) -> str:
    return _LOOSE.sub("", line)


def _skippable(line: str) -> bool:
    """A line a model may leave out when it copies code: blank, a comment, or a docstring's line."""
    stripped = line.strip()
    return not stripped or stripped.startswith(("#", '"', "'"))


def loose_edit(text: str, old_text: str, new_text: str) -> tuple[str, tuple[int, int]] | None:
    """``old_text`` -> ``new_text`` applied where ``old_text`` matches ``text`` loosely, once.

    Small models copy a file's lines into a JSON string and lose what JSON makes them escape
    (the quotes of a docstring, a line's indentation), or leave a docstring or comment line
    out. The lines of ``old_text`` match a run of the file's lines when, with spaces, tabs and
    quote marks left out, each equals the next file line, skipping only blank, comment and
    docstring lines. When exactly one run matches, the model's change (a line diff of
    ``old_text`` and ``new_text``) is applied to it: lines it did not change keep the file's
    own text, and the lines it skipped stay where they were. Returns the new text and the
    1-based lines of the run, or ``None``.
    """
    wanted = old_text.strip("\n").split("\n")
    keys = [_loose(line) for line in wanted]
    lines = text.split("\n")
    if not any(keys) or len(lines) > MAX_LOOSE_LINES:
        return None
    loose_lines = [_loose(line) for line in lines]
    runs = [run for start in range(len(lines)) if (run := _run_at(start, keys, loose_lines, lines)) is not None]
    if len(runs) != 1:
        return None
    mapped = runs[0]
    gaps = [lines[mapped[k] + 1 : mapped[k + 1]] for k in range(len(mapped) - 1)] + [[]]
    changed = new_text.strip("\n").split("\n") if new_text.strip() else []
    # old_text may start inside its first line and end inside its last: the rest of those lines stays
    first_line = lines[mapped[0]]
    if len(wanted) > 1:
        head, tail = _head(first_line, keys[0]), _tail(lines[mapped[-1]], keys[-1])
    else:
        head, tail = _around(first_line, keys[0])
    if head or tail:
        wanted = [*wanted]
        wanted[0] = head + wanted[0].lstrip() if head else wanted[0]
        wanted[-1] = wanted[-1] + tail
        if changed:
            changed[0] = head + changed[0].lstrip() if head else changed[0]
            changed[-1] = changed[-1] + tail
        else:
            changed = [head + tail] if (head + tail).strip() else []
    out = lines[: mapped[0]]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wanted, changed, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i1, i2):
                out += [lines[mapped[k]], *gaps[k]]
        else:
            out += changed[j1:j2]
            for k in range(i1, i2):
                out += gaps[k]
    out += lines[mapped[-1] + 1 :]
    return "\n".join(out), (mapped[0] + 1, mapped[-1] + 1)


def _run_at(start: int, keys: list[str], loose_lines: list[str], lines: list[str]) -> list[int] | None:
    """The file lines ``keys`` match from ``start`` on (skipping only skippable lines), or ``None``.

    Every key is a whole line, except that the first may be the end of its line and the last
    the start of its line (an ``old_text`` that begins or ends inside a line), when it is at
    least ``MIN_PARTIAL`` characters long.
    """
    first, key = loose_lines[start], keys[0]
    partial = len(key) >= MIN_PARTIAL
    if len(keys) == 1:  # one line of old_text: the whole line, or once anywhere in it (minified code)
        fits = first == key or (partial and first.count(key) == 1)
    else:
        fits = first == key or (partial and first.endswith(key))
    if not fits:
        return None
    mapped = [start]
    at = start + 1
    for index, key in enumerate(keys[1:], 1):
        last = index == len(keys) - 1
        while at < len(lines) and not _fits(loose_lines[at], key, last) and _skippable(lines[at]):
            at += 1
        if at >= len(lines) or not _fits(loose_lines[at], key, last):
            return None
        mapped.append(at)
        at += 1
    return mapped


def _fits(line: str, key: str, last: bool) -> bool:
    return line == key or (last and len(key) >= MIN_PARTIAL and line.startswith(key))


def _kept(line: str) -> list[int]:
    """The indices of ``line``'s characters that its loose form keeps (one pass: linear in the line)."""
    return [match.start() for match in _KEPT.finditer(line)]


def _head(line: str, key: str) -> str:
    """The start of ``line`` before the part whose loose form is ``key`` (``""`` when the whole line is).

    The longest such start: it ends right before the first kept character of that part.
    """
    kept = _kept(line)
    loose = "".join(line[i] for i in kept)
    if loose == key or not key or not loose.endswith(key):
        return ""
    return line[: kept[len(kept) - len(key)]]


def _around(line: str, key: str) -> tuple[str, str]:
    """What of ``line`` comes before and after the one part whose loose form is ``key`` (``""`` at an end).

    At the line's start the head is empty (the line's indentation comes from the model's text).
    """
    kept = _kept(line)
    loose = "".join(line[i] for i in kept)
    at = loose.find(key)
    if at < 0 or loose == key:
        return "", ""
    end = at + len(key)
    return (line[: kept[at]] if at else ""), (line[kept[end] :] if end < len(kept) else "")


def _tail(line: str, key: str) -> str:
    """The end of ``line`` after the part whose loose form is ``key`` (``""`` when the whole line is).

    The shortest such end: it starts at the first kept character after that part.
    """
    kept = _kept(line)
    loose = "".join(line[i] for i in kept)
    if loose == key or not key or not loose.startswith(key):
        return ""
    return line[kept[len(key)] :]


def closest_text(text: str, wanted: str) -> str:
    """What to tell a model whose ``old_text`` is not in ``text``: the file's lines most like it, to copy.

    A small file is shown whole; otherwise the window of lines (as many as ``wanted`` has, plus
    two either side) whose text is most like ``wanted``, with line numbers to read more around it.
    Each window is compared by its first ``MAX_COMPARED_CHARS`` (difflib is quadratic); in a line
    longer than can be shown (minified code), the part around the rarest word of ``wanted`` is.
    """
    if len(text) <= MAX_SHOWN_ON_MISS:
        return f"The file's whole text is below; copy old_text from it exactly.\n{text}"
    lines = text.splitlines()
    size = max(1, min(len(wanted.splitlines()) or 1, 40))
    probe = wanted.strip()[:4_000]
    best, best_score = 0, -1.0
    for start in range(0, max(1, len(lines) - size + 1))[:MAX_WINDOWS_ON_MISS]:
        window = "\n".join(lines[start : start + size])[:MAX_COMPARED_CHARS]
        matcher = difflib.SequenceMatcher(None, probe, window.strip(), autojunk=False)
        if matcher.real_quick_ratio() <= best_score or matcher.quick_ratio() <= best_score:
            continue
        score = matcher.ratio()
        if score > best_score:
            best, best_score = start, score
    low, high = max(0, best - 2), min(len(lines), best + size + 2)
    shown = "\n".join(lines[low:high])
    if len(shown) > MAX_SHOWN_ON_MISS:
        part = _part_like(lines[best], probe)
        if part is not None:
            first, last = part
            return (
                f"Line {best + 1} is {len(lines[best]):,} characters long; the part most like old_text is at "
                f"characters {first + 1:,}-{last:,}. Copy old_text from it exactly (one line of it is enough):\n"
                + lines[best][first:last]
            )
    return (
        f"The closest text is at lines {low + 1}-{high} (read_file shows more); copy old_text exactly:\n"
        + shown[:MAX_SHOWN_ON_MISS]
    )


def _part_like(line: str, probe: str) -> tuple[int, int] | None:
    """Where in a long ``line`` to look: around the rarest of ``probe``'s words that it holds."""
    words = sorted(set(_IDENTIFIER.findall(probe)), key=lambda word: (line.count(word) or len(line), -len(word)))
    for word in words:
        at = line.find(word)
        if at >= 0:
            first = max(0, at - MAX_SHOWN_ON_MISS // 3)
            return first, min(len(line), first + MAX_SHOWN_ON_MISS)
    return None


def searchable_text(
    space: Workspace, file: os.PathLike[str], skipped: list[str] | None = None, max_bytes: int = MAX_SEARCH_FILE_BYTES
) -> str | None:
    """The text of ``file`` to search, or None (outside the workspace, not a regular file, binary, too big).

    Text is read as UTF-8; a byte that is not (a Latin-1 "é" in a UTF-8 file) reads as U+FFFD, so the rest of
    the file is still searched. A file with a NUL byte in its first 8 KiB is binary. A file over ``max_bytes``
    is named in ``skipped`` (with its size) when a list is given.
    """
    try:
        real = space.resolve(os.fspath(file))  # a symlink must land inside the workspace
        fd, info = space.open_regular(real, os.fspath(file))
    except ToolError:
        return None  # a link out of the workspace, a pipe, a device: never read
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > max_bytes:
            if skipped is not None:
                skipped.append(f"{space.relative(real)} ({info.st_size >> 20} MiB)")
            return None
        data = handle.read(max_bytes + 1)
    if b"\x00" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", errors="replace")
