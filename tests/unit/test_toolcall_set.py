"""The tool-call evaluation set is well formed, its halves are fixed, and its scoring means what it says."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cortana.messages import ToolCall
from cortana.models.embedded import BUNDLED_MODELS
from cortana.models.guided import _word_logprob
from cortana.tools import SchemaTool
from tests.wire import FIXTURES

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
        fewest = 1 if case.category == "samefield" else 3  # one tool of the question's own field, on purpose
        assert fewest <= len(case.tools) <= 6 and set(case.tools) <= set(tools), case.id
        for call in case.expected:
            assert call["name"] in case.tools, case.id
            parameters = tools[call["name"]]["parameters"]
            assert set(call["arguments"]) <= set(parameters["properties"]), case.id
            assert set(parameters.get("required", [])) <= set(call["arguments"]), case.id
        assert (case.category in evaluation.NO_FIT) == (not case.expected), case.id
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


def test_the_check_threshold_is_chosen_on_the_development_half_alone(evaluation: Any) -> None:
    tools, cases = evaluation.load_tools(), evaluation.load_cases()
    dev = [case for case in cases if case.split == "dev"]
    for model in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert (evaluation.OUTPUTS / f"{model}.guided.jsonl").exists(), "the guided answers are recorded"
        chosen = evaluation.tune_margin(model, cases, tools)
        assert chosen == evaluation.tune_margin(model, dev, tools)
    first = [case for case in cases if case.category not in ("unrelated", "samefield", "general")]
    for model in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        # Chosen on the first 257 cases' development half: with issue 63's kinds in it the 0.5B's would be -0.452,
        # which turns away its list_files call for "List the files in this folder." (docs/engines.md).
        assert BUNDLED_MODELS[model].check_margin == evaluation.tune_margin(model, first, tools), (
            "the engine ships the threshold the evaluation chose"
        )
        assert evaluation.tune_rule(model, cases, tools) == evaluation.tune_rule(model, dev, tools)
        assert BUNDLED_MODELS[model].check_purpose == 0.0, "measured, not shipped (docs/engines.md, issue 63)"
    # The 0.5B model's check of "What's the weather in Paris?" -> get_weather(city="Paris"), captured
    # from the real engine: its threshold lets that call through.
    capture = json.loads((FIXTURES / "llamacpp" / "q05_completion_check.json").read_text())
    top = [(t["token"], t["logprob"]) for t in capture["completion_probabilities"][0]["top_logprobs"]]
    paris = _word_logprob(tuple(top), "no") - _word_logprob(tuple(top), "yes")
    threshold = BUNDLED_MODELS["qwen2.5-coder-0.5b"].check_margin
    assert threshold is not None and paris < threshold, "a plain weather call passes the 0.5B check"


def test_guided_scoring_follows_the_free_start(evaluation: Any) -> None:
    tools, [case] = evaluation.load_tools(), [c for c in evaluation.load_cases() if c.id == "a-001"]
    specs = [evaluation.ToolSpec(n, tools[n]["description"], tools[n]["parameters"]) for n in case.tools]
    offered = {s.name: SchemaTool(s.name, s.description, s.parameters, print) for s in specs}
    written = {"calls": [{"name": "weather_current", "arguments": {"location": "Lisbon"}, "raw": None}]}
    checks = {"check": {"ok": True, "margin": -2.0}, "check_described": {"margin": -2.0}}
    guided = {"decision": "none", "paths": {"weather_current": {**written, **checks}}}
    call = '```json\n{"name": "weather_current", "arguments": {"location": "Lyon"}}\n```'
    settings = evaluation.guided_settings(case, {"content": call}, guided, specs, offered, None)
    for setting in ("grammar + check, added calls grounded", "grammar + described check, added calls grounded"):
        assert [c.arguments for c in settings[setting]] == [{"location": "Lisbon"}], "the grammar's call runs"
    assert settings["decision + grammar + check"] == [], "the decision said none"
    strict = evaluation.guided_settings(case, {"content": call}, guided, specs, offered, -2.5)
    assert strict["grammar + described check, added calls grounded"] == [], "a margin above the threshold rejects"
    assert strict["grammar + check, added calls grounded"], "the earlier check keeps its own threshold"
    plain = evaluation.guided_settings(case, {"content": call}, guided, specs, offered, None, -2.5)
    assert plain["grammar + check, added calls grounded"] == [], "... which rejects at or above it"
    prose = evaluation.guided_settings(case, {"content": "It is sunny."}, guided, specs, offered, None)
    assert prose["grammar + check, added calls grounded"] == [], "a free start in prose never reaches the grammar"
