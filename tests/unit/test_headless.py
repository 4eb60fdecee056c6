"""``cortana -p`` for scripts, through the real ``cortana`` command on a scripted engine: text, one JSON object,
JSON lines parsed one by one (a malformed line fails the test), ``--resume``, errors as events, stdin closed, and
``--help`` listing the commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.test_cli_terminal import text_reply, tool_reply
from tests.unit.test_fix_command import project
from tests.unit.test_repair import FIX

CHAT = "/v1/chat/completions"
QUIET = "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "cortana.yml").write_text(QUIET)
    (root / "notes.txt").write_text("The launch is on Friday.\n")
    return root


def cortana(
    root: Path, url: str, *args: str, command: tuple[str, ...] = (), stdin: Any = subprocess.DEVNULL, **options: Any
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", *command, "--engine", "llamacpp", "--base-url", url, *args],
        cwd=root, env=env, stdin=stdin, capture_output=True, text=True, timeout=120, **options,
    )  # fmt: skip


def events(stdout: str) -> list[dict[str, Any]]:
    """Every line of ``stdout`` as one JSON object: a line that is not one fails here."""
    parsed = []
    for number, line in enumerate(stdout.splitlines(), 1):
        try:
            event = json.loads(line)
        except json.JSONDecodeError as error:
            raise AssertionError(f"line {number} is not JSON ({error}): {line!r}") from None
        assert isinstance(event, dict) and isinstance(event.get("type"), str), f"line {number}: {line!r}"
        parsed.append(event)
    return parsed


def test_help_lists_every_command_with_a_line_each() -> None:
    from cortana.cli.main import COMMANDS

    done = subprocess.run([sys.executable, "-m", "cortana.cli.main", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    listed = done.stdout.split("commands:\n", 1)[1]
    for name in ("doctor", "models", "trust", "fix", "serve", "mcp-serve", "acp"):
        assert f"  {name} " in listed and COMMANDS[name] in listed
    assert "--output-format {text,json,stream-json}" in done.stdout and "--resume THREAD" in done.stdout


def test_text_is_the_answer_alone(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = workspace(tmp_path)
    scripted_engine.add("POST", CHAT, text_reply(["Hello", " there."]))
    done = cortana(root, scripted_engine.url, "-p", "Say hello.")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello there.\n"


def test_json_is_one_object_with_answer_thread_usage_and_tool_calls(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = workspace(tmp_path)
    scripted_engine.add("POST", CHAT, tool_reply("read_file", '{"path": "notes.txt"}'), text_reply(["On ", "Friday."]))
    done = cortana(root, scripted_engine.url, "-p", "--output-format", "json", "When is the launch?")
    assert done.returncode == 0, done.stderr
    [result] = events(done.stdout)
    assert result["type"] == "result" and result["is_error"] is False and result["error"] is None
    assert result["answer"] == "On Friday." and len(result["thread_id"]) == 32
    [call] = result["tool_calls"]
    assert call["name"] == "read_file" and call["arguments"] == {"path": "notes.txt"}
    assert call["status"] == "completed" and "The launch is on Friday." in call["output"]
    assert result["usage"]["model_calls"] == 2 and result["duration_ms"] > 0 and result["fix"] is None


def test_stream_json_events_as_they_happen_and_resume_continues_the_thread(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = workspace(tmp_path)
    scripted_engine.add(
        "POST",
        CHAT,
        tool_reply("write_file", '{"path": "todo.txt", "content": "ship"}'),
        text_reply(["I could ", "not write it."]),
        text_reply(["You asked me ", "to write todo.txt."]),
    )
    done = cortana(root, scripted_engine.url, "--output-format", "stream-json", "Write todo.txt.")
    assert done.returncode == 0, done.stderr
    stream = events(done.stdout)
    kinds = [event["type"] for event in stream]
    assert kinds[:2] == ["thread.started", "turn.started"] and kinds[-1] == "turn.completed"
    thread = stream[0]["thread_id"]
    started = next(e for e in stream if e["type"] == "item.started" and e["item"]["type"] == "tool_call")
    assert started["item"]["name"] == "write_file" and started["item"]["status"] == "in_progress"
    completed = next(e for e in stream if e["type"] == "item.completed" and e["item"]["type"] == "tool_call")
    assert completed["item"]["id"] == started["item"]["id"] and completed["item"]["status"] == "failed"
    assert "approv" in completed["item"]["output"].lower(), "nobody to ask: refused, and the model is told"
    assert not (root / "todo.txt").exists()
    deltas = [e["delta"] for e in stream if e["type"] == "item.delta"]
    assert deltas == ["I could ", "not write it."], "text as it comes"
    message = next(e for e in stream if e["type"] == "item.completed" and e["item"]["type"] == "agent_message")
    assert message["item"]["text"] == "I could not write it."
    assert stream[-1]["usage"]["model_calls"] == 2 and stream[-1]["usage"]["input_tokens"] >= 0

    again = cortana(root, scripted_engine.url, "-p", "--output-format", "json", "--resume", thread[:8], "What?")
    assert again.returncode == 0, again.stderr
    [result] = events(again.stdout)
    assert result["thread_id"] == thread and result["answer"] == "You asked me to write todo.txt."
    sent = [m["content"] for m in scripted_engine.bodies(CHAT)[-1]["messages"] if m["role"] == "user"]
    assert any("Write todo.txt." in text for text in sent), "the resumed thread's history was sent"
    last = cortana(root, scripted_engine.url, "-p", "--resume", "last", "And?")
    assert last.returncode == 0, last.stderr


def test_errors_are_events_with_a_nonzero_status(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = workspace(tmp_path)
    done = cortana(root, scripted_engine.url, "--output-format", "stream-json", "--resume", "feedbeef", "Hi")
    assert done.returncode == 1
    [error] = events(done.stdout)
    assert error["type"] == "error" and "no conversation to resume" in error["message"]
    assert "no conversation to resume" in done.stderr

    from tests.wire import Reply

    scripted_engine.add("POST", CHAT, Reply(status=500, body=b'{"error": {"message": "out of memory"}}'))
    failed = cortana(root, scripted_engine.url, "-p", "--output-format", "stream-json", "Hello?")
    assert failed.returncode == 1
    stream = events(failed.stdout)
    assert stream[0]["type"] == "thread.started" and stream[-1]["type"] == "turn.failed"
    assert "out of memory" in stream[-1]["error"]["message"]
    whole = cortana(root, scripted_engine.url, "-p", "--output-format", "json", "Hello?")
    [result] = events(whole.stdout)
    assert whole.returncode == 1 and result["is_error"] is True and "out of memory" in result["error"]
    nothing = cortana(root, scripted_engine.url, "-p", "--output-format", "json")
    assert nothing.returncode == 2 and "-p needs a question" in events(nothing.stdout)[0]["error"]


def test_stdin_closed_and_piped_input(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = workspace(tmp_path)
    scripted_engine.add("POST", CHAT, text_reply(["Closed."]), text_reply(["Piped."]))
    closed = subprocess.run(
        f"{sys.executable} -m cortana.cli.main --engine llamacpp --base-url {scripted_engine.url} -p Hi <&-",
        shell=True, cwd=root, capture_output=True, text=True, timeout=120,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1"},
    )  # fmt: skip
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout == "Closed.\n"
    piped = cortana(root, scripted_engine.url, "-p", "Summarize:", stdin=None, input="line one\nline two\n")
    assert piped.returncode == 0 and piped.stdout == "Piped.\n"
    sent = scripted_engine.bodies(CHAT)[-1]["messages"][-1]["content"]
    assert "Summarize:" in sent and "line two" in sent


def test_fix_reports_its_diff_and_tests(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = project(tmp_path)
    (root / "cortana.yml").write_text(QUIET + "fix:\n  per_location: 1\n  mutants: 0\n")  # the model's sample
    scripted_engine.add("POST", CHAT, text_reply([FIX]))
    done = cortana(root, scripted_engine.url, "--yes", "--output-format", "stream-json", command=("fix",))
    assert done.returncode == 0, done.stderr
    stream = events(done.stdout)
    fix = [e for e in stream if e.get("item", {}).get("type") == "fix"]
    assert fix, done.stdout
    assert fix[0]["type"] == "item.started" and any(e["type"] == "item.updated" for e in fix)
    end = fix[-1]["item"]
    assert end["status"] == "fixed" and end["complete"] is True and "+    return round(cents * 0.2)" in end["diff"]
    assert end["files_written"] == ["shop/money.py"]
    assert end["tests_before"]["ok"] is False and end["tests_after"]["ok"] is True
    assert stream[-1]["type"] == "turn.completed" and stream[-1]["usage"]["model_calls"] >= 1


def test_a_closed_pipe_ends_quietly_with_the_usual_status(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``cortana -p ... | head`` and ``cortana models --json | head``: the reader left, as ``ls`` and git end."""
    root = workspace(tmp_path)
    scripted_engine.add("POST", CHAT, text_reply([f"word{i} " for i in range(50)]))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1"}
    for args in (
        ["--engine", "llamacpp", "--base-url", scripted_engine.url, "-p", "--output-format", "stream-json", "Hi"],
        ["models", "--json"],
    ):
        process = subprocess.Popen(
            [sys.executable, "-m", "cortana.cli.main", *args],
            cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader is gone before the first line
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=120) == 141, stderr
        assert "Broken pipe" not in stderr and "Traceback" not in stderr and "Exception ignored" not in stderr


def test_a_reader_that_leaves_after_the_first_line_ends_every_run_quietly(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``cortana -p ... | head -1``: the reader takes one line and goes while the answer still streams; 20 runs,
    each with status 141 and nothing on stderr."""
    root = workspace(tmp_path)
    (root / "cortana.yml").write_text(QUIET + "learning:\n  enabled: false\n")  # no embedder to ask for
    lines = [f"line {i}\n" for i in range(400)]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url]
    for run, form in enumerate(["text", "stream-json"] * 10):
        scripted_engine.add("POST", CHAT, text_reply(lines, line_delay=0.002))
        process = subprocess.Popen(
            [*command, "-p", "--output-format", form, "Hi"],
            cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline(), f"run {run}: no first line"
        process.stdout.close()  # as head -1 does
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=120) == 141, f"run {run} ({form}): {stderr}"
        assert stderr == "", f"run {run} ({form}): {stderr}"
