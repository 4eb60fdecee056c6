"""Workspace snapshots on real folders: what changed since the snapshot, and the text helpers that bound it."""

from __future__ import annotations

from pathlib import Path

from cortana.learning.snapshot import FileChange, WorkspaceSnapshot, clean_text, cut_lines, cut_text


def write(root: Path, rel: str, content: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


def test_an_unchanged_workspace_has_no_changes(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "one\n")
    snapshot = WorkspaceSnapshot(tmp_path)
    assert snapshot.workspace == tmp_path.resolve()
    assert snapshot.changes() == []


def test_added_modified_and_deleted_files_are_listed_by_path(tmp_path: Path) -> None:
    write(tmp_path, "keep.txt", "same\n")
    write(tmp_path, "edit.txt", "old\n")
    write(tmp_path, "gone.txt", "bye\n")
    snapshot = WorkspaceSnapshot(tmp_path)
    write(tmp_path, "edit.txt", "new\n")
    (tmp_path / "gone.txt").unlink()
    write(tmp_path, "sub/new.txt", "hello\n")
    write(tmp_path, ".cortana/own.json", "{}\n")  # the assistant's own folder: never watched

    changes = snapshot.changes()
    assert [(change.path, change.status) for change in changes] == [
        ("edit.txt", "modified"),
        ("gone.txt", "deleted"),
        ("sub/new.txt", "added"),
    ]
    assert changes[0].diff == "--- a/edit.txt\n+++ b/edit.txt\n@@ -1 +1 @@\n-old\n+new"
    assert changes[1] == FileChange("gone.txt", "deleted", "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye")
    assert changes[2].diff.endswith("+hello")


def test_the_text_helpers_clean_and_cut() -> None:
    assert clean_text("\x1b[31mred\x1b[0m\tok\nprogress 10%\rprogress 100%\x07") == "red\tok\nprogress 100%"
    assert cut_text("abcdef", 6) == "abcdef"
    assert cut_text("abcdef", 4) == "abc…"
    text = "\n".join(f"line {n}" for n in range(100))
    assert cut_lines(text, 10_000, what="diff") == text
    cut = cut_lines(text, 100, what="diff")
    assert cut.startswith("line 0\nline 1\n") and cut.endswith("more lines]") and "[... diff cut: " in cut
    assert len(cut) < 100
