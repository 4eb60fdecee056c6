"""The formats a sample is written in, one class each: its instruction, its grammar, and how its answer becomes a
patch.

As aider's coders each own an edit format, each coder here owns one way of
asking a small model for a change:

- :class:`Rewrite`: definitions written again whole, each put in place of the
  old one (a small model writes a function far better than search/replace
  edits of it); given the calls the failing tests made of it, it is the
  feedback rewrite;
- :class:`Lines`: the few most suspect lines of a long function written
  again (``windows.py`` picks them), the rest of it kept: a small model
  writes eight lines in a fraction of the time it takes to write forty, and
  cannot break the ones it was not asked for;
- :class:`Edits`: search/replace blocks on the code shown, anywhere in it or
  in one location, from the code as it was or on top of an attempt;
- :class:`NewDefinition`: a function or class the tests import and the code
  lacks, written whole and added to its file.

On llama.cpp each is written under its grammar (``patches.py``), so every
sample is well-formed and applies. A coder never runs anything: the workflow
samples, the coder reads, the tests judge.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from cortana.prompts import as_data, prompt_text
from cortana.repair.patches import (
    LINE_CHARS,
    Block,
    Patch,
    View,
    apply_patch,
    body_indent,
    definitions,
    definitions_grammar,
    lines_grammar,
    new_definition,
    parse_patch,
    patch_grammar,
    reachable,
    without_new_comments,
)
from cortana.repair.symbols import Symbol, SymbolIndex, parse_quietly
from cortana.repair.testrun import is_test_file

__all__ = [
    "ANYWHERE",
    "EDIT_FORMAT",
    "REWRITE_LINES",
    "Coder",
    "Edits",
    "Lines",
    "NewDefinition",
    "Rewrite",
    "SampleKind",
    "combined",
    "parses",
    "patched",
    "rewritable",
]

REWRITE_LINES = 80
"""The longest definition the model is asked to write again whole (a longer one gets edits only)."""
ANYWHERE = "Fix it with the smallest change. It may take edits in more than one place."
EDIT_FORMAT = (
    "Write each edit like the example: FILE and the path, SEARCH and lines copied exactly from the code above, then "
    "REPLACE and the lines that take their place."
)


class SampleKind(StrEnum):
    """What a sample asks for."""

    NEW = "new"
    REWRITE = "rewrite"
    LINES = "lines"
    EDITS = "edits"


class Coder(ABC):
    """One format of sample (see the module docstring)."""

    kind: SampleKind

    @abstractmethod
    def instruction(self) -> str:
        """The last part of the prompt: what to write, and how."""

    @abstractmethod
    def grammar(self) -> str | None:
        """The GBNF grammar an answer is written under (None: none can be made; the sample is skipped)."""

    def tokens(self) -> int | None:
        """The most tokens an answer may have (None: the workflow's ``patch_tokens``)."""
        return None

    @abstractmethod
    def patch(self, answer: str, on: Patch | None, originals: Mapping[str, str]) -> Patch | None:
        """The patch ``answer`` makes of ``originals`` (on top of the patch ``on``, an attempt it builds on), or None
        when it does not apply, changes nothing or leaves a Python file that does not parse."""


@dataclass
class Rewrite(Coder):
    """Definitions written again whole, in this order, each in place of the one in its file (its decorators kept).

    Asked for search/replace edits, a small model often copies one line as SEARCH and writes the function again
    after it, so the old body stays below the new one; asked for the function itself, it writes what it writes
    best, and where it goes is known. End-of-line comments it adds (``# Changed to round``) go.

    Attributes:
        symbols: the definitions (in the index the sample is shown, the attempt's when it builds on one).
        index: that index.
        lead: what comes before the instruction (the feedback of the tests, a failed attempt).
    """

    symbols: Sequence[Symbol]
    index: SymbolIndex
    lead: str = ""
    kind = SampleKind.REWRITE

    def __post_init__(self) -> None:
        self._heads = [_definition_head(symbol, self.index) for symbol in self.symbols]
        self._olds: list[str] = []
        for head, symbol in zip(self._heads, self.symbols, strict=True):
            lines = self.index.texts.get(symbol.file, "").split("\n")
            self._olds.append("\n".join(lines[head[0] - 1 : symbol.end]) if head else "")

    def instruction(self) -> str:
        asked = _rewrite_instruction(self.symbols)
        return f"{self.lead}\n\n{asked}" if self.lead else asked

    def grammar(self) -> str | None:
        if any(head is None for head in self._heads):
            return None
        wanted = [(head[2], head[1]) for head in self._heads if head is not None]
        bodies = [body_indent(old) for old in self._olds]
        longest = max([LINE_CHARS, *(len(line) for old in self._olds for line in old.splitlines())])
        most = [2 * old.count("\n") + 6 for old in self._olds]  # room to grow, not to go on writing tests
        return definitions_grammar(wanted, bodies, longest, most)

    def tokens(self) -> int | None:
        return sum(len(old) for old in self._olds) // 2 + 120  # about twice the old code's tokens, and a margin

    def patch(self, answer: str, on: Patch | None, originals: Mapping[str, str]) -> Patch | None:
        if any(head is None for head in self._heads):
            return None
        wanted = [(head[2], head[1]) for head in self._heads if head is not None]
        codes = definitions(answer, wanted)
        if codes is None:
            return None
        blocks = [
            Block(symbol.file, old, without_new_comments(reachable(code), old))
            for symbol, old, code in zip(self.symbols, self._olds, codes, strict=True)
            if reachable(code).strip() != old.strip()
        ]
        return patched(blocks, on, originals)


@dataclass
class Lines(Coder):
    """Lines ``first``-``last`` of ``symbol`` (a long function) written again, put in their place, the rest of the
    function as it was; end-of-line comments the model adds go.

    Under the grammar the answer is lines at the window's indentation or deeper (at most twice as many as asked
    for, and four more: room for a missing case); elsewhere, code fences aside, lines written at the margin are
    moved to it.

    Attributes:
        symbol: the function (in the index the sample is shown).
        index: that index.
        first, last: the window (1-based, inclusive; ``windows.suspect_windows``).
        lead: what comes before the instruction (the feedback of the tests, a failed attempt).
    """

    symbol: Symbol
    index: SymbolIndex
    first: int
    last: int
    lead: str = ""
    kind = SampleKind.LINES

    def __post_init__(self) -> None:
        lines = self.index.texts.get(self.symbol.file, "").split("\n")
        self._lines = lines
        self._old = lines[self.first - 1 : self.last]
        written = [line for line in self._old if line.strip()]
        self._indent = min((line[: len(line) - len(line.lstrip())] for line in written), key=len, default="")

    def instruction(self) -> str:
        kind = "method" if self.symbol.kind == "method" else "function"
        asked = prompt_text("repair_lines").format(
            count=len(self._old), kind=kind, name=as_data(self.symbol.qualname), file=as_data(self.symbol.file),
            lines=as_data("\n".join(self._old)),
        )  # fmt: skip
        return f"{self.lead}\n\n{asked}" if self.lead else asked

    def grammar(self) -> str | None:
        if not self._old:
            return None
        longest = max([LINE_CHARS, *(len(line) for line in self._old)])
        most = 2 * len(self._old) + 4
        return lines_grammar(self._indent, longest, most)

    def tokens(self) -> int | None:
        return 2 * sum(len(line) for line in self._old) // 3 + 60  # about twice the old lines' tokens

    def patch(self, answer: str, on: Patch | None, originals: Mapping[str, str]) -> Patch | None:
        written = _answer_lines(answer, self._indent)
        if not written or written == [line.rstrip() for line in self._old]:
            return None
        text = "\n" + "\n".join(self._lines) + "\n"
        low = self.first  # the block starts a line or more higher where the window's lines are in the file twice
        while low > self.symbol.start and text.count("\n" + "\n".join(self._lines[low - 1 : self.last]) + "\n") > 1:
            low -= 1
        old = "\n".join(self._lines[low - 1 : self.last])
        new = "\n".join([*self._lines[low - 1 : self.first - 1], *written])
        return patched([Block(self.symbol.file, old, without_new_comments(new, old))], on, originals)


def _answer_lines(answer: str, indent: str) -> list[str]:
    """The lines of ``answer`` (code fences and trailing blank lines left out), moved to ``indent`` when the model
    wrote them at a margin of its own."""
    lines = [line.rstrip() for line in answer.split("\n") if not line.lstrip().startswith("```")]
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    written = [line for line in lines if line.strip()]
    if not written or all(line.startswith(indent) for line in written):
        return lines
    margin = min((line[: len(line) - len(line.lstrip())] for line in written), key=len)
    return [indent + line[len(margin) :] if line.strip() else "" for line in lines]


@dataclass
class Edits(Coder):
    """Search/replace blocks on the code shown (``views`` of ``index``), under the grammar that makes each SEARCH a
    run of lines copied from it.

    Attributes:
        views: what of each file the model was shown (it may edit only that).
        index: the code it was shown (the attempt's when it builds on one).
        lead: what it is asked (``ANYWHERE``, one location, the edits still needed on top of an attempt…).
        tests_may_change: the user asked for the tests to change; else a block on a test file is dropped.
    """

    views: Sequence[View]
    index: SymbolIndex
    lead: str = ANYWHERE
    tests_may_change: bool = False
    kind = SampleKind.EDITS

    def instruction(self) -> str:
        return f"{self.lead}\n\n{EDIT_FORMAT}"

    def grammar(self) -> str | None:
        try:
            return patch_grammar(self.views, self.index.texts)
        except ValueError:
            return None

    def patch(self, answer: str, on: Patch | None, originals: Mapping[str, str]) -> Patch | None:
        blocks = [b for b in parse_patch(answer) if self.tests_may_change or not is_test_file(b.file)]
        return patched(blocks, on, originals)


@dataclass
class NewDefinition(Coder):
    """A definition the code lacks (``name`` in ``file``), written whole and added at the end of the file."""

    file: str
    name: str
    kind = SampleKind.NEW

    @property
    def opening(self) -> str:
        return f"{'class' if self.name[:1].isupper() else 'def'} {self.name}"

    def instruction(self) -> str:
        kind = "class" if self.name[:1].isupper() else "function"
        return prompt_text("repair_new").format(kind=kind, name=as_data(self.name), file=as_data(self.file))

    def grammar(self) -> str | None:
        return definitions_grammar([(self.opening, "")], max_lines=[60])

    def patch(self, answer: str, on: Patch | None, originals: Mapping[str, str]) -> Patch | None:
        code = new_definition(answer, self.opening)
        if code is None:
            return None
        code = reachable(code)
        base = {**originals, **(on.files if on else {})}
        original = base.get(self.file, "")
        text = original.rstrip("\n") + "\n\n\n" + code + "\n"
        added = Patch((Block(self.file, "", code),), {self.file: text})
        if on is not None:
            added = Patch((*on.blocks, *added.blocks), {**on.files, **added.files})
        return added if parses(added) else None


def patched(blocks: Sequence[Block], on: Patch | None, originals: Mapping[str, str]) -> Patch | None:
    """The patch ``blocks`` make on the code as it is with the patch ``on`` (None: as it was), as it changes
    ``originals``; None when they do not apply, change nothing, or leave a Python file that does not parse."""
    base = {**originals, **(on.files if on else {})}
    applied = apply_patch(blocks, base) if blocks else "no edits"
    if isinstance(applied, str):
        return None
    if on is not None:  # the new edits, and the attempt they build on
        applied = Patch((*on.blocks, *applied.blocks), {**on.files, **applied.files})
    patch = Patch(applied.blocks, {path: text for path, text in applied.files.items() if text != originals.get(path)})
    return patch if patch.files and parses(patch) else None


def combined(first: Patch, second: Patch, originals: Mapping[str, str]) -> Patch | None:
    """``first`` and ``second`` made together on ``originals``: one patch with the blocks of both (those they
    share once), or None when they edit the same lines, when the result does not parse, or when it is no more
    than one of them."""
    blocks = [*first.blocks, *(block for block in second.blocks if block not in first.blocks)]
    applied = apply_patch(blocks, originals)
    if isinstance(applied, str):
        return None
    patch = Patch(applied.blocks, {path: text for path, text in applied.files.items() if text != originals.get(path)})
    if patch.key() in (first.key(), second.key()) or not parses(patch):
        return None
    return patch


def parses(patch: Patch) -> bool:
    """Whether every Python file the patch writes still parses."""
    for path, text in patch.files.items():
        if path.endswith(".py"):
            try:
                parse_quietly(text)
            except (SyntaxError, ValueError, RecursionError):
                return False
    return True


def rewritable(symbol: Symbol | None) -> bool:
    """Whether ``symbol`` is a function or method short enough to be written again whole."""
    return symbol is not None and symbol.kind != "class" and symbol.end - symbol.start < REWRITE_LINES


def _rewrite_instruction(symbols: Sequence[Symbol]) -> str:
    """Ask for ``symbols`` written again whole, in this order."""
    if len(symbols) == 1:
        symbol = symbols[0]
        kind = "method" if symbol.kind == "method" else "function"
        name, file = as_data(symbol.qualname), as_data(symbol.file)  # a repository's names: never template tokens
        return prompt_text("repair_rewrite").format(kind=kind, name=name, file=file)
    named = ", then ".join(f"{symbol.qualname} of {symbol.file}" for symbol in symbols)
    return prompt_text("repair_rewrite_all").format(names=as_data(named))


def _definition_head(symbol: Symbol, index: SymbolIndex) -> tuple[int, str, str] | None:
    """Where ``symbol``'s own first line is (past its decorators), its indentation, and how it opens
    (``async def fetch``); None when it is not found."""
    lines = index.texts.get(symbol.file, "").split("\n")
    pattern = re.compile(rf"([ \t]*)((?:async\s+)?def\s+{re.escape(symbol.name)})\b")
    for number in range(symbol.start, min(symbol.end, len(lines)) + 1):
        found = pattern.match(lines[number - 1])
        if found is not None:
            return number, found[1], found[2]
    return None
