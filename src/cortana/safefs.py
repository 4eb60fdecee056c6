"""The one way Cortana itself reads, writes and removes files in a folder it does not trust: following no link.

A workspace is shared with the commands the model runs: a confined command
may write anywhere in it, so between Cortana's check of a path and its write
the command can swap a file for a link to ``~/.ssh/authorized_keys``, or a
folder for a link to another folder. ``Path.write_text``, ``unlink`` and
``mkdir`` would follow such a link out. Everything Cortana writes, restores or
deletes in a workspace (the file tools, the fix's apply, an editor turn's
put-back, ``/undo`` and ``/rewind``, teach mode's ``SKILL.md``, ``cortana
init``'s ``AGENTS.md``, the code graph's ignore and exclude files, the fix
workflow's scratch copy) goes through :class:`SafeTree`:

- the path is taken apart lexically: an absolute path must lie under the
  root, and ``..`` is refused, never resolved;
- each folder is opened from the one before with ``O_NOFOLLOW |
  O_DIRECTORY``, the last component with ``O_NOFOLLOW``, so a link anywhere
  on the way is an error, never followed (``openat2``'s ``RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS`` would do the same in one call on Linux 5.6+; walking
  the components works on every POSIX system Cortana runs on);
- a write goes to a new file beside the target and is renamed over it
  (``renameat`` replaces a name, it never writes through it): a partial file
  is never seen, and a target that has another name elsewhere (a hard link,
  such as the ones uv and pnpm make into their caches) is not changed
  through that name;
- only regular files are read or replaced: a link, a pipe or a device where a
  file should be is refused with the reason (:class:`PathRefused`), and the
  caller says which files it refused and why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePath

__all__ = ["PathRefused", "SafeTree"]

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(OSError):
    """A path Cortana will not read or write in a folder: it goes through a link, leaves the folder, or is not a
    regular file. ``shown`` is the path as the caller named it; the message says why and what to do."""

    def __init__(self, shown: str, reason: str, code: int = errno.EPERM) -> None:
        super().__init__(code, f"'{shown}' {reason}")
        self.shown = shown
        self.reason = reason

    def __str__(self) -> str:
        return str(self.strerror)


class SafeTree:
    """A folder whose files Cortana reads, writes and removes without following a link (see the module docstring).

    Args:
        root: the folder; resolved once here (the user chose it: a link above it is theirs). Everything below it is
            walked one component at a time.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()

    # -- paths --------------------------------------------------------------------------------------------------------

    def parts(self, path: PurePath | str) -> tuple[str, ...]:
        """``path`` (relative to the root, or absolute under it) as its components, checked lexically.

        Raises:
            PathRefused: it is outside the root, names the root itself, or has a ``..`` or a NUL byte.
        """
        shown = os.fspath(path)
        if "\x00" in shown:
            raise PathRefused(shown[:200], "contains a NUL byte; give a plain path", errno.EINVAL)
        candidate = PurePath(shown)
        if candidate.is_absolute():
            try:
                candidate = candidate.relative_to(self.root)
            except ValueError:
                raise PathRefused(shown, f"is outside {self.root}; Cortana writes only inside it") from None
        parts = candidate.parts
        if ".." in parts:
            raise PathRefused(shown, "goes up with '..'; give the path inside the folder as it is", errno.EINVAL)
        if not parts:
            raise PathRefused(shown, "is the folder itself, not a file", errno.EISDIR)
        return parts

    def shown(self, path: PurePath | str) -> str:
        """``path`` relative to the root, for messages."""
        try:
            return os.path.join(*self.parts(path))
        except PathRefused:
            return os.fspath(path)

    # -- folders ------------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def folder(self, parts: tuple[str, ...], shown: str, *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder ``parts`` (made, with the folders above it, when ``create``), each component
        opened from the one before without following a link; closed when the block ends."""
        try:
            current = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise PathRefused(shown, f"cannot be reached: {self.root} cannot be opened ({exc.strerror})") from None
        try:
            for index, part in enumerate(parts):
                try:
                    inner = _enter(current, part, create)
                except FileNotFoundError:
                    raise
                except OSError as exc:
                    raise self._refusal(exc, current, part, shown, parts[: index + 1]) from None
                os.close(current)
                current = inner
            yield current
        finally:
            os.close(current)

    # -- reading ------------------------------------------------------------------------------------------------------

    def open_regular(self, path: PurePath | str, *, shown: str | None = None) -> tuple[int, os.stat_result]:
        """A read-only descriptor of the regular file ``path``, and its stat (the caller closes it).

        Raises:
            FileNotFoundError: it (or a folder above it) does not exist.
            PathRefused: a link on the way or at the end, or not a regular file.
        """
        shown = shown if shown is not None else os.fspath(path)
        *folders, name = self.parts(path)
        with self.folder(tuple(folders), shown) as parent:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=parent)  # NONBLOCK: a FIFO
            except OSError as exc:
                raise self._refusal(exc, parent, name, shown, self.parts(path)) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a pipe, device or socket)"
            raise PathRefused(shown, f"is {kind}; only regular files are read", errno.EISDIR)
        return fd, info

    def read_bytes(self, path: PurePath | str, limit: int | None = None) -> bytes:
        """The content of the regular file ``path`` (at most ``limit`` bytes when given)."""
        fd, _ = self.open_regular(path)
        with os.fdopen(fd, "rb") as handle:
            return handle.read() if limit is None else handle.read(limit)

    def lstat(self, path: PurePath | str) -> os.stat_result | None:
        """What ``path`` itself is (a link is not followed); None when it does not exist.

        Raises:
            PathRefused: a folder above it is a link.
        """
        shown = os.fspath(path)
        *folders, name = self.parts(path)
        try:
            with self.folder(tuple(folders), shown) as parent:
                return os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None

    # -- writing ------------------------------------------------------------------------------------------------------

    def write_bytes(
        self,
        path: PurePath | str,
        data: bytes,
        *,
        exclusive: bool = False,
        mode: int | None = None,
        shown: str | None = None,
    ) -> None:
        """Make the regular file ``path`` hold ``data``: its folders made as needed, the file replaced by rename.

        Args:
            exclusive: refuse (``FileExistsError``) when something is there already, a file made meanwhile included.
            mode: the file's permissions; default: the old file's, else 0o644 (a new file's less the umask).
            shown: the path as the caller names it, for messages.

        Raises:
            PathRefused: a link on the way or at the end, something not a regular file there, or a read-only file.
        """
        shown = shown if shown is not None else os.fspath(path)
        if exclusive:
            with os.fdopen(self.create(path, mode=mode if mode is not None else 0o644, shown=shown), "wb") as handle:
                handle.write(data)
            return
        parts = self.parts(path)
        *folders, name = parts
        with self.folder(tuple(folders), shown, create=True) as parent:
            old = self._replaceable(parent, name, shown)
            partial = f".{name[:200]}.cortana-{secrets.token_hex(4)}"
            created = (mode if mode is not None else 0o644) if old is None else 0o600  # a new file: less the umask
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, created, dir_fd=parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    if old is not None:  # the old file's permissions, exactly (or the ones asked for)
                        os.fchmod(handle.fileno(), mode if mode is not None else stat.S_IMODE(old.st_mode))
                self._replaceable(parent, name, shown)  # again, just before: swapped meanwhile is refused
                os.replace(partial, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(partial, dir_fd=parent)
                raise

    def create(self, path: PurePath | str, *, mode: int = 0o644, shown: str | None = None) -> int:
        """A write descriptor of the new regular file ``path`` (its folders made as needed; the caller closes it).

        Raises:
            FileExistsError: something is there already (made meanwhile included; a symlink is never followed).
            PathRefused: a symlink on the way.
        """
        shown = shown if shown is not None else os.fspath(path)
        parts = self.parts(path)
        *folders, name = parts
        with self.folder(tuple(folders), shown, create=True) as parent:
            try:
                return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=parent)
            except FileExistsError:
                raise
            except OSError as exc:
                raise self._refusal(exc, parent, name, shown, parts) from None

    def write_text(self, path: PurePath | str, text: str, *, exclusive: bool = False) -> None:
        """:meth:`write_bytes` of ``text`` in UTF-8."""
        self.write_bytes(path, text.encode("utf-8"), exclusive=exclusive)

    def unlink(self, path: PurePath | str, *, missing_ok: bool = True) -> bool:
        """Remove the file ``path`` (a link there is removed itself, never what it points at); whether it was there.

        Raises:
            PathRefused: a folder above it is a link, or it is a folder.
        """
        shown = os.fspath(path)
        parts = self.parts(path)
        *folders, name = parts
        try:
            with self.folder(tuple(folders), shown) as parent:
                try:
                    os.unlink(name, dir_fd=parent)
                except IsADirectoryError:
                    raise PathRefused(shown, "is a folder; only files are removed", errno.EISDIR) from None
                except OSError as exc:
                    if exc.errno in (errno.EISDIR, errno.EPERM) and _is_folder(parent, name):
                        raise PathRefused(shown, "is a folder; only files are removed", errno.EISDIR) from None
                    raise
                return True
        except FileNotFoundError:
            if not missing_ok:
                raise
            return False

    # -- helpers ------------------------------------------------------------------------------------------------------

    def _replaceable(self, parent: int, name: str, shown: str) -> os.stat_result | None:
        """What is at ``name`` now, when it may be replaced (None: nothing is); else refused with the reason."""
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(info.st_mode):
            raise PathRefused(shown, f"is a symlink{_pointing(parent, name)}; Cortana does not write through symlinks")
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a pipe, device or socket)"
            raise PathRefused(shown, f"is {kind}; only regular files are written", errno.EISDIR)
        if not os.access(name, os.W_OK, dir_fd=parent, follow_symlinks=False):
            raise PathRefused(shown, "is read-only; make it writable first if it should change", errno.EACCES)
        return info

    def _refusal(self, exc: OSError, parent: int, part: str, shown: str, reached: tuple[str, ...]) -> OSError:
        """An ``OSError`` from opening ``part`` in ``parent`` as the reason the caller reads."""
        where = os.path.join(*reached)
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
            try:
                is_link = stat.S_ISLNK(os.stat(part, dir_fd=parent, follow_symlinks=False).st_mode)
            except OSError:
                is_link = False
            if is_link:
                return PathRefused(
                    shown,
                    f"goes through a symlink ({where}{_pointing(parent, part)}); Cortana does not follow symlinks here",
                )
            return PathRefused(shown, f"goes through {where}, which is not a folder", errno.ENOTDIR)
        if exc.errno == errno.ENXIO:
            return PathRefused(shown, "is not a regular file (a pipe with no reader)", errno.ENXIO)
        return exc


def _enter(parent: int, part: str, create: bool) -> int:
    """The folder ``part`` of ``parent``, opened without following a link; made first when missing and ``create``
    (one made meanwhile by someone else is opened, and checked, the same way)."""
    try:
        return os.open(part, _DIRECTORY_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(part, 0o777, dir_fd=parent)
    return os.open(part, _DIRECTORY_FLAGS, dir_fd=parent)


def _pointing(parent: int, name: str) -> str:
    """`` to TARGET`` for a link (shown escaped by whoever prints it), or ""."""
    try:
        target = os.readlink(name, dir_fd=parent)
    except OSError:
        return ""
    return f" -> {target[:200]!r}"


def _is_folder(parent: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False
