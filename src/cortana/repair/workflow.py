"""``RepairWorkflow``: run the tests, localize, sample patches, let the tests choose, climb, and apply with the user.

One free-form tool loop asks a 1.5B model to do everything at once, and it
rarely does: it answers after one read, or edits the failing test. This is a
fixed pipeline instead, after Agentless (Xia et al., 2024), sized for small
models on a CPU. Each stage (``stages/graph.py``) reads and extends one
:class:`~cortana.repair.run.RepairRun`, given the frozen
:class:`~cortana.repair.deps.RepairDeps`, and returns the next stage; this
module runs them until one returns the result:

1. **Tests.** Find how the project runs its tests (``testrun.py``), ask the
   gate once to run them (they are the project's code), and run them traced
   in a scratch copy (``scratch.py``), confined by the kernel: the failures,
   their frames, and what the project's functions were given and gave back
   while each failing test ran, are the evidence (``Tests``; a rename is made
   here, ``stages/renames.py``).
2. **Localize** (``localize.py``, ``stages/localize.py``): rank functions
   and files from the failures, the code the tests call, the request and the
   code graph; when more compete than fit, the model picks among their
   signatures under a grammar.
3. **Sample** (``coders.py``, ``stages/sample.py``; ``Round`` and one
   ``Asking`` per prompt), several short rounds within a time budget
   (``budget_seconds``): each prompt is asked for one greedy answer and a batch
   of hot ones, decoded together where the engine has slots (the prompt read
   once). Round one: a missing definition written whole; each top function
   written again whole; the top function again, told what the failing tests
   gave it and got back (the feedback rewrite); all of them together; edits
   anywhere; edits per location. A rename is made without a model. The
   small changes (``stages/mutate.py``) come before any sample where a line
   spectrum ranks them, else after the first.
4. **Validate** (``stages/judge.py``) each new patch at once, in the scratch
   copy: the failing tests first, then the whole run; the first the tests
   accept ends the search (with nothing failing before, two samples must
   agree). A test file is never patched unless the user asked for it. The
   kept patch loses each edit the tests do not need, unless the request asks
   for more than a fix.
5. **Climb** (``stages/climb.py``; ``EndRound``, then ``Climb``). A patch
   that fixes some failing tests and breaks none becomes the next round's
   starting point: its tests run traced, what still fails is localized again,
   and the round samples on top of it (a change spread over two places is
   found one place at a time). Without one, the next round builds on the
   closest attempt and also asks for a different fix.
6. **Apply** (:meth:`RepairWorkflow.apply`): each changed file through the
   gate as an ``edit_file`` with its diff, only if the file is still as it was
   read. When nothing passed, the result says what was tried, the closest
   attempt with its diff, what still fails, and what to try next
   (``stages/report.py``).

Progress (:class:`~cortana.repair.run.Progress`) is reported at each step;
cancelling the task at any point leaves the user's files untouched (the copy
is removed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from cortana.errors import UserError
from cortana.knowledge.index import GraphIndex
from cortana.messages import ToolCall
from cortana.models.base import ModelClient
from cortana.repair.deps import Authorize, RepairDeps
from cortana.repair.patches import Patch, unified_diff
from cortana.repair.request import FixRequest
from cortana.repair.run import FixStatus, Progress, RepairResult, RepairRun, RepairSettings, Stage, Stronger
from cortana.repair.scratch import ScratchCopy
from cortana.repair.stages.graph import Step, Tests
from cortana.repair.stages.report import make_result
from cortana.repair.testrun import TestCommand
from cortana.safefs import PathRefused, SafeTree
from cortana.sandbox.policy import Sandbox
from cortana.tools import Tool

__all__ = ["Authorize", "Progress", "RepairResult", "RepairSettings", "RepairWorkflow"]

NO_TESTS = (
    "This folder has no tests Cortana can run (pytest, npm test, go test, cargo test, make test, or `test:` in "
    "cortana.yml), so no fix can be checked."
)


def _run_tests(command: str) -> str:
    """Run the project's tests (the workflow runs them itself, in a scratch copy; the gate decides)."""
    raise UserError("the repair workflow runs the tests itself")


def _edit(path: str, diff: str) -> str:
    """Apply a fix's diff to a file (the workflow writes it itself; the gate decides)."""
    raise UserError("the repair workflow writes its fix itself")


TEST_TOOL = Tool(_run_tests, name="run_command", description="Run a shell command in the workspace.")
"""What the gate is asked about before the tests run: running them is running the project's code."""
EDIT_TOOL = Tool(_edit, name="edit_file", description="Change a file in the workspace.")
"""What the gate is asked about before a fix is written: each file, with its diff."""


class RepairWorkflow:
    """The pipeline of the module docstring, over one workspace.

    Args:
        client: the engine.
        workspace: the project.
        test_command: how its tests run (:func:`~cortana.repair.testrun.find_test_command`); None: it has none.
        environment: the environment tests (and git) run with.
        authorize: asks the gate; None allows everything (a library caller that decided already).
        graph: the code graph's index, when one is loaded (for the names of the request).
        settings: how hard to try.
        on_progress: called with each :class:`Progress`.
        sandbox: the workspace's sandbox: git and every test run are confined by it (the tests write only the
            scratch copy); default: the kernel's, where it can (``Sandbox(workspace, enabled=False)`` for none).
        stronger: a larger model for the last round (started only when the search gets there).
        sampler: the model that writes the samples (``models.sampler``; started when the first round begins, and
            stopped when the fix ends or its last round goes to ``stronger``); None: ``client`` writes them.
        before_write: called with each file and its new text just before :meth:`apply` writes it (the assistant's
            checkpoints keep what it held).
    """

    def __init__(
        self,
        client: ModelClient,
        workspace: Path,
        *,
        test_command: TestCommand | None,
        environment: Mapping[str, str],
        authorize: Authorize | None = None,
        graph: GraphIndex | None = None,
        settings: RepairSettings | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        sandbox: Sandbox | None = None,
        stronger: Stronger | None = None,
        sampler: Stronger | None = None,
        before_write: Callable[[Path, str], None] | None = None,
    ) -> None:
        self.client = client
        self.before_write = before_write
        self.stronger = stronger
        self.sampler = sampler
        self.sandbox = sandbox if sandbox is not None else Sandbox(workspace)
        self.workspace = workspace.resolve()
        self.test_command = test_command
        self.environment = environment
        self.authorize = authorize
        self.graph = graph
        self.settings = settings or RepairSettings()
        self.on_progress = on_progress

    # -- the pipeline -------------------------------------------------------------------------------------

    async def run(self, request: str | FixRequest, *, plan_only: bool = False) -> RepairResult:
        """Find a patch for ``request`` that the project's tests accept (nothing is written here). With
        ``plan_only`` (plan mode), stop once the tests ran and the places to change are found: the result
        (``FixStatus.PLANNED``) is the plan, as steps."""
        fix = request if isinstance(request, FixRequest) else FixRequest.parse(request)
        command = self.test_command
        if command is None:
            nothing = RepairRun(fix, self.settings, TestCommand("", "other", ""))
            return make_result(nothing, FixStatus.NO_TESTS, NO_TESTS)
        run = RepairRun(fix, self.settings, command)
        run.plan_only = plan_only
        try:
            return await self._run(run, self._deps())
        finally:
            for engine in (run.stronger, run.sampler):
                if engine is not None:
                    await engine.aclose()

    def _deps(self) -> RepairDeps:
        """What a fix runs with, read from the workflow's attributes as it starts (a caller may have set them)."""
        return RepairDeps(
            client=self.client,
            workspace=self.workspace,
            test_command=self.test_command,
            environment=self.environment,
            authorize=self.authorize,
            graph=self.graph,
            settings=self.settings,
            on_progress=self.on_progress,
            sandbox=self.sandbox,
            stronger=self.stronger,
            sampler=self.sampler,
            before_write=self.before_write,
        )

    async def _run(self, run: RepairRun, deps: RepairDeps) -> RepairResult:
        command = run.command
        ask = ToolCall(id="repair-tests", name="run_command", arguments={"command": command.command})
        if not await deps.allowed(ask, TEST_TOOL):
            message = f"Running the tests (`{command.command}`) was not allowed; nothing was tried."
            return make_result(run, FixStatus.REFUSED, message)
        deps.say(run, Stage.TESTS, f"running the tests ({command.command}) in a scratch copy")
        with ScratchCopy(deps.workspace, deps.environment, deps.sandbox) as scratch:
            run.scratch = scratch
            try:
                return await _stages(run, deps)
            finally:
                if run.warm is not None:
                    await run.warm.aclose()

    # -- applying ---------------------------------------------------------------------------------------------

    async def apply(self, result: RepairResult) -> list[str]:
        """Write ``result``'s patch into the workspace through the gate, one file at a time; the files written.

        A file that changed since the workflow read it is not written (the message says so).

        Raises:
            UserError: there is no patch, or a file changed since it was read.
        """
        if result.patch is None:
            raise UserError("there is no patch to apply")
        written: list[str] = []
        allowed = self._deps().allowed
        tree = SafeTree(self.workspace)  # Cortana's one writer: no symlink followed out of the workspace
        for relative, text in sorted(result.patch.files.items()):
            target = self.workspace / relative
            try:
                current: str | None = tree.read_bytes(relative).decode("utf-8")
            except FileNotFoundError:
                current = None
            except (OSError, UnicodeDecodeError) as error:
                raise UserError(f"{relative} cannot be written: {error}; nothing more was written") from None
            if current != result.originals.get(relative):
                raise UserError(f"{relative} changed while the fix was being found; nothing more was written")
            one = Patch(result.patch.blocks, {relative: text})
            call = ToolCall(id=f"repair-{relative}", name="edit_file",
                            arguments={"path": relative, "diff": unified_diff(result.originals, one)})  # fmt: skip
            if not await allowed(call, EDIT_TOOL):
                break
            try:
                if self.before_write is not None:
                    self.before_write(target, text)
                tree.write_text(relative, text)
            except PathRefused as refused:
                raise UserError(f"{refused}; nothing more was written") from None
            written.append(relative)
        return written


async def _stages(run: RepairRun, deps: RepairDeps) -> RepairResult:
    """The stages in the scratch copy: the tests before, localize, then the search (``stages/graph.py``), each run
    in turn until one ends the fix with its result."""
    step: Step | RepairResult = Tests()
    while not isinstance(step, RepairResult):
        step = await step.run(run, deps)
    return step
