"""Plan mode in the real ``cortana`` program, in a pseudo-terminal, on a scripted engine: a write is refused while
planning (never asked about), the plan is revised, then accepted and carried out with the usual gate."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pexpect

from tests.integration.test_cli_terminal import spawn_on, text_reply, tool_reply

CHAT = "/v1/chat/completions"
QUIET = (
    "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
    "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n"
)


def test_plan_mode_refuses_a_write_then_carries_the_accepted_plan_out(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "cortana.yml").write_text(QUIET)
    (root / "app.py").write_text("def total():\n    return 1\n")
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("edit_file", '{"path": "app.py", "old_text": "return 1", "new_text": "return 2"}'),
        text_reply(["1. In app.py, make total return 2."]),
        text_reply(["1. In app.py, make total return 2.\n2. Run the tests."]),
        tool_reply("edit_file", '{"path": "app.py", "old_text": "return 1", "new_text": "return 2"}'),
        text_reply(["Done: total returns 2."]),
    )
    child = spawn_on(scripted_engine.url, root, term="xterm", home=tmp_path)  # no --yes: the gate asks as usual
    child.sendline("/plan")
    child.expect("plan mode on")
    child.expect("plan›")
    child.sendline("Make total return 2.")
    child.expect("make total return 2")
    child.expect(r"Accept the plan\? \[a\]ccept / \[e\]dit / \[r\]eject:")
    assert "allow?" not in child.before, "a write in plan mode is refused before anyone is asked"
    assert (root / "app.py").read_text() == "def total():\n    return 1\n"
    child.sendline("e")
    child.expect("What should change in the plan?")
    child.sendline("Say how to check it.")
    child.expect("Run the tests.")
    child.expect(r"Accept the plan\?")
    child.sendline("a")
    child.expect("plan accepted")
    child.expect(r"allow\? \[y\]es once")  # carried out with the usual gate
    child.sendline("y")
    child.expect("Done: total returns 2.")
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)
    assert (root / "app.py").read_text() == "def total():\n    return 2\n"
    bodies = scripted_engine.bodies(CHAT)
    refused = [m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"][-1]
    assert "plan mode: only reading tools run" in refused
    assert "Plan mode: the user wants a plan" in bodies[0]["messages"][-1]["content"]
    assert "Revise the plan: Say how to check it." in bodies[2]["messages"][-1]["content"]
    assert "The plan is accepted." in bodies[3]["messages"][-1]["content"]
    assert "Plan mode" not in bodies[3]["messages"][-1]["content"], "the accepted plan runs out of plan mode"


def test_a_fix_in_plan_mode_shows_the_tests_and_where_first(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.unit.test_fix_command import project
    from tests.unit.test_repair import FIX

    root = project(tmp_path)
    (root / "cortana.yml").write_text(QUIET + "fix:\n  per_location: 1\n")
    scripted_engine.add("POST", CHAT, text_reply([FIX]))
    child = spawn_on(scripted_engine.url, root, term="xterm", home=tmp_path, args=("--yes",))
    child.sendline("/plan")
    child.expect("plan mode on")
    child.sendline("fix the failing test")
    child.expect("The plan:")
    child.expect("1. The tests show what to fix: .*test_total_rounds_the_vat")
    child.expect("2. Where the change goes, most likely first: .*vat")
    child.expect(r"Accept the plan\? \[a\]ccept / \[r\]eject:")
    assert scripted_engine.bodies(CHAT) == [], "planning asked the model nothing: the tests and the code said it"
    assert "int(cents * 0.2)" in (root / "shop" / "money.py").read_text()
    child.sendline("a")
    child.expect("plan accepted")
    child.expect("test_total_rounds_the_vat now passes", timeout=120)
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)
    assert "round(cents * 0.2)" in (root / "shop" / "money.py").read_text()
