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
