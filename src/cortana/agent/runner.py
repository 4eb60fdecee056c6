"""``AgentRunner``: many complete agent runs at once, under a concurrency limit, here or on Ray.

Each task gets one :class:`AgentOutcome`, in input order: its result or the
exception it ended with, its metrics and timing. One task failing never
cancels the others; a task past its timeout ends with ``TimeoutError``;
cancelling the runner cancels every run cleanly. ``backend="ray"`` runs the
same batch on a Ray cluster, one worker process per slot (``ray_runner.py``).
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self, TypeAlias, overload

from cortana.agent.agent import Agent
from cortana.agent.events import EventHandler, TaskFinished, TaskStarted
from cortana.agent.ray_runner import (
    AgentFactory,
    RayPool,
    RayWorker,
    WorkerDiedError,
    build_agent,
    connect,
    disconnect,
    require_ray,
)
from cortana.errors import MaxToolIterationsError, UserError
from cortana.messages import RunMetrics, RunResult, ThreadRef

__all__ = ["AgentFactory", "AgentOutcome", "AgentRunner", "AgentTask", "BatchResult"]

Slot: TypeAlias = Callable[[], AbstractAsyncContextManager[Any]]
"""Waits for room to run one more task and holds it (locally a semaphore; on Ray a worker, which it yields)."""

Execute: TypeAlias = Callable[[str, "AgentTask", Any], Awaitable[RunResult]]
"""Runs one task, given its label and what its slot holds."""


@dataclass
class AgentTask:
    """One run to schedule.

    Attributes:
        prompt: the user's message.
        agent: the agent to run it, or a factory that builds it (default: the runner's).
        thread: its conversation (default: a new one).
        context: per-turn context for the run.
        name: a label for progress rows.
        run_id: its durable run's id, in a runner with ``durable=True`` (default: a new one, on the outcome's task).
    """

    prompt: str
    agent: Agent | AgentFactory | None = None
    thread: ThreadRef | str | None = None
    context: str | None = None
    name: str | None = None
    run_id: str | None = None


@dataclass
class AgentOutcome:
    """How one task ended.

    Attributes:
        task: the task (in a durable batch, with its ``run_id``: what ``agent.resume_run`` takes).
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
    """Runs many tasks, at most ``max_concurrency`` at a time, in this process or on a Ray cluster.

    Args:
        agent: the agent for tasks that do not name their own, or a factory: a function of no
            arguments (plain or async) that builds one, its engine client included. The local
            backend calls a factory once and keeps the agent; the Ray backend takes factories
            only (an ``Agent`` holds connections that cannot travel) and calls each once per worker.
        backend: ``"local"``, this process's event loop; or ``"ray"``, Ray actors, one worker
            process per slot (``pip install 'cortana[ray]'``; see docs/runner.md).
        address: the Ray cluster: ``None`` does what ``ray.init()`` does (the cluster ``ray start``
            started on this machine, else a new local instance, which ``close()`` shuts down),
            ``"auto"`` joins the cluster this machine is a node of, ``"HOST:6379"`` the cluster of
            that head node, ``"ray://HOST:10001"`` a remote cluster through Ray Client. When this
            process has already called ``ray.init``, that connection is used as it is.
        max_concurrency: runs in flight at once.
        max_per_node: with Ray, runs in flight at once on one node (default: ``max_concurrency``);
            runs are spread over the nodes, the least loaded first, either way.
        timeout: seconds each run may take (None: no limit).
        logger: gets a ``TaskStarted`` and a ``TaskFinished`` per task (``AgentLogger`` shows one row each).
        ray_init: more keyword arguments for ``ray.init`` when the runner starts or joins Ray
            (``runtime_env=``, ``namespace=``, ``num_cpus=``...).
        durable: run each task as a durable run (``cortana.durable``, local backend only), its id the task's
            ``run_id`` or a new one: a batch cut off by a crash is finished task by task with ``agent.resume_run``.
    """

    def __init__(
        self,
        agent: Agent | AgentFactory | None = None,
        *,
        backend: Literal["local", "ray"] = "local",
        address: str | None = None,
        max_concurrency: int = 4,
        max_per_node: int | None = None,
        timeout: float | None = None,
        logger: EventHandler | None = None,
        ray_init: Mapping[str, Any] | None = None,
        durable: bool = False,
    ) -> None:
        if durable and backend != "local":
            raise UserError("durable=True runs tasks on the local backend only (a Ray worker's run has no record).")
        if max_concurrency < 1:
            raise UserError(f"max_concurrency must be at least 1, got {max_concurrency}.")
        if backend not in ("local", "ray"):
            raise UserError(f"backend must be 'local' or 'ray', got {backend!r}.")
        if backend == "local" and (address, max_per_node, ray_init) != (None, None, None):
            raise UserError("address=, max_per_node= and ray_init= are settings of backend='ray'.")
        if address is not None and not isinstance(address, str):
            raise UserError(
                f"address must be None or a string ('auto', 'HOST:6379', 'ray://HOST:10001'), got {address!r}."
            )
        if max_per_node is not None and max_per_node < 1:
            raise UserError(f"max_per_node must be at least 1, got {max_per_node}.")
        if agent is not None and not isinstance(agent, Agent) and not callable(agent):
            raise UserError(f"AgentRunner takes an Agent or a function that builds one, got {type(agent).__name__}.")
        if backend == "ray":
            require_ray()
            if isinstance(agent, Agent):
                raise UserError(_AGENT_ON_RAY.format(where="AgentRunner(agent)"))
        self.agent = agent
        self.backend = backend
        self.address = address
        self.max_concurrency = max_concurrency
        self.max_per_node = max_per_node
        self.timeout = timeout
        self.logger = logger
        self.ray_init: Mapping[str, Any] = ray_init or {}
        self.durable = durable
        self._built: dict[AgentFactory, asyncio.Future[Agent]] = {}
        self._ray_started = False

    async def run(self, tasks: Iterable[AgentTask | str]) -> BatchResult:
        """Run every task; returns their outcomes in input order."""
        items = [task if isinstance(task, AgentTask) else AgentTask(task) for task in tasks]
        if self.durable:  # each task's run id, known before it starts (the outcome's task carries it)
            items = [replace(task, run_id=task.run_id or uuid.uuid4().hex) for task in items]
        for index, task in enumerate(items):
            source = task.agent or self.agent
            if source is None:
                raise UserError(f"Task {index} has no agent: give AgentRunner(agent) or AgentTask(agent=...).")
            if self.backend == "ray" and isinstance(source, Agent):
                raise UserError(_AGENT_ON_RAY.format(where=f"Task {index}'s AgentTask(agent=...)"))
        started = time.perf_counter()
        if not items:
            return BatchResult([], 0.0)
        async with self._on_ray(items) if self.backend == "ray" else self._here() as (slot, execute):
            runs = [asyncio.create_task(self._run_one(index, task, slot, execute)) for index, task in enumerate(items)]
            try:
                outcomes = await asyncio.gather(*runs)
            except BaseException:
                for run in runs:
                    run.cancel()
                await asyncio.gather(*runs, return_exceptions=True)
                raise
        return BatchResult(list(outcomes), time.perf_counter() - started)

    async def close(self) -> None:
        """Close the agents this runner built from factories; shut Ray down if this runner started it."""
        built, self._built = self._built, {}
        for future in built.values():
            if future.done() and not future.cancelled() and future.exception() is None:
                agent = future.result()
                await agent.aclose()
                if agent.model is not None:
                    await agent.model.aclose()
        if self._ray_started:
            self._ray_started = False
            disconnect()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _run_one(self, index: int, task: AgentTask, slot: Slot, execute: Execute) -> AgentOutcome:
        outcome = AgentOutcome(task=task)
        label = task.name or f"task {index + 1}"
        async with slot() as held:
            outcome.started = time.perf_counter()
            if self.logger is not None:
                self.logger.handle(TaskStarted(label, task.prompt))
            try:
                async with asyncio.timeout(self.timeout) as deadline:
                    outcome.result = await execute(label, task, held)
                outcome.metrics = outcome.result.metrics
            except TimeoutError as error:
                outcome.error = error
                if deadline.expired():  # the runner's limit, not a TimeoutError the run raised itself
                    outcome.error = TimeoutError(
                        f"{label} did not finish within {self.timeout:g}s (AgentRunner timeout); raise timeout= "
                        "if runs need longer."
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

    def _source(self, task: AgentTask) -> Agent | AgentFactory:
        source = task.agent or self.agent
        assert source is not None  # run() checked
        return source

    def _factory(self, task: AgentTask) -> AgentFactory:
        source = self._source(task)
        assert not isinstance(source, Agent)  # run() checked: the Ray backend takes factories only
        return source

    # -- local: this event loop, under a semaphore

    @asynccontextmanager
    async def _here(self) -> AsyncIterator[tuple[Slot, Execute]]:
        semaphore = asyncio.Semaphore(self.max_concurrency)
        yield (lambda: semaphore), self._run_here

    async def _run_here(self, label: str, task: AgentTask, held: None) -> RunResult:
        source = self._source(task)
        agent = source if isinstance(source, Agent) else await self._built_from(source)
        run_id = task.run_id if self.durable else None
        return await agent.run(task.prompt, thread=task.thread, context=task.context, run_id=run_id)

    async def _built_from(self, factory: AgentFactory) -> Agent:
        """The factory's agent, built once for the runner's life (concurrent first tasks share one build)."""
        building = self._built.get(factory)
        if building is None:
            building = self._built[factory] = asyncio.ensure_future(build_agent(factory))
        try:
            return await asyncio.shield(building)
        except Exception:
            if self._built.get(factory) is building:
                del self._built[factory]  # a factory that failed is tried again by the next task
            raise

    # -- Ray: one actor per slot, spread over the cluster's nodes (ray_runner.py)

    @asynccontextmanager
    async def _on_ray(self, items: list[AgentTask]) -> AsyncIterator[tuple[Slot, Execute]]:
        self._ray_started = connect(self.address, self.ray_init) or self._ray_started
        factories = dict.fromkeys(self._factory(task) for task in items)
        size = min(self.max_concurrency, len(items))
        pool = await RayPool.start(factories, size=size, per_node=self.max_per_node or self.max_concurrency)
        finished = False
        try:
            yield pool.worker, functools.partial(self._run_on_ray, pool)
            finished = True
        finally:
            await pool.stop(graceful=finished)

    async def _run_on_ray(self, pool: RayPool, label: str, task: AgentTask, worker: RayWorker | None) -> RunResult:
        if worker is None:
            raise WorkerDiedError(
                f"No Ray worker was left to run {label}: every worker of this batch died and no alive node had room "
                "for another."
            )
        factory = pool.ship(self._factory(task))
        return await worker.run(label, factory, task.prompt, task.thread, task.context)


_AGENT_ON_RAY = (
    "{where} is an Agent, which cannot travel to Ray workers (it holds its engine client's connections). "
    "Give a factory instead, a function that builds the agent on the worker: "
    "AgentRunner(make_agent, backend='ray') with def make_agent(): return Agent(OpenAICompatClient(...), ...)."
)
