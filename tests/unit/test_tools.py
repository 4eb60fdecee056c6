"""Tools from functions: schema, docstrings, context injection, validation, groups."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from cortana import Agent, RunContext, RunMetrics, ThreadRef, Tool, ToolGroup, UserError, tool
from cortana.tools import ToolArgumentsError, format_tool_result
from cortana.tools.docstrings import parse_docstring


def get_forecast(city: str, days: int = 3, unit: Literal["C", "F"] = "C", ctx: RunContext | None = None) -> str:
    """Get the weather forecast for a city.

    Uses the national weather service.

    Args:
        city: Name of the city, e.g. "Paris".
        days: How many days ahead,
            between 1 and 7.
        unit: Temperature unit.
    """
    return f"{city}:{days}{unit}"


def test_schema_comes_from_type_hints_and_docstring() -> None:
    t = Tool(get_forecast)
    assert t.name == "get_forecast"
    assert t.description == "Get the weather forecast for a city. Uses the national weather service."
    props = t.parameters["properties"]
    assert set(props) == {"city", "days", "unit"}, "the RunContext parameter must not be in the schema"
    assert props["city"] == {"type": "string", "description": 'Name of the city, e.g. "Paris".'}
    assert props["days"]["type"] == "integer" and props["days"]["default"] == 3
    assert props["days"]["description"] == "How many days ahead, between 1 and 7."
    assert props["unit"]["enum"] == ["C", "F"]
    assert t.parameters["required"] == ["city"]
    assert "title" not in t.parameters and "title" not in props["city"]


async def test_context_is_injected() -> None:
    seen = []

    def whoami(ctx: RunContext) -> str:
        """Say which thread this is."""
        seen.append(ctx)
        return ctx.thread.thread_id

    t = Tool(whoami)
    assert t.parameters["properties"] == {}
    context = RunContext(thread=ThreadRef(thread_id="t-42"), metrics=RunMetrics(), messages=[], agent=Agent().handle())
    assert await t.invoke({}, context) == "t-42"
    assert seen == [context]


def test_validation_coerces_losslessly_and_explains_errors() -> None:
    t = Tool(get_forecast)
    assert t.validate({"city": "Oslo", "days": "5"})["days"] == 5
    with pytest.raises(ToolArgumentsError) as info:
        t.validate({"days": "soon", "unit": "K"})
    message = str(info.value)
    assert "Invalid arguments for tool 'get_forecast'" in message
    assert "- city: Field required" in message
    assert "- days:" in message and '"soon"' in message
    assert "- unit:" in message
    assert "Call 'get_forecast' again" in message


def test_decorator_forms() -> None:
    @tool
    def plain(x: int) -> int:
        """Double x."""
        return 2 * x

    @tool(name="fs.read", read_only=True, description="Read it.")
    def read(path: str) -> str:
        return path

    assert isinstance(plain, Tool) and plain(4) == 8
    assert read.name == "fs.read" and read.read_only and read.description == "Read it."


def test_bad_tool_definitions_are_clear() -> None:
    def star(*args: int) -> None: ...

    with pytest.raises(UserError, match="named, typed parameters"):
        Tool(star)
    with pytest.raises(UserError, match="not allowed"):
        Tool(lambda: None, name="has space")
    with pytest.raises(UserError, match="needs a callable"):
        Tool("nope")  # type: ignore[arg-type]


async def test_sync_and_async_tools_both_run() -> None:
    async def a(x: int) -> int:
        return x + 1

    def s(x: int) -> int:
        return x + 2

    assert await Tool(a).invoke({"x": 1}) == 2
    assert await Tool(s).invoke({"x": 1}) == 3


def test_tool_results_become_text() -> None:
    class Point(BaseModel):
        x: int

    assert format_tool_result("hi") == "hi"
    assert format_tool_result(None) == "(no output)"
    assert format_tool_result(Point(x=1)) == '{"x":1}'
    assert format_tool_result({"a": [1, "é"]}) == '{"a": [1, "é"]}'
    assert format_tool_result({"p": Point(x=2)}) == '{"p": {"x": 2}}'


def test_group_wraps_callables() -> None:
    def one() -> str:
        """One."""
        return "1"

    group = ToolGroup("numbers", "Number tools", [one])
    assert isinstance(group.tools[0], Tool)
    with pytest.raises(UserError):
        ToolGroup("bad name", "x", [])


def test_docstring_styles() -> None:
    assert parse_docstring(":param q: what to find\n:param int n: how many\n:returns: hits") == (
        "",
        {"q": "what to find", "n": "how many"},
    )
    doc = "Numpy.\n\nParameters\n----------\nx : int\n    The x.\n\nReturns\n-------\nint\n"
    assert parse_docstring(doc) == ("Numpy.", {"x": "The x."})
    assert parse_docstring(None) == ("", {})
