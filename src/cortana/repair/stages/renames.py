"""Renames, made without a model (``rename.py``) right after the tests ran: a rename the request asks for, and the
uses left behind by one the user made on purpose; the tests judge each."""

from __future__ import annotations

from cortana.repair.deps import RepairDeps
from cortana.repair.patches import changed_lines
from cortana.repair.rename import rename_patch
from cortana.repair.run import Attempt, FixStatus, RepairResult, RepairRun, Stage
from cortana.repair.stages.judge import try_patch, validate
from cortana.repair.stages.report import failure_text, fixed_result, make_result
from cortana.repair.testrun import is_test_file

__all__ = ["follow_rename", "rename"]


async def rename(run: RepairRun, deps: RepairDeps, old: str, new: str) -> RepairResult:
    """A rename is made without a model (``rename.py``); the tests judge it."""
    assert run.index is not None
    patch = rename_patch(run.index.texts, old, new)
    if patch is None:
        message = f"No Python file here uses the name {old}."
        return make_result(run, FixStatus.NOT_FOUND, message, before=run.before)
    run.originals = {path: run.index.texts[path] for path in patch.files}
    deps.say(run, Stage.RENAME, f"{old} -> {new} in {len(patch.files)} files")
    attempt = Attempt(patch, 1, changed_lines(run.originals, patch), origin="a rename")
    run.attempts[patch.key()] = attempt
    await validate(run, deps, attempt, 1)
    if attempt.passed:
        return fixed_result(run, attempt, what=f"Renamed {old} to {new}", where=[f"every use of {old}"])
    failure = failure_text(attempt.report)[:300]
    message = f"Renaming {old} to {new} in {', '.join(sorted(patch.files))} broke the tests: {failure}"
    return make_result(run, FixStatus.FAILED, message, before=run.before, after=attempt.report)


async def follow_rename(run: RepairRun, deps: RepairDeps, old: str, new: str) -> RepairResult | None:
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
    deps.say(run, Stage.RENAME, f"{old} was renamed to {new}: its uses in {len(patch.files)} files follow")
    kept = await try_patch(run, deps, patch, f"the uses of {old} follow its rename")
    if kept is None:
        return None
    return fixed_result(run, kept, what=f"Updated the uses of {old} to {new}", where=sorted(patch.files))
