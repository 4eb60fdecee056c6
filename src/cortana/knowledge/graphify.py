"""The graphify CLI: finding it, running ``graphify update``, and the managed block of ``.graphifyignore``.

graphify (PyPI ``graphifyy``) builds the graph from the code's syntax trees
with tree-sitter: no LLM, no network. ``graphify update <folder>`` rebuilds
incrementally (files whose content is unchanged are served from its cache)
and writes ``graphify-out/graph.json`` atomically, holding a lock so two
rebuilds of one folder never run at once, even from two processes.

``exclude`` patterns from cortana.yml (or ``KnowledgeGraph(exclude=...)``)
live in a block of ``.graphifyignore`` between two marker lines; lines
outside the block are the user's and are never touched.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import stat
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cortana.config import graphify_out
from cortana.errors import UserError
from cortana.safefs import PathRefused, SafeTree
from cortana.safegit import safe_git_environment
from cortana.sandbox.policy import Confined, Sandbox, child_environment
from cortana.sandbox.processes import keeper_argv, stop_kept_async

__all__ = [
    "IGNORE_FILE",
    "INSTALL_HINT",
    "UpdateOutcome",
    "find_graphify",
    "graph_json",
    "read_ignore_block",
    "read_regular_file",
    "run_update",
    "write_ignore_block",
]

IGNORE_FILE = ".graphifyignore"
BLOCK_BEGIN = "# >>> cortana: graphify.exclude (managed; edit cortana.yml, not these lines) >>>"
BLOCK_END = "# <<< cortana <<<"
INSTALL_HINT = "pip install 'cortana[graph]' (or: uv tool install graphifyy)"
"""How to get the graphify CLI."""
MAX_OUTPUT = 4_000
"""The most characters of graphify's output kept (its last ones)."""


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes, not a symbolic link.

    A repository may hold a graph.json or .graphifyignore that is a FIFO or a link to a
    device (reading one would never end) or a link out of the workspace (reading it would
    show the model a file it was never given): anything but a regular file is refused.
    graphify writes its files in place, so a link there is never its own.

    Raises:
        FileNotFoundError: there is no such file.
        UserError: it is a symbolic link, not a regular file, or larger than ``limit``.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UserError(f"{path} is a symbolic link; Cortana reads only the regular file there.") from None
        raise
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path} is not a regular file; Cortana does not read it.")
        if info.st_size > limit:
            raise UserError(f"{path} is {info.st_size:,} bytes; at most {limit:,} are read.")
        return file.read(limit + 1)[:limit]


def find_graphify(command: str | None = None) -> str | None:
    """The graphify executable: ``command`` if given, else the one beside this Python, else on ``PATH``."""
    if command:
        return shutil.which(command)
    beside = Path(sys.executable).parent / "graphify"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("graphify")


def graph_json(root: Path) -> Path:
    """Where graphify writes the graph of ``root`` (``GRAPHIFY_OUT``, else ``graphify-out``)."""
    return root / graphify_out() / "graph.json"


@dataclass(frozen=True, slots=True)
class UpdateOutcome:
    """How one ``graphify update`` went.

    Attributes:
        ok: it exited 0.
        seconds: how long it ran.
        output: the end of what it printed (stdout and stderr).
    """

    ok: bool
    seconds: float
    output: str

    @property
    def no_code(self) -> bool:
        """graphify found no code files to build from (not a failure: a folder of notes, say)."""
        return not self.ok and "No code files found" in self.output


async def run_update(
    root: Path, executable: str, *, timeout: float, force: bool = False, sandbox: Sandbox | None = None
) -> UpdateOutcome:
    """Run ``graphify update .`` in ``root``; past ``timeout`` seconds its whole process group is killed.

    The git that graphify runs gets :func:`cortana.safegit.safe_git_environment`: a repository's
    ``core.fsmonitor``, hooks or other configured programs never run through a graph build. With ``sandbox``,
    graphify is confined by the kernel: it may write its output folder and nothing else, and has no network.
    """
    out_folder = graph_json(root).parent
    existed = out_folder.exists()
    if sandbox is None:
        return await _update(root, executable, force, timeout, None, existed)
    out_folder.mkdir(parents=True, exist_ok=True)
    with sandbox.confined(out_folder, workspace=False) as confined:  # it writes its output folder, nothing else
        return await _update(root, executable, force, timeout, confined, existed)


async def _update(
    root: Path, executable: str, force: bool, timeout: float, confined: Confined | None, existed: bool
) -> UpdateOutcome:
    sandbox = confined.sandbox if confined is not None else None
    started = time.perf_counter()
    out_folder = graph_json(root).parent
    arguments = [executable, "update", ".", *(["--force"] if force else [])]
    # graphify runs git (ls-files, rev-parse): the repository's own programs must not run with it
    own = {"GRAPHIFY_NO_TIPS": "1", "PYTHONIOENCODING": "utf-8"}
    environment = sandbox.child_environment(own) if sandbox is not None else child_environment(own)
    environment = await asyncio.to_thread(safe_git_environment, root, environment, sandbox=sandbox)
    if confined is not None:
        arguments, environment = confined.argv(arguments), confined.environment(environment)
    else:
        arguments = keeper_argv(arguments)  # not confined, but kept: no terminal, nothing left running
    process = await asyncio.create_subprocess_exec(
        *arguments,
        cwd=root,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=environment,
        start_new_session=True,  # its extraction workers are killed with it
    )
    try:
        async with asyncio.timeout(timeout):
            output = await _tail(process)
    except (TimeoutError, asyncio.CancelledError) as exc:
        await stop_kept_async(process)  # its keeper ends the extraction workers too
        if isinstance(exc, asyncio.CancelledError):
            raise
        stopped = f"graphify update ran past {timeout:g}s and was stopped."
        return UpdateOutcome(False, time.perf_counter() - started, stopped)
    text = output.decode("utf-8", "replace").strip()
    outcome = UpdateOutcome(process.returncode == 0, time.perf_counter() - started, text[-MAX_OUTPUT:])
    if outcome.no_code and not existed:
        shutil.rmtree(out_folder, ignore_errors=True)  # only graphify's empty cache: leave the folder as it was
    return outcome


async def _tail(process: asyncio.subprocess.Process) -> bytes:
    """What ``process`` prints, its last ``MAX_OUTPUT`` bytes kept as it comes (a build that prints gigabytes costs
    kilobytes), once it exits."""
    assert process.stdout is not None
    kept = b""
    while chunk := await process.stdout.read(1 << 16):
        kept = (kept + chunk)[-MAX_OUTPUT * 4 :]
    await process.wait()
    return kept


# -- .graphifyignore -----------------------------------------------------------------------------


def check_patterns(patterns: Sequence[str]) -> list[str]:
    """``patterns`` as lines of an ignore file.

    Raises:
        UserError: a pattern that is empty, spans lines or is longer than 300 characters.
    """
    lines: list[str] = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern.strip():
            raise UserError(f"graphify exclude patterns must be non-empty strings, got {pattern!r}.")
        if "\n" in pattern or "\r" in pattern or len(pattern) > 300:
            raise UserError(f"graphify exclude pattern {pattern[:40]!r}… must be one line of at most 300 characters.")
        lines.append(pattern.strip())
    return lines


def read_ignore_block(root: Path) -> list[str]:
    """The patterns in the managed block of ``root/.graphifyignore`` (empty without one)."""
    try:
        text = _read_ignore_file(root / IGNORE_FILE)
    except FileNotFoundError:
        return []
    _, block, _ = _split(text.splitlines())
    return block


def write_ignore_block(root: Path, patterns: Sequence[str]) -> bool:
    """Make the managed block of ``root/.graphifyignore`` hold exactly ``patterns``; True if the file changed.

    The user's lines before and after the block are kept as they are. With no patterns the
    block is removed, and so is the file if nothing else was in it.
    """
    lines = check_patterns(patterns)
    path = root / IGNORE_FILE
    tree = SafeTree(root)  # Cortana's one writer: a symlink there is refused, never followed
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link; Cortana only writes its exclude block into a plain file.")
    try:
        old = _read_ignore_file(path)
    except FileNotFoundError:
        old = ""
    before, block, after = _split(old.splitlines())
    if block == lines and (lines or not old):
        return False
    managed = [BLOCK_BEGIN, *lines, BLOCK_END] if lines else []
    new_lines = [*before, *managed, *after]
    try:
        if not any(line.strip() for line in new_lines):
            if old:
                tree.unlink(IGNORE_FILE)
                return True
            return False
        new = "\n".join(new_lines) + "\n"
        if new == old:
            return False
        tree.write_text(IGNORE_FILE, new)
    except PathRefused as refused:
        raise UserError(str(refused)) from None
    return True


MAX_IGNORE_BYTES = 1 << 20


def _read_ignore_file(path: Path) -> str:
    return read_regular_file(path, MAX_IGNORE_BYTES).decode("utf-8", "replace")


def _split(lines: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The user's lines before the block, the block's patterns, the user's lines after it."""
    try:
        begin = lines.index(BLOCK_BEGIN)
        end = lines.index(BLOCK_END, begin + 1)
    except ValueError:
        return lines, [], []
    return lines[:begin], [line for line in lines[begin + 1 : end] if line.strip()], lines[end + 1 :]
