"""Small changes of the blamed functions, made without a model and judged by the tests.

Many bugs are one token away from their fix: ``+`` for ``-``, ``<`` for
``<=``, ``n`` for ``n + 1``, a default of ``"_"`` where the tests want
``"-"``. The bundled 0.5B model, shown such a function and told
``slugify(title='Hello World') returned 'hello_world'``, wrote it again 33
times keeping ``sep: str = "_"``. Program repair by mutation (PraPR, Ghanbari
et al. 2019: a third of Defects4J's fixed bugs fell to single mutations)
tries each such change and lets the tests decide: a test run each, no model
call, so a mutant costs about what the test run costs, a tenth of a sample.

:func:`mutants` makes, for one function, in this order:

1. **Strings the tests ask for**: a string literal ``v`` of the function that,
   replaced by some ``w``, turns what a failing test got into what it
   expected (``'hello_world'`` -> ``'hello-world'``: ``"_"`` -> ``"-"``). Read
   from the failing assertions, so these come first.
2. **Operators** (the classic mutation operators): arithmetic ``+ -``,
   ``* /``, ``/ //``; comparisons ``< <=``, ``> >=``, ``== !=``; ``and or``;
   ``+= -=``.
3. **Boundaries**: an integer literal ``n`` as ``n + 1`` and ``n - 1``, and
   the last argument of ``range(...)`` and the bounds of a slice with
   ``+ 1`` or ``- 1`` after them.
4. **Neighbour calls**: ``int``/``round``, ``floor``/``ceil``,
   ``min``/``max``, ``any``/``all``, ``True``/``False``.

The docstring is never changed. Each mutant is a whole-function replacement
(a :class:`~cortana.repair.patches.Block`) that still parses; the workflow
tries at most ``fix.mutants`` of them, for at most ``BUDGET_SHARE`` of its
budget.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cortana.repair.patches import Block
from cortana.repair.symbols import Symbol, SymbolIndex, parse_quietly
from cortana.repair.testrun import Failure, TestReport

__all__ = ["BUDGET_SHARE", "MOST_FUNCTIONS", "Mutant", "mutants", "ranked_mutants", "worth_mutating"]

BUDGET_SHARE = 0.15
"""The most of a fix's time budget the small changes take (a test run each): on a project whose tests take
seconds they stop early and leave the rest to the samples."""
MOST_FUNCTIONS = 12
"""The most functions whose small changes are made, the most suspect first (a line spectrum ranks them)."""

_OPERATORS: dict[str, tuple[str, ...]] = {
    "+": ("-",),
    "-": ("+",),
    "*": ("/",),
    "/": ("*", "//"),
    "//": ("/", "%"),
    "%": ("//",),
    "<": ("<=", ">"),
    "<=": ("<", ">="),
    ">": (">=", "<"),
    ">=": (">", "<="),
    "==": ("!=",),
    "!=": ("==",),
    "+=": ("-=",),
    "-=": ("+=",),
}
_NAMES: dict[str, tuple[str, ...]] = {
    "and": ("or",),
    "or": ("and",),
    "int": ("round",),
    "round": ("int",),
    "floor": ("ceil",),
    "ceil": ("floor",),
    "min": ("max",),
    "max": ("min",),
    "any": ("all",),
    "all": ("any",),
    "True": ("False",),
    "False": ("True",),
}
_STRING_EQUALITY = re.compile(r"assert (?P<got>'[^'\n]*'|\"[^\"\n]*\") == (?P<wanted>'[^'\n]*'|\"[^\"\n]*\")")
_MISSING = frozenset({"NotImplementedError", "SystemExit", "ImportError", "ModuleNotFoundError"})
_ARGUMENTS = re.compile(r"\(\) (?:got an unexpected keyword|missing \d+ required|takes \d+)")
_MOST_LONGER = 3
"""How much longer than the literal it replaces a string from a failing assertion may be."""


@dataclass(frozen=True, slots=True)
class Mutant:
    """One small change of a function.

    Attributes:
        block: the edit (the whole definition, changed in one place).
        what: what changed, for progress (``'"_" -> '-' on line 6'``).
        asked: a failing assertion asks for it (a string that turns what the test got into what it expected).
        line: the line of the file it changes (its first).
    """

    block: Block
    what: str
    asked: bool = False
    line: int = 0


def worth_mutating(failing: Sequence[Failure]) -> bool:
    """Whether some failing test says the code ran and got something wrong (an assertion on a value, an error the
    code raised), rather than that a piece is missing: a stub's ``NotImplementedError``, argparse's ``SystemExit``
    on a flag it does not know yet, an import of what does not exist, a call with arguments a function does not
    take yet. A missing piece is not one token away, and the small changes would only spend the samples' time."""
    for failure in failing:
        first = failure.message.strip().splitlines()[0] if failure.message.strip() else ""
        kind = first.split(":", 1)[0].strip()
        if kind in _MISSING or (kind == "TypeError" and _ARGUMENTS.search(first)):
            continue
        if first:
            return True
    return False


def mutants(symbol: Symbol, index: SymbolIndex, failing: Sequence[Failure] = ()) -> list[Mutant]:
    """The single-token changes of ``symbol`` that still parse, strings the failing tests ask for first."""
    original = index.source(symbol)
    if not original.strip():
        return []
    indent = original[: len(original) - len(original.lstrip(" \t"))]
    source = textwrap.dedent(original)
    lines = source.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    docstring = _docstring_lines(source)
    wanted = _string_fixes(failing)
    made: list[Mutant] = []
    seen: set[str] = {source}
    strings = list(_string_edits(source, docstring, wanted))
    edits = [*strings, *_token_edits(source, docstring), *_boundary_edits(source), *_tree_edits(source, docstring)]
    asked = len(strings)
    for number, ((row, column), (end_row, end_column), replacement, what) in enumerate(edits):
        start, end = offsets[row - 1] + column, offsets[end_row - 1] + end_column
        changed = source[:start] + replacement + source[end:]
        if changed in seen or not _parses(changed):
            continue
        seen.add(changed)
        written = textwrap.indent(changed, indent) if indent else changed
        at = symbol.start + row - 1
        made.append(Mutant(Block(symbol.file, original, written), f"{what} on line {at}", number < asked, at))
    return made


def ranked_mutants(
    index: SymbolIndex, spectrum: TestReport | None, shown: Sequence[Symbol], failing: Sequence[Failure] = ()
) -> list[Mutant]:
    """The small changes worth trying, most suspect first, across every function the failing tests ran.

    With a line spectrum (a traced pytest run: :attr:`TestReport.lines`), the functions are those holding a line
    a failing test ran (the most suspect :data:`MOST_FUNCTIONS`, ``shown`` among them), each change is ranked by
    its line's suspicion (Ochiai; a default value in the signature by the function's call), and a change on a line
    no failing test ran is left out: it cannot change what they do. Strings a failing assertion asks for come
    first. Without one, the changes of ``shown``, in their order."""
    if spectrum is None or not spectrum.lines:
        made = [mutant for symbol in shown for mutant in mutants(symbol, index, failing)]
        made.sort(key=lambda mutant: not mutant.asked)
        return made
    by_file: dict[str, dict[int, float]] = {}
    for file, line in spectrum.lines:
        by_file.setdefault(file, {})[line] = spectrum.suspicion(file, line)
    scored: list[tuple[float, Symbol]] = []
    for symbol in index.symbols:
        lines = by_file.get(symbol.file)
        if not lines or symbol.kind == "class" or symbol.is_test:
            continue
        score = max((value for line, value in lines.items() if symbol.start <= line <= symbol.end), default=0.0)
        if score > 0 or symbol in shown:
            scored.append((score, symbol))
    scored.sort(key=lambda pair: (-pair[0], pair[1] not in shown))
    ranked: list[tuple[bool, float, int, int, Mutant]] = []
    for rank, (_, symbol) in enumerate(scored[:MOST_FUNCTIONS]):
        lines = by_file.get(symbol.file, {})
        called = max((lines.get(line, 0.0) for line in range(symbol.start - 5, symbol.start + 1)), default=0.0)
        first_ran = min((line for line in lines if symbol.start < line <= symbol.end), default=symbol.end + 1)
        for order, mutant in enumerate(mutants(symbol, index, failing)):
            score = lines.get(mutant.line, 0.0) or (called if mutant.line < first_ran else 0.0)
            if score <= 0 and not mutant.asked:
                continue
            ranked.append((not mutant.asked, -score, rank, order, mutant))
    ranked.sort(key=lambda entry: entry[:4])
    unique: dict[tuple[str, int, str], Mutant] = {}  # a method is also inside its class: the same change once
    for *_, mutant in ranked:
        unique.setdefault((mutant.block.file, mutant.line, mutant.what), mutant)
    return list(unique.values())


_Edit = tuple[tuple[int, int], tuple[int, int], str, str]


def _string_fixes(failing: Sequence[Failure]) -> list[tuple[str, str]]:
    """(got, expected) string pairs of the failing assertions (``assert 'hello_world' == 'hello-world'``), each
    both ways round."""
    pairs: list[tuple[str, str]] = []
    for failure in failing:
        for found in _STRING_EQUALITY.finditer(failure.message):
            try:
                got, expected = ast.literal_eval(found["got"]), ast.literal_eval(found["wanted"])
            except (ValueError, SyntaxError):
                continue
            if isinstance(got, str) and isinstance(expected, str):
                # which side is what the code gave is the test's to say (`assert expected == f(x)` is common)
                for pair in ((got, expected), (expected, got)):
                    if pair not in pairs:
                        pairs.append(pair)
    return pairs


def _string_edits(source: str, docstring: set[int], wanted: list[tuple[str, str]]) -> Iterator[_Edit]:
    """A string literal ``v`` replaced by ``w`` where ``got.replace(v, w) == expected`` for a failing assertion."""
    if not wanted:
        return
    for token in _tokens(source):
        if token.type != tokenize.STRING or token.start[0] in docstring:
            continue
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):
            continue
        if not isinstance(value, str) or not value:
            continue
        for got, expected in wanted:
            at = got.find(value)
            if at < 0:
                continue
            for size in range(len(value) + _MOST_LONGER + 1):
                replacement = expected[at : at + size]
                if replacement != value and got.replace(value, replacement) == expected:
                    yield token.start, token.end, repr(replacement), f"{token.string} -> {replacement!r}"
                    break


def _token_edits(source: str, docstring: set[int]) -> Iterator[_Edit]:
    """The classic operators, neighbour names, negations and integer boundaries, token by token."""
    tokens = list(_tokens(source))
    loop = False  # a ``for`` waits for its ``in``, which is not a comparison
    for number, token in enumerate(tokens):
        previous = tokens[number - 1].string if number else ""
        following = tokens[number + 1] if number + 1 < len(tokens) else None
        if token.start[0] in docstring or previous in ("def", "class"):
            continue  # the docstring and the definition's own name stay
        if token.type == tokenize.NAME and token.string == "for":
            loop = True
        elif token.type == tokenize.NAME and token.string == "not" and following is not None:
            yield token.start, following.start, "", "not removed"  # `not x` -> `x`, `not in` -> `in`, `is not` -> `is`
        elif token.type == tokenize.NAME and token.string == "in" and previous != "not":
            if loop:
                loop = False
            else:
                yield token.start, token.end, "not in", "in -> not in"
        elif token.string == "is" and following is not None and following.string != "not":
            yield token.start, token.end, "is not", "is -> is not"
        if token.type == tokenize.OP and token.string in _OPERATORS:
            if token.string == "*" and previous in ("(", ","):
                continue  # *args, keyword-only marker
            for other in _OPERATORS[token.string]:
                yield token.start, token.end, other, f"{token.string} -> {other}"
        elif token.type == tokenize.NAME and token.string in _NAMES and previous not in (":", "->"):
            for other in _NAMES[token.string]:
                yield token.start, token.end, other, f"{token.string} -> {other}"
        elif token.type == tokenize.NUMBER and token.string.isdigit():
            value = int(token.string)
            for moved in dict.fromkeys((value + 1, value - 1, value * 2, value // 2)):
                if moved >= 0 and moved != value:
                    yield token.start, token.end, str(moved), f"{value} -> {moved}"


def _boundary_edits(source: str) -> Iterator[_Edit]:
    """``+ 1`` and ``- 1`` after the last argument of ``range(...)`` and after each bound of a slice."""
    try:
        tree = parse_quietly(source)
    except (SyntaxError, ValueError, RecursionError):
        return
    bounds: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
            bounds.append(node.args[-1])
        elif isinstance(node, ast.Slice):
            bounds += [bound for bound in (node.lower, node.upper) if bound is not None]
    for bound in bounds:
        if bound.end_lineno is None or bound.end_col_offset is None or isinstance(bound, ast.Constant):
            continue  # a literal bound is already moved by the integer boundaries
        text = ast.get_source_segment(source, bound) or "it"
        end = (bound.end_lineno, _column(source, bound.end_lineno, bound.end_col_offset))
        start = (bound.lineno, _column(source, bound.lineno, bound.col_offset))
        for step in ("+ 1", "- 1"):
            wrapped = f"({text}) {step}" if isinstance(bound, ast.IfExp | ast.Lambda) else f"{text} {step}"
            yield start, end, wrapped, f"{text} -> {text} {step}"


def _tree_edits(source: str, docstring: set[int]) -> Iterator[_Edit]:
    """Changes the tokens alone do not show: two neighbouring arguments of a call swapped, and a condition (of an
    ``if``, ``while``, ``assert``, a conditional expression, or one operand of its ``and``/``or``) negated."""
    try:
        tree = parse_quietly(source)
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) >= 2 and node.lineno not in docstring:
            for left, right in zip(node.args, node.args[1:], strict=False):
                if isinstance(left, ast.Starred) or isinstance(right, ast.Starred):
                    continue
                one, two = ast.get_source_segment(source, left), ast.get_source_segment(source, right)
                between = _between(source, left, right)
                if one is None or two is None or between is None or one == two:
                    continue
                yield _start(source, left), _end(source, right), f"{two}{between}{one}", f"{one}, {two} swapped"
        elif isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
            conditions = [node.test]
            if isinstance(node.test, ast.BoolOp):
                conditions += node.test.values
            for condition in conditions:
                if isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not):
                    continue  # `not` removed is a token change
                text = ast.get_source_segment(source, condition)
                if text is not None and "\n" not in text:
                    yield _start(source, condition), _end(source, condition), f"not ({text})", f"not ({text})"


def _start(source: str, node: ast.expr) -> tuple[int, int]:
    return node.lineno, _column(source, node.lineno, node.col_offset)


def _end(source: str, node: ast.expr) -> tuple[int, int]:
    assert node.end_lineno is not None and node.end_col_offset is not None
    return node.end_lineno, _column(source, node.end_lineno, node.end_col_offset)


def _between(source: str, left: ast.expr, right: ast.expr) -> str | None:
    """The text between two neighbouring arguments (``", "``); None across lines (left as they are)."""
    (row, column), (next_row, next_column) = _end(source, left), _start(source, right)
    if row != next_row:
        return None
    return source.split("\n")[row - 1][column:next_column]


def _column(source: str, row: int, byte_offset: int) -> int:
    """``ast``'s column (UTF-8 bytes) as a character column."""
    line = source.split("\n")[row - 1]
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def _tokens(source: str) -> Iterator[tokenize.TokenInfo]:
    try:
        yield from tokenize.generate_tokens(io.StringIO(source).readline)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return


def _docstring_lines(source: str) -> set[int]:
    """The lines of the definition's docstring (1-based, in ``source``)."""
    try:
        tree = parse_quietly(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    first = tree.body[0] if tree.body else None
    if not isinstance(first, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or not first.body:
        return set()
    head = first.body[0]
    if isinstance(head, ast.Expr) and isinstance(head.value, ast.Constant) and isinstance(head.value.value, str):
        return set(range(head.lineno, (head.end_lineno or head.lineno) + 1))
    return set()


def _parses(source: str) -> bool:
    try:
        parse_quietly(source)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return True
