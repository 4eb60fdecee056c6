"""Guided tool calls on the real engine: the decision, grammars llama.cpp accepts, calls that match the schema.

Runs the embedded llama.cpp server on the bundled 0.5B model at temperature 0.
What the decision chooses depends on the model; these tests check what the
guiding guarantees whatever it chooses, and that the engine takes every
grammar Cortana builds (all 91 tools of the evaluation set).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cortana.messages import Message
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, ToolSpec, complete
from cortana.models.grammar import call_grammar, call_prefix
from cortana.models.guided import NO_TOOL
from cortana.models.llamacpp import LlamaCppClient
from cortana.tools import SchemaTool

SET = Path(__file__).resolve().parents[2] / "bench" / "toolcall_set"
GREEDY = ModelSettings(temperature=0, seed=7, max_tokens=120)

FLIGHTS = ToolSpec(
    "flight_search",
    "Search flights between two cities on a date.",
    {
        "type": "object",
        "properties": {
            "origin": {"type": "string", "description": "City or airport code."},
            "destination": {"type": "string", "description": "City or airport code."},
            "date": {"type": "string", "description": "YYYY-MM-DD"},
            "passengers": {"type": "integer", "description": "How many adults."},
            "cabin": {"type": "string", "enum": ["economy", "business", "first"]},
        },
        "required": ["origin", "destination", "date"],
    },
)
WEATHER = ToolSpec(
    "weather_current",
    "The current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
async def client(engine_url: str, engine_key: str) -> AsyncIterator[LlamaCppClient]:
    connected = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    yield connected
    await connected.aclose()


def request(prompt: str, tools: list[ToolSpec], **settings: object) -> ModelRequest:
    return ModelRequest(
        [Message.system("You are a helpful assistant."), Message.user(prompt)],
        tools=tools,
        settings=ModelSettings(temperature=0, seed=7, max_tokens=120, **settings),  # type: ignore[arg-type]
    )


async def test_the_bundled_template_is_guided(client: LlamaCppClient, engine_key: str) -> None:
    assert client.guides_tool_calls
    off = await LlamaCppClient(base_url=client.base_url, api_key=engine_key, guided_tool_calls=False).connect()
    assert not off.guides_tool_calls
    await off.aclose()


async def test_a_forced_tool_gets_a_structured_call_that_validates(client: LlamaCppClient) -> None:
    asked = request(
        "Find me business class flights from Boston to Dublin on 2025-05-09 for two people.",
        [WEATHER, FLIGHTS],
        tool_choice="flight_search",
    )
    response = await complete(client, asked)
    assert response.message.content == ""
    call = response.message.tool_calls[0]
    assert call.name == "flight_search" and not call.from_text
    tool = SchemaTool(FLIGHTS.name, FLIGHTS.description, FLIGHTS.parameters, lambda **_: "ok")
    arguments = tool.validate(call.arguments)  # the grammar's shape is the schema's shape
    assert set(arguments) >= {"origin", "destination", "date"}
    assert arguments.get("cabin", "business") in ("economy", "business", "first")
    assert isinstance(arguments.get("passengers", 2), int)


async def test_the_decision_names_an_offered_tool_or_none(client: LlamaCppClient) -> None:
    for prompt in ("What's the weather in Oslo?", "Write a haiku about autumn."):
        decision = await client.guided.decide(request(prompt, [WEATHER, FLIGHTS]))
        assert decision.choice in (NO_TOOL, "weather_current", "flight_search")
        assert decision.prompt_tokens > decision.new_tokens, "the decision reuses the cached conversation"


async def test_no_tool_means_prose_that_does_not_open_as_a_call(client: LlamaCppClient) -> None:
    events = [event async for event in client.guided.answer(request("Say hello.", [WEATHER]), NO_TOOL, "m")]
    final = events[-1]
    assert isinstance(final, ModelResponse) and not final.message.tool_calls
    assert final.message.content.strip() and final.message.content.lstrip()[0] not in "{`<"


async def test_required_never_answers_without_a_call(client: LlamaCppClient) -> None:
    response = await complete(client, request("Write a haiku about autumn.", [WEATHER], tool_choice="required"))
    first, *added = response.message.tool_calls
    assert first.name == "weather_current" and not first.extra
    assert all(call.extra for call in added), "calls after the first are marked: the loop checks them all"


async def test_tool_choice_none_takes_the_plain_chat_path(client: LlamaCppClient) -> None:
    response = await complete(client, request("What's the weather in Oslo?", [WEATHER], tool_choice="none"))
    # The 0.5B model may still write a call as text; only the chat path's text recovery finds one then.
    assert all(call.from_text for call in response.message.tool_calls)


async def test_the_engine_accepts_the_grammar_of_every_tool_in_the_evaluation_set(client: LlamaCppClient) -> None:
    specs = [
        ToolSpec(item["function"]["name"], item["function"]["description"], item["function"]["parameters"])
        for path in sorted(SET.glob("tools_*.json"))
        for item in json.loads(path.read_text())
    ]
    assert len(specs) >= 40
    for index in range(0, len(specs), 6):
        group = specs[index : index + 6]
        grammar = call_grammar(group, group[0].name, max_calls=3)
        data = await client.http.request_json(
            "POST",
            "/completion",
            json_body={"prompt": call_prefix(group[0].name), "grammar": grammar, "n_predict": 2, "temperature": 0},
        )
        assert data["tokens_predicted"] >= 1, [spec.name for spec in group]
