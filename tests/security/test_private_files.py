"""The workspace's .cortana/ is its owner's only, and git never takes it."""

from __future__ import annotations

import asyncio
import stat
import subprocess
from pathlib import Path

from cortana import Message, ThreadRef
from cortana.assistant import workspace_memory
from cortana.config import Settings


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_memory_and_its_folder_are_private_and_ignored_by_git(tmp_path: Path) -> None:
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(tmp_path)], check=True)
    settings = Settings.model_validate({"memory": {"recall": False}})
    memory = workspace_memory(tmp_path, settings)
    await memory.append_messages(ThreadRef(), [Message.user("my bank PIN is 0000")])
    folder = tmp_path / ".cortana"
    assert mode(folder) == 0o700
    files = [path for path in folder.iterdir() if path.name.startswith("memory.db")]
    assert {path.name for path in files} >= {"memory.db", "memory.db-wal"}
    assert all(mode(path) == 0o600 for path in files), {path.name: oct(mode(path)) for path in files}
    status = await asyncio.to_thread(
        subprocess.run, ["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ".cortana" not in status.stdout, "git add . must not take the conversations"
    memory.close()


def test_an_existing_open_folder_is_narrowed(tmp_path: Path) -> None:
    folder = tmp_path / ".cortana"
    folder.mkdir(mode=0o755)
    (folder / "memory.db").touch(mode=0o644)
    memory = workspace_memory(tmp_path, Settings.model_validate({"memory": {"recall": False}}))
    memory.store.connection()
    assert mode(folder) == 0o700 and mode(folder / "memory.db") == 0o600
    memory.close()
