"""Where a change goes: candidate functions and files, ranked from the failing tests, the request and the code.

Scores add up from what each source says (every reason is kept, for the
progress lines and the tests):

- a failing test's traceback: the definition holding each frame outside the
  tests (+10), the innermost one more (+5);
- the tests' spectrum (+12 at most): the definitions each test ran (traced
  while the tests ran, when the runner is pytest; else read from the code:
  what the test calls, what those call, three steps deep, by name). A
  definition that failing tests run and passing ones do not is suspect
  (Ochiai: failing running it / sqrt(all failing x all running it)). A bug
  one call away from the tested function is found, and a helper every
  passing test also uses is not blamed;
- the error's message: the module a missing name should be imported from
  (``cannot import name 'clamp' from 'shop.util'``, +12), the function a
  ``TypeError`` names (+10), the definitions holding a quoted key
  (``KeyError: 'timeout'``, +4);
- the request: definitions it names (+8), their callers (+3, or +5 when it
  asks to update them: a signature change reaches its call sites), the files
  it names (+8), and the code graph's definitions of its names (+5, when a
  graph is loaded);
- the request's distinctive words, found in a definition's text (+1 each).

A function the request names is where the symptom shows, not always where the
bug is: when the failing tests blame a function it calls (their traceback
runs through it, or the spectrum puts it under suspicion), that callee ranks
at least as high as the named function.

Tests are never candidates unless the request asks to change them.
"""

from __future__ import annotations

import builtins
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from cortana.knowledge.index import GraphIndex
from cortana.repair.patches import View
from cortana.repair.request import PATH, asks_to_change_tests
from cortana.repair.symbols import Symbol, SymbolIndex
from cortana.repair.testrun import Failure, is_test_file

__all__ = ["Location", "asks_to_change_tests", "localize", "missing_definitions", "views_for"]

MODULE_LINES = 200
"""A file this short is shown whole when the change may go anywhere in it."""
CONTEXT_LINES = 2
SHORT_FILE_LINES = 80
"""A file this short is shown whole even when one definition in it is the candidate."""
_IMPORT_FROM = re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)'")
_NO_ATTRIBUTE = re.compile(r"module '(?P<module>[\w.]+)' has no attribute '(?P<name>\w+)'")
_TYPE_ERROR = re.compile(r"(?P<name>\w+)\(\) (?:got an unexpected|missing \d+ required|takes \d+)")
_QUOTED = re.compile(r"""['"](?P<word>[A-Za-z_][\w.-]{2,40})['"]""")
_IDENTIFIER = re.compile(r"`([^`]+)`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\b(\()?")
_CALLERS = re.compile(r"\b(callers?|call sites?|everywhere|usages?|uses)\b", re.IGNORECASE)
_STOP_WORDS = (
    "the and for with that this from into when then than make makes test tests fail fails failing pass passes "
    "should would could code function functions file files value values return returns add adds fix bug bugs "
    "please change update callers caller flag option default missing implement says docstring new"
)
_STOP = frozenset(_STOP_WORDS.split())
_BUILTINS = frozenset(dir(builtins))


@dataclass
class Location:
    """A place a change may go: a definition, or a whole file (to add something to it).

    Attributes:
        file: the file, relative to the workspace.
        symbol: the definition; None for the whole file.
        score: how strongly the evidence points here.
        reasons: why, one short phrase per piece of evidence.
    """

    file: str
    symbol: Symbol | None = None
    score: float = 0.0
    reasons: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``Invoice.total in shop/invoice.py``, or the file."""
        return f"{self.symbol.qualname} in {self.file}" if self.symbol else self.file

    @property
    def key(self) -> tuple[str, str]:
        return (self.file, self.symbol.qualname if self.symbol else "")


class _Ranking:
    def __init__(self, index: SymbolIndex, tests_may_change: bool) -> None:
        self.index = index
        self.tests_may_change = tests_may_change
        self.found: dict[tuple[str, str], Location] = {}

    def add_symbol(self, symbol: Symbol, points: float, reason: str) -> None:
        if symbol.is_test and not self.tests_may_change:
            return
        if symbol.kind == "class":  # a class's change goes in one of its methods, or the class as a whole
            points *= 0.5
        self._add(Location(symbol.file, symbol), points, reason)

    def add_file(self, file: str, points: float, reason: str) -> None:
        if file in self.index.texts and (self.tests_may_change or not is_test_file(file)):
            self._add(Location(file), points, reason)

    def _add(self, location: Location, points: float, reason: str) -> None:
        current = self.found.setdefault(location.key, location)
        current.score += points
        if reason not in current.reasons:
            current.reasons.append(reason)

    def ranked(self) -> list[Location]:
        return sorted(self.found.values(), key=lambda loc: (-loc.score, loc.file, loc.key[1]))


def localize(
    request: str,
    failures: Sequence[Failure],
    index: SymbolIndex,
    *,
    passed: Iterable[str] = (),
    calls: Mapping[str, set[tuple[str, int]]] | None = None,
    graph: GraphIndex | None = None,
    tests_may_change: bool | None = None,
) -> list[Location]:
    """The candidate locations for ``request``, best first (see the module docstring).

    Args:
        request: what the user asked.
        failures: the failing tests.
        index: the project's definitions.
        passed: the ids of the tests that passed (for the spectrum).
        calls: each test's traced calls, (file, first line) of the functions it ran (a traced run's);
            None: the spectrum is read from the code.
        graph: the code graph's index, when one is loaded.
        tests_may_change: whether tests may be candidates (default: when the request asks to change them).
    """
    may_change = asks_to_change_tests(request) if tests_may_change is None else tests_may_change
    ranking = _Ranking(index, may_change)
    for failure in failures:
        _from_failure(failure, index, ranking)
    _from_spectrum([f.test for f in failures], list(passed), index, ranking, calls)
    _from_request(request, index, ranking, graph)
    for word in _distinctive_words(request):
        pattern = re.compile(rf"\b{re.escape(word)}\b")
        for symbol in index.symbols:
            if symbol.kind != "class" and pattern.search(index.source(symbol)):
                ranking.add_symbol(symbol, 1, f"mentions {word}")
    _trust_the_evidence(ranking)
    return [location for location in ranking.ranked() if location.score > 0]


def _trust_the_evidence(ranking: _Ranking) -> None:
    """A callee the failing tests blame ranks at least as high as the function the request names that calls it."""
    found = list(ranking.found.values())
    for named in [loc for loc in found if loc.symbol is not None and "named in the request" in loc.reasons]:
        assert named.symbol is not None
        for callee in found:
            symbol = callee.symbol
            if symbol is None or callee is named or symbol.name not in named.symbol.calls or not _blamed(callee):
                continue
            if callee.score <= named.score:
                callee.score = named.score + 0.5
                callee.reasons.append(f"{named.symbol.name}, which the request names, calls it; the tests blame it")


def _blamed(location: Location) -> bool:
    """Whether the failing tests' own evidence points at ``location`` (a traceback, or their spectrum)."""
    return any(reason.startswith(("in the traceback of", "reached by")) for reason in location.reasons)


def _from_failure(failure: Failure, index: SymbolIndex, ranking: _Ranking) -> None:
    outside = [frame for frame in failure.frames if not is_test_file(frame.file)]
    for position, frame in enumerate(outside):
        symbol = index.enclosing(frame.file, frame.line)
        if symbol is not None:
            innermost = position == len(outside) - 1
            ranking.add_symbol(symbol, 15 if innermost else 10, f"in the traceback of {failure.name}")
        else:
            ranking.add_file(frame.file, 8, f"in the traceback of {failure.name}")
    message = f"{failure.message}\n{failure.details[-600:]}"
    for pattern in (_IMPORT_FROM, _NO_ATTRIBUTE):
        for match in pattern.finditer(message):
            for file in _module_files(match["module"], index):
                ranking.add_file(file, 12, f"{failure.name} needs {match['name']} from it")
    for match in _TYPE_ERROR.finditer(message):
        for symbol in index.named(match["name"]):
            ranking.add_symbol(symbol, 10, f"{failure.name}: a call of {symbol.name} does not fit it")
    for match in _QUOTED.finditer(failure.message):
        key = re.compile(rf"['\"]{re.escape(match['word'])}['\"]")
        for symbol in index.symbols:
            if not symbol.is_test and symbol.kind != "class" and key.search(index.source(symbol)):
                ranking.add_symbol(symbol, 4, f"uses '{match['word']}', which {failure.name} reports")


SPECTRUM_STEPS = 3
SPECTRUM_POINTS = 12.0


def _from_spectrum(
    failing: Sequence[str],
    passing: Sequence[str],
    index: SymbolIndex,
    ranking: _Ranking,
    calls: Mapping[str, set[tuple[str, int]]] | None,
) -> None:
    if not failing:
        return
    reached_by: dict[Symbol, tuple[int, int]] = {}
    for tests, column in ((failing, 0), (passing, 1)):
        for test_id in tests:
            ran = _ran(calls[test_id], index) if calls and test_id in calls else _reach(test_id, index)
            for symbol in ran:
                counts = list(reached_by.get(symbol, (0, 0)))
                counts[column] += 1
                reached_by[symbol] = (counts[0], counts[1])
    suspicion = {
        symbol: failed / math.sqrt(len(failing) * (failed + passed))
        for symbol, (failed, passed) in reached_by.items()
        if failed
    }
    for symbol, value in suspicion.items():
        failed, passed = reached_by[symbol]
        ranking.add_symbol(symbol, SPECTRUM_POINTS * value, f"reached by {failed} failing, {passed} passing tests")
        # Of two as suspect, the one the other calls is the likelier: a thin caller passes the bug through.
        if any(
            symbol.name in caller.calls and other >= value for caller, other in suspicion.items() if caller != symbol
        ):
            ranking.add_symbol(symbol, 1, "called by code as suspect")


def _ran(calls: set[tuple[str, int]], index: SymbolIndex) -> set[Symbol]:
    """The definitions outside the tests whose functions a traced test ran."""
    found = {index.enclosing(file, line) for file, line in calls}
    return {symbol for symbol in found if symbol is not None and not symbol.is_test}


def _reach(test_id: str, index: SymbolIndex) -> set[Symbol]:
    """The definitions outside the tests that a test reaches in ``SPECTRUM_STEPS`` calls, by name."""
    file, name = test_id.split("::", 1)[0], test_id.split("::")[-1].split("[", 1)[0]
    tests = [s for s in index.named(name) if s.file == file] or [s for s in index.named(name) if s.is_test]
    frontier = {call for test in tests for call in test.calls} - _BUILTINS
    reached: set[Symbol] = set()
    seen: set[str] = set()
    for _ in range(SPECTRUM_STEPS):
        found = {callee for called in frontier - seen for callee in index.named(called) if not callee.is_test}
        seen |= frontier
        found -= reached
        reached |= found
        frontier = {call for symbol in found for call in symbol.calls} - _BUILTINS
    return reached


def _from_request(request: str, index: SymbolIndex, ranking: _Ranking, graph: GraphIndex | None) -> None:
    names = set(_names(request))
    update_callers = bool(_CALLERS.search(request))
    for name in names:
        for symbol in index.named(name):
            ranking.add_symbol(symbol, 8, "named in the request")
            if symbol.kind != "class":
                for caller in index.symbols:
                    if symbol.name in caller.calls and caller is not symbol and caller.kind != "class":
                        ranking.add_symbol(caller, 5 if update_callers else 3, f"calls {symbol.name}")
        if graph is not None:
            for node in graph.find(name)[:5]:
                if node.is_code and node.kind != "file":
                    enclosing = index.enclosing(node.file, node.line) if node.line else None
                    if enclosing is not None:
                        ranking.add_symbol(enclosing, 5, "the code graph defines a name of the request here")
                    else:
                        ranking.add_file(node.file, 5, "the code graph defines a name of the request here")
    for path in PATH.findall(request):
        for file in index.texts:
            if file == path or file.endswith("/" + path):
                ranking.add_file(file, 8, "named in the request")
                for symbol in index.in_file(file):
                    if names & {symbol.name, symbol.qualname}:
                        ranking.add_symbol(symbol, 3, "in a file the request names")


_NEW_DEFINITION = re.compile(
    r"\b(?:write|add|implement|create|define)\s+(?:a\s+|an\s+|the\s+)?(?:new\s+)?(?:function|helper|method)?\s*"
    r"`?(?P<name>[A-Za-z_][A-Za-z0-9_]*)`?\s*\(",
    re.IGNORECASE,
)


def missing_definitions(request: str, failures: Sequence[Failure], index: SymbolIndex) -> list[tuple[str, str]]:
    """(file, name) of functions to write from nothing: a name the tests import from a module that lacks it
    (``cannot import name 'clamp' from 'geometry.bounds'``), or one the request asks to write in a file it names."""
    wanted: dict[tuple[str, str], None] = {}
    for failure in failures:
        text = f"{failure.message}\n{failure.details[-600:]}"
        for pattern in (_IMPORT_FROM, _NO_ATTRIBUTE):
            for match in pattern.finditer(text):
                for file in _module_files(match["module"], index):
                    wanted[(file, match["name"])] = None
    named_files = [f for path in PATH.findall(request) for f in index.texts if f == path or f.endswith("/" + path)]
    for match in _NEW_DEFINITION.finditer(request) if not wanted else ():  # the tests' evidence first
        for file in named_files[:1]:
            wanted[(file, match["name"])] = None
    return [(file, name) for file, name in wanted if not any(s.file == file for s in index.named(name))]


def _module_files(module: str, index: SymbolIndex) -> list[str]:
    relative = module.replace(".", "/")
    candidates = (f"{relative}.py", f"{relative}/__init__.py")
    return [file for file in index.texts if any(file == c or file.endswith("/" + c) for c in candidates)]


def _names(request: str) -> Iterable[str]:
    for quoted, word, call in _IDENTIFIER.findall(request):
        text = (quoted or word).strip().removesuffix("()")
        if quoted or call or "_" in text or (text[:1].isupper() and any(c.islower() for c in text[1:])):
            yield text.rsplit(".", 1)[-1] if "/" not in text else PurePosixPath(text).stem
        elif len(text) > 3 and text.lower() not in _STOP:
            yield text


def _distinctive_words(request: str) -> list[str]:
    words = {w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{3,}", request) if w.lower() not in _STOP}
    return sorted(words)[:12]


def views_for(locations: Sequence[Location], index: SymbolIndex) -> list[View]:
    """What to show the model of ``locations``: a short file whole; in a longer one each definition with a little
    context (a whole-file location: its top and end), one view per file, in the order of the locations."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    for location in locations:
        text = index.texts.get(location.file, "")
        count = len(text.splitlines())
        if count <= SHORT_FILE_LINES:  # a short file whole: its imports, constants and neighbours help
            span = [(1, count)]
        elif location.symbol is None:
            span = [(1, count)] if count <= MODULE_LINES else [(1, min(count, 40)), (max(1, count - 20), count)]
        else:
            low = max(1, location.symbol.start - CONTEXT_LINES)
            high = min(count, location.symbol.end + CONTEXT_LINES)
            span = [(low, high)]
        ranges.setdefault(location.file, []).extend(span)
    return [View(file, _merged(spans)) for file, spans in ranges.items()]


def _merged(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(spans):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)
