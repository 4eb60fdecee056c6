"""MCP servers over stdio and streamable HTTP: a server written here with the mcp SDK, and the
published mcp-server-time (offline), driven through Agent runs with scripted models."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cortana import Agent, PermissionDecision, PermissionGate
from cortana.mcp import MCPServerConfig, MCPServers
from cortana.testing import ScriptedModel, tool_call, tool_call_response

TINY = str(Path(__file__).parent.parent / "mcp_servers" / "tiny.py")


def tiny(**options: object) -> MCPServerConfig:
    return MCPServerConfig(name="tiny", command=sys.executable, args=[TINY], **options)  # type: ignore[arg-type]


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[MCPServers]:
    group = MCPServers(
        [
            tiny(env={"TINY_CRASH_MARKER": str(tmp_path / "crashed")}),
            MCPServerConfig(
                name="time", command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"]
            ),
            MCPServerConfig(name="broken", command=sys.executable, args=[TINY, "--crash-on-start"]),
        ]
    )
    yield group
    await group.aclose()


def tool_results(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.content for m in result.new_messages if m.role == "tool"]


async def test_servers_load_on_demand_and_their_tools_run(servers: MCPServers) -> None:
    model = ScriptedModel(
        [
            tool_call_response(tool_call("load_tools", group="tiny")),
            tool_call_response(tool_call("tiny.add", a=2, b="3")),
            "2 + 3 = 5",
        ]
    )
    agent = Agent(model, tools=servers.groups())
    assert servers.servers["tiny"].session is None, "nothing starts before the model asks"
    result = await agent.run("add 2 and 3")
    loaded, added = tool_results(result)
    assert "tiny.add (Add two integers.)" in loaded and "tiny.echo" in loaded
    assert added == "5", "the string '3' was coerced to the schema's integer"
    assert [spec.name for spec in model.requests[0].tools] == ["load_tools"]
    assert "tiny.add" in [spec.name for spec in model.requests[1].tools]
    assert servers.servers["time"].session is None, "other servers stay stopped"


async def test_the_published_time_server_works_offline(servers: MCPServers) -> None:
    model = ScriptedModel(
        [
            tool_call_response(tool_call("load_tools", group="time")),
            tool_call_response(
                tool_call(
                    "time.convert_time", source_timezone="Europe/Paris", time="16:30", target_timezone="Asia/Tokyo"
                )
            ),
            tool_call_response(tool_call("time.get_current_time", timezone="Mars/Olympus")),
            "done",
        ]
    )
    result = await Agent(model, tools=servers.groups()).run("convert")
    converted, bad_zone = [m for m in result.new_messages if m.role == "tool"][1:]
    assert '"datetime": "' in converted.content and "T00:30:00+09:00" in converted.content
    assert '"time_difference": "+8.0h"' in converted.content
    assert bad_zone.is_error and "Invalid timezone" in bad_zone.content


async def test_a_server_that_fails_to_start_is_reported_and_the_agent_keeps_working(servers: MCPServers) -> None:
    model = ScriptedModel(
        [
            tool_call_response(tool_call("load_tools", group="broken")),
            tool_call_response(tool_call("load_tools", group="tiny")),
            tool_call_response(tool_call("tiny.echo", text="still here")),
            "ok",
        ]
    )
    result = await Agent(model, tools=servers.groups()).run("go")
    failed, loaded, echoed = [m for m in result.new_messages if m.role == "tool"]
    assert failed.is_error and "MCP server 'broken' failed to start" in failed.content
    assert "tiny: refusing to start (asked to crash)" in failed.content, "its stderr is shown"
    assert not loaded.is_error and echoed.content == "still here"


async def test_a_server_that_dies_mid_call_is_restarted_once(servers: MCPServers) -> None:
    model = ScriptedModel(
        [
            tool_call_response(tool_call("load_tools", group="tiny")),
            tool_call_response(tool_call("tiny.crash_once")),
            tool_call_response(tool_call("tiny.crash_always")),
            tool_call_response(tool_call("tiny.add", a=1, b=1)),
            "done",
        ]
    )
    result = await Agent(model, tools=servers.groups()).run("go")
    _, survived, died, after = [m for m in result.new_messages if m.role == "tool"]
    assert survived.content == "survived", "the server was restarted and the call retried"
    assert died.is_error and "already restarted once" in died.content
    assert after.is_error and "stays stopped" in after.content, "a server that died twice stays down"
    assert servers.servers["tiny"].restarts == 1


async def test_mcp_calls_ask_at_the_permission_gate_by_default(servers: MCPServers) -> None:
    asked: list[str] = []

    def approve(call, tool, reason):  # type: ignore[no-untyped-def]
        asked.append(call.name)
        return PermissionDecision.deny("not today")

    model = ScriptedModel(
        [
            tool_call_response(tool_call("load_tools", group="tiny")),
            tool_call_response(tool_call("tiny.echo", text="x")),
            "ok",
        ]
    )
    gate = PermissionGate(default="allow", approve=approve)
    result = await Agent(model, tools=servers.groups(), permissions=gate).run("go")
    assert asked == ["tiny.echo"], "load_tools is allowed; the MCP tool asks"
    assert "Permission denied for 'tiny.echo': not today" in tool_results(result)[1]


async def test_an_eager_server_is_offered_from_the_start(tmp_path: Path) -> None:
    async with MCPServers([tiny(eager=True)]) as eager:
        model = ScriptedModel([tool_call_response(tool_call("tiny.add", a=20, b=22)), "42"])
        result = await Agent(model, tools=eager.groups()).run("go")
        assert "tiny.add" in [spec.name for spec in model.requests[0].tools]
        assert tool_results(result) == ["42"]


@pytest.fixture
def http_server() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, TINY, "--http", str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as client:
            if client.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


async def test_streamable_http_server(http_server: str) -> None:
    async with MCPServers(
        [MCPServerConfig(name="remote", url=http_server, headers={"Authorization": "Bearer t"})]
    ) as group:
        model = ScriptedModel(
            [
                tool_call_response(tool_call("load_tools", group="remote")),
                tool_call_response(tool_call("remote.add", a=40, b=2)),
                "42",
            ]
        )
        result = await Agent(model, tools=group.groups()).run("go")
        assert tool_results(result)[1] == "42"


def test_bad_configs_name_the_problem() -> None:
    from pydantic import ValidationError

    from cortana import ConfigError

    with pytest.raises(ValidationError, match="exactly one of command"):
        MCPServerConfig(name="x")
    with pytest.raises(ValidationError, match="1-32 letters"):
        MCPServerConfig(name="has space", command="x")
    with pytest.raises(ConfigError, match="repeated: tiny"):
        MCPServers([tiny(), tiny()])


async def test_servers_stop_with_aclose(servers: MCPServers) -> None:
    model = ScriptedModel([tool_call_response(tool_call("load_tools", group="tiny")), "ok"])
    await Agent(model, tools=servers.groups()).run("go")
    assert servers.servers["tiny"].session is not None
    await servers.aclose()
    assert servers.servers["tiny"].session is None
    await asyncio.sleep(0)
