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


def spawn_on(
    url: str, workspace: Path, term: str = "dumb", key: str = "", home: Path | None = None, args: tuple[str, ...] = ()
) -> pexpect.spawn:
    """``cortana`` in a pty on the engine at ``url``; HOME is a folder of its own beside the workspace unless ``home``
    is given (a workspace that is the home folder is one Cortana will not let commands write)."""
    if home is None:
        home = workspace.parent / f"{workspace.name}.home"
        home.mkdir(exist_ok=True)
    env = {"TERM": term, "PATH": "/usr/bin:/bin", "HOME": str(home), "NO_COLOR": "1"}
    env["CORTANA_API_KEY"] = key
    child = pexpect.spawn(
        sys.executable,
        ["-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", url, *args],
        cwd=str(workspace),
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 120),
        env=env,
    )
    child.expect("›")
    return child


@pytest.fixture
def cortana(engine_url: str, engine_key: str, workspace: Path) -> Iterator[pexpect.spawn]:
    child = spawn_on(engine_url, workspace, key=engine_key)
    child.timeout = 180  # the real model reads a ~950-token prompt at ~50 tokens/s
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
    cortana.sendline("/stats")  # where the turn's time went, with the engine's own token counts
    cortana.expect(r"first token \d+\.\ds · [\d.]+s in all · \d+ model calls? · prompt [\d,]+ tokens \([\d,]+ read")
    cortana.expect(r"call 1: [\d.]+s \(first token after [\d.]+s, prompt")
    cortana.expect_exact(PROMPT)


def test_the_prompt_shows_while_the_embedded_engine_loads_and_a_first_question_is_answered(workspace: Path) -> None:
    from cortana.config import cache_dir
    from tests.integration.conftest import TEST_MODEL

    env = {"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": str(workspace), "NO_COLOR": "1"}
    env["CORTANA_CACHE_DIR"] = str(cache_dir())  # the bundled model, joined already
    env["CORTANA_KEEP_ALIVE"] = "0"  # its own engine, loading while the prompt is up
    args = ["-m", "cortana.cli.main", "--engine", "embedded", "--model", TEST_MODEL, "--threads", "1"]
    child = pexpect.spawn(
        sys.executable, [*args, "--context-window", "4096"], cwd=str(workspace), encoding="utf-8", timeout=60, env=env
    )
    child.expect("The engine is loading; type away")  # before the model is loaded: the prompt is up
    child.expect_exact(PROMPT)
    child.sendline("What is the capital of France? Answer in one word.")
    # Typed while it loads, the question waits with a note; typed after, the engine's line came first.
    child.expect(["waiting for the engine to finish loading", "embedded llama.cpp: qwen2.5-coder-0.5b"])
    child.timeout = 180
    child.expect("Paris")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=60)


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


# -- a scripted OpenAI-compatible engine on loopback, for what the 0.5B model does not do on cue --


def sse(*chunks: dict) -> list[str]:  # type: ignore[type-arg]
    import json

    return [f"data: {json.dumps(chunk)}" for chunk in chunks] + ["data: [DONE]"]


def text_reply(words: list[str], line_delay: float = 0.0):  # type: ignore[no-untyped-def]
    from tests.wire import Reply

    chunks = [{"choices": [{"index": 0, "delta": {"content": word}}]} for word in words]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return Reply(lines=sse(*chunks), content_type="text/event-stream", line_end="\n\n", line_delay=line_delay)


def whole_reply(text: str, delay: float = 0.0):  # type: ignore[no-untyped-def]
    """An answer sent whole (``"stream": false``), as ``Agent.run()`` asks for it: a check-in, say."""
    from tests.wire import Reply

    answer = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
    }
    return Reply.json(answer) if not delay else Reply(body=Reply.json(answer).body, delay=delay)


def tool_reply(name: str, arguments: str):  # type: ignore[no-untyped-def]
    from tests.wire import Reply

    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return Reply(
        lines=sse(
            {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ),
        content_type="text/event-stream",
        line_end="\n\n",
    )


def test_ctrl_c_cancels_a_turn_and_the_session_goes_on(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    words = [f"word{i} " for i in range(200)]
    scripted_engine.add("POST", "/v1/chat/completions", text_reply(words, line_delay=0.1), text_reply(["Hello."]))
    child = spawn_on(scripted_engine.url, workspace, term="xterm")  # TERM=dumb: see docs/cli.md
    child.sendline("Tell me a long story.")
    child.expect("word3 ")  # the answer is streaming
    child.sendintr()
    child.expect("cancelled")
    child.expect("›")
    assert "word199" not in child.before
    child.sendline("Say hello.")
    child.expect("Hello.")
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    assert any("Tell me a long story." in body for body in stored(workspace)), "the cancelled turn's message is kept"


def test_write_file_asks_and_a_denial_keeps_the_file(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    scripted_engine.add(
        "POST",
        "/v1/chat/completions",
        tool_reply("write_file", '{"path": "keep.txt", "content": "changed"}'),
        text_reply(["I did not change keep.txt."]),
    )
    child = spawn_on(scripted_engine.url, workspace)
    child.sendline("Overwrite keep.txt.")
    child.expect_exact("? write_file")  # the call, every argument on its own line
    child.expect_exact("path: keep.txt")
    child.expect_exact("content: changed")
    child.expect(r"allow\? \[y\]es once / \[a\]lways: write_file in the workspace's top folder / \[n\]o")
    child.sendline("n")
    child.expect("reason")
    child.sendline("not today")
    child.expect("I did not change keep.txt.")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    assert (workspace / "keep.txt").read_text() == "original\n"
    assert any("Permission denied for 'write_file': not today" in body for body in stored(workspace))


def test_compact_after_turns(scripted_engine, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    scripted_engine.add(
        "POST",
        "/v1/chat/completions",
        text_reply(["Noted: 7."]),
        text_reply(["Noted: teal."]),
        text_reply(["## Objective\n", "Remember the user's favourites: 7 and teal."]),
        text_reply(["Your favourite number is 7."]),
    )
    child = spawn_on(scripted_engine.url, workspace)
    for line in ("My favourite number is 7.", "My favourite colour is teal."):
        child.sendline(line)
        child.expect(r"\d+ model calls? · ")
        child.expect_exact(PROMPT)
    child.sendline("/compact favourites")
    child.expect("compacted")
    child.expect_exact(PROMPT)
    child.sendline("What is my favourite number?")
    child.expect("Your favourite number is 7.")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    summary_request, after = [r.body for r in scripted_engine.requests if r.path == "/v1/chat/completions"][2:]
    assert "Pay particular attention to: favourites" in summary_request["messages"][0]["content"]
    assert "Remember the user's favourites" in after["messages"][1]["content"], "the next turn starts from the summary"
