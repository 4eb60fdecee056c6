"""The tool-call evaluation set is well formed, its halves are fixed, and its scoring means what it says."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cortana.messages import ToolCall
from cortana.tools import SchemaTool

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture(scope="module")
def evaluation() -> Any:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # the benchmarks import their shared report module
    spec = importlib.util.spec_from_file_location("bench_toolcall_eval", BENCH / "toolcall_eval.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while it is created
    spec.loader.exec_module(module)
    return module


def test_every_case_offers_known_tools_and_expects_their_real_parameters(evaluation: Any) -> None:
    tools, cases = evaluation.load_tools(), evaluation.load_cases()
    assert len(cases) >= 200 and len(tools) >= 40
    assert len({case.id for case in cases}) == len(cases)
    for case in cases:
        assert 3 <= len(case.tools) <= 6 and set(case.tools) <= set(tools), case.id
        for call in case.expected:
            assert call["name"] in case.tools, case.id
            parameters = tools[call["name"]]["parameters"]
            assert set(call["arguments"]) <= set(parameters["properties"]), case.id
            assert set(parameters.get("required", [])) <= set(call["arguments"]), case.id
        assert (case.category == "nofit") == (not case.expected), case.id
        assert (case.category == "parallel") == (len(case.expected) > 1), case.id


def test_the_halves_are_fixed_and_even_in_every_category(evaluation: Any) -> None:
    cases = evaluation.load_cases()
    assert [case.split for case in cases] == [case.split for case in evaluation.load_cases()]
    per_category = Counter((case.category, case.split) for case in cases)
    for category in evaluation.CATEGORIES:
        assert abs(per_category[(category, "dev")] - per_category[(category, "held-out")]) <= 1


def test_scoring_compares_values_loosely_and_counts_exact_call_sets(evaluation: Any) -> None:
    matches = evaluation.value_matches
    assert matches("Paris, France", {"one_of": ["Paris", "Paris, France"]}) and not matches("Lyon", "Paris")
    assert matches("plasma_membrane", "plasma membrane") and matches("7", 7) and not matches(7.5, 7)
    assert matches(["b@x.org", "a@x.org"], ["a@x.org", "b@x.org"]) and not matches("a@x.org", ["a@x.org"])
    weather = {"name": "weather", "arguments": {"city": "Oslo"}}
    calls = [ToolCall(id="1", name="weather", arguments={"city": "oslo", "unit": "c"})]
    assert evaluation.right(calls, [weather])
    assert not evaluation.right(calls * 2, [weather]), "an extra call is not a right answer"
    tool = SchemaTool(
        "weather", "", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, print
    )
    bad = ToolCall(id="2", name="weather", arguments={})
    unknown = ToolCall(id="3", name="forecast", arguments={"city": "Oslo"})
    assert evaluation.executed([bad, unknown, *calls], {"weather": tool}) == calls, "only what the loop would run"
