"""The repair workflow in the terminal: ``cortana fix``, ``/fix``, and change requests sent to it unnamed.

Progress goes to stderr as dim lines (``fix 12s: candidate 2 of 4: the tests pass``); the answer (what was
found, the diff, which tests now pass) goes to the answer stream like any reply, and into the thread's
memory, so the conversation can go on from it. The fix is written through the gate: asked for each file
(showing its diff), or allowed by ``--yes``. Ctrl-C stops it with the user's files untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from cortana.config import Settings, child_process_environment
from cortana.display import printable
from cortana.messages import Message, RunMetrics, ThreadRef, ToolCall
from cortana.repair.routing import DEFAULT_REQUEST, is_change_request
from cortana.safegit import safe_git_environment
from cortana.tools import RunContext, Tool

# The workflow, the tools and the gate load with the first fix (the prompt shows before them: docs/cli.md).
if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.knowledge.graph import KnowledgeGraph
    from cortana.memory.stored import StoredMemory
    from cortana.repair.testrun import TestCommand
    from cortana.repair.workflow import Progress, RepairResult, RepairWorkflow
    from cortana.sandbox.policy import Sandbox
    from cortana.tools.permissions import PermissionDecision

__all__ = ["TerminalFixer", "diff_text"]


_DIFF_STYLES = {"+++": "bold", "---": "bold", "@@ ": "cyan", "+": "green", "-": "red"}


def diff_text(diff: str) -> Text:
    """A unified diff for the terminal: added lines green, removed red, headers bold; escapes shown, not obeyed."""
    text = Text()
    for line in printable(diff).splitlines():
        text.append(line + "\n", style=_DIFF_STYLES.get(line[:3], _DIFF_STYLES.get(line[:1], "")))
    return text


class TerminalFixer:
    """Runs the repair workflow for the terminal (see the module docstring).

    Args:
        workspace: the project.
        settings: its settings (``fix:``, ``test:``, whether the folder is trusted).
        console: where progress goes (stderr).
        show: writes the answer (stdout, or the REPL's console).
        graph: the code graph, when there is one (its index, once loaded, helps find where a change goes).
        sandbox: the workspace's sandbox (the assistant's): git and the test runs are confined by it.
    """

    def __init__(
        self,
        workspace: Path,
        settings: Settings,
        console: Console,
        show: Callable[[Text], None],
        graph: KnowledgeGraph | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.workspace = workspace
        self.sandbox = sandbox
        self.graph = graph
        self.settings = settings
        self.console = console
        self.show = show
        self._command: TestCommand | None = None
        self._looked = False
        self.handed_over: str | None = None
        """Set while the tool loop has a turn the workflow gave up on: what it found. The loop's own call of the
        workflow (the ``fix_with_tests`` tool) then gets that, rather than the same search again."""

    @property
    def test_command(self) -> TestCommand | None:
        """How the project runs its tests (looked for once)."""
        if not self._looked:
            from cortana.repair.testrun import find_test_command

            self._looked = True
            self._command = find_test_command(self.workspace, self.settings.test)
        return self._command

    def wants(self, prompt: str) -> bool:
        """Whether ``prompt`` goes through the workflow unnamed: a change request, ``fix.auto``, and tests here."""
        return self.settings.fix.auto and is_change_request(prompt) and self.test_command is not None

    async def run(
        self, agent: Agent, request: str, thread: ThreadRef, memory: StoredMemory | None, *, explicit: bool
    ) -> bool | None:
        """Run the workflow for ``request``: True when it fixed it (or nothing failed), False when it answered
        without a fix, None when the tool loop should take over instead.

        An explicit ``/fix`` always answers; a routed request goes to the loop when no fix was found.
        """
        request = request.strip() or DEFAULT_REQUEST
        self.handed_over = None
        workflow = await self.workflow(agent, thread)
        self.console.print(Text(f"fix: {printable(request)[:200]}", style="dim"))
        result = await workflow.run(request)
        self.console.print(Text(f"fix: {result.summary()}", style="dim"), soft_wrap=True)
        if result.status != "fixed" and not explicit and result.status not in ("passing", "refused"):
            self._say(f"{result.message} The assistant takes it from here.", result.seconds)
            self.handed_over = result.message
            return None
        answer, applied = await self._answer(workflow, result)
        if memory is not None:
            await memory.append_messages(thread, [Message.user(request), Message.assistant(answer)])
        return result.status == "passing" or (result.status == "fixed" and applied)

    def tool(self, agent: Callable[[], Awaitable[Agent]]) -> Tool:
        """``fix_with_tests``: the workflow as a tool the agent can call (each test run and write still asks).

        ``agent`` gives the agent whose engine and permission gate the workflow uses (the assistant's).
        """

        async def fix_with_tests(request: str, context: RunContext) -> str:
            """Change the code so that the project's tests pass and the request is done: finds where, tries several
            patches in a scratch copy, keeps the one the tests accept, and writes it (asking first).

            Args:
                request: what to change, e.g. "make the failing test pass" or "add a --reverse flag".
            """
            if self.handed_over is not None:  # the workflow ran on this turn's request already
                return (
                    f"The fix workflow already ran on this request: {self.handed_over} Do not call fix_with_tests "
                    "again on this turn; read the code and change it with the file tools."
                )
            workflow = await self.workflow(await agent(), context.thread)
            result = await workflow.run(request)
            if result.status != "fixed":
                return result.message
            written = await workflow.apply(result)
            applied = f"Applied to {', '.join(written)}." if written else "Not applied: writing it was not allowed."
            return f"{result.message} {applied}\n{result.diff}"

        return Tool(fix_with_tests, default_action="allow", timeout=3600)

    async def workflow(self, agent: Agent, thread: ThreadRef) -> RepairWorkflow:
        """The workflow for this project, on ``agent``'s engine and gate."""
        from cortana.repair.workflow import RepairSettings, RepairWorkflow
        from cortana.tools.permissions import authorize_call

        environment = child_process_environment({})
        if not self.settings.trusted:
            environment = safe_git_environment(self.workspace, environment, sandbox=self.sandbox)
        context = RunContext(thread, RunMetrics(), [])

        async def authorize(call: ToolCall, tool: Tool) -> PermissionDecision:
            return await authorize_call(agent.permissions, call, tool, context)

        fix = self.settings.fix
        return RepairWorkflow(
            await agent.client(),
            self.workspace,
            test_command=self.test_command,
            environment=environment,
            authorize=authorize,
            graph=self.graph.index if self.graph is not None else None,
            settings=RepairSettings(
                samples=fix.samples,
                per_location=fix.per_location,
                rewrite=fix.rewrite,
                rounds=fix.rounds,
                test_timeout=fix.test_timeout,
                **({"seed": self.settings.seed} if self.settings.seed is not None else {}),
            ),
            on_progress=self._progress,
            sandbox=self.sandbox,
        )

    def _progress(self, progress: Progress) -> None:
        self._say(progress.message, progress.seconds)

    def _say(self, message: str, seconds: float) -> None:
        self.console.print(Text(f"fix {seconds:.0f}s: {printable(message)[:300]}", style="dim"), soft_wrap=True)

    async def _answer(self, workflow: RepairWorkflow, result: RepairResult) -> tuple[str, bool]:
        """The answer shown and kept, and whether the fix was written whole."""
        lines = [result.message]
        applied = False
        if result.status == "fixed" and result.diff:
            self.show(diff_text(result.diff))
            written = await workflow.apply(result)
            applied = bool(written) and len(written) == len(result.patch.files if result.patch else ())
            if applied:
                lines.append(f"Applied to {', '.join(written)}.")
            elif written:
                lines.append(f"Applied to {', '.join(written)} only; the rest was not allowed.")
            else:
                lines.append("Not applied: writing it was not allowed (the diff is above).")
        answer = " ".join(lines)
        self.show(Text(printable(answer) + "\n"))
        diff = f"\n\n```diff\n{result.diff}```" if result.diff else ""
        return answer + diff, applied
