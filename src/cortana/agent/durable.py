"""Durable runs on DBOS (``agent.run(..., durable=True)``, ``agent.resume_run``; the public names: ``cortana.durable``).

A durable run is a DBOS workflow (``cortana.run``, its ID the run id) whose steps are the run's outside work, each
recorded in DBOS's system database as it finishes (``agent/recorder.py`` is the seam): every model call, every tool
call, the permission gate's decisions, a compaction's summary, and memory's reads and writes. The loop runs as it
always does. Resumed, the workflow runs again from the start and DBOS answers each step from its record instead of
running it: the model is not asked again, a tool that finished is not called again, a message stored before the
crash is not stored twice; once the record ends the run goes on live. No other engine or format is involved.

Where the record lives (one system database per process, chosen at its first durable run): what
:func:`configure` was given, else ``CORTANA_DURABLE_DB`` (a SQLAlchemy URL or a file path), else the agent's memory
when it is on PostgreSQL (its database; DBOS's tables in schema ``dbos``), else the SQLite file ``durable.db`` in
Cortana's data folder (:func:`cortana.config.data_dir`: ``$CORTANA_DATA_DIR``, else ``$XDG_DATA_HOME/cortana``, else
``~/.local/share/cortana``).

Each process runs DBOS under an executor ID of its own (host and pid) and listens to a queue of its own, so no
process picks up another's run: DBOS's recovery at launch finds nothing of this executor's, and a run is resumed only
by :func:`resume_run`, with the agent it needs, which puts it on this process's queue. DBOS runs a resumed workflow
on a loop of its own; the turn goes to the caller's loop, where its engine client and memory live. Steps run at
least once: a tool call cut off while it ran runs again on resume (one that finished never does).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import importlib.util
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

from cortana.agent.approvals import fingerprint
from cortana.agent.durable_steps import DbosRecorder
from cortana.agent.run import TurnRequest
from cortana.errors import UserError
from cortana.messages import Image, Message, RunResult, ThreadRef
from cortana.models.base import ModelSettings

if TYPE_CHECKING:
    from cortana.agent.extensions import TurnExtension
    from cortana.agent.run_config import RunConfig
    from cortana.agent.streamed import StreamedRun
    from cortana.memory.base import MemoryProvider, MemoryResolver
    from cortana.tools import Tool

__all__ = [
    "WORKFLOW",
    "UnfinishedRun",
    "configure",
    "database_url",
    "resume_run",
    "resume_run_sync",
    "run_durably",
    "shutdown",
    "unfinished",
]

WORKFLOW = "cortana.run"
"""The DBOS workflow every durable run is (its ID: the run id)."""

APPLICATION_VERSION = "cortana-durable-1"
"""DBOS's application version for every Cortana process: a run recorded by one Cortana is resumed by another (DBOS
would otherwise take a hash of the code, and a new release could resume nothing). Raised when the steps change."""


class _Runs(Protocol):
    """What this module needs of an ``Agent`` (it is not imported: ``Agent`` imports this module)."""

    @property
    def config(self) -> RunConfig: ...
    @property
    def memory(self) -> MemoryProvider | MemoryResolver | None: ...
    @property
    def extensions(self) -> tuple[TurnExtension, ...]: ...
    @property
    def tools(self) -> Sequence[Tool]: ...
    def stream_turn(self, request: TurnRequest) -> StreamedRun[Any]: ...


@dataclass(frozen=True, slots=True)
class UnfinishedRun:
    """A durable run that has not finished: its process died (or it was cancelled), or it is running now.

    Attributes:
        run_id: what ``agent.resume_run`` takes.
        prompt: the user's message it started with.
        agent: the name of the agent that ran it (only an agent of that name resumes it).
        thread: its conversation.
        started: when it started (UTC).
        steps: the steps recorded so far (model calls, tool calls, memory reads and writes...).
    """

    run_id: str
    prompt: str
    agent: str
    thread: ThreadRef
    started: datetime
    steps: int


class _RunSpec(BaseModel):
    """A durable run's request, as the workflow's input: what a resume starts the run again from."""

    agent: str
    tools: dict[str, str] = Field(default_factory=dict)
    """The agent's own tools: name -> a hash of its parameters (``approvals.fingerprint``)."""
    prompt: str
    thread: ThreadRef
    context: str | None = None
    history: list[Message] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)
    remember: bool = True
    unattended: bool = False
    use_tools: bool = True
    defer_approvals: bool = False
    images: list[Image] = Field(default_factory=list)
    extensions: list[str] | None = None
    """The names of the run's own extensions (``run(..., extensions=)``); ``None``: the agent's."""

    @classmethod
    def of(cls, agent: _Runs, request: TurnRequest) -> _RunSpec:
        own = None if request.extensions is None else [extension.name for extension in request.extensions]
        return cls(
            agent=agent.config.name,
            tools=fingerprint(agent.tools),
            prompt=request.prompt,
            thread=request.thread,
            context=request.context,
            history=list(request.history),
            settings=asdict(request.settings),
            remember=request.remember,
            unattended=request.unattended,
            use_tools=request.use_tools,
            defer_approvals=request.defer_approvals,
            images=list(request.images),
            extensions=own,
        )

    def request(self, extensions: Sequence[TurnExtension] | None, *, streamed: bool) -> TurnRequest:
        """The request the run started with (its own extensions given again by the caller)."""
        return TurnRequest(
            self.prompt,
            self.thread,
            context=self.context,
            history=self.history,
            settings=ModelSettings(**self.settings),
            remember=self.remember,
            unattended=self.unattended,
            extensions=extensions,
            use_tools=self.use_tools,
            streamed=streamed,
            defer_approvals=self.defer_approvals,
            images=self.images,
        )


# -- where the record lives --------------------------------------------------------------------------------------


_configured: str | None = None


def configure(database: str | os.PathLike[str] | None) -> None:
    """Choose the system database of this process's durable runs before the first one (``None``: the default).

    Args:
        database: a SQLAlchemy URL (``sqlite:///runs.db``, ``postgresql://user@host/db``) or a SQLite file's path.

    Raises:
        UserError: durable runs of this process already record elsewhere (:func:`shutdown` first).
    """
    global _configured
    url = _as_url(database) if database is not None else None
    if _dbos.url is not None and url is not None and url != _dbos.url:
        raise UserError(f"Durable runs of this process record in {_shown(_dbos.url)} already; shutdown() first.")
    _configured = url


def database_url(memory: object = None) -> str:
    """The system database a durable run of an agent with ``memory`` records in (see the module docstring)."""
    if _configured is not None:
        return _configured
    from cortana.config import data_dir, durable_database

    given = durable_database()
    if given is not None:
        return _as_url(given)
    memory = getattr(memory, "memory", memory)  # an agent, or its memory
    dsn = getattr(getattr(memory, "store", None), "dsn", None)
    if isinstance(dsn, str):
        return _postgres_url(dsn)
    return _as_url(data_dir() / "durable.db")


def _as_url(database: str | os.PathLike[str]) -> str:
    text = os.fspath(database)
    if "://" in text:
        return text
    path = Path(text).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def _postgres_url(dsn: str) -> str:
    """A libpq connection string or URI (what ``PostgresMemory`` takes) as the SQLAlchemy URL DBOS takes."""
    from psycopg.conninfo import conninfo_to_dict
    from sqlalchemy.engine import URL

    parts = {key: str(value) for key, value in conninfo_to_dict(dsn).items() if value is not None}
    url = URL.create(
        "postgresql",
        username=parts.pop("user", None),
        password=parts.pop("password", None),
        database=parts.pop("dbname", None),
        query=parts,  # host (a socket folder too), port, sslmode...: psycopg reads them as they are
    )
    return url.render_as_string(hide_password=False)


def _shown(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


# -- this process's DBOS -----------------------------------------------------------------------------------------


@dataclass
class _Live:
    """A run this process is running (or resuming): the agent it needs, and where its loop lives."""

    agent: _Runs
    loop: asyncio.AbstractEventLoop
    request: TurnRequest
    result: RunResult[Any] | None = None
    error: BaseException | None = None
    turn: concurrent.futures.Future[RunResult[Any]] | None = None


@dataclass
class _Dbos:
    """DBOS as this process runs it: its database, executor, queue, and the runs under way."""

    url: str | None = None
    executor: str = ""
    queue: str = ""
    live: dict[str, _Live] = field(default_factory=dict)
    stops_at_exit: bool = False
    """:func:`shutdown` runs at the process's exit (registered at the first launch)."""


_dbos = _Dbos()
_launching = threading.Lock()


async def _launched(memory: object = None) -> str:
    """Launch DBOS on the database for ``memory`` (once a process); its URL.

    Raises:
        UserError: DBOS is not installed, or this process records elsewhere.
    """
    if importlib.util.find_spec("dbos") is None:
        raise UserError("Durable runs are recorded by DBOS, which is not installed: pip install 'cortana[durable]'.")
    url = database_url(memory)
    if _dbos.url is None:
        await asyncio.to_thread(_launch, url)
    launched = _dbos.url or url
    if url != launched:
        raise UserError(
            f"Durable runs of this process record in {_shown(launched)}; this one would record in {_shown(url)}. "
            "One process has one system database: cortana.durable.configure(...) it before the first durable run."
        )
    return url


def _launch(url: str) -> None:
    with _launching:  # the first durable runs of a batch start together: one launches, the others wait for it
        if _dbos.url is None:
            _launch_dbos(url)


def _launch_dbos(url: str) -> None:
    from dbos import DBOS

    _quiet_dbos_log()
    _workflow()  # registered before the launch, as DBOS asks
    suffix = uuid.uuid4().hex[:8]
    _dbos.executor = f"cortana/{socket.gethostname()}/{os.getpid()}/{suffix}"
    _dbos.queue = f"cortana-{suffix}"
    DBOS(
        config={
            "name": "cortana",
            "system_database_url": url,
            "executor_id": _dbos.executor,  # recovery at launch looks for this executor's runs only: none
            "application_version": APPLICATION_VERSION,
            "log_level": "WARNING",
        }
    )
    DBOS.listen_queues([_dbos.queue])  # another process's queue is never dequeued here, nor this one's there
    DBOS.launch()
    DBOS.register_queue(_dbos.queue, polling_interval_sec=0.1)
    if not _dbos.stops_at_exit:
        atexit.register(shutdown)
        _dbos.stops_at_exit = True
    _dbos.url = url


def _quiet_dbos_log() -> None:
    """DBOS's log goes where the application's logging sends it (not a console handler of its own, which would write
    over the terminal), less its copy of a run's error: the caller gets that error itself."""
    log = logging.getLogger("dbos")
    if not log.handlers:
        log.addHandler(logging.NullHandler())  # DBOS adds its console handler only to a logger without one
        log.propagate = True
    if not any(isinstance(f, _NoWorkflowErrors) for f in log.filters):
        log.addFilter(_NoWorkflowErrors())


class _NoWorkflowErrors(logging.Filter):
    """Drops DBOS's record of an exception a workflow raised (the run's own error, which its caller gets)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Exception encountered in")


def shutdown() -> None:
    """Stop this process's DBOS (the next durable run launches it again, on the database then chosen)."""
    if _dbos.url is None:
        return
    from dbos import DBOS

    with contextlib.suppress(Exception):  # a queue left behind is only a row nobody listens to
        DBOS.delete_queue(_dbos.queue)
    DBOS.destroy()
    _dbos.url = None
    with contextlib.suppress(RuntimeError):  # DBOS made its pool, now shut, this loop's default: a fresh one
        asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor())


# -- the workflow -----------------------------------------------------------------------------------------------


_registered: Callable[[str], Coroutine[Any, Any, str]] | None = None


def _workflow() -> Callable[[str], Coroutine[Any, Any, str]]:
    """The ``cortana.run`` workflow, registered with DBOS on first use."""
    global _registered
    if _registered is None:
        from dbos import DBOS

        _registered = DBOS.workflow(name=WORKFLOW)(_run_workflow)
    return _registered


async def _run_workflow(spec: str) -> str:
    """One durable run: its turn, with the recorder, on the loop of the process's caller.

    Started by :func:`run_durably` it runs on the caller's loop already; resumed, DBOS runs it on a loop of its own,
    and the turn goes to the caller's (its engine client and memory belong there), DBOS's context with it.
    """
    from dbos import DBOS

    run_id = DBOS.workflow_id
    live = _dbos.live.get(run_id or "")
    if live is None:  # the queue is this process's own: only resume_run puts a run on it
        raise UserError(f"No agent in this process for durable run {run_id!r}: resume it with agent.resume_run.")
    request = replace(live.request, recorder=DbosRecorder())
    live.turn = asyncio.run_coroutine_threadsafe(live.agent.stream_turn(request).get_result(), live.loop)
    try:
        live.result = await asyncio.wrap_future(live.turn)
    except Exception as error:
        live.error = error
        # DBOS keeps the error: a plain one it can always read back (the caller gets the original)
        raise RuntimeError(f"{type(error).__name__}: {error}") from None
    return json.dumps({"status": live.result.status, "output": str(live.result.output)[:2000]})


async def _execute(run_id: str, live: _Live, start: Callable[[], Awaitable[Any]]) -> RunResult[Any]:
    """Run ``live`` as workflow ``run_id`` (``start`` starts it or puts it on this process's queue) to its end."""
    _dbos.live[run_id] = live
    try:
        handle = await start()
        try:
            await handle.get_result(polling_interval_sec=0.05)
        except BaseException:
            if live.turn is not None:
                live.turn.cancel()  # a cancelled caller stops the turn; the run stays unfinished, resumable
            if live.error is not None:
                raise live.error from None
            raise
    finally:
        del _dbos.live[run_id]
    assert live.result is not None
    return live.result


async def run_durably(agent: _Runs, request: TurnRequest, run_id: str | None = None) -> RunResult[Any]:
    """``agent.run(..., durable=True)``: the turn ``request`` asks for, as DBOS workflow ``run_id`` (a new id when
    ``None``; ``result`` does not carry it, so name one to resume by).

    Raises:
        UserError: a durable run of that id exists already (finished: pick another id; unfinished:
            ``agent.resume_run``), or this process records elsewhere.
    """
    run_id = run_id or uuid.uuid4().hex
    await _launched(agent.memory)
    from dbos import DBOS, SetWorkflowID

    status = await DBOS.get_workflow_status_async(run_id)
    if status is not None:
        finished = status.status in ("SUCCESS", "ERROR")
        raise UserError(
            f"A durable run {run_id!r} exists already ({status.status.lower()}): "
            + ("give this run another run_id." if finished else f"agent.resume_run({run_id!r}) finishes it.")
        )
    spec = _RunSpec.of(agent, request).model_dump_json()
    live = _Live(agent, asyncio.get_running_loop(), request)

    async def start() -> Any:
        with SetWorkflowID(run_id):
            return await DBOS.start_workflow_async(_workflow(), spec)

    return await _execute(run_id, live, start)


async def resume_run(agent: _Runs, run_id: str, *, extensions: Sequence[TurnExtension] | None = None) -> RunResult[Any]:
    """Finish the durable run ``run_id``, which a process that died (or a cancelled caller) left unfinished: its
    recorded steps are replayed (no model call asked again, no finished tool call run again, nothing stored twice),
    then it goes on live.

    Args:
        agent: an agent built as the one that started it (its name, tools, memory on the same store).
        run_id: the run's id (:func:`unfinished` lists them).
        extensions: the run's own extensions, when it was started with ``extensions=`` (their names must match).

    Raises:
        UserError: no durable run of that id, one that finished (or ended with an error), one still running, or
            an agent of another name or other extensions than the run's.
    """
    where = await _launched(agent.memory)
    from dbos import DBOS

    status = await DBOS.get_workflow_status_async(run_id)
    if status is None or status.name != WORKFLOW:
        raise UserError(
            f"No durable run {run_id!r} in {_shown(where)}: cortana.durable.unfinished() lists the runs left to "
            "resume (started elsewhere? the same database must be chosen here: configure() or CORTANA_DURABLE_DB)."
        )
    _check_resumable(run_id, status.status, status.executor_id)
    spec = _RunSpec.model_validate_json(status.input["args"][0] if status.input else "{}")
    _check_agent(run_id, spec, agent, extensions)
    streamed = agent.config.logger is not None
    live = _Live(agent, asyncio.get_running_loop(), spec.request(extensions, streamed=streamed))
    return await _execute(run_id, live, lambda: DBOS.resume_workflow_async(run_id, queue_name=_dbos.queue))


def resume_run_sync(agent: _Runs, run_id: str, *, extensions: Sequence[TurnExtension] | None = None) -> RunResult[Any]:
    """:func:`resume_run` for code that has no event loop of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(resume_run(agent, run_id, extensions=extensions))
    raise UserError(f"resume_run_sync cannot run inside a running event loop: use `await agent.resume_run({run_id!r})`")


def _check_resumable(run_id: str, status: str, executor: str | None) -> None:
    """Refuse a run that finished, ended with an error, or may be running (here, or in a live process here)."""
    if status == "SUCCESS":
        raise UserError(f"Durable run {run_id!r} finished already; there is nothing to resume (its turn is in memory).")
    if status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
        raise UserError(f"Durable run {run_id!r} ended with an error and cannot be resumed; start a new run.")
    if run_id in _dbos.live:
        raise UserError(f"Durable run {run_id!r} is running in this process.")
    pid = _running_pid(executor)
    if pid is not None:
        raise UserError(
            f"Durable run {run_id!r} belongs to process {pid}, which is still running: resume it once that process "
            "has ended (or from it), so no call runs twice at once."
        )


def _running_pid(executor: str | None) -> int | None:
    """The pid of the live process on this machine other than this one that ran ``executor``, if any."""
    parts = (executor or "").split("/")
    if len(parts) != 4 or parts[0] != "cortana" or parts[1] != socket.gethostname() or not parts[2].isdigit():
        return None
    pid = int(parts[2])
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def _check_agent(run_id: str, spec: _RunSpec, agent: _Runs, extensions: Sequence[TurnExtension] | None) -> None:
    """Refuse an agent of another name, other tools, or other extensions than the run's own."""
    if spec.agent != agent.config.name:
        raise UserError(
            f"Durable run {run_id!r} was started by agent {spec.agent!r}; agent {agent.config.name!r} cannot resume "
            "it. Resume it with an agent built as the one that started it."
        )
    now = fingerprint(agent.tools)
    changed = sorted(name for name in spec.tools.keys() | now.keys() if spec.tools.get(name) != now.get(name))
    if changed:
        raise UserError(
            f"Durable run {run_id!r} was started by an agent with other tools ({', '.join(changed)} differ: gone, new, "
            "or with other parameters); a replay would ask for other steps than its record holds. Resume it with an "
            "agent built as the one that started it."
        )
    given = None if extensions is None else [extension.name for extension in extensions]
    if given != spec.extensions:
        raise UserError(
            f"Durable run {run_id!r} ran with "
            + ("the agent's extensions" if spec.extensions is None else f"its own extensions {spec.extensions}")
            + ("" if given is None else f", not {given}")
            + ": resume it with the same (resume_run(..., extensions=[...]))."
        )


# -- the listing ------------------------------------------------------------------------------------------------


async def unfinished_runs(memory: object = None) -> list[UnfinishedRun]:
    """:func:`unfinished`, for async code."""
    if memory is not None or _dbos.url is None:  # else: where this process records
        await _launched(memory)
    from dbos import DBOS

    statuses = await DBOS.list_workflows_async(name=WORKFLOW, status=["PENDING", "ENQUEUED"], load_output=False)
    runs = []
    for status in statuses:
        spec = _RunSpec.model_validate_json(status.input["args"][0]) if status.input else None
        steps = await DBOS.list_workflow_steps_async(status.workflow_id, load_output=False)
        started = datetime.fromtimestamp((status.created_at or 0) / 1000, tz=UTC)
        if spec is not None:
            runs.append(UnfinishedRun(status.workflow_id, spec.prompt, spec.agent, spec.thread, started, len(steps)))
    return sorted(runs, key=lambda run: run.started)


def unfinished(memory: object = None) -> list[UnfinishedRun]:
    """The durable runs that have not finished, oldest first, in the database of an agent with ``memory``
    (:func:`database_url`; ``None``: the configured or default one).

    A run whose process died stays here until :func:`resume_run` finishes it; so does one running now.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(unfinished_runs(memory))
    raise UserError("unfinished() cannot run inside a running event loop: use `await unfinished_runs()`")
