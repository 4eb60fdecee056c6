"""The user's own slash commands: a Markdown file whose text ``/NAME`` stands for, as Claude Code's
``.claude/commands/*.md`` and Codex's ``~/.codex/prompts/*.md`` are.

Where they are: ``commands/NAME.md`` in the user's Cortana config folder (beside the user's cortana.yml, for
every workspace), and ``.cortana/commands/NAME.md`` in a workspace, used only once the user trusted the folder
(``cortana trust``; ``Settings.trusted``), as a folder's AGENTS.md is obeyed only then. A folder's command wins
over the user's of the same name; no file takes the name of a built-in command (:data:`BUILT_IN_COMMANDS`).

What one holds: optional YAML front matter between two ``---`` lines (``description``, ``argument-hint``, and
``allowed-tools`` or ``tools``: the tool-name globs the turn may call), then the prompt. In it ``$ARGUMENTS`` is
everything typed after the name, and ``$1``, ``$2``… each word of that (split as a shell splits, quotes holding
words together; a missing one is empty). A prompt with neither gets what was typed after a blank line::

    ---
    description: Review a file for bugs
    argument-hint: FILE
    tools: [read_file, grep_files]
    ---
    Review $1 for bugs. Quote the lines you mean.

One place expands them, :meth:`UserCommands.expand`, and :meth:`cortana.Assistant.turn` calls it on every
prompt, so the terminal, ``cortana -p``, ``cortana serve`` and ``cortana acp`` take a command alike. A file is
read again whenever it changed (an edit applies at its next use, without a restart), at most 64 KiB of UTF-8; a
file that cannot be used is a :class:`~cortana.errors.ConfigError` naming it and what is wrong.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from cortana.errors import ConfigError

__all__ = [
    "BUILT_IN_COMMANDS",
    "FOLDER_COMMANDS",
    "MAX_COMMAND_BYTES",
    "CommandListing",
    "Expanded",
    "UserCommand",
    "UserCommands",
    "parse_command",
]

BUILT_IN_COMMANDS = frozenset(
    {
        "help", "compact", "clear", "threads", "resume", "plan", "undo", "rewind", "model", "fix", "tools",
        "permissions", "memory", "context", "graph", "heartbeat", "voice", "stats", "good", "bad", "learned",
        "teach", "skills", "ps", "exit",
    }
)  # fmt: skip
"""The terminal's own slash commands (``cli/repl.py``'s table, without the ``/``): no command file takes one of
these names, in any front end, so a file means the same everywhere."""
FOLDER_COMMANDS = Path(".cortana") / "commands"
"""Where a workspace keeps its commands, relative to it."""
MAX_COMMAND_BYTES = 64 << 10
"""The largest command file read (64 KiB)."""
MAX_FILES = 200
"""The most command files looked at in one folder (the rest are reported)."""
MAX_DESCRIPTION_CHARS = 200

Source = Literal["user", "folder"]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_TYPED = re.compile(r"/([A-Za-z0-9][A-Za-z0-9_-]*)(?:\s+(.*))?\Z", re.S)
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9][0-9]*)")
_FENCE = "---"
_TOOL_KEYS = ("allowed-tools", "tools")


@dataclass(frozen=True)
class UserCommand:
    """One command file, read.

    Attributes:
        name: what follows the ``/`` (the file's name without ``.md``).
        path: the file.
        source: ``user`` (the user's config folder) or ``folder`` (the workspace's ``.cortana/commands``).
        text: the prompt, after the front matter.
        description: one line for ``/help`` and completion ("" when the front matter has none).
        argument_hint: what to type after the name (``FILE [FOCUS]``), shown beside it.
        tools: the tool-name globs a turn of this command may call; None: every tool the assistant has.
    """

    name: str
    path: Path
    source: Source
    text: str
    description: str = ""
    argument_hint: str = ""
    tools: tuple[str, ...] | None = None

    def expand(self, arguments: str) -> str:
        """The prompt for ``arguments`` (what was typed after the name): ``$ARGUMENTS`` and ``$1``, ``$2``…
        replaced in one pass (an argument that holds ``$1`` stays as typed); with neither in the text, the
        arguments follow it after a blank line."""
        words = _words(arguments)
        used = False

        def put(match: re.Match[str]) -> str:
            nonlocal used
            used = True
            key = match[1]
            if key == "ARGUMENTS":
                return arguments
            index = int(key)
            return words[index - 1] if index <= len(words) else ""

        prompt = _PLACEHOLDER.sub(put, self.text)
        if not used and arguments:
            prompt = f"{prompt}\n\n{arguments}"
        return prompt


@dataclass(frozen=True)
class Expanded:
    """A prompt that was a user command, and what it became.

    Attributes:
        command: the command.
        arguments: what was typed after its name.
        prompt: the prompt the turn sends.
    """

    command: UserCommand
    arguments: str
    prompt: str

    @property
    def tools(self) -> tuple[str, ...] | None:
        """The tool-name globs the turn may call (None: every tool)."""
        return self.command.tools


@dataclass
class CommandListing:
    """Every command file there is, for ``/help`` and completion.

    Attributes:
        commands: the commands a ``/NAME`` runs, by name (a folder's in place of the user's of the same name).
        problems: the files that cannot be used, each error naming its file and what is wrong.
        built_in: files named like a built-in command: never used.
        untrusted: the workspace's files, unused while the folder is not trusted.
    """

    commands: list[UserCommand] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    built_in: list[Path] = field(default_factory=list)
    untrusted: list[Path] = field(default_factory=list)

    def notes(self) -> list[str]:
        """What ``/help`` says besides the commands: one line each for the unused files, and each problem."""
        notes = [
            f"{path}: not used: /{path.stem} is a built-in command, which no file can replace (rename the file)"
            for path in self.built_in
        ]
        if self.untrusted:
            shown = ", ".join(f"/{path.stem}" for path in self.untrusted[:8])
            more = f" and {len(self.untrusted) - 8} more" if len(self.untrusted) > 8 else ""
            notes.append(
                f"this folder's commands ({shown}{more}, in {FOLDER_COMMANDS}) are ignored: the folder is not trusted "
                "(run `cortana trust` here to use them)"
            )
        return [*notes, *self.problems]


class UserCommands:
    """The commands a workspace's prompts may name (see the module docstring).

    Args:
        user_folder: the user's ``commands/`` folder (None: none).
        workspace: the workspace, whose ``.cortana/commands`` holds its own (None: none).
        trusted: whether the user trusts the workspace: untrusted, its commands are ignored.
    """

    def __init__(self, user_folder: Path | None, workspace: Path | None, *, trusted: bool) -> None:
        self.user_folder = user_folder
        self.workspace = workspace
        self.trusted = trusted
        self._read: dict[Path, tuple[tuple[int, int, int], UserCommand | ConfigError]] = {}

    @property
    def folder(self) -> Path | None:
        """The workspace's own commands folder (used only when the workspace is trusted)."""
        return self.workspace / FOLDER_COMMANDS if self.workspace is not None else None

    def expand(self, prompt: str) -> Expanded | None:
        """``prompt`` as the user command it names (``/NAME`` and what follows), or None when it names none: not a
        ``/NAME``, a built-in's name, no such file (or only an untrusted folder's).

        Raises:
            ConfigError: the command's file cannot be used (too large, not UTF-8, bad front matter, no prompt),
                naming the file and what is wrong.
        """
        typed = _TYPED.match(prompt.lstrip())
        if typed is None:
            return None
        command = self.find(typed[1])
        if command is None:
            return None
        arguments = (typed[2] or "").strip()
        return Expanded(command, arguments, command.expand(arguments))

    def find(self, name: str) -> UserCommand | None:
        """The command ``/name`` runs: the trusted workspace's file, else the user's; None when there is none.

        Raises:
            ConfigError: its file cannot be used.
        """
        if name in BUILT_IN_COMMANDS or not _NAME.fullmatch(name):
            return None
        for source, folder in self._folders():
            path = folder / f"{name}.md"
            if os.path.lexists(path):
                return self._load(path, source)
        return None

    def ignored(self, name: str) -> Path | None:
        """The untrusted workspace's file for ``/name``, when that is the only one (so a front end can say why
        ``/name`` did nothing)."""
        folder = self.folder
        if self.trusted or folder is None or not _NAME.fullmatch(name) or name in BUILT_IN_COMMANDS:
            return None
        path = folder / f"{name}.md"
        if not os.path.lexists(path) or self.find(name) is not None:
            return None
        return path

    def listing(self) -> CommandListing:
        """Every command there is, sorted by name, with what is unused and why (a bad file is a problem listed,
        never an error here)."""
        listing = CommandListing()
        found: dict[str, UserCommand] = {}
        folders: list[tuple[Source, Path | None]] = [("user", self.user_folder), ("folder", self.folder)]
        for source, folder in folders:  # the user's first: a folder's command of the same name replaces it
            if folder is None:
                continue
            for path in _files(folder, listing.problems):
                if source == "folder" and not self.trusted:
                    listing.untrusted.append(path)
                elif path.stem in BUILT_IN_COMMANDS:
                    listing.built_in.append(path)
                else:
                    try:
                        found[path.stem] = self._load(path, source)
                    except ConfigError as error:
                        found.pop(path.stem, None)  # what /NAME does: the error, not the user's file
                        listing.problems.append(str(error))
        listing.commands = [found[name] for name in sorted(found)]
        return listing

    def _folders(self) -> Iterator[tuple[Source, Path]]:
        """Where ``/NAME`` is looked for, first found first: the trusted workspace's folder, then the user's."""
        if self.trusted and self.folder is not None:
            yield "folder", self.folder
        if self.user_folder is not None:
            yield "user", self.user_folder

    def _load(self, path: Path, source: Source) -> UserCommand:
        """The command in ``path``, read again when the file changed since it was last read."""
        try:
            info = os.stat(path)
        except OSError as error:
            raise ConfigError(f"it cannot be read: {error.strerror or error}", source=str(path)) from None
        key = (info.st_mtime_ns, info.st_size, info.st_ino)
        known = self._read.get(path)
        if known is None or known[0] != key:
            try:
                known = (key, parse_command(self._text(path, source), path, source))
            except ConfigError as error:
                known = (key, error)
            self._read[path] = known
        if isinstance(known[1], ConfigError):
            raise known[1].with_traceback(None)  # the same error until the file changes
        return known[1]

    def _text(self, path: Path, source: Source) -> str:
        """The file's text; a workspace's file may be a link only to another file inside the workspace."""
        real = path.resolve()
        if source == "folder" and self.workspace is not None and not real.is_relative_to(self.workspace.resolve()):
            raise _bad(path, f"a link out of the workspace (to {real}): put the command's text in the file itself")
        return _read_bounded(real, path)


def parse_command(text: str, path: Path, source: Source = "user") -> UserCommand:
    """The command in ``text``, the contents of ``path``.

    Raises:
        ConfigError: naming ``path`` and what is wrong: front matter not closed, not valid YAML, not a mapping, a
            field of the wrong kind, both ``allowed-tools`` and ``tools``, or no prompt.
    """
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    front: dict[object, object] = {}
    if lines[0].rstrip() == _FENCE:
        end = next((index for index in range(1, len(lines)) if lines[index].rstrip() == _FENCE), None)
        if end is None:
            raise _bad(path, "the front matter is not closed: add a line '---' after it, then the prompt")
        front = _front_matter("\n".join(lines[1:end]), path)
        lines = lines[end + 1 :]
    body = "\n".join(lines).strip()
    if not body:
        raise _bad(path, f"there is no prompt in it: write what /{path.stem} should ask after the front matter")
    return UserCommand(
        name=path.stem,
        path=path,
        source=source,
        text=body,
        description=_line(front, "description", path),
        argument_hint=_line(front, "argument-hint", path),
        tools=_tools(front, path),
    )


def _bad(path: Path, problem: str) -> ConfigError:
    return ConfigError(problem, source=str(path))


def _front_matter(source: str, path: Path) -> dict[object, object]:
    try:
        data: object = yaml.safe_load(source)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark else ""  # +2: after the first '---'
        raise _bad(path, f"the front matter is not valid YAML{where}: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise _bad(path, f"the front matter is not valid YAML: {exc}") from None
    except RecursionError:
        raise _bad(path, "the front matter is nested too deeply to read") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _bad(
            path,
            "the front matter must be 'key: value' lines (description, argument-hint, allowed-tools), "
            f"not a {type(data).__name__}",
        )
    return data


def _line(front: dict[object, object], key: str, path: Path) -> str:
    """A text field as one line (whitespace runs made one space, cut to 200 characters); "" when absent."""
    value = front.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _bad(path, f"'{key}' must be text, not {type(value).__name__}: put it in quotes, e.g. {key}: \"...\"")
    line = " ".join(value.split())
    return line if len(line) <= MAX_DESCRIPTION_CHARS else line[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"


def _tools(front: dict[object, object], path: Path) -> tuple[str, ...] | None:
    """``allowed-tools`` (or ``tools``): a list of tool-name globs, or one text of them separated by commas."""
    given = [key for key in _TOOL_KEYS if front.get(key) is not None]
    if not given:
        return None
    if len(given) > 1:
        raise _bad(path, "both 'allowed-tools' and 'tools' are given: keep one")
    value = front[given[0]]
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _bad(path, f"'{given[0]}' must be a list of tool names, e.g. {given[0]}: [read_file, grep_files]")
    return tuple(name.strip() for name in value if name.strip())


def _words(arguments: str) -> list[str]:
    """``arguments`` split as a shell splits them (quotes hold words together), or at whitespace when the quoting
    does not close."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def _files(folder: Path, problems: list[str]) -> list[Path]:
    """The ``*.md`` files in ``folder`` whose names can be commands, sorted (others noted in ``problems``)."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".md"))
    except FileNotFoundError:
        return []
    except OSError as error:
        problems.append(f"{folder}: cannot be read: {error.strerror or error}")
        return []
    files: list[Path] = []
    for name in names:
        if not _NAME.fullmatch(name[:-3]):
            problems.append(
                f"{folder / name}: not a command name: use letters, digits, '-' and '_' (at most 64), starting with a "
                "letter or digit"
            )
        elif len(files) == MAX_FILES:
            problems.append(f"{folder}: more than {MAX_FILES} commands; the rest are not used")
            break
        else:
            files.append(folder / name)
    return files


def _read_bounded(real: Path, path: Path) -> str:
    """The UTF-8 text of the regular file ``real`` (``path`` resolved), at most 64 KiB; an error names ``path``."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)  # NONBLOCK: a FIFO must not hang
    except OSError as error:
        raise _bad(path, f"it cannot be read: {error.strerror or error}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _bad(path, "not a regular file: a command is a plain text file")
        data = handle.read(MAX_COMMAND_BYTES + 1)
    if len(data) > MAX_COMMAND_BYTES:
        raise _bad(path, f"larger than 64 KiB ({max(info.st_size, len(data)):,} bytes): shorten the prompt")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _bad(path, f"not UTF-8 text (byte {error.start}): save it as UTF-8") from None
