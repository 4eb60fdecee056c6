"""Bad input is a one-line error, or a tool error the model reads: never a traceback, never a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana import Agent, ModelError, RunResult, tool
from cortana.models.answer import AnswerBuilder
from cortana.models.base import ModelRequest, ToolSpec
from cortana.models.llamacpp import LlamaCppClient
from cortana.models.ollama import OllamaClient
from cortana.models.toolparse import MAX_ARGUMENT_DEPTH, recover_tool_calls
from tests.wire import Reply, WireServer

ECHO = ToolSpec("echo", "Echo the text.", {"type": "object", "properties": {"text": {"type": "string"}}})
DEEP = "[" * 5000 + "]" * 5000


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def sse(*chunks: dict[str, object]) -> Reply:
    """An OpenAI-style stream, as llama.cpp sends it."""
    lines = [f"data: {json.dumps(chunk)}" for chunk in chunks] + ["data: [DONE]"]
    return Reply(lines=lines, content_type="text/event-stream", line_end="\n\n")


def whole(chunk: dict[str, object]) -> Reply:
    """The same answer sent whole (``"stream": false``, as ``Agent.run()`` asks for it)."""
    choice = chunk["choices"][0]  # type: ignore[index]
    delta = choice["delta"]
    message: dict[str, object] = {"role": "assistant", "content": delta.get("content", "")}
    if "tool_calls" in delta:
        message["tool_calls"] = [{k: v for k, v in call.items() if k != "index"} for call in delta["tool_calls"]]
    return Reply.json({"choices": [{"index": 0, "message": message, "finish_reason": choice["finish_reason"]}]})


async def answered(agent: Agent[str], prompt: str, streamed: bool) -> RunResult[str]:
    """The run's result: read as it streams (``run_stream``), or asked for whole (``run``)."""
    return await (agent.run_stream(prompt).get_result() if streamed else agent.run(prompt))


def call_chunk(arguments: str) -> dict[str, object]:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "echo", "arguments": arguments}}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]}


def text_chunk(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("arguments", [f'{{"text": {DEEP}}}', '{"text": ' + "[" * 40 + "]" * 40 + "}"])
async def test_deeply_nested_arguments_become_a_tool_error_the_model_reads(
    wire: WireServer, arguments: str, streamed: bool
) -> None:
    reply = sse if streamed else whole
    wire.add("POST", "/v1/chat/completions", reply(call_chunk(arguments)), reply(text_chunk("Sorry, let me answer.")))
    async with LlamaCppClient("q", base_url=wire.start(), context_window=4096) as client:
        result = await answered(Agent(client, tools=[echo]), "echo something", streamed)
    error = result.new_messages[2]
    assert error.role == "tool" and error.is_error and "not a valid JSON object" in error.content
    assert result.output == "Sorry, let me answer."


def test_deep_text_written_calls_are_not_calls_and_do_not_crash() -> None:
    for text in (f'{{"name": "echo", "arguments": {{"text": {DEEP}}}}}', f"echo(text={DEEP})", DEEP, "{" * 3000):
        _, calls = recover_tool_calls(text, [ECHO])
        assert all(call.raw_arguments is not None for call in calls), calls
    builder = AnswerBuilder([ECHO])
    builder.add_call("echo", {"text": json.loads("[" * 100 + "]" * 100)})
    _, message = builder.finish()
    assert message.tool_calls[0].raw_arguments == f"(arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels)"


async def test_an_engine_line_that_is_not_json_is_a_model_error(wire: WireServer) -> None:
    wire.add("POST", "/api/chat", Reply(lines=['{"message": {"content": "hi"}, "done": false}', "<html>oops"]))
    async with OllamaClient("m", base_url=wire.start(), context_window=4096) as client:
        with pytest.raises(ModelError, match="sent a line that is not JSON"):
            async for _ in client.stream(ModelRequest([])):
                pass
    wire.add("POST", "/v1/chat/completions", Reply(lines=[f"data: {DEEP}"], content_type="text/event-stream"))
    async with LlamaCppClient("q", base_url=wire.start()) as client:
        with pytest.raises(ModelError, match="sent an event that is not JSON"):
            async for _ in client.stream(ModelRequest([])):
                pass


BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{x}: &{x} [{','.join(['*' + p] * 9)}]" for p, x in zip("abcdefgh", "bcdefghi", strict=True)),
    ]
)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"engine: \xff\xfe auto\n", "is not valid UTF-8 (byte 8); save it as UTF-8"),
        (BOMB.encode(), "expands to more than 10,000 values"),
        (b"engine: " + b"[" * 5000, "cortana.yml"),
        (b"model: " + b"x" * (2 << 20), "a cortana.yml may be at most 1,048,576"),
    ],
)
def test_a_bad_cortana_yml_is_one_line_and_quick(tmp_path: Path, content: bytes, expected: str) -> None:
    (tmp_path / "cortana.yml").write_bytes(content)
    out = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "hello"],
        capture_output=True, text=True, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[:2000]
    assert expected in lines[0] and len(lines[0]) < 500


def test_piped_input_that_is_not_utf8_is_read(tmp_path: Path) -> None:
    (tmp_path / "cortana.yml").write_text("engine: llamacpp\nbase_url: http://127.0.0.1:9\n")
    out = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "summarize"],
        input=b"\xff\xfe binary \x00 junk", capture_output=True, cwd=tmp_path, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    stderr = out.stderr.decode()
    assert out.returncode == 1 and "Traceback" not in stderr
    assert stderr.startswith("cortana: llama.cpp is not answering at http://127.0.0.1:9")


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_a_call_of_a_tool_nobody_offered_is_never_started_and_the_model_answers_without_tools(
    wire: WireServer, streamed: bool
) -> None:
    """The 1.5B model answered with a JSON call to `slugify`, the function it was asked to write: no such tool was
    offered, so nothing is started (no tool call event, no result); the model is told which tools exist and asked
    again, with none offered (issue 63)."""
    slugify = '{"name": "slugify", "arguments": {"text": "Hello World"}}'
    reply = sse if streamed else whole
    wire.add(
        "POST",
        "/v1/chat/completions",
        reply({"choices": [{"index": 0, "delta": {"content": slugify}, "finish_reason": "stop"}]}),
        reply(text_chunk("There is no slugify tool; here is the code.")),
    )
    async with LlamaCppClient("q", base_url=wire.start(), context_window=4096) as client:
        result = await answered(Agent(client, tools=[echo]), "Add a slugify(text) function to utils.py.", streamed)
    assert not any(message.role == "tool" for message in result.new_messages), "nothing was started"
    told = next(m for m in result.new_messages if m.role == "user" and "There is no tool named 'slugify'" in m.content)
    assert "the tools you have are: echo" in told.content
    assert result.metrics.unknown_tool_calls == 1 and result.metrics.tool_calls == 0
    second = wire.bodies("/v1/chat/completions")[1]
    assert not second.get("tools"), "the second request offers no tools"
    assert result.output == "There is no slugify tool; here is the code."
    assert slugify not in result.output


def one_shot(folder: Path, url: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """The real command on a scripted engine, with no terminal."""
    (folder / "cortana.yml").write_text("memory:\n  recall: false\ngraphify:\n  enabled: false\n")
    return subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", url, *args],
        input=stdin, capture_output=True, cwd=folder, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(folder.parent), "NO_COLOR": "1"},
    )  # fmt: skip


def sent_prompts(engine: WireServer) -> list[str]:
    bodies = [request.body for request in engine.requests if request.path == "/v1/chat/completions"]
    return [message["content"] for body in bodies for message in body["messages"] if message["role"] == "user"]


def test_a_folder_whose_name_is_not_utf8_is_answered_in(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Reproduces the report: in a folder named with bytes that are not UTF-8, `cortana "..."` failed with
    "unexpected UnicodeEncodeError"."""
    from tests.integration.test_cli_terminal import text_reply

    folder = tmp_path / os.fsdecode(b"caf\xe9-\xff")
    folder.mkdir()
    scripted_engine.add("POST", "/v1/chat/completions", text_reply(["Hello."]))
    done = one_shot(folder, scripted_engine.url, "Say hello.")
    assert done.returncode == 0 and b"Hello." in done.stdout, done.stderr.decode(errors="replace")[-2000:]


def test_bytes_that_are_not_utf8_on_the_command_line_are_answered(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.integration.test_cli_terminal import text_reply

    scripted_engine.add("POST", "/v1/chat/completions", text_reply(["Read it."]))
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url,
         b"what is \xff\xfe\x80 this"],
        capture_output=True, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 0 and b"Read it." in done.stdout, done.stderr.decode(errors="replace")[-2000:]
    assert sent_prompts(scripted_engine)[-1].endswith("what is \ufffd\ufffd\ufffd this")


@pytest.mark.parametrize("size", [10_000_000, 100_000])
def test_a_huge_message_is_cut_to_the_window_and_answered(scripted_engine, tmp_path: Path, size: int) -> None:  # type: ignore[no-untyped-def]
    """Reproduces the report: 10 MB on stdin (and a 100 KB argument) got no answer within 60 s, the turn's
    lookups running past their time on the whole text. The head and tail that fit are sent, and the user is told."""
    import time

    from tests.integration.test_cli_terminal import text_reply

    scripted_engine.add("POST", "/v1/chat/completions", text_reply(["A log."]))
    text = ("log line " * (size // 9 + 1))[:size]
    started = time.monotonic()
    if size > 1_000_000:
        done = one_shot(tmp_path, scripted_engine.url, "what is this?", stdin=text.encode())
    else:
        done = one_shot(tmp_path, scripted_engine.url, f"what is this? {text}")
    seconds = time.monotonic() - started
    assert done.returncode == 0 and b"A log." in done.stdout, done.stderr.decode()[-2000:]
    assert b"more than the model's window takes" in done.stderr
    sent = sent_prompts(scripted_engine)[-1]
    assert len(sent) < 20_000 and "characters left out" in sent and "what is this?" in sent[:500]
    assert seconds < 60, f"{seconds:.0f}s"


@pytest.mark.parametrize("command", ["rm", "use", "pull"])
def test_a_hub_name_with_dot_dot_is_one_line(tmp_path: Path, command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "models", command, "hf:a/b/../../x.gguf"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 1 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "names a path with '.' or '..'" in done.stderr and "unexpected" not in done.stderr
