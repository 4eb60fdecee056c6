"""Each catalogue family's own chat template, rendered, and its tool calls parsed on the wire (issue 66).

The templates are the models' own (tests/fixtures/templates, from the engine's source distribution), rendered
with Jinja as llama.cpp renders them. For the formats the guided path claims (a JSON object in ``<tool_call>``
tags: Qwen2.5, Qwen3, Granite 4.0) a fake llama.cpp on loopback renders ``/apply-template`` with the template
itself and streams ``/completion`` as llama.cpp does, and the call the model writes in its own format comes back
as a ToolCall. The others (Qwen3-Coder's XML, gpt-oss's harmony, a template without tools) take the chat API,
answered as llama.cpp's own parsers answer; thinking never becomes the answer nor a call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from cortana.messages import Message, ToolCall
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, TextDelta, ToolSpec
from cortana.models.catalogue import CATALOGUE
from cortana.models.grammar import call_prefix
from cortana.models.guided import template_supports_guiding, tool_call_format
from cortana.models.llamacpp import LlamaCppClient
from cortana.models.toolparse import recover_tool_calls
from tests.chat_templates import render, template_text
from tests.wire import Reply, WireServer

pytest.importorskip("jinja2", reason="the chat templates are rendered with jinja2 (pip install -e '.[dev]')")

FAMILIES: dict[str, tuple[str, str]] = {
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "json"),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "json"),
    # Qwen3-4B-Instruct-2507's own template was not to be had (tests/fixtures/templates/README.md): Qwen3's, with
    # thinking off, stands in for it.
    "qwen3-2507": ("Qwen-Qwen3-0.6B.jinja", "json"),
    "qwen3-coder": ("Qwen3-Coder.jinja", "xml"),
    "gpt-oss": ("openai-gpt-oss-120b.jinja", "harmony"),
    "granite4": ("ibm-granite-granite-4.0.jinja", "json"),
}
"""Catalogue family -> (its template, the tool-call format it teaches)."""

ASSISTANT_TURNS = {
    "json": r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>"
    r"|<\|start_of_role\|>assistant<\|end_of_role\|>(.*?)<\|end_of_text\|>",
    "xml": r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>",
}

WEATHER = ToolSpec(
    "get_weather",
    "Get the weather in a given city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
PARIS = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
CONVERSATION = [
    Message.system("Be brief."),
    Message.user("What's the weather in Paris?"),
    Message(role="assistant", content="", tool_calls=[PARIS]),
    Message.tool(PARIS, "Sunny, 24 C"),
    Message.user("And is it sunny in Rome?"),
]


def openai_messages() -> list[dict[str, Any]]:
    from cortana.models.openai_compat import to_openai_messages

    return to_openai_messages(CONVERSATION)


def test_every_catalogue_family_has_its_template_here() -> None:
    families = {model.family for model in CATALOGUE.values()}
    assert families <= set(FAMILIES), f"a catalogue family without its template test: {families - set(FAMILIES)}"


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_each_entrys_template_teaches_its_format_and_its_rendered_call_is_read_back(name: str) -> None:
    template, expected = FAMILIES[CATALOGUE[name].family]
    text = template_text(template)
    assert tool_call_format(text) == expected
    assert template_supports_guiding(text) == (expected == "json"), "only the JSON format is guided"
    assert ("not guided" in CATALOGUE[name].notes) == (expected != "json"), "the entry says which way it goes"
    prompt = render(template, openai_messages(), [WEATHER.as_function()], enable_thinking=False)
    assert "get_weather" in prompt and "Get the weather in a given city" in prompt, "the tool is shown"
    if expected == "harmony":
        # gpt-oss: the call goes to the commentary channel, addressed to the function, its arguments JSON.
        harmony = '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}'
        assert harmony in prompt
        assert "Reasoning: medium" in prompt, "the reasoning effort is in the system message"
        assert "Reasoning: low" in render(template, openai_messages(), [WEATHER.as_function()], reasoning_effort="low")
        return
    turn = re.search(ASSISTANT_TURNS[expected], prompt, re.S)
    assert turn is not None
    written = turn.group(1) or turn.group(2)
    remaining, calls = recover_tool_calls(written, [WEATHER])
    assert [(call.name, call.arguments) for call in calls] == [("get_weather", {"city": "Paris"})], written
    assert remaining == "", "nothing of the call is left as text"


def test_qwen3s_switch_is_enable_thinking_and_the_2507_instruct_needs_none() -> None:
    template = template_text("Qwen-Qwen3-0.6B.jinja")
    assert "enable_thinking" in template and "/no_think" not in template, "/no_think is the model's, not the template's"
    quiet = render("Qwen-Qwen3-0.6B.jinja", openai_messages(), [WEATHER.as_function()], enable_thinking=False)
    assert quiet.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "thinking off: an empty thought prefilled"
    thinking = render("Qwen-Qwen3-0.6B.jinja", openai_messages(), [WEATHER.as_function()])
    assert thinking.endswith("<|im_start|>assistant\n")
    for name in ("Qwen3-Coder.jinja", "ibm-granite-granite-4.0.jinja"):
        assert "enable_thinking" not in template_text(name), f"{name} has no thinking switch"


# -- on the wire ---------------------------------------------------------------------------------------------------


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


def props(template: str) -> dict[str, Any]:
    return {
        "default_generation_settings": {"n_ctx": 8192},
        "total_slots": 1,
        "model_alias": "model.gguf",
        "chat_template": template_text(template),
    }


def rendered_by(template: str) -> Reply:
    """``/apply-template`` as llama.cpp answers it: the template rendered with the request's messages and tools."""

    def respond(body: Any) -> Reply:
        kwargs = dict(body.get("chat_template_kwargs") or {})
        return Reply.json({"prompt": render(template, body["messages"], body.get("tools"), **kwargs)})

    return Reply(respond=respond)


def completion_stream(pieces: list[str]) -> Reply:
    """``/completion`` streamed as llama.cpp streams it: one event per piece, then the stop with its timings."""
    lines = [f"data: {json.dumps({'index': 0, 'content': piece, 'stop': False})}" for piece in pieces]
    timings = {"cache_n": 0, "prompt_n": 300, "predicted_n": len(pieces)}
    last = {"index": 0, "content": "", "stop": True, "stop_type": "eos", "timings": timings}
    lines.append(f"data: {json.dumps(last)}")
    return Reply(lines=lines, content_type="text/event-stream", line_end="\n\n")


CHECK_YES = Reply.json(
    {
        "content": "Yes",
        "stop": True,
        "completion_probabilities": [
            {"top_logprobs": [{"token": "Yes", "logprob": -0.05}, {"token": "No", "logprob": -3.2}]}
        ],
        "timings": {"cache_n": 290, "prompt_n": 60, "predicted_n": 1},
    }
)


def pieces(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def connected(wire: WireServer, template: str, *completions: Reply, chat: Reply | None = None) -> LlamaCppClient:
    wire.add("GET", "/health", Reply.json({"status": "ok"}))
    wire.add("GET", "/props", Reply.json(props(template)))
    wire.add("POST", "/apply-template", rendered_by(template))
    if completions:
        wire.add("POST", "/completion", *completions)
    if chat is not None:
        wire.add("POST", "/v1/chat/completions", chat)
    return await LlamaCppClient(base_url=wire.start()).connect()


def request(think: bool | None = None) -> ModelRequest:
    return ModelRequest(
        [Message.system("Be brief."), Message.user("What's the weather in Paris?")],
        tools=[WEATHER],
        settings=ModelSettings(temperature=0, think=think),
    )


GUIDED = [name for name, (_, expected) in FAMILIES.items() if expected == "json"]


@pytest.mark.parametrize("family", GUIDED)
async def test_a_call_in_the_templates_own_format_comes_back_as_a_tool_call(wire: WireServer, family: str) -> None:
    template, _ = FAMILIES[family]
    own = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    client = await connected(
        wire,
        template,
        completion_stream(pieces(own)),  # the free start: the model opens its call as its template taught it
        completion_stream([' {"city": "Paris"}', "}\n</tool_call>"]),  # the same call, under the grammar
        CHECK_YES,
    )
    think = False if family.startswith("qwen3") else None  # Qwen3 thinks unless told; its calls are guided without
    assert client.guides_tool_calls
    events = [event async for event in client.stream(request(think))]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert [(c.name, c.arguments, c.from_text) for c in final.message.tool_calls] == [
        ("get_weather", {"city": "Paris"}, False)
    ]
    assert not [e for e in events if isinstance(e, TextDelta) and e.text.strip()], "the call never shows as text"
    free, written, _ = wire.bodies("/completion")
    rendered = render(
        template,
        wire.bodies("/apply-template")[0]["messages"],
        [WEATHER.as_function()],
        **({"enable_thinking": False} if think is False else {}),
    )
    assert free["prompt"] == rendered, "the prompt is the template's own rendering"
    assert written["prompt"] == rendered + call_prefix("get_weather"), "the call is prefilled in the template's format"
    if think is False:
        assert wire.bodies("/apply-template")[0]["chat_template_kwargs"] == {"enable_thinking": False}
        assert written["prompt"].endswith('</think>\n\n<tool_call>\n{"name": "get_weather", "arguments":')
    await client.aclose()


def chat_stream(*deltas: dict[str, Any], finish: str = "stop") -> Reply:
    """``/v1/chat/completions`` streamed as llama.cpp streams it, one chunk per delta."""
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}]}]
    chunks += [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    usage = {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}
    chunks.append({"choices": [], "usage": usage})
    shaped = [{**chunk, "object": "chat.completion.chunk", "model": "model.gguf"} for chunk in chunks]
    lines = [f"data: {json.dumps(chunk)}" for chunk in shaped]
    return Reply(lines=[*lines, "data: [DONE]"], content_type="text/event-stream", line_end="\n\n")


def call_delta(arguments: str) -> dict[str, Any]:
    function = {"name": "get_weather", "arguments": arguments}
    return {"tool_calls": [{"index": 0, "id": "call_x", "type": "function", "function": function}]}


async def test_qwen3_coders_xml_takes_the_chat_api_where_llama_cpp_parses_it(wire: WireServer) -> None:
    client = await connected(
        wire, "Qwen3-Coder.jinja", chat=chat_stream(call_delta('{"city":"Paris"}'), finish="tool_calls")
    )
    assert not client.guides_tool_calls, "the grammar writes JSON, not Qwen3-Coder's XML"
    final = [event async for event in client.stream(request())][-1]
    assert isinstance(final, ModelResponse)
    assert [(c.name, c.arguments) for c in final.message.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert not wire.bodies("/completion") and len(wire.bodies("/v1/chat/completions")) == 1
    await client.aclose()


async def test_qwen3_coders_xml_left_as_text_is_read_by_the_recovery(wire: WireServer) -> None:
    xml = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    client = await connected(wire, "Qwen3-Coder.jinja", chat=chat_stream(*({"content": p} for p in pieces(xml))))
    events = [event async for event in client.stream(request())]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert [(c.name, c.arguments, c.from_text) for c in final.message.tool_calls] == [
        ("get_weather", {"city": "Paris"}, True)
    ]
    assert final.message.content == "" and not [e for e in events if isinstance(e, TextDelta) and e.text.strip()]
    await client.aclose()


async def test_gpt_oss_takes_the_chat_api_its_analysis_is_thinking_and_think_sets_its_effort(wire: WireServer) -> None:
    analysis = "The user wants the weather in Paris; get_weather fits. <tool_call>{'name': 'x'}</tool_call>"
    client = await connected(
        wire,
        "openai-gpt-oss-120b.jinja",
        chat=chat_stream({"reasoning_content": analysis}, call_delta('{"city":"Paris"}'), finish="tool_calls"),
    )
    assert not client.guides_tool_calls and client.supports_thinking
    events = [event async for event in client.stream(request(think=False))]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert [(c.name, c.arguments) for c in final.message.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert final.message.thinking == analysis and final.message.content == "", "the analysis channel is thinking"
    assert not [e for e in events if isinstance(e, TextDelta) and e.text.strip()]
    [body] = wire.bodies("/v1/chat/completions")
    assert body["chat_template_kwargs"]["reasoning_effort"] == "low", "gpt-oss cannot stop reasoning: it reasons less"
    kwargs = body["chat_template_kwargs"]
    assert "Reasoning: low" in render("openai-gpt-oss-120b.jinja", body["messages"], body["tools"], **kwargs)
    await client.aclose()


async def test_qwen3_thinking_takes_the_chat_api_and_a_call_drafted_in_its_thought_is_no_call(
    wire: WireServer,
) -> None:
    draft = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call> would be wrong here.'
    client = await connected(
        wire,
        "Qwen-Qwen3-0.6B.jinja",
        chat=chat_stream({"reasoning_content": draft}, {"content": "It is sunny in Paris."}),
    )
    assert client.guides_tool_calls and client.supports_thinking
    events = [event async for event in client.stream(request())]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.tool_calls == [] and final.message.content == "It is sunny in Paris."
    assert final.message.thinking == draft
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is sunny in Paris."
    assert not wire.bodies("/completion"), "a thinking model's /completion text would hold its thought: chat API"
    await client.aclose()


async def test_a_template_that_teaches_no_tool_format_takes_the_chat_api(wire: WireServer) -> None:
    plain = "{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}"
    assert tool_call_format(plain) == "" and not template_supports_guiding(plain)
    wire.add("GET", "/health", Reply.json({"status": "ok"}))
    wire.add("GET", "/props", Reply.json({**props("Qwen-Qwen3-0.6B.jinja"), "chat_template": plain}))
    wire.add("POST", "/v1/chat/completions", chat_stream({"content": "I cannot look that up."}))
    client = await LlamaCppClient(base_url=wire.start()).connect()
    final = [event async for event in client.stream(request())][-1]
    assert isinstance(final, ModelResponse) and final.message.content == "I cannot look that up."
    assert not wire.bodies("/completion") and not wire.bodies("/apply-template")
    await client.aclose()
