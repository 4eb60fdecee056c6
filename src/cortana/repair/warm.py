"""A pytest process kept warm in the scratch copy, forking a fresh child for each run of a few tests.

Judging a one-token change by the failing tests alone should cost what those
tests cost. On real projects it cost far more: one test of tabulate took 1.6 s
to run, of which 0.85 s was importing the hypothesis plugin that pytest
loads from the machine's packages, and the rest starting Python, pytest and
the project's other imports, every time. The fix's small changes ran 10 of 40
in their share of the budget.

:class:`WarmTests` starts one Python (the project's own, confined like every
test run) that imports pytest and collects the failing tests once (plugins,
the tests' third-party imports), then forgets every module of the copy. For
each run it forks: the child imports the project and its tests afresh from
the copy as it is now (a change was just written there), runs pytest on the
tests asked, writes its JUnit report and exits; the parent stays as it was.
It is used only where that is safe: a ``python -m pytest`` command, and a
parent with one thread after warming up (forking a process with threads can
deadlock); otherwise, or when the process dies, the run is made cold, as
before. The whole suite, which decides whether a patch breaks nothing, always
runs cold.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cortana.sandbox.policy import Sandbox
from cortana.sandbox.processes import keeper_argv, stop_kept_async

__all__ = ["WarmRun", "WarmTests", "python_of"]

_SERVER = r"""
import json, os, signal, sys, threading

root = os.path.realpath(sys.argv[1]) + os.sep
import pytest


def quietly(arguments):
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        pytest.main(arguments)
    except BaseException:
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(null)


def forget():
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        if where and os.path.realpath(where).startswith(root):
            del sys.modules[name]


def answer(data):
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


first = json.loads(sys.stdin.readline())
quietly(first["warm"])
forget()
answer({"ready": threading.active_count() == 1})
for line in sys.stdin:
    asked = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        code = 99
        try:
            out = os.open(asked["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, 1)
            os.dup2(out, 2)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            signal.alarm(max(1, int(asked["timeout"])))
            code = int(pytest.main(asked["args"]))
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
        except BaseException:
            code = 98
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    _, status = os.waitpid(child, 0)
    answer({"status": os.waitstatus_to_exitcode(status)})
"""
"""The warm process: warms up on the first request, says whether it can fork safely, then forks a child per run."""

_MOST_OUTPUT = 4 * 1024 * 1024
"""The most of a child's output read back (its end matters: pytest's summary)."""


def python_of(command: str) -> tuple[list[str], list[str]] | None:
    """``(python argv, pytest's own arguments)`` of a ``python -m pytest ...`` command; None for any other shape
    (``pytest``, ``make test``, a variable set before the command): those are not run warm."""
    try:
        parts = shlex.split(command)
    except ValueError:
        return None
    for at in range(len(parts) - 1):
        if parts[at] == "-m" and parts[at + 1] == "pytest":
            python = parts[:at]
            if not python or "=" in python[0] or not Path(python[0]).name.startswith("python"):
                return None
            return python, parts[at + 2 :]
    return None


def _tail(path: Path) -> str:
    """The end of a file the tests' code wrote: not read through a symlink, at most ``_MOST_OUTPUT`` bytes."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _MOST_OUTPUT))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class WarmRun:
    """One run's end: pytest's exit status (None: stopped at the time limit), what it printed, and its JUnit
    report's file (the caller reads it, then removes it)."""

    returncode: int | None
    output: str
    report: Path


class WarmTests:
    """The warm process for one scratch copy (see the module docstring). Use :meth:`start`; close with
    :meth:`aclose`."""

    def __init__(self, process: asyncio.subprocess.Process, folder: Path, stack: contextlib.ExitStack) -> None:
        self._process = process
        self._folder = folder
        self._stack = stack
        self._lock = asyncio.Lock()
        self._runs = 0
        self.alive = True

    @classmethod
    async def start(
        cls,
        command: str,
        folder: Path,
        environment: Mapping[str, str],
        warm_arguments: Sequence[str],
        *,
        sandbox: Sandbox | None,
        timeout: float = 120.0,
    ) -> WarmTests | None:
        """The warm process for ``folder`` (the copy), warmed up by collecting with ``warm_arguments``; None where
        it cannot be used (another command shape, threads after warming up, a failure to start)."""
        shape = python_of(command)
        if shape is None:
            return None
        python, _ = shape
        stack = contextlib.ExitStack()
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cortana-warm-")))
        server = scratch / "cortana_warm.py"
        server.write_text(_SERVER, encoding="utf-8")
        env = dict(environment)
        payload = ""
        if sandbox is not None:
            confined = stack.enter_context(sandbox.confined(scratch, watch=False))
            env = confined.environment(env)
            payload = confined.payload
        try:
            process = await asyncio.create_subprocess_exec(
                *keeper_argv([*python, str(server), str(folder)], payload),
                cwd=folder,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            stack.close()
            return None
        warm = cls(process, scratch, stack)
        if not await warm.warm_up([*shape[1], *warm_arguments], timeout):
            await warm.aclose()
            return None
        return warm

    async def warm_up(self, arguments: Sequence[str], timeout: float) -> bool:
        """Collect with ``arguments`` once (plugins and the tests' imports), then forget the copy's modules; whether
        the process can fork safely after it (one thread)."""
        ready = await self._ask({"warm": list(arguments)}, timeout)
        return bool(ready and ready.get("ready"))

    async def run(self, arguments: Sequence[str], timeout: float) -> WarmRun | None:
        """pytest with ``arguments`` (and a JUnit report of its own) in a fresh child; None when the warm process is
        gone (run it cold)."""
        if not self.alive:
            return None
        async with self._lock:
            self._runs += 1
            out = self._folder / "output.txt"
            report = self._folder / f"report-{self._runs}.xml"
            asked = [*arguments, f"--junit-xml={report}"]
            answer = await self._ask({"args": asked, "out": str(out), "timeout": timeout}, timeout + 10)
            status = answer.get("status") if answer is not None else None
            if not isinstance(status, int):
                await self.aclose()
                return None
            output = _tail(out)
            return WarmRun(None if status == -14 else status, output, report)  # -14: the child's alarm (SIGALRM)

    async def _ask(self, request: dict[str, object], timeout: float) -> dict[str, object] | None:
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write((json.dumps(request) + "\n").encode())
            await process.stdin.drain()
            async with asyncio.timeout(timeout):
                line = await process.stdout.readline()
            answer = json.loads(line.decode("utf-8", "replace")[:10_000]) if line else None
        except (OSError, ValueError, TimeoutError, ConnectionError):
            return None
        return answer if isinstance(answer, dict) else None

    async def aclose(self) -> None:
        """Stop the process (and anything a child left) and remove its files."""
        if self.alive:
            self.alive = False
            with contextlib.suppress(ProcessLookupError, OSError):
                if self._process.stdin is not None:
                    self._process.stdin.close()
            await stop_kept_async(self._process)
        self._stack.close()
