"""Reasoning a server leaves in the answer's text is thinking, not the answer, and a call drafted in it never runs.

Servers that do not parse a thinking model's reasoning send it as text: llama-server with
``--reasoning-format none`` (its README: "leaves thoughts unparsed in message.content"), vLLM without a
reasoning parser, LM Studio with its separation off, an Ollama model imported without its thinking template.
The wire tests reuse the framing of real captures (tests/fixtures/llamacpp, tests/fixtures/ollama) with the
text such a server sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cortana import Message
from cortana.messages import Usage
from cortana.models.answer import AnswerBuilder
from cortana.models.base import ModelEvent, ModelRequest, ModelResponse, TextDelta, ThinkingDelta, ToolSpec
from cortana.models.ollama import OllamaClient
from cortana.models.openai_compat import OpenAICompatClient
from tests.wire import FIXTURES, Reply, WireServer

WEATHER = ToolSpec(
    "get_weather",
    "Get the weather in a given city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
DRAFT = 'I could call <tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call> but no.'
OPENED = f"<think>\nThe user asks for the capital. {DRAFT}\n</think>\n\nParis is the capital of France."
LLAMA = FIXTURES / "llamacpp"
LONE = f"The template opened my thinking. {DRAFT}\n</think>\n\nParis is the capital of France."


def fed(text: str, size: int, tools: list[ToolSpec] | None = None) -> tuple[str, str, Message, list[ModelEvent]]:
    """``text`` given to a builder ``size`` characters at a time: (text shown, thinking shown, message, events)."""
    builder = AnswerBuilder(tools or [])
    events: list[ModelEvent] = []
    for start in range(0, len(text), size):
        events += builder.add_text(text[start : start + size])
    *tail, response = builder.final_events(Usage(), "stop", "m")
    assert isinstance(response, ModelResponse)
    events += tail
    shown = "".join(event.text for event in events if isinstance(event, TextDelta))
    thought = "".join(event.text for event in events if isinstance(event, ThinkingDelta))
    return shown, thought, response.message, events


@pytest.mark.parametrize("size", [1, 2, 5, 8, 1000])
def test_an_answer_that_opens_with_think_streams_its_reasoning_as_thinking(size: int) -> None:
    shown, thought, message, events = fed(OPENED, size, [WEATHER])
    assert shown == message.content == "Paris is the capital of France."
    assert message.thinking == thought and "The user asks for the capital." in thought and DRAFT in thought
    assert message.tool_calls == [], "a call drafted while thinking is never run"
    assert "<think>" not in thought + shown and "</think>" not in thought + shown
    first_text = next(index for index, event in enumerate(events) if isinstance(event, TextDelta))
    assert all(isinstance(event, ThinkingDelta) for event in events[:first_text]), "the thinking comes first"


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_a_lone_closing_tag_ends_thinking_the_prompt_opened(size: int) -> None:
    """DeepSeek-R1's distills and QwQ: the template writes ``<think>`` into the prompt, so only the close is
    sent. Known only at the end: it streamed as text, but the stored answer and its calls leave it out."""
    _, _, message, _ = fed(LONE, size, [WEATHER])
    assert message.content == "Paris is the capital of France."
    assert message.thinking is not None and DRAFT in message.thinking
    assert message.tool_calls == []


@pytest.mark.parametrize(
    "text",
    [
        'To drop reasoning: `text.split("</think>")[-1]`, then strip it.',  # the tag in code
        "A model ends its reasoning with </think> and then answers.",  # the tag in a sentence
        "<thead><tr><td>1</td></tr></thead>",  # a tag that starts like it
        "  <th>not thinking</th>",
        "Answer first.\n<think>\nnot at the start, so not reasoning\n</think>",
        "   ",
    ],
)
@pytest.mark.parametrize("size", [1, 4, 1000])
def test_text_that_only_looks_like_it_is_the_answer_whole(text: str, size: int) -> None:
    shown, thought, message, _ = fed(text, size)
    assert (shown, thought, message.content, message.thinking) == (text, "", text, None)


def test_a_stream_cut_inside_thinking_keeps_the_thinking_and_no_answer() -> None:
    shown, thought, message, _ = fed("<think>\nStill weighing Lima and Pa", 3)
    assert (shown, message.content) == ("", "")
    assert thought == message.thinking == "\nStill weighing Lima and Pa"


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


def llama_chunks(pieces: list[str]) -> list[str]:
    """SSE lines as llama-server sends a streamed answer (a real capture's lines, in its framing), with ``pieces``
    as its content deltas in place of the captured ones."""
    captured = [line for line in (LLAMA / "q05_chat_plain_stream.sse.txt").read_text().splitlines() if line]
    contents = [index for index, line in enumerate(captured) if '"delta":{"content":"' in line]
    chunk = json.loads(captured[contents[0]].removeprefix("data: "))
    lines = []
    for piece in pieces:
        chunk["choices"][0]["delta"] = {"content": piece}
        lines.append("data: " + json.dumps(chunk, separators=(",", ":"), ensure_ascii=False))
    return [*captured[: contents[0]], *lines, *captured[contents[-1] + 1 :]]


async def test_a_server_without_a_reasoning_parser(wire: WireServer) -> None:
    """llama-server ``--reasoning-format none`` (or vLLM, LM Studio) behind ``engine: openai``."""
    draft = [DRAFT[:20], DRAFT[20:]]
    pieces = ["<th", "ink>\nThe user", " asks for the capital. ", *draft, "\n</th", "ink>\n\n", "Paris", "."]
    reply = Reply(lines=llama_chunks(pieces), content_type="text/event-stream", line_end="\n\n")
    wire.add("POST", "/v1/chat/completions", reply)
    client = OpenAICompatClient("qwq", base_url=wire.start() + "/v1")
    request = ModelRequest([Message.user("Capital of France?")], tools=[WEATHER])
    events = [event async for event in client.stream(request)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.content == "Paris." and final.message.tool_calls == []
    assert final.message.thinking is not None and DRAFT in final.message.thinking
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Paris."
    assert final.usage.completion_tokens == 12, "the capture's usage chunk still ends the stream"
    await client.aclose()


async def test_ollama_model_without_its_thinking_template(wire: WireServer) -> None:
    recorded = json.loads((FIXTURES / "ollama" / "chat_plain_stream.json").read_text())["response"]["stream"]
    first, done = json.loads(recorded[0]), recorded[-1]
    lines = []
    for piece in ["<think>", "\nLima or Paris?", " Paris.\n", "</think>", "\n\n", "Paris", "."]:
        chunk = dict(first, message={"role": "assistant", "content": piece})
        # Go's json.Marshal escapes < and > as \u003c and \u003e
        lines.append(json.dumps(chunk, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e"))
    wire.add("POST", "/api/chat", Reply(lines=[*lines, done], content_type="application/x-ndjson"))
    client = OllamaClient("my-imported-qwen3", base_url=wire.start())
    events = [event async for event in client.stream(ModelRequest([Message.user("Capital of France?")]))]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert (final.message.content, final.message.thinking) == ("Paris.", "\nLima or Paris? Paris.\n")
    assert [type(e) for e in events[:-1]] == [ThinkingDelta, ThinkingDelta, TextDelta, TextDelta]
    await client.aclose()
