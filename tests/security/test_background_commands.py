"""Background commands (issue 64): ``run_command(background=true)`` starts a command under the same keeper and
sandbox as any other and returns at once; ``command_output`` reads it, ``stop_command`` ends it and all it started,
and none outlives its conversation, the assistant, or Cortana killed with SIGKILL.

Every check finds real processes in ``/proc``: a real ``python -m http.server`` answering a request from the test,
``setsid`` children that left their command's process group, the real ``cortana -p`` killed mid-answer.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from acp import schema

from cortana import Agent, Assistant, Settings, ThreadRef, Tool, ToolError
from cortana.messages import RunMetrics
from cortana.sandbox import kernel_support
from cortana.serve import ChatService, refuse_over_api
from cortana.serve.acp import CortanaAgent
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools import RunContext
from cortana.tools.builtin import BackgroundCommands, builtin_tools
from cortana.tools.builtin.background import MAX_BACKGROUND, UNTIL_THE_TURN
from tests.integration.test_cli_terminal import text_reply, tool_reply

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the keeper is Linux's")
confining = pytest.mark.skipif(not kernel_support().confines, reason="needs the kernel's sandbox")

CHAT = "/v1/chat/completions"
QUIET = Settings(
    memory={"recall": False},
    graphify={"enabled": False},
    learning={"enabled": False},
    heartbeat={"enabled": False},
    agent={"tool_judge": False, "prompt_search": 0, "named_files": 0},
)
QUIET_YML = (
    "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
    "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n  tool_judge: false\n"
)


@pytest.fixture
def token() -> str:
    """A number no other process's command line holds: ``sleep TOKEN`` is findable in /proc, and only ours."""
    return f"{8000 + os.getpid() % 1000}.{time.monotonic_ns() % 1000003}"


def running(text: str, *, program: str = "") -> list[int]:
    """The pids (not this test's) whose command line holds ``text`` (and starts with ``program``: the keeper's and
    the shell's hold the command too)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in line and line.startswith(program):
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


async def gone(text: str, within: float = 10.0) -> bool:
    """Whether every process holding ``text`` ends within ``within`` seconds."""
    deadline = time.monotonic() + within
    while running(text):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def started(token: str, count: int, within: float = 20.0) -> bool:
    """Whether ``count`` of ``sleep TOKEN`` run within ``within`` seconds."""
    deadline = time.monotonic() + within
    while len(running(token, program="sleep ")) < count:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.fixture
def leftovers(token: str) -> Any:
    """Whatever a failing test left holding ``token`` is killed after it."""
    yield
    for pid in running(token):
        os.kill(pid, signal.SIGKILL)


def context(thread: str) -> RunContext:
    return RunContext(ThreadRef(thread_id=thread), RunMetrics(), [])


def tools_of(root: Path, background: BackgroundCommands) -> dict[str, Tool]:
    return {tool.name: tool for tool in builtin_tools(root, background=background)}


async def call(tool: Tool, thread: str | None = None, **arguments: object) -> str:
    run = context(thread) if thread is not None else None
    return str(await asyncio.wait_for(tool.invoke(tool.validate(arguments), run), 60))


def outside(tool: Tool) -> dict[str, object]:
    """The argument that runs a command outside the sandbox, where there is one to leave."""
    return {"sandbox": False} if "sandbox" in tool.parameters["properties"] else {}


async def test_a_background_server_answers_is_read_and_is_stopped_with_all_it_started(
    tmp_path: Path, token: str, leftovers: None
) -> None:
    background = BackgroundCommands()
    tools = tools_of(tmp_path, background)
    server = f"setsid sleep {token} & echo server=$$; exec {sys.executable} -u -m http.server 0 --bind 127.0.0.1"
    try:
        began = time.monotonic()
        first = await call(tools["run_command"], command=server, background=True, **outside(tools["run_command"]))
        assert time.monotonic() - began < 15, "a server does not hold the call"
        assert first.startswith("bg1 started") and 'command_output(id="bg1")' in first, first
        port = int(re.search(r"Serving HTTP on 127\.0\.0\.1 port (\d+)", first)[1])  # type: ignore[index]
        pid = int(re.search(r"server=(\d+)", first)[1])  # type: ignore[index]
        assert await started(token, 1), "the setsid child runs too"

        page = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10))
        assert page.status == 200, "the server answers while the conversation goes on"
        read = await call(tools["command_output"], id="bg1")
        assert read.startswith("bg1 running") and '"GET / HTTP/1.1" 200' in read, read
        assert "Serving HTTP" not in read, "only what came since the last read"
        assert (await call(tools["command_output"], id="bg1")).endswith("(nothing new)")
        assert [entry.id for entry in background.commands] == ["bg1"]

        stopped = await call(tools["stop_command"], id="bg1")
        assert stopped.startswith("bg1 stopped"), stopped
        assert not alive(pid), "the server was stopped"
        assert await gone(token), "and the child it started with setsid"
        with pytest.raises(OSError):
            await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5))
        assert background.commands == []
    finally:
        await background.aclose()


async def test_an_unknown_id_is_a_tool_error_naming_the_ones_that_run(
    tmp_path: Path, token: str, leftovers: None
) -> None:
    background = BackgroundCommands(first_wait=0.1)
    tools = tools_of(tmp_path, background)
    try:
        with pytest.raises(ToolError, match="none runs here"):
            await call(tools["command_output"], id="bg1")
        await call(tools["run_command"], command=f"sleep {token}", background=True)
        for name in ("command_output", "stop_command"):
            with pytest.raises(ToolError, match=r"No background command 'bg7' here; there are: bg1 \(sleep"):
                await call(tools[name], id="bg7")
        assert running(token), "a wrong id stopped nothing"
    finally:
        await background.aclose()
    assert await gone(token)


async def test_a_conversation_reaches_only_its_own_and_its_end_ends_them(
    tmp_path: Path, token: str, leftovers: None
) -> None:
    background = BackgroundCommands(first_wait=0.1)
    tools = tools_of(tmp_path, background)
    try:
        await call(tools["run_command"], "ann", command=f"sleep {token}1", background=True)
        await call(tools["run_command"], "bob", command=f"sleep {token}2", background=True)
        with pytest.raises(ToolError, match=r"'bg1' here; there are: bg2 "):
            await call(tools["stop_command"], "bob", id="bg1")
        assert running(f"{token}1"), "another conversation's command is out of reach"
        await background.stop_thread(ThreadRef(thread_id="ann"))
        assert await gone(f"{token}1"), "ann's conversation ended: its command with it"
        assert running(f"{token}2"), "bob's runs on"
        assert [entry.id for entry in background.commands] == ["bg2"]
    finally:
        await background.aclose()
    assert await gone(token)


async def test_past_the_limit_a_start_is_refused_until_one_stops(tmp_path: Path, token: str, leftovers: None) -> None:
    background = BackgroundCommands(first_wait=0.05)
    tools = tools_of(tmp_path, background)
    try:
        for number in range(1, MAX_BACKGROUND + 1):
            said = await call(tools["run_command"], command=f"sleep {token}", background=True)
            assert said.startswith(f"bg{number} started")
        assert await started(token, MAX_BACKGROUND)
        with pytest.raises(ToolError, match=f"{MAX_BACKGROUND} background commands are running already"):
            await call(tools["run_command"], command=f"sleep {token}", background=True)
        assert len(running(token, program="sleep ")) == MAX_BACKGROUND, "the refused one never started"
        await call(tools["stop_command"], id="bg3")
        said = await call(tools["run_command"], command=f"sleep {token}", background=True)
        assert said.startswith(f"bg{MAX_BACKGROUND + 1} started"), "bg3's id is not given again"
    finally:
        await background.aclose()
    assert await gone(token)


async def test_what_it_prints_is_bounded_between_reads_and_says_how_much_was_left_out(
    tmp_path: Path, token: str, leftovers: None
) -> None:
    background = BackgroundCommands(first_wait=0.05, output_limit=1000)
    tools = tools_of(tmp_path, background)
    flood = f"sleep 0.5; head -c 200000 /dev/zero | tr '\\0' x; echo; echo END; touch flooded; sleep {token}"
    try:
        assert "(nothing yet)" in await call(tools["run_command"], command=flood, background=True)
        for _ in range(400):  # one read once it has all been written: a read mid-flood would take a part of it
            if (tmp_path / "flooded").exists():
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        read = await call(tools["command_output"], id="bg1")
        body = read.split("Since the last read:\n", 1)[1]
        assert "[... output cut at 1,000 of 200,00" in body and body.rstrip().endswith("END"), body[-300:]
        assert len(body) < 1300, "the head and tail of 200 KB, not all of it"
        assert (await call(tools["command_output"], id="bg1")).endswith("(nothing new)")
    finally:
        await background.aclose()
    assert await gone(token)


async def test_a_command_that_ends_at_once_is_reported_and_forgotten(tmp_path: Path) -> None:
    background = BackgroundCommands()
    tools = tools_of(tmp_path, background)
    began = time.monotonic()
    said = await call(tools["run_command"], command="echo made it; exit 3", background=True)
    assert time.monotonic() - began < 5, "it does not wait out the first output's time once the command exited"
    assert said == "bg1 exited with code 3 at once. Its output:\nmade it\n"
    assert background.commands == []
    await background.aclose()
    with pytest.raises(ToolError, match="session is ending"):
        await call(tools["run_command"], command="true", background=True)


async def test_a_start_the_session_ends_under_does_not_run_on(
    tmp_path: Path, token: str, leftovers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortana.tools.builtin import background as module

    background = BackgroundCommands()
    real = module.start_shell

    async def ends_meanwhile(*args: Any, **options: Any) -> Any:
        process = await real(*args, **options)
        await background.aclose()  # the session ends after the process started, before it was kept
        return process

    monkeypatch.setattr(module, "start_shell", ends_meanwhile)
    with pytest.raises(ToolError, match="session is ending"):
        await call(tools_of(tmp_path, background)["run_command"], command=f"sleep {token}", background=True)
    assert await gone(token) and background.commands == []


@confining
async def test_a_background_command_is_confined_as_any_other(tmp_path: Path, token: str, leftovers: None) -> None:
    root = tmp_path / "project"
    root.mkdir()
    background = BackgroundCommands()
    tools = tools_of(root, background)
    escape = f"touch {tmp_path}/escaped; echo touched=$?; sleep {token}"
    try:
        said = await call(tools["run_command"], command=escape, background=True)
        assert "touched=1" in said and not (tmp_path / "escaped").exists(), said
        assert "runs in the sandbox, with no network" in said, "the model is told a server there is out of reach"
    finally:
        await background.aclose()
    assert await gone(token)


async def test_command_output_is_read_again_rather_than_answered_from_the_first_read() -> None:
    """A process's output changes by itself: the loop's repeated-read shortcut must not answer for it."""
    reads: list[str] = []

    def counter() -> str:
        """How far it got."""
        reads.append("x")
        return f"read {len(reads)}"

    for live, expected in ((True, 3), (False, 1)):
        reads.clear()
        calls = [tool_call_response(tool_call("counter")) for _ in range(3)]
        model = ScriptedModel([*calls, "done"])
        await Agent(model, tools=[Tool(counter, read_only=True, live=live)]).run("how far?")
        assert len(reads) == expected, f"live={live}"
    assert {t.name: t.live for t in BackgroundCommands().tools()} == {"command_output": True, "stop_command": False}


def quiet_assistant(root: Path, model: ScriptedModel, **options: Any) -> Assistant:
    return Assistant(root, QUIET, client=model, heartbeat=False, allow_all=True, **options)


def background_call(command: str) -> Any:
    return tool_call_response(tool_call("run_command", command=command, background=True))


async def test_every_background_command_ends_when_the_assistant_closes(
    tmp_path: Path, token: str, leftovers: None
) -> None:
    model = ScriptedModel(
        [background_call(f"sleep {token}"), background_call(f"setsid sleep {token} & sleep {token}"), "Both run."]
    )
    assistant = quiet_assistant(tmp_path, model)
    try:
        result = await assistant.ask("Start two watchers.")
        assert result.output == "Both run."
        assert await started(token, 3), "three sleeps run on after the turn"
        assert [entry.id for entry in assistant.background.commands] == ["bg1", "bg2"]
    finally:
        await assistant.aclose()
    assert await gone(token), "the assistant's end ended them all, the setsid one too"


async def test_a_served_turns_background_commands_end_with_it(tmp_path: Path, token: str, leftovers: None) -> None:
    model = ScriptedModel([background_call(f"setsid sleep {token} & sleep {token}"), "It ran."])
    assistant = quiet_assistant(tmp_path, model, approve=refuse_over_api, keep_background=False)  # as serve builds it
    service = ChatService(assistant)
    try:
        end = await service.ask("Start the watcher.")
        assert end.shown == "It ran."
        told = model.requests[1].messages[-1].content
        assert told.startswith("bg1 started") and UNTIL_THE_TURN in told, "the model knew it ends with the turn"
        assert await gone(token), "nobody can reach it over the API after the turn: it ended with it"
        assert assistant.background.commands == []
    finally:
        service.close()
        await assistant.aclose()


async def test_an_editor_session_that_closes_ends_its_own_background_commands(
    tmp_path: Path, token: str, leftovers: None
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    model = ScriptedModel(
        [background_call(f"sleep {token}1"), "A runs.", background_call(f"setsid sleep {token}2 &"), "B runs."]
    )
    agent = CortanaAgent(model, lambda folder: QUIET, allow_all=True)
    try:
        offered = (await agent.initialize(protocol_version=1)).agent_capabilities
        assert offered is not None and offered.session_capabilities is not None
        assert offered.session_capabilities.close is not None, "the editor is told it may close a session"
        first = (await agent.new_session(cwd=str(root))).session_id
        second = (await agent.new_session(cwd=str(root))).session_id
        for session in (first, second):
            said = [schema.TextContentBlock(type="text", text="Start a watcher.")]
            assert (await agent.prompt(session_id=session, prompt=said)).stop_reason == "end_turn"
        assert await started(f"{token}1", 1) and await started(f"{token}2", 1)
        await agent.close_session(session_id=first)
        assert await gone(f"{token}1"), "the closed session's command ended"
        assert running(f"{token}2"), "the other session's runs on"
    finally:
        await agent.aclose()
    assert await gone(token), "and it ends when the editor leaves"


async def test_ps_lists_them_and_stops_one(tmp_path: Path, token: str, leftovers: None) -> None:
    from rich.console import Console

    from cortana.cli.repl import Repl

    assistant = quiet_assistant(tmp_path, ScriptedModel([background_call(f"sleep {token}"), "Started."]))
    console = Console(file=io.StringIO(), width=200)
    repl = Repl(assistant, console)
    repl.out = Console(file=io.StringIO(), width=200)
    try:
        await repl.handlers["/ps"]("")
        assert "No command runs in the background" in repl.out.file.getvalue()  # type: ignore[attr-defined]
        await assistant.ask("Start a watcher.")
        await repl.handlers["/ps"]("")
        listed = repl.out.file.getvalue()  # type: ignore[attr-defined]
        assert re.search(rf"bg1 +\d+s +running\n +sleep {re.escape(token)}", listed), listed
        await repl.handlers["/ps"]("stop bg1")
        assert re.search(r"bg1 stopped, after \d+s\.", repl.out.file.getvalue()), "said"  # type: ignore[attr-defined]
        assert await gone(token)
        await repl.handlers["/ps"]("stop bg1")
        assert "No background command 'bg1'" in console.file.getvalue()  # type: ignore[attr-defined]
    finally:
        await assistant.aclose()


def test_background_commands_end_when_cortana_is_killed(scripted_engine: Any, tmp_path: Path, token: str) -> None:
    """The real ``cortana -p``, killed with SIGKILL while it answers: nothing it started in the background runs on
    (the keeper's death signal; no code of Cortana's runs after SIGKILL)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "cortana.yml").write_text(QUIET_YML)
    start = json.dumps({"command": f"setsid sleep {token} & sleep {token}", "background": True})
    scripted_engine.routes[("POST", CHAT)] = [
        tool_reply("run_command", start),
        text_reply([f"word{index} " for index in range(400)], line_delay=0.25),  # an answer long enough to kill it in
    ]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1"}
    env.update({name: os.environ[name] for name in ("PYTHONPATH", "CORTANA_KEEP_ALIVE") if name in os.environ})
    cortana = subprocess.Popen(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url,
         "--yes", "-p", "Start the watcher, then tell me a story."],
        cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(scripted_engine.bodies(CHAT)) < 2 or len(running(token, program="sleep ")) < 2:
            assert time.monotonic() < deadline, "the background command did not start"
            assert cortana.poll() is None, cortana.communicate()
            time.sleep(0.05)
        told = scripted_engine.bodies(CHAT)[1]["messages"][-1]["content"]
        assert told.startswith("bg1 started"), "it ran in the background: the turn went on while it runs"
        cortana.send_signal(signal.SIGKILL)
        cortana.wait(timeout=10)
        assert asyncio.run(gone(token)), "a killed Cortana left its background command running"
    finally:
        cortana.kill()
        cortana.communicate()
        for pid in running(token):
            os.kill(pid, signal.SIGKILL)
