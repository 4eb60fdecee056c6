"""``cortana acp`` on stdin and stdout of every kind: a line that is no message is answered with JSON-RPC's error
and the session goes on, and pipes and regular files both carry the protocol. The real ``cortana acp`` process
is driven with raw lines (the ``agent-client-protocol`` client would never send a malformed one), its answers
read with the package's schema."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema

from cortana.serve.stdio import StdioTransport
from tests.unit.test_acp import QUIET

PIPE = asyncio.subprocess.PIPE


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "cortana.yml").write_text(QUIET)
    return root


def request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"


def initialize(request_id: int) -> bytes:
    params = schema.InitializeRequest(
        protocol_version=acp.PROTOCOL_VERSION, client_capabilities=schema.ClientCapabilities()
    ).model_dump(mode="json", by_alias=True, exclude_none=True)
    return request(request_id, "initialize", params)


async def cortana_acp(url: str, root: Path, *, stdin: Any = PIPE, stdout: Any = PIPE) -> asyncio.subprocess.Process:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent), "NO_COLOR": "1"}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "cortana.cli.main", "acp", "--engine", "llamacpp", "--base-url", url),
        cwd=root,
        env=env,
        stdin=stdin,
        stdout=stdout,
        stderr=PIPE,
    )


async def answer(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    assert line, "stdout ended"
    return dict(json.loads(line))


async def finished(process: asyncio.subprocess.Process) -> str:
    """Its stderr, once it has exited by itself (0)."""
    assert process.stderr is not None
    stderr = await asyncio.wait_for(process.stderr.read(), 30)
    assert await asyncio.wait_for(process.wait(), 30) == 0, stderr.decode()
    return stderr.decode()


async def test_a_line_that_is_no_message_is_answered_and_the_session_goes_on(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    """Reproduces the report: a malformed line printed a traceback on stderr (and ``[1, 2]`` ended the session)."""
    process = await cortana_acp(scripted_engine.url, workspace)
    assert process.stdin is not None
    lines = [
        (b"{not json\n", -32700, None),
        (b"\xff\xfe\n", -32700, None),
        (b"[1, 2]\n", -32600, None),
        (b'{"jsonrpc": "2.0", "id": 7, "method": 5}\n', -32600, 7),
        (b'{"jsonrpc": "2.0", "id": [1], "result": 1}\n', -32600, None),
        (b'{"jsonrpc": "2.0"}\n', -32600, None),
    ]
    for line, code, request_id in lines:
        process.stdin.write(line)
        got = await answer(process)
        assert got["error"]["code"] == code and got["id"] == request_id, (line, got)
        assert got["jsonrpc"] == "2.0" and got["error"]["data"]["details"]
    process.stdin.write(initialize(1))
    hello = await answer(process)
    assert hello["id"] == 1 and schema.InitializeResponse.model_validate(hello["result"]).agent_info.name == "cortana"
    process.stdin.write(request(2, "session/new", {"cwd": str(workspace), "mcpServers": []}))
    assert (await answer(process))["result"]["sessionId"]
    process.stdin.close()
    stderr = await finished(process)
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr


async def test_stdout_a_regular_file_carries_the_answers(scripted_engine, workspace: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Reproduces the report: ``cortana acp > out.jsonl`` stopped with "unexpected ValueError: Pipe transport is
    only for pipes, sockets and character devices"."""
    out = tmp_path / "out.jsonl"
    with out.open("wb") as file:
        process = await cortana_acp(scripted_engine.url, workspace, stdout=file)
    assert process.stdin is not None
    process.stdin.write(initialize(1))
    deadline = time.monotonic() + 30
    while not out.read_bytes().endswith(b"\n"):
        assert time.monotonic() < deadline and process.returncode is None, "no answer in the file"
        await asyncio.sleep(0.05)
    [line] = out.read_bytes().splitlines()
    assert schema.InitializeResponse.model_validate(json.loads(line)["result"]).agent_info.name == "cortana"
    process.stdin.close()
    assert "Traceback" not in await finished(process)


async def test_a_script_on_stdin_is_answered_before_the_end(scripted_engine, workspace: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``cortana acp < requests.jsonl > answers.jsonl``: the end of a file is not an editor leaving, so the
    requests it held are answered before the process ends."""
    script = tmp_path / "requests.jsonl"
    script.write_bytes(
        b"{not json\n"
        + initialize(1)
        + request(2, "session/new", {"cwd": str(workspace), "mcpServers": []})
        + request(3, "session/list", {})
    )
    out = tmp_path / "answers.jsonl"
    with script.open("rb") as stdin, out.open("wb") as stdout:
        process = await cortana_acp(scripted_engine.url, workspace, stdin=stdin, stdout=stdout)
    assert "Traceback" not in await finished(process)
    answers = [json.loads(line) for line in out.read_bytes().splitlines()]
    by_id = {got["id"]: got for got in answers}
    assert set(by_id) == {None, 1, 2, 3}, answers
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[1]["result"]["agentInfo"]["name"] == "cortana" and by_id[2]["result"]["sessionId"]
    assert "sessions" in by_id[3]["result"]


async def test_a_line_over_the_bound_is_skipped_unread_and_answered() -> None:
    """A line past the bound is held no further than it, answered as an invalid request; the next is read."""
    into_reading, writing_end = os.pipe()
    reading_end, out_writing = os.pipe()
    transport = StdioTransport(into_reading, out_writing, max_line=1_000)
    try:
        await asyncio.to_thread(os.write, writing_end, b'{"id": 1, "method": "' + b"x" * 100_000 + b'"}\n')
        await asyncio.to_thread(os.write, writing_end, b'{"jsonrpc": "2.0", "id": 2, "method": "initialize"}\n')
        received = await asyncio.wait_for(transport.receive(), 10)
        assert received == {"jsonrpc": "2.0", "id": 2, "method": "initialize"}
        refused = json.loads(await asyncio.to_thread(os.read, reading_end, 10_000))
        assert refused["id"] is None and refused["error"]["code"] == -32600
        assert "1,000 bytes" in refused["error"]["data"]["details"]
        os.close(writing_end)
        assert await asyncio.wait_for(transport.receive(), 10) is None
    finally:
        await transport.close()
        for descriptor in (into_reading, reading_end, out_writing):
            os.close(descriptor)
