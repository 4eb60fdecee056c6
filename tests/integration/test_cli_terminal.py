"""The real ``cortana`` program in a pseudo-terminal (pexpect), on the real embedded engine."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

PROMPT = "› "


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "cortana.yml").write_text("temperature: 0\nmemory:\n  recall: false\n")
    (tmp_path / "zebra_notes.txt").write_text("stripes\n")
    (tmp_path / "keep.txt").write_text("original\n")
    return tmp_path


@pytest.fixture
def cortana(engine_url: str, workspace: Path) -> Iterator[pexpect.spawn]:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", engine_url],
        cwd=str(workspace),
        encoding="utf-8",
        timeout=180,
        dimensions=(40, 120),
        env={"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": str(workspace), "NO_COLOR": "1"},
    )
    child.expect_exact(PROMPT)
    yield child
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=60)


def stored(workspace: Path) -> list[str]:
    with sqlite3.connect(workspace / ".cortana" / "memory.db") as db:
        return [row[0] for row in db.execute("SELECT body FROM messages ORDER BY id")]


def test_a_prompt_gets_a_streamed_answer(cortana: pexpect.spawn) -> None:
    cortana.sendline("What is the capital of France? Answer in one word.")
    cortana.expect("Paris")
    cortana.expect(r"\d+ model calls? · ")  # the summary line after the turn
    cortana.expect_exact(PROMPT)


def test_shell_output_reaches_the_next_turn(cortana: pexpect.spawn, workspace: Path) -> None:
    cortana.sendline("!ls")
    cortana.expect("zebra_notes.txt")
    cortana.expect_exact(PROMPT)
    cortana.sendline("Which file name above starts with zebra? Answer with the file name only.")
    cortana.expect("zebra_notes")
    cortana.expect_exact(PROMPT)
    assert any("I ran `ls` in the shell" in body and "zebra_notes.txt" in body for body in stored(workspace))


def test_unknown_commands_get_a_suggestion_and_clear_starts_a_new_thread(cortana: pexpect.spawn) -> None:
    cortana.sendline("/clearr")
    cortana.expect("Unknown command /clearr. Did you mean /clear?")
    cortana.expect_exact(PROMPT)
    cortana.sendline("/clear")
    cortana.expect("new thread")
    cortana.expect_exact(PROMPT)
    cortana.sendline("/compact")
    cortana.expect("nothing to compact yet")
    cortana.expect_exact(PROMPT)
