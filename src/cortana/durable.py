"""Durable runs: each model call and finished tool call recorded (DBOS), so a run whose process died is finished.

    result = await agent.run("Tidy the notes", run_id="tidy-1", durable=True)
    # the process is killed mid-run; in a new one, with an agent built the same way:
    result = await agent.resume_run("tidy-1")      # nothing finished runs again
    for run in cortana.durable.unfinished():        # what is left: id, prompt, started, steps
        print(run.run_id, run.prompt, run.started, run.steps)

Runs are recorded in DBOS's system database: :func:`configure`'s, else ``CORTANA_DURABLE_DB``, else the agent's
PostgreSQL memory's database, else ``durable.db`` in Cortana's data folder (``~/.local/share/cortana``). How a
replay works: ``cortana.agent.durable`` and docs/durable.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from cortana.agent import durable as _durable
from cortana.agent.durable import (
    WORKFLOW,
    UnfinishedRun,
    configure,
    database_url,
    shutdown,
    unfinished,
    unfinished_runs,
)

if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.agent.extensions import TurnExtension
    from cortana.messages import RunResult

__all__ = [
    "WORKFLOW",
    "UnfinishedRun",
    "configure",
    "database_url",
    "resume_run",
    "resume_run_sync",
    "shutdown",
    "unfinished",
    "unfinished_runs",
]

T = TypeVar("T")


async def resume_run(
    agent: Agent[T], run_id: str, *, extensions: Sequence[TurnExtension] | None = None
) -> RunResult[T]:
    """Finish the durable run ``run_id`` a process that died left unfinished (``agent.resume_run``, with the run's own
    ``extensions`` when it was started with some): replayed from its record, then live.

    Raises:
        UserError: an unknown run id, a run that finished, one still running, another agent or other extensions.
    """
    result: RunResult[Any] = await _durable.resume_run(agent, run_id, extensions=extensions)
    return result


def resume_run_sync(agent: Agent[T], run_id: str, *, extensions: Sequence[TurnExtension] | None = None) -> RunResult[T]:
    """:func:`resume_run` for code that has no event loop of its own."""
    result: RunResult[Any] = _durable.resume_run_sync(agent, run_id, extensions=extensions)
    return result
