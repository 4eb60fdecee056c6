"""``run_command``: a shell command in the workspace, bounded in time, output and reach.

The command runs in a process group of its own, with stdin closed (it can
never read the user's terminal). On Linux it runs under the keeper
(``cortana/sandbox/keeper.py``), a child subreaper that first confines it by
the kernel (``cortana.sandbox``: writes only in the workspace, its protected
paths read-only, no network) and then keeps every process it starts, a
``setsid`` child, a double fork or a daemon included, findable: when the
command ends (after ``LINGER_S``), times out, the turn is cancelled or Cortana
exits, all of them are killed. Elsewhere the process group is killed, which a
``setsid`` child escapes. Output is read as it comes and only its head and
tail are kept, so a command that prints gigabytes costs kilobytes.

Where the sandbox holds, the model may ask for a command to run outside it
(``sandbox=false``: the network, writes outside the workspace, ``.git/``);
the gate asks the user for each such call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from cortana.errors import ToolError
from cortana.safegit import safe_git_environment
from cortana.sandbox.policy import Confined
from cortana.sandbox.processes import keeper_argv
from cortana.tools import Tool
from cortana.tools.builtin.files import MAX_OUTPUT_CHARS
from cortana.tools.builtin.workspace import Workspace

__all__ = ["MAX_COMMAND_TIMEOUT", "Finished", "HeadTail", "command_tool", "run_shell"]

MAX_COMMAND_TIMEOUT = 600.0
"""The longest timeout a command may ask for (seconds)."""
LINGER_S = 1.0
"""After the shell exits, how long its output may still come from children before they are stopped."""
STOP_GRACE_S = 2.0
"""How long the reaper may take to kill what the command left before its whole group is killed."""
_ISOLATED: dict[str, Any] = {
    "stdin": asyncio.subprocess.DEVNULL,  # it can never read the user's terminal
    "stdout": asyncio.subprocess.PIPE,
    "stderr": asyncio.subprocess.STDOUT,
    "start_new_session": True,
}
SANDBOX_ARGUMENT = "sandbox"
"""``run_command``'s argument for running outside the sandbox (``sandbox=false``), offered where the sandbox holds."""
_SANDBOX_SIGNS = (
    "read-only file system",
    "permission denied",
    "operation not permitted",
    "network is unreachable",
    "temporary failure in name resolution",
    "could not resolve",
    "name or service not known",
    "failed to establish a new connection",
    "connection refused",
)
"""What a command prints when the sandbox stopped it (then the result says how to run it outside)."""


class HeadTail:
    """Keeps the first and last characters of a stream, and how many there were."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        """Take the next piece of output."""
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(len(self.tail) - self.tail_limit, 0)]

    def text(self, hint: str, limit: int = MAX_OUTPUT_CHARS) -> str:
        """The output as text, with a note where the middle was left out."""
        head = self.head.decode("utf-8", "replace")
        if not self.tail:
            return head
        left_out = self.total - len(self.head) - len(self.tail)
        if left_out <= 0:
            return (self.head + self.tail).decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        return f"{head}\n[... output cut at {limit:,} of {self.total:,} characters; {hint}]\n{tail}"


def command_tool(space: Workspace, default_timeout: float = 120.0, *, trusted_git: bool = False) -> Tool:
    """``run_command``, run in ``space``'s root, confined by ``space.sandbox``.

    Args:
        space: the workspace.
        default_timeout: seconds a command runs when the model asks for no other limit.
        trusted_git: let the git a command runs use the repository's hooks and the programs its config names
            (fsmonitor, pager, textconv, aliases…); by default they are switched off
            (:func:`cortana.safegit.safe_git_environment`): only for a folder whose user trusts it.
    """
    default_timeout = min(default_timeout, MAX_COMMAND_TIMEOUT)
    box = space.sandbox

    async def run(command: str, timeout: float, confine: bool) -> str:
        environment = box.child_environment(secrets=not confine)  # approved outside the sandbox: as the user's shell
        if not trusted_git:
            environment = await asyncio.to_thread(safe_git_environment, space.root, environment, sandbox=box)
        with box.confined(confine=confine) as confined:
            environment = confined.environment(environment)
            finished = await run_shell(command, space.root, environment, timeout, confined=confined)
        if finished.refused is not None:
            raise ToolError(f"The sandbox could not be set up, so '{command[:200]}' did not run: {finished.refused}")
        if finished.timed_out:
            raise ToolError(f"'{command[:200]}' did not finish within {timeout:g}s and was stopped.{confined.notes()}")
        notes = "\n[background processes it left were stopped]" if finished.lingered else ""
        if confined.moved:
            notes += "\n" + confined.notes()
        elif confined.mode is not None and finished.returncode and _stopped_by_sandbox(finished.output):
            notes += (
                "\n[this ran in the sandbox: it may write only inside the workspace (not .git/, cortana.yml, "
                "personality/, skills/ or .cortana/) and has no network. If that is what stopped it, run it again "
                "with sandbox=false; the user is asked]"
            )
        return f"exit code {finished.returncode}\n{finished.output}{notes}"

    if box.confines:

        async def run_command(
            command: str,
            timeout: Annotated[float, Field(gt=0, le=MAX_COMMAND_TIMEOUT)] = default_timeout,
            sandbox: bool = True,
        ) -> str:
            """Run a shell command in the workspace, in a sandbox: no network, writes only in the workspace.

            Args:
                timeout: seconds before it is stopped.
                sandbox: false to run it outside the sandbox (network, other folders, .git/); the user is asked.
            """
            return await run(command, timeout, sandbox is not False)

        return Tool(run_command, timeout=MAX_COMMAND_TIMEOUT + 10, kind="execute")

    async def run_command_asked(
        command: str, timeout: Annotated[float, Field(gt=0, le=MAX_COMMAND_TIMEOUT)] = default_timeout
    ) -> str:
        """Run a shell command in the workspace.

        Args:
            timeout: seconds before it is stopped.
        """
        # In the home folder (or /) the user approves each command as it is: it runs as their shell would run it,
        # since confined it could write nothing there. Elsewhere confined as far as this kernel can.
        return await run(command, timeout, box.too_wide is None)

    return Tool(run_command_asked, name="run_command", timeout=MAX_COMMAND_TIMEOUT + 10, kind="execute")


def _stopped_by_sandbox(output: str) -> bool:
    lowered = output[-4000:].lower()
    return any(sign in lowered for sign in _SANDBOX_SIGNS)


@dataclass(frozen=True, slots=True)
class Finished:
    """How a shell command ended.

    Attributes:
        returncode: its exit status (None when it was stopped at its time limit).
        output: stdout and stderr together, as text, its head and tail when long.
        timed_out: it ran past its time limit and was stopped.
        lingered: background processes it left were stopped.
        refused: why it did not run at all (its confinement could not be set up); None when it ran.
    """

    returncode: int | None
    output: str
    timed_out: bool = False
    lingered: bool = False
    refused: str | None = None


async def run_shell(
    command: str,
    cwd: Path,
    environment: Mapping[str, str],
    timeout: float,
    *,
    limit: int = MAX_OUTPUT_CHARS,
    hint: str = "redirect the output to a file and read parts of it",
    confined: Confined | None = None,
) -> Finished:
    """Run ``command`` with ``sh`` in ``cwd``: confined as ``confined`` says (entered by the caller; None: not
    confined), stdin closed, everything it starts killed when it ends (after ``LINGER_S``), times out or is
    cancelled (see the module docstring), and its output kept to ``limit`` characters (head and tail)."""
    loop = asyncio.get_running_loop()
    output = HeadTail(limit * 3 // 4, limit // 4)
    policy = confined.payload if confined is not None else ""
    if not sys.platform.startswith("linux"):
        return await _run_in_group(loop, output, command, cwd, environment, timeout, limit, hint)
    status_read, status_write = os.pipe()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Command(output, loop),
            *keeper_argv(["/bin/sh", "-c", command], policy, status_write),
            cwd=cwd,
            env=dict(environment),
            pass_fds=(status_write,),
            **_ISOLATED,  # its own process group too: the fallback if the reaper cannot stop them
        )
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
    exited: asyncio.Future[bytes] = loop.create_future()
    status, _ = await loop.connect_read_pipe(lambda: _Status(exited), os.fdopen(status_read, "rb", buffering=0))
    lingered = timed_out = False
    code: bytes = b""
    try:
        async with asyncio.timeout(timeout):
            code = await exited  # the shell's exit status ("" when the reaper died)
            try:  # what the command left may still run and print; the reaper exits once nothing is left
                await asyncio.wait_for(asyncio.shield(protocol.exited), LINGER_S)
            except TimeoutError:
                lingered = True
    except TimeoutError:
        timed_out = True
    finally:
        await _stop(transport, protocol)
        status.close()
        transport.close()
    refused: str | None = None
    if code.startswith(b"!"):  # the keeper's child could not confine the command, which did not run
        reason, _, code = code[1:].partition(b"\n")
        refused = reason.decode("utf-8", "replace").strip() or "unknown error"
    code = code.strip()
    returncode = None if timed_out else int(code) if code.lstrip(b"-").isdigit() else transport.get_returncode()
    return Finished(returncode, output.text(hint, limit), timed_out=timed_out, lingered=lingered, refused=refused)


async def _stop(transport: asyncio.SubprocessTransport, protocol: _Command) -> None:
    """Have the reaper kill everything the command left (at once on a timeout), then its group, to be sure."""
    if not protocol.exited.done():
        with contextlib.suppress(ProcessLookupError):
            transport.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.exited), STOP_GRACE_S)
    _kill_group(transport.get_pid())
    with contextlib.suppress(TimeoutError):  # the output's last bytes, now that nothing holds it open
        await asyncio.wait_for(asyncio.shield(protocol.drained), LINGER_S)


async def _run_in_group(
    loop: asyncio.AbstractEventLoop,
    output: HeadTail,
    command: str,
    cwd: Path,
    environment: Mapping[str, str],
    timeout: float,
    limit: int,
    hint: str,
) -> Finished:
    """Where there is no subreaper (not Linux): the command's process group, killed as a whole at the end."""
    transport, protocol = await loop.subprocess_shell(
        lambda: _Command(output, loop),
        command,
        cwd=cwd,
        env=dict(environment),
        **_ISOLATED,  # its own process group, killed as a whole
    )
    lingered = timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await protocol.exited
            try:  # children may hold the output open after the shell exits
                await asyncio.wait_for(asyncio.shield(protocol.drained), LINGER_S)
            except TimeoutError:
                lingered = True
    except TimeoutError:
        timed_out = True
    finally:
        _kill_group(transport.get_pid())  # what is left: background children, or everything on a timeout
        transport.close()
    returncode = None if timed_out else transport.get_returncode()
    return Finished(returncode, output.text(hint, limit), timed_out=timed_out, lingered=lingered)


class _Status(asyncio.Protocol):
    """Reads the reaper's status pipe: the shell's exit status, once it exits."""

    def __init__(self, exited: asyncio.Future[bytes]) -> None:
        self.exited = exited
        self.data = b""

    def data_received(self, data: bytes) -> None:
        self.data = (self.data + data)[:4096]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.exited.done():
            self.exited.set_result(self.data)


class _Command(asyncio.SubprocessProtocol):
    """Collects a command's output and says when the shell exited and when its output closed.

    (``Process.wait()`` would also wait for every child holding the output open.)
    """

    def __init__(self, output: HeadTail, loop: asyncio.AbstractEventLoop) -> None:
        self.output = output
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.output.add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.drained.done():
            self.drained.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
