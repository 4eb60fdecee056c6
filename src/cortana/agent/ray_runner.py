"""The Ray backend of ``AgentRunner``: the runs of a batch spread over the nodes of a Ray cluster.

``AgentRunner(factory, backend="ray")`` uses this module. Nothing here imports ``ray`` until such
a runner runs a batch, so ``import cortana`` never pays for it (``import ray`` alone takes 0.4 s).

How a batch runs: :class:`RayPool` places Ray actors on the alive nodes, the least loaded first,
at most ``max_per_node`` on one node and ``max_concurrency`` in all (never more than there are
tasks), each pinned to its node. An actor is one worker process that runs one task at a time
(:class:`RunWorker`): it builds the agent from the task's factory the first time it meets that
factory (the factory travels once, by ``ray.put``), so the engine client is made on the worker,
and it sends back the ``RunResult`` or the exception the run ended with. A process per slot keeps
the runs apart: a worker that dies (killed, out of memory, a crashing extension) fails only the
task it was running, with :class:`WorkerDiedError`, and its actor is replaced. A run cancelled on
the caller (a timeout, or the whole batch cancelled) is cancelled on its actor by ``ray.cancel``;
the actors close their agents and are killed when the batch ends.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import os
import pickle
import re
import sys
import traceback
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from cortana.agent.agent import Agent
from cortana.config import RAY_CLUSTER_SWITCH, keep_ray_on_this_machine, ray_cluster_address
from cortana.errors import UserError, WorkerDiedError
from cortana.messages import RunResult, ThreadRef

__all__ = [
    "AgentFactory",
    "RayPool",
    "RayWorker",
    "RunWorker",
    "WorkerDiedError",
    "WorkerReply",
    "build_agent",
    "connect",
    "disconnect",
    "require_ray",
]

AgentFactory: TypeAlias = Callable[[], "Agent | Awaitable[Agent]"]
"""A function of no arguments that builds an agent (its engine client included); it may be async."""

RECYCLE_GRACE = 5.0
"""Seconds a cancelled run may take to stop before its worker is killed and replaced."""

CLOSE_GRACE = 10.0
"""Seconds the workers get at the end of a batch to finish background work and close their agents."""


def require_ray() -> None:
    """Raise ``UserError`` naming the extra to install when Ray is missing (without importing it)."""
    if importlib.util.find_spec("ray") is None:
        raise UserError("AgentRunner(backend='ray') needs Ray, which is not installed: pip install 'cortana[ray]'.")


def connect(address: str | None, options: Mapping[str, Any]) -> bool:
    """Initialize Ray unless this process already has; True when this call started or joined it.

    ``address=None`` (and no ``RAY_ADDRESS``) starts a Ray instance of this process that listens on
    loopback only, its auth token readable by this user only: a cluster, even the one ``ray start``
    started on this machine, is joined only when named (``address="auto"``, an address, or
    ``RAY_ADDRESS``). Always without the dashboard and without forwarding the workers' output here;
    ``options`` are more keyword arguments for ``ray.init`` and win over those defaults.
    """
    local = address is None and ray_cluster_address() is None
    imported_before = "ray" in sys.modules
    if local and not keep_ray_on_this_machine():
        warnings.warn(
            f"{RAY_CLUSTER_SWITCH} is set to enable clusters: the local Ray instance listens on every interface.",
            stacklevel=3,
        )
    import ray

    if ray.is_initialized():
        return False
    if local and imported_before:
        warnings.warn(
            "Ray was imported before the runner could keep its local instance on this machine; it may listen on "
            f"every interface. Import Ray after starting the runner, or set {RAY_CLUSTER_SWITCH}=0 first.",
            stacklevel=3,
        )
    defaults: dict[str, Any] = {}
    if address is None or "://" not in address:  # a Ray Client connection takes only ray.init's client arguments
        defaults = {"include_dashboard": False, "log_to_driver": False}
    ray.init(address="local" if local else address, **{**defaults, **options})
    if local:
        private_ray_token()
    return True


def private_ray_token() -> None:
    """Make Ray's auth token (``~/.ray/auth_token``, written 0644 by Ray) readable by this user only."""
    folder = Path.home() / ".ray"
    for path, mode in ((folder, 0o700), (folder / "auth_token", 0o600)):
        with suppress(OSError):
            if path.exists() and not path.is_symlink() and path.stat().st_uid == os.getuid():
                path.chmod(mode)


def disconnect() -> None:
    """Shut down the Ray connection (or local instance) this process holds."""
    import ray

    ray.shutdown()


async def build_agent(factory: AgentFactory) -> Agent:
    """Call ``factory`` (awaiting it when it is async) and check that it made an ``Agent``."""
    built = factory()
    agent = await built if inspect.isawaitable(built) else built
    if not isinstance(agent, Agent):
        raise UserError(f"The agent factory {factory!r} returned {type(agent).__name__}, not an Agent.")
    return agent


# -- the worker side -----------------------------------------------------------------------------


@dataclass
class WorkerReply:
    """What a worker sends back for one task: the result, or the exception the run ended with.

    The exception travels as the pickle of its class, ``args`` and attributes rather than as
    itself: unpickling an exception calls its class with ``args`` alone, which fails for every
    error with keyword-only arguments (``MaxToolIterationsError`` and its partial metrics).

    Attributes:
        result: the run's result, when it completed.
        error: the pickled exception (``None`` when it does not pickle).
        error_text: ``"ModelError: engine died"``, for when ``error`` cannot be rebuilt here.
        remote_traceback: the traceback on the worker, added to the rebuilt exception as a note.
    """

    result: RunResult | None = None
    error: bytes | None = None
    error_text: str = ""
    remote_traceback: str = ""

    @classmethod
    def failed(cls, error: BaseException) -> WorkerReply:
        """The reply for a run that raised ``error``."""
        try:
            data: bytes | None = pickle.dumps((type(error), error.args, dict(vars(error))))
        except Exception:  # an attribute or the class itself does not pickle: the text still travels
            data = None
        return cls(
            error=data,
            error_text=f"{type(error).__name__}: {error}",
            remote_traceback="".join(traceback.format_exception(error)),
        )

    def exception(self) -> BaseException:
        """The run's exception, rebuilt (a ``RuntimeError`` with its text where it cannot be)."""
        error: BaseException | None = None
        if self.error is not None:
            with suppress(Exception):  # the class may not be importable on this side
                kind, args, state = pickle.loads(self.error)
                error = kind.__new__(kind, *args)
                error.args = args
                error.__dict__.update(state)
        if error is None:
            error = RuntimeError(self.error_text)
        if self.remote_traceback:
            error.add_note("Raised on a Ray worker:\n" + self.remote_traceback.rstrip())
        return error


class RunWorker:
    """The body of one Ray actor: builds agents from factories on the worker and runs one task at a time.

    Agents are kept per factory for the actor's life (one batch), as the local backend keeps one
    agent for all the tasks that share it.
    """

    def __init__(self) -> None:
        self.agents: dict[str, Agent] = {}

    async def ready(self) -> str:
        """The id of the node this worker runs on; answering at all means the process is up."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    async def run(
        self, factory: list[Any], prompt: str, thread: ThreadRef | str | None, context: str | None
    ) -> WorkerReply:
        """Run one task. ``factory`` is ``[ObjectRef]``, nested so that Ray does not fetch it on every call."""
        try:
            agent = await self.agent(factory[0])
            result = await agent.run(prompt, thread=thread, context=context)
        except Exception as error:  # the run's failure is the task's outcome, never the actor's
            return WorkerReply.failed(error)
        return WorkerReply(result=result)

    async def agent(self, factory_ref: Any) -> Agent:
        """The agent of this factory, built on first use."""
        key = factory_ref.hex()
        if key not in self.agents:
            self.agents[key] = await build_agent(await factory_ref)
        return self.agents[key]

    async def close(self) -> None:
        """Let the agents finish background work, then close them and the engine clients they made."""
        for agent in self.agents.values():
            await agent.aclose(timeout=CLOSE_GRACE / 2)
            if agent.model is not None:
                await agent.model.aclose()
        self.agents.clear()


# -- the caller side -----------------------------------------------------------------------------


@dataclass(eq=False)
class RayWorker:
    """One actor of the pool, as the caller sees it.

    Attributes:
        handle: the Ray actor handle.
        node: the id of the node it is pinned to.
        running: the ``ObjectRef`` of a cancelled task it may still be running.
        dead: its process died; the pool replaces it.
    """

    handle: Any
    node: str
    running: Any = None
    dead: bool = False

    async def run(
        self, label: str, factory_ref: Any, prompt: str, thread: ThreadRef | str | None, context: str | None
    ) -> RunResult:
        """Run one task on this worker; raises what the run raised, or ``WorkerDiedError``."""
        import ray

        ref = self.handle.run.remote([factory_ref], prompt, thread, context)
        try:
            reply: WorkerReply = await ref
        except asyncio.CancelledError:
            ray.cancel(ref)
            self.running = ref  # the pool reuses this worker once the cancelled run has stopped
            raise
        except lost_worker_errors() as error:
            self.dead = True
            raise WorkerDiedError(
                f"The Ray worker running {label} died before the run finished ({describe_loss(error)}); the other "
                "tasks ran on. A tool, an extension or the engine client crashed the process, or something killed "
                "it (out of memory?); Ray's error, chained as __cause__, has the exit detail."
            ) from error
        if reply.result is None:
            raise reply.exception()
        return reply.result


class RayPool:
    """The Ray actors of one batch, at most ``per_node`` on each node, handed out one task at a time.

    Build it with :meth:`start`; end it with :meth:`stop`.
    """

    def __init__(self, per_node: int) -> None:
        self.per_node = per_node
        self.workers: list[RayWorker] = []
        self.factories: dict[AgentFactory, Any] = {}
        self.idle: asyncio.Queue[RayWorker | None] = asyncio.Queue()
        self.background: set[asyncio.Task[None]] = set()

    @classmethod
    async def start(cls, factories: Iterable[AgentFactory], *, size: int, per_node: int) -> RayPool:
        """Ship the factories to the cluster and start up to ``size`` workers; returns once they are up.

        Raises ``UserError`` when a factory cannot be sent to the workers, or when no worker starts.
        """
        pool = cls(per_node)
        for factory in factories:
            pool.ship(factory)
        nodes = alive_nodes()
        while len(pool.workers) < size and (node := pool.place(nodes)) is not None:
            pool.workers.append(pool.spawn(node))
        answers = await asyncio.gather(
            *(worker.handle.ready.remote() for worker in pool.workers), return_exceptions=True
        )
        failures = [answer for answer in answers if isinstance(answer, BaseException)]
        if len(failures) == len(pool.workers):
            await pool.stop(graceful=False)
            cause = f"{type(failures[0]).__name__}: {failures[0]}" if failures else "the cluster has no alive node"
            raise UserError(
                f"No Ray worker could start ({cause}). Every node needs cortana installed, the same version as "
                "here (or pass ray_init={'runtime_env': {...}})."
            )
        if failures:
            warnings.warn(
                f"{len(failures)} of {len(pool.workers)} Ray workers could not start and were dropped "
                f"(first: {type(failures[0]).__name__}: {failures[0]})",
                RuntimeWarning,
                stacklevel=2,
            )
        for worker, answer in zip(list(pool.workers), answers, strict=True):
            if isinstance(answer, BaseException):
                pool.discard(worker)
            else:
                pool.idle.put_nowait(worker)
        return pool

    def ship(self, factory: AgentFactory) -> Any:
        """Put ``factory`` in the object store once; its ``ObjectRef``."""
        import ray

        if factory not in self.factories:
            try:
                self.factories[factory] = ray.put(factory)
            except Exception as error:
                raise UserError(
                    f"The agent factory {factory!r} cannot be sent to Ray workers ({type(error).__name__}: {error}). "
                    "Give a function (or a functools.partial of one) that builds the agent and its engine client, "
                    "capturing only plain values such as the engine's URL."
                ) from error
        return self.factories[factory]

    def place(self, nodes: list[str]) -> str | None:
        """The node with the fewest of this pool's live workers, among those with room; None if none has."""
        load = Counter(worker.node for worker in self.workers if not worker.dead)
        candidates = [node for node in nodes if load[node] < self.per_node]
        return min(candidates, key=lambda node: load[node]) if candidates else None

    def spawn(self, node: str) -> RayWorker:
        """Start a worker pinned to ``node`` (it runs calls once its process is up)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        pinned = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        # No CPU reserved: a run mostly waits on its engine. One task at a time: a process per run.
        options = {"num_cpus": 0, "max_concurrency": 1, "scheduling_strategy": pinned}
        return RayWorker(actor_class().options(**options).remote(), node)

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[RayWorker | None]:
        """Wait for an idle worker and hold it; ``None`` when every worker died and none could be replaced."""
        worker = await self.idle.get()
        if worker is None:
            self.idle.put_nowait(None)  # wakes the next task waiting, which finds no worker either
            yield None
            return
        try:
            yield worker
        finally:
            self.release(worker)

    def release(self, worker: RayWorker) -> None:
        """Hand ``worker`` back after a task: idle again, replaced if it died, or first stopped if cancelled."""
        if worker.dead:
            self.replace(worker)
        elif worker.running is not None:
            self.in_background(self.recycle(worker))
        else:
            self.idle.put_nowait(worker)

    async def recycle(self, worker: RayWorker) -> None:
        """Wait for a cancelled run to stop; a worker that does not stop in time is killed and replaced."""
        stuck_or_gone: tuple[type[Exception], ...] = (TimeoutError, *lost_worker_errors())
        try:
            await asyncio.wait_for(worker.running, RECYCLE_GRACE)
        except stuck_or_gone:
            worker.dead = True
        except Exception:  # TaskCancelledError: the run stopped as asked
            pass
        worker.running = None
        if worker.dead:
            self.replace(worker)
        else:
            self.idle.put_nowait(worker)

    def replace(self, worker: RayWorker) -> None:
        """Kill ``worker`` for good and start another where there is room (the fewest-loaded alive node)."""
        self.discard(worker)
        node = self.place(alive_nodes())
        if node is None:
            self.check_any_left()
            return
        fresh = self.spawn(node)
        self.workers.append(fresh)
        self.in_background(self.admit(fresh))

    async def admit(self, worker: RayWorker) -> None:
        """Hand a new worker out once its process is up, so its start never counts against a task's timeout."""
        try:
            await worker.handle.ready.remote()
        except Exception:  # it could not start (its node died): the pool goes on without it
            self.discard(worker)
            self.check_any_left()
            return
        self.idle.put_nowait(worker)

    def check_any_left(self) -> None:
        """With no worker left, wake the tasks waiting for one (they fail with ``WorkerDiedError``)."""
        if not self.workers:
            self.idle.put_nowait(None)

    def in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` alongside the batch; :meth:`stop` cancels what is left of it."""
        task = asyncio.create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def discard(self, worker: RayWorker) -> None:
        """Kill ``worker`` and forget it."""
        import ray

        worker.dead = True
        with suppress(Exception):  # already gone
            ray.kill(worker.handle, no_restart=True)
        self.workers.remove(worker)

    async def stop(self, *, graceful: bool) -> None:
        """Kill every worker; ``graceful`` first lets them close their agents (up to ``CLOSE_GRACE`` s)."""
        for task in list(self.background):
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        if graceful and self.workers:
            closing = asyncio.gather(*(worker.handle.close.remote() for worker in self.workers), return_exceptions=True)
            with suppress(TimeoutError):
                await asyncio.wait_for(closing, CLOSE_GRACE)
        for worker in list(self.workers):
            self.discard(worker)
        self.factories.clear()


def alive_nodes() -> list[str]:
    """The ids of the cluster's alive nodes that offer CPUs (all alive nodes, if none does).

    A head node started with ``--num-cpus=0`` is left out, as Ray leaves it out of CPU work.
    """
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    alive = [node for node in nodes if node.get("Alive")]
    working = [node for node in alive if node.get("Resources", {}).get("CPU", 0) > 0]
    return [str(node["NodeID"]) for node in working or alive]


def describe_loss(error: BaseException) -> str:
    """``pid 4242 on 10.0.0.2, exit type SYSTEM_ERROR``, from Ray's error text (else its first line)."""
    text = str(error)
    pid, ip, kind = (re.search(pattern, text) for pattern in (r"\bpid: (\d+)", r"\bip: (\S+)", r"exit type: (\w+)"))
    where = " ".join(part for part in (pid and f"pid {pid[1]}", ip and f"on {ip[1]}") if part)
    described = ", ".join(part for part in (where, kind and f"exit type {kind[1]}") if part)
    return described or (text.strip().splitlines() or [type(error).__name__])[0].rstrip(".")


def lost_worker_errors() -> tuple[type[Exception], ...]:
    """Ray's errors for a worker that is gone: its process died, or its actor could not be placed (its node died)."""
    from ray import exceptions

    return (exceptions.RayActorError, exceptions.WorkerCrashedError, exceptions.ActorUnschedulableError)


@functools.cache
def actor_class() -> Any:
    """``RunWorker`` as a Ray actor class (its options are given per actor, in :meth:`RayPool.spawn`)."""
    import ray

    return ray.remote(RunWorker)
