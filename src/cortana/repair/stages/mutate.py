"""The small changes a round tries without a model (``mutants.py``): made on the most suspect lines, each judged by
the failing tests, within a share of the budget. A round tries them once a fix: before any sample where a line
spectrum ranks them, else after the first sample."""

from __future__ import annotations

from cortana.repair.coders import patched, rewritable
from cortana.repair.deps import RepairDeps
from cortana.repair.mutants import BUDGET_SHARE, ranked_mutants, worth_mutating
from cortana.repair.run import Attempt, RepairRun, Stage
from cortana.repair.stages.judge import merged_with_others, try_patch
from cortana.repair.stages.localize import missing

__all__ = ["mutate"]


async def mutate(run: RepairRun, deps: RepairDeps) -> Attempt | None:
    """The small changes (``mutants.py``), each judged by the failing tests, strings a failing assertion asks for
    first, then the most suspect lines of every function the failing tests ran (with a line spectrum; else the
    top locations' functions): a test run each, no model call, for at most ``BUDGET_SHARE`` of the budget
    (twice that with a spectrum, whose ranking makes them worth more). Not when the code lacks a definition the
    tests need, nor when no failing test says the code ran and got something wrong (``worth_mutating``: a stub,
    a flag argparse does not know yet); a mutant that fixes some tests is a partial fix like a sample's, and is
    made together with earlier attempts. The first that passes, or None."""
    assert run.index is not None
    settings = deps.settings
    if not settings.mutants or not run.failing:
        return None
    if missing(run) or not worth_mutating(run.failing):
        return None
    shown = [loc.symbol for loc in run.locations[: settings.per_location] if rewritable(loc.symbol)]
    symbols = [symbol for symbol in shown if symbol is not None]
    spectrum = run.current if run.current is not None and run.current.lines else None
    made = ranked_mutants(run.index, spectrum, symbols, run.failing)[: settings.mutants]
    if not made:
        return None
    lines = list(dict.fromkeys(f"{mutant.block.file}:{mutant.line}" for mutant in made))
    named = ", ".join(lines[:4]) + (f" and {len(lines) - 4} more lines" if len(lines) > 4 else "")
    deps.say(run, Stage.SAMPLE, f"round {run.round}: {len(made)} small changes, most suspect first "
             f"({named}), no model")  # fmt: skip
    share = BUDGET_SHARE * (2 if spectrum is not None else 1)
    until = run.seconds + share * settings.budget_seconds
    for mutant in made:
        if run.out_of_time or run.seconds > until:
            break
        run.originals.setdefault(mutant.block.file, run.index.texts[mutant.block.file])
        patch = patched([mutant.block], None, run.originals)
        if patch is None:
            continue
        kept = await try_patch(run, deps, patch, f"a small change: {mutant.what}")
        if kept is not None:
            return kept
        attempt = run.attempts[patch.key()]
        if attempt.partial and attempt.fixed:  # one token that only moves a failure is merged with nothing
            for merged in await merged_with_others(run, deps, attempt):
                if merged is not None:
                    return merged
    return None
