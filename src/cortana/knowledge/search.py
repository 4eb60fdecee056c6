"""The workspace lines a question's words appear on, in that turn's context.

Asked "how many times does fetch retry a failed request by default?", the
bundled 1.5B model answered "3" without looking: the answer, ``MAX_RETRIES =
4``, sat in a file the question does not name. :class:`PromptSearch` searches
the workspace for the distinctive words of a message (names, and words of four
letters or more that are not common English or the vocabulary of any code
question: "function", "file", "default"...) and puts the best lines, as
``path:line: text``, into the turn's ``<context>``, so the model starts from
where the answer is (as data: the run escapes every context block).
A message that names a file (:class:`NamedFiles` shows
those) or has no distinctive word gets no search.

Bounded: at most ``MAX_FILES`` files of up to ``MAX_FILE_BYTES`` each, and
``MAX_SCANNED_BYTES`` in all, are searched (``.gitignore`` is respected; binary
files and links out of the workspace are skipped), and at most ``max_lines``
lines are shown, each cut at ``MAX_LINE_CHARS``. Words are matched as the
starts of words (``retry`` finds ``MAX_RETRIES``), case-insensitively; a line
scores by the rarer words it holds.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass
from pathlib import Path

from cortana.agent.extensions import TurnExtension
from cortana.knowledge.files import NamedFiles, named_paths
from cortana.messages import ThreadRef
from cortana.tools.builtin.files import searchable_text
from cortana.tools.builtin.workspace import Workspace

__all__ = ["MAX_FILES", "PromptSearch", "search_words"]

MAX_FILES = 2_000
MAX_FILE_BYTES = 512 << 10
MAX_SCANNED_BYTES = 16 << 20
MAX_LINE_CHARS = 200
MAX_WORDS = 8

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMON = frozenset(
    """
    about above after again against also answer another anything because been before being below between both
    could does doing done down during each either else even every from have having here into just know like
    longer made make many more most much must need only other over please really same should show some such
    tell than that their them then there these they thing things this those through under until very want what
    when where which while will with within without would your yours also always never still
    function functions method methods class classes file files folder project code module modules value values
    default defaults return returns returned call calls called number numbers line lines work works working
    change changes changed right wrong exactly defined define defines used uses using name names named time times
    """.split()  # noqa: SIM905 - a word list reads better as text than as 200 quoted strings
)
"""Words too common in questions about code to point anywhere."""
_SUFFIXES = ("ies", "ied", "ing", "ed", "es", "s", "y")


def search_words(prompt: str) -> list[str]:
    """The distinctive words of ``prompt``, as lower-case stems, in order, each once (at most ``MAX_WORDS``)."""
    found: list[str] = []
    for word in _WORD.findall(prompt):
        lower = word.lower()
        if len(lower) < 4 or lower in _COMMON:
            continue
        stem = _stem(lower) if word.islower() and "_" not in word else lower
        if stem not in found:
            found.append(stem)
        if len(found) >= MAX_WORDS:
            break
    return found


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True, slots=True)
class _Hit:
    path: str
    number: int
    text: str
    words: frozenset[str]


class PromptSearch(TurnExtension):
    """A :class:`~cortana.agent.extensions.TurnExtension`: the lines a message's distinctive words are on.

    Args:
        workspace: the folder (or the tools' :class:`Workspace`) to search.
        max_lines: the most lines shown for one message.
    """

    name = "prompt_search"
    looks_up_workspace = True  # left out of a turn the tool judge finds no tool for

    def __init__(self, workspace: Path | str | Workspace, *, max_lines: int = 12) -> None:
        self.space = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.max_lines = max(1, max_lines)
        self._named = NamedFiles(self.space)

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """The best lines for ``prompt``'s words, or ``None`` (a file is named, no word to search, nothing found)."""
        words = search_words(prompt)
        if not words:
            return None
        return await asyncio.to_thread(self._block, prompt, words)

    def _block(self, prompt: str, words: list[str]) -> str | None:
        if any(self._named.find(word) is not None for word in named_paths(prompt)):
            return None  # the named files are shown whole
        hits = self.search(words)
        if not hits:
            return None
        rows = "\n".join(f"{hit.path}:{hit.number}: {hit.text}" for hit in hits)
        return f"Lines of this workspace with words of this message ({', '.join(words)}):\n{rows}"

    def search(self, words: list[str]) -> list[_Hit]:
        """The best lines for ``words``, in file and line order (blocking: it reads files)."""
        pattern = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, words)) + ")", re.IGNORECASE)
        hits: list[_Hit] = []
        scanned = 0
        for count, path in enumerate(self.space.files(self.space.root)):
            if count >= MAX_FILES or scanned > MAX_SCANNED_BYTES:
                break
            text = self._text(path)
            if text is None:
                continue
            scanned += len(text)
            relative = self.space.relative(path)
            for number, line in enumerate(text.splitlines(), 1):
                found = {match.lower() for match in pattern.findall(line)}
                if found:
                    hits.append(_Hit(relative, number, line.strip()[:MAX_LINE_CHARS], frozenset(found)))
        if not hits:
            return []
        spread = {word: sum(word in hit.words for hit in hits) for word in words}
        weight = {word: 1 / math.log(2 + count) for word, count in spread.items()}
        best = sorted(hits, key=lambda hit: -sum(weight.get(word, 0) for word in hit.words))[: self.max_lines]
        return sorted(best, key=lambda hit: (hit.path, hit.number))

    def _text(self, path: Path) -> str | None:
        text = searchable_text(self.space, path, max_bytes=MAX_FILE_BYTES)
        return None if text is None or "\x00" in text[:8192] else text
