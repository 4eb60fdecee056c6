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
``MAX_FOLDERS`` folders looked at. Reading config runs nothing, so this
``git config --list`` is the one git Cortana starts outside the kernel's
sandbox (``cortana.sandbox``); every other runs inside it, so a program a
repository names that this misses still runs confined.
``tests/security/test_safe_git.py`` runs real git against a hostile config.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ALWAYS", "NEUTRAL", "safe_git_environment"]

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
MAX_FOLDERS = 200_000
"""The most folders looked at for nested repositories (a big ``node_modules`` holds some 20,000)."""
_GIT_TIMEOUT_S = 10.0


def safe_git_environment(folder: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with config overrides that switch off the programs the repositories in ``folder`` name.

    Args:
        folder: the workspace: its repository, every one nested in it, and their submodules.
        environ: the environment to start from (its own ``GIT_CONFIG_COUNT`` entries are kept, ours after).
    """
    environment = dict(environ)
    listed = [entry for found in _repositories(folder) for entry in _config(found, environment)]
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
    stack = [folder]
    while stack and looked < MAX_FOLDERS:
        current = stack.pop()
        looked += 1
        try:
            entries = sorted(os.scandir(current), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name == ".git":
                if current != folder:
                    found.append((Path(current), False))
                if _is_folder(entry):
                    found += [(module, True) for module in _modules(Path(entry.path))]
            elif _is_folder(entry):
                stack.append(Path(entry.path))
    return found


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


def _config(found: tuple[Path, bool], environment: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(scope, key, value) of every config entry git sees in a repository (reading config runs nothing): ``found``
    is its folder, or its git folder (a submodule's)."""
    path, is_git_folder = found
    location = ["--git-dir", str(path)] if is_git_folder else []
    try:
        done = subprocess.run(
            ["git", *location, "config", "--list", "--show-scope", "-z"],
            cwd=path,
            env={**environment, "GIT_CONFIG_COUNT": "0"},  # what the files say, not what was overridden
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    entries: list[tuple[str, str, str]] = []
    for scope, entry in zip(fields[::2], fields[1::2], strict=False):
        key, _, value = entry.partition("\n")
        if key:
            entries.append((scope, key, value))
    return entries
