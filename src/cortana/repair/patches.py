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

import ast
import difflib
import io
import re
import textwrap
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cortana.repair.symbols import parse_quietly
from cortana.tools.builtin.files import loose_edit

__all__ = [
    "Block",
    "Patch",
    "View",
    "apply_patch",
    "body_indent",
    "definitions",
    "definitions_grammar",
    "lines_grammar",
    "new_definition",
    "parse_patch",
    "patch_grammar",
    "reachable",
    "unified_diff",
    "without_new_comments",
]

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
MAX_BLOCKS = 3
"""The most blocks one sample may hold."""
MAX_SEARCH_LINES = 10
"""The most lines one block's SEARCH may copy (under a grammar)."""
LINE_CHARS = 160
"""The most characters of a line a model writes under a grammar (or the longest line shown, if longer): a small
model's end-of-line comment otherwise runs on, repeating itself, to the end of its token budget."""
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
    most ``max_search`` consecutive shown lines of the named file, starting on a line that is not blank, and whose
    REPLACE lines are at most ``LINE_CHARS`` long (or as long as the longest line shown).

    The bound keeps edits small: asked to add a function, the 1.5B model copied a whole file into SEARCH and
    then wrote it out again unchanged, spending its samples on nothing.
    """
    rules: list[str] = []
    blocks: list[str] = []
    longest = LINE_CHARS
    for number, view in enumerate(views):
        lines = texts[view.file].splitlines()
        starts: list[str] = []
        for low, high in view.ranges:
            high = min(high, len(lines))
            for index in range(low, high + 1):
                longest = max(longest, len(lines[index - 1]))
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
        'rline ::= "\\n" | [^>\\n] rest "\\n" | ">" [^>\\n] rest "\\n"',
        f"rest ::= [^\\n]{{0,{longest}}}",
    ]
    return "\n".join([*head, *rules]) + "\n"


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped.replace("\t", "\\t") + '"'


def definitions_grammar(
    heads: Sequence[tuple[str, str]],
    bodies: Sequence[str] = (),
    line_chars: int = LINE_CHARS,
    max_lines: Sequence[int] = (),
) -> str:
    """A GBNF grammar for whole definitions, one per ``(opening, indent)`` of ``heads`` and in that order: each
    starts ``opening`` (``def count_words``) at ``indent`` (a method's: its class's indentation and four spaces), and
    goes on with blank lines and lines indented deeper than it: by the body indentation in ``bodies`` where one is
    given for it (the definition being rewritten uses it), else by any; no line longer than ``line_chars``, and at
    most ``max_lines[n]`` lines in the n-th body where given. The answer is those definitions and nothing else: a
    model that would go on to the next definition cannot, and one that would go on writing its own tests under the
    function (the 0.5B did, to its token limit) stops at the bound."""
    if not heads:
        raise ValueError("no definitions to write")
    rules = ["root ::= " + " ".join(f"d{number}" for number in range(len(heads)))]
    for number, (opening, indent) in enumerate(heads):
        body = bodies[number] if number < len(bodies) else ""
        deeper = _literal(body) if body else f"{_literal(indent)} [ \\t]" if indent else "[ \\t]"
        more = f"{{0,{max_lines[number] - 1}}}" if number < len(max_lines) and max_lines[number] > 1 else "*"
        rules.append(f'd{number} ::= {_literal(indent + opening)} rest "\\n" b{number}')
        rules.append(f'b{number} ::= ({deeper} rest "\\n") ("\\n" | {deeper} rest "\\n"){more}')
    rules.append(f"rest ::= [^\\n]{{0,{line_chars}}}")
    return "\n".join(rules) + "\n"


def lines_grammar(indent: str, line_chars: int = LINE_CHARS, max_lines: int = 20) -> str:
    """A GBNF grammar for a few lines of code in place of others: each blank or starting with ``indent`` (the
    first not blank), at most ``max_lines``, none longer than ``line_chars`` past the indentation."""
    start = f"{_literal(indent)} " if indent else ""
    more = max(max_lines - 1, 0)
    return (
        f'root ::= {start}[^\\n] rest "\\n" ("\\n" | {start}rest "\\n"){{0,{more}}}\n'
        f"rest ::= [^\\n]{{0,{line_chars}}}\n"
    )


def body_indent(definition: str) -> str:
    """The indentation every line of ``definition``'s body starts with (its first body line's), or "" when a line
    is less indented (a string literal at the margin): then the grammar allows any."""
    lines = definition.split("\n")
    own = len(lines[0]) - len(lines[0].lstrip())
    body = [line for line in lines[1:] if line.strip()]
    if not body:
        return ""
    first = body[0][: len(body[0]) - len(body[0].lstrip())]
    if len(first) <= own or any(not line.startswith(first) for line in body):
        return ""
    return first


def definitions(answer: str, heads: Sequence[tuple[str, str]]) -> list[str] | None:
    """The definitions of ``heads`` (``(opening, indent)``) in ``answer``, in that order, each moved to its
    ``indent`` and without its trailing blank lines; None when one is missing.

    Under the grammar the answer is exactly those; elsewhere each is the first definition starting its opening
    after the one before, in a code fence or not, at whatever indentation the model wrote it.
    """
    found: list[str] = []
    at = 0
    for opening, indent in heads:
        one = _definition_at(answer, opening, indent, at)
        if one is None:
            return None
        code, at = one
        found.append(code)
    return found


def new_definition(answer: str, opening: str, indent: str = "") -> str | None:
    """The one definition starting ``opening`` in ``answer``, at ``indent`` (see :func:`definitions`)."""
    found = definitions(answer, [(opening, indent)])
    return found[0] if found else None


def _definition_at(answer: str, opening: str, indent: str, start: int) -> tuple[str, int] | None:
    """The definition starting ``opening`` in ``answer`` at or after ``start``, moved to ``indent``, and where it
    ends."""
    found = re.compile(rf"^([ \t]*){re.escape(opening)}\b", re.M).search(answer, start)
    if found is None:
        return None
    written = found[1]
    lines = answer[found.start() :].split("\n")
    kept = [lines[0]]
    for line in lines[1:]:
        if line.strip() and (not line.startswith(written) or not line[len(written) : len(written) + 1].isspace()):
            break  # back at the definition's own margin or left of it: the definition has ended
        kept.append(line)
    while len(kept) > 1 and not kept[-1].strip():
        kept.pop()
    if len(kept) < 2:
        return None
    end = found.start() + len("\n".join(kept))
    moved = [indent + line[len(written) :] if line.strip() else "" for line in kept]
    return "\n".join(moved), end


def reachable(code: str) -> str:
    """``code`` (one definition) without what follows a ``return`` or ``raise`` of its own body: a small model that
    goes on after its function (its own asserts, an example, comments, a half-written helper) writes it there,
    where nothing runs it. When the whole does not parse, the longest part of it up to a blank line that does is
    taken (what follows was cut off or is broken); code none of which parses is returned as it is."""
    lines = code.split("\n")
    definition = _function(code)
    if definition is None:
        cuts = [n for n in range(len(lines) - 1, 0, -1) if not lines[n].strip()][:_MOST_CUTS]
        for cut in cuts:
            definition = _function("\n".join(lines[:cut]))
            if definition is not None:
                break
        else:
            return code
    for statement in definition.body[:-1]:
        if isinstance(statement, ast.Return | ast.Raise) and statement.end_lineno is not None:
            return "\n".join(lines[: statement.end_lineno])
    last = definition.body[-1].end_lineno if definition.body else None
    return "\n".join(lines[:last]) if last is not None else code


_MOST_CUTS = 8
"""The blank lines :func:`reachable` tries cutting at, from the end."""


def _function(code: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function ``code`` starts with, when it parses."""
    try:
        tree = parse_quietly(textwrap.dedent(code))
    except (SyntaxError, ValueError, RecursionError):
        return None
    first = tree.body[0] if tree.body else None
    return first if isinstance(first, ast.FunctionDef | ast.AsyncFunctionDef) else None


def without_new_comments(code: str, old: str) -> str:
    """``code`` without the end-of-line comments it adds to what ``old`` had (``# Changed to round``): a small
    model narrates its change there, and the user's file is no place for it. Whole-line comments, and comments
    ``old`` has, stay; code that does not tokenize is returned as it is."""
    known = {line.strip() for line in old.splitlines()}
    lines = code.split("\n")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(textwrap.dedent(code) + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        row = token.start[0] - 1
        line = lines[row] if row < len(lines) else ""
        if line.strip() in known or line.strip().startswith("#"):
            continue
        cut = line.rfind(token.string)
        if cut > 0 and line[:cut].strip():
            lines[row] = line[:cut].rstrip()
    return "\n".join(lines)
