"""Self-check of the learning benchmark: no model, only the fixture, the tasks' checks and their references.

    python bench/learning_tasks/selfcheck.py

First the untouched fixture's own suite must pass. Then, for each task, on a fresh copy of the fixture after the
task's setup:

- an empty answer fails the check;
- every decoy (a plausible wrong answer) fails the check;
- for a change task, the check fails before the fix, and passes once the reference fix is applied, but not
  when, on top of the fix, the task's test file is deleted or a ``conftest.py`` that skips every test is added;
- for an answer task, the reference answer passes the check;
- the two prompts differ in more than punctuation and case.

Prints one line per task and exits with status 1 if anything is not as expected.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # keep bench/learning_tasks free of __pycache__
sys.path.insert(0, str(Path(__file__).parent))

from tasks import REPO, TASKS, LearningTask, copy_repo, run_pytest  # noqa: E402


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _fresh_copy(task: LearningTask, workspace: Path, label: str) -> Path:
    """A fresh copy of the fixture under ``workspace``, prepared by the task's setup."""
    repo = copy_repo(workspace / f"{task.name}-{label}")
    if task.setup is not None:
        task.setup(repo)
    return repo


def _delete_new_tests(repo: Path) -> None:
    """Delete the test files that the task's setup added to the copy."""
    for path in (repo / "tests").glob("test_*.py"):
        if not (REPO / "tests" / path.name).exists():
            path.unlink()


def _skip_everything(repo: Path) -> None:
    """Add a conftest.py that marks every test as skipped."""
    (repo / "conftest.py").write_text(
        "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        item.add_marker(pytest.mark.skip)\n",
        encoding="utf-8",
    )


def check_task(task: LearningTask, workspace: Path) -> list[str]:
    """What is wrong with ``task`` (nothing: an empty list)."""
    problems: list[str] = []
    if task.kind not in ("answer", "change"):
        problems.append(f"unknown kind {task.kind!r}")
    if _words(task.prompts[0]) == _words(task.prompts[1]):
        problems.append("the two prompts are the same wording")

    repo = _fresh_copy(task, workspace, "before")
    if task.check("", repo):
        problems.append("an empty answer passes")
    for decoy in task.decoys:
        if task.check(decoy, repo):
            problems.append(f"the decoy {decoy!r} passes")

    if task.kind == "answer":
        if not isinstance(task.reference, str) or not task.reference:
            problems.append("no reference answer")
        elif not task.check(task.reference, repo):
            problems.append("the reference answer fails")
        if len(task.decoys) < 2:
            problems.append("fewer than two decoys")
    elif callable(task.reference):
        # The empty-answer check above was also the check before the fix; a change task ignores the answer.
        fixed = _fresh_copy(task, workspace, "fixed")
        task.reference(fixed)
        if not task.check("", fixed):
            problems.append("the check fails after the reference fix")
        for tamper, label in ((_delete_new_tests, "the test file deleted"), (_skip_everything, "a skipping conftest")):
            tampered = _fresh_copy(task, workspace, label.replace(" ", "-"))
            task.reference(tampered)
            tamper(tampered)
            if task.check("", tampered):
                problems.append(f"the check passes with {label}")
    else:
        problems.append("no reference fix")
    return problems


def main() -> int:
    """Run every check; 0 when all is as expected."""
    failures = 0
    with tempfile.TemporaryDirectory(prefix="learning-selfcheck-") as tmp:
        workspace = Path(tmp)
        suite_ok = run_pytest(copy_repo(workspace / "untouched"))
        print(f"{'ok' if suite_ok else 'FAIL':4}  fixture suite passes on an untouched copy")
        failures += not suite_ok
        for task in TASKS:
            problems = check_task(task, workspace)
            failures += bool(problems)
            status = "FAIL" if problems else "ok"
            if problems:
                detail = "; ".join(problems)
            elif task.kind == "answer":
                detail = f"empty answer and {len(task.decoys)} decoys rejected, reference answer accepted"
            else:
                detail = "fails before the fix, passes after the reference fix, tampering rejected"
            print(f"{status:4}  {task.kind:6}  {task.name:28}  {detail}")
    answers = sum(task.kind == "answer" for task in TASKS)
    print(f"{len(TASKS)} tasks ({answers} answer, {len(TASKS) - answers} change), {failures} with problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
