"""``Agent(output_type=...)``: the answer validated into a value, constrained where the engine can, retried
with the error, on the scripted model (the loop's logic) and each engine's request body."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from cortana import Agent, tool
from cortana.agent.events import ModelCallFinished, ModelCallStarted, PartialOutput, RunFinished
from cortana.agent.output import OutputValidationError
from cortana.errors import UserError
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import Message
from cortana.models.base import ModelRequest, ModelSettings
from cortana.models.llamacpp import LlamaCppClient
from cortana.models.ollama import OllamaClient
from cortana.models.openai_compat import OpenAICompatClient
from cortana.testing import ScriptedModel, tool_call, tool_call_response


class Person(BaseModel):
    name: str
    age: int


async def test_without_tools_the_first_answer_is_constrained_and_validated() -> None:
    model = ScriptedModel(['{"name": "Ada", "age": 36}'])
    result = await Agent(model, output_type=Person).run("Ada Lovelace, 36.")
    assert result.output == Person(name="Ada", age=36)
    assert model.requests[0].settings.json_schema == Person.model_json_schema()


async def test_a_value_that_fails_goes_back_with_the_error_then_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    memory = SQLiteMemory(tmp_path / "m.db")
    model = ScriptedModel(['{"name": "Ada"}', '```json\n{"name": "Ada", "age": 36}\n```'])
    result = await Agent(model, output_type=Person, memory=memory).run("Ada, 36", thread="t")
    assert result.output == Person(name="Ada", age=36) and result.metrics.model_calls == 2
    retry = model.requests[1].messages[-1].content
    assert "age: Field required" in retry and '{"name": "Ada"}' in retry
    stored = await memory.load_history(result.thread)
    assert [m.role for m in stored] == ["user", "assistant"], "the thread keeps the turn, not the asking again"

    failing = ScriptedModel(["not json", "still not", "nope"])
    with pytest.raises(OutputValidationError, match="after 3 attempts") as error:
        await Agent(failing, output_type=Person).run("?")
    assert error.value.attempt == "nope" and len(failing.requests) == 3
    memory.close()


async def test_with_tools_the_work_comes_first_then_the_typed_answer() -> None:
    @tool
    def look_up(name: str) -> str:
        """Look a person up.

        Args:
            name: who.
        """
        return f"{name} was born in 1815 and lived to 36."

    model = ScriptedModel(
        [
            tool_call_response(tool_call("look_up", name="Ada")),
            "Ada lived to 36.",
            '{"name": "Ada", "age": 36}',
        ]
    )
    events = [event async for event in Agent(model, tools=[look_up], output_type=Person).run_stream("Ada's age?")]
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.result.output == Person(name="Ada", age=36)
    assert model.requests[0].tools and model.requests[0].settings.json_schema is None, "tools first, free"
    final = model.requests[2]
    assert final.tools == [] and final.settings.json_schema == Person.model_json_schema()
    assert "as JSON matching this schema" in final.messages[-1].content
    assert any("1815" in m.content for m in final.messages if m.role == "tool"), "the work is in view"


async def test_the_typed_answer_is_the_last_step_of_the_same_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    @tool
    def look_up(name: str) -> str:
        """Look a person up.

        Args:
            name: who.
        """
        return f"{name} was born in 1815 and lived to 36."

    memory = SQLiteMemory(tmp_path / "m.db")
    model = ScriptedModel(
        [
            tool_call_response(tool_call("look_up", name="Ada")),
            "Ada lived to 36.",
            '{"name": "Ada"}',  # held to the schema, a value can still fail validation (here: a field missing)
            '{"name": "Ada", "age": 36}',
        ]
    )
    agent = Agent(model, tools=[look_up], output_type=Person, memory=memory)
    stream = agent.run_stream("Ada's age?", thread="t")
    events = [event async for event in stream]
    result = stream.result
    assert result.output == Person(name="Ada", age=36)
    started = [event for event in events if isinstance(event, ModelCallStarted)]
    assert [event.for_output for event in started] == [False, False, True, True], "one run, four model calls"
    assert sum(isinstance(event, RunFinished) for event in events) == 1
    assert (result.metrics.model_calls, result.metrics.output_calls, result.metrics.tool_calls) == (4, 2, 1)
    assert result.metrics.prompt_tokens == sum(
        event.response.usage.prompt_tokens for event in events if isinstance(event, ModelCallFinished)
    ), "the asking for JSON is counted in the run's own metrics"
    assert "age: Field required" in model.requests[3].messages[-1].content, "the retry says what was wrong"
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool", "assistant"]
    assert result.new_messages[-1].content == "Ada lived to 36."
    stored = await memory.load_history(result.thread)
    assert [m.content for m in stored][-1] == "Ada lived to 36.", "memory keeps the answer, not the asking for JSON"
    memory.close()


class Contact(BaseModel):
    name: str
    email: str = ""


async def test_partial_values_stream_while_the_model_writes_the_json() -> None:
    answer = '[{"name": "Ada", "email": "ada@example.org"}, {"name": "Grace", "email": "grace@example.org"}]'
    stream = Agent(ScriptedModel([answer]), output_type=list[Contact]).run_stream("Contacts?")
    partials = [event.value async for event in stream if isinstance(event, PartialOutput)]
    assert partials[0] == [] and partials[-1] == stream.result.output
    assert [Contact(name="Ada", email="ada@example.org")] in partials, "the first item before the second is done"
    assert all(earlier != later for earlier, later in itertools.pairwise(partials)), "no repeats"
    assert all(isinstance(item, Contact) for value in partials for item in value), "each one validated"

    values = [value async for value in Agent(ScriptedModel([answer]), output_type=list[Contact]).run_stream(
        "Contacts?"
    ).stream_output()]  # fmt: skip
    assert [contact.name for contact in values[-1]] == ["Ada", "Grace"] and values[-1][1].email == "grace@example.org"
    assert len(values) > 2

    texts = [value async for value in Agent(ScriptedModel(["Hello there, Ada."])).run_stream("Hi").stream_output()]
    assert texts == ["Hello ", "Hello there, ", "Hello there, Ada."]


async def test_a_streamed_runs_result_is_there_once_it_finished() -> None:
    stream = Agent(ScriptedModel(['{"name": "Ada", "age": 36}']), output_type=Person).run_stream("?")
    with pytest.raises(UserError, match="has not finished"):
        _ = stream.result
    assert (await stream.get_result()).output == Person(name="Ada", age=36)
    assert stream.result.output.age == 36


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    left: str
    right: str


@pytest.mark.parametrize(
    ("output_type", "answer", "value"),
    [
        (Point, '{"x": 1, "y": 2}', Point(1, 2)),
        (Pair, '{"left": "a", "right": "b"}', {"left": "a", "right": "b"}),
        (list[Person], '[{"name": "A", "age": 1}]', [Person(name="A", age=1)]),
        (int, "42", 42),
        (Person | int, "7", 7),
    ],
)
async def test_dataclasses_typeddicts_lists_plain_types_and_unions(output_type, answer, value) -> None:  # type: ignore[no-untyped-def]
    assert (await Agent(ScriptedModel([answer]), output_type=output_type).run("?")).output == value


def test_each_engine_sends_the_schema_its_own_way() -> None:
    schema = Person.model_json_schema()
    request = ModelRequest([Message.user("hi")], settings=ModelSettings(json_schema=schema))
    llama = LlamaCppClient("m", base_url="http://127.0.0.1:1").request_body(request)
    assert llama["json_schema"] == schema and "response_format" not in llama
    openai = OpenAICompatClient("m", base_url="http://127.0.0.1:1").request_body(request)
    assert openai["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    ollama = OllamaClient("m", base_url="http://127.0.0.1:1").request_body(request)
    assert ollama["format"] == schema
    plain = OllamaClient("m", base_url="http://127.0.0.1:1").request_body(ModelRequest([Message.user("hi")]))
    assert "format" not in plain and json.dumps(plain)


@pytest.mark.parametrize(
    ("document", "printed"),
    [
        # the streamed example: the list grows item by item (a title shown as it is written), one model call
        ("docs/output.md", ["Maria Lopez 41", "0 []\n1 ['Buy ']\n1 ['Buy milk']\n2 ['Buy milk', 'Call ']\n"]),
        ("README.md", ["France"]),
    ],
)
def test_the_documented_examples_run_as_written(tmp_path, document: str, printed: list[str]) -> None:  # type: ignore[no-untyped-def]
    import re
    import subprocess
    import sys
    from pathlib import Path

    text = (Path(__file__).parents[2] / document).read_text()
    blocks = [block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "output_type=" in block]
    assert len(blocks) == len(printed)
    for block, shown in zip(blocks, printed, strict=True):
        (tmp_path / "example.py").write_text(block)
        done = subprocess.run([sys.executable, "example.py"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert shown in done.stdout
    if document == "README.md":
        assert '"name": "invoke_agent agent"' in done.stdout, "the traced run's span was exported"


async def test_over_ollamas_wire_the_schema_goes_as_format_and_the_answer_validates() -> None:
    from tests.wire import Reply, WireServer

    def line(content: str, done: bool = False) -> str:
        data: dict[str, object] = {
            "model": "qwen2.5:0.5b",
            "created_at": "2026-08-20T10:15:02.118245Z",
            "message": {"role": "assistant", "content": content},
            "done": done,
        }
        if done:  # the final line's shape, as tests/fixtures/ollama/chat_plain_stream.json records it
            data |= {"done_reason": "stop", "prompt_eval_count": 30, "eval_count": 12, "total_duration": 1}
        return json.dumps(data)

    wire = WireServer()
    stream = [line('{"name": "Ada",'), line(' "age": 36}'), line("", done=True)]
    wire.add("POST", "/api/chat", Reply(lines=stream, content_type="application/x-ndjson"))
    client = OllamaClient("qwen2.5:0.5b", base_url=wire.start(), context_window=4096)
    try:
        result = await Agent(client, output_type=Person).run("Ada, 36")
    finally:
        await client.aclose()
        wire.stop()
    assert result.output == Person(name="Ada", age=36)
    assert wire.bodies("/api/chat")[0]["format"] == Person.model_json_schema()


async def test_a_server_that_refuses_response_format_gets_a_forced_tool_call_instead() -> None:
    from tests.wire import Reply, WireServer

    call = {"id": "call_1", "type": "function",
            "function": {"name": "final_answer", "arguments": '{"name": "Ada", "age": 36}'}}  # fmt: skip
    answer = Reply.json({  # whole, as run() asks for it
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "", "tool_calls": [call]},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 5},
    })  # fmt: skip
    refusal = Reply.json({"error": {"message": "Unrecognized request argument supplied: response_format"}}, 400)
    wire = WireServer()
    wire.add("POST", "/v1/chat/completions", refusal, answer, answer)
    client = OpenAICompatClient("m", base_url=wire.start() + "/v1")
    try:
        agent = Agent(client, output_type=Person)
        assert (await agent.run("Ada, 36")).output == Person(name="Ada", age=36)
        assert (await agent.run("Ada again")).output == Person(name="Ada", age=36)
    finally:
        await client.aclose()
        wire.stop()
    first, second, third = wire.bodies("/v1/chat/completions")
    assert "response_format" in first and "tools" not in first
    assert "response_format" not in second and second["tools"][0]["function"]["name"] == "final_answer"
    assert second["tools"][0]["function"]["parameters"] == Person.model_json_schema()
    assert second["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}
    assert "response_format" not in third, "the client remembers the server's answer"
