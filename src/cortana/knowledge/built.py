"""Which graph files Cortana built itself: a graph.json that arrived with a folder is rebuilt, never read.

A folder can hold a ``graphify-out/graph.json`` (and ``GRAPH_REPORT.md``)
that nobody built from its code: copied in an archive, or written to steer
the assistant, with labels made to read as instructions. After each graph it
builds, :class:`BuildRecords` writes the SHA-256 of graph.json and the report
to a record in the user's cache folder (``~/.cache/cortana/graphs/``), keyed
by the folder's real path; a folder's own files cannot write there. The
graph reads a graph.json, or the report, only when its hash is the recorded
one; anything else is rebuilt first.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path

from cortana.config import cache_dir

__all__ = ["BuildRecords", "file_digest"]

_CHUNK = 1 << 20


def file_digest(path: Path) -> str | None:
    """The SHA-256 of the regular file at ``path``, or None when there is none (or it cannot be read)."""
    digest = hashlib.sha256()
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not hang the read
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            while chunk := handle.read(_CHUNK):  # in pieces: a graph can be hundreds of MB
                digest.update(chunk)
        except OSError:
            return None
    return digest.hexdigest()


class BuildRecords:
    """The record of what Cortana built for one folder's graph.

    Args:
        root: the folder whose graph it is (its real path keys the record).
        folder: where records are kept (default: ``graphs/`` in Cortana's cache folder).
    """

    def __init__(self, root: Path, folder: Path | None = None) -> None:
        self.root = root.resolve()
        key = hashlib.sha256(str(self.root).encode("utf-8", "surrogateescape")).hexdigest()[:32]
        self.path = (folder or cache_dir() / "graphs") / f"{key}.json"

    def remember(self, files: dict[str, Path]) -> None:
        """Record the digests of ``files`` (name -> path) as built by Cortana now; a missing file is left out."""
        digests = {name: digest for name, path in files.items() if (digest := file_digest(path)) is not None}
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".record-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump({"root": str(self.root), "files": digests}, file)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def built(self, name: str, path: Path) -> bool:
        """Whether the file at ``path`` is the one Cortana recorded under ``name``."""
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if not isinstance(record, dict) or record.get("root") != str(self.root):
            return False
        files = record.get("files")
        expected = files.get(name) if isinstance(files, dict) else None
        return isinstance(expected, str) and expected == file_digest(path)

    @property
    def building_file(self) -> Path:
        """Where a build under way says so: the process building it and when it started."""
        return self.path.with_suffix(".building")

    def mark_building(self) -> None:
        """Say that this process builds the graph now (``cortana doctor`` in another one reads it)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".building-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump({"pid": os.getpid(), "started": time.time()}, file)
            os.replace(temporary, self.building_file)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def clear_building(self) -> None:
        """The build of this process is over."""
        if self.building_since(own=True) is not None:
            self.building_file.unlink(missing_ok=True)

    def building_since(self, *, own: bool = False) -> float | None:
        """When a build still under way in another process (this one's, with ``own``) started; None when none is.

        A record left by a process that has exited (killed mid-build) counts as no build.
        """
        try:
            record = json.loads(self.building_file.read_text(encoding="utf-8"))
            pid, started = int(record["pid"]), float(record["started"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if (pid == os.getpid()) != own:
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, another user's
        return started
