"""``SubagentManager``: the model delegates tasks to subagents through tools.

    manager = SubagentManager(max_concurrent=2, max_depth=1)
    agent = Agent(client, tools=[read_file, grep_files, *manager.tools()])

The parent model gets ``spawn_subagent`` (a task, instructions, and a subset of
its own tools), ``wait_subagents``, ``follow_up_subagent`` (continues a
subagent in its own thread, keeping its history), ``cancel_subagent`` and
``list_subagents``. Subagents run concurrently under ``max_concurrent``, each
in its own thread with its own metrics; they cannot spawn deeper than
``max_depth``, and they inherit the parent's permission gate: a subagent never
gets a tool the gate refuses, and its calls ask the same approver.

``delegate_tool()`` is the one-call form an assistant offers (Claude Code's
Task tool): ``delegate(task)`` runs a helper with the parent's read-only tools
in a fresh context of its own, waits for it, and returns its report, bounded;
each of the helper's tool calls is reported as the call's progress
(``RunContext.report``), so the user sees one call and what it is doing.

With llama.cpp, give the server a slot per concurrent run (``parallel=`` on
the embedded engine), or a subagent's prompt evicts the parent's cache.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Literal

from cortana.errors import ToolError, UserError
from cortana.memory.base import InMemoryHistory
from cortana.messages import RunMetrics, RunResult, ThreadRef
from cortana.prompts import prompt_text
from cortana.tools import RunContext, Tool
from cortana.tools.context import SubagentRunner

__all__ = ["Subagent", "SubagentManager"]

State = Literal["running", "done", "failed", "cancelled"]
TOOL_NAMES = (
    "spawn_subagent",
    "wait_subagents",
    "follow_up_subagent",
    "cancel_subagent",
    "list_subagents",
    "delegate",
)
REPORT_CHARS = 2_000
"""The most characters of a helper's report that ``delegate`` returns."""


@dataclass
class Subagent:
    """One subagent: its task, agent, thread, state and what it has cost.

    ``spawned_by`` is the name of the agent that started it (names of subagents are unique per manager).
    """

    id: str
    task: str
    agent: SubagentRunner
    thread: ThreadRef
    depth: int
    parent_metrics: RunMetrics
    spawned_by: str
    state: State = "running"
    result: RunResult | None = None
    error: BaseException | None = None
    metrics: RunMetrics = field(default_factory=RunMetrics)
    job: asyncio.Task[None] | None = None

    def report(self) -> str:
        """One line (or a block) the parent model reads."""
        if self.state == "done" and self.result is not None:
            return f"{self.id} (done): {self.result.output}"
        if self.state == "failed":
            return f"{self.id} (failed): {type(self.error).__name__}: {self.error}"
        return f"{self.id} ({self.state})"


class SubagentManager:
    """Gives a parent agent tools to delegate work to subagents.

    Args:
        max_concurrent: subagent runs in flight at once (over all depths).
        max_depth: how deep subagents may nest; 1 means subagents cannot spawn their own.
        wait_timeout: the default seconds ``wait_subagents`` waits.
    """

    def __init__(self, *, max_concurrent: int = 2, max_depth: int = 1, wait_timeout: float = 300.0) -> None:
        if max_concurrent < 1 or max_depth < 1:
            raise UserError("max_concurrent and max_depth must be at least 1.")
        self.max_concurrent = max_concurrent
        self.max_depth = max_depth
        self.wait_timeout = wait_timeout
        self.subagents: dict[str, Subagent] = {}
        self.history = InMemoryHistory()
        self._slots = asyncio.Semaphore(max_concurrent)
        self._ids = itertools.count(1)
        self._depth_of: dict[str, int] = {}  # name -> depth, for the agents this manager created

    # -- the tools the model sees -------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The five subagent tools, for ``Agent(tools=[..., *manager.tools()])``."""
        manager = self

        async def spawn_subagent(
            ctx: RunContext, task: str, instructions: str = "", tools: list[str] | None = None
        ) -> str:
            """Start a subagent on a task; it works on its own while you continue. Returns its id.

            Args:
                task: what the subagent must do, with every detail it needs (it cannot see this conversation).
                instructions: how it should work (its system prompt), optional.
                tools: names of your tools it may use; omit to give it all of them.
            """
            sub = await manager.spawn(ctx, task, instructions=instructions, tools=tools)
            return f"Started subagent {sub.id}. Call wait_subagents to get its result."

        async def wait_subagents(ctx: RunContext, ids: list[str] | None = None, timeout: float | None = None) -> str:
            """Wait for subagents to finish and return their results.

            Args:
                ids: the subagents to wait for; omit to wait for all you started that are running.
                timeout: seconds to wait at most.
            """
            subs = await manager.wait(ids, timeout=timeout, caller=ctx.agent.name if ctx.agent else None)
            return "\n".join(sub.report() for sub in subs) or "No subagents."

        async def follow_up_subagent(id: str, message: str) -> str:
            """Send a subagent a follow-up message; it continues in its own conversation.

            Args:
                id: the subagent's id.
                message: what to tell or ask it.
            """
            sub = await manager.follow_up(id, message)
            return f"Sent to {sub.id}; it is running. Call wait_subagents to get its answer."

        async def cancel_subagent(id: str) -> str:
            """Stop a running subagent.

            Args:
                id: the subagent's id.
            """
            sub = await manager.cancel(id)
            return f"{sub.id} is {sub.state}."

        def list_subagents() -> str:
            """List the subagents with their state and task."""
            return manager.listing()

        return [
            Tool(spawn_subagent),
            Tool(wait_subagents, read_only=True),
            Tool(follow_up_subagent),
            Tool(cancel_subagent),
            Tool(list_subagents, read_only=True),
        ]

    def delegate_tool(self, *, report_chars: int = REPORT_CHARS) -> Tool:
        """``delegate(task)``: a helper with the caller's read-only tools does ``task`` in its own context; its
        report (at most ``report_chars`` characters) is the result. See the module docstring."""
        manager = self

        async def delegate(ctx: RunContext, task: str) -> str:
            """Hand a side task to a helper that works in a fresh context of its own, with read-only tools (read,
            list, search files), and get back its short report: finding where something is used across the code,
            reading a long file for one fact, a review. It cannot see this conversation: put every detail it needs
            in the task. Keeps this conversation short.

            Args:
                task: what the helper must find or check, with the names and paths it needs.
            """
            return await manager.delegate(ctx, task, report_chars=report_chars)

        return Tool(delegate, read_only=True, kind="search")

    # -- the Python API ---------------------------------------------------------------------

    async def delegate(self, ctx: RunContext, task: str, *, report_chars: int = REPORT_CHARS) -> str:
        """Run a read-only helper on ``task`` and wait for its report (``delegate_tool``'s work)."""
        parent = ctx.agent
        if parent is None:
            raise ToolError("delegate runs only inside an agent's run; there is no agent to start a helper of.")
        depth = self._depth_of.get(parent.name, 0) + 1
        if depth > self.max_depth:
            raise ToolError("A helper cannot start helpers of its own: do the task yourself.")
        tools = [name for name in parent.read_only_tool_names if name not in TOOL_NAMES]
        if not tools:
            raise ToolError("There are no read-only tools to give a helper: do the task yourself.")
        child = parent.subagent(
            f"{parent.name}/helper{next(self._ids)}",
            instructions=prompt_text("delegate"),
            tools=tools,
            logger=_Progress(ctx),
        )
        sub = self._register(ctx, child, task, depth, parent.name)
        ctx.report(f"helper {sub.id} started: {task}")
        sub.job = asyncio.current_task()
        await self._run(sub, task, previous=None)  # in this call: cancelling the turn cancels the helper
        if sub.state != "done" or sub.result is None:
            raise ToolError(f"The helper stopped without a report ({sub.report()}). Do the task yourself.")
        report = str(sub.result.output).strip() or "(the helper found nothing to report)"
        if len(report) > report_chars:
            report = report[:report_chars] + f"\n[... {len(report) - report_chars:,} more characters left out]"
        calls = sub.metrics.tool_calls
        return f"The helper's report ({calls} tool call{'s' if calls != 1 else ''}):\n{report}"

    async def spawn(
        self, ctx: RunContext, task: str, *, instructions: str = "", tools: list[str] | None = None
    ) -> Subagent:
        """Start a subagent of the agent running ``ctx`` (see the module docstring for the rules)."""
        parent = ctx.agent
        if parent is None:
            raise ToolError("spawn_subagent runs only inside an agent's run; there is no agent to start a subagent of.")
        depth = self._depth_of.get(parent.name, 0) + 1
        if depth > self.max_depth:
            raise ToolError(f"Subagents cannot spawn their own (max_depth={self.max_depth}); do the task yourself.")
        if tools is not None:
            tools = [name for name in tools if name not in TOOL_NAMES]  # not grantable; small models ask anyway
        else:
            tools = [name for name in parent.tool_names if name not in TOOL_NAMES]
        child = parent.subagent(
            f"{parent.name}/sub{next(self._ids)}",
            instructions=instructions or prompt_text("subagent"),
            tools=tools,
            extra_tools=self.tools() if depth < self.max_depth else (),
            memory=self.history,
        )
        sub = self._register(ctx, child, task, depth, parent.name)
        sub.job = asyncio.create_task(self._run(sub, task, previous=None))
        return sub

    async def wait(
        self, ids: list[str] | None = None, *, timeout: float | None = None, caller: str | None = None
    ) -> list[Subagent]:
        """Wait until the named subagents stop, or ``timeout`` passes.

        Without ids, or with only unknown ones: the running subagents that the agent named ``caller`` started (all
        running ones when no caller is given). A subagent never waits for itself, which could only
        end at the timeout.
        """
        known = [i for i in ids or [] if i in self.subagents]
        if ids and not known and not any(s.spawned_by == caller for s in self.subagents.values()):
            self._get(ids[0])  # nothing to fall back on: report the unknown id
        if known:
            subs = [self.subagents[i] for i in known]
        else:  # no ids, or only unknown ones (small models invent ids): the caller's running subagents
            subs = [
                s
                for s in self.subagents.values()
                if s.state == "running" and (caller is None or s.spawned_by == caller)
            ]
        jobs = [s.job for s in subs if s.job is not None and not s.job.done() and s.agent.name != caller]
        if jobs:
            await asyncio.wait(jobs, timeout=timeout if timeout is not None else self.wait_timeout)
        return subs

    async def follow_up(self, sub_id: str, message: str) -> Subagent:
        """Continue a subagent in its own thread (after its current run, if it is running)."""
        sub = self._get(sub_id)
        if sub.state == "cancelled":
            raise ToolError(f"{sub_id} was cancelled; spawn a new subagent instead.")
        sub.state = "running"
        sub.job = asyncio.create_task(self._run(sub, message, previous=sub.job))
        return sub

    async def cancel(self, sub_id: str) -> Subagent:
        """Stop a subagent's current run."""
        sub = self._get(sub_id)
        if sub.job is not None and not sub.job.done():
            sub.job.cancel()
            await asyncio.gather(sub.job, return_exceptions=True)
        if sub.state == "running":
            sub.state = "cancelled"
        return sub

    def listing(self) -> str:
        """The subagents as lines: id, state, task, model calls and tokens."""
        if not self.subagents:
            return "No subagents."
        return "\n".join(
            f"{s.id} · {s.state} · depth {s.depth} · {s.metrics.model_calls} model calls · "
            f"{s.metrics.prompt_tokens + s.metrics.completion_tokens} tokens · {s.task[:80]}"
            for s in self.subagents.values()
        )

    @property
    def metrics(self) -> RunMetrics:
        """Every subagent's metrics summed."""
        total = RunMetrics()
        for sub in self.subagents.values():
            total = total.merge(sub.metrics)
        return total

    async def aclose(self) -> None:
        """Cancel every running subagent."""
        for sub in list(self.subagents.values()):
            await self.cancel(sub.id)

    def _register(self, ctx: RunContext, child: SubagentRunner, task: str, depth: int, parent: str) -> Subagent:
        """A new subagent of ``parent``'s: its own thread, counted in the parent's run."""
        self._depth_of[child.name] = depth
        sub_id = child.name.rsplit("/", 1)[1]
        sub = Subagent(
            id=sub_id,
            task=task,
            agent=child,
            thread=ThreadRef(resource_id="subagents", thread_id=f"{parent}/{sub_id}"),
            depth=depth,
            parent_metrics=ctx.metrics,
            spawned_by=parent,
        )
        self.subagents[sub.id] = sub
        ctx.metrics.subagent_spawns += 1
        return sub

    def _get(self, sub_id: str) -> Subagent:
        if sub_id not in self.subagents:
            known = ", ".join(self.subagents) or "none"
            raise ToolError(f"No subagent '{sub_id}'. Known: {known}.")
        return self.subagents[sub_id]

    async def _run(self, sub: Subagent, prompt: str, previous: asyncio.Task[None] | None) -> None:
        if previous is not None and not previous.done():
            await asyncio.gather(previous, return_exceptions=True)
        async with self._slots:
            try:
                result = await sub.agent.run(prompt, thread=sub.thread)
            except asyncio.CancelledError:
                sub.state = "cancelled"
                raise
            except Exception as error:  # reported to the parent, never raised into its run
                sub.state, sub.error = "failed", error
                return
        sub.state, sub.result, sub.error = "done", result, None
        sub.metrics = sub.metrics.merge(result.metrics)
        sub.parent_metrics.subagent_prompt_tokens += result.metrics.prompt_tokens
        sub.parent_metrics.subagent_completion_tokens += result.metrics.completion_tokens


class _Progress:
    """A helper's run events, told to the user as the ``delegate`` call's progress: each tool call it starts."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def handle(self, event: object) -> None:
        from cortana.agent.events import ToolCallStarted
        from cortana.agent.logger import format_arguments

        if isinstance(event, ToolCallStarted):
            self.ctx.report(f"helper: {format_arguments(event.call)}")
