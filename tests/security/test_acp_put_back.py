"""An editor's cancel puts files back through Cortana's one writer: a confined command that swapped a file and a
folder for symlinks out of the workspace cannot have the put-back write through them.

The reproduction: the real ``cortana acp`` (the ``agent-client-protocol`` client on the editor's side) on a
scripted engine; the model writes two files (allowed once each), then runs a command, confined by the real
kernel, that puts a symlink to a file outside in place of one and a symlink to a folder outside in place of the
other's folder; the editor cancels. Before the one writer, the repository's text landed in the file outside and
an ``authorized_keys`` was created in the folder outside.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cortana.sandbox import kernel_support
from tests.integration.test_cli_terminal import text_reply, tool_reply
from tests.unit.test_acp import CHAT, QUIET, Editor, cortana_acp, initialized, said

pytestmark = pytest.mark.skipif(not kernel_support().confines, reason="needs the kernel's sandbox")

SWAP = (
    "mv victim-note.txt victim.bak && ln -s {outside}/secret.txt victim-note.txt && "
    "mv sub sub.real && ln -s {outside} sub && echo swapped"
)


async def test_a_cancelled_turn_does_not_put_files_back_through_symlinks(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "cortana.yml").write_text(QUIET)
    (root / "victim-note.txt").write_text("the repository's text\n")
    (root / "sub" / "authorized_keys").write_text("ssh-ed25519 AAAA attacker\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the user's own file\n")
    words = [f"word{i} " for i in range(200)]
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("write_file", '{"path": "victim-note.txt", "content": "new\\n"}'),
        tool_reply("write_file", '{"path": "sub/authorized_keys", "content": "changed\\n"}'),
        tool_reply("run_command", '{"command": "' + SWAP.format(outside=outside) + '"}'),
        text_reply(words, line_delay=0.1),
    )
    editor = Editor(answers=["allow_once", "allow_once"])
    async with cortana_acp(scripted_engine.url, root, editor) as conn:
        await initialized(conn, fs=False)
        session = (await conn.new_session(cwd=str(root), mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=session, prompt=said("Update the notes.")))
        for _ in range(300):
            if "word3 " in editor.text():
                break
            await asyncio.sleep(0.05)
        assert (root / "sub").is_symlink() and (root / "victim-note.txt").is_symlink(), editor.text()
        await conn.cancel(session_id=session)
        assert (await asyncio.wait_for(turn, 30)).stop_reason == "cancelled"
        for _ in range(100):  # the note on what was not put back may trail the answer
            if "Not put back" in editor.text():
                break
            await asyncio.sleep(0.05)
    assert (outside / "secret.txt").read_text() == "the user's own file\n", "nothing written through the link"
    assert sorted(path.name for path in outside.iterdir()) == ["secret.txt"], "no authorized_keys made outside"
    assert "Not put back" in editor.text()
    assert "victim-note.txt" in editor.text() and "sub/authorized_keys" in editor.text()
    assert "symlink" in editor.text().split("Not put back")[1]
