"""The keeper of every process Cortana starts: confined by the kernel, cut off from the terminal, and no process of
it outlives it (Linux).

Killing a process group does not end a child that called ``setsid`` (``setsid
sleep 77 &``, a double fork, a daemon): it leaves the group and would live on,
past the command and past Cortana. So on Linux every process Cortana starts
(the model's commands, the tests, git, graphify, MCP servers, the linter,
hooks, the user's ``!`` lines) runs under this script, started as its own small
Python (``python -I -S keeper.py STATUS POLICY -- PROGRAM ARGS...``, no Cortana
import but ``kernel.py`` beside it, ~20 ms):

- it starts a session of its own (``setsid``): no controlling terminal, so
  neither it nor anything it starts can open ``/dev/tty`` and write escapes,
  clear the screen or print a fake question between Cortana's prompts; a
  standard stream that is a terminal is replaced by ``/dev/null`` (the caller
  captures output through pipes and shows it escaped);
- it makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``):
  every process the program orphans, however it detached, is re-parented to
  it rather than to init, so it can always find them: its children;
- it asks for SIGTERM when Cortana dies (``PR_SET_PDEATHSIG``), so even a
  Cortana killed with SIGKILL leaves nothing behind;
- it forks the program's process and there, with ``POLICY`` (JSON; empty for
  none), confines it by the kernel (``kernel.confine``: Landlock, namespaces,
  seccomp) before the program runs. The keeper itself stays outside the
  sandbox, so it can always see and stop what the program started. If a step
  of confinement fails, the program does not run: the child says why (on
  ``STATUS`` as ``!`` and the reason, or on stderr) and exits with 126;
- ``STATUS`` is a file descriptor (``run_command``'s: a pipe Cortana reads)
  or ``-``. With a descriptor, when the program exits the keeper writes its
  exit status there and closes it, then waits until nothing of the program is
  left or Cortana says stop. With ``-`` (a caller that waits for the keeper to
  exit), when the program exits everything it left is killed and the keeper
  exits with the program's status;
- on SIGTERM (Cortana's: a time limit, a cancelled turn, Cortana's exit) it
  kills every descendant, round after round until none is left (killing a
  parent re-parents its children to the subreaper), reaps them, and exits.
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
EXIT_NOT_RUN = 127


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


def detach_from_the_terminal() -> None:
    """A session of its own (no controlling terminal), and no standard stream that is one."""
    with contextlib.suppress(OSError):  # already a session leader: the caller started one
        os.setsid()
    for fd in (0, 1, 2):
        try:
            if not os.isatty(fd):
                continue
        except OSError:
            continue
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, fd)
        os.close(null)


def exit_code(status: int) -> int:
    """A wait status as a shell reports it (128 + the signal for a killed process)."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def main(argv: list[str]) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out of the path
    import kernel  # type: ignore[import-not-found]  # kernel.py beside this file: no Cortana import here

    if len(argv) < 5 or argv[3] != "--":
        print("usage: keeper.py STATUS_FD|- POLICY_JSON -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    status_fd = None if argv[1] == "-" else int(argv[1])
    policy, program = argv[2], argv[4:]
    detach_from_the_terminal()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    if os.getppid() == 1:  # Cortana died before the death signal was asked for
        return 1
    child = os.fork()
    if child == 0:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        if status_fd is not None:
            os.set_inheritable(status_fd, False)  # the program never holds the status pipe open
        if policy:
            try:
                kernel.confine(json.loads(policy))
            except (OSError, ValueError) as exc:
                said = f"!{exc}\n" if status_fd is not None else f"cortana sandbox: {program[0]} was not run: {exc}\n"
                os.write(status_fd if status_fd is not None else 2, said.encode("utf-8", "replace")[:4000])
                os._exit(kernel.EXIT_NOT_CONFINED)
        try:
            os.execvp(program[0], program)
        except OSError as exc:
            os.write(2, f"cortana: cannot run {program[0]}: {exc.strerror}\n".encode("utf-8", "replace"))
        os._exit(EXIT_NOT_RUN)
    _, status = os.waitpid(child, 0)
    if status_fd is None:  # the caller waits for us: nothing the program left runs on
        kill_all()
        return exit_code(status)
    with contextlib.suppress(OSError):  # Cortana stopped reading: it is gone, or stopping us
        os.write(status_fd, f"{os.waitstatus_to_exitcode(status)}\n".encode())
        os.close(status_fd)
    while True:  # what the program left: until it ends by itself, or Cortana says stop
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
