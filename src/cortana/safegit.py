"""Git that runs no program a repository's own config names: the environment for every git Cortana starts.

A folder's ``.git/config`` arrives with it (an archive, a shared drive, a
copied project) and can name programs that git runs on its own:
``core.fsmonitor`` on ``git status`` and ``git ls-files``, hooks,
``core.pager``, ``diff.external``, textconv and filter drivers, aliases,
``core.sshCommand``, credential helpers. :func:`safe_git_environment` reads
the repository's config (``git config --list`` only reads files) and returns
an environment whose ``GIT_CONFIG_COUNT`` entries, which outrank every
config file, put back the user's own value of each such key (from their
global or system config) or a harmless one: ``false``, ``cat``, or an empty
value that makes git say it cannot run it. Every git started with it, by
Cortana itself or by a program it starts (graphify, a command the model
runs), inherits it. Besides what the repository sets, hooks
(``core.hooksPath``), fsmonitor and the ``ext::`` transport are always
switched off, and a bare repository is only used when named
(``safe.bareRepository=explicit``: a bare repository hidden in a folder is
never picked up by a ``cd`` into it).

The repositories whose config is read are every one inside the folder, at
any depth and in any folder (``node_modules/`` and virtual environments
included), with their submodules (``.git/modules/``), up to
``MAX_FOLDERS`` folders looked at. Reading config runs no program of the
repository's, but ``git`` comes from the user's ``PATH``, which may lead into
the folder (an activated virtual environment): given the workspace's
sandbox, the listing runs confined, reading only, in one process for every
repository. Every git Cortana starts runs confined, so a program a repository
names that this misses still runs inside the sandbox.
``tests/security/test_safe_git.py`` runs real git against a hostile config.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from cortana.safefs import SafeTree
from cortana.sandbox.policy import Sandbox
from cortana.sandbox.processes import helper_python, keeper_argv, run_kept

__all__ = ["ALWAYS", "NEUTRAL", "exclude_from_git", "git_folder", "safe_git_environment"]

EXCLUDE_HEADER = "# Cortana's own files (the code graph): kept out of git status"
"""The line before the patterns :func:`exclude_from_git` adds to ``.git/info/exclude``."""
MAX_EXCLUDE_BYTES = 1 << 20
"""A ``.git/info/exclude`` larger than this is left alone (it is not one a person wrote)."""

NEUTRAL: dict[str, str] = {
    "core.fsmonitor": "false",
    "core.hookspath": os.devnull,
    "core.pager": "cat",
    "pager.*": "false",
    "core.editor": "false",
    "sequence.editor": "false",
    "core.sshcommand": "ssh",
    "core.askpass": "",
    "core.gitproxy": "",
    "core.alternaterefscommand": "",
    "credential.helper": "",
    "credential.*.helper": "",
    "diff.external": "",
    "diff.*.textconv": "cat",
    "diff.*.command": "",
    "filter.*.clean": "cat",
    "filter.*.smudge": "cat",
    "filter.*.process": "",
    "merge.*.driver": "",
    "alias.*": "",
    "remote.*.uploadpack": "git-upload-pack",
    "remote.*.receivepack": "git-receive-pack",
    "remote.*.vcs": "",
    "remote.*.proxy": "",
    "http.proxy": "",
    "http.*.proxy": "",
    "gpg.program": "gpg",
    "gpg.openpgp.program": "gpg",
    "gpg.x509.program": "gpgsm",
    "gpg.ssh.program": "ssh-keygen",
    "gpg.ssh.defaultkeycommand": "",
    "submodule.*.update": "checkout",
    "trailer.*.command": "",
    "trailer.*.cmd": "",
    "web.browser": "",
    "browser.*.cmd": "",
    "browser.*.path": "",
    "man.*.cmd": "",
    "man.*.path": "",
    "difftool.*.cmd": "",
    "mergetool.*.cmd": "",
    "protocol.allow": "user",
    "protocol.*.allow": "user",
    "uploadpack.packobjectshook": "",
}
"""Config keys (lowercase; ``*`` a subsection) that name a program git runs, or where it connects, and the
value that replaces a repository's own when the user's config has none."""
ALWAYS: dict[str, str] = {
    "core.fsmonitor": "false",
    "core.hookspath": os.devnull,
    "protocol.ext.allow": "never",
    "safe.barerepository": "explicit",
}
"""Set whether or not the repository sets them: hooks in ``.git/hooks`` need no config to run, and a bare
repository found by walking up from a folder would bring a config of its own."""
MULTI_VALUED = ("credential.helper", "credential.*.helper")
"""Keys git collects into a list: an empty value first clears what came before, then the user's are added back."""
CACHE_SECONDS = 60.0
"""How long a listing of the same config files (same size and time of change) is reused: a file a config
includes is read again at least this often."""
MAX_FOLDERS = 200_000
"""The most folders looked at for nested repositories (a big ``node_modules`` holds some 20,000)."""
_GIT_TIMEOUT_S = 10.0
_cache: dict[tuple[object, ...], tuple[float, list[tuple[str, str, str]]]] = {}
_cache_lock = threading.Lock()


def safe_git_environment(folder: Path, environ: Mapping[str, str], *, sandbox: Sandbox | None = None) -> dict[str, str]:
    """``environ`` with config overrides that switch off the programs the repositories in ``folder`` name.

    Args:
        folder: the workspace: its repository, every one nested in it, and their submodules.
        environ: the environment to start from (its own ``GIT_CONFIG_COUNT`` entries are kept, ours after).
        sandbox: the git that reads the config runs confined by it (reading only).
    """
    environment = dict(environ)
    listed = _configs(_repositories(folder), environment, sandbox)
    users: dict[str, list[str]] = {}
    repository_keys: dict[str, None] = {}
    for scope, key, value in listed:
        if scope in ("system", "global"):
            users.setdefault(key, []).append(value)
        elif scope in ("local", "worktree") and _neutral(key) is not None:
            repository_keys[key] = None
    overrides: list[tuple[str, str]] = []
    for key in dict.fromkeys([*ALWAYS, *repository_keys]):
        neutral = ALWAYS.get(key) or _neutral(key) or ""
        own = users.get(key, [])
        if any(fnmatch.fnmatchcase(_lower_name(key), pattern) for pattern in MULTI_VALUED):
            overrides += [(key, ""), *((key, value) for value in own)]
        else:
            overrides.append((key, own[-1] if own else neutral))
    return _with_overrides(environment, overrides)


def _neutral(key: str) -> str | None:
    lowered = _lower_name(key)
    for pattern, value in NEUTRAL.items():
        if fnmatch.fnmatchcase(lowered, pattern):
            return value
    return None


def _lower_name(key: str) -> str:
    """``section.Sub.Section.name`` with its section and name lowercased (git keeps a subsection's case)."""
    section, _, rest = key.partition(".")
    middle, _, name = rest.rpartition(".")
    return f"{section.lower()}.{middle}.{name.lower()}" if middle else f"{section.lower()}.{name.lower()}"


def _with_overrides(environment: dict[str, str], overrides: list[tuple[str, str]]) -> dict[str, str]:
    try:
        count = int(environment.get("GIT_CONFIG_COUNT", "0") or 0)
    except ValueError:
        count = 0
    for key, value in overrides:
        environment[f"GIT_CONFIG_KEY_{count}"] = key
        environment[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    environment["GIT_CONFIG_COUNT"] = str(count)
    return environment


def _repositories(folder: Path) -> list[tuple[Path, bool]]:
    """(path, is a git folder) of ``folder`` (whose repository may be above it), every folder below it that holds a
    ``.git``, and every submodule's git folder (``.git/modules/...``)."""
    found: list[tuple[Path, bool]] = [(folder, False)]
    looked = 0
    top = str(folder)
    stack = [top]
    while stack and looked < MAX_FOLDERS:
        current = stack.pop()
        looked += 1
        try:
            scan = os.scandir(current)
        except OSError:
            continue
        with scan:
            for entry in scan:
                if entry.name == ".git":
                    if current != top:
                        found.append((Path(current), False))
                    if _is_folder(entry):
                        found += [(module, True) for module in _modules(Path(entry.path))]
                elif _is_folder(entry):
                    stack.append(entry.path)
    return [found[0], *sorted(found[1:])]  # in a stable order: the same folder lists the same way


def _modules(git_folder: Path) -> list[Path]:
    """The git folders of a repository's submodules, nested ones included (``modules/a/modules/b``)."""
    found: list[Path] = []
    stack = [git_folder / "modules"]
    while stack and len(found) < MAX_FOLDERS:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        names = {entry.name for entry in entries}
        if {"HEAD", "config"} <= names and current != git_folder / "modules":
            found.append(current)
            stack.append(current / "modules")
            continue
        stack += [Path(entry.path) for entry in entries if _is_folder(entry)]
    return found


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


_LIST_CONFIGS = """
import subprocess, sys
for path, kind in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        done = subprocess.run(
            ["git", *(["--git-dir", path] if kind == "g" else []), "config", "--list", "--show-scope", "-z"],
            cwd=path, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False,
        )
        out = done.stdout
    except (OSError, subprocess.SubprocessError):
        out = b""
    sys.stdout.buffer.write(len(out).to_bytes(8, "big") + out)
"""
"""Lists every repository's config in one confined process (a program Cortana starts per repository would cost a
helper's start each)."""


def _configs(
    found: list[tuple[Path, bool]], environment: Mapping[str, str], sandbox: Sandbox | None
) -> list[tuple[str, str, str]]:
    """(scope, key, value) of every config entry git sees in each repository (reading config runs nothing)."""
    environment = {**environment, "GIT_CONFIG_COUNT": "0"}  # what the files say, not what was overridden
    key = (tuple(found), _fingerprint(found, environment), sandbox is not None and sandbox.mode is not None)
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
    entries = _read_configs(found, environment, sandbox)
    with _cache_lock:
        if len(_cache) >= 64:
            _cache.clear()
        _cache[key] = (time.monotonic(), entries)
    return entries


def _fingerprint(found: list[tuple[Path, bool]], environment: Mapping[str, str]) -> tuple[object, ...]:
    """What the config files git reads look like now (size and time of change): a changed file is a new listing."""
    home = environment.get("HOME") or os.path.expanduser("~")
    xdg = environment.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = [Path("/etc/gitconfig"), Path(home, ".gitconfig"), Path(xdg, "git", "config")]
    for path, is_git_folder in found:
        folders = [path] if is_git_folder else [path / ".git", *_gitfile_target(path / ".git")]
        for folder in folders:
            files += [folder, folder / "config", folder / "config.worktree", folder / "commondir"]
    stamps: list[object] = []
    for file in files:
        try:
            info = os.stat(file)
        except OSError:
            stamps.append(None)
            continue
        stamps.append((info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(stamps)


def _gitfile_target(dot_git: Path) -> list[Path]:
    """The git folder a ``.git`` file points at (a submodule's checkout, a worktree), and its common folder."""
    try:
        if not dot_git.is_file():
            return []
        line = dot_git.read_text(encoding="utf-8", errors="replace")[:4096].strip()
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    target = (dot_git.parent / line.removeprefix("gitdir:").strip()).resolve()
    return [target, (target / "../..").resolve()]


def _read_configs(
    found: list[tuple[Path, bool]], environment: Mapping[str, str], sandbox: Sandbox | None
) -> list[tuple[str, str, str]]:
    if sandbox is None or sandbox.mode is None:
        return [entry for item in found for entry in _config(item, environment)]
    arguments = [value for path, is_git in found for value in (str(path), "g" if is_git else "w")]
    with sandbox.confined(workspace=False) as confined:  # git from the user's PATH, which may be the folder's
        try:
            done = run_kept(
                confined.argv([helper_python(), "-I", "-S", "-c", _LIST_CONFIGS, *arguments]),
                env=confined.environment(environment),
                timeout=_GIT_TIMEOUT_S * 3,
            )
        except (OSError, subprocess.SubprocessError):
            return []
    entries: list[tuple[str, str, str]] = []
    output = done.stdout
    while len(output) >= 8:
        size = int.from_bytes(output[:8], "big")
        entries += _entries(output[8 : 8 + size])
        output = output[8 + size :]
    return entries


def _config(found: tuple[Path, bool], environment: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(scope, key, value) of every config entry git sees in a repository: ``found`` is its folder, or its git
    folder (a submodule's)."""
    path, is_git_folder = found
    location = ["--git-dir", str(path)] if is_git_folder else []
    try:
        done = run_kept(
            keeper_argv(["git", *location, "config", "--list", "--show-scope", "-z"]),
            cwd=path,
            env=dict(environment),
            timeout=_GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return _entries(done.stdout)


def _entries(output: bytes) -> list[tuple[str, str, str]]:
    fields = output.decode("utf-8", "surrogateescape").split("\0")
    entries: list[tuple[str, str, str]] = []
    for scope, entry in zip(fields[::2], fields[1::2], strict=False):
        key, _, value = entry.partition("\n")
        if key:
            entries.append((scope, key, value))
    return entries


def exclude_from_git(root: Path, names: Sequence[str]) -> list[str]:
    """Keep Cortana's own files at the top of ``root`` (``graphify-out/``, ``.graphifyignore``) out of ``git status``:
    the ``names`` not yet there are added to the ``info/exclude`` of the repository that holds ``root`` (``root``
    itself, a folder above it, or a worktree's or submodule's git folder), as paths from the repository's top
    (``/app/graphify-out/``). Only this clone reads that file: nothing is committed, and the user's ``.gitignore``
    is not touched. Returns the patterns added.

    The repository is found as git finds it (:func:`git_folder`): a ``.git`` that is a symlink is left alone, and a
    ``.git`` file is followed only to a folder that is a git folder. ``info/exclude`` is written only where it is a
    regular file (or a new one), opened without following links; a folder that is no repository is left alone.
    """
    found = git_folder(root)
    if found is None:
        return []
    common, top = found
    try:
        inside = Path(os.path.abspath(root)).relative_to(top).as_posix()
    except ValueError:
        return []
    prefix = "" if inside == "." else inside.strip("/") + "/"
    tree = SafeTree(common)  # Cortana's one writer: info/ swapped for a symlink is refused, never followed
    path = "info/exclude"
    try:
        found_file = tree.lstat(path)
        if found_file is not None and (not stat.S_ISREG(found_file.st_mode) or found_file.st_size > MAX_EXCLUDE_BYTES):
            return []
        text = tree.read_bytes(path, MAX_EXCLUDE_BYTES).decode("utf-8", "replace") if found_file is not None else ""
    except OSError:
        return []
    present = {line.strip() for line in text.splitlines()}
    wanted = [f"/{prefix}{name.strip('/')}" + ("/" if name.endswith("/") else "") for name in names]
    missing = [pattern for pattern in wanted if pattern not in present]
    if not missing:
        return []
    block = ([] if EXCLUDE_HEADER in present else [EXCLUDE_HEADER]) + missing
    lead = "" if not text or text.endswith("\n") else "\n"
    try:
        tree.write_text(path, text + lead + "\n".join(block) + "\n")
    except OSError:
        return []
    return missing


def git_folder(root: Path) -> tuple[Path, Path] | None:
    """The git folder whose ``info/exclude`` applies to ``root``, and the top of the work tree holding ``root``; None
    when ``root`` is in no repository.

    From ``root`` upward, the first ``.git``: a folder is the repository's own; a file (``gitdir: PATH``, a
    worktree's or submodule's) leads to a folder that must hold ``HEAD``, and a worktree's (with ``commondir``) to
    the main repository's, which must hold ``HEAD`` and ``objects/``. A ``.git`` that is a symlink or anything else,
    or a file that leads elsewhere, ends the search with None: Cortana writes nowhere a repository's own files
    point it, unless git would read it there.
    """
    folder = Path(os.path.abspath(root))
    for _ in range(_MOST_LEVELS):
        dot = folder / ".git"
        try:
            found = os.lstat(dot)
        except OSError:
            found = None
        if found is not None:
            if stat.S_ISDIR(found.st_mode):
                return dot, folder
            if not stat.S_ISREG(found.st_mode) or found.st_size > _MOST_GITFILE_BYTES:
                return None
            return _linked_git_folder(dot, folder)
        if folder.parent == folder:
            return None
        folder = folder.parent
    return None


_MOST_LEVELS = 64
"""The most folders :func:`git_folder` climbs."""
_MOST_GITFILE_BYTES = 4096
"""A ``.git`` file larger than this is not git's."""


def _linked_git_folder(dot: Path, top: Path) -> tuple[Path, Path] | None:
    """Where a ``.git`` file (``gitdir: PATH``) leads, when that is a git folder (see :func:`git_folder`)."""
    try:
        line = dot.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    linked = Path(os.path.abspath(top / line.removeprefix("gitdir:").strip()))
    if not (linked / "HEAD").is_file():
        return None
    try:
        common_name = (linked / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return linked, top  # a submodule's git folder: its own info/exclude
    except OSError:
        return None
    common = Path(os.path.abspath(linked / common_name))
    if not (common / "HEAD").is_file() or not (common / "objects").is_dir():
        return None
    return common, top
