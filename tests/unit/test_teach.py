"""Teach mode on real folders and a real git repository: what is recorded, what the model sees, drafting, saving."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cortana.errors import CortanaError, UserError
from cortana.learning.skills import Skill, parse_skill
from cortana.learning.teach import (
    MAX_DIFF_CHARS,
    MAX_PROMPT_CHARS,
    FileChange,
    RecordedCommand,
    RecordedNote,
    TeachError,
    TeachSession,
    save_skill,
    skill_file,
    skill_text,
)
from cortana.testing import ScriptedModel

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GOOD_SKILL = """---
name: fix-tests
description: Make the failing unit tests pass again after a refactor.
---
1. Run `pytest -q` to see which tests fail.
2. Edit `app.py` so `greet()` returns the new greeting.
3. Run `pytest -q` again and check that it passes.

Watch out:
- `pytest -x` alone stops at the first failure.
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def by_path(changes: list[FileChange]) -> dict[str, FileChange]:
    return {change.path: change for change in changes}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


# -- recording ----------------------------------------------------------------------------------


def test_a_command_keeps_its_exit_code_and_only_the_head_of_its_output(tmp_path: Path) -> None:
    session = TeachSession(tmp_path, clock=Clock())
    output = "\x1b[31mFAILED\x1b[0m test_one\n" + "".join(f"line {n}\n" for n in range(2, 51))
    session.record_command("pytest -q", 1, output)
    session.record_command("echo long", 0, "x" * 5000)
    session.record_command("true", 0, "")

    first, long, quiet = session.events
    assert isinstance(first, RecordedCommand)
    assert (first.command, first.exit_code, first.at) == ("pytest -q", 1, 1001.0)
    lines = first.output_head.split("\n")
    assert lines[0] == "FAILED test_one", "terminal colour codes are removed"
    assert lines[1:20] == [f"line {n}" for n in range(2, 21)]
    assert lines[20] == "[... output cut: 30 more lines]"
    assert len(lines) == 21 and "line 21" not in first.output_head
    assert isinstance(long, RecordedCommand)
    assert long.output_head.startswith("x" * 2000) and "x" * 2001 not in long.output_head
    assert long.output_head.endswith("[... output cut]")
    assert isinstance(quiet, RecordedCommand) and quiet.output_head == ""


def test_notes_are_recorded_in_order_with_the_commands(tmp_path: Path) -> None:
    session = TeachSession(tmp_path, clock=Clock())
    assert session.empty
    session.record_note("  the config lives in settings.toml  ")
    session.record_command("make", 0, "ok")
    assert session.events == [
        RecordedNote(text="the config lives in settings.toml", at=1001.0),
        RecordedCommand(command="make", exit_code=0, output_head="ok", at=1002.0),
    ]
    assert not session.empty


def test_a_name_is_normalized_and_a_name_with_nothing_usable_is_refused(tmp_path: Path) -> None:
    assert TeachSession(tmp_path, "Deploy the docs/site").name == "Deploy-the-docs-site"
    assert TeachSession(tmp_path, "../../etc").name == "etc"
    assert TeachSession(tmp_path).name is None
    with pytest.raises(UserError):
        TeachSession(tmp_path, "!!!")


# -- file changes -------------------------------------------------------------------------------


@needs_git
def test_file_changes_in_a_git_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, ".gitignore", "*.log\nbuild/\n")
    write(repo, "app.py", "def greet():\n    return 'hi'\n")
    write(repo, "old.txt", "to be removed\n")
    write(repo, "same.txt", "unchanged\n")
    write(repo, ".cortana/state.json", '{"a": 1}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    write(repo, "notes/untracked-before.md", "here before the session\n")
    write(repo, ".git/info/exclude", "*.env\n")  # git's own ignore list: a folder walk would not know it

    session = TeachSession(repo, "fix")
    write(repo, "app.py", "def greet():\n    return 'hello'\n")
    (repo / "old.txt").unlink()
    write(repo, "new_module.py", "VALUE = 42\n")  # untracked: reported
    write(repo, "debug.log", "ignored\n")  # ignored by *.log
    write(repo, "local.env", "TOKEN=1\n")  # ignored by .git/info/exclude
    write(repo, "build/out.txt", "ignored too\n")
    write(repo, ".cortana/state.json", '{"a": 2}\n')  # tracked, but the assistant's own
    write(repo, ".cortana/new.json", "{}\n")
    write(repo, "notes/untracked-before.md", "edited during the session\n")

    changes = by_path(session.file_changes())
    assert set(changes) == {"app.py", "old.txt", "new_module.py", "notes/untracked-before.md"}
    assert changes["app.py"].status == "modified"
    assert "-    return 'hi'" in changes["app.py"].diff and "+    return 'hello'" in changes["app.py"].diff
    assert changes["app.py"].diff.startswith("--- a/app.py\n+++ b/app.py")
    assert changes["old.txt"].status == "deleted" and "-to be removed" in changes["old.txt"].diff
    assert changes["new_module.py"].status == "added" and "+VALUE = 42" in changes["new_module.py"].diff
    assert changes["notes/untracked-before.md"].status == "modified"
    assert [change.path for change in session.file_changes()] == sorted(changes)


@needs_git
def test_a_subfolder_of_a_repository_is_watched_with_paths_relative_to_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q")
    write(repo, "outside.txt", "a\n")
    write(repo, "pkg/inside.txt", "a\n")
    session = TeachSession(repo / "pkg")
    write(repo, "outside.txt", "b\n")
    write(repo, "pkg/inside.txt", "b\n")
    assert [(c.path, c.status) for c in session.file_changes()] == [("inside.txt", "modified")]


def test_file_changes_without_git_respect_gitignore_and_skip_tool_folders(tmp_path: Path) -> None:
    workspace = tmp_path / "plain"
    workspace.mkdir()
    write(workspace, ".gitignore", "*.tmp\ncache/\n!keep.tmp\n")
    write(workspace, "src/main.c", "int main(void) { return 0; }\n")
    write(workspace, "gone.txt", "bye\n")
    write(workspace, ".cortana/memory.db", "one")

    session = TeachSession(workspace)
    write(workspace, "src/main.c", "int main(void) { return 1; }\n")
    (workspace / "gone.txt").unlink()
    write(workspace, "README.md", "# Title\n")
    write(workspace, "scratch.tmp", "ignored")
    write(workspace, "keep.tmp", "negated: reported")
    write(workspace, "cache/blob.txt", "ignored folder")
    write(workspace, "node_modules/x/index.js", "skipped folder")
    write(workspace, ".venv/lib/site.py", "skipped folder")
    write(workspace, "src/__pycache__/main.pyc", "skipped folder")
    write(workspace, ".cortana/memory.db", "two")
    write(workspace, ".cortana/log.txt", "new")

    changes = by_path(session.file_changes())
    assert {path: change.status for path, change in changes.items()} == {
        "src/main.c": "modified",
        "gone.txt": "deleted",
        "README.md": "added",
        "keep.tmp": "added",
    }
    assert "+int main(void) { return 1; }" in changes["src/main.c"].diff
    assert "+# Title" in changes["README.md"].diff


def test_a_file_that_becomes_ignored_is_not_reported_as_deleted(tmp_path: Path) -> None:
    write(tmp_path, "data.csv", "1,2\n")
    session = TeachSession(tmp_path)
    write(tmp_path, ".gitignore", "*.csv\n")
    assert by_path(session.file_changes()).keys() == {".gitignore"}
    (tmp_path / "data.csv").unlink()
    assert by_path(session.file_changes())["data.csv"].status == "deleted"


def test_binary_and_large_files_are_compared_without_a_diff(tmp_path: Path) -> None:
    write(tmp_path, "image.png", b"\x89PNG\x00\x01\x02" * 10)
    big = write(tmp_path, "big.txt", "a line of text\n" * 20_000)  # about 300 KiB
    write(tmp_path, "big_same.txt", "steady\n" * 50_000)
    session = TeachSession(tmp_path)

    write(tmp_path, "image.png", b"\x89PNG\x00\x09\x09" * 10)
    write(tmp_path, "big.txt", "a line of text\n" * 20_000 + "one more\n")
    os.utime(big, ns=(1, 1))
    write(tmp_path, "new.bin", b"\x00\x01binary")
    write(tmp_path, "new_big.txt", "y" * (300 << 10))

    changes = by_path(session.file_changes())
    assert set(changes) == {"image.png", "big.txt", "new.bin", "new_big.txt"}
    assert changes["image.png"] == FileChange("image.png", "modified", "(binary file changed)")
    assert changes["big.txt"] == FileChange("big.txt", "modified", "(large file changed)")
    assert changes["new.bin"].diff == "(binary file added)"
    assert changes["new_big.txt"].diff == "(large file added)"


def test_large_files_are_compared_by_size_time_and_hash(tmp_path: Path) -> None:
    touched = write(tmp_path, "touched.bin.txt", "a" * (300 << 10))
    rewritten = write(tmp_path, "rewritten.txt", "a" * (300 << 10))
    session = TeachSession(tmp_path)
    later = touched.stat().st_mtime_ns + 5_000_000_000
    os.utime(touched, ns=(later, later))  # same content, new time: the hash says unchanged
    write(tmp_path, "rewritten.txt", "b" * (300 << 10))  # same size, new content
    os.utime(rewritten, ns=(later, later))
    assert session.file_changes() == [FileChange("rewritten.txt", "modified", "(large file changed)")]


def test_symlinks_are_recorded_by_their_target_and_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside, "secret.txt", "TOP SECRET CONTENT\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session = TeachSession(workspace)
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "linkdir").symlink_to(outside, target_is_directory=True)

    changes = by_path(session.file_changes())
    assert set(changes) == {"link.txt", "linkdir"}
    assert changes["link.txt"].diff == f"(symbolic link to '{outside / 'secret.txt'}' added)"
    assert all("TOP SECRET" not in change.diff for change in changes.values())


def test_the_diffs_are_bounded_in_all(tmp_path: Path) -> None:
    for n in range(12):
        write(tmp_path, f"file{n:02}.txt", "")
    session = TeachSession(tmp_path)
    for n in range(12):
        write(tmp_path, f"file{n:02}.txt", "".join(f"new line {i} of file {n}\n" for i in range(400)))

    changes = session.file_changes()
    assert len(changes) == 12, "every changed file is listed, even when its diff is left out"
    assert sum(len(change.diff) for change in changes) < MAX_DIFF_CHARS + 2_000
    assert "[... diff cut:" in changes[0].diff
    assert changes[-1].diff.startswith("(diff left out:")


# -- the prompt ---------------------------------------------------------------------------------


def test_the_draft_prompt_holds_the_events_and_the_diff(tmp_path: Path) -> None:
    write(tmp_path, "app.py", "x = 1\n")
    session = TeachSession(tmp_path, "Fix Tests")
    session.record_command("pytest -q tests/test_app.py", 1, "1 failed, 3 passed")
    session.record_note("the greeting moved to app.py")
    write(tmp_path, "app.py", "x = 2\n")

    prompt = session.draft_prompt()
    assert "pytest -q tests/test_app.py" in prompt
    assert "Exit code: 1 (failed)" in prompt
    assert "1 failed, 3 passed" in prompt
    assert "the greeting moved to app.py" in prompt
    assert "modified: app.py" in prompt and "-x = 1" in prompt and "+x = 2" in prompt
    assert "name: Fix-Tests" in prompt
    assert prompt.index("pytest -q tests/test_app.py") < prompt.index("the greeting moved")
    assert "{" not in prompt.replace("{}", ""), "every placeholder is filled"


def test_the_draft_prompt_keeps_the_newest_events_when_there_are_too_many(tmp_path: Path) -> None:
    session = TeachSession(tmp_path)
    for n in range(300):
        session.record_command(f"step-{n:03}", 0, "output line\n" * 20)
    prompt = session.draft_prompt()
    assert len(prompt) <= MAX_PROMPT_CHARS + 200
    assert "step-299" in prompt and "step-000" not in prompt
    assert "earlier events left out" in prompt


# -- drafting -----------------------------------------------------------------------------------


def test_skill_text_strips_a_fence_and_text_before_the_front_matter() -> None:
    fenced = f"Here is the skill:\n\n```markdown\n{GOOD_SKILL}```\nHope it helps!"
    assert skill_text(fenced) == GOOD_SKILL
    inner = "---\nname: a\ndescription: b\n---\n1. Run:\n```bash\nmake\n```\n"
    assert skill_text(f"```md\n{inner}```") == inner


async def test_draft_parses_a_fenced_reply(tmp_path: Path) -> None:
    session = TeachSession(tmp_path)
    session.record_command("pytest -q", 1, "1 failed")
    model = ScriptedModel([f"Sure! Here it is:\n```markdown\n{GOOD_SKILL}```"])
    skill = await session.draft(model)
    assert skill == parse_skill(GOOD_SKILL)
    assert skill.name == "fix-tests"
    assert len(model.requests) == 1
    assert "pytest -q" in model.requests[0].messages[0].content


async def test_a_bad_first_reply_is_retried_once_quoting_the_reason(tmp_path: Path) -> None:
    session = TeachSession(tmp_path)
    session.record_note("run make")
    model = ScriptedModel(["1. Run make.\n2. Done.", GOOD_SKILL])
    skill = await session.draft(model)
    assert skill.name == "fix-tests"
    assert len(model.requests) == 2
    retry = model.requests[1].messages
    assert [message.role for message in retry] == ["user", "assistant", "user"]
    assert retry[1].content == "1. Run make.\n2. Done."
    assert "there is no front matter" in retry[2].content


async def test_two_bad_replies_raise_a_teach_error_saying_what_was_wrong(tmp_path: Path) -> None:
    session = TeachSession(tmp_path)
    session.record_note("run make")
    model = ScriptedModel(["no skill here", "---\nname: ok\n---\n1. step\n"])
    with pytest.raises(TeachError) as caught:
        await session.draft(model)
    assert isinstance(caught.value, CortanaError)
    assert "no 'description:'" in str(caught.value) and caught.value.reason in str(caught.value)
    assert len(model.requests) == 2


async def test_the_users_name_wins_over_the_drafted_one(tmp_path: Path) -> None:
    session = TeachSession(tmp_path, "run tests")
    session.record_command("pytest", 0, "ok")
    skill = await session.draft(ScriptedModel([GOOD_SKILL]))
    assert skill.name == "run-tests"
    assert skill.description == "Make the failing unit tests pass again after a refactor."


async def test_drafting_with_nothing_recorded_asks_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([GOOD_SKILL])
    with pytest.raises(TeachError, match="Nothing was recorded"):
        await TeachSession(tmp_path).draft(model)
    assert model.requests == []


# -- saving -------------------------------------------------------------------------------------


def test_save_skill_writes_a_file_that_reads_back_and_refuses_to_overwrite(tmp_path: Path) -> None:
    skill = parse_skill(GOOD_SKILL)
    path = save_skill(tmp_path, skill)
    assert path == tmp_path / "skills" / "fix-tests" / "SKILL.md"
    assert parse_skill(path.read_text(encoding="utf-8"), path) == Skill(
        name=skill.name, description=skill.description, body=skill.body, path=path
    )

    changed = Skill(name="fix-tests", description="Another description.", body="1. Other step.")
    with pytest.raises(UserError, match="pick another name") as caught:
        save_skill(tmp_path, changed)
    assert str(path) in str(caught.value)
    assert parse_skill(path.read_text(encoding="utf-8")).description == skill.description

    save_skill(tmp_path, changed, overwrite=True)
    assert parse_skill(path.read_text(encoding="utf-8")).description == "Another description."
    assert sorted(os.listdir(path.parent)) == ["SKILL.md"], "no temporary file is left behind"


@pytest.mark.parametrize("name", ["../x", "a/b", "a\\b", "..", "", "x..y"])
def test_skill_file_rejects_names_that_are_not_one_folder(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError):
        skill_file(tmp_path, name)


def test_skill_file_is_under_the_skills_folder(tmp_path: Path) -> None:
    assert skill_file(tmp_path, "deploy-docs") == tmp_path / "skills" / "deploy-docs" / "SKILL.md"
