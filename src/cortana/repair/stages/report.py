"""How a fix ends, in words: the result with the run's counts, the message for a fix found or for none, the plan
(plan mode), and the short texts of failures and progress that the other stages show the model and the user."""

from __future__ import annotations

from cortana.prompts import as_data
from cortana.repair.patches import unified_diff
from cortana.repair.run import Attempt, FixStatus, RepairResult, RepairRun, now_passing
from cortana.repair.testrun import TestReport

__all__ = [
    "failed_result",
    "failure_text",
    "first_failures",
    "fixed_result",
    "gain",
    "make_result",
    "next_steps",
    "plan_text",
    "still_failing",
]


def make_result(run: RepairRun, status: FixStatus, message: str, **fields: object) -> RepairResult:
    """A result with the run's counts."""
    result = RepairResult(status, message, **fields)  # type: ignore[arg-type]
    result.model_calls = run.model_calls
    result.samples = run.samples
    result.candidates = len(run.attempts)
    result.seconds = run.seconds
    result.prompt_tokens, result.cached_tokens = run.usage.prompt, run.usage.cached
    result.completion_tokens = run.usage.completion
    result.stronger = run.stronger_name if run.stronger is not None else ""
    result.sampler = run.sampler_name
    if not result.locations:
        result.locations = run.labels()
    return result


def fixed_result(
    run: RepairRun, winner: Attempt, *, what: str = "Fixed", where: list[str] | None = None
) -> RepairResult:
    """The result for ``winner``, a patch the tests accept: what it changed, and what its tests say now."""
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
    return make_result(
        run, FixStatus.FIXED, message, diff=unified_diff(run.originals, winner.patch), patch=winner.patch,
        originals=changed, origin=winner.origin, before=before, after=after,
        locations=where if where is not None else run.labels(),
    )  # fmt: skip


def failed_result(run: RepairRun) -> RepairResult:
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
            f"{failure_text(closest.report)[:300]}"
        )
    aside, why = next(iter(run.set_aside.values()), (None, ""))
    if aside is not None:
        message += f" One patch the tests accept was set aside: {why}."
    message += f" {next_steps(run)}"
    return make_result(
        run, FixStatus.FAILED, message, before=run.before, after=closest.report if closest else None,
        closest=diff, diff=diff, set_aside=unified_diff(run.originals, aside.patch) if aside else "",
        set_aside_why=why,
    )  # fmt: skip


def plan_text(run: RepairRun, before: TestReport) -> str:
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


def next_steps(run: RepairRun) -> str:
    """What to try when nothing passed: more time, a hint, a larger model."""
    steps = []
    if run.out_of_time or run.cut_short:  # spent, or what was left would not do for one more request
        steps.append(f"give it more time (fix.budget_seconds: {run.settings.budget_seconds:g})")
    steps.append("say where the change goes or what it should do (a function's name, the expected value)")
    steps.append("or run it on a larger model (`cortana models`)")
    return "Next: " + ", ".join(steps) + "."


def gain(run: RepairRun, attempt: Attempt) -> str:
    """What ``attempt`` does for the failing tests, in words (``1 of 2 failing tests pass``)."""
    assert run.before is not None
    parts = [f"{attempt.fixed} of {len(run.before.failed)} failing tests pass"] if attempt.fixed else []
    if attempt.further:
        some = "test gets" if attempt.further == 1 else "tests get"
        parts.append(f"{attempt.further} failing {some} further than before")
    return " and ".join(parts) or "no failing test passes"


def still_failing(run: RepairRun) -> str:
    """The first failures of the starting point, one line each, as data for a prompt."""
    lines = [f"- {failure.test}: {failure.message.splitlines()[0] if failure.message else 'failed'}"
             for failure in run.failing[:3]]  # fmt: skip
    return as_data("\n".join(lines))


def first_failures(report: TestReport) -> str:
    """The first failure of ``report``, as the progress line after the tests shows it ("" when none failed)."""
    if not report.failures:
        return ""
    first = report.failures[0]
    return f"; {first.test}: {first.message.splitlines()[0][:120] if first.message else 'failed'}"


def failure_text(report: TestReport | None) -> str:
    """The first failures of ``report``, one line each (the end of its output when it has none)."""
    if report is None:
        return ""
    if report.failures:
        return "\n".join(
            f"{f.test}: {f.message.splitlines()[0][:200] if f.message else 'failed'}" for f in report.failures[:3]
        )
    return report.output[-800:]
