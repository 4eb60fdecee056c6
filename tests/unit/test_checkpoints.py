"""Checkpoints, ``/undo`` and ``/rewind`` in the real ``cortana`` program, in a pseudo-terminal, on a scripted
engine, in a real git repository; and the store's bounds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pexpect

from cortana.memory.checkpoints import Checkpoints
from cortana.messages import ThreadRef
from cortana.turn import TurnState, in_turn
from tests.integration.test_cli_terminal import spawn_on, text_reply, tool_reply

CHAT = "/v1/chat/completions"
QUIET = (
    "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
    "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n"
)


def repository(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "cortana.yml").write_text(QUIET)
    (root / "app.py").write_text("def total():\n    return 1\n")
    return root


def test_undo_and_rewind_restore_files_and_the_conversation(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = repository(tmp_path)
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("write_file", '{"path": "notes.txt", "content": "first notes\\n"}'),
        text_reply(["Wrote the notes."]),
        tool_reply("edit_file", '{"path": "app.py", "old_text": "return 1", "new_text": "return 2"}'),
        text_reply(["Changed total."]),
        tool_reply("edit_file", '{"path": "app.py", "old_text": "return 1", "new_text": "return 3"}'),
        text_reply(["Changed it again."]),
        text_reply(["Fresh start."]),
    )
    child = spawn_on(scripted_engine.url, root, term="xterm", home=tmp_path, args=("--yes",))
    child.sendline("/undo")
    child.expect("Nothing to undo")
    child.sendline("Write the notes.")
    child.expect("Wrote the notes.")
    child.expect("›")
    child.sendline("Make total return 2.")
    child.expect("Changed total.")
    child.expect("›")
    assert "return 2" in (root / "app.py").read_text()
    child.sendline("/undo")
    child.expect("Restored the turn .*: app.py")
    child.expect("not covered")
    assert (root / "app.py").read_text() == "def total():\n    return 1\n"
    assert (root / "notes.txt").exists(), "only the last turn is undone"

    child.sendline("Make total return 3.")
    child.expect("Changed it again.")
    child.expect("›")
    (root / "app.py").write_text("def total():\n    return 30  # the user's own change\n")
    child.sendline("/undo")
    child.expect(r"Changed since the turn wrote them .*: app.py")
    child.expect(r"Overwrite them too\? \[y/N\]")
    child.sendline("n")
    child.expect("Left as they are: app.py")
    assert "return 30" in (root / "app.py").read_text(), "someone else's change is not overwritten unasked"

    child.sendline("/rewind")
    child.expect(r"1\. .*'Make total return 3\.' · app\.py")
    child.expect(r"'Write the notes\.' · notes\.txt")
    child.expect("›")
    child.sendline("/rewind 2 both")
    child.expect(r"Overwrite them too\? \[y/N\]")
    child.sendline("y")
    child.expect("Restored before turn 2: app.py, notes.txt")
    child.expect("The conversation goes on from before that turn")
    assert not (root / "notes.txt").exists(), "a file the turns created is removed"
    assert (root / "app.py").read_text() == "def total():\n    return 1\n"
    child.sendline("Hello again.")
    child.expect("Fresh start.")
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)
    sent = [m["content"] for m in scripted_engine.bodies(CHAT)[-1]["messages"] if m["role"] == "user"]
    assert not any("Write the notes." in text for text in sent), "the chat went back to before that turn"
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout in (
        "?? app.py\n?? cortana.yml\n",
        "?? .gitignore\n?? app.py\n?? cortana.yml\n",
    ), "checkpoints live outside the workspace"


def test_the_store_keeps_the_last_turns_within_its_bound(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    store = Checkpoints(root, tmp_path / "cp.db", keep_turns=3, max_bytes=50)
    thread = ThreadRef(resource_id="cli", thread_id="t")
    try:
        for number in range(5):
            with in_turn(TurnState(thread)):  # each write in its turn
                store.begin(thread, f"turn {number}")
                (root / f"f{number}.txt").write_text("x" * 20)
                store.writing(root / f"f{number}.txt", "y" * 20)
                (root / f"f{number}.txt").write_text("y" * 20)
        kept = store.recent()
        assert [c.prompt for c in kept] == ["turn 4", "turn 3"], "3 turns at most, and 50 bytes of kept content"
        store.writing(tmp_path / "outside.txt", "z")  # outside the workspace: not recorded
        assert store.recent()[0].files == ("f4.txt",)
    finally:
        store.close()
