"""The user's own slash commands (issue 64): Markdown files in the user's config folder and, once the folder is
trusted, in its ``.cortana/commands``, expanded in one place (``Assistant.turn``) for every front end.

The rules on real files (``$ARGUMENTS``, ``$1``…, the arguments appended, front matter, the errors that name the
file); ``allowed-tools`` held by the turn's rules; the real ``cortana -p`` and the real terminal in a pty on a
scripted engine, where what the model received is checked; a folder's command ignored until ``cortana trust``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from cortana import Assistant, Settings
from cortana.cli.repl import COMMANDS
from cortana.errors import ConfigError
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.turn import TurnFinished
from cortana.turn.commands import BUILT_IN_COMMANDS, MAX_COMMAND_BYTES, UserCommands
from tests.integration.test_cli_terminal import text_reply
from tests.unit.test_acp import Editor, initialized, said
from tests.unit.test_serve import serve

CHAT = "/v1/chat/completions"
QUIET = (
    "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
    "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n"
)
REVIEW = "---\ndescription: Review a file for bugs\nargument-hint: FILE [FOCUS]\n---\nReview $1 for bugs, on $2.\n"


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text)
    return path


def commands(tmp_path: Path, *, trusted: bool = False) -> UserCommands:
    return UserCommands(tmp_path / "user", tmp_path / "work", trusted=trusted)


# -- the rules, on real files ----------------------------------------------------------------------------------------


def test_arguments_and_positionals_are_put_in_one_pass(tmp_path: Path) -> None:
    write(tmp_path / "user", "say", "All: $ARGUMENTS | first: $1 | second: $2 | fifth: [$5]\n")
    expanded = commands(tmp_path).expand('/say "two words" $1 tail')
    assert expanded is not None and expanded.arguments == '"two words" $1 tail'
    assert expanded.prompt == 'All: "two words" $1 tail | first: two words | second: $1 | fifth: []', (
        "shell-like words; a missing one is empty; an argument holding $1 stays as typed"
    )
    assert commands(tmp_path).expand("/say").prompt == "All:  | first:  | second:  | fifth: []"  # type: ignore[union-attr]
    unbalanced = commands(tmp_path).expand("/say it's here")
    assert unbalanced is not None and unbalanced.prompt.startswith("All: it's here | first: it's | second: here")


def test_a_text_without_placeholders_gets_the_arguments_after_a_blank_line(tmp_path: Path) -> None:
    write(tmp_path / "user", "explain", "Explain this code simply.\n")
    with_arguments = commands(tmp_path).expand("/explain  app.py  the loop ")
    assert with_arguments is not None and with_arguments.prompt == "Explain this code simply.\n\napp.py  the loop"
    alone = commands(tmp_path).expand("/explain")
    assert alone is not None and alone.prompt == "Explain this code simply."
    piped = commands(tmp_path).expand("/explain\n\ndef f(): pass")  # git diff | cortana -p "/explain"
    assert piped is not None and piped.prompt == "Explain this code simply.\n\ndef f(): pass"


def test_only_a_slash_name_of_a_command_is_one(tmp_path: Path) -> None:
    write(tmp_path / "user", "review", REVIEW)
    found = commands(tmp_path)
    for prompt in ("review app.py", "please /review app.py", "/review:app.py", "/reviews", "/src/review app.py"):
        assert found.expand(prompt) is None, prompt
    assert found.expand("/review") is not None


def test_front_matter_gives_the_description_the_hint_and_the_tools(tmp_path: Path) -> None:
    write(tmp_path / "user", "review", REVIEW)
    write(tmp_path / "user", "look", "---\nallowed-tools: read_file, grep_*\n---\nLook.\n")
    write(tmp_path / "user", "quiet", "---\ntools: []\n---\nJust answer.\n")
    write(tmp_path / "user", "plain", "No front matter: $ARGUMENTS\n")
    listing = commands(tmp_path).listing()
    by_name = {command.name: command for command in listing.commands}
    assert list(by_name) == ["look", "plain", "quiet", "review"] and not listing.notes()
    review = by_name["review"]
    assert (review.description, review.argument_hint, review.tools) == ("Review a file for bugs", "FILE [FOCUS]", None)
    assert review.text == "Review $1 for bugs, on $2." and review.source == "user"
    assert by_name["look"].tools == ("read_file", "grep_*")
    assert by_name["quiet"].tools == (), "an empty list: no tools at all"
    assert by_name["plain"].description == "" and by_name["plain"].tools is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\ndescription: x\nSay hi.\n", "the front matter is not closed"),
        ("---\ndescription: [unclosed\n---\nSay hi.\n", "the front matter is not valid YAML at line 2"),
        ("---\n- a\n- b\n---\nSay hi.\n", "the front matter must be 'key: value' lines"),
        ("---\ndescription: 42\n---\nSay hi.\n", "'description' must be text, not int"),
        ("---\ntools: {read_file: yes}\n---\nSay hi.\n", "'tools' must be a list of tool names"),
        ("---\ntools: [a]\nallowed-tools: [b]\n---\nSay hi.\n", "both 'allowed-tools' and 'tools' are given"),
        ("---\ndescription: nothing below\n---\n\n", "there is no prompt in it"),
        (b"caf\xe9 $ARGUMENTS\n", "not UTF-8 text (byte 3)"),
    ],
)
def test_a_bad_file_is_an_error_naming_the_file_and_the_problem(
    tmp_path: Path, text: str | bytes, problem: str
) -> None:
    path = tmp_path / "user" / "broken.md"
    path.parent.mkdir()
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as raised:
        commands(tmp_path).expand("/broken now")
    assert str(raised.value).startswith(f"{path}: {problem}"), str(raised.value)
    listing = commands(tmp_path).listing()
    assert listing.commands == [] and listing.problems == [str(raised.value)], "/help lists it, never raises"


def test_a_file_over_64_kib_is_an_error_naming_it(tmp_path: Path) -> None:
    path = write(tmp_path / "user", "huge", "x" * MAX_COMMAND_BYTES)
    assert commands(tmp_path).expand("/huge") is not None, "64 KiB is allowed"
    path.write_text("x" * (MAX_COMMAND_BYTES + 1))
    with pytest.raises(ConfigError, match=rf"^{path}: larger than 64 KiB \(65,537 bytes\)"):
        commands(tmp_path).expand("/huge")


def test_an_edited_file_is_read_again_without_a_restart(tmp_path: Path) -> None:
    path = write(tmp_path / "user", "greet", "Say hello.\n")
    found = commands(tmp_path)
    assert found.expand("/greet").prompt == "Say hello."  # type: ignore[union-attr]
    path.write_text("Say goodbye, loudly.\n")
    assert found.expand("/greet").prompt == "Say goodbye, loudly."  # type: ignore[union-attr]
    path.write_text("---\ndescription: [\n---\nx\n")
    with pytest.raises(ConfigError):
        found.expand("/greet")
    path.unlink()
    assert found.expand("/greet") is None


def test_a_built_in_name_is_never_a_command(tmp_path: Path) -> None:
    write(tmp_path / "user", "help", "Not the help.\n")
    write(tmp_path / "work" / ".cortana" / "commands", "clear", "Not clear.\n")
    found = commands(tmp_path, trusted=True)
    assert found.expand("/help") is None and found.expand("/clear now") is None and found.find("help") is None
    listing = found.listing()
    assert listing.commands == [] and [path.name for path in listing.built_in] == ["help.md", "clear.md"]
    assert any("/help is a built-in command, which no file can replace" in note for note in listing.notes())


def test_the_built_in_names_are_the_terminals_commands() -> None:
    assert {f"/{name}" for name in BUILT_IN_COMMANDS} == set(COMMANDS), "one list of what no file may replace"


def test_a_folders_commands_only_once_trusted_and_then_they_win(tmp_path: Path) -> None:
    write(tmp_path / "user", "review", REVIEW)
    folder = tmp_path / "work" / ".cortana" / "commands"
    write(folder, "review", "The folder's review of $ARGUMENTS.\n")
    write(folder, "deploy", "Deploy $1.\n")
    untrusted = commands(tmp_path)
    assert untrusted.expand("/review a.py").prompt == "Review a.py for bugs, on ."  # type: ignore[union-attr]
    assert untrusted.expand("/deploy prod") is None, "ignored, not run"
    assert untrusted.ignored("deploy") == folder / "deploy.md" and untrusted.ignored("review") is None
    listing = untrusted.listing()
    assert [command.name for command in listing.commands] == ["review"]
    notes = listing.notes()
    assert len(notes) == 1, notes
    assert "this folder's commands (/deploy, /review" in notes[0] and "`cortana trust`" in notes[0]
    trusted = commands(tmp_path, trusted=True)
    assert trusted.expand("/review a.py").prompt == "The folder's review of a.py."  # type: ignore[union-attr]
    assert trusted.expand("/deploy prod").prompt == "Deploy prod."  # type: ignore[union-attr]
    listing = trusted.listing()
    assert [(command.name, command.source) for command in listing.commands] == [
        ("deploy", "folder"),
        ("review", "folder"),
    ]
    assert not listing.notes()


def test_a_folders_link_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private\n")
    folder = tmp_path / "work" / ".cortana" / "commands"
    folder.mkdir(parents=True)
    (folder / "leak.md").symlink_to(secret)
    with pytest.raises(ConfigError, match="a link out of the workspace"):
        commands(tmp_path, trusted=True).expand("/leak")


# -- the turn: allowed-tools -----------------------------------------------------------------------------------------


async def test_a_commands_allowed_tools_are_the_only_ones_its_turn_may_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    write(tmp_path / "config" / "cortana" / "commands", "peek", "---\ntools: [read_file]\n---\nPeek at $1.\n")
    workspace = tmp_path / "w"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("the launch is on Friday\n")
    model = ScriptedModel(
        [
            tool_call_response(tool_call("write_file", path="notes.txt", content="gone\n")),
            tool_call_response(tool_call("read_file", path="notes.txt")),
            "It says Friday.",
        ]
    )
    quiet = Settings(memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False},
                     agent={"tool_judge": False, "prompt_search": 0, "named_files": 0})  # fmt: skip
    async with Assistant(workspace, quiet, client=model, allow_all=True) as assistant:
        events = [event async for event in assistant.turn("/peek notes.txt")]
    assert isinstance(events[-1], TurnFinished) and events[-1].result.answer == "It says Friday."
    assert events[-1].result.route == "agent"
    assert (workspace / "notes.txt").read_text() == "the launch is on Friday\n", "--yes, yet the write was refused"
    sent = model.requests[0].messages[-1].content
    assert sent.endswith("Peek at notes.txt.") and "/peek" not in sent.split("</context>")[-1]
    assert "command /peek, which allows only these tools: read_file" in sent, "told up front"
    refused = [m for m in model.requests[1].messages if m.role == "tool"][-1]
    assert refused.refusal == "hook" and "the user's command allows only these tools: read_file" in refused.content
    read = [m for m in model.requests[2].messages if m.role == "tool"][-1]
    assert "the launch is on Friday" in read.content and not read.is_error


# -- the real command on a scripted engine ---------------------------------------------------------------------------


def user_home(tmp_path: Path) -> tuple[Path, Path]:
    """A user with a ``review`` command and one named like a built-in, and a project with its own ``review``."""
    home = tmp_path
    write(home / ".config" / "cortana" / "commands", "review", REVIEW)
    write(home / ".config" / "cortana" / "commands", "compact", "Not the real compact.\n")
    project = home / "project"
    project.mkdir()
    (project / "cortana.yml").write_text(QUIET)
    (project / "notes.txt").write_text("The launch is on Friday.\n")
    write(project / ".cortana" / "commands", "review", "The folder's own review of $ARGUMENTS.\n")
    return home, project


def environment(home: Path) -> dict[str, str]:
    """The user's environment: HOME, and this checkout's source when PYTHONPATH names it (a git worktree)."""
    carried = {name: os.environ[name] for name in ("PATH", "PYTHONPATH") if name in os.environ}
    return {**carried, "HOME": str(home), "NO_COLOR": "1"}


def cortana(home: Path, project: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", url, *args],
        cwd=project, env=environment(home), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def terminal(home: Path, project: Path, url: str) -> pexpect.spawn:
    """The interactive ``cortana`` in a pty at its prompt, as test_cli_terminal.py's ``spawn_on`` starts it."""
    child = pexpect.spawn(
        sys.executable, ["-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", url],
        cwd=str(project), env={**environment(home), "TERM": "xterm"}, encoding="utf-8", timeout=60,
        dimensions=(40, 160),
    )  # fmt: skip
    child.expect("›")
    return child


def last_prompt(scripted_engine) -> str:  # type: ignore[no-untyped-def]
    return str(scripted_engine.bodies(CHAT)[-1]["messages"][-1]["content"])


def test_print_mode_expands_the_users_command_and_the_folders_once_trusted(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home, project = user_home(tmp_path)
    scripted_engine.add("POST", CHAT, text_reply(["Looks ", "fine."]))
    done = cortana(home, project, scripted_engine.url, "-p", '/review app.py "the loop"')
    assert done.returncode == 0 and done.stdout.strip() == "Looks fine.", done.stderr
    assert last_prompt(scripted_engine).endswith("Review app.py for bugs, on the loop."), (
        "the user's: the folder's waits"
    )

    trusted = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "trust", "--yes"],
        cwd=project, env=environment(home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert trusted.returncode == 0 and "Trusted" in trusted.stderr, trusted.stderr
    done = cortana(home, project, scripted_engine.url, "-p", '/review app.py "the loop"')
    assert done.returncode == 0, done.stderr
    assert last_prompt(scripted_engine).endswith('The folder\'s own review of app.py "the loop".'), "trusted: it wins"


def test_print_mode_names_a_bad_command_file_and_asks_nothing(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home, project = user_home(tmp_path)
    bad = write(home / ".config" / "cortana" / "commands", "broken", "---\ndescription: [oops\n---\nSay hi.\n")
    done = cortana(home, project, scripted_engine.url, "-p", "/broken now")
    assert done.returncode == 1, done.stdout
    assert f"cortana: {bad}: the front matter is not valid YAML at line 2" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert scripted_engine.bodies(CHAT) == [], "the model was asked nothing"


def test_the_terminal_lists_completes_and_expands_the_users_commands(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home, project = user_home(tmp_path)
    write(project / ".cortana" / "commands", "deploy", "Deploy $1.\n")
    scripted_engine.add("POST", CHAT, text_reply(["Reviewed."]))
    child = terminal(home, project, scripted_engine.url)
    child.sendline("/help")
    child.expect("Your commands:")
    child.expect(r"/review FILE \[FOCUS\] Review a file for bugs \(yours: ")
    child.expect(r"compact\.md: not used: /compact is a built-in command")
    child.expect(r"this folder's commands \(/deploy, /review, in \.cortana/commands\) are ignored: the folder is not")
    child.expect("›")
    child.sendline("/deploy prod")
    child.expect(r"/deploy is this folder's command \(.*deploy\.md\), ignored: the folder is not trusted")
    child.expect("›")
    child.send("/rev")
    child.send("\t")  # completed to /review: only the user's command starts so
    child.sendline(" notes.txt the dates")
    child.expect("Reviewed.")
    child.expect("›")
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=30)
    bodies = scripted_engine.bodies(CHAT)
    assert len(bodies) == 1, "only the command reached the model"
    assert str(bodies[0]["messages"][-1]["content"]).endswith("Review notes.txt for bugs, on the.")


async def test_a_served_client_and_an_editor_get_the_command_expanded_too(  # type: ignore[no-untyped-def]
    scripted_engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cortana serve`` and ``cortana acp`` have no code of their own for it: the assistant's turn expands."""
    import acp

    home, project = user_home(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    model = ScriptedModel(["Served."])
    async with serve(project, model) as served:
        answer = await served.client().chat.completions.create(
            model="cortana", messages=[{"role": "user", "content": "/review api.py speed"}]
        )
    assert answer.choices[0].message.content == "Served."
    assert model.requests[0].messages[-1].content.endswith("Review api.py for bugs, on speed.")

    scripted_engine.add("POST", CHAT, text_reply(["Edited."]))
    editor = Editor()
    command = ("-m", "cortana.cli.main", "acp", "--engine", "llamacpp", "--base-url", scripted_engine.url)
    editor_side = acp.spawn_agent_process(editor, sys.executable, *command, cwd=project, env=environment(home))
    async with editor_side as (conn, _process):
        await initialized(conn)
        session = await conn.new_session(cwd=str(project), mcp_servers=[])
        done = await conn.prompt(session_id=session.session_id, prompt=said("/review ui.py layout"))
    assert done.stop_reason == "end_turn" and "Edited." in editor.text()
    assert last_prompt(scripted_engine).endswith("Review ui.py for bugs, on layout.")
