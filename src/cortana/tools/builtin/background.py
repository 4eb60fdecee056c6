"""Background commands: ``run_command(background=true)`` keeps a command running while the conversation goes on.

"Start the dev server and check the page": a server never ends, so a ``run_command`` that waits for it holds the
turn until its time limit. In the background it returns at once (after at most ``FIRST_OUTPUT_S``, to show the
first output) with an id, ``bg1``; ``command_output`` reads what it printed since the last read and whether it still
runs, and ``stop_command`` ends it and everything it started.

A background command is started exactly as a waited-for one (``shellprocess.start_shell``: the keeper, the same
sandbox policy) and asked for the same way (it is a ``run_command`` call to the gate). One
:class:`BackgroundCommands` per assistant keeps them, at most ``MAX_BACKGROUND`` running at once, each with what it
printed since its last read bounded to its head and tail. None outlives the session:

- ``Assistant.aclose()`` ends them all (the terminal's exit, the end of ``cortana -p``, a server's stop);
- a conversation that ends ends its own (:meth:`BackgroundCommands.stop_thread`): an editor's session closed
  (``cortana acp``); where the assistant keeps none past a turn (``Assistant(keep_background=False)``:
  ``cortana serve`` and ``mcp-serve``, where nobody can read or stop them over the API later), the turn's end;
- Cortana killed, even by SIGKILL: the keeper of each gets SIGTERM from the kernel (``PR_SET_PDEATHSIG``) and kills
  everything it started.

The model sees and stops only the commands of its own conversation; ``/ps`` in the terminal lists them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cortana.errors import ToolError
from cortana.messages import ThreadRef
from cortana.sandbox.policy import Confined
from cortana.tools import RunContext, Tool
from cortana.tools.builtin.files import MAX_OUTPUT_CHARS
from cortana.tools.builtin.shellprocess import LINGER_S, HeadTail, ShellProcess, start_shell

__all__ = [
    "FIRST_OUTPUT_S",
    "MAX_BACKGROUND",
    "UNTIL_THE_SESSION",
    "UNTIL_THE_TURN",
    "BackgroundCommand",
    "BackgroundCommands",
    "Unread",
]

MAX_BACKGROUND = 8
"""How many background commands may run at once in one session."""
FIRST_OUTPUT_S = 2.0
"""How long ``run_command(background=true)`` waits for the first output (less when the command exits first)."""
OUTPUT_HINT = (
    "only the start and end of what it printed since the last read are kept: read it sooner, or have it write a "
    "log file and read parts of that"
)
UNTIL_THE_SESSION = "the end of the session"
"""When a background command ends at the latest (the model is told when it starts one)."""
UNTIL_THE_TURN = "the end of this turn (nothing of it runs on after your answer): use it before you answer"
"""The same where the turn's end ends it (``Assistant(keep_background=False)``: a served answer)."""
SANDBOXED_SERVER = (
    "[it runs in the sandbox, with no network: a port it listens on cannot be reached from outside it, by the "
    "user or by another command. For a server to reach, stop it and run it with sandbox=false; the user is asked]"
)


class Unread:
    """What a background command printed since it was last read: its head and tail, and how much there was."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self.limit = limit
        self._kept = self._fresh()

    def _fresh(self) -> HeadTail:
        return HeadTail(self.limit * 3 // 4, self.limit // 4)

    def add(self, chunk: bytes) -> None:
        """Take the next piece of output."""
        self._kept.add(chunk)

    def take(self) -> str:
        """What came since the last read (with a note of how much was left out), and start again."""
        kept, self._kept = self._kept, self._fresh()
        return kept.text(OUTPUT_HINT, self.limit)


@dataclass(eq=False)
class BackgroundCommand:
    """One command running in the background.

    Attributes:
        id: how the model and ``/ps`` name it (``bg1``); never reused in a session.
        command: the shell command.
        owner: the conversation (thread id) that started it; None for a caller outside a run.
        process: its keeper (or, elsewhere than Linux, its shell).
        confined: its confinement, left once it has ended.
        unread: what it printed since the last read.
        started: when it started (``time.monotonic()``).
        ended_at: when it was seen to have ended (None while it runs).
        stopped: it was stopped (``stop_command``, ``/ps stop``, the end of its conversation or session).
    """

    id: str
    command: str
    owner: str | None
    process: ShellProcess
    confined: Confined
    unread: Unread
    started: float = field(default_factory=time.monotonic)
    ended_at: float | None = None
    stopped: bool = False

    @property
    def running(self) -> bool:
        """Whether anything of it still runs."""
        return self.process.running and not self.stopped

    def state(self) -> str:
        """``running``, ``stopped`` or ``exited with code N``, as the model and ``/ps`` read it."""
        code = self.process.returncode
        if self.running:
            if code is None:
                return "running"
            return f"running (its shell exited with code {code}; what it started still runs)"
        if self.stopped:
            return "stopped"
        return "ended" if code is None else f"exited with code {code}"

    def age(self) -> str:
        """How long it ran (or has run so far), in words."""
        return duration((self.ended_at or time.monotonic()) - self.started)


def duration(seconds: float) -> str:
    """``seconds`` as ``12s``, ``3m 05s`` or ``1h 02m``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


class BackgroundCommands:
    """The background commands of one session (the assistant's): started, read, stopped, and all ended by
    :meth:`aclose`. See the module docstring.

    Args:
        limit: how many may run at once (a start past it is a tool error).
        first_wait: seconds a start waits for the first output (less when the command exits first).
        output_limit: the characters of each read (head and tail of what came since the last one).
        ends_with: when a command ends at the latest, as the model is told when it starts one.
    """

    def __init__(
        self,
        *,
        limit: int = MAX_BACKGROUND,
        first_wait: float = FIRST_OUTPUT_S,
        output_limit: int = MAX_OUTPUT_CHARS,
        ends_with: str = UNTIL_THE_SESSION,
    ) -> None:
        self.limit = limit
        self.ends_with = ends_with
        self.first_wait = first_wait
        self.output_limit = output_limit
        self._commands: dict[str, BackgroundCommand] = {}
        self._ids = itertools.count(1)
        self._starting = 0
        self._closed = False
        self._endings: set[asyncio.Task[None]] = set()

    @property
    def commands(self) -> list[BackgroundCommand]:
        """Every command kept, running or ended and not yet reported, oldest first (``/ps``)."""
        return list(self._commands.values())

    # -- starting ----------------------------------------------------------------------------------------------

    async def start(
        self,
        command: str,
        cwd: Path,
        environment: Mapping[str, str],
        confined: Confined,
        *,
        owner: str | None = None,
    ) -> str:
        """Start ``command`` in ``cwd`` confined by ``confined`` (not yet entered: it is entered here and left when
        the command has ended) and return, once it has run ``first_wait`` seconds or exited, its id and first
        output as the model reads them.

        Raises:
            ToolError: the session is closing, ``limit`` commands run already, or its sandbox could not be set up.
        """
        self._make_room()
        self._starting += 1
        try:
            entry = await self._launch(command, cwd, environment, confined, owner)
        finally:
            self._starting -= 1
        if self._closed:  # the session ended while it started
            await self._end(entry, stopping=True)
            self._commands.pop(entry.id, None)
            raise ToolError("The session is ending; no command can start in the background now.")
        try:
            await self._first_output(entry.process)
        except BaseException:  # the call was cancelled: nobody will know its id, so it does not run on
            await self._end(entry, stopping=True)
            self._commands.pop(entry.id, None)
            raise
        refused = entry.process.refused
        if refused is not None:
            await self._end(entry)
            self._commands.pop(entry.id, None)
            raise ToolError(f"The sandbox could not be set up, so '{command[:200]}' did not run: {refused}")
        output = entry.unread.take() or "(nothing yet)"
        if not entry.running:
            await self._end(entry)
            self._commands.pop(entry.id, None)  # its end is reported now
            return f"{entry.id} {entry.state()} at once. Its output:\n{output}{self._notes(entry)}"
        sandboxed = f"\n{SANDBOXED_SERVER}" if confined.mode is not None else ""
        return (
            f'{entry.id} started; it runs in the background until stop_command(id="{entry.id}") or '
            f'{self.ends_with}. command_output(id="{entry.id}") reads what it prints next. Its first output:\n'
            f"{output}{sandboxed}"
        )

    def _make_room(self) -> None:
        """Refuse a start past the limit, after letting go of the oldest ended commands nobody read."""
        if self._closed:
            raise ToolError("The session is ending; no command can start in the background now.")
        ended = [entry for entry in self._commands.values() if not entry.running]
        for entry in ended[: max(len(ended) - self.limit, 0)]:
            self._commands.pop(entry.id, None)
        running = [entry for entry in self._commands.values() if entry.running]
        if len(running) + self._starting >= self.limit:
            ids = ", ".join(f"{entry.id} ({_short(entry.command)})" for entry in running)
            raise ToolError(
                f"{len(running)} background commands are running already, the most at once ({ids}); stop one with "
                "stop_command first (or the user can, with /ps stop ID in the terminal)."
            )

    async def _launch(
        self, command: str, cwd: Path, environment: Mapping[str, str], confined: Confined, owner: str | None
    ) -> BackgroundCommand:
        unread = Unread(self.output_limit)
        with contextlib.ExitStack() as leaving:
            leaving.enter_context(confined)
            process = await start_shell(command, cwd, confined.environment(environment), unread.add, confined=confined)
            leaving.pop_all()  # from here the command's end leaves it
        entry = BackgroundCommand(f"bg{next(self._ids)}", command, owner, process, confined, unread)
        self._commands[entry.id] = entry
        process.ended.add_done_callback(lambda _: self._ended_by_itself(entry))
        return entry

    async def _first_output(self, process: ShellProcess) -> None:
        """Wait ``first_wait`` seconds, or until the command exits (then a moment for its last output)."""
        try:
            await asyncio.wait_for(asyncio.shield(process.exited), self.first_wait)
        except TimeoutError:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(process.ended), LINGER_S)

    # -- reading and stopping -----------------------------------------------------------------------------------

    async def output(self, id: str, *, owner: str | None = None) -> str:
        """What command ``id`` printed since the last read, and whether it runs (an ended one is then forgotten).

        Raises:
            ToolError: no command ``id`` of ``owner``'s (None: of anyone's).
        """
        entry = self._find(id, owner)
        if not entry.running:
            await self._end(entry)
            self._commands.pop(entry.id, None)  # its end is reported now
        output = entry.unread.take() or "(nothing new)"
        return f"{entry.id} {entry.state()}, after {entry.age()}. Since the last read:\n{output}{self._notes(entry)}"

    async def stop(self, id: str, *, owner: str | None = None) -> str:
        """Stop command ``id`` and everything it started; its state and last output.

        Raises:
            ToolError: no command ``id`` of ``owner``'s (None: of anyone's).
        """
        entry = self._find(id, owner)
        await self._end(entry, stopping=True)
        self._commands.pop(entry.id, None)
        output = entry.unread.take() or "(nothing new)"
        return f"{entry.id} {entry.state()}, after {entry.age()}. Its last output:\n{output}{self._notes(entry)}"

    async def stop_thread(self, thread: ThreadRef) -> None:
        """Stop the commands the conversation ``thread`` started (it has ended)."""
        await self._end_all([entry for entry in self._commands.values() if entry.owner == thread.thread_id])

    async def aclose(self) -> None:
        """Stop every command (the session ends) and refuse new ones."""
        self._closed = True
        await self._end_all(list(self._commands.values()))
        if self._endings:
            await asyncio.gather(*self._endings, return_exceptions=True)

    async def _end_all(self, entries: list[BackgroundCommand]) -> None:
        await asyncio.gather(*(self._end(entry, stopping=True) for entry in entries))
        for entry in entries:
            self._commands.pop(entry.id, None)

    def _find(self, id: str, owner: str | None) -> BackgroundCommand:
        entry = self._commands.get(id.strip())
        if entry is not None and (owner is None or entry.owner == owner):
            return entry
        mine = [entry for entry in self._commands.values() if owner is None or entry.owner == owner]
        if mine:
            listed = ", ".join(f"{entry.id} ({_short(entry.command)}, {entry.state()})" for entry in mine)
            raise ToolError(f"No background command {id[:40]!r} here; there are: {listed}.")
        raise ToolError(
            f"No background command {id[:40]!r}: none runs here (one whose end was reported is forgotten; "
            "run_command with background=true starts one)."
        )

    async def _end(self, entry: BackgroundCommand, *, stopping: bool = False) -> None:
        """Stop what is left of ``entry`` (``stopping``: it was still wanted), then leave its confinement."""
        if entry.ended_at is not None:
            return
        if stopping and entry.process.running:
            entry.stopped = True
        await entry.process.stop()
        if entry.ended_at is None:
            entry.ended_at = time.monotonic()
            entry.confined.close()  # its temporary folder; a protected path it made is moved out (notes say so)

    def _ended_by_itself(self, entry: BackgroundCommand) -> None:
        """Let go of an ended command's pipes and confinement at once (what it printed stays to be read)."""
        task = asyncio.ensure_future(self._end(entry))
        self._endings.add(task)
        task.add_done_callback(self._endings.discard)

    @staticmethod
    def _notes(entry: BackgroundCommand) -> str:
        notes = entry.confined.notes()
        return f"\n{notes}" if notes else ""

    # -- the model's tools ---------------------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """``command_output`` (a read; its result changes by itself, so it is never answered from an earlier call)
        and ``stop_command`` (it ends only what the conversation started, so the gate does not ask)."""
        commands = self

        async def command_output(id: str, context: RunContext | None = None) -> str:
            """What a background command printed since the last read, and whether it still runs.

            Args:
                id: its id (bg1).
            """
            return await commands.output(id, owner=_owner(context))

        async def stop_command(id: str, context: RunContext | None = None) -> str:
            """Stop a background command and everything it started.

            Args:
                id: its id (bg1).
            """
            return await commands.stop(id, owner=_owner(context))

        return [
            Tool(command_output, read_only=True, live=True),
            Tool(stop_command, kind="execute", default_action="allow"),
        ]


def _owner(context: RunContext | None) -> str | None:
    """The conversation a tool call belongs to (None outside a run)."""
    return context.thread.thread_id if context is not None else None


def _short(command: str, limit: int = 60) -> str:
    """A command on one line, cut to ``limit`` characters."""
    line = " ".join(command.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
