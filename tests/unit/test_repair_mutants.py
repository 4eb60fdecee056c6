"""The small changes that need no model (``cortana.repair.mutants``): which are made, and the workflow's use of them
(scripted model, real pytest runs)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from cortana.repair import FixStatus
from cortana.repair.mutants import mutants, ranked_mutants, worth_mutating
from cortana.repair.symbols import SymbolIndex
from cortana.repair.testrun import Failure, TestReport, find_test_command, run_tests
from cortana.testing import ScriptedModel
from tests.unit.test_repair import ENV, ONE_CALL_AWAY, workflow, write

SLUG = {
    "conftest.py": "",
    "textkit/__init__.py": "",
    "textkit/slug.py": '''
        import re


        def slugify(title: str, sep: str = "_") -> str:
            """``title`` as lowercase words joined by ``sep`` (e.g. "a_b")."""
            words = re.findall(r"[a-z0-9]+", title.lower())
            return sep.join(words)
        ''',
    "tests/test_slug.py": """
        from textkit.slug import slugify


        def test_default_separator_is_a_dash():
            assert slugify("Hello World") == "hello-world"


        def test_other_separator():
            assert slugify("a b", sep="_") == "a_b"
        """,
}


def index_of(tmp_path: Path, source: str, name: str = "m.py") -> SymbolIndex:
    (tmp_path / name).write_text(textwrap.dedent(source).lstrip("\n"))
    return SymbolIndex.build(tmp_path)


def test_a_string_the_failing_assertion_asks_for_comes_first(tmp_path: Path) -> None:
    write(tmp_path, SLUG)
    index = SymbolIndex.build(tmp_path)
    (slugify,) = [s for s in index.symbols if s.name == "slugify"]
    failing = [Failure("tests/test_slug.py::test_default_separator_is_a_dash", "assert 'hello_world' == 'hello-world'")]
    made = mutants(slugify, index, failing)
    assert made[0].asked and made[0].what == """"_" -> '-' on line 4"""
    assert "def slugify(title: str, sep: str = '-') -> str:" in made[0].block.replace
    assert not any(m.asked for m in made[1:])
    assert all('"a_b"' in m.block.replace for m in made), "the docstring is never changed"
    assert not any(m.asked for m in mutants(slugify, index)), "no failing assertion, no string from it"


def test_operators_boundaries_and_neighbour_calls(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        """
        import math


        class Pager:
            def pages(self, total: int, per: int = 10) -> int:
                if total <= 0:
                    return 0
                return math.floor(total / per)


        def windows(xs, n):
            return [xs[i : i + n] for i in range(len(xs) - n)]
        """,
    )
    pages, windows = (next(s for s in index.symbols if s.name == name) for name in ("pages", "windows"))
    paged = {m.what for m in mutants(pages, index)}
    assert {"<= -> < on line 6", "/ -> // on line 8", "/ -> * on line 8", "floor -> ceil on line 8"} <= paged
    assert {"10 -> 11 on line 5", "10 -> 9 on line 5", "0 -> 1 on line 6"} <= paged
    assert not any(what.startswith("int ->") for what in paged), "annotations are not code to change"
    windowed = {m.what for m in mutants(windows, index)}
    assert "len(xs) - n -> len(xs) - n + 1 on line 12" in windowed and "i + n -> i + n - 1 on line 12" in windowed
    for mutant in mutants(pages, index):
        assert mutant.block.search == index.source(pages), "the method as it is, replaced whole"
        assert mutant.block.replace.startswith("    def pages(self"), "a method keeps its indentation"
        ast.parse(textwrap.dedent(mutant.block.replace))


def test_nothing_for_a_definition_with_nothing_to_change(tmp_path: Path) -> None:
    index = index_of(tmp_path, 'def name():\n    """Text."""\n    return "x"\n')
    assert mutants(index.symbols[0], index) == []


async def test_a_bug_one_token_away_is_fixed_with_no_more_model_calls(tmp_path: Path) -> None:
    project = write(tmp_path / "p", ONE_CALL_AWAY)
    model = ScriptedModel(["no edits here"] * 20)
    progress: list[str] = []
    found = workflow(project, model, samples=1, per_location=1, rounds=1, mutants=40)
    found.on_progress = lambda step: progress.append(step.message)
    result = await found.run("fix the failing test")
    assert result.status is FixStatus.FIXED, result.message
    assert "+    return round(cents * 0.2)" in result.diff
    assert result.origin == "round 1, a small change: int -> round on line 3"
    assert model.requests == [], "ranked by the tests' line spectrum, the small changes come before any sample"
    assert any("most suspect first (shop/money.py:3" in line and "no model" in line for line in progress), progress


async def test_the_slug_default_the_test_asks_for(tmp_path: Path) -> None:
    project = write(tmp_path / "p", SLUG)
    result = await workflow(project, ScriptedModel(["no edits here"] * 10), samples=1, rounds=1, mutants=5).run(
        "Slugs should use dashes by default, fix textkit/slug.py."
    )
    assert result.status is FixStatus.FIXED, result.message
    assert "+def slugify(title: str, sep: str = '-') -> str:" in result.diff


async def test_no_small_changes_for_a_missing_definition_or_when_turned_off(tmp_path: Path) -> None:
    clamp = "from shop.money import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 3) == 3\n"
    missing = {**ONE_CALL_AWAY, "tests/test_clamp.py": clamp}
    cases = [("add clamp to shop/money.py", 40, missing), ("fix it", 0, ONE_CALL_AWAY)]
    for number, (request, most, files) in enumerate(cases):
        project = write(tmp_path / str(number), files)
        model = ScriptedModel(["no edits here"] * 40)
        found = workflow(project, model, samples=1, rounds=1, mutants=most)
        progress: list[str] = []
        found.on_progress = lambda step, seen=progress: seen.append(step.message)
        result = await found.run(request)
        assert result.status is not FixStatus.FIXED, (request, result.message)
        assert not any("small changes" in line for line in progress), (request, progress)


def test_only_a_failure_of_code_that_ran_and_got_something_wrong_is_worth_small_changes() -> None:
    def failing(*messages: str) -> list[Failure]:
        return [Failure(f"tests/test_x.py::test_{number}", message) for number, message in enumerate(messages)]

    assert worth_mutating(failing("AssertionError: assert 'hello_world' == 'hello-world'"))
    assert worth_mutating(failing("ZeroDivisionError: division by zero"))
    assert worth_mutating(failing("KeyError: 'timeout'"))
    assert worth_mutating(failing("SystemExit: 2", "AssertionError: assert [3, 2] == [2, 3]")), "one is enough"
    assert worth_mutating(failing('TypeError: can only concatenate str (not "int") to str'))
    assert not worth_mutating(failing("NotImplementedError"))
    assert not worth_mutating(failing("SystemExit: 2"))
    assert not worth_mutating(failing("ImportError: cannot import name 'clamp' from 'geometry.bounds'"))
    assert not worth_mutating(failing("TypeError: format_price() got an unexpected keyword argument 'currency'"))
    assert not worth_mutating(failing(""))


def test_the_changes_people_make_by_mistake_are_made(tmp_path: Path) -> None:
    """Swapped arguments, a missing or extra ``not``, ``in``/``is`` negated, a constant doubled or halved, ``%``
    for ``//``, a comparison turned round; never the ``in`` of a loop."""
    index = index_of(
        tmp_path,
        """
        def f(a, b, seq):
            for x in seq:
                if x in a and not b:
                    return g(a, b)
            while a is None:
                a = divmod(b, 24) % 7
            return [y for y in seq if y not in a]
        """,
    )
    made = {m.what for m in mutants(index.symbols[0], index)}
    assert {
        "a, b swapped on line 4",
        "b, 24 swapped on line 6",
        "not removed on line 3",
        "not removed on line 7",
    } <= made
    assert {"in -> not in on line 3", "is -> is not on line 5", "24 -> 48 on line 6", "24 -> 12 on line 6"} <= made
    assert {"% -> // on line 6", "not (x in a) on line 3", "not (a is None) on line 5"} <= made
    assert not any(what.startswith("in -> not in on line 2") for what in made), "a loop's `in` is not a comparison"


def test_a_string_is_asked_for_whichever_side_of_the_assertion_holds_it(tmp_path: Path) -> None:
    index = index_of(tmp_path, 'def slug(text, sep="_"):\n    return sep.join(text.split())\n')
    expected_first = Failure("t::test", "AssertionError: assert 'a-b' == 'a_b'")  # `assert expected == slug(...)`
    made = mutants(index.symbols[0], index, [expected_first])
    assert made[0].asked and made[0].what == """"_" -> '-' on line 1"""


async def test_the_line_spectrum_ranks_the_changes_across_functions(tmp_path: Path) -> None:
    """The failing test's lines that no passing test runs are the most suspect; a line no failing test runs is not
    changed at all (it cannot change what the failing test does)."""
    project = write(
        tmp_path / "p",
        {
            "conftest.py": "",
            "calc/__init__.py": "",
            "calc/ops.py": """
                def total(items, discount):
                    subtotal = sum(items)
                    if discount:
                        return reduce(subtotal, discount)
                    return subtotal + 0


                def reduce(amount, discount):
                    return amount + discount
                """,
            "tests/test_ops.py": """
                from calc.ops import total


                def test_plain():
                    assert total([1, 2], 0) == 3


                def test_discount():
                    assert total([10], 3) == 7
                """,
        },
    )
    command = find_test_command(project)
    assert command is not None
    report = await run_tests(command, project, ENV, trace=True)
    assert report.ran == (1, 1)
    assert report.suspicion("calc/ops.py", 9) == 1.0, "reduce's line: only the failing test runs it"
    assert report.suspicion("calc/ops.py", 2) < 1.0 and report.suspicion("calc/ops.py", 5) == 0.0
    index = SymbolIndex.build(project)
    ranked = ranked_mutants(index, report, [], report.failures)
    top = {m.what for m in ranked[:2]}  # the lines only the failing test runs, in either function
    assert top == {"+ -> - on line 9", "subtotal, discount swapped on line 4"}, [m.what for m in ranked[:5]]
    assert not any(m.line == 5 for m in ranked), "line 5 is not run by the failing test"
    assert ranked_mutants(index, TestReport(False), [index.named("reduce")[0]])[0].line == 9, "no spectrum: shown"
