"""Hooks in the real ``cortana`` program, in a pseudo-terminal, on a scripted engine, in a real git repository: a
``before_tool`` hook that blocks ``git push`` with its reason, an ``after_tool`` hook whose note reaches the model,
a ``user_prompt`` hook that keeps a message back, ``stop`` and ``session_start`` with the event on stdin, and a
cloned folder's own hooks that do not run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pexpect

from tests.integration.test_cli_terminal import text_reply, tool_reply

CHAT = "/v1/chat/completions"
QUIET = (
    "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
    "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n"
)
NO_PUSH = """#!/bin/sh
# before_tool: no `git push` from the assistant
if grep -q 'git push'; then echo "pushing is for humans: ask the user to push" >&2; exit 2; fi
"""
NOTE = """#!/bin/sh
# after_tool: pretend to format, and tell the model
cat > "$HOME/logs/after.json"; echo "formatted by the project's formatter" >&2; exit 2
"""
NO_SECRETS = """#!/bin/sh
if grep -qi 'password'; then echo "that message holds a password" >&2; exit 2; fi
"""
LOG = """#!/bin/sh
cat >> "$HOME/logs/events.jsonl"; echo >> "$HOME/logs/events.jsonl"
"""


def setup(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    scripts = home / "hooks"
    scripts.mkdir(parents=True)
    for name, text in (("no-push.sh", NO_PUSH), ("note.sh", NOTE), ("no-secrets.sh", NO_SECRETS), ("log.sh", LOG)):
        (scripts / name).write_text(text)
        (scripts / name).chmod(0o755)
    config = home / ".config" / "cortana"
    config.mkdir(parents=True)
    (home / "logs").mkdir()
    (config / "cortana.yml").write_text(
        f"sandbox:\n  writable: ['{home}/logs']\n"  # hooks run confined: what they write outside is named here
        "hooks:\n"
        f"  session_start: [{{command: '{scripts}/log.sh'}}]\n"
        f"  user_prompt: [{{command: '{scripts}/no-secrets.sh'}}]\n"
        f"  before_tool: [{{command: '{scripts}/no-push.sh', tools: [run_command]}}]\n"
        f"  after_tool: [{{command: '{scripts}/note.sh', tools: [write_file, edit_file]}}]\n"
        f"  stop: [{{command: '{scripts}/log.sh'}}]\n"
    )
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "cortana.yml").write_text(
        QUIET + f"hooks:\n  user_prompt: [{{command: 'touch {tmp_path}/folder-hook-ran'}}]\n"
    )
    return home, root


def test_hooks_block_note_and_keep_back_and_a_folders_own_do_not_run(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home, root = setup(tmp_path)
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("run_command", '{"command": "git push origin main"}'),
        text_reply(["I did not push."]),
        tool_reply("write_file", '{"path": "notes.txt", "content": "hi\\n"}'),
        text_reply(["Wrote it."]),
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url, "--yes"],
        cwd=str(root), encoding="utf-8", timeout=60, dimensions=(40, 120),
        env={"TERM": "xterm", "PATH": "/usr/bin:/bin", "HOME": str(home), "NO_COLOR": "1"},
    )  # fmt: skip
    child.expect("asks to:")
    child.expect(r"Trust this folder with these settings\? .*\[y/N\]")
    child.sendline("n")  # the cloned folder's hooks: not trusted
    child.expect("ignoring hooks in")
    child.expect("›")
    child.sendline("Push my branch.")
    child.expect("I did not push.")
    child.expect("›")
    child.sendline("My password is hunter2, remember it.")
    child.expect("Not sent: a user_prompt hook kept it back: that message holds a password")
    child.expect("›")
    child.sendline("Write notes.txt.")
    child.expect("Wrote it.")
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)

    bodies = scripted_engine.bodies(CHAT)
    blocked = [m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert blocked and "a hook blocked it: pushing is for humans: ask the user to push" in blocked[-1]
    assert not any("hunter2" in json.dumps(body) for body in bodies), "kept back: the model never saw it"
    noted = [m["content"] for m in bodies[3]["messages"] if m["role"] == "tool"][-1]
    assert "[a hook after write_file: formatted by the project's formatter]" in noted
    after = json.loads((home / "logs" / "after.json").read_text())
    assert after["event"] == "after_tool" and after["tool"] == "write_file" and after["ok"] is True
    assert after["arguments"] == {"path": "notes.txt", "content": "hi\n"} and after["cwd"] == str(root)
    events = [json.loads(line) for line in (home / "logs" / "events.jsonl").read_text().splitlines() if line.strip()]
    assert events[0]["event"] == "session_start"
    assert [e["answer"] for e in events if e["event"] == "stop"] == ["I did not push.", "Wrote it."]
    assert not (tmp_path / "folder-hook-ran").exists(), "a cloned folder's own hooks need the user's trust"


def test_a_bad_hooks_section_names_the_key() -> None:
    import pytest

    from cortana.config import _validate
    from cortana.errors import ConfigError

    with pytest.raises(ConfigError, match=r"key 'hooks\.on_save': Extra inputs are not permitted"):
        _validate({"hooks": {"on_save": [{"command": "x"}]}}, "cortana.yml")
    with pytest.raises(ConfigError, match=r"key 'hooks\.before_tool\.0\.timeout'"):
        _validate({"hooks": {"before_tool": [{"command": "x", "timeout": 0}]}}, "cortana.yml")
