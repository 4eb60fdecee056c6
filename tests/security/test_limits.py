"""Every tool call is bounded: in time, in output, and in what it leaves running."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from cortana import Agent, InMemoryHistory, ThreadRef, ToolError, tool
from cortana.config import MCPServerConfig
from cortana.mcp import MCPServers
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools.builtin import builtin_tools

HANG_GUARD_S = 30
SILENT_SERVER = Path(__file__).resolve().parents[1] / "mcp_servers" / "silent.py"


async def command(root: Path, **arguments: object) -> str:
    tool = {t.name: t for t in builtin_tools(root)}["run_command"]
    return str(await asyncio.wait_for(tool.invoke(tool.validate(arguments)), HANG_GUARD_S))


def dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"  # killed, waiting to be reaped by init
    except (ProcessLookupError, FileNotFoundError):
        return True


async def gone(pid: int) -> bool:
    for _ in range(100):
        if await asyncio.to_thread(dead, pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_background_child_does_not_outlive_its_command(tmp_path: Path) -> None:
    output = await command(tmp_path, command="sleep 300 & echo $!")
    pid = int(output.splitlines()[1])
    assert "background processes it left were stopped" in output
    assert await gone(pid), "the background sleep was left running"


async def test_a_timeout_stops_the_whole_group_at_once(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"did not finish within 1s"):
        await command(tmp_path, command="sleep 300 & echo $! > child.pid; sleep 300", timeout=1)
    assert await gone(int((tmp_path / "child.pid").read_text()))


@pytest.mark.parametrize("timeout", ["inf", "nan", -1, 0, 10_000])
async def test_an_unbounded_timeout_is_refused(tmp_path: Path, timeout: object) -> None:
    tool = {t.name: t for t in builtin_tools(tmp_path)}["run_command"]
    with pytest.raises(ToolError, match="timeout"):
        tool.validate({"command": "true", "timeout": timeout})


async def test_a_command_cannot_read_the_users_terminal(tmp_path: Path) -> None:
    assert await command(tmp_path, command='read line; echo "got:[$line]"') == "exit code 0\ngot:[]\n"


async def test_huge_output_is_cut_while_it_streams(tmp_path: Path) -> None:
    tracemalloc.start()
    output = await command(tmp_path, command="head -c 100000000 /dev/zero | tr '\\0' x")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "output cut at 12,000 of 100,000,000 characters" in output and len(output) < 13_000
    assert peak < 16 << 20, f"100 MB of output took {peak >> 20} MB"


async def test_custom_tools_get_a_timeout_and_an_output_cap() -> None:
    @tool
    async def stall() -> str:
        """Never answers."""
        await asyncio.sleep(300)
        return "late"

    @tool
    def flood() -> str:
        """Returns 50 MB."""
        return "z" * (50 << 20)

    memory = InMemoryHistory()
    model = ScriptedModel([tool_call_response(tool_call("stall"), tool_call("flood")), "done"])
    # 1 s: enough for a loaded machine to build the 50 MB string, so only the stalled tool times out
    agent = Agent(model, tools=[stall, flood], memory=memory, tool_timeout=1.0, max_tool_output=5_000)
    result = await asyncio.wait_for(agent.run("go", thread="t"), HANG_GUARD_S)
    stalled, flooded = result.new_messages[2:4]
    assert stalled.is_error and "did not finish within 1s" in stalled.content
    assert len(flooded.content) < 5_200 and "characters left out" in flooded.content
    stored = memory.threads[ThreadRef(thread_id="t")]
    assert max(len(message.content) for message in stored) < 5_200, "memory keeps the bounded result only"
    assert len(model.requests[1].messages[-1].content) < 5_200, "and so does the prompt"


async def test_a_tools_own_timeout_and_the_agents_rules(tmp_path: Path) -> None:
    @tool
    async def slow() -> str:
        """Takes a while."""
        await asyncio.sleep(0.5)
        return "finished"

    model = ScriptedModel([tool_call_response(tool_call("slow")), "ok", tool_call_response(tool_call("slow")), "ok"])
    quick = Agent(model, tools=[slow], tool_timeout=0.1)
    assert "did not finish within 0.1s" in (await quick.run("x")).new_messages[2].content
    patient = Agent(model, tools=[slow], tool_timeout=0.1, tool_timeouts={"sl*": 5})
    assert (await patient.run("x")).new_messages[2].content == "finished"


async def test_an_mcp_server_that_never_answers_initialize_is_given_up_on() -> None:
    config = MCPServerConfig(name="silent", command=sys.executable, args=[str(SILENT_SERVER)], startup_timeout=1)
    async with MCPServers([config]) as servers:
        model = ScriptedModel([tool_call_response(tool_call("load_tools", group="silent")), "ok"])
        result = await asyncio.wait_for(Agent(model, tools=servers.groups()).run("load it"), HANG_GUARD_S)
    loaded = result.new_messages[2]
    assert loaded.is_error and "did not answer initialize and list_tools within 1s" in loaded.content
    assert result.output == "ok"


ESCAPES = {
    "setsid": "setsid sleep 77 & echo $! > child.pid; echo started",
    "setsid, then the shell waits": "setsid sh -c 'echo $$ > child.pid; sleep 78' & sleep 60",
    "a double fork": "(sh -c 'sleep 79 & echo $! > child.pid' &) ; sleep 0.3; echo started",
    "nohup": "nohup sh -c 'echo $$ > child.pid; exec sleep 80' > /dev/null 2>&1 & sleep 0.3; echo started",
    "a daemon that closes its descriptors": (
        'python3 -c "import os, time\nif os.fork(): raise SystemExit\nos.setsid()\nif os.fork(): raise SystemExit\n'
        "open('child.pid', 'w').write(str(os.getpid()))\nfor fd in range(0, 256):\n    try: os.close(fd)\n"
        '    except OSError: pass\ntime.sleep(81)"; sleep 0.5; echo started'
    ),
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
@pytest.mark.parametrize("how", list(ESCAPES), ids=list(ESCAPES))
async def test_no_descendant_outlives_its_command_however_it_detaches(tmp_path: Path, how: str) -> None:
    timeout = 2 if "waits" in how else 30
    try:
        output = await command(tmp_path, command=ESCAPES[how], timeout=timeout)
        assert "started" in output
    except ToolError as error:
        assert "waits" in how and "did not finish within 2s" in str(error)
    pid_file = tmp_path / "child.pid"
    for _ in range(50):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    assert await gone(pid), f"{how}: pid {pid} outlived its command"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
def test_a_command_dies_with_cortana_even_when_cortana_is_killed(tmp_path: Path) -> None:
    """SIGKILL leaves Cortana no time to clean up: the reaper's death signal does it."""
    import signal
    import subprocess

    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from cortana.tools.builtin import builtin_tools\n"
        "async def main():\n"
        "    tool = {t.name: t for t in builtin_tools(Path(sys.argv[1]))}['run_command']\n"
        "    await tool.invoke(tool.validate({'command': 'setsid sleep 82 & echo $! > child.pid; sleep 300'}))\n"
        "asyncio.run(main())\n"
    )
    cortana = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)])
    pid_file = tmp_path / "child.pid"
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    cortana.send_signal(signal.SIGKILL)
    cortana.wait(timeout=10)
    pid = int(pid_file.read_text())
    for _ in range(100):
        if dead(pid):
            break
        time.sleep(0.05)
    assert dead(pid), "the setsid child outlived a killed Cortana"


def test_a_sync_tool_stuck_past_its_timeout_does_not_hold_the_exit(tmp_path: Path) -> None:
    """Reported: a tool thread stuck past its timeout kept the process from exiting for 25 s."""
    import subprocess

    script = (
        "import time\n"
        "from cortana import Agent, tool\n"
        "from cortana.testing import ScriptedModel, tool_call, tool_call_response\n"
        "@tool\n"
        "def stuck() -> str:\n"
        "    '''Never returns in time.'''\n"
        "    time.sleep(60)\n"
        "    return 'late'\n"
        "model = ScriptedModel([tool_call_response(tool_call('stuck')), 'Gave up on it.'])\n"
        "result = Agent(model, tools=[stuck], tool_timeout=0.5).run_sync('go')\n"
        "print(result.output, flush=True)\n"
        "print(time.monotonic(), flush=True)\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    ended = time.monotonic()
    answer, answered_at = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert answer == "Gave up on it."
    assert ended - float(answered_at) < 1.5, f"the process exited {ended - float(answered_at):.1f} s after the answer"
    assert ended - started < 20


def minified(functions: int) -> str:
    return "".join(f"function f{i}(a,b){{return a+b*{i};}}" for i in range(functions))


async def test_a_one_megabyte_minified_line_is_edited_in_linear_time(tmp_path: Path) -> None:
    """Reported: old_text spaced differently on one long line took 4.3 s at 29 KB, 86 s at 122 KB (quadratic).

    The bound is generous (a quadratic match would take hours here): it catches the shape, not the speed.
    """
    text = minified(33_000)  # 1.1 MB, one line
    assert len(text) > 1_000_000 and "\n" not in text
    (tmp_path / "app.min.js").write_text(text)
    tool = {t.name: t for t in builtin_tools(tmp_path)}["edit_file"]
    old = "function f16000( a, b ) { return a + b * 16000; }"
    started = time.perf_counter()
    done = await tool.invoke(tool.validate({"path": "app.min.js", "old_text": old, "new_text": "function f16000(){}"}))
    assert time.perf_counter() - started < 10
    assert "matched lines 1-1 once" in done
    assert (tmp_path / "app.min.js").read_text() == text.replace(
        "function f16000(a,b){return a+b*16000;}", "function f16000(){}"
    )
    started = time.perf_counter()
    with pytest.raises(ToolError, match=r"Line 1 is 1,\d{3},\d{3} characters long; the part most like old_text"):
        await tool.invoke(tool.validate({"path": "app.min.js", "old_text": "function g( x ) { y(); }", "new_text": ""}))
    assert time.perf_counter() - started < 10


async def test_a_loose_match_twice_in_one_line_is_not_guessed(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text("let total = add( 1, 2 ); let other = add( 1, 2 );\n" + "// filler\n" * 400)
    tool = {t.name: t for t in builtin_tools(tmp_path)}["edit_file"]
    with pytest.raises(ToolError, match="old_text was not found"):
        await tool.invoke(tool.validate({"path": "a.js", "old_text": "add(1,2);", "new_text": "add(1, 3);"}))
