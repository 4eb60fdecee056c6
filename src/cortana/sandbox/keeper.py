"""The keeper of one shell command: confined by the kernel, and no process of it outlives it (Linux).

``run_command`` kills the command's process group when it ends, times out or
is cancelled; a child that calls ``setsid`` (``setsid sleep 77 &``, a double
fork, a daemon) leaves that group and would live on. So on Linux the command
runs under this script, started as its own small Python (``python -I -S
keeper.py STATUS_FD POLICY COMMAND``, no Cortana import but ``kernel.py`` beside
it, ~20 ms):

- it makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``):
  every process the command orphans, however it detached, is re-parented to
  it rather than to init, so it can always find them: its children;
- it asks for SIGTERM when Cortana dies (``PR_SET_PDEATHSIG``), so even a
  Cortana killed with SIGKILL leaves nothing behind;
- it forks the shell's process and there, with ``POLICY`` (JSON; empty for
  none), confines it by the kernel (``kernel.confine``: Landlock, namespaces,
  seccomp) before ``sh -c COMMAND`` runs. The keeper itself stays outside the
  sandbox, so it can always see and stop what the command started. If a step
  of confinement fails, the command does not run: the child writes ``!`` and
  the reason to ``STATUS_FD`` and exits with 126;
- when the shell exits, it writes its exit status to ``STATUS_FD`` (a pipe
  Cortana reads) and closes it; then it waits, and when nothing of the
  command is left it exits;
- on SIGTERM (Cortana's: the time limit, the linger after the shell, a
  cancelled turn, Cortana's exit) it kills every descendant, round after round
  until none is left (killing a parent re-parents its children to the
  subreaper), reaps them, and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS = 200


def children() -> list[int]:
    """The pids whose parent is this process (direct children and the orphans re-parented to it)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()  # the name may hold spaces and parentheses
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry))
    return found


def reap() -> None:
    """Collect every child that has ended."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_all() -> None:
    """SIGKILL every descendant, round after round, until none is left."""
    for _ in range(KILL_ROUNDS):
        reap()
        alive = children()
        if not alive:
            return
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def stop(signum: int, frame: object) -> None:
    kill_all()
    os._exit(128 + signum)


def main(argv: list[str]) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out of the path
    import kernel  # type: ignore[import-not-found]  # kernel.py beside this file: no Cortana import here

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    status_fd, policy, command = int(argv[1]), argv[2], argv[3]
    if os.getppid() == 1:  # Cortana died before the death signal was asked for
        return 1
    shell = os.fork()
    if shell == 0:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        os.set_inheritable(status_fd, False)  # the command never holds the status pipe open
        if policy:
            try:
                kernel.confine(json.loads(policy))
            except (OSError, ValueError) as exc:
                os.write(status_fd, f"!{exc}\n".encode("utf-8", "replace")[:4000])
                os._exit(kernel.EXIT_NOT_CONFINED)
        os.execv("/bin/sh", ["sh", "-c", command])
    _, status = os.waitpid(shell, 0)
    with contextlib.suppress(OSError):  # Cortana stopped reading: it is gone, or stopping us
        os.write(status_fd, f"{os.waitstatus_to_exitcode(status)}\n".encode())
        os.close(status_fd)
    while True:  # what the command left: until it ends by itself, or Cortana says stop
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
