"""Checkpoints: what each turn's writes replaced, kept outside the workspace, for ``/undo`` and ``/rewind``.

Before ``write_file`` or ``edit_file`` writes a file (and before the fix workflow applies a fix), the file's
content as it was is kept, once per turn and file, with a digest of what the turn left there. A checkpoint
begins with each turn (:class:`Checkpoints` is a turn extension) and notes when, so the conversation can be
rewound too. They live in Cortana's cache folder, one SQLite file per workspace, independent of git: the last
``KEEP_TURNS`` turns, within ``MAX_BYTES`` of kept content (the oldest are dropped first).

Restoring puts each file the turns changed back as it was before the first of them (a file they created is
removed), and refuses, file by file, one that changed since the turn wrote it (someone else's change), unless
the caller says to overwrite it. It writes through Cortana's one writer (:class:`cortana.safefs.SafeTree`): a
file or folder that a command swapped for a symlink since is refused, with the reason, never followed out of the
workspace. What ``run_command`` changed is not covered: commands write files Cortana never sees, as in Claude
Code.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cortana.config import cache_dir
from cortana.display import valid_text
from cortana.memory.migrations import Migration, apply_migrations
from cortana.memory.store import private_file, private_folder
from cortana.messages import Message, RunResult, ThreadRef
from cortana.safefs import PathRefused, SafeTree
from cortana.turnstate import turn_state

if TYPE_CHECKING:
    from cortana.memory.stored import StoredMemory
    from cortana.models.base import ModelSettings
    from cortana.tools import Tool, ToolGroup

__all__ = ["KEEP_TURNS", "MAX_BYTES", "Checkpoint", "Checkpoints", "Restored"]

KEEP_TURNS = 100
"""How many turns' checkpoints are kept (the oldest go first)."""
MAX_BYTES = 200 << 20
"""The most kept content in all, in bytes (the oldest turns go first)."""
MAX_FILE_BYTES = 16 << 20
"""A file larger than this is not kept (restoring it is refused, with the reason)."""

CHECKPOINT_MIGRATIONS: list[Migration] = [
    (
        "checkpoints_0001_turns_files",
        """
        CREATE TABLE turns (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            resource_id TEXT NOT NULL,
            thread_id  TEXT NOT NULL,
            prompt     TEXT NOT NULL,
            started_at REAL NOT NULL
        );
        CREATE TABLE files (
            turn_id    INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
            path       TEXT NOT NULL,            -- relative to the workspace
            existed    INTEGER NOT NULL,         -- 0: the turn created it
            before     BLOB,                     -- its content before the turn (NULL: not kept, too large)
            size       INTEGER NOT NULL,
            after      TEXT NOT NULL,            -- sha256 of what the turn last wrote there
            PRIMARY KEY (turn_id, path)
        );
        """,
    ),
]


@dataclass(frozen=True)
class Checkpoint:
    """One turn's checkpoint: when it began, on which thread, what was asked, and the files it changed."""

    id: int
    thread: ThreadRef
    prompt: str
    started_at: float
    files: tuple[str, ...]


@dataclass
class Restored:
    """What a restore did: the files put back, those it would not overwrite (changed since), those it could not
    (not kept: too large), and those it refused (path -> why: a symlink on the way, a folder where the file was)."""

    restored: list[str] = field(default_factory=list)
    changed_since: list[str] = field(default_factory=list)
    not_kept: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Checkpoints:
    """The workspace's checkpoints (see the module docstring); a turn extension (``cortana.agent.TurnExtension``)
    whose only part in a turn is to begin its checkpoint, and the file tools' ``WriteLog``.

    Which checkpoint a write is filed under is the turn's own state (:func:`cortana.turnstate.turn_state`), never this
    object's: two turns on two threads at once each file their writes under their own checkpoint.

    Args:
        workspace: the project folder (paths are kept relative to it).
        path: the database (default: ``<cache>/checkpoints/<digest of the workspace>.db``).
        keep_turns, max_bytes: the bounds.
    """

    def __init__(
        self, workspace: Path, path: Path | None = None, *, keep_turns: int = KEEP_TURNS, max_bytes: int = MAX_BYTES
    ) -> None:
        self.workspace = workspace.resolve()
        self.tree = SafeTree(self.workspace)
        digest = hashlib.sha256(os.fsencode(self.workspace)).hexdigest()[:20]  # a folder name need not be UTF-8
        self.path = path or cache_dir() / "checkpoints" / f"{digest}.db"
        self.keep_turns = keep_turns
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            private_folder(self.path.parent)
            private_file(self.path)
            db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA journal_mode = WAL")
            apply_migrations(db, CHECKPOINT_MIGRATIONS)
            self._db = db
        return self._db

    # -- recording ------------------------------------------------------------------------------------------------

    def begin(self, thread: ThreadRef, prompt: str) -> int:
        """Start the checkpoint of a turn on ``thread`` asking ``prompt``: the writes the current turn makes from
        now on belong to it (outside any turn, none is recorded)."""
        with self._lock:
            db = self._connection()
            cursor = db.execute(
                "INSERT INTO turns (resource_id, thread_id, prompt, started_at) VALUES (?, ?, ?, ?)",
                (thread.resource_id, thread.thread_id, valid_text(prompt[:500]), time.time()),
            )
            begun = int(cursor.lastrowid or 0)
            state = turn_state()
            if state is not None:
                state.checkpoint = begun
            self._prune(db)
            return begun

    name = "checkpoints"

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """Each turn of the agent begins a checkpoint, unless the assistant's turn has begun it (and adds nothing to
        its context)."""
        state = turn_state()
        if state is None or state.checkpoint is None:
            self.begin(thread, prompt)
        return None

    def tools(self, thread: ThreadRef) -> Sequence[Tool | ToolGroup]:
        return ()

    def turn_settings(self, thread: ThreadRef, settings: ModelSettings) -> ModelSettings:
        return settings

    async def after_turn(self, result: RunResult) -> None:
        return None

    def writing(self, path: Path, text: str, held: str | None = None) -> None:
        """``path`` is about to be written with ``text`` (its old content still there): keep what it held (``held``:
        what the user's editor held for it, when the write goes through the editor), the first time this turn writes
        it, and what the turn leaves there."""
        relative = self._relative(path)
        if relative is None:
            return
        key = os.fsencode(relative)  # kept as the file system's bytes: a name need not be UTF-8
        after = _digest(text.encode("utf-8"))
        state = turn_state()
        turn = state.checkpoint if state is not None else None
        if turn is None:
            return  # a write outside any turn (a library call): nothing to undo it to
        with self._lock:
            db = self._connection()
            known = db.execute("SELECT 1 FROM files WHERE turn_id = ? AND path = ?", (turn, key)).fetchone()
            if known:
                db.execute("UPDATE files SET after = ? WHERE turn_id = ? AND path = ?", (after, turn, key))
                return
            if db.execute("SELECT 1 FROM turns WHERE id = ?", (turn,)).fetchone() is None:
                return  # its checkpoint was undone meanwhile (``/undo`` while the turn ran)
            before, size, existed = self._read(path)
            if held is not None and existed:
                before = held.encode("utf-8")
                size = len(before)
            db.execute(
                "INSERT INTO files (turn_id, path, existed, before, size, after) VALUES (?, ?, ?, ?, ?, ?)",
                (turn, key, int(existed), before, size, after),
            )
            self._prune(db)

    def _read(self, path: Path) -> tuple[bytes | None, int, bool]:
        try:
            fd, info = self.tree.open_regular(path)  # PathRefused (a symlink swapped in): the write is refused too
        except FileNotFoundError:
            return None, 0, False
        with os.fdopen(fd, "rb") as handle:
            if info.st_size > MAX_FILE_BYTES:
                return None, info.st_size, True
            return handle.read(MAX_FILE_BYTES + 1), info.st_size, True

    def _relative(self, path: Path) -> str | None:
        try:
            return str(path.resolve().relative_to(self.workspace))
        except (ValueError, OSError):
            return None

    def _prune(self, db: sqlite3.Connection) -> None:
        """Drop the oldest turns past ``keep_turns`` or ``max_bytes`` (the current one is always kept)."""
        db.execute(
            "DELETE FROM turns WHERE id NOT IN (SELECT id FROM turns ORDER BY id DESC LIMIT ?)", (self.keep_turns,)
        )
        while True:
            total = db.execute("SELECT COALESCE(SUM(LENGTH(before)), 0) FROM files").fetchone()[0]
            oldest = db.execute("SELECT MIN(id) FROM turns").fetchone()[0]
            state = turn_state()
            if total <= self.max_bytes or oldest is None or (state is not None and oldest == state.checkpoint):
                return
            db.execute("DELETE FROM turns WHERE id = ?", (oldest,))

    # -- reading and restoring --------------------------------------------------------------------------------------

    def recent(self, limit: int = 20, *, thread: ThreadRef | None = None) -> list[Checkpoint]:
        """The newest checkpoints first (``thread``: of that conversation's turns only), with the files each
        changed."""
        with self._lock:
            if not self.path.exists():
                return []
            db = self._connection()
            rows = db.execute(
                "SELECT id, resource_id, thread_id, prompt, started_at FROM turns"
                f"{_OF_THREAD if thread is not None else ''} ORDER BY id DESC LIMIT ?",
                (*_thread_keys(thread), limit),
            ).fetchall()
            found = []
            for turn_id, resource, thread, prompt, started in rows:
                files = tuple(
                    _name(row[0])
                    for row in db.execute("SELECT path FROM files WHERE turn_id = ? ORDER BY path", (turn_id,))
                )
                found.append(
                    Checkpoint(turn_id, ThreadRef(resource_id=resource, thread_id=thread), prompt, started, files)
                )
            return found

    def last_with_files(self, *, thread: ThreadRef | None = None) -> Checkpoint | None:
        """The newest checkpoint that changed files (``thread``: of that conversation): what ``/undo`` undoes."""
        return next((checkpoint for checkpoint in self.recent(KEEP_TURNS, thread=thread) if checkpoint.files), None)

    def changed_since(self, turn_id: int, *, thread: ThreadRef | None = None) -> list[str]:
        """The files the turns from ``turn_id`` on (``thread``: that conversation's) changed that someone else has
        changed since."""
        return [path for path, plan in self._plan(turn_id, thread).items() if plan[2]]

    def turn_files(self, turn_id: int) -> dict[str, bytes | None]:
        """The files one turn changed, each as it was before the turn (None: the turn made it), those whose content
        was kept (ACP puts them back through the editor after a cancel)."""
        with self._lock:
            plan = self._plan_locked(turn_id, None, only=True)
        return {path: before if existed else None for path, (before, existed, _, kept) in plan.items() if kept}

    def drop(self, turn_id: int, *, thread: ThreadRef | None = None) -> None:
        """Forget the checkpoints from ``turn_id`` on (``thread``: that conversation's), their files as they are."""
        with self._lock:
            self._drop(turn_id, thread)

    def _drop(self, turn_id: int, thread: ThreadRef | None) -> None:
        self._connection().execute(
            f"DELETE FROM turns WHERE id >= ?{_AND_THREAD if thread is not None else ''}",
            (turn_id, *_thread_keys(thread)),
        )

    def restore(self, turn_id: int, *, overwrite: Sequence[str] = (), thread: ThreadRef | None = None) -> Restored:
        """Put every file the turns from ``turn_id`` on changed back as it was before them; a file changed since is
        left as it is unless it is in ``overwrite``. With ``thread``, only that conversation's turns: another
        conversation's writes meanwhile stay. The restored turns' checkpoints are dropped (a second ``/undo`` goes
        one turn further back); those with files left alone stay."""
        outcome = Restored()
        with self._lock:
            plan = self._plan_locked(turn_id, thread)
            for relative, (before, existed, changed, kept) in sorted(plan.items()):
                if changed and relative not in overwrite:
                    outcome.changed_since.append(relative)
                    continue
                if existed and not kept:
                    outcome.not_kept.append(relative)
                    continue
                try:
                    if existed and before is not None:
                        self.tree.write_bytes(relative, before)
                    else:
                        self.tree.unlink(relative)  # the turns created it
                except OSError as error:  # a symlink swapped in on the way, a folder where the file was...
                    outcome.refused[relative] = _reason(error)
                    continue
                outcome.restored.append(relative)
            if not outcome.changed_since and not outcome.not_kept and not outcome.refused:
                self._drop(turn_id, thread)
        return outcome

    def _plan(self, turn_id: int, thread: ThreadRef | None) -> dict[str, tuple[bytes | None, bool, bool, bool]]:
        with self._lock:
            return self._plan_locked(turn_id, thread)

    def _plan_locked(
        self, turn_id: int, thread: ThreadRef | None, *, only: bool = False
    ) -> dict[str, tuple[bytes | None, bool, bool, bool]]:
        """Each file the turns from ``turn_id`` on (``thread``: that conversation's; ``only``: that turn alone)
        changed -> (its content before the first, whether it existed, whether it changed since the last of them
        wrote it, whether its content was kept)."""
        if not self.path.exists():
            return {}
        db = self._connection()
        turns = "turn_id = ?" if only else "turn_id >= ?"
        if thread is not None:
            turns += " AND turn_id IN (SELECT id FROM turns WHERE resource_id = ? AND thread_id = ?)"
        rows = db.execute(
            f"SELECT path, existed, before, size, after, turn_id FROM files WHERE {turns} ORDER BY turn_id",
            (turn_id, *_thread_keys(thread)),
        ).fetchall()
        plan: dict[str, tuple[bytes | None, bool, bool, bool]] = {}
        last_after: dict[str, str] = {}
        for stored, existed, before, size, after, _ in rows:
            path = _name(stored)
            if path not in plan:
                plan[path] = (before, bool(existed), False, before is not None or not existed or size == 0)
            last_after[path] = after
        for path, (before, existed, _, kept) in list(plan.items()):
            try:
                now = _digest(self.tree.read_bytes(path))
            except FileNotFoundError:
                now = None
            except OSError:  # a symlink now, or something else than a file: not what the turn left
                now = ""
            plan[path] = (before, existed, now != last_after[path], kept)
        return plan

    @staticmethod
    async def conversation_before(checkpoint: Checkpoint, memory: StoredMemory) -> list[Message]:
        """The messages of ``checkpoint``'s thread stored before its turn began (summaries left out): the
        conversation ``/rewind`` starts a new thread from."""
        stored = await memory.messages(checkpoint.thread)
        return [row.message for row in stored if row.created_at < checkpoint.started_at and row.kind == "message"]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


_OF_THREAD = " WHERE resource_id = ? AND thread_id = ?"
_AND_THREAD = " AND resource_id = ? AND thread_id = ?"


def _thread_keys(thread: ThreadRef | None) -> tuple[str, ...]:
    return () if thread is None else (thread.resource_id, thread.thread_id)


def _name(stored: bytes | str) -> str:
    """A kept path as the file system names it (stored as its bytes)."""
    return os.fsdecode(stored)


def _reason(error: OSError) -> str:
    """Why a file could not be put back, in words."""
    return str(error) if isinstance(error, PathRefused) else (error.strerror or str(error))
