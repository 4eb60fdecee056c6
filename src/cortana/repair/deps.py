"""``RepairDeps``: what one fix runs with and does not change while it runs, kept apart from its state (``run.py``).

The workflow makes one from its own attributes as each fix starts (a caller may set ``on_progress`` after making
the workflow), and every stage (``stages/``) is given it along with the :class:`~cortana.repair.run.RepairRun`.
The three things the stages do through these dependencies are written here, once each: say a step
(:meth:`RepairDeps.say`), ask the gate (:meth:`RepairDeps.allowed`), and run the tests in the scratch copy
(:meth:`RepairDeps.tests`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cortana.messages import ToolCall
from cortana.repair.run import Progress, RepairRun, RepairSettings, Stage, Stronger
from cortana.repair.testrun import TestCommand, TestReport, pytest_environment, run_tests
from cortana.repair.warm import WarmTests
from cortana.sandbox.policy import Sandbox
from cortana.tools import Tool
from cortana.tools.permissions import PermissionDecision

if TYPE_CHECKING:
    from cortana.knowledge.index import GraphIndex
    from cortana.models.base import ModelClient

__all__ = ["Authorize", "RepairDeps"]

Authorize = Callable[[ToolCall, Tool], Awaitable[PermissionDecision]]
"""Asks the permission gate about a call (running the tests, writing a file)."""


@dataclass(frozen=True)
class RepairDeps:
    """The workflow's arguments for one fix, as :class:`~cortana.repair.workflow.RepairWorkflow` describes them:
    the engine, the workspace (resolved), how its tests run, their environment, the gate, the code graph, the
    settings, the progress callback, the sandbox, the larger model, the model that writes the samples, and what is
    called before a file is written."""

    client: ModelClient
    workspace: Path
    test_command: TestCommand | None
    environment: Mapping[str, str]
    authorize: Authorize | None
    graph: GraphIndex | None
    settings: RepairSettings
    on_progress: Callable[[Progress], None] | None
    sandbox: Sandbox
    stronger: Stronger | None
    sampler: Stronger | None
    before_write: Callable[[Path, str], None] | None

    def engine(self, run: RepairRun) -> ModelClient:
        """The engine in use: the larger model's once the last round went to it."""
        return run.stronger or self.client

    def writer(self, run: RepairRun) -> ModelClient:
        """The engine that writes the samples: the larger model's in the last round, else the sampler's (once
        started), else the engine in use."""
        return run.stronger or run.sampler or self.client

    def say(self, run: RepairRun, stage: Stage, message: str) -> None:
        """Report one step: kept in the run's progress, and given to ``on_progress``."""
        progress = Progress(stage, message, run.seconds)
        run.progress.append(progress)
        if self.on_progress is not None:
            self.on_progress(progress)

    async def allowed(self, call: ToolCall, tool: Tool) -> bool:
        """Whether the gate allows ``call`` (with no gate, everything is)."""
        if self.authorize is None:
            return True
        decision = await self.authorize(call, tool)
        return decision.action == "allow"

    async def tests(
        self, run: RepairRun, *, tests: Sequence[str] = (), trace: bool = False, warm: bool = False
    ) -> TestReport:
        """The tests run in the scratch copy, confined to it: a few tests (or, with ``warm``, the whole suite for a
        partial fix) in a warm process where it can be used; the run that decides that a patch passes is cold."""
        assert run.scratch is not None
        sandbox = self.sandbox.elsewhere(run.scratch.root)
        warm = warm or (bool(tests) and not trace)
        if warm and not run.warm_tried and run.command.kind == "pytest":
            run.warm_tried = True  # the failing tests alone, run again and again: a process kept warm (``warm.py``)
            environment = pytest_environment(run.scratch.root, self.environment)
            warm_up = list(tests) or (sorted(run.before.failed) if run.before is not None else [])
            run.warm = await WarmTests.start(
                run.command.command, run.scratch.root, environment, ["--collect-only", "-q", *warm_up],
                sandbox=sandbox, timeout=self.settings.test_timeout,
            )  # fmt: skip
        return await run_tests(
            run.command,
            run.scratch.root,
            self.environment,
            tests=tests,
            timeout=self.settings.test_timeout,
            trace=trace,
            sandbox=sandbox,
            warm=run.warm if warm else None,
        )
