"""No git that Cortana starts runs the programs a repository's own config names (real git, a hostile .git/config)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cortana import Agent
from cortana.knowledge.graph import KnowledgeGraph
from cortana.knowledge.graphify import find_graphify
from cortana.learning.snapshot import WorkspaceSnapshot
from cortana.safegit import safe_git_environment
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools.builtin import builtin_tools, workspace_gate
from tests.integration.test_cli_terminal import text_reply

HOSTILE = {
    "core.fsmonitor": "touch FSMONITOR-RAN; false",
    "core.pager": "touch PAGER-RAN; cat",
    "core.editor": "touch EDITOR-RAN; true",
    "core.sshCommand": "touch SSH-RAN; false",
    "core.askPass": "touch ASKPASS-RAN; echo",
    "diff.external": "touch EXTDIFF-RAN; true",
    "diff.evil.textconv": "touch TEXTCONV-RAN; cat",
    "filter.evil.clean": "touch CLEAN-RAN; cat",
    "filter.evil.smudge": "touch SMUDGE-RAN; cat",
    "alias.st": "!touch ALIAS-RAN",
    "credential.helper": "!touch CREDENTIAL-RAN; true",
    "pager.log": "touch PAGERLOG-RAN; cat",
}
"""What a repository's .git/config can make git run, each leaving a marker file."""


def git(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=30, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user with an empty git config of their own (the machine's global config left out)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "t@example.invalid")
    monkeypatch.delenv("GIT_PAGER", raising=False)
    monkeypatch.delenv("PAGER", raising=False)
    return home


def hostile_repository(folder: Path) -> Path:
    """A repository as it arrives in an archive: a commit, hooks, and a .git/config that runs programs."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    (folder / ".gitattributes").write_text("*.txt diff=evil filter=evil\n")
    (folder / "calc.py").write_text('def compute_total(items):\n    """Sum the prices."""\n    return sum(items)\n')
    (folder / "notes.txt").write_text("one\n")
    (folder / ".gitignore").write_text("*.log\n")  # graphify asks git for its index only when this has patterns
    git(folder, "add", ".")
    git(folder, "commit", "-qm", "start")
    for hook in ("pre-commit", "post-checkout", "post-commit", "pre-push", "post-index-change"):
        path = folder / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {hook.upper()}-HOOK-RAN\n")
        path.chmod(0o755)
    for key, value in HOSTILE.items():
        git(folder, "config", key, value)
    git(folder, "remote", "add", "origin", "ssh://git@127.0.0.1:1/x.git")
    (folder / "notes.txt").write_text("one\ntwo\n")
    return folder


def markers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.rglob("*-RAN"))


COMMANDS = [
    ("status", "--short"),
    ("ls-files", "-co", "--exclude-standard"),
    ("diff",),
    ("-p", "log", "-1", "-p"),
    ("log", "-1"),
    ("st",),
    ("add", "notes.txt"),
    ("commit", "-qm", "more"),
    ("checkout", "-q", "-b", "side"),
    ("fetch", "origin"),
    ("commit", "--amend"),
]


def test_the_hostile_repository_runs_its_programs_under_plain_git(user_home: Path, tmp_path: Path) -> None:
    """The control: this is what each git command below would run without Cortana's environment."""
    repo = hostile_repository(tmp_path / "repo")
    for args in COMMANDS:
        git(repo, *args)
    ran = markers(repo)
    # (the pagers need a terminal to run, so they do not here)
    for expected in ("FSMONITOR-RAN", "EXTDIFF-RAN", "CLEAN-RAN", "ALIAS-RAN", "SSH-RAN", "EDITOR-RAN"):
        assert expected in ran, ran
    assert "PRE-COMMIT-HOOK-RAN" in ran and "POST-CHECKOUT-HOOK-RAN" in ran


def test_git_with_the_safe_environment_runs_none_of_them(user_home: Path, tmp_path: Path) -> None:
    repo = hostile_repository(tmp_path / "repo")
    environment = safe_git_environment(repo, os.environ)
    outcomes = {args: git(repo, *args, env=environment) for args in COMMANDS}
    assert markers(repo) == []
    assert outcomes[("status", "--short")].returncode == 0 and "notes.txt" in outcomes[("status", "--short")].stdout
    diff = outcomes[("diff",)]
    assert diff.returncode != 0 and "cannot run" in diff.stderr, "diff.external is switched off, loudly"
    shown = git(repo, "diff", "--no-ext-diff", "HEAD~1", "HEAD", env=environment).stdout
    assert "+two" in shown, "the commit went in, and textconv reads as cat"
    assert "alias 'st'" in outcomes[("st",)].stderr
    assert git(repo, "log", "-1", "--format=%s", env=environment).stdout.strip() == "more", "the commit was made"


def test_the_users_own_settings_are_kept(user_home: Path, tmp_path: Path) -> None:
    repo = hostile_repository(tmp_path / "repo")
    git(repo, "config", "--global", "alias.st", "status --short")
    git(repo, "config", "--global", "core.pager", "cat")
    git(repo, "config", "--global", "credential.helper", "cache")
    environment = safe_git_environment(repo, os.environ)
    assert "notes.txt" in git(repo, "st", env=environment).stdout, "the user's alias, not the repository's"
    helpers = git(repo, "config", "--get-all", "credential.helper", env=environment).stdout.split("\n")
    assert helpers[-2:] == ["cache", ""], helpers  # the repository's cleared, the user's added back
    assert markers(repo) == []


def test_a_nested_repository_is_covered_too(user_home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    inner = hostile_repository(workspace / "vendor" / "lib")
    environment = safe_git_environment(workspace, os.environ)
    git(inner, "st", env=environment)
    git(inner, "diff", "--no-ext-diff", env=environment)
    assert markers(workspace) == []


async def test_run_command_in_a_folder_not_trusted_runs_none_of_them(user_home: Path, tmp_path: Path) -> None:
    repo = hostile_repository(tmp_path / "repo")
    script = [
        tool_call_response(tool_call("run_command", command="git status --short && git log -1 -p && git st")),
        tool_call_response(tool_call("run_command", command="git add notes.txt && git commit -qm x")),
        "done",
    ]
    agent = Agent(ScriptedModel(script), tools=builtin_tools(repo), permissions=workspace_gate(repo, allow=("*",)))
    result = await agent.run("go")
    assert "notes.txt" in result.new_messages[2].content
    assert markers(repo) == []
    script = [tool_call_response(tool_call("run_command", command="git status")), "ok"]
    tools = builtin_tools(repo, trusted_git=True)
    trusted = Agent(ScriptedModel(script), tools=tools, permissions=workspace_gate(repo, allow=("*",)))
    await trusted.run("go")
    assert "FSMONITOR-RAN" in markers(repo), "in a folder the user trusts, git is the repository's own"


def test_a_snapshot_runs_none_of_them(user_home: Path, tmp_path: Path) -> None:
    repo = hostile_repository(tmp_path / "repo")
    snapshot = WorkspaceSnapshot(repo)
    (repo / "notes.txt").write_text("three\n")
    assert [change.path for change in snapshot.changes()] == ["notes.txt"]
    assert markers(repo) == []


async def test_a_graph_build_runs_none_of_them(user_home: Path, tmp_path: Path) -> None:
    control = hostile_repository(tmp_path / "control")
    graphify = find_graphify()
    assert graphify is not None
    await asyncio.to_thread(subprocess.run, [graphify, "update", "."], cwd=control, capture_output=True, timeout=300)
    assert "FSMONITOR-RAN" in markers(control), "graphify's own build runs git, and so the repository's fsmonitor"
    repo = hostile_repository(tmp_path / "repo")
    graph = KnowledgeGraph(repo)
    status = await graph.rebuild()
    assert status.state == "ready" and status.nodes > 0, status
    assert markers(repo) == []


def test_the_one_shot_command_runs_none_of_them(scripted_engine, user_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Reproduces the report: `cortana "what does compute_total in calc.py do?"` created FSMONITOR-RAN (the code
    graph's build runs `git ls-files`) in a folder with no cortana.yml, no trust and no terminal."""
    repo = hostile_repository(tmp_path / "repo")
    scripted_engine.add("POST", "/v1/chat/completions", text_reply(["It sums the prices."]))
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", scripted_engine.url,
         "what does compute_total in calc.py do?"],
        cwd=repo, env={**os.environ, "NO_COLOR": "1", "CORTANA_PROMPTS_DIR": ""}, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "It sums the prices." in done.stdout
    user = next(r.body for r in scripted_engine.requests if r.path == "/v1/chat/completions")["messages"][-1]
    assert "compute_total" in user["content"]
    assert markers(repo) == []


def commit_again(repository: Path) -> None:
    git(repository, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "commit", "-qam", "second")


def test_every_repository_in_the_folder_is_covered_at_any_depth_in_any_folder(user_home: Path, tmp_path: Path) -> None:
    """Reproduces the report: the environment read repositories three folders deep, skipped node_modules/ and
    virtual environments, and stopped at 32; `cd X && git diff HEAD~1 HEAD` ran a nested repository's
    diff.external."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for n in range(40):  # more than the 32 repositories the old walk stopped at, before the hostile ones
        (workspace / "aa" / f"r{n:02}").mkdir(parents=True)
        git(workspace / "aa" / f"r{n:02}", "init", "-q")
    hostile = [
        hostile_repository(workspace / "a" / "b" / "c" / "d" / "deep"),
        hostile_repository(workspace / "node_modules" / "pkg"),
        hostile_repository(workspace / ".venv" / "src" / "lib"),
    ]
    for repository in hostile:
        commit_again(repository)
    for repository in hostile:  # the control: plain git runs the nested repository's program
        git(repository, "diff", "HEAD~1", "HEAD")
    assert markers(workspace).count("EXTDIFF-RAN") == 3
    for marker in workspace.rglob("*-RAN"):
        marker.unlink()
    environment = safe_git_environment(workspace, os.environ)
    for repository in hostile:
        git(repository, "diff", "HEAD~1", "HEAD", env=environment)
        git(repository, "st", env=environment)
        git(repository, "status", env=environment)
    assert markers(workspace) == []


def test_a_submodule_under_node_modules_runs_none_of_its_programs(user_home: Path, tmp_path: Path) -> None:
    """Reproduces the report: a plain approved `git status` ran a filter program from a submodule under
    node_modules/."""
    source = tmp_path / "source"
    source.mkdir()
    git(source, "init", "-q")
    (source / ".gitattributes").write_text("*.txt filter=evil\n")
    (source / "data.txt").write_text("one\n")
    git(source, "add", ".")
    git(source, "commit", "-qm", "start")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    git(workspace, "init", "-q")
    added = git(workspace, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), "node_modules/x")
    assert added.returncode == 0, added.stderr
    submodule = workspace / "node_modules" / "x"
    git(submodule, "config", "filter.evil.clean", f"touch {workspace}/CLEAN-RAN; cat")
    assert (workspace / ".git" / "modules" / "node_modules" / "x" / "config").is_file(), "an absorbed submodule"

    def touched(when: int) -> None:  # a new timestamp: git must read the file again, through its clean filter
        os.utime(submodule / "data.txt", (when, when))

    touched(1)
    git(workspace, "status")
    assert markers(workspace) == ["CLEAN-RAN"], "the control: plain git status runs the submodule's filter"
    (workspace / "CLEAN-RAN").unlink()
    touched(2)
    environment = safe_git_environment(workspace, os.environ)
    shown = git(workspace, "status", env=environment)
    assert shown.returncode == 0, shown.stderr
    assert markers(workspace) == []


def test_a_bare_repository_in_the_folder_is_not_picked_up(user_home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    bare = workspace / "docs" / "hidden.git"
    bare.mkdir(parents=True)
    git(bare, "init", "-q", "--bare")
    git(bare, "config", "alias.lg", f"!touch {workspace}/BARE-ALIAS-RAN")
    git(bare, "lg")
    assert markers(workspace) == ["BARE-ALIAS-RAN"], "the control: a cd into it is enough for plain git"
    (workspace / "BARE-ALIAS-RAN").unlink()
    environment = safe_git_environment(workspace, os.environ)
    assert git(bare, "lg", env=environment).returncode != 0 and markers(workspace) == []
    assert "cannot use bare repository" in git(bare, "log", env=environment).stderr, "git says why"
    assert git(tmp_path, "--git-dir", str(bare), "log", env=environment).returncode in (0, 128), "named, it is used"


async def test_run_commands_git_environment_is_computed_confined(
    user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``git`` comes from the user's PATH, which may lead into the folder (an activated virtual environment holding
    a `git` of its own): the config listing Cortana runs before a command runs confined too."""
    repo = hostile_repository(tmp_path / "repo")
    outside = tmp_path / "outside"
    outside.mkdir()
    fake = repo / ".venv" / "bin"
    fake.mkdir(parents=True)
    (fake / "git").write_text(f'#!/bin/sh\ntouch "{outside}/FAKE-GIT-RAN"\nexec /usr/bin/env -u PATH git "$@"\n')
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    from cortana.sandbox import Sandbox

    safe_git_environment(repo, os.environ, sandbox=Sandbox(repo))
    assert not (outside / "FAKE-GIT-RAN").exists()
