"""What Cortana starts gets no secrets of the user's and no socket family but UNIX and IP.

Reported: a confined ``env`` ran unasked, and ``cortana -p --output-format json`` then carried ``GITHUB_TOKEN`` and
``OPENAI_API_KEY`` into a CI log; a confined command could open an ``AF_VSOCK`` socket, which on VMs and WSL2
reaches the host past the network namespace. The reproductions run the real ``cortana -p`` on a scripted engine
and confined commands under the real kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cortana.config import MCPServerConfig
from cortana.mcp import MCPServers
from cortana.sandbox import Sandbox, kernel_support
from cortana.sandbox.policy import without_secrets
from cortana.tools.hooks import CommandHooks, HookEntry
from tests.integration.test_cli_terminal import text_reply, tool_reply
from tests.security.test_sandbox import MODES, TINY, run_commands
from tests.unit.test_headless import CHAT, QUIET

confining = pytest.mark.skipif(not kernel_support().confines, reason="needs the kernel's sandbox")
SECRETS = {"GITHUB_TOKEN": "ghp_shouldnotleak", "OPENAI_API_KEY": "sk-shouldnotleak", "DB_PASSWORD": "hunter2"}


def test_names_that_look_like_secrets_are_left_out_unless_kept() -> None:
    environ = {**SECRETS, "PATH": "/bin", "Aws_Secret_Access_Key": "x", "AWS_REGION": "eu", "HOME": "/h"}
    assert without_secrets(environ) == {"PATH": "/bin", "AWS_REGION": "eu", "HOME": "/h"}
    kept = without_secrets(environ, keep=["github_token"], drop=["AWS_*"])
    assert kept == {"PATH": "/bin", "HOME": "/h", "GITHUB_TOKEN": "ghp_shouldnotleak"}


def test_a_process_gets_its_own_settings_on_top_and_the_user_line_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    box = Sandbox(tmp_path, env_keep=["DB_PASSWORD"], env_drop=["HOME"])
    child = box.child_environment({"GIT_CONFIG_KEY_0": "core.fsmonitor"})
    assert "GITHUB_TOKEN" not in child and "OPENAI_API_KEY" not in child and "HOME" not in child
    assert child["DB_PASSWORD"] == "hunter2", "kept by the user's sandbox.env.keep"
    assert child["GIT_CONFIG_KEY_0"] == "core.fsmonitor", "Cortana's own settings for the process are not filtered"
    assert box.child_environment(secrets=True)["GITHUB_TOKEN"] == "ghp_shouldnotleak"
    assert box.elsewhere(tmp_path / "scratch").child_environment()["DB_PASSWORD"] == "hunter2"


@confining
def test_env_in_a_one_shot_json_leaks_no_secret(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "project"
    root.mkdir()
    (root / "cortana.yml").write_text(QUIET + "agent:\n  tool_judge: false\n")
    scripted_engine.add("POST", CHAT, tool_reply("run_command", '{"command": "env"}'), text_reply(["Listed."]))
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url,
         "-p", "--output-format", "json", "Run env: which variables are set?"],
        cwd=root, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1", **SECRETS},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert len(result["tool_calls"]) == 1, json.dumps(result)[:1500]
    [call] = result["tool_calls"]
    assert call["status"] == "completed" and "PATH=" in call["output"], call
    for value in SECRETS.values():
        assert value not in done.stdout and value not in done.stderr


@confining
async def test_hooks_and_mcp_servers_get_no_inherited_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "project"
    root.mkdir()
    hooks = CommandHooks(root, {"stop": [HookEntry("env > hook-env.txt")]}, Sandbox(root))
    await hooks.stop("done")
    seen = (root / "hook-env.txt").read_text()
    assert "CORTANA_HOOK_EVENT=stop" in seen and not any(value in seen for value in SECRETS.values())
    server = root / "server.py"
    server.write_text(
        "import json, os, runpy\nopen('server-env.json', 'w').write(json.dumps(dict(os.environ)))\n"
        f"runpy.run_path({str(TINY)!r}, run_name='__main__')\n"
    )
    config = MCPServerConfig(
        name="tiny", command=sys.executable, args=[str(server)], cwd=str(root), env={"GITHUB_TOKEN": "its-own"}
    )
    async with MCPServers([config], sandbox=Sandbox(root)) as servers:
        assert await servers.groups()[0].ensure_loaded()
    environment = json.loads((root / "server-env.json").read_text())
    assert environment["GITHUB_TOKEN"] == "its-own", "what its configuration names, it gets"
    assert "OPENAI_API_KEY" not in environment and "DB_PASSWORD" not in environment


@confining
@pytest.mark.parametrize("mode", MODES)
async def test_no_socket_family_but_unix_and_ip(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "project"
    root.mkdir()
    probe = (
        "import socket\n"
        "for name in ('AF_UNIX', 'AF_INET', 'AF_VSOCK', 'AF_NETLINK', 'AF_PACKET'):\n"
        "    try:\n"
        "        kind = socket.SOCK_STREAM if name == 'AF_VSOCK' else socket.SOCK_DGRAM\n"
        "        socket.socket(getattr(socket, name), kind)\n"
        "        print(name, 'opened')\n"
        "    except OSError as error:\n"
        "        print(name, 'refused', error.errno)\n"
        "socket.socketpair()\n"
        "print('pair opened')\n"
    )
    (root / "probe.py").write_text(probe)
    [result] = await run_commands(root, "python3 probe.py", sandbox=Sandbox(root, mode=mode))  # type: ignore[arg-type]
    assert "AF_UNIX opened" in result and "pair opened" in result, result
    assert ("AF_INET opened" in result) == (mode == "namespaces"), "IP only inside its own network namespace"
    for family in ("AF_VSOCK", "AF_NETLINK", "AF_PACKET"):
        assert f"{family} refused" in result, result
