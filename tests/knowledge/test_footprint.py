"""After the code graph is built, ``git status`` in the user's repository shows only the user's changes: the real
graphify CLI in a real git repository, and a hostile ``.git/info/exclude`` that is left alone."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from cortana.knowledge.graph import KnowledgeGraph
from cortana.safegit import EXCLUDE_HEADER, exclude_from_git
from tests.knowledge.conftest import FIXTURE


def git(root: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout


async def test_the_graph_leaves_git_status_as_the_user_left_it(tmp_path: Path, graphify: str) -> None:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=u", "-c", "user.email=u@e", "commit", "-qm", "start")
    graph = KnowledgeGraph(root, exclude=["vendor/"])  # an exclude pattern: .graphifyignore is written too
    try:
        await graph.rebuild()
    finally:
        await graph.aclose()
    assert (root / "graphify-out" / "graph.json").is_file() and (root / ".graphifyignore").is_file()
    assert git(root, "status", "--porcelain") == "", "only the user's changes show"
    (root / "mine.py").write_text("x = 1\n")
    assert git(root, "status", "--porcelain") == "?? mine.py\n"
    exclude = (root / ".git" / "info" / "exclude").read_text()
    assert exclude.count(EXCLUDE_HEADER) == 1 and "/graphify-out/\n" in exclude and "/.graphifyignore\n" in exclude
    assert exclude_from_git(root, ["graphify-out/", ".graphifyignore"]) == [], "added once"
    assert not (root / ".gitignore").exists(), "the user's own files are not touched"


def test_a_linked_or_odd_git_folder_is_left_alone(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    linked = tmp_path / "linked"
    (linked / ".git" / "info").mkdir(parents=True)
    (linked / ".git" / "info" / "exclude").symlink_to(outside)
    assert exclude_from_git(linked, ["graphify-out/"]) == []
    assert outside.read_text() == "keep\n", "a link out of the repository is never written through"
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: /elsewhere\n")
    assert exclude_from_git(worktree, ["graphify-out/"]) == []
    assert exclude_from_git(tmp_path / "no-repo", ["graphify-out/"]) == []
    fresh = tmp_path / "fresh"
    (fresh / ".git").mkdir(parents=True)
    assert exclude_from_git(fresh, ["graphify-out/", ".graphifyignore"]) == ["/graphify-out/", "/.graphifyignore"]


async def test_a_workspace_in_a_subfolder_of_a_repository_leaves_git_status_clean(
    tmp_path: Path, graphify: str
) -> None:
    """The repository is the folder above: its ``info/exclude`` gets the paths from its top."""
    repo = tmp_path / "repo"
    root = repo / "services" / "api"
    shutil.copytree(FIXTURE, root)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@e", "commit", "-qm", "start")
    graph = KnowledgeGraph(root, exclude=["vendor/"])
    try:
        await graph.rebuild()
    finally:
        await graph.aclose()
    assert (root / "graphify-out" / "graph.json").is_file() and (root / ".graphifyignore").is_file()
    assert git(repo, "status", "--porcelain") == "", "only the user's changes show"
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert "/services/api/graphify-out/\n" in exclude and "/services/api/.graphifyignore\n" in exclude
    assert not (root / ".git").exists(), "no repository is made in the subfolder"


def test_a_worktree_and_a_subfolder_of_it_write_the_main_repositorys_exclude(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    (main / "app").mkdir()
    (main / "app" / "a.py").write_text("x = 1\n")
    git(main, "init", "-q")
    git(main, "add", ".")
    git(main, "-c", "user.name=u", "-c", "user.email=u@e", "commit", "-qm", "start")
    git(main, "worktree", "add", "-q", str(tmp_path / "feature"))
    workspace = tmp_path / "feature" / "app"
    assert exclude_from_git(workspace, ["graphify-out/"]) == ["/app/graphify-out/"]
    (workspace / "graphify-out").mkdir()
    (workspace / "graphify-out" / "graph.json").write_text("{}")
    assert git(tmp_path / "feature", "status", "--porcelain") == "", "git reads the main repository's exclude"
    assert "/app/graphify-out/" in (main / ".git" / "info" / "exclude").read_text()


def test_a_git_file_that_leads_to_no_repository_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "info").mkdir(parents=True)  # no HEAD: not a git folder
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / ".git").write_text(f"gitdir: {elsewhere}\n")
    assert exclude_from_git(work / "sub", ["graphify-out/"]) == []
    assert not (elsewhere / "info" / "exclude").exists()
    (work / ".git").unlink()
    (work / ".git").symlink_to(elsewhere)
    assert exclude_from_git(work / "sub", ["graphify-out/"]) == [], "a .git that is a symlink is left alone"
