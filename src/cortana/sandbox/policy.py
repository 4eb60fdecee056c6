"""What a process Cortana starts may touch (a policy), what this kernel can hold it to, and the helpers that do.

Every process Cortana starts for the model or for itself (``run_command``,
the fix workflow's test runs, ``!`` in the terminal, git, graphify, a folder's
MCP server, the linter, hooks) runs under one helper in this folder, the
keeper (``keeper.py``): it confines the process by the kernel (``kernel.py``)
before it runs, gives it a session of its own with no terminal, and ends
everything it started when it ends, or when Cortana does. The keeper runs as a
small Python of its own (``python -I -S``), never as ``preexec_fn`` in
Cortana's threaded process. What a process gets in its environment is
:meth:`Sandbox.child_environment`: Cortana's, less what looks like a secret.

- :class:`KernelSupport` says what this machine's kernel can do, probed once
  per process by trying it (``kernel.py probe``);
- :class:`Sandbox` is one workspace's confinement: writes only in the
  workspace (and the paths a caller adds), its protected paths read-only,
  no network;
- :class:`Confined` is one process's: the policy as the helper reads it, a
  private temporary folder, and after the process, protected paths it
  created anyway moved out of the workspace (a kernel cannot refuse a new
  name in a folder it lets a command write, so that check comes after).

The gate decides what to ask; the kernel decides what can happen.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

from cortana.sandbox.processes import helper_python, keeper_argv

__all__ = [
    "KERNEL",
    "PROTECTED",
    "SECRET_NAMES",
    "Confined",
    "KernelSupport",
    "Mode",
    "ProtectedWatch",
    "Sandbox",
    "SandboxPolicy",
    "child_environment",
    "kernel_support",
    "too_wide",
    "without_secrets",
]

KERNEL = Path(__file__).with_name("kernel.py")
"""Confinement itself (the keeper imports it), and ``kernel.py probe``."""
PROTECTED = {
    ".git": ".git/",
    ".cortana": ".cortana/",
    "cortana.yml": "cortana.yml",
    "personality": "personality/",
    "skills": "skills/",
}
"""Paths in a workspace whose change could run code, widen permissions or rewrite the assistant: read-only to
confined commands, and asked for every time when a tool writes them."""
Mode = Literal["namespaces", "landlock"]
_PROBE_TIMEOUT_S = 10.0
_TEMPORARY_VARIABLES = ("TMPDIR", "TMP", "TEMP", "TEMPDIR")
_CACHES = {"GOCACHE": "go-build"}
"""Build caches a tool insists on writing under the home folder, pointed into the private temporary folder unless
set: ``go test`` fails without its cache (a confined command may not write ``~/.cache``)."""


@dataclass(frozen=True, slots=True)
class KernelSupport:
    """What this machine's kernel can confine.

    Attributes:
        abi: the Landlock ABI version (0: none).
        namespaces: None when confinement with user, mount and network namespaces works; else why not.
        landlock: None when confinement by Landlock alone works; else why not.
    """

    abi: int
    namespaces: str | None
    landlock: str | None

    @classmethod
    def unavailable(cls, reason: str) -> KernelSupport:
        """No confinement at all, for ``reason``."""
        return cls(0, reason, reason)

    @property
    def mode(self) -> Mode | None:
        """The mode commands are confined in: namespaces where they work, else Landlock alone, else None."""
        if self.namespaces is None:
            return "namespaces"
        if self.landlock is None:
            return "landlock"
        return None

    @property
    def confines(self) -> bool:
        """Whether a confined command is held to everything the sandbox promises, so it may run unasked: writes
        (truncation included: Landlock ABI 3), protected paths, the network and the machine's own services (UNIX
        sockets by path: hidden in a mount namespace, or refused by Landlock ABI 9)."""
        if self.mode == "namespaces":
            return self.abi >= 3
        return self.mode == "landlock" and self.abi >= 9

    def summary(self) -> str:
        """One line for ``cortana doctor`` and the start line."""
        if self.mode is None:
            return f"not available: {self.landlock}"
        how = {
            "namespaces": "Landlock ABI {abi} with user, mount and network namespaces",
            "landlock": "Landlock ABI {abi} alone (user namespaces are not allowed here)",
        }[self.mode].format(abi=self.abi)
        if self.confines:
            return f"{how}: commands are confined to the workspace"
        return f"{how}: partial ({self.gap()}), so commands are still asked"

    def gap(self) -> str:
        """What a confined command could still do here ("" when nothing)."""
        if self.mode is None:
            return self.landlock or "no confinement"
        if self.abi < 3:
            return "this Landlock cannot refuse truncating files"
        if self.mode == "landlock" and self.abi < 9:
            return "without namespaces, this Landlock cannot keep commands from the machine's UNIX sockets"
        return ""


_support: KernelSupport | None = None
_support_lock = threading.Lock()


def kernel_support(*, refresh: bool = False) -> KernelSupport:
    """What this kernel can confine: probed once per process by trying it in a helper (``kernel.py probe``)."""
    global _support
    with _support_lock:
        if _support is None or refresh:
            _support = _probe()
        return _support


def _probe() -> KernelSupport:
    if not sys.platform.startswith("linux"):
        return KernelSupport.unavailable(f"Cortana confines commands on Linux only (this is {platform.system()})")
    try:
        with tempfile.TemporaryDirectory(prefix="cortana-probe-") as scratch:
            done = subprocess.run(
                [helper_python(), "-I", "-S", str(KERNEL), "probe", scratch],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
            )
        found = json.loads(done.stdout or b"{}")
        modes = found["modes"]
        return KernelSupport(int(found["abi"]), modes.get("namespaces"), modes.get("landlock"))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as exc:
        return KernelSupport.unavailable(f"the kernel could not be probed ({type(exc).__name__}: {exc})")


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What one confined process may change.

    Attributes:
        writable: folders and files it may write (and create things in), with everything below them.
        read_only: paths inside those that it may not change (kept read-only by the kernel).
        network: whether it may reach other machines and this machine's services.
    """

    writable: tuple[Path, ...]
    read_only: tuple[Path, ...] = ()
    network: bool = False

    def payload(self, mode: Mode) -> str:
        """The policy as the helpers read it (JSON)."""
        return json.dumps(
            {
                "mode": mode,
                "writable": [str(path) for path in self.writable],
                "read_only": [str(path) for path in self.read_only],
                "network": self.network,
            }
        )


class Sandbox:
    """The confinement of the processes Cortana starts in one workspace.

    Args:
        root: the workspace.
        protected_files: more paths in it kept read-only (the files a trusted MCP server runs).
        forbidden: folders no process may write even inside the workspace (the user's Cortana config).
        enabled: False: nothing is confined (``sandbox.enabled: false`` in the user's own cortana.yml).
        support: what the kernel can do (default: probed, once per process).
        mode: force a mode (tests); default: the best this kernel has.
        writable: more folders every confined process may write (``sandbox.writable``: a build cache).
        env_keep, env_drop: name globs of the variables kept although they look like secrets, and dropped although
            they do not (``sandbox.env``; see :meth:`child_environment`).
    """

    def __init__(
        self,
        root: Path | str,
        *,
        protected_files: Sequence[Path] = (),
        forbidden: Sequence[Path] = (),
        enabled: bool = True,
        support: KernelSupport | None = None,
        mode: Mode | None = None,
        writable: Sequence[Path] = (),
        env_keep: Sequence[str] = (),
        env_drop: Sequence[str] = (),
    ) -> None:
        self.root = Path(root).resolve()
        self.env_keep = tuple(env_keep)
        self.env_drop = tuple(env_drop)
        self.writable = tuple(Path(os.path.expanduser(path)) for path in writable)
        self.protected_files = tuple(Path(path) for path in protected_files)
        self.forbidden = tuple(Path(path) for path in forbidden)
        self.enabled = enabled
        self._support = support
        self._mode = mode
        self.too_wide = too_wide(self.root)
        """Why the workspace may not be written by what Cortana starts (it is ``/``, the home folder or a folder
        above it), or None. There, commands are not confined to it but asked, each, as where nothing confines them
        (the gate reads :attr:`confines`), and every other process runs confined with the workspace read-only."""

    @property
    def support(self) -> KernelSupport:
        """What the kernel can do (probed on first use)."""
        if self._support is None:
            self._support = kernel_support()
        return self._support

    @property
    def mode(self) -> Mode | None:
        """How processes are confined here; None: they are not (switched off, or the kernel cannot)."""
        if not self.enabled:
            return None
        return self._mode or self.support.mode

    @property
    def confines(self) -> bool:
        """Whether a confined command here is held to everything the sandbox promises (it may run unasked): not in
        a workspace that is the home folder or above it (:attr:`too_wide`)."""
        return self.mode is not None and self.support.confines and self.too_wide is None

    def describe(self) -> str:
        """One line: how commands are confined here, or why they are not."""
        if not self.enabled:
            return "off (sandbox.enabled: false): every command is asked"
        if self.too_wide is not None and self.mode is not None:
            return f"not confining commands to this folder: {self.too_wide}, so every command is asked"
        return self.support.summary()

    def doctor_rows(self) -> list[tuple[str, str]]:
        """What ``cortana doctor`` says of this workspace's confinement beyond the kernel's: whether the folder may be
        written, the files in it with another name outside it, the environment, and the processes."""
        if self.too_wide is not None:
            folder = f"not writable by what Cortana starts: {self.too_wide}; every command is asked"
        elif self.mode is None:
            folder = "not confined: commands may write anywhere you can, so each is asked"
        else:
            folder = f"confined commands may write {self.root} (not its protected paths) and nothing else"
        rows = [("workspace", folder), ("hard links", self._hard_links())]
        inherited = self.child_environment()
        from cortana.config import child_process_environment

        left_out = sorted(set(child_process_environment({})) - set(inherited))
        shown = ", ".join(left_out[:6]) + (f" and {len(left_out) - 6} more" if len(left_out) > 6 else "")
        less = f" less {len(left_out)} that look like secrets: {shown}" if left_out else " (none looks like a secret)"
        kept_names = f"; kept: {', '.join(self.env_keep)}" if self.env_keep else ""
        rows.append(("environment", f"commands, tests, hooks, lint and MCP servers get yours{less}{kept_names}"))
        kept = sys.platform.startswith("linux")
        rows.append(
            (
                "processes",
                "each runs under the keeper: a session with no terminal, ended with its command and with Cortana"
                if kept
                else "not kept (Linux only): a process a command started may outlive it",
            )
        )
        return rows

    def _hard_links(self) -> str:
        if self.mode is None or self.too_wide is not None:
            return "not checked: commands are not confined to this folder"
        from cortana.sandbox import kernel

        try:
            linked = kernel.linked_out([str(self.root)], [str(path) for path in self.protected_paths()])
        except OSError as error:  # too many entries to look through
            return f"not checked: {error.strerror or error}"
        if not linked:
            return "none: no file here has another name outside it"
        if len(linked) > kernel.MAX_LINKED_BINDS:
            return (
                f"{len(linked):,} files and folders have other names outside the workspace, more than the sandbox "
                "keeps read-only: confined commands do not run here (uv: UV_LINK_MODE=copy; pnpm: "
                "package-import-method=copy)"
            )
        paths = f"{len(linked):,} path{'' if len(linked) == 1 else 's'}"
        return f"kept read-only for confined commands: {paths} whose files have another name outside the workspace"

    def child_environment(self, extra: Mapping[str, str] | None = None, *, secrets: bool = False) -> dict[str, str]:
        """The environment of a process Cortana starts here: Cortana's own less the variables that look like secrets
        (:func:`without_secrets`, with ``sandbox.env``'s ``keep`` and ``drop``), then ``extra`` (the process's own
        settings: an MCP server's ``env:``, the safe git variables) on top. ``secrets``: keep them (a command the user
        approved outside the sandbox, the user's own ``!`` line)."""
        return child_environment(extra, secrets=secrets, keep=self.env_keep, drop=self.env_drop)

    def protected_paths(self) -> list[Path]:
        """The paths kept read-only inside the workspace, present or not."""
        own = [self.root / name for name in PROTECTED]
        return [*own, *self.protected_files, *(path for path in self._own_install() if self._contains(path))]

    def policy(self, *writable: Path, network: bool = False, workspace: bool = True) -> SandboxPolicy:
        """The workspace (unless ``workspace=False``) and ``writable`` writable, the protected paths and Cortana's
        own install read-only."""
        more = [*writable, *(path for path in self.writable if path.exists())]
        own = workspace and self.too_wide is None  # the home folder, or /, is never a writable root
        roots = [*([self.root] if own else []), *(Path(path).resolve() for path in more)]
        read_only = [*self.protected_paths(), *(folder for folder in self.forbidden if self._contains(folder))]
        return SandboxPolicy(tuple(dict.fromkeys(roots)), tuple(dict.fromkeys(read_only)), network)

    def confined(
        self,
        *writable: Path,
        network: bool = False,
        workspace: bool = True,
        confine: bool = True,
        watch: bool | None = None,
    ) -> Confined:
        """One process's confinement (a context manager; see :class:`Confined`).

        Args:
            writable: more paths it may write.
            network: it may reach the network.
            workspace: it may write the workspace (False: it only reads it, as git listing files does).
            confine: False: not confined, but the same private temporary folder and the same check after.
            watch: check after it for protected paths it created (default: when it is confined and may write the
                workspace; off for a process that lives as long as the session, whose check would catch the
                user's own).
        """
        mode = self.mode if confine else None
        policy = self.policy(*writable, network=network, workspace=workspace)
        watching = workspace and mode is not None if watch is None else watch
        return Confined(self, policy, mode, watch=watching)

    def elsewhere(self, root: Path) -> Sandbox:
        """The same confinement for another folder (the fix workflow's scratch copy)."""
        return Sandbox(
            root,
            enabled=self.enabled,
            support=self._support,
            mode=self._mode,
            writable=self.writable,
            env_keep=self.env_keep,
            env_drop=self.env_drop,
        )

    def _contains(self, path: Path) -> bool:
        resolved = Path(os.path.realpath(path))
        return resolved == self.root or self.root in resolved.parents

    @staticmethod
    def _own_install() -> list[Path]:
        """What the helpers run from: Cortana's package, the base Python and its standard library. Inside the
        workspace (working on Cortana itself), a command that changed them would run unconfined next time."""
        package = Path(__file__).resolve().parents[1]
        python = Path(helper_python())
        return [package, python, Path(os.path.realpath(sys.base_prefix)) / "lib"]


SECRET_NAMES = ("*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*")
"""Variables whose names match these (case ignored) are left out of what Cortana starts, as Codex's
``shell_environment_policy`` leaves them out by default: a command the model runs, or a test it wrote, could
otherwise print ``GITHUB_TOKEN`` into the conversation, or a CI log through ``cortana -p``."""


def without_secrets(
    environ: Mapping[str, str], *, keep: Sequence[str] = (), drop: Sequence[str] = ()
) -> dict[str, str]:
    """``environ`` less the variables whose names match :data:`SECRET_NAMES` or ``drop``, unless they match ``keep``
    (globs, case ignored)."""

    def matches(name: str, globs: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(name.upper(), glob.upper()) for glob in globs)

    return {
        name: value
        for name, value in environ.items()
        if matches(name, keep) or not matches(name, (*SECRET_NAMES, *drop))
    }


def child_environment(
    extra: Mapping[str, str] | None = None,
    *,
    secrets: bool = False,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
) -> dict[str, str]:
    """Cortana's environment for a process it starts, less what looks like a secret unless ``secrets``
    (:func:`without_secrets` with ``keep`` and ``drop``), ``extra`` on top (:meth:`Sandbox.child_environment` is
    this with the workspace's ``sandbox.env``)."""
    from cortana.config import child_process_environment  # the one place that reads Cortana's environment

    inherited = child_process_environment({})
    if not secrets:
        inherited = without_secrets(inherited, keep=keep, drop=drop)
    return {**inherited, **(extra or {})}


def too_wide(root: Path) -> str | None:
    """Why ``root`` cannot be a workspace that commands may write (``/``, the home folder, or a folder holding it:
    its dotfiles, ``~/.ssh`` and ``~/.local/bin`` would be writable), or None when it can."""
    resolved = Path(os.path.realpath(root))
    if resolved == Path(resolved.anchor):
        return f"{resolved} is the root of the file system"
    for home in _homes():
        if resolved == home:
            return f"{resolved} is your home folder"
        if resolved in home.parents:
            return f"{resolved} holds your home folder ({home})"
    return None


def _homes() -> list[Path]:
    """The user's home folder, as ``$HOME`` says and as the password database says (they may differ)."""
    found = [os.path.expanduser("~")]
    with contextlib.suppress(ImportError, KeyError, OSError):
        import pwd

        found.append(pwd.getpwuid(os.getuid()).pw_dir)
    return [Path(os.path.realpath(home)) for home in dict.fromkeys(found) if home and home != "/"]


class Confined:
    """One process's confinement: enter it, start the process with :meth:`environment` and :meth:`argv` (or hand
    :attr:`payload` to the keeper), and leave it when the process and everything it started have ended.

    On leaving, the private temporary folder is removed, and a protected path that did not exist when the process
    started and exists now is moved to Cortana's cache (:attr:`moved` says which, and where).
    """

    def __init__(self, sandbox: Sandbox, policy: SandboxPolicy, mode: Mode | None, *, watch: bool = True) -> None:
        self.sandbox = sandbox
        self.policy = policy
        self.mode = mode
        self.watch = watch
        self.temporary: Path | None = None
        self._watch = ProtectedWatch(sandbox)

    @property
    def moved(self) -> list[tuple[str, Path]]:
        """The protected paths the process created (relative), and where each was moved."""
        return self._watch.moved

    @property
    def payload(self) -> str:
        """The policy for the keeper ("" when the process is not confined)."""
        if self.mode is None:
            return ""
        writable = (*self.policy.writable, *((self.temporary,) if self.temporary else ()))
        policy = SandboxPolicy(writable, self.policy.read_only, self.policy.network)
        return policy.payload(self.mode)

    def __enter__(self) -> Confined:
        self.temporary = Path(tempfile.mkdtemp(prefix="cortana-tmp-"))
        if self.watch:
            self._watch.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Remove the temporary folder; move out what the process made of the protected paths."""
        if self.temporary is not None:
            shutil.rmtree(self.temporary, ignore_errors=True)
            self.temporary = None
        self._watch.finish()

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """``environ`` with the private temporary folder as every temporary-folder variable."""
        environment = dict(environ)
        if self.temporary is not None:
            environment.update(dict.fromkeys(_TEMPORARY_VARIABLES, str(self.temporary)))
            if self.mode is not None:
                for variable, name in _CACHES.items():
                    environment.setdefault(variable, str(self.temporary / name))
        return environment

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` under the keeper (``keeper.py``): confined by this policy (not, when the process is not confined),
        in a session of its own with no terminal, and nothing it starts left running when it ends or Cortana does.
        Elsewhere than Linux, ``argv`` as it is."""
        return keeper_argv(argv, self.payload)

    def notes(self) -> str:
        """What was moved out, for the model and the user ("" when nothing)."""
        return self._watch.notes()


class ProtectedWatch:
    """The protected paths of a workspace that do not exist yet, checked again after a process: one it created is
    moved to Cortana's cache (a kernel cannot refuse a new name in a folder it lets a process write).

    Use :meth:`start` before and :meth:`finish` after (or ``with``); :attr:`moved` and :meth:`notes` say what moved.
    """

    def __init__(self, sandbox: Sandbox, who: str = "the command") -> None:
        self.sandbox = sandbox
        self.who = who
        self.moved: list[tuple[str, Path]] = []
        self._absent: list[Path] = []

    def start(self) -> None:
        """Note which protected paths do not exist now."""
        self._absent = [path for path in self.sandbox.protected_paths() if not os.path.lexists(path)]

    def finish(self) -> None:
        """Move out each noted path that exists now."""
        for path in self._absent:
            if os.path.lexists(path):
                self.moved.append((self._relative(path), _quarantine(path)))
        self._absent = []

    def __enter__(self) -> ProtectedWatch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def notes(self) -> str:
        """What was moved out, for the model and the user ("" when nothing)."""
        if not self.moved:
            return ""
        moved = "; ".join(f"{name} (moved to {where})" for name, where in self.moved)
        return (
            f"[{self.who} created {moved}: protected paths that confined processes may not create. If it is "
            "needed, ask the user, or run a command outside the sandbox (sandbox=false), which the user approves]"
        )

    def _relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.sandbox.root))
        except ValueError:
            return str(path)


def _quarantine(path: Path) -> Path:
    """Move ``path`` into Cortana's cache (``quarantine/``), where no workspace reads it."""
    from cortana.config import cache_dir

    folder = cache_dir() / "quarantine" / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = folder / path.name
    counter = 1
    while os.path.lexists(target):
        counter += 1
        target = folder / f"{path.name}.{counter}"
    try:
        shutil.move(str(path), str(target))
    except OSError:  # it cannot stay where the workspace reads it: remove what could not be moved
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return target
