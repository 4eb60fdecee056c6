"""Cortana's own writes in a workspace go through one writer that never follows a link out of it.

A confined command may write anywhere in the workspace, so it can swap a file
for a symlink to a file outside, or a folder for a symlink to another folder,
between one of Cortana's writes and the next. Each test here makes that swap
at the moment it matters and checks that nothing outside changed: the writer
itself (:class:`cortana.safefs.SafeTree`), ``/undo`` and ``/rewind``
(checkpoints), the fix's apply, teach mode's ``SKILL.md``, the code graph's
ignore file and git exclude, and Cortana's private folder. The editor's
cancel (ACP's put-back) is in tests/unit/test_acp.py, through the real
``cortana acp`` and a real confined command.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cortana.errors import UserError
from cortana.knowledge.graphify import write_ignore_block
from cortana.learning.skills import Skill
from cortana.learning.teach import save_skill
from cortana.memory.checkpoints import Checkpoints
from cortana.memory.store import private_file, private_folder
from cortana.messages import ThreadRef
from cortana.safefs import PathRefused, SafeTree
from cortana.safegit import exclude_from_git
from cortana.turn import TurnState, in_turn

THREAD = ThreadRef(resource_id="me", thread_id="t")


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with ``sub/notes.txt``, and a folder outside it that must never change."""
    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "notes.txt").write_text("original\n")
    (root / "victim-note.txt").write_text("the repository's text\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the user's own file\n")
    return root, outside


def swap_folder(root: Path, outside: Path, name: str = "sub") -> None:
    """What a confined command can do: the folder moved aside and a symlink to a folder outside in its place."""
    (root / name).rename(root / f"{name}.real")
    os.symlink(outside, root / name)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


# -- the writer ---------------------------------------------------------------------------------------------------


def test_the_writer_follows_no_symlink_on_the_way_or_at_the_end(places: tuple[Path, Path]) -> None:
    root, outside = places
    before = snapshot(outside)
    tree = SafeTree(root)
    swap_folder(root, outside)
    os.symlink(outside / "secret.txt", root / "link.txt")
    for write in (
        lambda: tree.write_text("sub/notes.txt", "x"),
        lambda: tree.write_text("sub/authorized_keys", "ssh-ed25519 AAAA attacker"),
        lambda: tree.write_text(root / "sub" / "deeper" / "new.txt", "x"),
        lambda: tree.write_text("link.txt", "x"),
        lambda: tree.unlink("sub/secret.txt"),
        lambda: tree.read_bytes("sub/secret.txt"),
        lambda: tree.read_bytes("link.txt"),
    ):
        with pytest.raises(PathRefused, match="symlink"):
            write()
    assert snapshot(outside) == before
    assert tree.unlink("link.txt") and not os.path.lexists(root / "link.txt"), "a symlink is removed itself"
    assert (outside / "secret.txt").read_text() == "the user's own file\n", "never what it points at"


def test_the_writer_stays_in_its_folder_by_the_letters_of_the_path(places: tuple[Path, Path]) -> None:
    root, outside = places
    tree = SafeTree(root)
    with pytest.raises(PathRefused, match=r"'\.\.'"):
        tree.write_text("sub/../../outside/secret.txt", "x")
    with pytest.raises(PathRefused, match="outside"):
        tree.write_text(outside / "secret.txt", "x")
    with pytest.raises(PathRefused, match="NUL"):
        tree.write_text("a\x00b", "x")
    with pytest.raises(PathRefused, match="folder itself"):
        tree.write_text(root, "x")
    assert (outside / "secret.txt").read_text() == "the user's own file\n"


def test_a_write_replaces_the_name_never_a_hard_link_to_a_file_outside(places: tuple[Path, Path]) -> None:
    root, outside = places
    os.link(outside / "secret.txt", root / "linked.txt")  # as uv and pnpm link packages from their caches
    os.chmod(root / "linked.txt", 0o640)
    SafeTree(root).write_text("linked.txt", "changed in the workspace\n")
    assert (root / "linked.txt").read_text() == "changed in the workspace\n"
    assert (outside / "secret.txt").read_text() == "the user's own file\n"
    assert stat.S_IMODE((root / "linked.txt").stat().st_mode) == 0o640, "the file's permissions kept"
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == [], "no partial file left"


def test_an_exclusive_write_never_replaces_what_is_there(places: tuple[Path, Path]) -> None:
    root, outside = places
    tree = SafeTree(root)
    os.symlink(outside / "new.txt", root / "dangling")
    with pytest.raises(FileExistsError):
        tree.write_text("dangling", "x", exclusive=True)
    assert not (outside / "new.txt").exists(), "a dangling symlink is not followed to create its target"
    tree.write_text("fresh/AGENTS.md", "# Agents\n", exclusive=True)
    assert (root / "fresh" / "AGENTS.md").read_text() == "# Agents\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only file")
def test_a_read_only_file_is_refused_not_replaced(places: tuple[Path, Path]) -> None:
    root, _ = places
    os.chmod(root / "victim-note.txt", 0o444)
    with pytest.raises(PathRefused, match="read-only"):
        SafeTree(root).write_text("victim-note.txt", "x")


# -- /undo and /rewind ------------------------------------------------------------------------------------------


def checkpointed(root: Path, tmp_path: Path) -> tuple[Checkpoints, int]:
    """A turn that changed ``sub/notes.txt`` and created ``sub/authorized_keys``, as the file tools record it."""
    checkpoints = Checkpoints(root, tmp_path / "checkpoints.db")
    with in_turn(TurnState(THREAD)):  # the writes of one turn
        turn = checkpoints.begin(THREAD, "change the notes")
        for name, text in (("sub/notes.txt", "changed\n"), ("sub/authorized_keys", "ssh-ed25519 AAAA user\n")):
            checkpoints.writing(root / name, text)
            (root / name).write_text(text)
    return checkpoints, turn


def test_undo_refuses_to_restore_through_a_folder_swapped_for_a_symlink(
    places: tuple[Path, Path], tmp_path: Path
) -> None:
    root, outside = places
    checkpoints, turn = checkpointed(root, tmp_path)
    (outside / "authorized_keys").write_text("ssh-ed25519 AAAA the user's own key\n")
    before = snapshot(outside)
    swap_folder(root, outside)
    changed = checkpoints.changed_since(turn)
    assert sorted(changed) == ["sub/authorized_keys", "sub/notes.txt"], "the swap shows as a change"
    restored = checkpoints.restore(turn, overwrite=changed)  # the user said yes to a question naming sub/ paths
    assert snapshot(outside) == before, "nothing outside the workspace written or removed"
    assert restored.restored == []
    assert set(restored.refused) == {"sub/notes.txt", "sub/authorized_keys"}
    assert all("symlink" in why for why in restored.refused.values()), restored.refused
    assert checkpoints.last_with_files() is not None, "a refused restore keeps its checkpoint for another try"
    checkpoints.close()


def test_rewind_over_several_turns_puts_back_what_it_can_and_names_the_rest(
    places: tuple[Path, Path], tmp_path: Path
) -> None:
    root, outside = places
    checkpoints, first = checkpointed(root, tmp_path)
    with in_turn(TurnState(THREAD)):
        checkpoints.begin(THREAD, "change the note")
        checkpoints.writing(root / "victim-note.txt", "rewritten\n")
        (root / "victim-note.txt").write_text("rewritten\n")
    (root / "victim-note.txt").unlink()
    os.symlink(outside / "secret.txt", root / "victim-note.txt")  # the file swapped for a link out
    restored = checkpoints.restore(first, overwrite=checkpoints.changed_since(first))
    assert (outside / "secret.txt").read_text() == "the user's own file\n"
    assert "victim-note.txt" in restored.refused and "symlink" in restored.refused["victim-note.txt"]
    assert sorted(restored.restored) == ["sub/authorized_keys", "sub/notes.txt"]
    assert (root / "sub" / "notes.txt").read_text() == "original\n"
    assert not (root / "sub" / "authorized_keys").exists(), "the file the turn created is removed"
    checkpoints.close()


# -- the fix's apply, teach mode, the code graph's files, Cortana's private folder ----------------------------------


async def test_the_fix_is_not_applied_through_a_folder_swapped_for_a_symlink(tmp_path: Path) -> None:
    from cortana.testing import ScriptedModel
    from tests.unit.test_repair import FIX, ONE_CALL_AWAY, workflow, write

    project = write(tmp_path / "p", ONE_CALL_AWAY)
    model = ScriptedModel([FIX])
    result = await workflow(project, model, samples=1, per_location=0, rounds=1, rewrite=False).run("fix it")
    assert result.status == "fixed", result.message
    elsewhere = tmp_path / "elsewhere"
    (project / "shop").rename(elsewhere)  # the same files, now outside, and a link to them in the workspace
    os.symlink(elsewhere, project / "shop")
    before = snapshot(elsewhere)
    with pytest.raises(UserError, match="symlink"):
        await workflow(project, model).apply(result)
    assert snapshot(elsewhere) == before


def test_saving_a_skill_through_a_swapped_skills_folder_is_refused(places: tuple[Path, Path]) -> None:
    root, outside = places
    (root / "skills").mkdir()
    swap_folder(root, outside, "skills")
    skill = Skill(name="deploy", description="Deploy the app.", body="Run make deploy.")
    with pytest.raises(UserError, match="symlink"):
        save_skill(root, skill)
    assert not (outside / "deploy").exists()


def test_the_code_graphs_files_are_never_written_through_a_symlink(places: tuple[Path, Path]) -> None:
    root, outside = places
    os.symlink(outside / "secret.txt", root / ".graphifyignore")
    with pytest.raises(UserError, match=r"symbolic link|symlink"):
        write_ignore_block(root, ["build/"])
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info").rename(root / "info.real")
    os.symlink(outside, root / ".git" / "info")
    assert exclude_from_git(root, ["graphify-out/"]) == []
    assert snapshot(outside) == {"secret.txt": b"the user's own file\n"}


def test_a_private_folder_that_is_a_symlink_is_refused(places: tuple[Path, Path]) -> None:
    root, outside = places
    os.chmod(outside, 0o755)
    os.symlink(outside, root / ".cortana")  # a repository that ships .cortana as a link
    with pytest.raises(UserError, match="symlink"):
        private_folder(root / ".cortana")
    assert not (outside / ".gitignore").exists()
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755, "not narrowed through the link either"
    (root / ".cortana").unlink()
    (root / ".cortana").mkdir()
    mode = stat.S_IMODE((outside / "secret.txt").stat().st_mode)
    for name in (".gitignore", "memory.db-wal", "cortana.log"):  # SQLite's journal, the log: all would be appended
        os.symlink(outside / "secret.txt", root / ".cortana" / name)
        with pytest.raises(UserError, match="symlink"):
            private_folder(root / ".cortana")
        (root / ".cortana" / name).unlink()
    private_folder(root / ".cortana")
    os.symlink(outside / "secret.txt", root / ".cortana" / "history")
    with pytest.raises(UserError, match="symlink"):
        private_file(root / ".cortana" / "history")
    assert (outside / "secret.txt").read_text() == "the user's own file\n", "a link there is never written"
    assert stat.S_IMODE((outside / "secret.txt").stat().st_mode) == mode, "not narrowed through the link"
