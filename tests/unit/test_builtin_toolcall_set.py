"""The built-in tools' call set (bench/tool_prompt.py) is well formed, its halves are fixed, its scoring is strict."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cortana.messages import ToolCall
from cortana.tools.builtin import builtin_tools

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> Any:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # the benchmarks import their shared report module
    spec = importlib.util.spec_from_file_location("bench_tool_prompt", BENCH / "tool_prompt.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_case_expects_a_builtin_tool_with_its_real_parameters(bench: Any, tmp_path: Path) -> None:
    tools = {tool.name: tool.parameters for tool in builtin_tools(tmp_path)}
    cases = bench.load_cases()
    assert len(cases) >= 40 and len({case["id"] for case in cases}) == len(cases)
    assert {case["category"] for case in cases} == {*tools, "none"}
    for case in cases:
        assert (case["category"] == "none") == (not case["expected"]), case["id"]
        for call in case["expected"]:
            assert call["name"] in tools, case["id"]
            assert set(call["arguments"]) <= set(tools[call["name"]]["properties"]), case["id"]
    workspace = bench.make_workspace(tmp_path / "workspace")
    assert (workspace / "app" / "config.py").is_file()


def test_the_halves_are_fixed_and_even_for_every_tool(bench: Any) -> None:
    cases = bench.load_cases()
    assert [case["split"] for case in cases] == [case["split"] for case in bench.load_cases()]
    per_category = Counter((case["category"], case["split"]) for case in cases)
    for category in {case["category"] for case in cases}:
        assert abs(per_category[(category, "dev")] - per_category[(category, "held-out")]) <= 1


def test_scoring_needs_every_call_right_and_no_call_where_no_tool_fits(bench: Any) -> None:
    def call(name: str, **arguments: Any) -> ToolCall:
        return ToolCall(id="c", name=name, arguments=arguments)

    whole = {"id": "r", "expected": [{"name": "read_file", "arguments": {"path": "a.py", "end_line": None}}]}
    assert bench.is_right(whole, [call("read_file", path="./a.py")])
    assert bench.is_right(whole, [call("read_file", path="a.py", end_line=None)])
    assert not bench.is_right(whole, [call("read_file", path="a.py", end_line=10)]), "a whole file, not 10 lines"
    assert not bench.is_right(whole, [call("read_file", path="a.py"), call("list_files")])
    assert not bench.is_right(whole, [])
    command = {"id": "c", "expected": [{"name": "run_command", "arguments": {"command": {"one_of": ["-V", "--v"]}}}]}
    assert bench.is_right(command, [call("run_command", command="python3 --version")])
    assert not bench.is_right(command, [call("run_command", command="python3")])
    assert bench.is_right({"id": "n", "expected": []}, [])
    assert not bench.is_right({"id": "n", "expected": []}, [call("grep_files", pattern="x")])
