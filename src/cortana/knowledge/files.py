"""The files a message names, as they are now, in that turn's context.

Small models edit files they have not read: asked to fix ``average()`` in
``stats/summary.py``, the bundled 1.5B model wrote an ``edit_file`` call whose
``old_text`` was a line of the code-graph block, not of the file, and gave up
when it failed. A user who names a file wants the model to look at it, so
:class:`NamedFiles` puts the text of every workspace file the message names
(``stats/summary.py``, or a bare ``calc.py`` that only one file in the
workspace is called) into the ``<context>`` block of that turn, exactly as it
is on disk, so the model can copy ``old_text`` from it.

Bounds: at most ``max_files`` files, each shown up to ``max_chars`` characters
(longer ones are cut with a note to use ``read_file``), binary files, files
outside the workspace and anything that is not a regular file are skipped,
and the workspace is searched for a bare name only as far as
``MAX_SCANNED_FILES`` files. The text is shown as data: the run escapes every
context block (``cortana.prompts.as_data``), so a ``</context>`` in a file
cannot close the block.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from pathlib import Path

from cortana.agent.extensions import TurnExtension
from cortana.errors import ToolError
from cortana.messages import ThreadRef
from cortana.tools.builtin.workspace import Workspace

__all__ = ["MAX_SCANNED_FILES", "NamedFiles", "named_paths"]

MAX_SCANNED_FILES = 5_000
"""The most workspace files looked at to find a bare file name (``calc.py``)."""

_PATH = re.compile(r"(?:\.{1,2}/)?(?:[\w\-.]+/)*[\w\-]+\.[A-Za-z0-9]{1,8}")
"""A relative path or file name with an extension: ``stats/summary.py``, ``./README.md``, ``calc.py``."""
_NOT_FILES = re.compile(r"^(?:\d+(?:\.\d+)*|[a-z]\.[a-z]|e\.g|i\.e|etc)$", re.I)
"""Words shaped like file names that are not: version numbers, abbreviations."""
_EDGES = "`'\"()[]{}<>,;:!?*"


def named_paths(prompt: str) -> list[str]:
    """The path-like words of ``prompt`` in order, each once (URLs, addresses and numbers left out)."""
    found: list[str] = []
    for token in prompt.split():
        if "://" in token or "@" in token:
            continue
        word = re.sub(r":\d+(?::\d+)?$", "", token.strip(_EDGES)).rstrip(".").strip(_EDGES)  # calc.py:12 -> calc.py
        if _PATH.fullmatch(word) and not _NOT_FILES.match(word) and word not in found:
            found.append(word)
    return found


class NamedFiles(TurnExtension):
    """A :class:`~cortana.agent.extensions.TurnExtension` that shows the model the files a message names.

    Args:
        workspace: the folder (or the tools' :class:`Workspace`) whose files may be shown.
        max_files: the most files shown for one message.
        max_chars: the most characters of one file shown.
    """

    name = "named_files"

    def __init__(self, workspace: Path | str | Workspace, *, max_files: int = 3, max_chars: int = 2_500) -> None:
        self.space = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.max_files = max(1, max_files)
        self.max_chars = max(200, max_chars)

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """The named files' text, or ``None`` when the message names none that exists."""
        words = named_paths(prompt)
        if not words:
            return None
        return await asyncio.to_thread(self.block, words)

    def block(self, words: Sequence[str]) -> str | None:
        """The context block for the path-like ``words`` (blocking: it reads files)."""
        shown: list[str] = []
        seen: set[Path] = set()
        for word in words:
            path = self.find(word)
            if path is None or path in seen:
                continue
            text = self._text(path)
            if text is None:
                continue
            seen.add(path)
            relative = self.space.relative(path)
            shown.append(f"--- {relative} ---\n{text}\n--- end of {relative} ---")
            if len(shown) >= self.max_files:
                break
        if not shown:
            return None
        return "Files named in this message, as they are now (copy old_text for edit_file from here):\n" + "\n".join(
            shown
        )

    def find(self, word: str) -> Path | None:
        """The workspace file ``word`` names: the path itself, or the one file of that name (none if several)."""
        try:
            direct = self.space.resolve(word)
        except ToolError:
            return None  # outside the workspace: never shown
        if direct.is_file():
            return direct
        if "/" in word:
            return None
        matches: list[Path] = []
        for count, path in enumerate(self.space.files(self.space.root)):
            if count >= MAX_SCANNED_FILES:
                break
            if path.name == word:
                matches.append(path)
                if len(matches) > 1:
                    return None  # ambiguous: the model can ask list_files
        return matches[0] if matches else None

    def _text(self, path: Path) -> str | None:
        """The file's text, bounded; ``None`` for what is not a readable text file inside the workspace."""
        try:
            real = self.space.resolve(os.fspath(path))  # a symlink must land inside the workspace
            fd, _ = self.space.open_regular(real, self.space.relative(path))
        except ToolError:
            return None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(self.max_chars * 4 + 1)
        if b"\x00" in data[:8192]:
            return None  # binary
        text = data.decode("utf-8", errors="replace")
        if len(text) > self.max_chars:
            cut = text.rfind("\n", 0, self.max_chars)
            lines = text[: cut if cut > 0 else self.max_chars].count("\n") + 1
            text = (
                text[: cut if cut > 0 else self.max_chars]
                + f"\n[... cut after line {lines}; read_file with start_line={lines + 1} shows the rest]"
            )
        return text.rstrip("\n")
