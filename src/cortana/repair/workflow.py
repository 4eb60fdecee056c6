"""``RepairWorkflow``: run the tests, localize, sample patches, let the tests choose, climb, and apply with the user.

One free-form tool loop asks a 1.5B model to do everything at once, and it
rarely does: it answers after one read, or edits the failing test. This is a
fixed pipeline instead, after Agentless (Xia et al., 2024), sized for small
models on a CPU. Each stage reads and extends one :class:`~cortana.repair.run.
RepairRun`:

1. **Tests.** Find how the project runs its tests (``testrun.py``), ask the
   gate once to run them (they are the project's code), and run them traced
   in a scratch copy (``scratch.py``), confined by the kernel: the failures,
   their frames, and what the project's functions were given and gave back
   while each failing test ran, are the evidence.
2. **Localize** (``localize.py``): rank functions and files from the
   failures, the code the tests call, the request and the code graph; when
   more compete than fit, the model picks among their signatures under a
   grammar.
3. **Sample** (``coders.py``), several short rounds within a time budget
   (``budget_seconds``): each prompt is asked for one greedy answer and a batch
   of hot ones, decoded together where the engine has slots (the prompt read
   once). Round one: a missing definition written whole; each top function
   written again whole; the top function again, told what the failing tests
   gave it and got back (the feedback rewrite); all of them together; edits
   anywhere; edits per location. A rename is made without a model.
4. **Validate** each new patch at once, in the scratch copy: the failing
   tests first, then the whole run; the first the tests accept ends the
   search (with nothing failing before, two samples must agree). A test file
   is never patched unless the user asked for it. The kept patch loses each
   edit the tests do not need, unless the request asks for more than a fix.
5. **Climb.** A patch that fixes some failing tests and breaks none becomes
   the next round's starting point: its tests run traced, what still fails is
   localized again, and the round samples on top of it (a change spread over
   two places is found one place at a time). Without one, the next round
   builds on the closest attempt and also asks for a different fix.
6. **Apply** (:meth:`RepairWorkflow.apply`): each changed file through the
   gate as an ``edit_file`` with its diff, only if the file is still as it was
   read. When nothing passed, the result says what was tried, the closest
   attempt with its diff, what still fails, and what to try next.

Progress (:class:`~cortana.repair.run.Progress`) is reported at each step;
cancelling the task at any point leaves the user's files untouched (the copy
is removed).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from cortana.errors import UserError
from cortana.knowledge.index import GraphIndex
from cortana.messages import Message, ToolCall
from cortana.models.base import ModelClient, ModelRequest, ModelSettings, complete
from cortana.prompts import as_data, prompt_text
from cortana.repair.coders import ANYWHERE, Edits, NewDefinition, Rewrite, combined, parses, patched, rewritable
from cortana.repair.feedback import calls_of, failing_text, unread_parameters
from cortana.repair.fitting import adds_gap, gaps, without_gap
from cortana.repair.intent import objection
from cortana.repair.localize import Location, localize, missing_definitions, views_for
from cortana.repair.mutants import BUDGET_SHARE, ranked_mutants, worth_mutating
from cortana.repair.patches import Patch, View, apply_patch, changed_lines, unified_diff
from cortana.repair.rename import rename_patch
from cortana.repair.request import FixRequest
from cortana.repair.run import (
    Ask,
    Attempt,
    FixStatus,
    Progress,
    RepairResult,
    RepairRun,
    RepairSettings,
    Stage,
    Stronger,
    collected,
    got_further,
    now_passing,
)
from cortana.repair.scratch import ScratchCopy
from cortana.repair.symbols import Symbol, SymbolIndex
from cortana.repair.testrun import TestCommand, TestReport, is_test_file, pytest_environment, run_tests
from cortana.repair.warm import WarmTests
from cortana.safefs import PathRefused, SafeTree
from cortana.sandbox.policy import Sandbox
from cortana.tools import Tool
from cortana.tools.permissions import PermissionDecision

__all__ = ["Authorize", "Progress", "RepairResult", "RepairSettings", "RepairWorkflow"]

Authorize = Callable[[ToolCall, Tool], Awaitable[PermissionDecision]]
"""Asks the permission gate about a call (running the tests, writing a file)."""

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
        before_write: Callable[[Path, str], None] | None = None,
    ) -> None:
        self.client = client
        self.before_write = before_write
        self.stronger = stronger
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
            return _result(RepairRun(fix, self.settings, TestCommand("", "other", "")), FixStatus.NO_TESTS, NO_TESTS)
        run = RepairRun(fix, self.settings, command)
        run.plan_only = plan_only
        try:
            return await self._run(run)
        finally:
            if run.stronger is not None:
                await run.stronger.aclose()

    async def _run(self, run: RepairRun) -> RepairResult:
        command = run.command
        ask = ToolCall(id="repair-tests", name="run_command", arguments={"command": command.command})
        if not await self._allowed(ask, TEST_TOOL):
            message = f"Running the tests (`{command.command}`) was not allowed; nothing was tried."
            return _result(run, FixStatus.REFUSED, message)
        self._say(run, Stage.TESTS, f"running the tests ({command.command}) in a scratch copy")
        with ScratchCopy(self.workspace, self.environment, self.sandbox) as scratch:
            run.scratch = scratch
            try:
                return await self._in_scratch(run)
            finally:
                if run.warm is not None:
                    await run.warm.aclose()

    async def _in_scratch(self, run: RepairRun) -> RepairResult:
        """The stages in the scratch copy: the tests before, localize, then the search."""
        fix = run.request
        before = run.before = run.current = await self._tests(run, trace=True)
        self._say(run, Stage.TESTS, f"before any change: {before.summary()}{_first_failures(before)}")
        if before.ok and not fix.wants_change:
            message = f"The tests pass ({before.summary()}): nothing fails, so there is nothing to fix."
            return _result(run, FixStatus.PASSING, message, before=before)
        run.failing = list(before.failures if before.detailed else [])
        run.index = await asyncio.to_thread(SymbolIndex.build, self.workspace)
        if fix.rename is not None:
            return await self._rename(run, *fix.rename)
        for old, new in fix.renamed:
            followed = await self._follow_rename(run, old, new)
            if followed is not None:
                return followed
        self._say(run, Stage.LOCALIZE, "looking for where the change goes")
        run.locations = await self._localize(run, run.index, before)
        if not run.locations:
            message = "Cortana could not tell where in the code this goes."
            return _result(run, FixStatus.NOT_FOUND, message, before=before)
        self._say(run, Stage.LOCALIZE, "candidates: " + ", ".join(run.labels()))
        if run.plan_only:
            return _result(run, FixStatus.PLANNED, _plan(run, before), before=before)
        files = [location.file for location in run.locations]
        files += [file for file, _ in _missing(run)]
        files += [path for path in fix.places if path in run.index.texts]
        run.originals |= {file: run.index.texts[file] for file in dict.fromkeys(files)}
        return await self._search(run)

    async def _search(self, run: RepairRun) -> RepairResult:
        """Rounds of samples until a patch passes, the rounds run out or the budget is spent; between rounds, the
        climb to a partial fix (one that fixes some failing tests, or gets them further, breaking none). A pass
        that only adds the failing assertion's gap (``+ 1``) is held to the end of its round, in case a real fix
        comes (``fitting.py``)."""
        while True:
            found = gaps(run.failing)
            asks = self._asks(run)
            if not run.mutated and run.current is not None and run.current.lines:
                run.mutated = True  # a line spectrum ranks the small changes: they come before any sample
                kept = await self._mutate(run)
                if kept is not None:
                    if not adds_gap(kept.patch, run.originals, found):
                        return await self._keep(run, kept)
                    self._hold(run, kept, found)
            for position, ask in enumerate(asks):
                if run.out_of_time or self._hand_over_now(run):
                    break
                model = (run.stronger or self.client).model
                if not run.fits(model, ask.count):
                    if run.cut_short != run.round:  # said once a round: the asks after it are left out alike
                        self._say(run, Stage.SAMPLE, f"round {run.round}: {_asked(ask)} left out: the last like it "
                                  f"took {run.expected(model, ask.count):.0f} s, past the budget")  # fmt: skip
                    run.cut_short = run.round
                    continue
                began, drawn = run.seconds, run.samples
                for sampled in await self._sample(run, ask):
                    for patch, origin in self._candidates(run, sampled, ask.origin, found):
                        for kept in [await self._try(run, patch, origin), *await self._merges(run, patch)]:
                            if kept is None:
                                continue
                            if not adds_gap(kept.patch, run.originals, found):
                                return await self._keep(run, kept)
                            self._hold(run, kept, found)
                if run.samples > drawn:  # a request was made and answered (a greedy prompt asked before makes none)
                    run.took.setdefault((model, ask.count), []).append(run.seconds - began)
                if not run.mutated:  # after the first sample: what needs no model
                    run.mutated = True
                    kept = await self._mutate(run)
                    if kept is not None:
                        if not adds_gap(kept.patch, run.originals, found):
                            return await self._keep(run, kept)
                        self._hold(run, kept, found)
                following = asks[position + 1] if position + 1 < len(asks) else None
                if (following is None or following.coder != ask.coder) and self._stale(run):
                    break
            if run.held is not None:
                return await self._keep(run, run.held, fitted=found)
            if run.out_of_time or run.round >= self.settings.rounds or not self._another_round_fits(run):
                return self._failed(run)
            run.round += 1
            await self._climb(run)
            await self._escalate(run)

    def _another_round_fits(self, run: RepairRun) -> bool:
        """After a round that left an ask out for time: whether one answer could still be written within the
        budget. If not, the fix ends here rather than climb and localize for a round with no time to sample."""
        return run.cut_short != run.round or run.fits((run.stronger or self.client).model, 1)

    def _stale(self, run: RepairRun) -> bool:
        """Whether the round's other prompts show evidence that no longer holds: a partial fix made a test file run
        that could not be collected (a missing definition, now written). They were made from its one import error;
        the climb shows the function and what its tests computed with it, so it comes next. Asked once the prompt
        that wrote it has had its hot batch too (:meth:`_search`): more answers to that prompt may write it whole."""
        if run.held is not None or (run.base is not None and run.base.collected):
            return False  # a pass is held to the end of the round; a climb from such a fix already shows them
        partial = run.best_partial()
        if partial is None or not partial.collected:
            return False
        self._say(run, Stage.CLIMB, "the tests that could not run now run: the round ends here, to build on that")
        return True

    async def _mutate(self, run: RepairRun) -> Attempt | None:
        """The small changes (``mutants.py``), each judged by the failing tests, strings a failing assertion asks for
        first, then the most suspect lines of every function the failing tests ran (with a line spectrum; else the
        top locations' functions): a test run each, no model call, for at most ``BUDGET_SHARE`` of the budget
        (twice that with a spectrum, whose ranking makes them worth more). Not when the code lacks a definition the
        tests need, nor when no failing test says the code ran and got something wrong (``worth_mutating``: a stub,
        a flag argparse does not know yet); a mutant that fixes some tests is a partial fix like a sample's, and is
        made together with earlier attempts. The first that passes, or None."""
        assert run.index is not None
        if not self.settings.mutants or not run.failing:
            return None
        if _missing(run) or not worth_mutating(run.failing):
            return None
        shown = [loc.symbol for loc in run.locations[: self.settings.per_location] if rewritable(loc.symbol)]
        symbols = [symbol for symbol in shown if symbol is not None]
        spectrum = run.current if run.current is not None and run.current.lines else None
        made = ranked_mutants(run.index, spectrum, symbols, run.failing)[: self.settings.mutants]
        if not made:
            return None
        lines = list(dict.fromkeys(f"{mutant.block.file}:{mutant.line}" for mutant in made))
        named = ", ".join(lines[:4]) + (f" and {len(lines) - 4} more lines" if len(lines) > 4 else "")
        self._say(run, Stage.SAMPLE, f"round {run.round}: {len(made)} small changes, most suspect first "
                  f"({named}), no model")  # fmt: skip
        share = BUDGET_SHARE * (2 if spectrum is not None else 1)
        until = run.seconds + share * self.settings.budget_seconds
        for mutant in made:
            if run.out_of_time or run.seconds > until:
                break
            run.originals.setdefault(mutant.block.file, run.index.texts[mutant.block.file])
            patch = patched([mutant.block], None, run.originals)
            if patch is None:
                continue
            kept = await self._try(run, patch, f"a small change: {mutant.what}")
            if kept is not None:
                return kept
            attempt = run.attempts[patch.key()]
            if attempt.partial and attempt.fixed:  # one token that only moves a failure is merged with nothing
                for merged in await self._merged_with_others(run, attempt):
                    if merged is not None:
                        return merged
        return None

    def _hold(self, run: RepairRun, passing: Attempt, found: set[str]) -> None:
        """Keep the first pass that only adds the test's difference aside to the end of the round."""
        if run.held is None:
            run.held = passing
            gap = " or ".join(sorted(found))
            self._say(
                run, Stage.VALIDATE,
                f"it passes by adding {gap}, the difference the test asked for: kept aside while the round looks "
                "for a fix of the cause",
            )  # fmt: skip

    def _candidates(self, run: RepairRun, sampled: Patch, origin: str, found: set[str]) -> list[tuple[Patch, str]]:
        """What a sample is tried as: first without the gap it adds at the end of a line (when something else is
        left), then as written."""
        less = without_gap(sampled, run.originals, found)
        first = [(less, f"{origin}, less the test's difference")] if less is not None and less.files else []
        return [*first, (sampled, origin)]

    async def _try(self, run: RepairRun, patch: Patch, origin: str, *, merges: int = 0) -> Attempt | None:
        """Count ``patch`` as a sample (validated at once when new; ``merges``: made of attempts, no sample);
        the attempt when the tests accept it (with nothing failing before, two samples must agree)."""
        attempt = run.attempts.get(patch.key())
        if attempt is not None:
            attempt.votes += 1
        else:
            attempt = run.attempts[patch.key()] = Attempt(patch, 1, changed_lines(run.originals, patch), merges=merges)
            attempt.origin = f"round {run.round}, {origin}"
            await self._validate(run, attempt, len(run.attempts))
        assert run.before is not None
        if not attempt.passed or not (run.before.failed or attempt.votes >= 2):
            return None
        why = objection(run.request, attempt.patch, run.originals)
        if why is not None:
            if patch.key() not in run.set_aside:
                run.set_aside[patch.key()] = (attempt, why)
                self._say(run, Stage.VALIDATE, f"the tests accept it, but {why}: set aside")
            return None
        return attempt

    async def _merges(self, run: RepairRun, patch: Patch) -> list[Attempt | None]:
        """``patch`` made together with each of the earlier attempts that change other lines, most promising first
        (at most ``merge_partners``): a fix needed in two functions is often drawn one function per sample, each
        sample failing alone (``daily_report`` passing the currency that ``format_price`` does not take yet). A
        merge that moves the failing tests is merged once more (a change in three places). No model call: a test
        run each. The merges that pass (an empty list: none)."""
        attempt = run.attempts.get(patch.key())
        if attempt is None or attempt.votes > 1:
            return []
        return await self._merged_with_others(run, attempt)

    async def _merged_with_others(self, run: RepairRun, attempt: Attempt) -> list[Attempt | None]:
        if attempt.passed or attempt.broke or attempt.merges > 1 or (attempt.merges and not attempt.partial):
            return []
        partners = [other for other in run.attempts.values() if other is not attempt and other.report is not None
                    and not other.passed and not other.broke]  # fmt: skip
        partners.sort(key=lambda other: (other.gain, other.votes, -other.size), reverse=True)
        tried = 0
        for other in partners:
            if tried >= self.settings.merge_partners or run.out_of_time:
                break
            together = combined(attempt.patch, other.patch, run.originals)
            if together is None or together.key() in run.attempts:
                continue
            tried += 1
            numbers = list(run.attempts)
            one, two = numbers.index(attempt.patch.key()) + 1, numbers.index(other.patch.key()) + 1
            self._say(run, Stage.VALIDATE, f"patches {one} and {two} together")
            depth = max(attempt.merges, other.merges) + 1
            kept = await self._try(run, together, f"patches {one} and {two} together", merges=depth)
            if kept is not None:
                return [kept]
            made = run.attempts[together.key()]
            more = await self._merged_with_others(run, made)
            if more:
                return more
        return []

    async def _keep(self, run: RepairRun, attempt: Attempt, *, fitted: set[str] | None = None) -> RepairResult:
        """The result for a passing ``attempt``, trimmed to the edits the tests need unless more was asked."""
        assert run.before is not None
        kept = attempt
        if run.before.failed and not run.request.wants_more:
            kept = await self._trim(run, attempt)
            if objection(run.request, kept.patch, run.originals) is not None:
                kept = attempt  # the edits the tests do not need are the ones the request asked for
        result = self._fixed(run, kept)
        if fitted:
            gap = " or ".join(sorted(fitted))
            result.message += (
                f" Check it: it adds {gap} at the end of a line, the difference the failing test asked for, and no "
                "fix of the cause passed; it may only fit this test."
            )
        return result

    def _hand_over_now(self, run: RepairRun) -> bool:
        """Half the budget is spent with rounds to come and a larger model waiting: the round in progress stops
        here, so that the larger model's round has the time it needs."""
        return (
            self.stronger is not None
            and not run.escalated
            and run.round < self.settings.rounds
            and run.seconds >= self.settings.budget_seconds / 2
        )

    async def _escalate(self, run: RepairRun) -> None:
        """Give the last round to the larger model: the last by count, or any once half the budget is spent."""
        stronger = self.stronger
        last = run.round >= self.settings.rounds or run.seconds >= self.settings.budget_seconds / 2
        if stronger is None or run.escalated or not last:
            return
        run.escalated = True
        run.stronger_name = stronger.name
        self._say(run, Stage.ESCALATE, f"round {run.round}: handing the last round to {stronger.name}")
        try:
            run.stronger = await stronger.start()
            run.stronger_from = run.round
        except Exception as error:  # any failure to start: the round goes on with the model in use
            run.stronger_name = ""
            self._say(run, Stage.ESCALATE, f"{stronger.name} did not start ({error}); going on with the model in use")

    async def _climb(self, run: RepairRun) -> None:
        """Make the best partial fix the starting point: its tests run traced, what still fails localized again."""
        partial = run.best_partial()
        if partial is None or run.index is None or run.scratch is None:
            return
        run.base = partial
        assert run.before is not None
        self._say(run, Stage.CLIMB, f"building on a patch with which {_gain(run, partial)}")
        run.scratch.write(partial.patch.files)
        try:
            run.current = await self._tests(run, trace=True)
        finally:
            run.scratch.restore()
        run.failing = list(run.current.failures if run.current.detailed else [])
        patched = run.index.with_files(partial.patch.files)
        located = await self._localize(run, patched, run.current)
        run.locations = [loc for loc in located if loc.file in run.originals] or _remapped(run.locations, patched)

    async def _localize(self, run: RepairRun, index: SymbolIndex, report: TestReport) -> list[Location]:
        ranked = localize(
            run.request.text,
            list(report.failures if report.detailed else []),
            index,
            passed=report.passed,
            calls=report.calls or None,
            graph=self.graph,
            tests_may_change=run.request.tests_may_change,
        )
        return await self._choose(run, index, ranked) if ranked else []

    # -- the samples of a round -------------------------------------------------------------------------------

    def _asks(self, run: RepairRun) -> list[Ask]:
        """The prompts of this round: what is written, how hot, how many, on what base."""
        if run.round == 1:
            return self._first_asks(run)
        if run.stronger is not None and run.round == run.stronger_from and run.base is None:
            return self._first_asks(run, fresh=True)  # a fresh model: a first round of its own, feedback included
        if run.base is not None:
            return self._climb_asks(run, run.base)
        closest = run.closest()
        return self._retry_asks(run, closest) if closest is not None else self._first_asks(run)

    def _first_asks(self, run: RepairRun, *, fresh: bool = False) -> list[Ask]:
        """Round one's prompts (``fresh``: the same for a larger model that takes over, feedback rewrite included)."""
        assert run.index is not None
        settings, index = self.settings, run.index
        hot, many = settings.temperature, settings.samples
        views = views_for(run.locations, index)
        asks: list[Ask] = []
        for file, name in _missing(run, index)[:2]:
            asks += [Ask(NewDefinition(file, name), 0.0), Ask(NewDefinition(file, name), hot, max(many - 1, 1))]
        shown = [loc.symbol for loc in run.locations if rewritable(loc.symbol)] if settings.rewrite else []
        top = [loc.symbol for loc in run.locations[: settings.per_location] if loc.symbol in shown]
        symbols = [symbol for symbol in top if symbol is not None]
        asks += [Ask(Rewrite([symbol], index), 0.0) for symbol in symbols]
        together = _in_file_order([symbol for symbol in shown if symbol is not None])
        if len(together) > 1:  # a change that takes them all at once (a new flag: the parser and its use)
            asks.append(Ask(Rewrite(together, index), 0.0, label="rewrite together"))
        asks += self._feedback_asks(run, symbols[:1], index, None, fresh=fresh)
        if symbols:  # before the edits: in the development half's runs edits never passed alone (merges only)
            asks.append(Ask(Rewrite(symbols[:1], index), hot, many))
        edits = Edits(views, index, ANYWHERE, run.request.tests_may_change)
        asks += [Ask(edits, 0.0, label="anywhere"), Ask(edits, hot, many, label="anywhere")]
        for location in run.locations[: settings.per_location]:
            if location.symbol in symbols:
                continue  # its greedy rewrite is the sample made for just it
            lead = f"Make the change in {as_data(location.label)}."
            one = Edits(views_for([location], index), index, lead, run.request.tests_may_change)
            asks.append(Ask(one, 0.0, label="location"))
        return asks

    def _feedback_asks(
        self, run: RepairRun, symbols: Sequence[Symbol], index: SymbolIndex, on: Attempt | None, *, fresh: bool = False
    ) -> list[Ask]:
        """The top function written again, told what it was given and gave back while the failing tests ran (in the
        first ``feedback_rounds`` rounds, and in a larger model's round)."""
        if (run.round > self.settings.feedback_rounds and not fresh) or not symbols:
            return []
        symbol = symbols[0]
        seen = calls_of(symbol, run.current, run.failing)
        if not seen:
            return []
        unread = unread_parameters(symbol, index, run.current, run.failing)
        told = f"Its code never reads {as_data(unread)}, which these calls give it.\n" if unread else ""
        lead = prompt_text("repair_feedback").format(name=as_data(symbol.qualname), calls=seen, unread=told)
        feedback = Rewrite([symbol], index, lead)
        hot, many = self.settings.temperature, self.settings.samples
        return [
            Ask(feedback, 0.0, on=on, label="feedback rewrite"),
            Ask(feedback, hot, many, on=on, label="feedback rewrite"),
        ]

    def _climb_asks(self, run: RepairRun, base: Attempt) -> list[Ask]:
        """On top of a partial fix: what still fails, localized again, rewritten and edited."""
        assert run.index is not None and run.before is not None
        patched = run.index.with_files(base.patch.files)
        views = views_for(run.locations, patched)
        hot, many = self.settings.temperature, self.settings.samples
        lead = prompt_text("repair_climb").format(
            diff=as_data(unified_diff(run.originals, base.patch)), gain=_gain(run, base), failing=_still_failing(run)
        )
        symbols = [loc.symbol for loc in run.locations[: self.settings.per_location] if rewritable(loc.symbol)]
        tops = [symbol for symbol in symbols if symbol is not None]
        asks = self._feedback_asks(run, tops, patched, base)
        asks += [Ask(Rewrite([symbol], patched, lead), 0.0, on=base, label="climb, rewrite") for symbol in tops]
        edits = Edits(views, patched, lead, run.request.tests_may_change)
        asks += [Ask(edits, 0.0, on=base, label="climb"), Ask(edits, hot, many, on=base, label="climb")]
        return asks

    def _retry_asks(self, run: RepairRun, closest: Attempt) -> list[Ask]:
        """No partial fix: build on the closest attempt, and ask for a different fix from the code as it was."""
        assert run.index is not None
        hot, many = self.settings.temperature, self.settings.samples
        failure = as_data(_failure_text(closest.report))
        tried = as_data(unified_diff(run.originals, closest.patch))
        patched = run.index.with_files(closest.patch.files)
        moved = _remapped(run.locations, patched)
        more = prompt_text("repair_more").format(diff=tried, failure=failure)
        on_top = Edits(views_for(moved, patched), patched, more, run.request.tests_may_change)
        different = prompt_text("repair_retry").format(diff=tried, failure=failure)
        again = Edits(views_for(run.locations, run.index), run.index, different, run.request.tests_may_change)
        asks = [Ask(on_top, 0.0, on=closest, label="more"), Ask(on_top, hot, many, on=closest, label="more")]
        for location in moved[: self.settings.per_location]:  # the definitions the attempt left as they were
            left = location.symbol
            if left is not None and rewritable(left) and _untouched(left, patched, run.index):
                asks.append(Ask(Rewrite([left], patched, more), 0.0, on=closest, label="more, rewrite"))
        shown = [loc.symbol for loc in run.locations if rewritable(loc.symbol)] if self.settings.rewrite else []
        symbols = [symbol for symbol in shown if symbol is not None]
        asks += self._feedback_asks(run, symbols, run.index, None)
        asks += [Ask(again, 0.0, label="different"), Ask(again, hot, many, label="different")]
        if len(symbols) > 1:
            together = Rewrite(_in_file_order(symbols), run.index, different)
            asks.append(Ask(together, hot, label="different, rewrite"))
        return asks

    async def _sample(self, run: RepairRun, ask: Ask) -> list[Patch]:
        """The patches ``ask``'s answers make: one request of ``ask.count`` answers (decoded together where the
        engine has slots; the prompt, which the round's asks share up to their last lines, read once)."""
        client = run.stronger or self.client
        grammar = ask.coder.grammar() if client.supports_grammar else None
        if client.supports_grammar and grammar is None:
            return []  # nothing of the code could be shown to it under a grammar
        assert run.index is not None
        brief = _brief(run, ask)
        prompt = prompt_text("repair_request").format(**brief, instruction=ask.coder.instruction())
        most = ask.coder.tokens() or self.settings.patch_tokens
        seed = self.settings.seed + 100 * run.round + run.samples
        settings = ModelSettings(temperature=ask.temperature, seed=seed, max_tokens=most, grammar=grammar)
        if ask.count == 1 and ask.temperature == 0:  # a greedy answer is the same answer: asked once a fix
            if (client.model, prompt) in run.greedy:
                return []
            run.greedy.add((client.model, prompt))
        request = ModelRequest([Message.system(prompt_text("repair_system")), Message.user(prompt)], settings=settings)
        self._say(run, Stage.SAMPLE, f"round {run.round}: {_asked(ask)}")
        try:
            async with asyncio.timeout(run.seconds_left):  # the engine stops writing when the request is dropped
                if ask.count > 1:
                    responses = await client.complete_many(request, ask.count)
                else:
                    responses = [await complete(client, request)]
        except TimeoutError:
            run.cut_short = run.round
            run.model_calls += 1
            self._say(run, Stage.SAMPLE, f"round {run.round}: {_asked(ask)} stopped at the budget, unanswered")
            return []
        run.model_calls += 1 if ask.count <= client.parallel_samples else len(responses)
        run.samples += len(responses)
        patches = []
        for response in responses:
            run.usage.add(response.usage)
            patch = ask.coder.patch(response.message.content, ask.on.patch if ask.on else None, run.originals)
            if patch is not None:
                patches.append(patch)
        return patches

    async def _choose(self, run: RepairRun, index: SymbolIndex, ranked: list[Location]) -> list[Location]:
        """The locations to show: the top ones, or, when more compete, those the model picks from their signatures."""
        limit = self.settings.max_locations
        client = run.stronger or self.client
        if len(ranked) <= limit or not client.supports_grammar:
            return ranked[:limit]
        shortlist = ranked[: limit * 2]
        skeleton = "\n".join(f"{n}. {_signature(location)}" for n, location in enumerate(shortlist, 1))
        text = prompt_text("repair_choose").format(
            request=_request_line(run.request.text),
            failing=failing_text(run.failing, index),
            skeleton=as_data(skeleton),
        )
        numbers = " | ".join(f'"{n}"' for n in range(len(shortlist), 0, -1))  # "10" before "1"
        grammar = f'root ::= num (", " num){{0,{limit - 1}}}\nnum ::= {numbers}\n'
        run.model_calls += 1
        response = await complete(
            client,
            ModelRequest(
                [Message.system(prompt_text("repair_system")), Message.user(text)],
                settings=ModelSettings(temperature=0.0, max_tokens=24, grammar=grammar),
            ),
        )
        run.usage.add(response.usage)
        picked: list[Location] = []
        for word in re.findall(r"\d+", response.message.content):
            number = int(word)
            if 1 <= number <= len(shortlist) and shortlist[number - 1] not in picked:
                picked.append(shortlist[number - 1])
        for location in ranked:  # the model's picks first, then the best ranked, up to the limit
            if len(picked) >= limit:
                break
            if location not in picked:
                picked.append(location)
        return picked[:limit]

    # -- judging ------------------------------------------------------------------------------------------

    async def _validate(self, run: RepairRun, attempt: Attempt, number: int | str) -> None:
        """Run the tests on ``attempt`` in the copy: the failing ones first, then all."""
        assert run.scratch is not None and run.before is not None
        before = run.before
        run.scratch.write(attempt.patch.files)
        try:
            failing = sorted(before.failed) if before.detailed else []
            if failing and run.command.kind == "pytest":
                first = await self._tests(run, tests=failing)
                attempt.fixed = len(now_passing(before, first))
                if not first.ok:
                    attempt.report = first
                    attempt.further = len(got_further(before, first))
                    attempt.collected = bool(collected(before, first))
                    further = f", {attempt.further} get further" if attempt.further else ""
                    shown = f"patch {number}: {attempt.fixed} of {len(failing)} failing tests pass{further}"
                    self._say(run, Stage.VALIDATE, shown)
                    if attempt.fixed or attempt.further:  # a partial fix must break nothing to be climbed from
                        whole = await self._tests(run, warm=True)
                        attempt.broke = _broke(before, whole)
                    return
            after = await self._tests(run)
            attempt.report = after
            if after.detailed and before.detailed:
                attempt.fixed = len(now_passing(before, after))
                attempt.broke = _broke(before, after)
                attempt.passed = after.ok and attempt.broke == 0
            else:
                attempt.passed = after.ok
            verdict = "the tests pass" if attempt.passed else f"the tests fail ({after.summary()})"
            self._say(run, Stage.VALIDATE, f"patch {number}: {verdict}")
        finally:
            run.scratch.restore()

    async def _trim(self, run: RepairRun, kept: Attempt) -> Attempt:
        """``kept`` without the edits the tests do not need.

        A small model's passing patch often carries an edit besides the fix (a function written twice, a line
        reworded); each edit is left out in turn, and where the tests still accept the rest, it goes. One test run
        per edit, no model call.
        """
        originals = run.originals
        blocks = list(kept.patch.blocks)
        index = 0
        while len(blocks) > 1 and index < len(blocks):
            rest = blocks[:index] + blocks[index + 1 :]
            applied = apply_patch(rest, originals)
            if isinstance(applied, str):
                index += 1
                continue
            patch = Patch(
                applied.blocks, {path: text for path, text in applied.files.items() if text != originals[path]}
            )
            if patch.key() == kept.patch.key():  # the edit changed nothing the others did not
                blocks = rest
                continue
            if not patch.files or not parses(patch):
                index += 1
                continue
            trial = Attempt(patch, kept.votes, changed_lines(originals, patch), origin=kept.origin)
            await self._validate(run, trial, f"without edit {index + 1}")
            if trial.passed and trial.fixed >= kept.fixed:
                blocks, kept = rest, trial
            else:
                index += 1
        return kept

    async def _rename(self, run: RepairRun, old: str, new: str) -> RepairResult:
        """A rename is made without a model (``rename.py``); the tests judge it."""
        assert run.index is not None
        patch = rename_patch(run.index.texts, old, new)
        if patch is None:
            message = f"No Python file here uses the name {old}."
            return _result(run, FixStatus.NOT_FOUND, message, before=run.before)
        run.originals = {path: run.index.texts[path] for path in patch.files}
        self._say(run, Stage.RENAME, f"{old} -> {new} in {len(patch.files)} files")
        attempt = Attempt(patch, 1, changed_lines(run.originals, patch), origin="a rename")
        run.attempts[patch.key()] = attempt
        await self._validate(run, attempt, 1)
        if attempt.passed:
            return self._fixed(run, attempt, what=f"Renamed {old} to {new}", where=[f"every use of {old}"])
        failure = _failure_text(attempt.report)[:300]
        message = f"Renaming {old} to {new} in {', '.join(sorted(patch.files))} broke the tests: {failure}"
        return _result(run, FixStatus.FAILED, message, before=run.before, after=attempt.report)

    async def _follow_rename(self, run: RepairRun, old: str, new: str) -> RepairResult | None:
        """The user renamed ``old`` to ``new`` on purpose: every use of ``old`` left becomes ``new`` (the tests too,
        unless the request keeps them), without a model; the result when the tests accept it, else None (the search
        goes on, and no patch may bring ``old`` back)."""
        assert run.index is not None
        texts = {path: text for path, text in run.index.texts.items()
                 if not (run.request.keep_tests and is_test_file(path))}  # fmt: skip
        patch = rename_patch(texts, old, new)
        if patch is None:
            return None
        run.originals |= {path: run.index.texts[path] for path in patch.files}
        self._say(run, Stage.RENAME, f"{old} was renamed to {new}: its uses in {len(patch.files)} files follow")
        kept = await self._try(run, patch, f"the uses of {old} follow its rename")
        if kept is None:
            return None
        return self._fixed(run, kept, what=f"Updated the uses of {old} to {new}", where=sorted(patch.files))

    async def _tests(
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
            if not await self._allowed(call, EDIT_TOOL):
                break
            try:
                if self.before_write is not None:
                    self.before_write(target, text)
                tree.write_text(relative, text)
            except PathRefused as refused:
                raise UserError(f"{refused}; nothing more was written") from None
            written.append(relative)
        return written

    # -- helpers ----------------------------------------------------------------------------------------------

    async def _allowed(self, call: ToolCall, tool: Tool) -> bool:
        if self.authorize is None:
            return True
        decision = await self.authorize(call, tool)
        return decision.action == "allow"

    def _say(self, run: RepairRun, stage: Stage, message: str) -> None:
        progress = Progress(stage, message, run.seconds)
        run.progress.append(progress)
        if self.on_progress is not None:
            self.on_progress(progress)

    def _fixed(
        self, run: RepairRun, winner: Attempt, *, what: str = "Fixed", where: list[str] | None = None
    ) -> RepairResult:
        assert run.before is not None
        before = run.before
        changed = {path: run.originals[path] for path in winner.patch.files}
        after = winner.report
        fixed_tests = sorted(now_passing(before, after)) if after is not None else []
        files = ", ".join(sorted(winner.patch.files))
        tests = f" {', '.join(fixed_tests[:5])} now pass{'es' if len(fixed_tests) == 1 else ''};" if fixed_tests else ""
        summary = after.summary() if after is not None else "passed"
        agreed = f" ({winner.votes} of {run.samples} samples agreed)" if winner.votes > 1 else ""
        unchecked = "" if before.failed else " No test failed before it, so the tests show only that it breaks nothing."
        message = f"{what} in {files}:{tests} the tests: {summary}{agreed}.{unchecked}"
        return _result(
            run, FixStatus.FIXED, message, diff=unified_diff(run.originals, winner.patch), patch=winner.patch,
            originals=changed, origin=winner.origin, before=before, after=after,
            locations=where if where is not None else run.labels(),
        )  # fmt: skip

    def _failed(self, run: RepairRun) -> RepairResult:
        """What was tried, the closest attempt with its diff and what still fails, and what to try next."""
        closest = run.shown_closest()
        spent = f"{run.seconds:.0f}s"
        if not run.attempts:
            message = (
                f"No sample of the {run.samples} drawn ({spent}) made a change that applies to the code; nothing "
                "was changed."
            )
        else:
            tried = f"{len(run.attempts)} distinct patches ({run.samples} samples, {spent})"
            message = f"None of the {tried} passed the tests; nothing was changed."
        diff = unified_diff(run.originals, closest.patch) if closest is not None else ""
        if closest is not None and closest.report is not None:
            assert run.before is not None
            message += (
                f" The closest ({closest.fixed} of {len(run.before.failed)} failing tests pass with it) still fails: "
                f"{_failure_text(closest.report)[:300]}"
            )
        aside, why = next(iter(run.set_aside.values()), (None, ""))
        if aside is not None:
            message += f" One patch the tests accept was set aside: {why}."
        message += f" {_next_steps(run)}"
        return _result(
            run, FixStatus.FAILED, message, before=run.before, after=closest.report if closest else None,
            closest=diff, diff=diff, set_aside=unified_diff(run.originals, aside.patch) if aside else "",
            set_aside_why=why,
        )  # fmt: skip


def _asked(ask: Ask) -> str:
    """An ask as progress names it: ``4 samples (rewrite, T=0.8)``."""
    return f"{f'{ask.count} samples' if ask.count > 1 else 'a sample'} ({ask.origin})"


def _plan(run: RepairRun, before: TestReport) -> str:
    """The fix as a plan: what fails, where the change goes (best first), and how it would be found and checked."""
    failing = ", ".join(failure.test for failure in before.failures[:5]) or before.summary()
    budget = run.settings.budget_seconds
    read = run.request.read()
    return "\n".join(
        [
            "The plan:",
            *([f"From the request: {'; '.join(read)}."] if read else []),
            f"1. The tests show what to fix: {before.summary()} ({failing}).",
            f"2. Where the change goes, most likely first: {', '.join(run.labels())}.",
            f"3. Try patches there in a scratch copy, the tests judging each (at most {budget:g} s).",
            "4. Show the patch the tests accept as a diff, and write it with your approval.",
        ]
    )


def _result(run: RepairRun, status: FixStatus, message: str, **fields: object) -> RepairResult:
    """A result with the run's counts."""
    result = RepairResult(status, message, **fields)  # type: ignore[arg-type]
    result.model_calls = run.model_calls
    result.samples = run.samples
    result.candidates = len(run.attempts)
    result.seconds = run.seconds
    result.prompt_tokens, result.cached_tokens = run.usage.prompt, run.usage.cached
    result.completion_tokens = run.usage.completion
    result.stronger = run.stronger_name if run.stronger is not None else ""
    if not result.locations:
        result.locations = run.labels()
    return result


def _next_steps(run: RepairRun) -> str:
    """What to try when nothing passed: more time, a hint, a larger model."""
    steps = []
    if run.out_of_time or run.cut_short:  # spent, or what was left would not do for one more request
        steps.append(f"give it more time (fix.budget_seconds: {run.settings.budget_seconds:g})")
    steps.append("say where the change goes or what it should do (a function's name, the expected value)")
    steps.append("or run it on a larger model (`cortana models`)")
    return "Next: " + ", ".join(steps) + "."


def _brief(run: RepairRun, ask: Ask) -> dict[str, str]:
    """What every sample of a round is told: the request, the failing tests and the code of the locations (on the
    attempt the ask builds on)."""
    assert run.index is not None
    index = run.index.with_files(ask.on.patch.files) if ask.on is not None else run.index
    locations = run.locations if ask.on is None or ask.on is run.base else _remapped(run.locations, index)
    code = "\n\n".join(_shown(view, index) for view in views_for(locations, index))
    return {
        "request": _request_line(run.request.text),
        "failing": failing_text(run.failing, index, run.current),
        "code": code,
    }


def _request_line(request: str) -> str:
    return f"The request: {as_data(request.strip())}"


def _shown(view: View, index: SymbolIndex) -> str:
    lines = index.texts[view.file].splitlines()
    parts = [f"### {view.file}"]
    for low, high in view.ranges:
        if low > 1:
            parts.append("...")
        parts.append("\n".join(lines[low - 1 : high]))
    if view.ranges and view.ranges[-1][1] < len(lines):
        parts.append("...")
    return as_data("\n".join(parts))


def _broke(before: TestReport, after: TestReport) -> int:
    """How many tests that passed before do not pass after, by count as well as by id: the tests failing now that
    did not fail before, or the fewer passing tests, whichever is more (a test whose id the project makes anew in
    each run, from a set's order or an object's address, is not counted as broken for its new name; nor a test of a
    file that could not be loaded before)."""
    fewer = len(before.passed) - (len(after.passed) - len(now_passing(before, after)))
    uncollected = tuple(f"{failed}::" for failed in before.failed if "::" not in failed)  # a file that did not load
    failing = [test for test in after.failed - before.failed if not test.startswith(uncollected)]
    return max(len(failing), fewer, 0)


def _missing(run: RepairRun, index: SymbolIndex | None = None) -> list[tuple[str, str]]:
    """The definitions the tests or the request say are missing, less those the request says are gone on purpose."""
    index = index or run.index
    assert index is not None
    found = missing_definitions(run.request.text, run.failing, index)
    return [(file, name) for file, name in found if name not in run.request.gone]


def _signature(location: Location) -> str:
    symbol: Symbol | None = location.symbol
    if symbol is None:
        return f"{location.file} (the whole file)"
    doc = f" - {symbol.doc}" if symbol.doc else ""
    return f"{symbol.file}: {symbol.signature}{doc}"


def _in_file_order(symbols: Sequence[Symbol]) -> list[Symbol]:
    return sorted(symbols, key=lambda symbol: (symbol.file, symbol.start))


def _untouched(symbol: Symbol, patched: SymbolIndex, index: SymbolIndex) -> bool:
    """Whether ``symbol`` (found in ``patched``) reads as it did in ``index``."""
    before = [s for s in index.named(symbol.qualname) if s.file == symbol.file]
    return bool(before) and index.source(before[0]) == patched.source(symbol)


def _remapped(locations: Sequence[Location], index: SymbolIndex) -> list[Location]:
    """``locations`` in a changed ``index``: each definition found again by its name (its lines may have moved)."""
    moved: list[Location] = []
    for location in locations:
        symbol = location.symbol
        again = [s for s in index.named(symbol.qualname) if s.file == location.file] if symbol is not None else []
        moved.append(Location(location.file, again[0] if again else None, location.score, location.reasons))
    return moved


def _gain(run: RepairRun, attempt: Attempt) -> str:
    """What ``attempt`` does for the failing tests, in words (``1 of 2 failing tests pass``)."""
    assert run.before is not None
    parts = [f"{attempt.fixed} of {len(run.before.failed)} failing tests pass"] if attempt.fixed else []
    if attempt.further:
        some = "test gets" if attempt.further == 1 else "tests get"
        parts.append(f"{attempt.further} failing {some} further than before")
    return " and ".join(parts) or "no failing test passes"


def _still_failing(run: RepairRun) -> str:
    lines = [f"- {failure.test}: {failure.message.splitlines()[0] if failure.message else 'failed'}"
             for failure in run.failing[:3]]  # fmt: skip
    return as_data("\n".join(lines))


def _first_failures(report: TestReport) -> str:
    if not report.failures:
        return ""
    first = report.failures[0]
    return f"; {first.test}: {first.message.splitlines()[0][:120] if first.message else 'failed'}"


def _failure_text(report: TestReport | None) -> str:
    if report is None:
        return ""
    if report.failures:
        return "\n".join(
            f"{f.test}: {f.message.splitlines()[0][:200] if f.message else 'failed'}" for f in report.failures[:3]
        )
    return report.output[-800:]
