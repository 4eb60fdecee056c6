"""Tool-call grammars (GBNF) from tool schemas, and reading guided output back.

Whether llama.cpp accepts these grammars and what models write under them is
tested on the real engine in tests/integration/test_guided_calls.py; here the
grammar's shape and the parsing of its output are checked without one.
"""

from __future__ import annotations

import re

import pytest

from cortana.models.base import ToolSpec
from cortana.models.grammar import call_grammar, call_prefix, choice_grammar, gbnf_literal
from cortana.models.guided import parse_calls, template_supports_guiding

WEATHER = ToolSpec(
    "weather.current",
    "Current weather.",
    {
        "type": "object",
        "properties": {
            "location": {"type": "string"},
            "units": {"type": "string", "enum": ["metric", "imperial"]},
            "days": {"type": "integer"},
        },
        "required": ["location"],
    },
)
NESTED = ToolSpec(
    "book",
    "Book things.",
    {
        "type": "object",
        "$defs": {"Guest": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
        "properties": {
            "guests": {"type": "array", "items": {"$ref": "#/$defs/Guest"}, "minItems": 1},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "kind": {"const": "hotel"},
            "flags": {"type": ["boolean", "null"]},
        },
        "required": ["guests"],
    },
)
EMPTY = ToolSpec("now", "The time.", {"type": "object", "properties": {}})


def rules(grammar: str) -> dict[str, str]:
    """The grammar's rules by name (every line is ``name ::= body``)."""
    return dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())


def referenced(body: str) -> set[str]:
    without_literals = re.sub(r'"(?:\\.|[^"\\])*"|\[[^]]*\]', " ", body)
    return set(re.findall(r"(?<![\"\\\w-])([a-z][a-z0-9-]*)(?![\"\w-])", without_literals))


@pytest.mark.parametrize("max_calls", [1, 4])
def test_every_rule_used_is_defined(max_calls: int) -> None:
    grammar = call_grammar([WEATHER, NESTED, EMPTY], "book", max_calls=max_calls)
    defined = rules(grammar)
    for name, body in defined.items():
        missing = referenced(body) - set(defined)
        assert not missing, f"{name} uses undefined {missing}"


def test_required_keys_come_first_and_optional_ones_may_be_left_out() -> None:
    grammar = rules(call_grammar([WEATHER], "weather.current"))
    args = grammar["args-weather-current"]
    assert args.startswith('"{" sp args-weather-current-location-kv')
    assert '"\\"location\\":"' in grammar["args-weather-current-location-kv"]
    enum = next(body for name, body in grammar.items() if name.startswith("args-weather-current-units") and "|" in body)
    assert enum == '"\\"metric\\"" | "\\"imperial\\""'
    tails = [body for name, body in grammar.items() if "-after-" in name]
    assert all(body.startswith('("," sp') for body in tails), "each optional key is optional"


def test_one_call_ends_the_answer_and_more_are_allowed_up_to_the_limit() -> None:
    single = rules(call_grammar([WEATHER, EMPTY], "now", max_calls=1))
    assert single["root"] == 'sp args-now "}\\n</tool_call>"'
    several = rules(call_grammar([WEATHER, EMPTY], "now", max_calls=3))
    assert several["root"].endswith(" more") and several["more"].endswith("{0,2}")
    assert '"\\"weather.current\\", \\"arguments\\":" sp' in several["call"]


def test_refs_anyof_const_and_type_lists() -> None:
    grammar = rules(call_grammar([NESTED], "book"))
    text = "\n".join(grammar.values())
    assert any(name.startswith("ref-guest") for name in grammar)
    assert '"\\"hotel\\""' in text
    assert "string | null" in text and "boolean | null" in text
    guests = next(body for name, body in grammar.items() if name == "args-book-guests")
    assert guests.startswith('"[" sp ref-guest') and not guests.startswith('"[" sp ('), "minItems 1: not empty"


def test_a_self_referencing_schema_ends_in_a_cycle_not_a_crash() -> None:
    tree = ToolSpec(
        "tree",
        "A tree.",
        {
            "type": "object",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                }
            },
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "required": ["root"],
        },
    )
    grammar = rules(call_grammar([tree], "tree"))
    assert any(name.startswith("ref-node") for name in grammar)


def test_choice_grammar_and_literals() -> None:
    assert choice_grammar(["none", "fs.read"]) == 'root ::= "none" | "fs.read"'
    assert gbnf_literal('a"b\\c\n') == '"a\\"b\\\\c\\n"'
    with pytest.raises(ValueError):
        choice_grammar([])
    with pytest.raises(ValueError, match="not one of the offered tools"):
        call_grammar([WEATHER], "other")


def test_parse_calls_reads_blocks_drops_duplicates_and_keeps_a_cut_off_call() -> None:
    text = (
        call_prefix("weather.current")
        + '{"location": "Lisbon"}}\n</tool_call>\n<tool_call>\n'
        + '{"name": "weather.current", "arguments": {"location": "Lisbon"}}\n</tool_call>\n<tool_call>\n'
        + '{"name": "weather.current", "arguments": {"location": "Os'
    )
    calls = parse_calls(text)
    assert [(c.name, c.arguments) for c in calls[:1]] == [("weather.current", {"location": "Lisbon"})]
    assert len(calls) == 2, "the repeated call is dropped"
    assert calls[1].name == "weather.current" and calls[1].raw_arguments and not calls[1].arguments
    assert not any(c.from_text for c in calls), "guided calls are structured calls"


def test_only_templates_that_teach_tool_call_blocks_are_guided() -> None:
    assert template_supports_guiding("{% if tools %}<tools>{{ tools }}</tools> <tool_call>{% endif %}")
    assert not template_supports_guiding("{{ messages }} [TOOL_CALLS]")
