"""What the tests computed, put in words for a sample: the failing tests, what each asserted and got, and what the
project's functions were given and gave back while it ran.

A small model asked to fix ``assert 544 == 545`` guesses; told that
``to_cents(amount=4.35)`` returned 434 while the test ran, it sees the
truncation. The values come from the tests themselves (the tracing plugin of
``testrun.py``), never from the model's own diagnosis: execution feedback the
system computes is what makes a second try better than a fresh sample
(Self-Debugging, Chen et al. 2023; Olausson et al. 2024). Everything here is
the project's text and values: escaped for the prompt and bounded.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterator, Sequence

from cortana.prompts import as_data
from cortana.repair.symbols import Symbol, SymbolIndex, parse_quietly
from cortana.repair.testrun import CallValue, Failure, TestReport

__all__ = ["MOST_TESTS", "calls_of", "failing_text", "unread_parameters"]

MOST_TESTS = 3
"""The most failing tests described (the others are counted)."""
TEST_LINES = 30
"""The most lines of a failing test shown."""
FILE_LINES = 60
"""The most lines of a test file shown when it could not even be imported (its tests show what it expects)."""
MOST_CALLS = 6
"""The most calls of the project's functions shown for one test."""
_DETAIL_LINES = 4


def failing_text(failing: Sequence[Failure], index: SymbolIndex, report: TestReport | None = None) -> str:
    """The failing tests for a prompt: each one's id, its error (with the values pytest shows: ``where 544 =
    total()``), its source, and, when ``report`` traced it, the calls of the project's functions it made."""
    if not failing:
        return ""
    lines = ["The failing tests:"]
    for failure in failing[:MOST_TESTS]:
        lines.append(f"- {failure.test}: {_first_line(failure)}")
        lines += [f"  {detail}" for detail in _details(failure)]
        if failure.printed:
            lines += ["  It printed to stderr:", *("    " + line for line in failure.printed.splitlines()[-4:])]
        if "::" not in failure.test:
            source = index.texts.get(failure.file, "").splitlines()
            lines += ["  The test file:", *("    " + line for line in source[:FILE_LINES])]
            continue
        test = next((s for s in index.named(failure.name) if s.file == failure.file), None)
        if test is not None:
            lines += ["  The test:", *("    " + line for line in index.source(test).splitlines()[:TEST_LINES])]
        calls = report.values.get(failure.test, []) if report is not None else []
        shown = [call for call in calls if not call.name.split(".")[-1].startswith("<")][:MOST_CALLS]
        if shown:
            lines.append("  While it ran, the code was called like this:")
            lines += [f"    {_call(call)}" for call in shown]
    if len(failing) > MOST_TESTS:
        lines.append(f"- and {len(failing) - MOST_TESTS} more")
    return as_data("\n".join(lines)) + "\n\n"


def calls_of(symbol: Symbol, report: TestReport | None, failing: Sequence[Failure]) -> str:
    """The calls of ``symbol`` in the failing tests (``to_cents(amount=4.35) returned 434``), for a rewrite of it;
    "" when the run recorded none."""
    seen = dict.fromkeys(_call(call) for call in _calls(symbol, report, failing))
    return as_data("\n".join(list(seen)[:MOST_CALLS]))


def unread_parameters(symbol: Symbol, index: SymbolIndex, report: TestReport | None, failing: Sequence[Failure]) -> str:
    """The parameters of ``symbol`` its code never reads though the failing tests' calls give them a value
    (``key``, ``currency``), joined by commas; "" when there are none, or when it reads none of its parameters (a
    stub: nothing to say about one of them). A parameter the code ignores is the commonest way a function "takes"
    an option and does nothing with it, and a small model shown the calls alone writes the same body again."""
    if symbol.kind == "class":
        return ""
    try:
        tree = parse_quietly(textwrap.dedent(index.source(symbol)))
    except (SyntaxError, ValueError):
        return ""
    function = next((node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    if function is None:
        return ""
    arguments = function.args
    names = [a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]]
    names = [name for name in names if name not in ("self", "cls") and not name.startswith("_")]
    read = symbol.calls  # every name the definition reads
    if read & {"locals", "vars", "eval", "exec"} or not read & set(names):
        return ""  # it reads its arguments some other way, or none at all
    given = {
        name
        for call in _calls(symbol, report, failing)
        for name in names
        if re.search(rf"(?:^|, ){re.escape(name)}=(?!None(?:,|$))", call.arguments)
    }
    return ", ".join(name for name in names if name in given and name not in read)


def _calls(symbol: Symbol, report: TestReport | None, failing: Sequence[Failure]) -> Iterator[CallValue]:
    """The traced calls of ``symbol`` in the first failing tests."""
    if report is None:
        return
    for failure in failing[:MOST_TESTS]:
        for call in report.values.get(failure.test, []):
            if call.file == symbol.file and call.line == symbol.start and call.name.endswith(symbol.name):
                yield call


def _first_line(failure: Failure) -> str:
    return failure.message.splitlines()[0] if failure.message else "failed"


def _details(failure: Failure) -> list[str]:
    """pytest's explanation of an assertion (``+  where 544 = total()``): what each side of it was."""
    return [line.strip() for line in failure.message.splitlines()[1:] if line.strip()][:_DETAIL_LINES]


def _call(call: CallValue) -> str:
    if call.raised is not None:
        return f"{call.name}({call.arguments}) raised {call.raised}"
    returned = f" returned {call.returned}" if call.returned is not None else ""
    return f"{call.name}({call.arguments}){returned}"
