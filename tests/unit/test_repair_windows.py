"""A long function is asked for its few most suspect lines, not written again whole (``repair/windows.py``,
``coders.Lines``): the window the spectrum picks, the lines put back in place, and the workflow's asks."""

from __future__ import annotations

from pathlib import Path

from cortana.config import child_process_environment
from cortana.models.base import ModelRequest
from cortana.repair import RepairSettings, RepairWorkflow, find_test_command, run_tests
from cortana.repair.coders import Lines
from cortana.repair.patches import lines_grammar
from cortana.repair.symbols import SymbolIndex
from cortana.repair.testrun import TestReport
from cortana.repair.windows import suspect_windows
from cortana.testing import ScriptedModel
from tests.unit.test_repair import write

ENV = child_process_environment({})

# 31 lines; the bug (`count + 1`) sits in the branch only the failing test (no values in bounds) enters.
REPORT = '''
    def describe(values, low, high):
        """A line about the values within bounds."""
        kept = []
        for value in values:
            if value < low:
                continue
            if value > high:
                continue
            kept.append(value)
        count = len(kept)
        if not kept:
            note = "none in bounds"
            shown = str(count + 1)
            return note + ": " + shown
        total = 0
        for value in kept:
            total += value
        mean = total / count
        smallest = min(kept)
        largest = max(kept)
        spread = largest - smallest
        parts = [
            str(count),
            f"mean={mean}",
            f"spread={spread}",
        ]
        if count > 10:
            parts.append("many")
        return " ".join(parts)
    '''
PROJECT = {
    "conftest.py": "",
    "stats/__init__.py": "",
    "stats/report.py": REPORT,
    "tests/test_report.py": """
        from stats.report import describe


        def test_some():
            assert describe([1, 2, 3], 0, 5) == "3 mean=2.0 spread=2"


        def test_one():
            assert describe([4], 0, 5) == "1 mean=4.0 spread=0"


        def test_none_in_bounds():
            assert describe([9], 0, 5) == "none in bounds: 0"
        """,
}


async def spectrum_of(project: Path) -> TestReport:
    command = find_test_command(project)
    assert command is not None
    report = await run_tests(command, project, ENV, trace=True)
    assert report.ran == (1, 2), report.ran
    return report


async def test_the_window_holds_the_most_suspect_lines_and_cuts_no_statement(tmp_path: Path) -> None:
    project = write(tmp_path / "p", PROJECT)
    report = await spectrum_of(project)
    index = SymbolIndex.build(project)
    symbol = index.named("describe")[0]
    windows = suspect_windows(symbol, index, report)
    assert windows, "a spectrum ranks the body's lines"
    low, high = windows[0]
    assert low <= 13 <= high and high - low + 1 <= 16, windows  # line 13: `shown = str(count + 1)`
    assert not (low <= 23 <= high and high < 27) and not (23 < low <= 27), "the list display is not cut"
    if len(windows) > 1:
        assert windows[1][1] < low or windows[1][0] > high, "the second window is apart from the first"
    assert suspect_windows(symbol, index, TestReport(False)) == [], "no spectrum: no window"
    assert suspect_windows(symbol, index, None) == []


async def test_the_lines_written_go_in_place_and_the_rest_stays(tmp_path: Path) -> None:
    project = write(tmp_path / "p", PROJECT)
    index = SymbolIndex.build(project)
    symbol = index.named("describe")[0]
    coder = Lines(symbol, index, 11, 14)
    originals = {"stats/report.py": index.texts["stats/report.py"]}
    assert "these 4 lines of the function describe in stats/report.py" in coder.instruction()
    assert "shown = str(count + 1)" in coder.instruction()
    fixed = (
        "    if not kept:\n"
        '        note = "none in bounds"\n'
        "        shown = str(count)  # no longer one too many\n"
        '        return note + ": " + shown\n'
    )
    patch = coder.patch(fixed, None, originals)
    assert patch is not None
    text = patch.files["stats/report.py"]
    assert "        shown = str(count)\n" in text, "the narrating comment goes"
    assert text.replace("str(count)\n", "str(count + 1)\n") == originals["stats/report.py"], "nothing else changed"
    at_the_margin = "```python\nif not kept:\n    note = 'none'\n    return note\n```\n"
    moved = coder.patch(at_the_margin, None, originals)
    assert (
        moved is not None
        and "    if not kept:\n        note = 'none'\n        return note\n    total = 0"
        in (moved.files["stats/report.py"])
    ), "lines written at the margin are moved to the window's indentation"
    assert coder.patch("    if not kept:\n        note = (\n", None, originals) is None, "does not parse"
    unchanged = "\n".join(originals["stats/report.py"].split("\n")[10:14])
    assert coder.patch(unchanged, None, originals) is None, "the same lines change nothing"


def test_a_window_whose_lines_are_in_the_file_twice_is_placed_by_the_lines_above(tmp_path: Path) -> None:
    body = "    total = 0\n    for item in items:\n        total += item\n    return total + 1\n"
    project = write(tmp_path / "p", {"twins.py": f"def first(items):\n{body}\n\ndef second(items):\n{body}"})
    index = SymbolIndex.build(project)
    second = index.named("second")[0]
    coder = Lines(second, index, second.start + 1, second.end)
    originals = {"twins.py": index.texts["twins.py"]}
    patch = coder.patch(body.replace(" + 1", ""), None, originals)
    assert patch is not None
    text = patch.files["twins.py"]
    assert text.count("return total + 1") == 1 and text.rstrip().endswith("return total"), text


def test_the_grammar_keeps_the_window_indentation() -> None:
    grammar = lines_grammar("    ", 120, 6)
    assert grammar.startswith('root ::= "    " [^\\n] rest "\\n" ("\\n" | "    " rest "\\n"){0,5}')
    assert "rest ::= [^\\n]{0,120}" in grammar


def workflow(project: Path, model: ScriptedModel, **settings: object) -> RepairWorkflow:
    settings.setdefault("mutants", 0)  # the samples are what is tested here
    return RepairWorkflow(
        model, project, test_command=find_test_command(project), environment=ENV,
        settings=RepairSettings(**settings),  # type: ignore[arg-type]
    )  # fmt: skip


async def test_a_long_function_is_asked_for_its_suspect_lines_and_fixed_by_them(tmp_path: Path) -> None:
    project = write(tmp_path / "p", PROJECT)

    def answer_the_window(request: ModelRequest) -> str:
        asked = str(request.messages[-1].content)
        old = asked.split("in stats/report.py:\n", 1)[1].split("\nWrite these lines again", 1)[0]
        return old.replace("str(count + 1)", "str(count)")

    model = ScriptedModel([answer_the_window])
    result = await workflow(project, model, samples=1, per_location=1, rounds=1).run("fix the failing test")
    assert result.status == "fixed", result.message
    assert result.origin.endswith("lines, T=0"), result.origin
    asked = model.requests[0].messages[-1].content
    assert "The failing tests point at these" in asked and "again, whole" not in asked
    assert result.diff.count("\n-    ") == 1 and "+        shown = str(count)" in result.diff, result.diff


async def test_up_to_rewrite_lines_a_function_is_still_written_whole(tmp_path: Path) -> None:
    project = write(tmp_path / "p", PROJECT)
    model = ScriptedModel(["nothing"] * 8)
    await workflow(project, model, samples=1, per_location=1, rounds=1, rewrite_lines=40).run("fix the failing test")
    first = model.requests[0].messages[-1].content
    assert "Write the function describe of stats/report.py again, whole" in first
