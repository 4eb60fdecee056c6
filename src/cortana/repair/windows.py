"""Where in a long function a sample should write: the few lines the failing tests make most suspect.

A small model takes about two seconds a line to write code on this kind of machine, so writing a 40-line function
again to change one token spends a minute and a half; asked for the eight lines around the suspect ones, it
answers in a fraction of that, and it cannot break the thirty lines it was not asked for. The window is chosen
from the line spectrum (:meth:`~cortana.repair.testrun.TestReport.suspicion`): the run of lines of the function's
body that holds its most suspect line, with the most suspicion besides (where every line ties, as when one failing
test is the only one to run the function, the run of most lines the test ran), widened to whole statements (never
half of a call that spans lines); then the next best run apart from it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from cortana.repair.symbols import Symbol, SymbolIndex, parse_quietly
from cortana.repair.testrun import TestReport

__all__ = ["WINDOW_LINES", "suspect_windows"]

WINDOW_LINES = 8
"""How many lines one window holds before it is widened to whole statements."""
_MOST_WIDENED = 2 * WINDOW_LINES
"""A window widened past this (one statement spanning twenty lines) is not asked for."""


def suspect_windows(
    symbol: Symbol, index: SymbolIndex, spectrum: TestReport | None, most: int = 2, size: int = WINDOW_LINES
) -> list[tuple[int, int]]:
    """Up to ``most`` windows (first and last line, 1-based, inclusive) of ``symbol``'s body to write again, most
    suspect first, apart from each other; none without a spectrum that has a suspect line in the body, or when the
    file does not parse."""
    if spectrum is None or not spectrum.lines or symbol.kind == "class":
        return []
    body = _body_lines(symbol, index)
    if not body:
        return []
    first, last = body
    scores = {line: spectrum.suspicion(symbol.file, line) for line in range(first, last + 1)}
    if max(scores.values(), default=0.0) <= 0:
        return []
    spans = _statement_spans(symbol, index)
    if spans is None:
        return []
    candidates: dict[tuple[int, int], tuple[float, float]] = {}
    for start in range(first, last + 1):
        window = _widened(start, min(last, start + size - 1), spans)
        if window[1] - window[0] + 1 > _MOST_WIDENED or window in candidates:
            continue
        covered = [scores.get(line, 0.0) for line in range(window[0], window[1] + 1)]
        if max(covered) > 0:
            candidates[window] = (sum(covered), max(covered))  # ranked by the most suspect line, then the rest
    ranked = sorted(candidates, key=lambda window: (-candidates[window][1], -candidates[window][0], window[0]))
    chosen: list[tuple[int, int]] = []
    for window in ranked:
        if all(window[1] < low or window[0] > high for low, high in chosen):
            chosen.append(window)
        if len(chosen) == most:
            break
    return chosen


def _body_lines(symbol: Symbol, index: SymbolIndex) -> tuple[int, int] | None:
    """The first and last line of ``symbol``'s body past its signature and docstring."""
    node = _definition(symbol, index)
    if node is None or not node.body:
        return None
    statements = node.body
    if (
        isinstance(statements[0], ast.Expr)
        and isinstance(statements[0].value, ast.Constant)
        and isinstance(statements[0].value.value, str)
        and len(statements) > 1
    ):
        statements = statements[1:]  # the docstring
    last = node.end_lineno or symbol.end
    return statements[0].lineno, last


def _definition(symbol: Symbol, index: SymbolIndex) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """``symbol``'s function node in its file's tree (None: the file does not parse, or it is not there)."""
    try:
        tree = parse_quietly(index.texts.get(symbol.file, ""))
    except (SyntaxError, ValueError, RecursionError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name == symbol.name
            and symbol.start <= node.lineno <= symbol.end
        ):
            return node
    return None


def _statement_spans(symbol: Symbol, index: SymbolIndex) -> list[tuple[int, int]] | None:
    """The lines each statement of ``symbol`` takes on its own: a simple statement whole, a compound one its
    header (``if a and\\n   b:``) up to its body."""
    node = _definition(symbol, index)
    if node is None:
        return None
    spans: list[tuple[int, int]] = []
    for child in ast.walk(node):
        if child is node or not isinstance(child, ast.stmt):
            continue
        end = child.end_lineno or child.lineno
        inner: Sequence[ast.stmt] = getattr(child, "body", None) or []
        if inner and isinstance(inner, list):
            end = max(child.lineno, inner[0].lineno - 1)
        spans.append((child.lineno, end))
    return spans


def _widened(low: int, high: int, spans: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """``low``-``high`` widened until no statement's lines are cut by either end."""
    changed = True
    while changed:
        changed = False
        for start, end in spans:
            if start < low <= end or start <= high < end:
                low, high = min(low, start), max(high, end)
                changed = True
    return low, high
