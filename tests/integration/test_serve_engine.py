"""``cortana serve`` and ``cortana mcp-serve`` as users run them, on the real 0.5B model, with the official
``openai`` and ``mcp`` clients."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from mcp import Client, StdioServerParameters

KEY = "integration-key-0123456789"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    # no code graph and no prompt search, as when these tests ran with the workspace as HOME (where both are off)
    quiet = "temperature: 0\nmemory:\n  recall: false\ngraphify:\n  enabled: false\nagent:\n  prompt_search: 0\n"
    (tmp_path / "cortana.yml").write_text(quiet)
    (tmp_path / "notes.txt").write_text("The code word is marmalade.\n")
    return tmp_path


def environment(workspace: Path, engine_key: str) -> dict[str, str]:
    home = workspace.parent / f"{workspace.name}.home"  # beside it: a workspace that is HOME is not a project
    home.mkdir(exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "CORTANA_API_KEY": engine_key, "NO_COLOR": "1"}


@pytest.fixture
def served(engine_url: str, engine_key: str, workspace: Path) -> Iterator[str]:
    """``cortana serve`` on a free port; yields its ``/v1`` address; stopped with SIGTERM."""
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "cortana.cli.main", "serve", "--engine", "llamacpp", "--base-url", engine_url),
            *("--port", "0", "--key", KEY, "--no-heartbeat"),
        ],
        cwd=workspace,
        env=environment(workspace, engine_key),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        seen.append(line)
        found = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line)
        if found:
            break
        if not line and process.poll() is not None:
            pytest.fail(f"cortana serve exited: {''.join(seen)}")
    else:
        process.kill()
        pytest.fail(f"cortana serve did not start: {''.join(seen)}")
    yield found.group(1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, "SIGTERM stops the server cleanly, the assistant closed"


def test_the_openai_example_gets_a_streamed_answer_that_used_a_tool_and_is_remembered(
    served: str, workspace: Path
) -> None:
    client = openai.OpenAI(base_url=served, api_key=KEY, max_retries=0, timeout=300)
    messages = [{"role": "user", "content": "Read the file notes.txt and tell me the code word written in it."}]
    stream = client.chat.completions.create(model="cortana", messages=messages, stream=True)  # type: ignore[arg-type]
    text, tools, thread = "", [], None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        extra = (chunk.model_extra or {}).get("cortana") or {}
        if extra.get("type") == "tool_call":
            tools.append(extra["name"])
        thread = extra.get("thread", thread)
    assert "read_file" in tools and "marmalade" in text.lower()
    messages += [
        {"role": "assistant", "content": text},
        {"role": "user", "content": "Which code word did you find? Answer with the word only."},
    ]
    answer = client.chat.completions.create(model="cortana", messages=messages)  # type: ignore[arg-type]
    assert "marmalade" in (answer.choices[0].message.content or "").lower()
    assert (answer.model_extra or {})["cortana"]["thread"] == thread, "the second request continued the thread"
    with sqlite3.connect(workspace / ".cortana" / "memory.db") as db:
        threads = {row[0] for row in db.execute("SELECT thread_id FROM messages")}
    assert threads == {thread}


async def test_mcp_serve_answers_an_agent_over_stdio(engine_url: str, engine_key: str, workspace: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortana.cli.main", "mcp-serve", "--engine", "llamacpp", "--base-url", engine_url],
        env={**environment(workspace, engine_key), "PYTHONPATH": os.pathsep.join(sys.path)},
        cwd=str(workspace),
    )
    async with Client(params, read_timeout_seconds=300) as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        assert names == ["ask", "search_memory"]
        result = await client.call_tool("ask", {"prompt": "What is the capital of France? Answer in one word."})
        assert not result.is_error and "paris" in result.content[0].text.lower()  # type: ignore[union-attr]


async def test_acp_answers_an_editor_with_a_tool_call_on_the_real_model(
    engine_url: str, engine_key: str, workspace: Path
) -> None:
    """``cortana acp`` as Zed runs it, driven by the ``agent-client-protocol`` package's client: the real model reads
    the file through the editor's buffer (unsaved text the disk does not have) and answers from it."""
    import acp
    from acp import schema

    from tests.unit.test_acp import Editor

    notes = str(workspace / "notes.txt")
    editor = Editor(buffers={notes: "The code word is quince.\n"})
    command = ("-m", "cortana.cli.main", "acp", "--engine", "llamacpp", "--base-url", engine_url)
    env = environment(workspace, engine_key)
    async with acp.spawn_agent_process(editor, sys.executable, *command, cwd=workspace, env=env) as (conn, _):
        fs = schema.FileSystemCapabilities(read_text_file=True, write_text_file=True)
        await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION, client_capabilities=schema.ClientCapabilities(fs=fs)
        )
        session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        question = "Read notes.txt and tell me the code word."
        done = await conn.prompt(session_id=session, prompt=[acp.text_block(question)])
    assert done.stop_reason == "end_turn"
    reads = [u for u in editor.of("tool_call") if u.kind == "read"]
    assert reads and reads[0].locations[0].path == notes
    assert "quince" in editor.text().lower(), editor.text()


def test_print_stream_json_pipes_into_jq_on_the_real_model(engine_url: str, engine_key: str, workspace: Path) -> None:
    """The documented pipe: ``cortana -p --output-format stream-json "..." | jq``, every line one event."""
    import shutil

    from tests.unit.test_headless import events

    cortana = f"{sys.executable} -m cortana.cli.main --engine llamacpp --base-url {engine_url}"
    done = subprocess.run(
        f"{cortana} -p --output-format stream-json 'What is the capital of France? One word.' | "
        "jq -c 'select(.type == \"turn.completed\" or .type == \"item.completed\")'",
        shell=True, cwd=workspace, env=environment(workspace, engine_key), capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    assert done.returncode == 0, done.stderr
    stream = events(done.stdout)
    assert stream[-1]["type"] == "turn.completed" and stream[-1]["usage"]["input_tokens"] > 0, done.stdout[-3000:]
    messages = [
        e["item"]["text"] for e in stream if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    assert messages and all(isinstance(text, str) for text in messages), "the answer arrives as completed messages"
    # What the 0.5B answers is the benchmarks' business (it sometimes wanders into the folder's files first); this
    # test is the pipe: every line one event, in order, with usage at the end.
