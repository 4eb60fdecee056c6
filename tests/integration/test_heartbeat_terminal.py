"""The heartbeat in the real ``cortana`` program, in a pseudo-terminal, on a scripted engine on loopback.

A scripted engine, because what is tested is when a check-in runs and how it is shown, not what a
model says (bench/heartbeat_eval.py measures that on the embedded engine).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pexpect
import pytest

from tests.integration.test_cli_terminal import spawn_on, stored, text_reply, whole_reply

CHAT = "/v1/chat/completions"
BEAT_SECONDS = 2.4


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "cortana.yml").write_text(
        "memory:\n  recall: false\n"
        "graphify:\n  enabled: false\n"
        f"heartbeat:\n  interval_minutes: {BEAT_SECONDS / 60}\n  active_hours: null\n"
        "  idle_checkin_hours: null\n  reflect_hours: null\n  max_unanswered: 1\n"
    )
    return tmp_path


def chat_requests(engine) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    return engine.bodies(CHAT)


def test_a_check_in_appears_while_idle_and_is_kept(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    scripted_engine.add("POST", CHAT, whole_reply("Your call with Sam starts in ten minutes."))
    child = spawn_on(scripted_engine.url, workspace, term="xterm")
    child.expect("cortana checks in:", timeout=30)
    child.expect("Your call with Sam starts in ten minutes.")
    child.sendline("/heartbeat")
    child.expect("quiet until you speak; any hour; 1/1 unanswered")
    child.expect("checklist: shown")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)
    (checklist,) = chat_requests(scripted_engine)
    assert checklist["stream"] is False, "a check-in is shown once it is whole: it is asked for whole"
    assert "HEARTBEAT_OK" in checklist["messages"][-1]["content"]
    assert "Local time:" in checklist["messages"][-1]["content"]
    bodies = [json.loads(body) for body in stored(workspace)]
    assert [(b["role"], b.get("name")) for b in bodies] == [("user", "heartbeat"), ("assistant", None)]
    assert bodies[1]["content"] == "Your call with Sam starts in ten minutes."


def test_no_check_in_while_a_prompt_is_half_typed(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    scripted_engine.add("POST", CHAT, text_reply(["Hi there."]), whole_reply("HEARTBEAT_OK"))
    child = spawn_on(scripted_engine.url, workspace, term="xterm")
    child.send("hello wor")
    time.sleep(4 * BEAT_SECONDS)  # several beats fall due while the prompt holds text
    assert chat_requests(scripted_engine) == []
    assert child.expect(["checks in", pexpect.TIMEOUT], timeout=1) == 1
    child.sendline("ld")
    child.expect("Hi there.")
    child.expect("›")
    assert chat_requests(scripted_engine)[0]["messages"][-1]["content"].endswith("hello world")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)


def test_no_heartbeat_gives_no_check_in(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    scripted_engine.add("POST", CHAT, text_reply(["Your call with Sam starts in ten minutes."]))
    child = spawn_on(scripted_engine.url, workspace, term="xterm", args=("--no-heartbeat",))
    time.sleep(3 * BEAT_SECONDS)
    child.sendline("/heartbeat")
    child.expect(r"The heartbeat is off \(--no-heartbeat\)")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)
    assert "checks in" not in child.before
    assert chat_requests(scripted_engine) == []
    assert not (workspace / ".cortana" / "memory.db").exists()  # nothing was said, so nothing was stored


def test_a_check_in_that_arrives_while_typing_is_printed_above_what_was_typed(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    slow = whole_reply("Your call with Sam starts in ten minutes.", delay=2.4)
    scripted_engine.add("POST", CHAT, slow, text_reply(["Hi there."]))
    child = spawn_on(scripted_engine.url, workspace, term="xterm")
    for _ in range(300):  # the check-in has started
        if chat_requests(scripted_engine):
            break
        time.sleep(0.05)
    child.send("hello wor")  # typed while the check-in is being written
    child.expect("cortana checks in:", timeout=30)
    child.expect("ten minutes.")
    child.sendline("ld")  # finishes the line typed before the check-in was printed
    child.expect("Hi there.")
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)
    turn = chat_requests(scripted_engine)[1]["messages"]
    assert turn[-1]["content"].endswith("\n\nhello world"), "what was typed reached the turn whole"
    assert [m["role"] for m in turn[-3:-1]] == ["user", "assistant"]  # the check-in is in the history
    assert "Your call with Sam starts in ten minutes." in turn[-2]["content"]
