"""Starting and stopping the processes Cortana starts: each runs under the keeper (``keeper.py``).

:func:`keeper_argv` puts an argv under the keeper (``Confined.argv`` adds the confinement); :func:`run_kept` is
``subprocess.run`` for such an argv, its output bounded; :func:`stop_kept` and :func:`stop_kept_async` ask the
keeper to stop, so that it ends everything the program started before it is killed itself (killing the keeper
first would leave a ``setsid`` daemon running). The keeper runs on :func:`helper_python`: the base interpreter,
never a virtual environment a command could change.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "KEEPER",
    "MAX_CAPTURE_BYTES",
    "STOP_GRACE_S",
    "helper_python",
    "keeper_argv",
    "run_kept",
    "stop_kept",
    "stop_kept_async",
]

KEEPER = Path(__file__).with_name("keeper.py")
"""The keeper every process Cortana starts runs under (confines it, no terminal, stops all it started)."""


def helper_python() -> str:
    """The Python the helpers run on: the base interpreter, outside any virtual environment a command could change."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def keeper_argv(argv: Sequence[str], payload: str = "", status: int | None = None) -> list[str]:
    """``argv`` run by the keeper (see ``keeper.py``), confined by ``payload`` ("" for not), reporting the program's
    exit to the descriptor ``status`` (None: the keeper exits with it, and ends what it left). Elsewhere than Linux,
    where there is no keeper, ``argv`` as it is."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [helper_python(), "-I", "-S", str(KEEPER), "-" if status is None else str(status), payload, "--", *argv]


STOP_GRACE_S = 2.0
"""How long the keeper has to kill what a process started, once asked to stop, before it is killed itself."""


MAX_CAPTURE_BYTES = 32 << 20
"""The most of each of a kept process's outputs :func:`run_kept` keeps (its head; the rest is read and dropped)."""


def run_kept(
    argv: Sequence[str],
    *,
    timeout: float,
    input: bytes | str | None = None,  # subprocess.run's name
    text: bool = False,
    limit: int = MAX_CAPTURE_BYTES,
    **options: Any,
) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run` for an argv under the keeper (:meth:`Confined.argv`, :func:`keeper_argv`), its stdout
    and stderr captured up to ``limit`` bytes each (a program that prints gigabytes costs megabytes): at ``timeout``
    the keeper is asked to stop (SIGTERM: it kills everything the program started, a daemon too) before it is
    killed; ``subprocess.run`` would kill the keeper at once and leave its descendants running.

    Raises:
        subprocess.TimeoutExpired: it ran past ``timeout`` (and was stopped).
        OSError: it could not start.
    """
    with subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **options,
    ) as process:
        kept = [bytearray(), bytearray()]
        readers = [
            threading.Thread(target=_keep_head, args=(stream, buffer, limit), daemon=True)
            for stream, buffer in ((process.stdout, kept[0]), (process.stderr, kept[1]))
        ]
        if input is not None:
            data = input.encode("utf-8") if isinstance(input, str) else input
            readers.append(threading.Thread(target=_feed, args=(process.stdin, data), daemon=True))
        for reader in readers:
            reader.start()
        try:
            process.wait(timeout)
        except BaseException:  # its time limit, or Cortana interrupted: nothing of it goes on
            stop_kept(process)
            raise
        finally:
            for reader in readers:
                reader.join(STOP_GRACE_S)
    out: Any = bytes(kept[0])
    err: Any = bytes(kept[1])
    if text:
        out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    return subprocess.CompletedProcess(list(argv), process.returncode, out, err)


def _keep_head(stream: Any, buffer: bytearray, limit: int) -> None:
    """Read ``stream`` to its end, keeping its first ``limit`` bytes in ``buffer``."""
    with contextlib.suppress(OSError, ValueError):
        while chunk := stream.read1(1 << 16):
            if len(buffer) < limit:
                buffer += chunk[: limit - len(buffer)]


def _feed(stream: Any, data: bytes) -> None:
    """Write ``data`` to a process's stdin and close it (a process that does not read it is fine)."""
    with contextlib.suppress(OSError, ValueError):
        stream.write(data)
    with contextlib.suppress(OSError, ValueError):
        stream.close()


def stop_kept(process: subprocess.Popen[Any]) -> None:
    """Ask a kept process's keeper to stop (it kills all the process started), then kill its group to be sure."""
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


async def stop_kept_async(process: asyncio.subprocess.Process) -> None:
    """:func:`stop_kept` for an asyncio process."""
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        await process.wait()
