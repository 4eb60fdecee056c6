"""``AgentRunner``: many complete agent runs at once, under a concurrency limit.

Each task gets one :class:`AgentOutcome`, in input order: its result or the
exception it ended with, its metrics and timing. One task failing never
cancels the others; a task past its timeout ends with ``TimeoutError``;
cancelling the runner cancels every run cleanly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

from cortana.agent.events import EventHandler, TaskFinished, TaskStarted
from cortana.errors import MaxToolIterationsError, UserError
from cortana.messages import RunMetrics, RunResult, ThreadRef

if TYPE_CHECKING:
    from cortana.agent.agent import Agent

__all__ = ["AgentOutcome", "AgentRunner", "AgentTask", "BatchResult"]


@dataclass
class AgentTask:
    """One run to schedule.

    Attributes:
        prompt: the user's message.
        agent: the agent to run it (default: the runner's).
        thread: its conversation (default: a new one).
        context: per-turn context for the run.
        name: a label for progress rows.
    """

    prompt: str
    agent: Agent | None = None
    thread: ThreadRef | str | None = None
    context: str | None = None
    name: str | None = None


@dataclass
class AgentOutcome:
    """How one task ended.

    Attributes:
        task: the task.
        result: its ``RunResult``, when it completed.
        error: the exception it ended with, otherwise.
        metrics: what it cost (partial when it failed, where known).
        started: ``time.perf_counter()`` when it started running.
        duration: seconds it ran (waiting for a slot not included).
    """

    task: AgentTask
    result: RunResult | None = None
    error: BaseException | None = None
    metrics: RunMetrics = field(default_factory=RunMetrics)
    started: float = 0.0
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the run completed."""
        return self.result is not None


class BatchResult(Sequence[AgentOutcome]):
    """The outcomes of a batch, in input order, with the batch's totals."""

    def __init__(self, outcomes: list[AgentOutcome], elapsed: float) -> None:
        self.outcomes = outcomes
        self.elapsed = elapsed
        total = RunMetrics()
        for outcome in outcomes:
            total = total.merge(outcome.metrics)
        total.elapsed = elapsed
        self.metrics = total
        """Every count summed over the batch; ``elapsed`` is the batch's wall time."""

    @overload
    def __getitem__(self, index: int) -> AgentOutcome: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[AgentOutcome]: ...
    def __getitem__(self, index: int | slice) -> AgentOutcome | Sequence[AgentOutcome]:
        return self.outcomes[index]

    def __len__(self) -> int:
        return len(self.outcomes)

    @property
    def failed(self) -> list[AgentOutcome]:
        """The outcomes that ended with an error."""
        return [outcome for outcome in self.outcomes if not outcome.ok]


class AgentRunner:
    """Runs many tasks, at most ``max_concurrency`` at a time.

    Args:
        agent: the agent for tasks that do not name their own.
        max_concurrency: runs in flight at once.
        timeout: seconds each run may take (None: no limit).
        logger: gets a ``TaskStarted`` and a ``TaskFinished`` per task (``AgentLogger`` shows one row each).
    """

    def __init__(
        self,
        agent: Agent | None = None,
        *,
        max_concurrency: int = 4,
        timeout: float | None = None,
        logger: EventHandler | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise UserError(f"max_concurrency must be at least 1, got {max_concurrency}.")
        self.agent = agent
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.logger = logger

    async def run(self, tasks: Iterable[AgentTask | str]) -> BatchResult:
        """Run every task; returns their outcomes in input order."""
        items = [task if isinstance(task, AgentTask) else AgentTask(task) for task in tasks]
        for index, task in enumerate(items):
            if (task.agent or self.agent) is None:
                raise UserError(f"Task {index} has no agent: give AgentRunner(agent) or AgentTask(agent=...).")
        semaphore = asyncio.Semaphore(self.max_concurrency)
        started = time.perf_counter()
        runs = [asyncio.create_task(self._run_one(index, task, semaphore)) for index, task in enumerate(items)]
        try:
            outcomes = await asyncio.gather(*runs)
        except BaseException:
            for run in runs:
                run.cancel()
            await asyncio.gather(*runs, return_exceptions=True)
            raise
        return BatchResult(list(outcomes), time.perf_counter() - started)

    async def _run_one(self, index: int, task: AgentTask, semaphore: asyncio.Semaphore) -> AgentOutcome:
        agent = task.agent or self.agent
        assert agent is not None
        outcome = AgentOutcome(task=task)
        label = task.name or f"task {index + 1}"
        async with semaphore:
            outcome.started = time.perf_counter()
            if self.logger is not None:
                self.logger.handle(TaskStarted(label, task.prompt))
            try:
                async with asyncio.timeout(self.timeout):
                    outcome.result = await agent.run(task.prompt, thread=task.thread, context=task.context)
                outcome.metrics = outcome.result.metrics
            except TimeoutError:
                outcome.error = TimeoutError(
                    f"{label} did not finish within {self.timeout:g}s (AgentRunner timeout); raise timeout= if "
                    "runs need longer."
                )
            except Exception as error:  # one task failing never cancels the others
                outcome.error = error
                if isinstance(error, MaxToolIterationsError) and error.metrics is not None:
                    outcome.metrics = error.metrics
            outcome.duration = time.perf_counter() - outcome.started
            if self.logger is not None:
                failure = f"{type(outcome.error).__name__}: {outcome.error}" if outcome.error is not None else None
                self.logger.handle(TaskFinished(label, outcome.duration, outcome.metrics, failure))
        return outcome
