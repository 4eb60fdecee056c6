"""The stages of a fix, each a class whose ``run`` does one part of it and returns the stage that comes next, or the
:class:`~cortana.repair.run.RepairResult` that ends the fix (as pydantic-ai's agent graph does with its nodes).

In the order they run::

    Tests -> Localize -> Round -> Asking (one per ask) -> EndRound -> Climb -> Round -> ...

What the fix has found so far is the :class:`~cortana.repair.run.RepairRun` each stage is given; what it runs with,
the frozen :class:`~cortana.repair.deps.RepairDeps`; a stage holds only what one stage hands the next (a round's
asks). The stages are together here so that what follows what reads in one place: the modules that do the work
(``localize.py``, ``sample.py``, ``judge.py``, ``mutate.py``, ``climb.py``, ``renames.py``, ``report.py``) import no
stage, and the loop from a round to the climb and back is no loop of imports.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

from cortana.repair.deps import RepairDeps
from cortana.repair.fitting import gaps
from cortana.repair.run import Ask, FixStatus, RepairResult, RepairRun, Stage
from cortana.repair.stages.climb import another_round_fits, climb, escalate, hand_over_now, stale
from cortana.repair.stages.judge import candidates, keep, merges, settle, try_patch
from cortana.repair.stages.localize import locate, missing
from cortana.repair.stages.mutate import mutate
from cortana.repair.stages.renames import follow_rename, rename
from cortana.repair.stages.report import failed_result, first_failures, make_result, plan_text
from cortana.repair.stages.sample import asked, round_asks, sample, start_sampler
from cortana.repair.symbols import SymbolIndex

__all__ = ["Asking", "Climb", "EndRound", "Localize", "Round", "Step", "Tests"]


class Step(ABC):
    """One stage of a fix (progress names it by a :class:`~cortana.repair.run.Stage`)."""

    @abstractmethod
    async def run(self, run: RepairRun, deps: RepairDeps) -> Step | RepairResult:
        """Do this stage's part of ``run``: the stage that comes next, or the result that ends the fix."""


@dataclass(frozen=True)
class Tests(Step):
    """The tests before any change, traced, in the scratch copy; then a rename the request asks for, or the uses
    left by one the user made (``renames.py``)."""

    async def run(self, run: RepairRun, deps: RepairDeps) -> Step | RepairResult:
        fix = run.request
        before = run.before = run.current = await deps.tests(run, trace=True)
        deps.say(run, Stage.TESTS, f"before any change: {before.summary()}{first_failures(before)}")
        if before.ok and not fix.wants_change:
            message = f"The tests pass ({before.summary()}): nothing fails, so there is nothing to fix."
            return make_result(run, FixStatus.PASSING, message, before=before)
        run.failing = list(before.failures if before.detailed else [])
        run.index = await asyncio.to_thread(SymbolIndex.build, deps.workspace)
        if fix.rename is not None:
            return await rename(run, deps, *fix.rename)
        for old, new in fix.renamed:
            followed = await follow_rename(run, deps, old, new)
            if followed is not None:
                return followed
        return Localize()


@dataclass(frozen=True)
class Localize(Step):
    """Where the change goes (``localize.py``), and the files it may change; in plan mode, the plan ends the fix."""

    async def run(self, run: RepairRun, deps: RepairDeps) -> Step | RepairResult:
        assert run.before is not None and run.index is not None
        before, fix = run.before, run.request
        deps.say(run, Stage.LOCALIZE, "looking for where the change goes")
        run.locations = await locate(run, deps, run.index, before)
        if not run.locations:
            message = "Cortana could not tell where in the code this goes."
            return make_result(run, FixStatus.NOT_FOUND, message, before=before)
        deps.say(run, Stage.LOCALIZE, "candidates: " + ", ".join(run.labels()))
        if run.plan_only:
            return make_result(run, FixStatus.PLANNED, plan_text(run, before), before=before)
        files = [location.file for location in run.locations]
        files += [file for file, _ in missing(run)]
        files += [path for path in fix.places if path in run.index.texts]
        run.originals |= {file: run.index.texts[file] for file in dict.fromkeys(files)}
        return Round()


@dataclass(frozen=True)
class Round(Step):
    """The start of a round. Rounds of samples go on until a patch passes, the rounds run out or the budget is
    spent; between rounds, the climb to a partial fix (one that fixes some failing tests, or gets them further,
    breaking none). A pass that only adds the failing assertion's gap (``+ 1``) is held to the end of its round, in
    case a real fix comes (``fitting.py``)."""

    async def run(self, run: RepairRun, deps: RepairDeps) -> Step | RepairResult:
        found = gaps(run.failing)
        await start_sampler(run, deps)
        asks = round_asks(run, deps)
        if not run.mutated and run.current is not None and run.current.lines:
            run.mutated = True  # a line spectrum ranks the small changes: they come before any sample
            done = await settle(run, deps, await mutate(run, deps), found)
            if done is not None:
                return done
        return Asking(asks, found)


@dataclass(frozen=True)
class Asking(Step):
    """One ask of the round (``asks[position]``): sampled, each patch judged and made together with earlier
    attempts, then the next ask; the round ends early when the budget is spent, a larger model is to take over, or
    the asks left are stale.

    Attributes:
        asks: the round's prompts (``sample.py``).
        found: the differences the failing assertions ask for (``fitting.py``).
        position: the ask under way.
    """

    asks: list[Ask]
    found: set[str]
    position: int = 0

    async def run(self, run: RepairRun, deps: RepairDeps) -> Step | RepairResult:
        if self.position >= len(self.asks) or run.out_of_time or hand_over_now(run, deps):
            return EndRound(self.found)
        ask = self.asks[self.position]
        model = deps.writer(run).model
        if not run.fits(model, ask.count):
            if run.cut_short != run.round:  # said once a round: the asks after it are left out alike
                deps.say(run, Stage.SAMPLE, f"round {run.round}: {asked(ask)} left out: the last like it "
                         f"took {run.expected(model, ask.count):.0f} s, past the budget")  # fmt: skip
            run.cut_short = run.round
            return replace(self, position=self.position + 1)
        began, drawn = run.seconds, run.samples
        for sampled in await sample(run, deps, ask):
            for patch, origin in candidates(run, sampled, ask.origin, self.found):
                for kept in [await try_patch(run, deps, patch, origin), *await merges(run, deps, patch)]:
                    done = await settle(run, deps, kept, self.found)
                    if done is not None:
                        return done
        if run.samples > drawn:  # a request was made and answered (a greedy prompt asked before makes none)
            run.took.setdefault((model, ask.count), []).append(run.seconds - began)
        if not run.mutated:  # after the first sample: what needs no model
            run.mutated = True
            done = await settle(run, deps, await mutate(run, deps), self.found)
            if done is not None:
                return done
        following = self.asks[self.position + 1] if self.position + 1 < len(self.asks) else None
        if (following is None or following.coder != ask.coder) and stale(run, deps):
            return EndRound(self.found)
        return replace(self, position=self.position + 1)


@dataclass(frozen=True)
class EndRound(Step):
    """The end of a round: the pass held aside is kept; else the fix fails when the rounds or the budget are spent,
    or when no answer would fit in what is left; else the next round, after the climb."""

    found: set[str]

    async def run(self, run: RepairRun, deps: RepairDeps) -> Step | RepairResult:
        if run.held is not None:
            return await keep(run, deps, run.held, fitted=self.found)
        if run.out_of_time or run.round >= deps.settings.rounds or not another_round_fits(run, deps):
            return failed_result(run)
        run.round += 1
        return Climb()


@dataclass(frozen=True)
class Climb(Step):
    """Between rounds (``climb.py``): build on the best partial fix, and hand the last round to a larger model."""

    async def run(self, run: RepairRun, deps: RepairDeps) -> Step | RepairResult:
        await climb(run, deps)
        await escalate(run, deps)
        return Round()
