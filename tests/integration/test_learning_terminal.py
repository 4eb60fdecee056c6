"""The learning commands in the real ``cortana`` program, in a pseudo-terminal, on a scripted engine on loopback.

A scripted engine, because what is tested is the commands and what they store, not what a model
says (bench/learning.py measures that on the embedded engine).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from cortana.learning.skills import parse_skill
from tests.integration.test_cli_terminal import spawn_on, text_reply, tool_reply

CHAT = "/v1/chat/completions"
RECIPE = (
    "TASK: Find which module defines PAYMENT_TERMS.\nSTEPS:\n1. read_file config.py\nAVOID:\n"
    "- reading billing.py and report.py first"
)
SKILL = (
    "---\nname: release\ndescription: Cut a release of the project.\n---\n"
    "1. Run `echo hello > out.txt`.\n2. Bump the version first.\n"
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "cortana.yml").write_text(
        "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
        "agent:\n  prompt_search: 0\n  named_files: 0\n"
    )
    for name in ("billing.py", "report.py", "config.py"):
        (tmp_path / name).write_text(f"# {name}\n" + ("PAYMENT_TERMS = 30\n" if name == "config.py" else ""))
    return tmp_path


def three_reads_and_a_recipe() -> list:  # type: ignore[type-arg]
    """A turn of three reads and an answer, then the recipe the distilling call writes."""
    return [
        tool_reply("read_file", '{"path": "billing.py"}'),
        tool_reply("read_file", '{"path": "report.py"}'),
        tool_reply("read_file", '{"path": "config.py"}'),
        text_reply(["PAYMENT_TERMS is defined in config.py."]),
        text_reply([RECIPE]),
    ]


def learned(child: pexpect.spawn, text: str) -> None:
    """``/learned`` until it shows ``text`` (distilling runs in the background after the answer)."""
    for _ in range(20):
        child.sendline("/learned")
        if child.expect([text, "Nothing learned yet"], timeout=30) == 0:
            return
        child.expect("›")
    raise AssertionError(f"/learned never showed {text!r}")


def test_rating_learned_and_teach_in_the_terminal(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    scripted_engine.add(
        "POST",
        CHAT,
        *three_reads_and_a_recipe(),
        text_reply([SKILL]),
    )
    child = spawn_on(scripted_engine.url, workspace, term="xterm", args=("--yes",))
    child.sendline("/good")
    child.expect("There is no answer in this conversation to rate yet.")
    child.sendline("Which module defines PAYMENT_TERMS?")
    child.expect("PAYMENT_TERMS is defined in config.py.")
    child.expect("›")
    learned(child, "Find which module defines PAYMENT_TERMS.")
    child.expect(r"\+0/-0 · used 0× · 0 min old")
    child.sendline("/good")
    child.expect(r"Rated the last answer good \(recipes 1\)\.")
    child.sendline("/bad")
    child.expect(r"Rated the last answer bad \(recipes 1\)\.")
    child.sendline("/learned")
    child.expect(r"\+1/-1 · used 0×")

    child.sendline("/teach release")
    child.expect("Teaching 'release'")
    child.expect("teach›")
    child.sendline("!echo hello > out.txt")
    child.expect("teach›")
    child.sendline("Bump the version first.")
    child.expect("noted")
    child.sendline("/teach done")
    child.expect("Draft of skills/release/SKILL.md")
    child.expect(r"Keep, edit or drop it\? \[k/e/d\]")
    assert not (workspace / "skills").exists(), "nothing is written before the user says yes"
    child.sendline("k")
    child.expect("Saved ")
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)

    skill = parse_skill((workspace / "skills" / "release" / "SKILL.md").read_text())
    assert skill.name == "release" and "Bump the version first." in skill.body
    bodies = scripted_engine.bodies(CHAT)
    distill, draft = bodies[-2]["messages"][-1]["content"], bodies[-1]["messages"][-1]["content"]
    assert 'CALL read_file({"path": "config.py"})' in distill
    assert "echo hello > out.txt" in draft and "Exit code: 0" in draft
    assert "Bump the version first." in draft and "out.txt" in draft
    with sqlite3.connect(workspace / ".cortana" / "experience.db") as db:
        ratings = db.execute("SELECT value, source FROM ratings ORDER BY id").fetchall()
        files = json.loads(db.execute("SELECT files FROM recipes").fetchone()[0])
    assert ratings == [(1, "command"), (-1, "command")]
    assert sorted(f["path"] for f in files) == ["billing.py", "config.py", "report.py"]


def test_skills_are_listed_and_a_broken_one_is_reported_once(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    (workspace / "skills" / "release").mkdir(parents=True)
    (workspace / "skills" / "release" / "SKILL.md").write_text(SKILL)
    (workspace / "skills" / "broken").mkdir()
    (workspace / "skills" / "broken" / "SKILL.md").write_text("no front matter here\n")
    scripted_engine.add("POST", CHAT, text_reply(["Hi."]))
    child = spawn_on(scripted_engine.url, workspace, term="xterm")
    start = child.before
    child.sendline("/skills")
    child.expect("release: Cut a release of the project.")
    child.expect("skipped .*broken/SKILL.md")
    child.sendline("Hello")
    child.expect("Hi.")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)
    assert "skipped: there is no front matter" in start and start.count("broken/SKILL.md") == 1
    system = scripted_engine.bodies(CHAT)[0]["messages"][0]["content"]
    assert "- release: Cut a release of the project." in system
    tools = [t["function"]["name"] for t in scripted_engine.bodies(CHAT)[0]["tools"]]
    assert "load_skill" in tools


def test_a_one_shot_answer_is_distilled_before_the_command_exits(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    scripted_engine.add(
        "POST",
        CHAT,
        *three_reads_and_a_recipe(),
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workspace), "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cortana.cli.main",
            "--engine",
            "llamacpp",
            "--base-url",
            scripted_engine.url,
            "--yes",
            "Which module defines PAYMENT_TERMS?",
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "PAYMENT_TERMS is defined in config.py." in done.stdout
    assert "learning from this answer" in done.stderr
    with sqlite3.connect(workspace / ".cortana" / "experience.db") as db:
        tasks = db.execute("SELECT task FROM recipes").fetchall()
    assert tasks == [("Find which module defines PAYMENT_TERMS.",)]
