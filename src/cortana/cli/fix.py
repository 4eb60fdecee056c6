"""The fix workflow in the terminal: ``cortana fix``, ``/fix``, and change requests sent to it unnamed.

The workflow is the assistant's, reached through its one turn (:meth:`cortana.Assistant.turn`); the terminal
renders the turn's fix events. Progress goes to stderr
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

if TYPE_CHECKING:
    from cortana.assistant import Assistant
    from cortana.repair.run import FixOutcome, Progress, RepairResult

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
        self.active = False
        """A fix is running (between its start and its end): a Ctrl-C leaves the files as they were."""
        self.planning = False

    @property
    def has_tests(self) -> bool:
        """Whether the project has tests the workflow can run."""
        return self.assistant.test_command is not None

    def wants(self, prompt: str) -> bool:
        """Whether ``prompt`` goes through the workflow unnamed (see :meth:`cortana.Assistant.wants_fix`)."""
        return self.assistant.wants_fix(prompt)

    def render(self, event: object) -> bool:
        """Show ``event`` when it is one of a turn's fix events (``cortana.turn.events``); False for any other."""
        from cortana.turn.events import FixFinished, FixFound, FixProgress, FixStarted

        if isinstance(event, FixStarted):
            self.active, self.planning = True, event.plan
            label = "fix (plan)" if event.plan else "fix"
            self.console.print(Text(f"{label}: {printable(event.request)[:200]}", style="dim"))
        elif isinstance(event, FixProgress):
            self._progress(event.progress)
        elif isinstance(event, FixFound):
            self._diff(event.result)
        elif isinstance(event, FixFinished):
            self.active = False
            self._finished(event.outcome)
        else:
            return False
        return True

    def _finished(self, outcome: FixOutcome) -> None:
        """The answer: the plan; or what was found (its diff is on the screen already); or, when no patch passed,
        the closest attempt and what was set aside, each as a diff. The tool loop does not take over (a small
        model's loop would only say it cannot change the code)."""
        if self.planning:
            self.show(Text(printable(outcome.answer) + "\n"))
            return
        self.console.print(Text(f"fix: {outcome.result.summary()}", style="dim"), soft_wrap=True)
        answer, result = outcome.answer, outcome.result
        if result.patch is not None:  # its diff is on the screen already
            answer = answer.split("\n\n```diff", 1)[0]
        elif result.closest or result.set_aside:
            self.show(Text(printable(answer.split("\n\n", 1)[0]) + "\n"))
            if result.closest:
                self.show(Text("The closest attempt:\n"))
                self.show(diff_text(result.closest))
            if result.set_aside:
                self.show(Text(f"Set aside ({printable(result.set_aside_why)}):\n"))
                self.show(diff_text(result.set_aside))
            return
        self.show(Text(printable(answer) + "\n"))

    def _diff(self, result: RepairResult) -> None:
        self.show(diff_text(result.diff))

    def _progress(self, progress: Progress) -> None:
        line = f"fix {progress.seconds:.0f}s: {printable(progress.message)[:300]}"
        self.console.print(Text(line, style="dim"), soft_wrap=True)
