"""No workspace that is the home folder or ``/``: nothing Cortana starts may write there, and the user is told.

Reported: started in ``~`` (or an ACP session whose ``cwd`` is ``~`` or ``/``), confined commands ran unasked with
the home folder writable, and ``~/.bashrc``, ``~/.ssh/authorized_keys`` and ``~/.local/bin/git`` were written with
no warning. The reproductions run the real ``cortana`` (``-p``, with ``--yes``) and the real ``cortana acp`` with
the home folder as the workspace, on a scripted engine, and confined processes under the real kernel.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import acp
import pytest

from cortana.sandbox import Sandbox, kernel_support
from cortana.tools.builtin import Workspace
from cortana.tools.builtin.commands import run_shell
from tests.integration.test_cli_terminal import text_reply, tool_reply
from tests.unit.test_acp import QUIET, Editor, cortana_acp, initialized
from tests.unit.test_headless import CHAT

confining = pytest.mark.skipif(not kernel_support().confines, reason="needs the kernel's sandbox")
PLANT = (
    "echo pwned >> .bashrc; mkdir -p .ssh .local/bin; echo ssh-ed25519 AAAA attacker >> .ssh/authorized_keys; "
    "printf '#!/bin/sh\\n' > .local/bin/git; echo done"
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home" / "me"
    folder.mkdir(parents=True)
    (folder / ".bashrc").write_text("# mine\n")
    monkeypatch.setenv("HOME", str(folder))
    return folder


def test_the_home_folder_and_the_folders_above_it_are_never_writable_roots(home: Path) -> None:
    for folder, said in ((home, "is your home folder"), (home.parent, "holds your home folder"), (Path("/"), "root")):
        box = Sandbox(folder)
        assert box.too_wide is not None and said in box.too_wide, (folder, box.too_wide)
        assert not box.confines, "commands there are asked"
        assert Path(os.path.realpath(folder)) not in box.policy().writable
        assert said in box.describe() or not box.enabled or box.mode is None
    project = home / "code" / "app"
    project.mkdir(parents=True)
    assert Sandbox(project).too_wide is None and Path(project) in Sandbox(project).policy().writable


def test_dotfiles_at_the_top_of_the_home_folder_are_protected_for_the_file_tools(home: Path) -> None:
    space = Workspace(home)
    assert space.protected(home / ".bashrc") == f".bashrc in {home}"
    assert space.protected(home / ".ssh" / "authorized_keys") == f".ssh in {home}"
    assert space.protected(home / "notes.txt") is None
    (home / "code").mkdir()
    assert Workspace(home / "code").protected(home / "code" / ".env") is None, "a project's dotfiles are its own"


@confining
async def test_a_confined_process_cannot_write_the_home_folder(home: Path) -> None:
    box = Sandbox(home)
    with box.confined() as confined:
        finished = await run_shell(PLANT, home, confined.environment(os.environ), 30, confined=confined)
    assert finished.returncode is not None, finished.output
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert not (home / ".ssh").exists() and not (home / ".local").exists()


@confining
def test_cortana_in_the_home_folder_asks_every_command_even_under_yes(scripted_engine, home: Path) -> None:  # type: ignore[no-untyped-def]
    (home / "cortana.yml").write_text(QUIET)
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("run_command", json.dumps({"command": PLANT})),
        tool_reply("write_file", '{"path": ".bashrc", "content": "pwned\\n"}'),
        text_reply(["Done."]),
    )
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url,
         "-p", "--yes", "--output-format", "json", "Set up my shell."],
        cwd=home, env={"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "is your home folder" in done.stderr, done.stderr
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert not (home / ".ssh").exists() and not (home / ".local").exists()
    [result] = [json.loads(line) for line in done.stdout.splitlines()]
    calls = {call["name"]: call for call in result["tool_calls"]}
    assert calls["run_command"]["status"] == "failed" and "asked every time" in calls["run_command"]["output"]
    assert calls["write_file"]["status"] == "failed" and ".bashrc in" in calls["write_file"]["output"]


@pytest.mark.parametrize("where", ["home", "root"])
async def test_an_editor_session_in_the_home_folder_or_root_is_refused_with_the_reason(
    scripted_engine,
    home: Path,
    where: str,  # type: ignore[no-untyped-def]
) -> None:
    project = home / "project"
    project.mkdir()
    (project / "cortana.yml").write_text(QUIET)
    cwd = str(home) if where == "home" else "/"
    async with cortana_acp(scripted_engine.url, project, Editor()) as conn:
        await initialized(conn)
        with pytest.raises(acp.RequestError) as refused:
            await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), 30)
        assert "project folder" in str(refused.value.data or refused.value), refused.value
        fine = await conn.new_session(cwd=str(project), mcp_servers=[])
        assert fine.session_id
