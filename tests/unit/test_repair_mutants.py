"""The small changes that need no model (``cortana.repair.mutants``): which are made, and the workflow's use of them
(scripted model, real pytest runs)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from cortana.repair import FixStatus
from cortana.repair.mutants import mutants, worth_mutating
from cortana.repair.symbols import SymbolIndex
from cortana.repair.testrun import Failure
from cortana.testing import ScriptedModel
from tests.unit.test_repair import ONE_CALL_AWAY, workflow, write

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
    assert len(model.requests) == 1, "after the first sample, the small changes found it"
    assert any("small changes of vat" in line and "no model" in line for line in progress), progress


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
