"""Recovering tool calls that small models write as text.

The first table holds real outputs of Qwen2.5-Coder 0.5B and 1.5B served by
llama.cpp (tests/fixtures/toolcalls/outputs.jsonl and the captures in
tests/fixtures/llamacpp); the second, shapes other models are known to write.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from cortana.models.answer import AnswerBuilder
from cortana.models.base import ToolSpec
from cortana.models.toolparse import TextToolCallFilter, recover_tool_calls

RECORDED = Path(__file__).parent.parent / "fixtures" / "toolcalls"
TOOLS = [
    ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
    for t in json.loads((RECORDED / "tools.json").read_text())
]


def calls_of(text: str) -> tuple[str, list[tuple[str, dict]]]:  # type: ignore[type-arg]
    remaining, calls = recover_tool_calls(text, TOOLS)
    assert all(call.from_text for call in calls)
    return remaining, [(call.name, call.arguments) for call in calls]


REAL = [
    # (what the model wrote, verbatim) -> (text left, calls)
    (
        '{"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}',
        "",
        [("get_weather", {"city": "Tokyo", "unit": "celsius"})],
    ),
    (
        '```json\n{\n  "name": "fs.list_dir",\n  "arguments": {\n    "path": "/var/log"\n  }\n}\n```',
        "",
        [("fs.list_dir", {"path": "/var/log"})],
    ),
    (
        '```json\n{\n  "name": "fs.list_dir",\n  "arguments": {\n    "path": "/home/sam"\n  }\n}\n'
        '{\n  "name": "fs.list_dir",\n  "arguments": {\n    "path": "/tmp"\n  }\n}\n```',
        "",
        [("fs.list_dir", {"path": "/home/sam"}), ("fs.list_dir", {"path": "/tmp"})],
    ),
    (
        '{{"name": "send_email", "arguments": {"to": "landlord@rentals.net", "subject": "Kitchen Tap Leaking", "body": '
        '"I noticed that the kitchen tap is leaking. Please check it out."}}}',
        "",
        [
            (
                "send_email",
                {
                    "to": "landlord@rentals.net",
                    "subject": "Kitchen Tap Leaking",
                    "body": "I noticed that the kitchen tap is leaking. Please check it out.",
                },
            )
        ],
    ),
    (
        "To determine if you need an umbrella in London today, you can use the `get_weather` function. Here's how you "
        'can call it:\n\n```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "London",\n    "unit": '
        '"celsius"\n  }\n}\n```\n\nThis will return the current weather conditions for London in Celsius.',
        "To determine if you need an umbrella in London today, you can use the `get_weather` function. Here's how you "
        "can call it:\n\n\n\nThis will return the current weather conditions for London in Celsius.",
        [("get_weather", {"city": "London", "unit": "celsius"})],
    ),
    (
        '<tools>\n{"name": "get_weather", "arguments": {"city": "New York", "unit": "fahrenheit"}}\n</tools>',
        "",
        [("get_weather", {"city": "New York", "unit": "fahrenheit"})],
    ),
    ("<tools></tools>", None, []),
    (
        '{{"name": "Golden retriever puppy", "arguments": {"name": "Golden retriever puppy", "age": "1 year"}}}}',
        None,
        [],
    ),
    ('{"name": "Short Joke", "arguments": {"short_joke": "Why did the tomato turn red?"}}', None, []),
    ('```json\n{\n  "type": "file",\n  "path": "config/settings.yaml",\n  "required": ["path"]\n}\n```', None, []),
    ("Can you explain the difference between a list and a tuple in Python?", None, []),
    (
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n' * 12 + '{"name": "get_weather", "argu',
        "",
        [("get_weather", {"city": "Paris"})],
    ),
]


@pytest.mark.parametrize(("text", "left", "expected"), REAL)
def test_real_outputs(text: str, left: str | None, expected: list) -> None:  # type: ignore[type-arg]
    remaining, calls = calls_of(text)
    assert calls == expected
    assert remaining == (text if left is None else left)


SHAPES = [
    (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        [("get_weather", {"city": "Paris"})],
    ),
    (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "A"}}</tool_call>\n<tool_call>{"name": "calculate", '
        '"arguments": {"expression": "1+1"}}</tool_call>',
        [("get_weather", {"city": "A"}), ("calculate", {"expression": "1+1"})],
    ),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}', [("get_weather", {"city": "Oslo"})]),
    (
        '[{"name": "get_weather", "arguments": {"city": "A"}}, {"name": "get_weather", "arguments": {"city": "B"}}]',
        [("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})],
    ),
    ('<function=get_weather>{"city": "Lima"}</function>', [("get_weather", {"city": "Lima"})]),
    # the 1.5B's answer to a code question, as an element of the tool list it was shown (returned as its answer)
    (
        '<tools>\n    <function name="get_weather" arguments=\'{"city": "Lima", "unit": "celsius"}\'/>\n</tools>',
        [("get_weather", {"city": "Lima", "unit": "celsius"})],
    ),
    ('<function name="get_weather">{"city": "Lima"}</function>', [("get_weather", {"city": "Lima"})]),
    (
        '<function name="get_weather" arguments="{&quot;city&quot;: &quot;Oslo&quot;}" />',
        [("get_weather", {"city": "Oslo"})],
    ),
    (
        '<tools><function name="get_weather" arguments=\'{"city": "A"}\'/><function name="calculate" '
        'arguments=\'{"expression": "1+1"}\'/></tools>',
        [("get_weather", {"city": "A"}), ("calculate", {"expression": "1+1"})],
    ),
    ('get_weather(city="Paris", unit="celsius")', [("get_weather", {"city": "Paris", "unit": "celsius"})]),
    (
        '[get_weather("Rome"), fs.list_dir(path="/tmp")]',
        [("get_weather", {"city": "Rome"}), ("fs.list_dir", {"path": "/tmp"})],
    ),
    ("{'name': 'get_weather', 'arguments': {'city': 'Oslo',},  // the city\n}", [("get_weather", {"city": "Oslo"})]),
    ('{"name": "fs_list_dir", "arguments": {"path": "."}}', [("fs.list_dir", {"path": "."})]),
    ('{"name": "get_weather", "parameters": {"city": "Kyiv"}}', [("get_weather", {"city": "Kyiv"})]),
    ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Kyiv\\"}"}', [("get_weather", {"city": "Kyiv"})]),
    (
        '{"type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Bern\\"}"}}',
        [("get_weather", {"city": "Bern"})],
    ),
    ('{"name": "get_weather", "city": "Paris"}', [("get_weather", {"city": "Paris"})]),
    (
        '{"name": "convert_currency", "arguments": {"amount": "250", "from_currency": "USD", "to_currency": "EUR"}}',
        [("convert_currency", {"amount": "250", "from_currency": "USD", "to_currency": "EUR"})],
    ),
]


@pytest.mark.parametrize(("text", "expected"), SHAPES)
def test_other_shapes(text: str, expected: list) -> None:  # type: ignore[type-arg]
    assert calls_of(text)[1] == expected


@pytest.mark.parametrize(
    "text",
    [
        'Here is the JSON you asked for: {"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"name": "Ada", "arguments": {"age": 36}, "born": 1815}',  # data with a name, not a call
        '{"name": "delete everything", "arguments": {}}',  # not a tool name
        '{"name": "slugify", "arguments": "text"}',  # arguments that are not an object
        '```python\nget_weather(city="Paris")\n```\nThat is how you would call it in Python.',
        "The get_weather tool needs a city.",
        '{"city": "Paris", "temperature": 21}',
        "<function name=\"delete_everything\" arguments='{}'/>",  # not an offered tool
    ],
)
def test_prose_and_unknown_names_stay_text(text: str) -> None:
    assert calls_of(text) == (text, [])


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "slugify", "arguments": {"text": "Hello World"}}',
        '```json\n{"name": "slugify", "arguments": {"text": "Hello World"}}\n```',
        '<tool_call>\n{"name": "slugify", "arguments": {"text": "Hello World"}}\n</tool_call>',
    ],
)
def test_a_call_of_a_tool_that_was_not_offered_is_a_call_so_the_model_hears_it_is_unknown(text: str) -> None:
    """The 1.5B model "called" slugify, the function it was asked to write; that JSON must not be the answer."""
    assert calls_of(text) == ("", [("slugify", {"text": "Hello World"})])


def test_nothing_is_recovered_without_offered_tools() -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert recover_tool_calls(text, []) == (text, [])


def test_arguments_that_cannot_be_repaired_keep_the_raw_text() -> None:
    _, [call] = recover_tool_calls("<function=get_weather>city is Paris</function>", TOOLS)
    assert call.arguments == {} and call.raw_arguments == "city is Paris"


def stream(text: str, size: int = 3) -> tuple[str, list]:  # type: ignore[type-arg]
    builder = AnswerBuilder(TOOLS)
    events = [event for i in range(0, len(text), size) for event in builder.add_text(text[i : i + size])]
    shown = "".join(event.text for event in events)
    tail, message = builder.finish()
    return shown + tail, [(c.name, c.arguments) for c in message.tool_calls]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_streaming_never_shows_a_call_and_shows_all_prose(size: int) -> None:
    for text, _left, _calls in REAL[:5]:
        shown, calls = stream(text, size)
        assert "{" not in shown, f"a call flashed by as text: {shown!r}"
        assert calls == calls_of(text)[1]
    assert stream("Hello there, how are you?", size) == ("Hello there, how are you?", [])
    code = "Code:\n```python\nprint(1)\n```\nok"
    assert stream(code, size) == (code, [])
    assert stream('{"a": 1} is JSON', size) == ('{"a": 1} is JSON', [])
    assert stream("get the weather", size) == ("get the weather", [])


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_streaming_never_shows_a_function_element(size: int) -> None:
    for text in (
        '<tools>\n    <function name="get_weather" arguments=\'{"city": "Lima"}\'/>\n</tools>',
        'Let me look.\n<function name="get_weather" arguments=\'{"city": "Lima"}\'/>',
    ):
        shown, calls = stream(text, size)
        assert "function" not in shown and calls == [("get_weather", {"city": "Lima"})], shown
    assert stream("<function> is a tag", size) == ("<function> is a tag", [])


def test_streaming_prose_is_not_held_back() -> None:
    text_filter = TextToolCallFilter(TOOLS)
    assert text_filter.feed("The answer is ") == "The answer is "
    assert text_filter.feed("42.\nNext line") == "42.\nNext line"
    assert text_filter.feed("\n```js") == "\n"  # a fence: wait for its language
    assert text_filter.feed("on\n{") == ""  # a json fence: hold until it closes
    assert text_filter.feed('"a": 1}\n```\n') == '```json\n{"a": 1}\n```\n'


def _bench() -> object:
    folder = Path(__file__).parents[2] / "bench"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))  # the benchmarks import their shared report module
    path = folder / "toolcalls.py"
    spec = importlib.util.spec_from_file_location("bench_toolcalls", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recorded_success_rates_do_not_regress() -> None:
    table = _bench().score_recorded()  # type: ignore[attr-defined]
    small, large = table["qwen2.5-coder-0.5b / plain"], table["qwen2.5-coder-1.5b / plain"]
    assert small["right call: no recovery"] == large["right call: no recovery"] == 0
    assert small["right call: recovery"] >= 15 and large["right call: recovery"] == 24
    assert large["false call: recovery"] == 6
    assert large["false call: recovery + grounding"] <= 1 and large["right call: recovery + grounding"] == 24


WRITE = ToolSpec(
    "write_file",
    "Write a file.",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "mode": {"type": "integer"}},
        "required": ["path", "content"],
    },
)


def test_qwen3_coders_parameter_elements_are_arguments_typed_by_the_schema() -> None:
    # Qwen3-Coder's format (its chat template's own example): a string parameter's value is its text as written,
    # even when it looks like JSON; any other is JSON.
    text = (
        "I will write it.\n<tool_call>\n<function=write_file>\n<parameter=path>\nconfig.json\n</parameter>\n"
        '<parameter=content>\n{"debug": true}\nline two\n</parameter>\n<parameter=mode>\n644\n</parameter>\n'
        "</function>\n</tool_call>"
    )
    remaining, [call] = recover_tool_calls(text, [WRITE])
    assert remaining == "I will write it."
    assert call.arguments == {"path": "config.json", "content": '{"debug": true}\nline two', "mode": 644}
    # Without the <tool_call> around it, as some models write it.
    _, [bare] = recover_tool_calls("<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n</function>", [WRITE])
    assert bare.arguments == {"path": "a.txt"}
