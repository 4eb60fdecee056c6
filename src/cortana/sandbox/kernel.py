"""Confinement by the Linux kernel, applied by a process to itself just before it runs a command.

This file imports nothing of Cortana's: it runs inside small helper processes
(``python -I -S``) that Cortana starts, never in Cortana's own (threaded)
process, where changing namespaces or credentials would be unsafe:

- the keeper (``keeper.py``), which every process Cortana starts runs under,
  applies it in the child it forks for the program;
- ``python -I -S kernel.py probe FOLDER`` tries every step in a child (a write
  into ``FOLDER``, outside its sandbox, must be refused) and prints what this
  kernel can do, as JSON.

A *policy* is a dict (JSON on the command line): ``writable`` (folders and
files a command may change: the workspace, the fix workflow's scratch copy, a
private temporary folder), ``read_only`` (paths inside those that stay
read-only: ``.git/``, ``cortana.yml``...), ``network`` (reach other machines),
and ``mode``:

``namespaces``
    A new user namespace (no capability outside it, whoever runs Cortana),
    with a new mount, network and IPC namespace. The network namespace holds
    only loopback, brought up, so a test suite may serve on loopback while
    nothing outside it (the host's own loopback included) can be reached.
    In the mount namespace the read-only paths are bind-mounted read-only
    (they cannot be renamed or removed either: they are mount points), every
    UNIX socket the machine listens on by path (the Docker daemon, tmux, an
    SSH agent, D-Bus, X11; read from ``/proc/net/unix``) is covered by
    ``/dev/null``, ``/dev/shm`` is a private tmpfs and ``/dev/pts`` a private
    instance. Then Landlock.

``landlock``
    Where user namespaces are not allowed: Landlock alone. A folder holding a
    read-only path cannot itself be granted (a Landlock grant covers a whole
    tree), so its other entries are granted one by one and no new entry can
    be made directly in it. The network is cut by Landlock's TCP rules (ABI 4)
    and a seccomp filter refusing IPv4/IPv6 sockets (UDP too); UNIX sockets by
    path are refused only from Landlock ABI 9 on.

In both, first: the writable folders are walked for files that have another
name outside them (a hard link: uv and pnpm link packages from their shared
caches, an archive can link a file into ``.git/``). Landlock judges the path a
write goes through, not the file, so each such file (or a folder all of whose
files are such, one path for a package linked whole) joins the read-only
paths; past ``MAX_LINKED_BINDS`` of them the command does not run, with the
reason. A confined command cannot make new such links: Landlock refuses a link
from a folder it may not write.

In both: ``no_new_privs``; Landlock grants reading and executing everywhere and
writing only in ``writable`` (with the rights the kernel's ABI has: truncation
from ABI 3, device ioctls from 5, signals and abstract sockets outside the
sandbox refused from 6, UNIX sockets by path from 9); a seccomp filter refuses
``io_uring_setup`` (its requests would bypass the socket filter), the
terminal-injecting ioctls ``TIOCSTI`` and ``TIOCLINUX``, the x32 and 32-bit
system call tables (whose ``socketcall`` cannot be filtered), and every socket
family but ``AF_UNIX``, ``AF_INET`` and ``AF_INET6`` (``AF_VSOCK`` reaches the
host of a VM or WSL2 past any network namespace; netlink, packet, Bluetooth and
the rest are no test suite's business), IP sockets too without a network
namespace. Any step that fails stops the helper with a
message and exit status 126: a command never runs less confined than asked.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import platform
import socket
import stat
import struct
import sys
from typing import Any

__all__ = ["ConfinementError", "confine", "landlock_abi", "main", "probe"]

Policy = dict[str, Any]
"""A policy as the helpers read it (see the module docstring)."""
EXIT_NOT_CONFINED = 126
"""The helper's exit status when confinement could not be set up (the command did not run)."""

# -- system call numbers and constants ----------------------------------------------------------------------------

_MACHINE = platform.machine()
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}.get(_MACHINE)
_SYSCALL = {
    "x86_64": {"socket": 41, "socketpair": 53, "ioctl": 16, "io_uring_setup": 425},
    "aarch64": {"socket": 198, "socketpair": 199, "ioctl": 29, "io_uring_setup": 425},
}.get(_MACHINE, {})
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
MAKE_SYM, REFER, TRUNCATE, IOCTL_DEV, RESOLVE_UNIX = 1 << 12, 1 << 13, 1 << 14, 1 << 15, 1 << 16
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_FS_BY_ABI = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV, 9: RESOLVE_UNIX}
"""The filesystem rights each Landlock ABI adds."""
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights a rule on a file (not a folder) may hold."""
_READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_NEWIPC = 0x00020000, 0x10000000, 0x40000000, 0x08000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
_MS_REC, _MS_PRIVATE, _MS_RELATIME = 16384, 1 << 18, 1 << 21
_ST_TO_MS = {1: _MS_RDONLY, 2: _MS_NOSUID, 4: _MS_NODEV, 8: _MS_NOEXEC, 1024: _MS_NOATIME, 2048: _MS_NODIRATIME,
             4096: _MS_RELATIME}  # fmt: skip
"""statvfs flags -> mount flags: a remount inside a user namespace must keep the flags the mount has."""

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_SIOCSIFFLAGS, _IFF_UP, _IFF_LOOPBACK, _IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40

_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
"""Devices every command may open for writing (``> /dev/null``)."""


class ConfinementError(OSError):
    """A step of confinement failed; the command must not run."""


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _fail(step: str, error: int | None = None) -> ConfinementError:
    code = ctypes.get_errno() if error is None else error
    return ConfinementError(code, f"{step}: {os.strerror(code)}")


# -- Landlock -----------------------------------------------------------------------------------------------------


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none, or switched off at boot)."""
    if _ARCH is None:
        return 0
    version = _libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _LANDLOCK_CREATE_RULESET_VERSION)
    return max(int(version), 0)


def _fs_rights(abi: int) -> int:
    return sum(bits for version, bits in _FS_BY_ABI.items() if abi >= version)


def _landlock(policy: Policy, abi: int, cut_tcp: bool) -> None:
    handled = _fs_rights(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if cut_tcp and abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    if abi >= 6:
        attr: bytes = struct.pack("=QQQ", handled, net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled, net)
    else:
        attr = struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(_LANDLOCK_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), 0)
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        _rule(ruleset, "/", _READ_RIGHTS & handled)
        for device in _DEVICES:
            _rule(ruleset, device, (READ_FILE | WRITE_FILE | TRUNCATE) & handled, missing_ok=True)
        for path, rights in _grants(policy, handled):
            _rule(ruleset, path, rights)
        if _libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)


def _grants(policy: Policy, handled: int) -> list[tuple[str, int]]:
    """(path, rights) for every writable path; in ``landlock`` mode a folder holding a read-only path is granted
    entry by entry, leaving that path (and the folder's own entries list) as they are."""
    read_only = [os.path.realpath(path) for path in policy.get("read_only", ())]
    grants: list[tuple[str, int]] = []
    extra = [*policy.get("devices", ())]
    for path in [*policy.get("writable", ()), *extra]:
        if policy.get("mode") == "namespaces":
            grants.append((path, handled))
        else:
            grants += _split(os.path.realpath(path), read_only, handled)
    return grants


def _split(path: str, read_only: list[str], handled: int) -> list[tuple[str, int]]:
    if os.path.islink(path):
        return []  # what it points at is granted by its own path, or not at all
    inside = [item for item in read_only if item == path or item.startswith(path.rstrip("/") + "/")]
    if not inside:
        return [(path, handled)]
    if path in inside or not os.path.isdir(path):
        return []
    found: list[tuple[str, int]] = []
    for name in sorted(os.listdir(path)):
        found += _split(os.path.join(path, name), inside, handled)
    return found


def _rule(ruleset: int, path: str, rights: int, *, missing_ok: bool = False) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        if missing_ok:
            return
        raise ConfinementError(errno.ENOENT, f"landlock rule: {path} does not exist") from None
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            rights &= _FILE_RIGHTS
        if not rights:
            return
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        if _libc.syscall(_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, attr, 0) != 0:
            raise _fail(f"landlock rule for {path}")
    finally:
        os.close(fd)


# -- seccomp ------------------------------------------------------------------------------------------------------


def _seccomp(cut_ip: bool) -> None:
    """The filter of the module docstring, in classic BPF."""
    load, jump_eq, jump_ge, ret = 0x20, 0x15, 0x35, 0x06
    deny = _SECCOMP_RET_ERRNO | errno.EPERM
    program: list[tuple[int, int, int, int]] = []

    def emit(code: int, true: int = 0, false: int = 0, k: int = 0) -> None:
        program.append((code, true, false, k))

    # (the jump offsets count the instructions between; each block below is written to its own layout)
    emit(load, k=4)  # arch
    emit(jump_eq, 1, 0, _ARCH or 0)
    emit(ret, k=deny)
    emit(load, k=0)  # system call number
    if _MACHINE == "x86_64":
        emit(jump_ge, 0, 1, 0x40000000)  # the x32 table
        emit(ret, k=deny)
    emit(jump_eq, 0, 1, _SYSCALL["io_uring_setup"])
    emit(ret, k=deny)
    emit(jump_eq, 0, 4, _SYSCALL["ioctl"])
    emit(load, k=24)  # args[1], low half: the request
    emit(jump_eq, 1, 0, _TIOCSTI)
    emit(jump_eq, 0, 1, _TIOCLINUX)
    emit(ret, k=deny)
    # socket() and socketpair(): AF_UNIX, and AF_INET/AF_INET6 unless the network is cut here, else refused
    emit(load, k=0)
    emit(jump_eq, 1, 0, _SYSCALL["socket"])
    emit(jump_eq, 0, 6 if cut_ip else 5, _SYSCALL["socketpair"])
    emit(load, k=16)  # args[0], low half: the address family
    if cut_ip:
        emit(jump_eq, 4, 0, _AF_UNIX)
        emit(jump_eq, 2, 0, _AF_INET)
        emit(jump_eq, 1, 0, _AF_INET6)
        emit(ret, k=_SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT)
        emit(ret, k=_SECCOMP_RET_ERRNO | errno.EACCES)
    else:
        emit(jump_eq, 3, 0, _AF_UNIX)
        emit(jump_eq, 2, 0, _AF_INET)
        emit(jump_eq, 1, 0, _AF_INET6)
        emit(ret, k=_SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT)
    emit(ret, k=_SECCOMP_RET_ALLOW)
    filters = b"".join(struct.pack("=HBBI", code, true, false, k) for code, true, false, k in program)
    code_buffer = ctypes.create_string_buffer(filters, len(filters))
    fprog = struct.pack("=HxxxxxxQ", len(program), ctypes.addressof(code_buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog_buffer, 0, 0) != 0:
        raise _fail("seccomp filter")


# -- namespaces and mounts ----------------------------------------------------------------------------------------


def _listening_sockets() -> list[str]:
    """The paths of the UNIX sockets bound in this network namespace (read before leaving it)."""
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return []
    paths = []
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith("/"):
            paths.append(fields[7])
    return list(dict.fromkeys(paths))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if value is None else os.fsencode(value) for value in (source, target, kind)]
    options = None if data is None else data.encode()
    if _libc.mount(encoded[0], encoded[1], encoded[2], flags, options) != 0:
        raise _fail(f"mount {target}")


def _read_only(path: str) -> None:
    """Bind ``path`` onto itself, read-only (keeping the flags a user namespace may not drop)."""
    _mount(path, path, None, _MS_BIND | _MS_REC)
    kept = sum(flag for st, flag in _ST_TO_MS.items() if os.statvfs(path).f_flag & st)
    _mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | kept)


MAX_SCANNED = 400_000
"""The most entries of the writable folders the hard-link scan reads (about 6 us each: 2.4 s); a folder with more
is not confined (the command does not run, with the reason) rather than confined with a hole."""
MAX_LINKED_BINDS = 3_000
"""The most paths with another name outside that are bound read-only one by one (2,000 binds took 0.09 s here,
20,000 took 5.2 s: each mount makes the next slower); past it the command does not run, with the reason."""
_NEUTRAL_FOLDERS = frozenset({"__pycache__"})
"""Folders whose files a read-only parent keeps as they are without harm (Python skips writing its bytecode)."""


class _Scan:
    """The files under the writable folders that have another name outside them (see :func:`linked_out`)."""

    def __init__(self, skip: list[str]) -> None:
        self.skip = skip
        self.seen = 0
        self.inside: dict[tuple[int, int], int] = {}
        """(device, inode) of each file with several names -> how many of them are inside the writable folders."""
        self.names: dict[tuple[int, int], list[str]] = {}
        self.links: dict[tuple[int, int], int] = {}

    def folder(self, path: str) -> tuple[bool, list[str]]:
        """Walk ``path``, noting each file with several names: whether every file below it has several names (so
        the whole folder may be bound, if they all have one outside; at least one such file), and the topmost such
        folders below it."""
        whole, folders, linked = True, [], False
        try:
            entries = list(os.scandir(path))
        except OSError:
            return False, []
        for entry in entries:
            self.seen += 1
            if self.seen > MAX_SCANNED:
                raise ConfinementError(
                    errno.E2BIG,
                    f"the writable folders hold more than {MAX_SCANNED:,} files and folders: too many to check for "
                    "hard links to files outside them. Run the command outside the sandbox (sandbox=false), or in a "
                    "smaller folder",
                )
            if _inside(entry.path, self.skip):
                whole = False  # a read-only path (.git/...) is bound on its own; a name there counts as outside
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    covered, inner = self.folder(entry.path)
                    if covered:
                        folders.append(entry.path)
                        linked = True
                    else:
                        whole = whole and entry.name in _NEUTRAL_FOLDERS
                        folders += inner
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                whole = False
                continue
            if stat.S_ISLNK(info.st_mode):
                continue  # a symlink holds no data of its own (and is never followed here)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
                whole = False
                continue
            key = (info.st_dev, info.st_ino)
            self.inside[key] = self.inside.get(key, 0) + 1
            self.names.setdefault(key, []).append(entry.path)
            self.links[key] = info.st_nlink
            linked = True
        return whole and linked, folders


def linked_out(writable: list[str], read_only: list[str]) -> list[str]:
    """The paths under ``writable`` (outside ``read_only``) whose files have another name outside them: a hard link
    made by uv or pnpm into their shared caches, by an archive, or into ``.git/``. The kernel judges a write by
    the path it is made through, so a confined command could change such a file through the name it may write;
    each is bound read-only instead. A folder all of whose files are such (a package uv linked in whole) is one
    path, not one per file.
    """
    scan = _Scan([os.path.realpath(path) for path in read_only])
    found: list[str] = []
    for root in dict.fromkeys(os.path.realpath(path) for path in writable):
        if not os.path.isdir(root) or os.path.islink(root):
            continue
        found += scan.folder(root)[1]
    outside = {key for key, names in scan.inside.items() if names < scan.links[key]}
    held: set[str] = set()  # folders holding a file whose every name is inside: bound file by file instead
    for key, names in scan.names.items():
        if key not in outside:
            for name in names:
                parent = os.path.dirname(name)
                while parent not in held and parent != os.path.dirname(parent):
                    held.add(parent)
                    parent = os.path.dirname(parent)
    kept = [folder for folder in found if folder not in held]
    prefixes = tuple(folder.rstrip("/") + "/" for folder in kept)
    files = sorted(name for key in outside for name in scan.names[key] if not name.startswith(prefixes))
    return [*kept, *files]


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)


def _namespaces(policy: Policy) -> None:
    uid, gid = os.geteuid(), os.getegid()
    sockets = _listening_sockets()
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWIPC | (0 if policy.get("network") else _CLONE_NEWNET)
    if _libc.unshare(flags) != 0:
        raise _fail("unshare (user namespaces)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing done here reaches the machine's mounts
    writable = [os.path.realpath(path) for path in policy.get("writable", ())]
    devices = []
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777")
        devices.append("/dev/shm")
    try:  # a private pseudo-terminal instance: the user's terminals are not in it
        _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
        _mount("/dev/pts/ptmx", "/dev/ptmx", None, _MS_BIND)
        devices += ["/dev/pts", "/dev/ptmx"]
    except ConfinementError:
        pass  # no pseudo-terminals for this command; nothing of the user's is reachable either way
    for path in sockets:
        if _inside(path, writable) or not os.path.exists(path):
            continue
        try:
            _mount("/dev/null", path, None, _MS_BIND)
        except ConfinementError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                raise
    for path in policy.get("read_only", ()):
        if os.path.lexists(path):
            _read_only(os.path.realpath(path))
    policy["devices"] = devices
    if not policy.get("network"):
        _loopback_up()


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_socket:
        request = struct.pack("16sH22x", b"lo", _IFF_UP | _IFF_LOOPBACK | _IFF_RUNNING)
        fcntl.ioctl(probe_socket.fileno(), _SIOCSIFFLAGS, request)


# -- the whole -----------------------------------------------------------------------------------------------------


def confine(policy: Policy) -> None:
    """Confine this process (and what it runs) by ``policy`` (see the module docstring).

    Raises:
        ConfinementError: a step failed; the caller must not run the command.
    """
    if _ARCH is None:
        raise ConfinementError(errno.ENOSYS, f"confinement is not written for {_MACHINE}")
    abi = landlock_abi()
    if abi < 1:
        raise ConfinementError(errno.ENOSYS, "this kernel has no Landlock")
    policy = dict(policy)
    read_only = [str(path) for path in policy.get("read_only", ())]
    linked = linked_out([str(path) for path in policy.get("writable", ())], read_only)
    if len(linked) > MAX_LINKED_BINDS:
        raise ConfinementError(
            errno.EMLINK,
            f"{len(linked):,} files and folders in the workspace have other names outside it (hard links: uv and "
            "pnpm link packages from their caches this way), more than the sandbox can keep read-only one by one; "
            "a confined command could change the cache's files through them. Make them copies (uv: "
            "UV_LINK_MODE=copy; pnpm: package-import-method=copy), or run the command outside the sandbox",
        )
    policy["read_only"] = [*read_only, *linked]
    mode = policy.get("mode", "namespaces")
    if mode == "namespaces":
        _namespaces(policy)
    elif mode != "landlock":
        raise ConfinementError(errno.EINVAL, f"unknown confinement mode {mode!r}")
    cut_ip = mode == "landlock" and not policy.get("network")
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("no_new_privs")
    _seccomp(cut_ip)
    _landlock(policy, abi, cut_tcp=cut_ip)


def probe(scratch: str) -> dict[str, Any]:
    """What this kernel can do: ``abi`` (Landlock's version, 0 for none), and for each mode in ``modes`` None when
    it confines (tried in a child: a write into ``scratch``, outside its sandbox, must be refused), else why not."""
    found: dict[str, Any] = {"abi": landlock_abi(), "machine": _MACHINE, "modes": {}}
    for mode in ("namespaces", "landlock"):
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read)
            try:
                confine({"mode": mode, "writable": [], "read_only": [], "network": False})
                message = "" if _denied(scratch) else "a write outside the sandbox was not refused"
            except BaseException as exc:  # everything is reported to the parent
                message = str(exc) or type(exc).__name__
            os.write(write, message.encode()[:4000])
            os._exit(0)
        os.close(write)
        chunks = []
        while chunk := os.read(read, 4096):
            chunks.append(chunk)
        os.close(read)
        os.waitpid(child, 0)
        found["modes"][mode] = b"".join(chunks).decode(errors="replace") or None
    return found


def _denied(folder: str) -> bool:
    try:
        fd = os.open(os.path.join(folder, f".cortana-probe-{os.getpid()}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except PermissionError:
        return True
    os.close(fd)
    return False


def main(argv: list[str]) -> int:
    """``probe FOLDER`` (see the module docstring; programs are confined by ``keeper.py``, which imports this)."""
    if argv[1:2] == ["probe"] and len(argv) == 3:
        print(json.dumps(probe(os.path.realpath(argv[2]))))
        return 0
    print("usage: kernel.py probe FOLDER", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
