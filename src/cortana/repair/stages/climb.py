"""Between rounds: the climb to the best partial fix (its tests run traced, what still fails localized again), the
last round handed to a larger model, and the checks that end a round early for either, or end the fix when no
round would fit in what is left of the budget."""

from __future__ import annotations

from cortana.repair.deps import RepairDeps
from cortana.repair.run import RepairRun, Stage
from cortana.repair.stages.localize import locate, remapped
from cortana.repair.stages.report import gain

__all__ = ["another_round_fits", "climb", "escalate", "hand_over_now", "stale"]


async def climb(run: RepairRun, deps: RepairDeps) -> None:
    """Make the best partial fix the starting point: its tests run traced, what still fails localized again."""
    partial = run.best_partial()
    if partial is None or run.index is None or run.scratch is None:
        return
    run.base = partial
    assert run.before is not None
    deps.say(run, Stage.CLIMB, f"building on a patch with which {gain(run, partial)}")
    run.scratch.write(partial.patch.files)
    try:
        run.current = await deps.tests(run, trace=True)
    finally:
        run.scratch.restore()
    run.failing = list(run.current.failures if run.current.detailed else [])
    patched = run.index.with_files(partial.patch.files)
    located = await locate(run, deps, patched, run.current)
    run.locations = [loc for loc in located if loc.file in run.originals] or remapped(run.locations, patched)


async def escalate(run: RepairRun, deps: RepairDeps) -> None:
    """Give the last round to the larger model: the last by count, or any once half the budget is spent."""
    stronger = deps.stronger
    last = run.round >= deps.settings.rounds or run.seconds >= deps.settings.budget_seconds / 2
    if stronger is None or run.escalated or not last:
        return
    run.escalated = True
    run.stronger_name = stronger.name
    deps.say(run, Stage.ESCALATE, f"round {run.round}: handing the last round to {stronger.name}")
    if run.sampler is not None:  # its memory is the larger model's now; the samples go with the round
        await run.sampler.aclose()
        run.sampler = None
    try:
        run.stronger = await stronger.start()
        run.stronger_from = run.round
    except Exception as error:  # any failure to start: the round goes on with the model in use
        run.stronger_name = ""
        deps.say(run, Stage.ESCALATE, f"{stronger.name} did not start ({error}); going on with the model in use")


def hand_over_now(run: RepairRun, deps: RepairDeps) -> bool:
    """Half the budget is spent with rounds to come and a larger model waiting: the round in progress stops
    here, so that the larger model's round has the time it needs."""
    return (
        deps.stronger is not None
        and not run.escalated
        and run.round < deps.settings.rounds
        and run.seconds >= deps.settings.budget_seconds / 2
    )


def stale(run: RepairRun, deps: RepairDeps) -> bool:
    """Whether the round's other prompts show evidence that no longer holds: a partial fix made a test file run
    that could not be collected (a missing definition, now written). They were made from its one import error;
    the climb shows the function and what its tests computed with it, so it comes next. Asked once the prompt
    that wrote it has had its hot batch too (:class:`~cortana.repair.stages.graph.Asking`): more answers to that
    prompt may write it whole."""
    if run.held is not None or (run.base is not None and run.base.collected):
        return False  # a pass is held to the end of the round; a climb from such a fix already shows them
    partial = run.best_partial()
    if partial is None or not partial.collected:
        return False
    deps.say(run, Stage.CLIMB, "the tests that could not run now run: the round ends here, to build on that")
    return True


def another_round_fits(run: RepairRun, deps: RepairDeps) -> bool:
    """After a round that left an ask out for time: whether one answer could still be written within the
    budget. If not, the fix ends here rather than climb and localize for a round with no time to sample."""
    return run.cut_short != run.round or run.fits(deps.writer(run).model, 1)
