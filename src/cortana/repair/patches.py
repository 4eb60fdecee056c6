"""Candidate patches: search/replace edits, the grammar that keeps every sample well-formed, and applying them.

A patch is one or more blocks::

    FILE: shop/tax.py
    <<<<<<< SEARCH
        return int(amount * rate)
    =======
        return round(amount * rate, 2)
    >>>>>>> REPLACE

On an engine with grammars (llama.cpp), :func:`patch_grammar` makes the model
write exactly this shape, name only the files it was shown (never a test,
unless the user asked to change tests), and copy its SEARCH lines from those
files: a run of consecutive lines, starting on a line that is not blank,
taken from the code it was shown. A small model's usual failure, a SEARCH that
is not in the file, cannot happen. Elsewhere the blocks are read from free
text (:func:`parse_patch`), and a SEARCH that does not match exactly is
matched loosely (``edit_file``'s matcher, within its limits).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cortana.tools.builtin.files import loose_edit

__all__ = [
    "Block",
    "Patch",
    "View",
    "apply_patch",
    "new_definition",
    "new_definition_grammar",
    "parse_patch",
    "patch_grammar",
    "unified_diff",
]

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
MAX_BLOCKS = 3
"""The most blocks one sample may hold."""
MAX_SEARCH_LINES = 10
"""The most lines one block's SEARCH may copy (under a grammar)."""
_BLOCK = re.compile(
    r"FILE:\s*(?P<file>[^\n]+?)\s*\n(?:```[^\n]*\n)?"
    r"<<<<<<< SEARCH\n(?P<search>.*?)\n?=======\n(?P<replace>.*?)\n?>>>>>>> REPLACE",
    re.S,
)


@dataclass(frozen=True, slots=True)
class View:
    """What of one file the model was shown: its path and the line ranges (1-based, inclusive)."""

    file: str
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Block:
    """One edit: in ``file``, ``search`` (whole lines) becomes ``replace``."""

    file: str
    search: str
    replace: str


@dataclass(frozen=True, slots=True)
class Patch:
    """A candidate: its blocks, and the files as they are once it is applied (path -> text)."""

    blocks: tuple[Block, ...]
    files: Mapping[str, str]

    def key(self) -> tuple[tuple[str, str], ...]:
        """What two samples share when they make the same change (trailing spaces and end-of-file blank lines aside)."""
        return tuple(sorted((path, _normal(text)) for path, text in self.files.items()))


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def parse_patch(text: str) -> list[Block]:
    """The blocks written in ``text`` (any prose around them is ignored)."""
    return [Block(m["file"].strip().strip("`"), m["search"], m["replace"]) for m in _BLOCK.finditer(text)]


def apply_patch(blocks: Sequence[Block], originals: Mapping[str, str]) -> Patch | str:
    """The patch ``blocks`` make of ``originals`` (path -> text), or why they cannot be applied.

    A block's SEARCH must match its file once: exactly, else loosely (spaces and quote marks aside, a skipped
    blank or comment line allowed). A block whose SEARCH is gone but whose REPLACE is there once repeats an
    edit already made, and is passed over. A block naming a file that is not in ``originals`` is refused.
    """
    files: dict[str, str] = {}
    for block in blocks:
        if block.file not in originals:
            return f"{block.file} is not one of the files that may change"
        text = files.get(block.file, originals[block.file])
        search = block.search.strip("\n")
        if not search.strip():
            return f"an empty SEARCH in {block.file}"
        replace = block.replace.strip("\n")
        count = _whole_line_count(text, search)
        if count == 1:
            text = _replace_lines(text, search, replace)
        elif count > 1:
            return f"the SEARCH text is in {block.file} {count} times; it must be once"
        elif replace.strip() and _whole_line_count(text, replace) == 1:
            continue  # the same edit again (small models repeat a block): it is made already
        else:
            loose = loose_edit(text, search, replace)
            if loose is None:
                return f"the SEARCH text is not in {block.file}"
            text = loose[0]
        files[block.file] = text
    changed = {path: text for path, text in files.items() if _normal(text) != _normal(originals[path])}
    if not changed:
        return "it changes nothing"
    return Patch(tuple(blocks), changed)


def _whole_line_count(text: str, search: str) -> int:
    lines, wanted = text.split("\n"), search.split("\n")
    return sum(lines[at : at + len(wanted)] == wanted for at in range(len(lines) - len(wanted) + 1))


def _replace_lines(text: str, search: str, replace: str) -> str:
    lines, wanted = text.split("\n"), search.split("\n")
    at = next(at for at in range(len(lines) - len(wanted) + 1) if lines[at : at + len(wanted)] == wanted)
    return "\n".join([*lines[:at], *(replace.split("\n") if replace else []), *lines[at + len(wanted) :]])


def unified_diff(originals: Mapping[str, str], patch: Patch) -> str:
    """The patch as a unified diff (``--- a/file``, ``+++ b/file``)."""
    parts: list[str] = []
    for path in sorted(patch.files):
        before = originals[path].splitlines(keepends=True)
        after = patch.files[path].splitlines(keepends=True)
        parts += difflib.unified_diff(before, after, f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in parts)


def changed_lines(originals: Mapping[str, str], patch: Patch) -> int:
    """How many lines the patch adds or removes (its size, for choosing the smaller of two)."""
    return sum(
        1
        for line in unified_diff(originals, patch).splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


# -- the grammar --------------------------------------------------------------------------------------------


def patch_grammar(
    views: Sequence[View], texts: Mapping[str, str], max_blocks: int = MAX_BLOCKS, max_search: int = MAX_SEARCH_LINES
) -> str:
    """A GBNF grammar for a patch of the ``views`` of ``texts``: well-formed blocks whose SEARCH is a run of at
    most ``max_search`` consecutive shown lines of the named file, starting on a line that is not blank.

    The bound keeps edits small: asked to add a function, the 1.5B model copied a whole file into SEARCH and
    then wrote it out again unchanged, spending its samples on nothing.
    """
    rules: list[str] = []
    blocks: list[str] = []
    for number, view in enumerate(views):
        lines = texts[view.file].splitlines()
        starts: list[str] = []
        for low, high in view.ranges:
            high = min(high, len(lines))
            for index in range(low, high + 1):
                rules.append(f"f{number}-t{index} ::= {_literal(lines[index - 1] + chr(10))}")
                for depth in range(1, max_search + 1):  # line ``index`` as the ``depth``-th of a SEARCH
                    following = f" f{number}-l{index + 1}-{depth + 1}?" if index < high and depth < max_search else ""
                    rules.append(f"f{number}-l{index}-{depth} ::= f{number}-t{index}{following}")
                if lines[index - 1].strip():
                    starts.append(f"f{number}-l{index}-1")
        if not starts:
            continue
        rules.append(f"search{number} ::= " + " | ".join(starts))
        header = _literal(f"FILE: {view.file}\n{SEARCH}\n")
        rules.append(f"block{number} ::= {header} search{number} {_literal(DIVIDER + chr(10))} replace")
        blocks.append(f"block{number}")
    if not blocks:
        raise ValueError("no lines to edit were shown")
    optional = " ".join('("\\n" block)?' for _ in range(max_blocks - 1))
    head = [
        f"root ::= block {optional}".rstrip(),
        "block ::= " + " | ".join(blocks),
        f"replace ::= rline* {_literal(REPLACE + chr(10))}",
        'rline ::= "\\n" | [^>\\n] [^\\n]* "\\n" | ">" [^>\\n] [^\\n]* "\\n"',
    ]
    return "\n".join([*head, *rules]) + "\n"


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped.replace("\t", "\\t") + '"'


def new_definition_grammar(opening: str) -> str:
    """A GBNF grammar for one whole new definition that starts ``opening`` (``def count_words``): its first line,
    then only indented or blank lines, so the answer is that definition and nothing else."""
    return (
        "\n".join(
            [
                f'root ::= {_literal(opening)} [^\\n]* "\\n" body',
                'body ::= ([ \\t] [^\\n]* "\\n")+ ("\\n" | [ \\t] [^\\n]* "\\n")*',
            ]
        )
        + "\n"
    )


def new_definition(answer: str, opening: str) -> str | None:
    """The definition starting ``opening`` in ``answer`` (under the grammar, the whole answer; elsewhere the first
    such definition, in a code fence or not), its trailing blank lines dropped; None when there is none."""
    start = answer.find(opening)
    if start < 0:
        return None
    lines = answer[start:].splitlines()
    kept = [lines[0]]
    for line in lines[1:]:
        if line.strip() and not line[:1].isspace():  # back at the left margin: the definition has ended
            break
        kept.append(line)
    code = "\n".join(kept).rstrip()
    return code if len(kept) > 1 else None
