"""The fix workflow in the terminal: ``cortana fix``, ``/fix``, and change requests sent to it unnamed.

The workflow is the assistant's (:meth:`cortana.Assistant.fix`); the terminal shows it. Progress goes to stderr
as dim lines (``fix 12s: patch 2: 2 of 3 failing tests pass``); the fix's diff is shown before it is written
(asked for each file, or allowed by ``--yes``); the answer (what was found, the diff, which tests now pass, or,
when nothing passed, the closest attempt and what to try next) goes to the answer stream like any reply, and
into the thread's memory, so the conversation can go on from it. Ctrl-C stops it with the user's files untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from cortana.display import printable
from cortana.messages import ThreadRef
from cortana.repair.routing import DEFAULT_REQUEST

if TYPE_CHECKING:
    from cortana.assistant import Assistant
    from cortana.repair.run import Progress, RepairResult

__all__ = ["TerminalFixer", "diff_text"]


_DIFF_STYLES = {"+++": "bold", "---": "bold", "@@ ": "cyan", "+": "green", "-": "red"}


def diff_text(diff: str) -> Text:
    """A unified diff for the terminal: added lines green, removed red, headers bold; escapes shown, not obeyed."""
    text = Text()
    for line in printable(diff).splitlines():
        text.append(line + "\n", style=_DIFF_STYLES.get(line[:3], _DIFF_STYLES.get(line[:1], "")))
    return text


class TerminalFixer:
    """The terminal's side of a fix (see the module docstring).

    Args:
        assistant: whose fix workflow runs (its engine, gate, sandbox and ``fix:`` settings).
        console: where progress goes (stderr).
        show: writes the answer (stdout, or the REPL's console).
    """

    def __init__(self, assistant: Assistant, console: Console, show: Callable[[Text], None]) -> None:
        self.assistant = assistant
        self.console = console
        self.show = show

    @property
    def has_tests(self) -> bool:
        """Whether the project has tests the workflow can run."""
        return self.assistant.test_command is not None

    def wants(self, prompt: str) -> bool:
        """Whether ``prompt`` goes through the workflow unnamed (see :meth:`cortana.Assistant.wants_fix`)."""
        return self.assistant.wants_fix(prompt)

    async def plan(self, request: str, thread: ThreadRef) -> bool:
        """Plan mode: run the tests and find where the change goes, and show that as the plan; True when there is
        one to accept (a fix to look for)."""
        from cortana.repair.run import FixStatus  # the repair modules load with the first fix, not with the prompt

        request = request.strip() or DEFAULT_REQUEST
        self.console.print(Text(f"fix (plan): {printable(request)[:200]}", style="dim"))
        outcome = await self.assistant.fix(request, thread=thread, on_progress=self._progress, plan_only=True)
        self.show(Text(printable(outcome.answer) + "\n"))
        return outcome.result.status is FixStatus.PLANNED

    async def run(self, request: str, thread: ThreadRef) -> bool:
        """Run the workflow for ``request`` and show it; True when the request is done (fixed and written, or
        nothing failed). When no patch passes, the answer says so, with the closest attempt: the tool loop does not
        take over (a small model's loop would only say it cannot change the code)."""
        request = request.strip() or DEFAULT_REQUEST
        self.console.print(Text(f"fix: {printable(request)[:200]}", style="dim"))
        outcome = await self.assistant.fix(
            request, thread=thread, on_progress=self._progress, before_writing=self._diff
        )
        self.console.print(Text(f"fix: {outcome.result.summary()}", style="dim"), soft_wrap=True)
        answer = outcome.answer
        if outcome.result.patch is not None:  # its diff is on the screen already
            answer = answer.split("\n\n```diff", 1)[0]
        elif outcome.result.closest or outcome.result.set_aside:
            self.show(Text(printable(answer.split("\n\n", 1)[0]) + "\n"))
            if outcome.result.closest:
                self.show(Text("The closest attempt:\n"))
                self.show(diff_text(outcome.result.closest))
            if outcome.result.set_aside:
                self.show(Text(f"Set aside ({printable(outcome.result.set_aside_why)}):\n"))
                self.show(diff_text(outcome.result.set_aside))
            return outcome.complete
        self.show(Text(printable(answer) + "\n"))
        return outcome.complete

    def _diff(self, result: RepairResult) -> None:
        self.show(diff_text(result.diff))

    def _progress(self, progress: Progress) -> None:
        line = f"fix {progress.seconds:.0f}s: {printable(progress.message)[:300]}"
        self.console.print(Text(line, style="dim"), soft_wrap=True)
