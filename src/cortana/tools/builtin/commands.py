"""``run_command``: a shell command in the workspace, bounded in time, output and reach; or one kept running.

The command runs in a process group of its own, with stdin closed (it can
never read the user's terminal). On Linux it runs under the keeper
(``cortana/sandbox/keeper.py``), a child subreaper that first confines it by
the kernel (``cortana.sandbox``: writes only in the workspace, its protected
paths read-only, no network) and then keeps every process it starts, a
``setsid`` child, a double fork or a daemon included, findable: when the
command ends (after ``LINGER_S``), times out, the turn is cancelled or Cortana
exits, all of them are killed. Elsewhere the process group is killed, which a
``setsid`` child escapes. Output is read as it comes and only its head and
tail are kept, so a command that prints gigabytes costs kilobytes. Both are
``shellprocess.py``'s, the one way these tools start a process.

Where the sandbox holds, the model may ask for a command to run outside it
(``sandbox=false``: the network, writes outside the workspace, ``.git/``);
the gate asks the user for each such call.

Given a :class:`~cortana.tools.builtin.background.BackgroundCommands`, ``run_command`` also takes
``background=true``: the same command, started the same way and asked for the same way, returns at once with an
id and its first output, and runs on until ``stop_command`` or the end of the session (``background.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field

from cortana.errors import ToolError
from cortana.safegit import safe_git_environment
from cortana.sandbox.policy import Confined
from cortana.tools import RunContext, Tool
from cortana.tools.builtin.background import BackgroundCommands
from cortana.tools.builtin.files import MAX_OUTPUT_CHARS
from cortana.tools.builtin.shellprocess import LINGER_S, HeadTail, start_shell
from cortana.tools.builtin.workspace import Workspace

__all__ = ["MAX_COMMAND_TIMEOUT", "Finished", "HeadTail", "command_tool", "run_shell"]

MAX_COMMAND_TIMEOUT = 600.0
"""The longest timeout a command may ask for (seconds)."""
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


def command_tool(
    space: Workspace,
    default_timeout: float = 120.0,
    *,
    trusted_git: bool = False,
    background: BackgroundCommands | None = None,
) -> Tool:
    """``run_command``, run in ``space``'s root, confined by ``space.sandbox``.

    Args:
        space: the workspace.
        default_timeout: seconds a command runs when the model asks for no other limit.
        trusted_git: let the git a command runs use the repository's hooks and the programs its config names
            (fsmonitor, pager, textconv, aliases…); by default they are switched off
            (:func:`cortana.safegit.safe_git_environment`): only for a folder whose user trusts it.
        background: where commands started with ``background=true`` are kept (their owner ends them); None: no
            ``background`` argument.
    """
    default_timeout = min(default_timeout, MAX_COMMAND_TIMEOUT)
    box = space.sandbox

    async def environment_for(confine: bool) -> dict[str, str]:
        environment = box.child_environment(secrets=not confine)  # approved outside the sandbox: as the user's shell
        if not trusted_git:
            environment = await asyncio.to_thread(safe_git_environment, space.root, environment, sandbox=box)
        return environment

    async def run(command: str, timeout: float, confine: bool) -> str:
        environment = await environment_for(confine)
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

    async def start(command: str, confine: bool, context: RunContext | None) -> str:
        """The command started in the background, kept by ``background`` (see ``background.py``)."""
        assert background is not None
        environment = await environment_for(confine)
        owner = context.thread.thread_id if context is not None else None
        return await background.start(command, space.root, environment, box.confined(confine=confine), owner=owner)

    # In the home folder (or /) the user approves each command as it is: it runs as their shell would run it,
    # since confined it could write nothing there. Elsewhere confined as far as this kernel can.
    confine_asked = box.too_wide is None
    timeout_limit = MAX_COMMAND_TIMEOUT + 10
    if background is not None and box.confines:

        async def run_command_kept(
            command: str,
            timeout: Annotated[float, Field(gt=0, le=MAX_COMMAND_TIMEOUT)] = default_timeout,
            sandbox: bool = True,
            background: bool = False,
            context: RunContext | None = None,
        ) -> str:
            """Run a shell command in the workspace, in a sandbox: no network, writes only in the workspace.

            Args:
                timeout: seconds before it is stopped.
                sandbox: false to run it outside the sandbox (network, other folders, .git/); the user is asked.
                background: true to start it and go on (a server, a watcher); it runs until stop_command.
            """
            if background:
                return await start(command, sandbox is not False, context)
            return await run(command, timeout, sandbox is not False)

        return Tool(run_command_kept, name="run_command", timeout=timeout_limit, kind="execute")

    if background is not None:

        async def run_command_asked_kept(
            command: str,
            timeout: Annotated[float, Field(gt=0, le=MAX_COMMAND_TIMEOUT)] = default_timeout,
            background: bool = False,
            context: RunContext | None = None,
        ) -> str:
            """Run a shell command in the workspace.

            Args:
                timeout: seconds before it is stopped.
                background: true to start it and go on (a server, a watcher); it runs until stop_command.
            """
            if background:
                return await start(command, confine_asked, context)
            return await run(command, timeout, confine_asked)

        return Tool(run_command_asked_kept, name="run_command", timeout=timeout_limit, kind="execute")

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

        return Tool(run_command, timeout=timeout_limit, kind="execute")

    async def run_command_asked(
        command: str, timeout: Annotated[float, Field(gt=0, le=MAX_COMMAND_TIMEOUT)] = default_timeout
    ) -> str:
        """Run a shell command in the workspace.

        Args:
            timeout: seconds before it is stopped.
        """
        return await run(command, timeout, confine_asked)

    return Tool(run_command_asked, name="run_command", timeout=timeout_limit, kind="execute")


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
    output = HeadTail(limit * 3 // 4, limit // 4)
    process = await start_shell(command, cwd, environment, output.add, confined=confined)
    lingered = timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await process.exited  # the shell's exit
            try:  # what the command left may still run and print; the reaper exits once nothing is left
                await asyncio.wait_for(asyncio.shield(process.ended), LINGER_S)
            except TimeoutError:
                lingered = True
    except TimeoutError:
        timed_out = True
    finally:
        await process.stop()  # what is left: background children, or everything on a timeout
    returncode = None if timed_out else process.returncode
    return Finished(
        returncode, output.text(hint, limit), timed_out=timed_out, lingered=lingered, refused=process.refused
    )
