"""The guided path without an engine: watching a free answer open a call, and the whole flow over loopback.

The loopback replies are real captures of llama.cpp's ``/completion`` serving the bundled 0.5B model
(tests/fixtures/llamacpp/q05_completion_*); the path also runs on the live engine in
tests/integration/test_guided_calls.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from cortana.errors import ModelError
from cortana.messages import Message
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, TextDelta, ToolSpec, complete
from cortana.models.guided import CallOpening
from cortana.models.llamacpp import LlamaCppClient
from tests.wire import FIXTURES, Reply, WireServer

LLAMA = FIXTURES / "llamacpp"

NAMES = ["weather_current", "fs.read"]


def feed(opening: CallOpening, text: str, size: int = 3) -> list[str | None]:
    """Feed ``text`` in small pieces, as a stream arrives; what each piece returned."""
    return [opening.feed(text[i : i + size]) for i in range(0, len(text), size)]


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{\n  "name": "weather_current",\n  "arguments": {"location": "Lisbon"}\n}\n```',
        '<tool_call>\n{"name": "weather_current", "arguments": {}}\n</tool_call>',
        '  {"name": "weather_current", "arguments": {"location": "Lisbon"}}',
        '[{"name": "weather_current", "arguments": {}}]',
        "<function=weather_current>{}</function>",
    ],
)
def test_a_call_of_an_offered_tool_is_seen_as_soon_as_its_name_is_complete(answer: str) -> None:
    opening = CallOpening(NAMES)
    seen = feed(opening, answer)
    assert opening.tool == "weather_current"
    first = seen.index("weather_current")
    consumed = 3 * (first + 1)
    assert consumed < len(answer), "the rest of the free answer is not waited for"
    assert all(value is None for value in seen[:first])


def test_names_are_matched_loosely_as_small_models_write_them() -> None:
    opening = CallOpening(NAMES)
    feed(opening, '{"name": "fs_read", "arguments": {"path": "a"}}')
    assert opening.tool == "fs.read"


@pytest.mark.parametrize(
    "answer",
    [
        "Lisbon is sunny today.",
        'Sure! Here is the call:\n```json\n{"name": "weather_current"}\n```',
        '{"name": "slugify", "arguments": {"text": "x"}}',  # no such tool: the recovery's unknown-tool error
        "{" + " " * 500 + "}",
    ],
)
def test_prose_and_calls_of_other_tools_are_left_to_the_text_path(answer: str) -> None:
    opening = CallOpening(NAMES)
    seen = feed(opening, answer)
    assert opening.tool is None and opening.done
    assert set(seen) == {None}


def test_leading_whitespace_decides_nothing() -> None:
    opening = CallOpening(NAMES)
    assert opening.feed("\n  ") is None and not opening.done
    assert opening.feed("`") is None and not opening.done


# -- the whole guided answer over loopback, against real llama.cpp captures ------------------------------------


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


WEATHER = ToolSpec(
    "get_weather",
    "Get the weather in a given city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


async def guided_client(wire: WireServer, *completions: Reply) -> LlamaCppClient:
    """A client connected to captures of llama.cpp serving the 0.5B model, answering ``completions`` in turn."""
    wire.add("GET", "/health", Reply(body=(LLAMA / "q05_health.json").read_bytes()))
    wire.add("GET", "/props", Reply(body=(LLAMA / "q05_props.json").read_bytes()))
    wire.add("GET", "/slots", Reply(body=(LLAMA / "q05_slots.json").read_bytes()))
    wire.add("POST", "/apply-template", Reply.json({"prompt": (LLAMA / "q05_guided_prompt.txt").read_text()}))
    wire.add("POST", "/completion", *completions)
    return await LlamaCppClient(base_url=wire.start()).connect()


TRIANGLE = "What's the area of a triangle with sides 3, 4 and 5?"
"""The question of the no-fit capture (``q05_completion_check_nofit.json``)."""


def weather_request(prompt: str = "What's the weather in Paris?") -> ModelRequest:
    return ModelRequest([Message.user(prompt)], tools=[WEATHER], settings=ModelSettings(temperature=0, seed=7))


async def test_a_call_opened_freely_is_written_under_the_grammar_and_checked(wire: WireServer) -> None:
    client = await guided_client(
        wire,
        Reply.sse_file(LLAMA / "q05_completion_free_call.sse.txt"),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check.json").read_bytes()),
    )
    client.guided.verify_margin = -0.386  # the bundled 0.5B model's threshold: the capture's margin is -0.68
    assert client.guides_tool_calls
    events = [event async for event in client.stream(weather_request())]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    [call] = final.message.tool_calls
    assert (call.name, call.arguments, call.from_text) == ("get_weather", {"city": "Paris"}, False)
    assert not [e for e in events if isinstance(e, TextDelta) and e.text.strip()], "the call never shows as text"
    # Every request of the answer counted: the written call read 12 new tokens (171 cached), the check, captured on
    # a cold engine, 219; the free start's capture has no per-piece timings (taken before they were asked for).
    assert (final.usage.prompt_tokens - final.usage.cached_tokens, final.usage.completion_tokens) == (231, 15)
    free, written, check = wire.bodies("/completion")
    assert free["timings_per_token"] is True, "the free start's usage is known even when it is dropped early"
    assert "grammar" not in free, "the model starts freely"
    assert written["prompt"].endswith('<tool_call>\n{"name": "get_weather", "arguments":')
    assert 'root ::= sp args-get-weather "}\\n</tool_call>"' in written["grammar"]
    assert check["grammar"] == 'root ::= "yes" | "no" | "Yes" | "No"' and check["temperature"] == 0
    [_, check_render] = wire.bodies("/apply-template")
    asked = check_render["messages"][-1]["content"]
    assert "get_weather, which does this: Get the weather in a given city" in asked, "the check shows the tool"
    await client.aclose()


async def test_a_rejected_call_becomes_a_prose_answer(wire: WireServer, caplog: pytest.LogCaptureFixture) -> None:
    client = await guided_client(
        wire,
        Reply.sse_file(LLAMA / "q05_completion_free_call.sse.txt"),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check_nofit.json").read_bytes()),
        Reply.sse_file(LLAMA / "q05_completion_prose.sse.txt"),
    )
    # get_weather(city="Paris") for a triangle's area: the model's first word is still "Yes" (-0.73)
    # but "No" is close (-0.87), a margin of -0.14, at or above the 0.5B model's threshold.
    client.guided.verify_margin = -0.386
    caplog.set_level(logging.INFO, logger="cortana.models.guided")
    events = [event async for event in client.stream(weather_request(TRIANGLE))]
    assert "the check turned away get_weather (margin -0.1" in caplog.text, "a turned-away call leaves a trace"
    final = events[-1]
    assert isinstance(final, ModelResponse) and not final.message.tool_calls
    assert final.message.content.startswith("Here is")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == final.message.content
    prose = wire.bodies("/completion")[-1]
    assert prose["grammar"].startswith("root ::= [^{`<"), "the answer may not open as a call"
    told = wire.bodies("/apply-template")[-1]["messages"][-1]
    assert told["role"] == "user" and "None of the tools" in told["content"]
    await client.aclose()


async def test_a_prose_answer_streams_as_it_comes_with_one_request(wire: WireServer) -> None:
    client = await guided_client(wire, Reply.sse_file(LLAMA / "q05_completion_prose.sse.txt"))
    events = [event async for event in client.stream(weather_request("Say hello in French."))]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert len(wire.bodies("/completion")) == 1
    assert [e for e in events if isinstance(e, TextDelta)], "prose is streamed"
    assert final.finish_reason == "length", "the capture stopped at its n_predict limit"
    await client.aclose()


async def test_a_named_tool_is_written_at_once_without_a_free_start(wire: WireServer) -> None:
    client = await guided_client(wire, Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"))
    request = weather_request()
    request.settings.tool_choice = "get_weather"
    events = [event async for event in client.stream(request)]
    final = events[-1]
    assert isinstance(final, ModelResponse) and [c.name for c in final.message.tool_calls] == ["get_weather"]
    assert len(wire.bodies("/completion")) == 1, "no free start, no check: the caller chose the tool"
    await client.aclose()


async def test_guiding_off_uses_the_chat_api(wire: WireServer) -> None:
    wire.add("POST", "/v1/chat/completions", Reply.sse_file(LLAMA / "q05_chat_tools_stream.sse.txt"))
    client = await guided_client(wire)
    client.guided_tool_calls = False
    events = [event async for event in client.stream(weather_request())]
    assert isinstance(events[-1], ModelResponse) and events[-1].message.tool_calls[0].from_text
    assert not wire.bodies("/completion")
    await client.aclose()


async def test_an_engine_that_ignores_the_grammar_is_a_clear_error(wire: WireServer) -> None:
    client = await guided_client(wire, Reply.json({"content": "maybe", "stop": True}))
    request = weather_request()
    request.settings.tool_choice = "required"
    request.tools = [WEATHER, ToolSpec("other", "Other.", {"type": "object", "properties": {}})]
    with pytest.raises(ModelError, match=r"ignored the grammar.*guided tool calls off"):
        await complete(client, request)
    await client.aclose()


async def test_an_error_mid_stream_is_reported(wire: WireServer) -> None:
    error = Reply(lines=['data: {"error": {"code": 500, "message": "boom", "type": "server_error"}}'])
    error.content_type, error.line_end = "text/event-stream", "\n\n"
    client = await guided_client(wire, error)
    with pytest.raises(ModelError, match="boom"):
        await complete(client, weather_request())
    await client.aclose()


async def test_a_check_margin_rejects_a_yes_the_model_was_not_sure_of(wire: WireServer) -> None:
    # The capture's first word: "Yes" -0.50, "No" -1.18 (log-probabilities; both spellings summed, a margin
    # of -0.68): a yes the model's own answer and the 0.5B threshold accept, a stricter threshold does not.
    client = await guided_client(
        wire,
        Reply.sse_file(LLAMA / "q05_completion_free_call.sse.txt"),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check.json").read_bytes()),
        Reply.sse_file(LLAMA / "q05_completion_prose.sse.txt"),
    )
    client.guided.verify_margin = -1.0
    final = await complete(client, weather_request())
    assert not final.message.tool_calls and final.message.content
    assert LlamaCppClient(check_margin=-1.19).guided.verify_margin == -1.19
    assert LlamaCppClient().guided.verify_margin is None, "a model nobody measured: its own yes or no"
    await client.aclose()


def test_the_check_shows_each_call_with_what_its_tool_does() -> None:
    from cortana.messages import ToolCall
    from cortana.models.guided import described

    tools = [
        ToolSpec("weather_current", "Current weather\n  for a city.", {"type": "object"}),
        ToolSpec("fs.read", "Read a file. " + "x" * 1000, {"type": "object"}),
    ]
    request = ModelRequest(messages=[Message.user("Weather in Lisbon?")], tools=tools)
    one = described(request, [ToolCall(id="1", name="weather_current", arguments={"location": "Lisbon"})])
    assert (
        one
        == 'weather_current, which does this: Current weather for a city.\nwith these arguments: {"location": "Lisbon"}'
    )

    several = described(
        request,
        [
            ToolCall(id="1", name="weather_current", arguments={}),
            ToolCall(id="2", name="fs.read", arguments={"path": "a.txt"}),
        ],
    )
    lines = several.splitlines()
    assert lines[0] == "these tools:"
    assert lines[1].startswith("- weather_current, which does this:")
    assert lines[3].startswith("- fs.read, which does this: Read a file. xxx")
    assert len(lines[3]) < 460  # a long description is cut: the check's prompt stays small
    assert lines[4] == '  with these arguments: {"path": "a.txt"}'

    big = described(request, [ToolCall(id="1", name="fs.read", arguments={"text": "y" * 10_000, "n": 3})])
    assert len(big) < 1_000 and '"n": 3' in big, "a file's whole content is not shown again"
    many = described(request, [ToolCall(id="1", name="fs.read", arguments={"lines": ["z" * 400] * 50})])
    assert len(many) < 2_600 and many.endswith(" ..."), "nor are many long values"

    unknown = described(request, [ToolCall(id="1", name="nope", arguments={})])
    assert "(no description)" in unknown


async def test_a_conversation_slot_holds_every_guided_request(wire: WireServer) -> None:
    """The embedded engine keeps one conversation's prompt cache in slot 0 and saves it for the next process: a
    guided request that went to whatever slot was free left slot 0 empty, and the next process read it all again."""
    client = await guided_client(
        wire,
        Reply.sse_file(LLAMA / "q05_completion_free_call.sse.txt"),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check.json").read_bytes()),
    )
    client.guided.slot = 0
    await complete(client, weather_request())
    bodies = wire.bodies("/completion")
    assert len(bodies) == 3 and all(body["id_slot"] == 0 and body["cache_prompt"] for body in bodies)
    await client.aclose()


async def test_a_call_opened_then_turned_away_counts_what_every_request_read(wire: WireServer) -> None:
    """The free start read the prompt, then was dropped at the call's opening, before its final timings: the
    answer's usage once showed only the prose request's few new tokens (39 read, where 1,800 were)."""

    def piece(content: str, predicted: int) -> str:
        timings = {"cache_n": 20, "prompt_n": 163, "predicted_n": predicted}  # as timings_per_token sends them
        return "data: " + json.dumps({"content": content, "stop": False, "timings": timings})

    free = [piece(text, n) for n, text in enumerate(['<tool_call>\n{"name": "get_weather"', ", "], 1)]
    client = await guided_client(
        wire,
        Reply(lines=free, content_type="text/event-stream", line_end="\n\n"),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check.json").read_bytes()),
        Reply.sse_file(LLAMA / "q05_completion_prose.sse.txt"),
    )
    client.guided.verify_margin = -5.0  # turned away: the capture's margin is -0.68
    final = (await complete(client, weather_request(TRIANGLE))).usage
    assert final.prompt_tokens - final.cached_tokens >= 163 + 12 + 219, "the free start's 163, the call's, the check's"
    await client.aclose()


def free_answer_lines(pieces: list[str]) -> list[str]:
    """A free start streamed as llama.cpp's /completion does, its last event taken from the prose capture."""
    captured = [line for line in (LLAMA / "q05_completion_prose.sse.txt").read_text().splitlines() if line.strip()]
    last = json.loads(captured[-1].removeprefix("data: "))
    last |= {"content": "", "stop": True, "stop_type": "eos", "tokens_predicted": len(pieces)}
    events = [{"index": 0, "content": piece, "stop": False, "id_slot": -1} for piece in pieces]
    return [f"data: {json.dumps(event)}" for event in [*events, last]]


async def test_a_free_start_that_calls_a_tool_not_offered_is_never_written_under_the_grammar(
    wire: WireServer,
) -> None:
    pieces = ['{"', "name", '":', ' "', "triangle", "_area", '",', ' "arguments', '":', ' {"base": 10, "height": 5}}']
    answer = Reply(lines=free_answer_lines(pieces), content_type="text/event-stream", line_end="\n\n")
    client = await guided_client(wire, answer)
    events = [event async for event in client.stream(weather_request("Area of a triangle, base 10 and height 5?"))]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    [call] = final.message.tool_calls
    assert (call.name, call.arguments, call.from_text) == ("triangle_area", {"base": 10, "height": 5}, True)
    assert len(wire.bodies("/completion")) == 1, "no grammar and no check for a tool that was not offered"
    assert not [e for e in events if isinstance(e, TextDelta) and e.text.strip()], "the call never shows as text"
    await client.aclose()


async def test_the_loop_never_starts_the_invented_call_and_asks_for_prose(wire: WireServer) -> None:
    from cortana import Agent

    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Get the weather in a given city"""
        ran.append(city)
        return "sunny"

    pieces = ['{"name": "triangle_area", "arguments": {"base": 10, "height": 5}}']
    answer = Reply(lines=free_answer_lines(pieces), content_type="text/event-stream", line_end="\n\n")
    client = await guided_client(wire, answer)
    wire.add("POST", "/v1/chat/completions", Reply(body=(LLAMA / "q05_chat_plain.json").read_bytes()))
    result = await Agent(client, tools=[get_weather]).run("Area of a triangle, base 10 and height 5?")
    assert not ran and result.metrics.unknown_tool_calls == 1 and result.metrics.tool_calls == 0
    [again] = wire.bodies("/v1/chat/completions")
    assert "tools" not in again, "asked again with no tool offered, through the chat API"
    assert "no tool named 'triangle_area'" in again["messages"][-1]["content"]
    assert result.output, "the prose answer is the turn's answer"
    await client.aclose()


def test_purpose_words_count_what_the_question_shares_with_what_the_tool_is_for() -> None:
    from cortana.models.guided import purpose_words

    bmi = "Body mass index from weight and height."
    assert purpose_words("Area of a triangle, base 10 and height 5?", "bmi", bmi) == 1  # "height" alone
    assert purpose_words("What is my body mass index? 70 kg, 1.75 m", "bmi", bmi) == 3
    assert purpose_words("What's the weather in Paris?", "get_weather", "Get the weather in a given city") == 1
    assert purpose_words("what is that", "show_values", "Show the values") == 0, "common words say nothing"


@pytest.mark.parametrize(("step", "kept"), [(0.0, False), (0.5, True)])
async def test_the_checks_threshold_rises_with_the_words_the_question_shares_with_the_tool(
    wire: WireServer, step: float, kept: bool
) -> None:
    client = await guided_client(
        wire,
        Reply.sse_file(LLAMA / "q05_completion_free_call.sse.txt"),
        Reply.sse_file(LLAMA / "q05_completion_call.sse.txt"),
        Reply(body=(LLAMA / "q05_completion_check.json").read_bytes()),
        Reply.sse_file(LLAMA / "q05_completion_prose.sse.txt"),
    )
    # The capture's margin is -0.68; "weather" is the one word the question shares with get_weather's purpose.
    client.guided.verify_margin, client.guided.purpose_step = -1.0, step
    final = [event async for event in client.stream(weather_request())][-1]
    assert isinstance(final, ModelResponse)
    assert [call.name for call in final.message.tool_calls] == (["get_weather"] if kept else [])
    await client.aclose()
