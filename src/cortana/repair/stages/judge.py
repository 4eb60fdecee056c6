"""Judging patches: each new patch applied in the scratch copy and tested (the failing tests first, then all), made
together with earlier attempts, kept or set aside against the request's words, held when it only fits the failing
assertion, and trimmed to the edits the tests need. No model call here: a test run each."""

from __future__ import annotations

from cortana.repair.coders import combined, parses
from cortana.repair.deps import RepairDeps
from cortana.repair.fitting import adds_gap, without_gap
from cortana.repair.intent import objection
from cortana.repair.patches import Patch, apply_patch, changed_lines
from cortana.repair.run import Attempt, RepairResult, RepairRun, Stage, collected, got_further, now_passing
from cortana.repair.stages.report import fixed_result
from cortana.repair.testrun import TestReport

__all__ = [
    "broke",
    "candidates",
    "hold",
    "keep",
    "merged_with_others",
    "merges",
    "settle",
    "trim",
    "try_patch",
    "validate",
]


def candidates(run: RepairRun, sampled: Patch, origin: str, found: set[str]) -> list[tuple[Patch, str]]:
    """What a sample is tried as: first without the gap it adds at the end of a line (when something else is
    left), then as written."""
    less = without_gap(sampled, run.originals, found)
    first = [(less, f"{origin}, less the test's difference")] if less is not None and less.files else []
    return [*first, (sampled, origin)]


async def try_patch(run: RepairRun, deps: RepairDeps, patch: Patch, origin: str, *, merges: int = 0) -> Attempt | None:
    """Count ``patch`` as a sample (validated at once when new; ``merges``: made of attempts, no sample);
    the attempt when the tests accept it (with nothing failing before, two samples must agree)."""
    attempt = run.attempts.get(patch.key())
    if attempt is not None:
        attempt.votes += 1
    else:
        attempt = run.attempts[patch.key()] = Attempt(patch, 1, changed_lines(run.originals, patch), merges=merges)
        attempt.origin = f"round {run.round}, {origin}"
        await validate(run, deps, attempt, len(run.attempts))
    assert run.before is not None
    if not attempt.passed or not (run.before.failed or attempt.votes >= 2):
        return None
    why = objection(run.request, attempt.patch, run.originals)
    if why is not None:
        if patch.key() not in run.set_aside:
            run.set_aside[patch.key()] = (attempt, why)
            deps.say(run, Stage.VALIDATE, f"the tests accept it, but {why}: set aside")
        return None
    return attempt


async def validate(run: RepairRun, deps: RepairDeps, attempt: Attempt, number: int | str) -> None:
    """Run the tests on ``attempt`` in the copy: the failing ones first, then all."""
    assert run.scratch is not None and run.before is not None
    before = run.before
    run.scratch.write(attempt.patch.files)
    try:
        failing = sorted(before.failed) if before.detailed else []
        if failing and run.command.kind == "pytest":
            first = await deps.tests(run, tests=failing)
            attempt.fixed = len(now_passing(before, first))
            if not first.ok:
                attempt.report = first
                attempt.further = len(got_further(before, first))
                attempt.collected = bool(collected(before, first))
                further = f", {attempt.further} get further" if attempt.further else ""
                shown = f"patch {number}: {attempt.fixed} of {len(failing)} failing tests pass{further}"
                deps.say(run, Stage.VALIDATE, shown)
                if attempt.fixed or attempt.further:  # a partial fix must break nothing to be climbed from
                    whole = await deps.tests(run, warm=True)
                    attempt.broke = broke(before, whole)
                return
        after = await deps.tests(run)
        attempt.report = after
        if after.detailed and before.detailed:
            attempt.fixed = len(now_passing(before, after))
            attempt.broke = broke(before, after)
            attempt.passed = after.ok and attempt.broke == 0
        else:
            attempt.passed = after.ok
        verdict = "the tests pass" if attempt.passed else f"the tests fail ({after.summary()})"
        deps.say(run, Stage.VALIDATE, f"patch {number}: {verdict}")
    finally:
        run.scratch.restore()


def broke(before: TestReport, after: TestReport) -> int:
    """How many tests that passed before do not pass after, by count as well as by id: the tests failing now that
    did not fail before, or the fewer passing tests, whichever is more (a test whose id the project makes anew in
    each run, from a set's order or an object's address, is not counted as broken for its new name; nor a test of a
    file that could not be loaded before)."""
    fewer = len(before.passed) - (len(after.passed) - len(now_passing(before, after)))
    uncollected = tuple(f"{failed}::" for failed in before.failed if "::" not in failed)  # a file that did not load
    failing = [test for test in after.failed - before.failed if not test.startswith(uncollected)]
    return max(len(failing), fewer, 0)


async def merges(run: RepairRun, deps: RepairDeps, patch: Patch) -> list[Attempt | None]:
    """``patch`` made together with each of the earlier attempts that change other lines, most promising first
    (at most ``merge_partners``): a fix needed in two functions is often drawn one function per sample, each
    sample failing alone (``daily_report`` passing the currency that ``format_price`` does not take yet). A
    merge that moves the failing tests is merged once more (a change in three places). No model call: a test
    run each. The merges that pass (an empty list: none)."""
    attempt = run.attempts.get(patch.key())
    if attempt is None or attempt.votes > 1:
        return []
    return await merged_with_others(run, deps, attempt)


async def merged_with_others(run: RepairRun, deps: RepairDeps, attempt: Attempt) -> list[Attempt | None]:
    """``attempt`` made together with each promising earlier attempt in turn (:func:`merges`); the first that
    passes, in a list."""
    if attempt.passed or attempt.broke or attempt.merges > 1 or (attempt.merges and not attempt.partial):
        return []
    partners = [other for other in run.attempts.values() if other is not attempt and other.report is not None
                and not other.passed and not other.broke]  # fmt: skip
    partners.sort(key=lambda other: (other.gain, other.votes, -other.size), reverse=True)
    tried = 0
    for other in partners:
        if tried >= deps.settings.merge_partners or run.out_of_time:
            break
        together = combined(attempt.patch, other.patch, run.originals)
        if together is None or together.key() in run.attempts:
            continue
        tried += 1
        numbers = list(run.attempts)
        one, two = numbers.index(attempt.patch.key()) + 1, numbers.index(other.patch.key()) + 1
        deps.say(run, Stage.VALIDATE, f"patches {one} and {two} together")
        depth = max(attempt.merges, other.merges) + 1
        kept = await try_patch(run, deps, together, f"patches {one} and {two} together", merges=depth)
        if kept is not None:
            return [kept]
        made = run.attempts[together.key()]
        more = await merged_with_others(run, deps, made)
        if more:
            return more
    return []


async def settle(run: RepairRun, deps: RepairDeps, kept: Attempt | None, found: set[str]) -> RepairResult | None:
    """What a patch the tests accept does to the search: the result (:func:`keep`) when it is a fix; None when
    there is no such patch, or when it only adds the failing assertion's difference (one of ``found``): then it is
    held to the end of the round (:func:`hold`)."""
    if kept is None:
        return None
    if not adds_gap(kept.patch, run.originals, found):
        return await keep(run, deps, kept)
    hold(run, deps, kept, found)
    return None


def hold(run: RepairRun, deps: RepairDeps, passing: Attempt, found: set[str]) -> None:
    """Keep the first pass that only adds the test's difference aside to the end of the round."""
    if run.held is None:
        run.held = passing
        gap = " or ".join(sorted(found))
        deps.say(
            run, Stage.VALIDATE,
            f"it passes by adding {gap}, the difference the test asked for: kept aside while the round looks "
            "for a fix of the cause",
        )  # fmt: skip


async def keep(run: RepairRun, deps: RepairDeps, attempt: Attempt, *, fitted: set[str] | None = None) -> RepairResult:
    """The result for a passing ``attempt``, trimmed to the edits the tests need unless more was asked."""
    assert run.before is not None
    kept = attempt
    if run.before.failed and not run.request.wants_more:
        kept = await trim(run, deps, attempt)
        if objection(run.request, kept.patch, run.originals) is not None:
            kept = attempt  # the edits the tests do not need are the ones the request asked for
    result = fixed_result(run, kept)
    if fitted:
        gap = " or ".join(sorted(fitted))
        result.message += (
            f" Check it: it adds {gap} at the end of a line, the difference the failing test asked for, and no "
            "fix of the cause passed; it may only fit this test."
        )
    return result


async def trim(run: RepairRun, deps: RepairDeps, kept: Attempt) -> Attempt:
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
        patch = Patch(applied.blocks, {path: text for path, text in applied.files.items() if text != originals[path]})
        if patch.key() == kept.patch.key():  # the edit changed nothing the others did not
            blocks = rest
            continue
        if not patch.files or not parses(patch):
            index += 1
            continue
        trial = Attempt(patch, kept.votes, changed_lines(originals, patch), origin=kept.origin)
        await validate(run, deps, trial, f"without edit {index + 1}")
        if trial.passed and trial.fixed >= kept.fixed:
            blocks, kept = rest, trial
        else:
            index += 1
    return kept
