"""Whether a command may reach a protected path, judged from its words as the shell will see them.

A protected path (``.git/``, ``cortana.yml``, ``personality/``, ``skills/``,
``.cortana/``, and the files a trusted MCP server runs) is asked for every
time, whatever ``--yes`` or an earlier "always" say. A command reaches one
when a word names it, however it is spelled: quoted (``.gi''t``), through
``..`` or a symlink, relative to a ``cd``, or as a pattern that matches it
(``.g?t``, ``personalit[y]``, ``cortana.y?l``, ``{.gi,x}t``). A command the
gate cannot show to stay clear of them is treated the same: one with a
variable or a substitution (``$D/hooks``, ``$(…)``), a ``cd`` it cannot
resolve, a pattern with too many matches, or a command it cannot read.
``git config`` (which writes ``.git/config``) reaches ``.git/`` too.

This judges the command's text only: a program can still write anywhere its
user can (commands are asked for, not confined).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from collections.abc import Iterator
from pathlib import Path

from cortana.tools.builtin.shell import ParsedCommand, Word, parse_command
from cortana.tools.builtin.workspace import PROTECTED, Workspace

__all__ = ["MAX_MATCHES", "command_reach"]

MAX_MATCHES = 2_000
"""A pattern matching more paths than this is not expanded: the command is asked for."""
MAX_BRACE_WORDS = 256
MAX_FOLDERS = 16
"""The most folders a command's ``cd``s may have left it in that the gate follows; past it, the command is asked."""
_GIT_VALUED = frozenset({"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"})
_NAMES = re.compile(
    r"(?<![\w.-])(" + "|".join(re.escape(name) for name in PROTECTED) + r")(?![\w-]|\.(?!/|$))", re.IGNORECASE
)
"""A protected name standing alone in a text (``.git/hooks``, ``'cortana.yml'``), not ``.github`` or ``skills.py``."""


def command_reach(command: str, space: Workspace) -> str | None:
    """Why ``command`` is asked for every time (it may reach a protected path), or None when it stays clear.

    The reason names what the gate saw, e.g. "it names .git/" or "it has a variable or a substitution whose
    value is only known when it runs".
    """
    named = _named(command)
    if named:
        return f"it names {named}"
    parsed = parse_command(command)
    if parsed.opaque:
        return "it cannot be read for certain (an unclosed quote or substitution, or too long)"
    return _reach(parsed, space)


def _named(text: str) -> str | None:
    found = sorted({PROTECTED[_canonical(match.group(1))] for match in _NAMES.finditer(text)})
    return ", ".join(found) if found else None


def _canonical(name: str) -> str:
    return next(key for key in PROTECTED if key.lower() == name.lower())


def _reach(parsed: ParsedCommand, space: Workspace) -> str | None:
    folders = [space.root]  # every folder a cd may have left the shell in (subshells make this a set, not a line)
    for command in parsed.commands:
        argv = command.argv
        if argv and argv[0].rsplit("/", 1)[-1] == "git" and _git_subcommand(argv) == "config":
            return "git config writes .git/config"
        for word in [*command.assignments, *command.words, *(r.target for r in command.redirects if r.target)]:
            reason = _word_reach(word, folders, space)
            if reason:
                return reason
        if argv and argv[0] in ("cd", "pushd"):
            targets = [w for w in command.words[1:] if not w.text.startswith("-")]
            if not targets:
                continue  # cd alone: the home folder
            target = targets[0]
            if target.expands or target.glob or target.brace:
                return f"it changes to a folder it cannot resolve ({target.raw[:80]})"
            text = os.path.expanduser(target.text) if target.tilde else target.text
            folders = list(dict.fromkeys([*(_resolve(folder, text) for folder in folders), *folders]))
            if len(folders) > MAX_FOLDERS:
                return f"it changes folders more than the gate follows ({MAX_FOLDERS} places)"
    return None


def _git_subcommand(argv: list[str]) -> str | None:
    """The subcommand of a git argv, past its global options (``git -C x config`` -> ``config``)."""
    index = 1
    while index < len(argv):
        word = argv[index]
        if word in _GIT_VALUED:
            index += 2
        elif word.startswith("-"):
            index += 1
        else:
            return word
    return None


def _word_reach(word: Word, folders: list[Path], space: Workspace) -> str | None:
    if word.expands:
        return f"it has a variable or a substitution whose value is only known when it runs ({word.raw[:80]})"
    named = _named(word.text)
    if named:
        return f"it names {named}"
    texts = _brace_words(word.text) if word.brace else [word.text]
    if texts is None:
        return f"it has a brace expansion the gate does not expand ({word.raw[:80]})"
    for text in texts:
        named = _named(text)
        if named:
            return f"it names {named} ({word.raw[:80]})"
        for candidate in _path_candidates(os.path.expanduser(text) if word.tilde else text):
            for folder in folders:
                reason = _path_reach(folder, candidate, word.glob or word.brace, space)
                if reason:
                    return reason
    return None


def _path_candidates(text: str) -> Iterator[str]:
    """The word itself, and the value of ``--option=value`` or ``-ovalue`` in it."""
    if text:
        yield text
    if text.startswith("-"):
        if "=" in text:
            yield text.split("=", 1)[1]
        elif len(text) > 2 and not text.startswith("--"):
            yield text[2:]


def _path_reach(folder: Path, text: str, pattern: bool, space: Workspace) -> str | None:
    if "\x00" in text:
        return None
    if pattern and glob.has_magic(text):
        return _pattern_reach(folder, text, space)
    return _protected(space, _resolve(folder, text))


def _pattern_reach(folder: Path, text: str, space: Workspace) -> str | None:
    """A pattern reaches a protected path if it may name one at the top, or if a file it matches is one."""
    base = _resolve(folder, "/" if text.startswith("/") else ".")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    for part in parts:
        if not glob.has_magic(part):
            base = _resolve(base, part)
            continue
        reason = _protected(space, base)
        if reason:
            return reason
        if base == space.root:
            for name, shown in PROTECTED.items():
                if _may_match(part, name):
                    return f"the pattern {text[:80]} may name {shown}"
        for name, shown in space.protected_files_in(base).items():
            if _may_match(part, name):
                return f"the pattern {text[:80]} may name {shown}"
        break
    try:
        matches = glob.iglob(str(folder / text) if not text.startswith("/") else text, recursive=False)
        for count, match in enumerate(matches):
            if count >= MAX_MATCHES:
                return f"the pattern {text[:80]} matches more than {MAX_MATCHES:,} paths"
            reason = _protected(space, _resolve(folder, match))
            if reason:
                return reason
    except (OSError, ValueError, RecursionError):
        return f"the pattern {text[:80]} cannot be expanded"
    return None


def _may_match(part: str, name: str) -> bool:
    """Whether a shell pattern matches ``name`` (case ignored; as in sh, only a pattern starting with '.' matches
    a dotfile)."""
    if name.startswith(".") and not part.startswith("."):
        return False
    return fnmatch.fnmatchcase(name.lower(), part.lower())


def _protected(space: Workspace, target: Path) -> str | None:
    shown = space.protected(target)
    return f"it reaches {shown}" if shown else None


def _resolve(folder: Path, text: str) -> Path:
    try:
        return (folder / text).resolve()
    except (OSError, RuntimeError, ValueError):
        return folder / text


def _brace_words(text: str) -> list[str] | None:
    """bash's brace expansion of ``text`` (``{a,b}`` alternatives, nested); None for ``{1..9}`` or too many."""
    words = [text]
    for _ in range(32):
        expanded: list[str] = []
        changed = False
        for word in words:
            alternatives = _expand_first(word)
            if alternatives is None:
                return None
            changed = changed or alternatives != [word]
            expanded += alternatives
            if len(expanded) > MAX_BRACE_WORDS:
                return None
        words = expanded
        if not changed:
            return words
    return None


def _expand_first(word: str) -> list[str] | None:
    """The words of the first ``{…,…}`` in ``word`` (innermost braces first); ``[word]`` when it has none."""
    for start, char in enumerate(word):
        if char != "{":
            continue
        depth, commas = 0, list[int]()
        for end in range(start, len(word)):
            if word[end] == "{":
                depth += 1
            elif word[end] == "}":
                depth -= 1
                if depth == 0:
                    inner = word[start + 1 : end]
                    if ".." in inner and not commas:
                        return None
                    if not commas:
                        break
                    pieces, last = [], start + 1
                    for comma in commas:
                        pieces.append(word[last:comma])
                        last = comma + 1
                    pieces.append(word[last:end])
                    return [word[:start] + piece + word[end + 1 :] for piece in pieces]
            elif word[end] == "," and depth == 1:
                commas.append(end)
    return [word]
