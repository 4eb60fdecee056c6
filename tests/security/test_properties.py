"""Property-based: whatever a model writes, whatever arguments it sends, whatever a cortana.yml holds.

1,000 generated inputs each, each within 2 s; the only exceptions allowed are the documented
ones (``ToolArgumentsError`` for arguments, ``ConfigError`` for settings).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortana import ConfigError, SchemaTool, tool
from cortana.config import load_settings
from cortana.models.answer import AnswerBuilder
from cortana.models.base import ToolSpec
from cortana.models.toolparse import TextToolCallFilter, recover_tool_calls
from cortana.tools import ToolArgumentsError

RUNS = settings(max_examples=1000, deadline=timedelta(seconds=2), suppress_health_check=[HealthCheck.too_slow])
"""1,000 inputs, each within 2 s: generous for a loaded machine, far below what a quadratic reader would take."""
SPECS = [
    ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolSpec("fs.read", "Read.", {"type": "object", "properties": {"path": {"type": "string"}}}),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
names = st.sampled_from(["get_weather", "fs.read", "fs_read", "GET_WEATHER", "unknown", "", "get_weather("])
wrappers = st.sampled_from(
    ["{}", "<tool_call>{}</tool_call>", "```json\n{}\n```", "```\n{}", "<tools>{}", "[{}]", "{{{}}}"]
)


@st.composite
def model_texts(draw: st.DrawFn) -> str:
    """Text as a small model writes it: prose, and things shaped like tool calls, broken or not."""
    call = {"name": draw(names), draw(st.sampled_from(["arguments", "parameters", "args"])): draw(json_values)}
    shaped = draw(wrappers).replace("{}", json.dumps(call), 1)
    cut = draw(st.integers(min_value=0, max_value=len(shaped)))
    python = f"{draw(names)}(city={draw(json_values)!r})"
    parts = draw(st.lists(st.sampled_from([shaped, shaped[:cut], python, draw(st.text(max_size=40))]), max_size=4))
    return draw(st.sampled_from(["", "\n", " "])).join(parts)


@RUNS
@given(text=model_texts() | st.text(max_size=300))
def test_recovering_calls_from_any_text_never_raises(text: str) -> None:
    remaining, calls = recover_tool_calls(text, SPECS)
    assert isinstance(remaining, str)
    for call in calls:
        assert isinstance(call.arguments, dict)
        # an offered tool, or a plain name the loop will answer with "Unknown tool" (never run)
        assert call.name in ("get_weather", "fs.read") or re.fullmatch(r"[A-Za-z_][\w.\-]{0,63}", call.name)


def characters(text: str) -> Counter[str]:
    """The text's characters less whitespace: where a call is cut out, the spaces, newlines or
    carriage returns around it may go with it."""
    return Counter("".join(text.split()))


@RUNS
@given(text=model_texts(), cuts=st.lists(st.integers(min_value=1, max_value=30), max_size=10))
def test_streaming_any_text_in_any_pieces_never_raises(text: str, cuts: list[int]) -> None:
    builder = AnswerBuilder(SPECS)
    shown, position = [], 0
    for size in [*cuts, len(text)]:
        shown += [event.text for event in builder.add_text(text[position : position + size])]
        position += size
    tail, message = builder.finish()
    seen = "".join(shown) + tail
    assert seen == message.content or not (characters(message.content) - characters(seen)), (
        "every character of the answer's text reaches the screen; only calls are cut out"
    )
    stream_filter = TextToolCallFilter(SPECS)
    assert isinstance(stream_filter.feed(text) + stream_filter.flush(), str)


@tool
def typed(
    city: str, days: int = 1, units: Literal["c", "f"] = "c", tags: list[str] | None = None, when: float = 0.0
) -> str:
    """A tool with the argument types models get wrong."""
    return city


SCHEMA = SchemaTool(
    "schema",
    "A tool defined by a JSON schema.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "ok": {"type": "boolean"},
            "units": {"enum": ["c", "f"]},
            "nested": {"type": "object"},
            "either": {"type": ["number", "null"]},
        },
        "required": ["city"],
    },
    lambda **arguments: arguments,
)
argument_dicts = st.dictionaries(
    st.sampled_from(["city", "days", "units", "tags", "when", "ok", "nested", "either", "extra"]),
    json_values,
    max_size=6,
)


@RUNS
@given(arguments=argument_dicts)
def test_validating_any_arguments_gives_arguments_or_a_tool_error(arguments: dict[str, Any]) -> None:
    for candidate in (typed, SCHEMA):
        try:
            validated = candidate.validate(arguments)
        except ToolArgumentsError as exc:
            assert f"Invalid arguments for tool '{candidate.name}'" in str(exc)
        else:
            assert isinstance(validated, dict)


@RUNS
@given(arguments=argument_dicts)
def test_coercion_is_lossless(arguments: dict[str, Any]) -> None:
    try:
        validated = SCHEMA.validate(arguments)
    except ToolArgumentsError:
        return
    days = arguments.get("days")
    if days is not None:
        assert _exact(validated["days"]) == _exact(days), "an integer is what was sent, or a string of it"


def _exact(value: Any) -> Decimal:
    """A number's exact value (``float()`` would round integers past 2**53, as hypothesis once found)."""
    if isinstance(value, bool):
        return Decimal(int(value))
    return Decimal(value.strip() if isinstance(value, str) else value)


settings_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**6), max_value=10**6) | st.text(max_size=15),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=15,
)
keys = st.sampled_from(
    ["engine", "model", "base_url", "context_window", "threads", "temperature", "agent", "tools", "memory",
     "mcp", "permissions", "parallel", "api_key", "unknown"]
)  # fmt: skip


@st.composite
def config_texts(draw: st.DrawFn) -> str:
    """A cortana.yml: plausible keys with any values, or any text at all."""
    if draw(st.booleans()):
        return draw(st.text(max_size=200))
    return yaml.safe_dump(draw(st.dictionaries(keys, settings_values, max_size=6)))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("properties")


@RUNS
@given(text=config_texts())
def test_loading_any_cortana_yml_gives_settings_or_a_config_error(workspace: Path, text: str) -> None:
    (workspace / "cortana.yml").write_text(text, encoding="utf-8")
    try:
        load_settings(workspace, environ={}, trust=lambda request: False)
    except ConfigError as exc:
        assert str(exc).startswith(str(workspace / "cortana.yml")) and len(str(exc)) < 1_000
