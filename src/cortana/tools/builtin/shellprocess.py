"""``start_shell``: the one way the built-in tools start a shell command, for ``run_command`` and its background form.

The command runs with ``sh -c`` in a process group of its own, with stdin closed (it can never read the user's
terminal). On Linux it runs under the keeper (``cortana/sandbox/keeper.py``) with a status pipe: the keeper confines
it by the kernel as its :class:`~cortana.sandbox.policy.Confined` says, writes the shell's exit status on the pipe
when the shell exits, then keeps whatever the shell left until it ends by itself or the keeper is told to stop
(SIGTERM: it kills every descendant, a ``setsid`` child or a daemon included); the keeper also ends it all when
Cortana dies, even by SIGKILL. Elsewhere there is no keeper, and the process group is killed as a whole, which a
``setsid`` child escapes.

The output (stdout and stderr together) goes to a callback as it comes: :class:`HeadTail` keeps only its head and
tail, so a command that prints gigabytes costs kilobytes. ``run_shell`` (``commands.py``) waits for the command;
``BackgroundCommands`` (``background.py``) keeps it running and reads it later.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cortana.sandbox.policy import Confined
from cortana.sandbox.processes import keeper_argv
from cortana.tools.builtin.files import MAX_OUTPUT_CHARS

__all__ = ["LINGER_S", "STOP_GRACE_S", "HeadTail", "ShellProcess", "start_shell"]

LINGER_S = 1.0
"""After the shell exits, how long its output may still come from children before they are stopped."""
STOP_GRACE_S = 2.0
"""How long the reaper may take to kill what the command left before its whole group is killed."""
_ISOLATED: dict[str, Any] = {
    "stdin": asyncio.subprocess.DEVNULL,  # it can never read the user's terminal
    "stdout": asyncio.subprocess.PIPE,
    "stderr": asyncio.subprocess.STDOUT,
    "start_new_session": True,  # its own process group too: the fallback if the reaper cannot stop them
}


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


class ShellProcess:
    """A shell command :func:`start_shell` started: when its shell exits, when nothing of it is left, and stopping it.

    Attributes:
        exited: done when the shell exits (or its keeper is gone).
        ended: done when nothing of the command runs any more: the keeper exited, once all the shell left ended
            (elsewhere than Linux: its output closed).
    """

    def __init__(
        self,
        transport: asyncio.SubprocessTransport,
        protocol: _Command,
        exited: asyncio.Future[Any],
        status: asyncio.BaseTransport | None = None,
    ) -> None:
        self._transport = transport
        self._protocol = protocol
        self._status = status  # the keeper's status pipe; None without a keeper
        self.exited = exited
        self.ended: asyncio.Future[None] = protocol.exited if status is not None else protocol.drained

    @property
    def running(self) -> bool:
        """Whether any of it still runs."""
        return not self.ended.done()

    @property
    def refused(self) -> str | None:
        """Why it did not run at all (its confinement could not be set up); None when it ran."""
        line = self._status_line()
        if not line.startswith(b"!"):
            return None
        reason = line[1:].partition(b"\n")[0].decode("utf-8", "replace").strip()
        return reason or "unknown error"

    @property
    def returncode(self) -> int | None:
        """The shell's exit status once it exited (as the keeper reported it, else the process's own); None before."""
        if not self.exited.done():
            return None
        if self._status is None:
            return self._transport.get_returncode()
        code = self._status_line()
        if code.startswith(b"!"):
            code = code.partition(b"\n")[2]
        code = code.strip()
        return int(code) if code.lstrip(b"-").isdigit() else self._transport.get_returncode()

    def _status_line(self) -> bytes:
        if self._status is None or not self.exited.done() or self.exited.cancelled():
            return b""
        result = self.exited.result()
        return result if isinstance(result, bytes) else b""

    async def stop(self) -> None:
        """End everything the command started (the keeper is asked first, and has ``STOP_GRACE_S``), wait a moment
        for its last output, and let go of its pipes. Calling it again does nothing more."""
        pid = self._transport.get_pid()
        if self._status is not None and not self._protocol.exited.done():
            with contextlib.suppress(ProcessLookupError):
                self._transport.send_signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._protocol.exited), STOP_GRACE_S)
        _kill_group(pid)
        with contextlib.suppress(TimeoutError):  # the output's last bytes, now that nothing holds it open
            await asyncio.wait_for(asyncio.shield(self._protocol.drained), LINGER_S)
        if self._status is not None:
            self._status.close()
        self._transport.close()


async def start_shell(
    command: str,
    cwd: Path,
    environment: Mapping[str, str],
    on_output: Callable[[bytes], None],
    *,
    confined: Confined | None = None,
) -> ShellProcess:
    """Start ``command`` with ``sh`` in ``cwd``, confined as ``confined`` says (entered by the caller, and left once
    the process has ended; None: not confined), stdin closed, its output handed to ``on_output`` as it comes (see the
    module docstring). The caller ends it with :meth:`ShellProcess.stop`."""
    loop = asyncio.get_running_loop()
    if not sys.platform.startswith("linux"):
        transport, protocol = await loop.subprocess_shell(
            lambda: _Command(on_output, loop), command, cwd=cwd, env=dict(environment), **_ISOLATED
        )
        return ShellProcess(transport, protocol, protocol.exited)
    policy = confined.payload if confined is not None else ""
    status_read, status_write = os.pipe()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _Command(on_output, loop),
            *keeper_argv(["/bin/sh", "-c", command], policy, status_write),
            cwd=cwd,
            env=dict(environment),
            pass_fds=(status_write,),
            **_ISOLATED,
        )
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
    exited: asyncio.Future[bytes] = loop.create_future()
    try:
        status, _ = await loop.connect_read_pipe(lambda: _Status(exited), os.fdopen(status_read, "rb", buffering=0))
    except BaseException:
        _kill_group(transport.get_pid())
        transport.close()
        raise
    return ShellProcess(transport, protocol, exited, status)


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
    """Hands a command's output on and says when the shell (or its keeper) exited and when its output closed.

    (``Process.wait()`` would also wait for every child holding the output open.)
    """

    def __init__(self, on_output: Callable[[bytes], None], loop: asyncio.AbstractEventLoop) -> None:
        self.on_output = on_output
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.on_output(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.drained.done():
            self.drained.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def _kill_group(pid: int | None) -> None:
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
