"""``Agent``: what a model may do (instructions, tools, limits) and how to run it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Self, TypedDict, overload

from typing_extensions import TypeVar, Unpack

from cortana.agent.compaction import compact
from cortana.agent.events import EventHandler, RunEvent, RunFinished
from cortana.agent.extensions import BackgroundWork, TurnExtension
from cortana.agent.loop import run_events
from cortana.agent.run import TurnRequest
from cortana.agent.run_config import NO_TIMEOUTS, OPTION_NAMES, RunConfig, RunDeps
from cortana.agent.streamed import StreamedRun
from cortana.agent.tracing import Instrumentation, RunTracer, instrumentation_for
from cortana.config import effective_context_window
from cortana.errors import ToolError, UserError
from cortana.memory.base import MemoryProvider, MemoryResolver, resolve_memory
from cortana.messages import Approval, Image, Message, RunResult, RunState, ThreadRef
from cortana.models.base import CallJudge, ModelClient, ModelSettings
from cortana.models.default import close_default_model_client, default_model_client
from cortana.streams import closing
from cortana.tools import Tool, ToolGroup, as_tools
from cortana.tools.context import AgentHandle
from cortana.tools.hooks import ToolHooks
from cortana.tools.permissions import PermissionGate
from cortana.turnstate import thread_turn

__all__ = ["Agent", "EventHandler"]

MANUAL_COMPACTION_WINDOW = 4096
"""The window ``Agent.compact`` assumes when neither the agent nor the engine says."""

T = TypeVar("T")
OutputT = TypeVar("OutputT", default=str)
"""What ``result.output`` is: ``str``, or the agent's ``output_type``."""


class _Configured(Generic[T]):
    """An ``Agent`` attribute that lives in its frozen ``RunConfig``: setting it replaces the config."""

    __slots__ = ("_name",)

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, agent: None, owner: type) -> Self: ...
    @overload
    def __get__(self, agent: Agent[Any], owner: type) -> T: ...
    def __get__(self, agent: Agent[Any] | None, owner: type) -> T | Self:
        if agent is None:
            return self
        value: T = getattr(agent.config, self._name)
        return value

    def __set__(self, agent: Agent[Any], value: T) -> None:
        agent.config = agent.config.replace(**{self._name: value})


class _AgentOptions(TypedDict, total=False):
    """``Agent``'s keyword arguments but ``output_type``, for its typed signatures (the docstring says each)."""

    config: RunConfig | None
    name: str
    instructions: str
    tools: Sequence[Tool | ToolGroup | Callable[..., Any]]
    max_tool_iterations: int
    on_max_iterations: Callable[[int], Awaitable[bool]] | None
    parallel_tool_calls: bool
    max_parallel_tools: int
    memory: MemoryProvider | MemoryResolver | None
    extensions: Sequence[TurnExtension]
    knowledge_graph: TurnExtension | None
    experience: TurnExtension | None
    context_window: int | None
    compaction_threshold: float | None
    permissions: PermissionGate | None
    settings: ModelSettings | None
    logger: EventHandler | None
    nudge_repeated_calls: bool
    retry_failed_calls: bool
    tool_guidance: bool | str
    tool_timeout: float | None
    tool_timeouts: Mapping[str, float] | None
    max_tool_output: int
    check_grounding: bool
    instrument: bool | Instrumentation | None
    output_retries: int
    tool_judge: CallJudge | None
    tool_hooks: ToolHooks | None


_DEFAULTS = RunConfig()
"""The options of an agent given none (shared: a config is immutable)."""


class Agent(Generic[OutputT]):
    """A model with instructions and tools, run against a local engine.

    ``Agent[T]``: an agent whose runs return ``RunResult[T]``; type checkers infer ``T`` from ``output_type``
    (``str`` without one; ``Any`` for a type they cannot name as a class, such as the union ``A | B``).

    Args:
        model: the engine client (see ``cortana.models``); a ``ScriptedModel`` in tests. Without
            one, the agent runs on the configured engine: ``create_model_client()`` on the first
            run, shared by every agent of the process that has no model of its own
            (``cortana.models.default``).
        name: a short name, shown in logs and used by subagents.
        instructions: the system prompt. Kept byte-identical across turns so
            the engine can reuse its prompt cache.
        tools: tools (``Tool``, ``@tool`` functions or plain callables) and
            ``ToolGroup`` s the model loads on demand.
        max_tool_iterations: how many rounds of tool calls one run may make
            before it raises ``MaxToolIterationsError``.
        on_max_iterations: ``async (iterations) -> bool``; returning True
            grants another ``max_tool_iterations`` rounds.
        parallel_tool_calls: run the calls of one response concurrently
            (False: one by one, in order).
        max_parallel_tools: how many tool calls may run at once.
        memory: a ``MemoryProvider``, or a function of the thread that returns one. Its history
            opens every turn; its long-term context and tools join the turn first, through the same
            seam as the extensions.
        extensions: ``TurnExtension`` s that join every turn, in this order: context blocks for the
            prompt, tools, and work after the reply (the knowledge graph, experience, the companion).
        knowledge_graph: a ``KnowledgeGraph`` of the code the agent works on: an extension placed
            first (lookups of the names a prompt mentions, graph tools, rebuilds after edits).
        experience: an ``Experience``: an extension placed last (recipes distilled from earlier runs
            join the turns of similar prompts; runs with three or more tool calls are distilled after
            the reply).
        context_window: the context length to plan for (never more than the engine serves);
            wins over ``OLLAMA_CONTEXT_WINDOW``/``OLLAMA_CONTEXT_LENGTH``.
        compaction_threshold: the fraction of the window at which the conversation is
            summarized; wins over ``CONTEXT_COMPACTION_THRESHOLD`` (default 0.9).
        permissions: a ``PermissionGate`` every tool call passes (``None`` allows all).
        settings: generation settings sent with every model call.
        logger: receives every run event (``AgentLogger`` shows progress).
        nudge_repeated_calls: when the model repeats, with the same arguments, only calls
            that already have results in this run, do not run them again: restate the
            question once, and if it repeats again, ask for an answer without tools
            (small models loop on tool calls otherwise).
        retry_failed_calls: when the model answers in prose right after a round of tool calls
            that all failed (none of them refused by the user), ask it once to correct the call and carry
            on (small models stop at the first error and tell the user how to do it instead).
            Off by default; the ``cortana`` command turns it on (``agent.retry_failed_calls``).
        tool_guidance: add a paragraph to the system prompt, when the agent has tools,
            telling the model to call a tool only when one fits (True: the shipped
            ``prompts/tool_guidance.md``; a string: your own). Off by default: measured on
            Qwen2.5-Coder 0.5B/1.5B it changed nothing (see docs/engines.md).
        tool_timeout: the most seconds one tool call may run, for tools without a timeout of their
            own (None: no limit). A sync tool's thread cannot be stopped; its result is dropped.
        tool_timeouts: tool-name glob -> seconds, winning over a tool's own timeout
            (cortana.yml ``tools.timeouts``).
        max_tool_output: the most characters of one tool result that reach the prompt and
            memory; the head and tail of a longer one are kept, with a note.
        check_grounding: do not run a call the model wrote as text when none of its arguments
            that can be checked (text, numbers) appears in what the user said or a tool returned
            (a small model "calling" a tool for a question no tool fits, with invented values);
            ask for an answer without tools instead (``agent/grounding.py``).
        instrument: OpenTelemetry spans for this agent's runs, model calls and tool calls
            (``agent/tracing.py``): True, or an ``Instrumentation`` (content on, another tracer provider);
            False keeps it out of :func:`cortana.instrument`; None (default) follows ``cortana.instrument()``.
        output_type: make ``result.output`` a validated value of this type (a pydantic model, dataclass,
            TypedDict, ``list[...]``, plain type or union), the answer constrained to its JSON schema where the
            engine can (``agent/output.py``).
        output_retries: times a value that fails validation goes back to the model with the error, before
            ``OutputValidationError``.
        tool_judge: a second opinion on the first tool call of each user turn that costs no model call
            (``ToolJudge()``, ``agent/judge.py``): a turn whose question it says no offered tool is for is sent
            with no tools (unless ``tool_choice`` is set, or the conversation has called a tool already); on
            engines that guide tool calls, a call of a tool it does not allow is turned into prose, and a call
            the model described in prose is made when the judge says the tool it named fits. The ``cortana``
            command turns it on.
        tool_hooks: asked before and after every tool call the loop runs (``cortana.tools.hooks``): a reason
            from ``before_tool`` blocks the call (the model reads it), text from ``after_tool`` joins its result.
            The ``cortana`` command runs cortana.yml's ``hooks:`` through it.
        config: the options above (from ``name`` on, ``output_type`` included) as one ``RunConfig``, built once
            and shared by many agents (``Agent(model, config=other.config)``); keywords given beside it change
            it for this agent.

    Every argument from ``name`` on except the tools, memory and extensions lives in ``agent.config``,
    a frozen ``RunConfig`` each run takes a snapshot of; the attributes of the same names read it, and
    setting one (``agent.settings = ...``) replaces the config for the runs that start afterwards.
    """

    __slots__ = ("_background", "_model", "_running", "config", "extensions", "memory", "tool_groups", "tools")

    name = _Configured[str]()
    instructions = _Configured[str]()
    max_tool_iterations = _Configured[int]()
    on_max_iterations = _Configured[Callable[[int], Awaitable[bool]] | None]()
    parallel_tool_calls = _Configured[bool]()
    max_parallel_tools = _Configured[int]()
    context_window = _Configured[int | None]()
    compaction_threshold = _Configured[float | None]()
    permissions = _Configured[PermissionGate | None]()
    settings = _Configured[ModelSettings | None]()
    logger = _Configured[EventHandler | None]()
    nudge_repeated_calls = _Configured[bool]()
    retry_failed_calls = _Configured[bool]()
    tool_guidance = _Configured[bool | str]()
    tool_timeout = _Configured[float | None]()
    tool_timeouts = _Configured[Mapping[str, float]]()
    max_tool_output = _Configured[int]()
    check_grounding = _Configured[bool]()
    instrument = _Configured["bool | Instrumentation | None"]()
    output_type = _Configured[Any]()  # set after the fact, it changes the runs but not the agent's static type
    output_retries = _Configured[int]()
    tool_judge = _Configured[CallJudge | None]()
    tool_hooks = _Configured[ToolHooks | None]()

    if TYPE_CHECKING:

        @overload
        def __init__(
            self,
            model: ModelClient | None = None,
            *,
            output_type: type[OutputT] | None = None,
            **options: Unpack[_AgentOptions],
        ) -> None: ...
        @overload
        def __init__(
            self: Agent[Any], model: ModelClient | None = None, *, output_type: object, **options: Unpack[_AgentOptions]
        ) -> None: ...

    def __init__(
        self,
        model: ModelClient | None = None,
        *,
        config: RunConfig | None = None,
        tools: Sequence[Tool | ToolGroup | Callable[..., Any]] = (),
        memory: MemoryProvider | MemoryResolver | None = None,
        extensions: Sequence[TurnExtension] = (),
        knowledge_graph: TurnExtension | None = None,
        experience: TurnExtension | None = None,
        **options: Any,
    ) -> None:
        if options:
            unknown = sorted(options.keys() - OPTION_NAMES)
            if unknown:
                raise TypeError(f"Agent() got an unexpected keyword argument {unknown[0]!r}")
            if "tool_timeouts" in options and options["tool_timeouts"] is None:
                options["tool_timeouts"] = NO_TIMEOUTS
            self.config = config.replace(**options) if config is not None else RunConfig(**options)
        else:
            self.config = config if config is not None else _DEFAULTS
        self._model = model
        self.tools, self.tool_groups = as_tools(tools)
        self.memory = memory
        # The empty tuple is shared: an agent without extensions allocates nothing.
        self.extensions: tuple[TurnExtension, ...] = tuple(extensions)
        if knowledge_graph is not None or experience is not None:
            first, last = (knowledge_graph,) if knowledge_graph else (), (experience,) if experience else ()
            self.extensions = (*first, *self.extensions, *last)
        self._background: BackgroundWork | None = None
        self._running = 0

    @property
    def running_turns(self) -> int:
        """How many turns of this agent are running now (work after a reply waits for none to be)."""
        return self._running

    @property
    def model(self) -> ModelClient | None:
        """The engine client this agent was given; ``None``: it runs on the shared, configured engine."""
        return self._model

    @model.setter
    def model(self, value: ModelClient | None) -> None:
        self._model = value

    async def client(self) -> ModelClient:
        """The engine client runs use: the agent's own, else the shared one of the configured engine."""
        if self._model is not None:
            return self._model
        return await default_model_client()

    @property
    def background(self) -> BackgroundWork:
        """Work still running after replies (the extensions' ``after_turn``)."""
        if self._background is None:
            self._background = BackgroundWork()
        return self._background

    async def aclose(self, *, timeout: float | None = 60.0) -> None:
        """Wait for background work (cancelled past ``timeout`` seconds), then close the shared engine.

        The shared engine, used by agents without a model of their own, is closed here (the next
        run makes a new one); a model you passed in is yours to close.
        """
        if self._background is not None:
            await self._background.wait(timeout)
        if self._model is None:
            await close_default_model_client()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def run_stream(
        self,
        prompt: str,
        *,
        thread: ThreadRef | str | None = None,
        context: str | None = None,
        history: Sequence[Message] | None = None,
        settings: ModelSettings | None = None,
        remember: bool = True,
        unattended: bool = False,
        extensions: Sequence[TurnExtension] | None = None,
        use_tools: bool = True,
        defer_approvals: bool = False,
        images: Sequence[Image] = (),
    ) -> StreamedRun[OutputT]:
        """Run one turn, its events as they happen: ``async for event in agent.run_stream(...)``.

        The last event is ``RunFinished``; then the :class:`StreamedRun` also has the ``result``, typed as
        ``run``'s is, and ``stream_output()`` gives just the answer as it grows (the typed value, partially
        validated, with an ``output_type``). The turn starts with the first event read.

        Args:
            prompt: the user's message.
            thread: the conversation (a ``ThreadRef`` or a thread id); a new one when omitted.
            context: per-turn text placed right before the prompt (after the history,
                so the cached prompt prefix stays valid).
            history: earlier messages to send before this turn, for callers without a memory provider.
            settings: generation settings for this run, replacing the agent's.
            remember: store the turn in memory (default). ``False`` runs it on the thread's history
                and stores nothing of it: the caller decides afterwards what to keep (a check-in
                whose reply is ``HEARTBEAT_OK`` leaves no trace).
            unattended: nobody is there to approve tool calls: the ones the permission gate would
                ask about are refused, never approved.
            extensions: this turn's extensions instead of the agent's (``()``: none), e.g. a
                check-in that wants the local time but not a search of the workspace for its checklist.
            use_tools: offer the tools; ``False``: the model answers in text (a reminder needs no tools).
            defer_approvals: a call a person must allow (a tool with ``requires_approval``, or one the permission
                gate would ask about) ends the turn paused instead: ``result.status == "paused"``, its
                ``pending_approvals`` and ``state`` for :meth:`resume` (docs/approvals.md).
            images: what the message shows the model (``Image.from_path("shot.png")``), stored with it (docs/images.md).
        """
        options = (context, history, settings or self.settings, remember, unattended, extensions, use_tools)
        return self.stream_turn(_request(prompt, thread, *options, defer_approvals, images, streamed=True))

    def stream_turn(self, request: TurnRequest) -> StreamedRun[OutputT]:
        """The turn ``request`` asks for, on a snapshot of the agent's config: the door ``run``, ``run_stream``, the
        resumes and durable runs (``agent/durable.py``) all go through."""
        config = self.config  # the run's snapshot: an agent changed meanwhile changes the next run
        return StreamedRun(partial(self._events, config, request), typed=config.output_type is not None)

    def resume_stream(self, state: RunState, approvals: Mapping[str, Approval]) -> StreamedRun[OutputT]:
        """Go on with a turn that paused for approvals (``run(..., defer_approvals=True)``), its events as they
        happen; it may pause again.

        Args:
            state: the paused run's ``result.state`` (or ``RunState.model_validate_json`` of its JSON, in any
                process), resumed by an agent built as the one that paused it, with memory on the same store.
            approvals: an answer for each pending call's id: ``True`` runs it, ``False`` refuses it, a string
                refuses it and tells the model why.

        Raises:
            UserError: an answer missing or for a call that does not wait (naming them); an agent of another name
                or other tools (naming what changed); a thread that moved on since (resumed already).
        """
        return self.stream_turn(TurnRequest.resuming(state, approvals, streamed=True))

    async def resume(self, state: RunState, approvals: Mapping[str, Approval]) -> RunResult[OutputT]:
        """:meth:`resume_stream` to the end, as ``run`` is ``run_stream``: the turn's result, or paused again."""
        streamed = self.config.logger is not None
        return await self.stream_turn(TurnRequest.resuming(state, approvals, streamed=streamed)).get_result()

    def resume_sync(self, state: RunState, approvals: Mapping[str, Approval]) -> RunResult[OutputT]:
        """:meth:`resume` for code that has no event loop of its own (``run_sync``'s rule on a running one)."""
        _no_running_loop("resume_sync", "await agent.resume(state, approvals)")
        return asyncio.run(self.resume(state, approvals))

    async def _events(
        self, config: RunConfig, request: TurnRequest, keep: Callable[[RunResult[Any]], None]
    ) -> AsyncGenerator[RunEvent, None]:
        """The events of one turn, each handed to the logger first, the result to ``keep`` (the
        :class:`StreamedRun`'s); in the caller's turn (its state: plan mode, its checkpoint) when it is one on this
        thread, else in a turn of its own."""
        self._running += 1
        tracer = None
        try:
            with thread_turn(request.thread, request.prompt):
                deps = await _deps(self, config, request)
                tracer = deps.tracer
                events = run_events(config, deps, request)
                try:
                    async with closing(events if tracer is None else tracer.within(events)) as opened:
                        async for event in opened:
                            if config.logger is not None:
                                config.logger.handle(event)
                            if isinstance(event, RunFinished):
                                keep(event.result)
                            yield event
                finally:
                    await events.aclose()
        except BaseException as error:
            if tracer is not None:
                tracer.fail(error)
            raise
        finally:
            self._running -= 1

    def handle(self, config: RunConfig | None = None) -> AgentHandle:
        """What the tools of this agent's runs see of it (``RunContext.agent``): a snapshot, not the agent.

        Its name, its tools' names, and subagents like it (same engine, gate, settings and limits); for
        calling a tool yourself with ``RunContext(..., agent=agent.handle())``.
        """
        return _Handle(config or self.config, self._model, tuple(self.tools))

    async def run(
        self,
        prompt: str,
        *,
        thread: ThreadRef | str | None = None,
        context: str | None = None,
        history: Sequence[Message] | None = None,
        settings: ModelSettings | None = None,
        remember: bool = True,
        unattended: bool = False,
        extensions: Sequence[TurnExtension] | None = None,
        use_tools: bool = True,
        defer_approvals: bool = False,
        images: Sequence[Image] = (),
        run_id: str | None = None,
        durable: bool = False,
    ) -> RunResult[OutputT]:
        """Run one turn to completion and return its ``RunResult`` (``run_stream``, drained; the same arguments).

        Nobody reads the answer as it arrives, so unless the agent has a ``logger`` (which shows it live) each
        model answer is asked for whole where the engine allows (one reply to parse, not an event per token).
        ``durable`` (or a ``run_id``, its id): a DBOS workflow whose model and tool calls are recorded as they finish,
        which :meth:`resume_run` finishes if this process dies (``cortana.durable``, docs/durable.md).
        """
        options = (context, history, settings or self.settings, remember, unattended, extensions, use_tools)
        request = _request(prompt, thread, *options, defer_approvals, images, streamed=self.config.logger is not None)
        if not durable and run_id is None:
            return await self.stream_turn(request).get_result()
        from cortana.agent.durable import run_durably  # DBOS loads for a durable run only

        return await run_durably(self, request, run_id)

    async def resume_run(self, run_id: str) -> RunResult[OutputT]:
        """Finish the durable run ``run_id`` that a process which died left unfinished (``cortana.durable``)."""
        from cortana.agent.durable import resume_run

        return await resume_run(self, run_id)

    def resume_run_sync(self, run_id: str) -> RunResult[OutputT]:
        """:meth:`resume_run` for code that has no event loop of its own."""
        _no_running_loop("resume_run_sync", f"await agent.resume_run({run_id!r})")
        return asyncio.run(self.resume_run(run_id))

    async def compact(self, thread: ThreadRef | str, *, focus: str | None = None, keep_last: int = 2) -> Message:
        """Summarize the thread's history now (the CLI's ``/compact [focus]``) and return the summary.

        Args:
            thread: the conversation to compact.
            focus: what the summary should pay particular attention to.
            keep_last: how many of the newest messages stay as they are.
        """
        return await _compact_thread(self, _thread_ref(thread), focus, keep_last)

    generate = run
    """``run`` under the name the original systems' docs use."""

    def run_sync(self, prompt: str, **kwargs: Any) -> RunResult[OutputT]:
        """``run`` for code that has no event loop of its own.

        Inside a running event loop (a Jupyter notebook, an ``async def``) it raises :class:`UserError` at once,
        before anything runs, naming ``await agent.run(...)``: the engine's connections belong to that loop.
        """
        _no_running_loop("run_sync", f"await agent.run({prompt[:40]!r})")
        return asyncio.run(self.run(prompt, **kwargs))

    def __repr__(self) -> str:
        model = self._model.model if self._model is not None else "(the configured engine)"
        return f"Agent(name={self.name!r}, model={model!r}, tools={[t.name for t in self.tools]})"


@dataclass(frozen=True, slots=True)
class _Handle:
    """The ``AgentHandle`` a run gives its tools: a snapshot of the agent, not the agent."""

    config: RunConfig
    model: ModelClient | None
    tools: tuple[Tool, ...]

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The agent's own tools a subagent may get: those the permission gate does not refuse outright."""
        gate = self.config.permissions
        return tuple(tool.name for tool in self.tools if gate is None or gate.static_action(tool) != "deny")

    @property
    def read_only_tool_names(self) -> tuple[str, ...]:
        """Those of :attr:`tool_names` whose tools only read, and not a live source (a running command's output,
        which a helper's read would take from the caller's next one)."""
        grantable = set(self.tool_names)
        return tuple(t.name for t in self.tools if t.read_only and not t.live and t.name in grantable)

    def subagent(
        self,
        name: str,
        *,
        instructions: str,
        tools: Sequence[str] | None,
        extra_tools: Sequence[Callable[..., Any]] = (),
        memory: object = None,
        logger: object = None,
    ) -> Agent:
        if memory is not None and not isinstance(memory, MemoryProvider):
            raise TypeError(f"memory must be a MemoryProvider, got {type(memory).__name__}")
        if logger is not None and not isinstance(logger, EventHandler):
            raise TypeError(f"logger must have a handle(event) method, got {type(logger).__name__}")
        grantable = self.tool_names
        if tools is None:
            tools = grantable
        refused = [tool.name for tool in self.tools if tool.name in tools and tool.name not in grantable]
        if refused:
            raise ToolError(f"The permission policy refuses {', '.join(refused)}; a subagent cannot have them.")
        unknown = sorted(set(tools) - set(grantable))
        if unknown:
            raise ToolError(f"No such tools to give: {', '.join(unknown)}. Yours: {', '.join(grantable) or 'none'}.")
        own = [tool for tool in self.tools if tool.name in tools]
        return Agent(
            self.model,
            name=name,
            instructions=instructions,
            tools=[*own, *extra_tools],
            permissions=self.config.permissions,
            memory=memory,
            settings=self.config.settings,
            max_tool_iterations=self.config.max_tool_iterations,
            instrument=self.config.instrument,  # a traced agent's subagents are traced too
            logger=logger,
        )


async def _deps(agent: Agent[Any], config: RunConfig, request: TurnRequest) -> RunDeps:
    """What a run of ``agent`` works with (the engine is resolved here, and the run's spans start)."""
    client = await agent.client()
    tracing = instrumentation_for(config.instrument)
    return RunDeps(
        client=client,
        memory=agent.memory,
        tools=agent.tools,
        tool_groups=agent.tool_groups,
        extensions=agent.extensions,
        background=agent.background,
        handle=agent.handle(config),
        busy=lambda: agent.running_turns > 0,
        tracer=RunTracer(tracing, config.name, client, request) if tracing is not None else None,
    )


async def _compact_thread(agent: Agent[Any], thread: ThreadRef, focus: str | None, keep_last: int) -> Message:
    """``Agent.compact``: the thread's older messages summarized into its memory, all but ``keep_last``."""
    memory = await resolve_memory(agent.memory, thread)
    if memory is None:
        raise UserError(f"Agent '{agent.name}' has no memory to compact; pass memory= (e.g. SQLiteMemory()).")
    history = await memory.load_history(thread)
    keep_from = max(len(history) - keep_last, 0)
    if keep_from == 0:
        raise UserError("There is nothing to compact yet: the thread is shorter than keep_last.")
    client = await agent.client()
    window = effective_context_window(agent.config.context_window, client.context_window) or MANUAL_COMPACTION_WINDOW
    result = await compact(client, history, keep_from=keep_from, window=window, focus=focus)
    await memory.add_summary(thread, result.summary, kept=result.kept)
    return result.summary


def _request(
    prompt: str,
    thread: ThreadRef | str | None,
    context: str | None,
    history: Sequence[Message] | None,
    settings: ModelSettings | None,
    remember: bool,
    unattended: bool,
    extensions: Sequence[TurnExtension] | None,
    use_tools: bool,
    defer_approvals: bool,
    images: Sequence[Image],
    *,
    streamed: bool,
) -> TurnRequest:
    """The turn ``run_stream`` and ``run`` start: their arguments as a ``TurnRequest``."""
    return TurnRequest(
        prompt,
        _thread_ref(thread),
        context=context,
        history=history or (),
        settings=settings or ModelSettings(),
        remember=remember,
        unattended=unattended,
        extensions=extensions,
        use_tools=use_tools,
        streamed=streamed,
        defer_approvals=defer_approvals,
        images=tuple(images),
    )


def _no_running_loop(method: str, instead: str) -> None:
    """Raise :class:`UserError` at once, before anything runs, when a sync door is used inside a running event loop
    (a notebook cell, an async function): the engine's connections belong to that loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UserError(
        f"{method} cannot run inside a running event loop (a notebook cell, an async function): "
        f"use `{instead}` there instead"
    )


def _thread_ref(thread: ThreadRef | str | None) -> ThreadRef:
    if isinstance(thread, ThreadRef):
        return thread
    return ThreadRef(thread_id=thread or uuid.uuid4().hex)
