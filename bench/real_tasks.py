"""Single-token bugs in real open-source Python libraries: load the tasks, build a bugged copy, decide success.

The set (``bench/real_projects/``, see its README) is small pure-Python
libraries vendored from their PyPI sdists (``projects/<name>/``, their own
test suites and pytest settings kept as shipped) and sixteen tasks
(``tasks/<id>.json``), each one token of library code changed the way people
get it wrong: an off-by-one, a wrong operator, default or constant, swapped
arguments, a missing case. A task names the line (``bug.file``,
``bug.line``, the original ``bug.old`` and the bugged ``bug.new``), the tests
the bug makes fail (``failing``, pytest node ids) and the prompt a user would
type. Each task's ``split`` is ``dev`` (tune on these) or ``held-out``
(report on these), eight each.

``materialize(task, destination)`` copies the project and applies the bug;
``check(task, workspace)`` decides success: every test file and pytest
setting is byte-equal to the project's (no conftest.py or pytest
configuration added), and the project's whole suite passes, run as::

    python -m pytest -p no:cacheprovider -q

in the workspace, with ``PYTHONPATH`` the workspace and its ``src/`` folder
(the projects are not installed), ``PYTHONDONTWRITEBYTECODE=1``,
``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` (no plugin of this environment runs) and
a time limit. A fix is judged by the suite, never compared with ``bug.old``.

``--check-set`` runs no model: for every task, the clean project passes its
suite, and the bugged copy fails exactly the tests in ``failing`` (read from
a JUnit XML report), within the time limit; it prints each task's count and
the bugged suite's seconds. ``failing`` is what fails in this repository's
environment; a listed test that an environment skips (tabulate's wide-character
tests without ``wcwidth``) is reported as skipped there, not as broken.

    python bench/real_tasks.py                      # the tasks, one row each
    python bench/real_tasks.py --check-set          # the set is well formed
    python bench/real_tasks.py --check-set --split dev --tasks toolz-update-in
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_tasks import SKIPPED, SPLITS, Verdict
from report import table

ROOT = Path(__file__).resolve().parent / "real_projects"
PROJECTS = ROOT / "projects"
TASKS = ROOT / "tasks"
KINDS = ("off_by_one", "operator", "default", "swapped_arguments", "missing_case", "constant")
FIELDS = frozenset({"id", "project", "split", "kind", "prompt", "bug", "failing", "where"})
BUG_FIELDS = frozenset({"file", "line", "old", "new"})
TEST_FOLDERS = frozenset({"tests", "testing", "test"})
"""Folders, at any depth, whose files are the project's tests (``toolz/tests/``, ``tabulate``'s ``test/``)."""
STEERING = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
"""Files that change what a test run does wherever they are added."""
PYTEST_CONFIGS = frozenset({"pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
"""Files at a project's top that hold its pytest settings."""
SUITE_TIMEOUT = 120.0


@dataclass(frozen=True)
class Bug:
    file: str
    line: int
    old: str
    new: str


@dataclass(frozen=True)
class RealTask:
    id: str
    project: str
    split: str
    kind: str
    prompt: str
    bug: Bug
    failing: tuple[str, ...]
    where: str

    @property
    def root(self) -> Path:
        """The clean project this task's bug goes into."""
        return PROJECTS / self.project


@dataclass(frozen=True)
class SuiteRun:
    returncode: int | None
    """pytest's exit status; ``None`` when it ran past its time limit."""
    seconds: float
    output: str


def load_real_tasks(ids: list[str] | None = None, split: str | None = None) -> list[RealTask]:
    """The tasks in ``tasks/`` (or only ``ids``, in that order; or only one ``split``), each validated."""
    found = {path.stem: path for path in sorted(TASKS.glob("*.json"))}
    if ids:
        unknown = [task_id for task_id in ids if task_id not in found]
        if unknown:
            raise SystemExit(f"unknown task(s): {', '.join(unknown)}; known: {', '.join(found)}")
        found = {task_id: found[task_id] for task_id in ids}
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    tasks = [_task(path) for path in found.values()]
    return [task for task in tasks if split is None or task.split == split]


def _task(path: Path) -> RealTask:
    data = json.loads(path.read_text())
    where = f"tasks/{path.name}"
    if not isinstance(data, dict) or set(data) != FIELDS:
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{where}: needs exactly {', '.join(sorted(FIELDS))}, got {got}")
    if data["id"] != path.stem:
        raise ValueError(f"{where}: id {data['id']!r} is not the file's name")
    project = data["project"]
    if not isinstance(project, str) or not (PROJECTS / project).is_dir() or "/" in project:
        raise ValueError(f"{where}: no project {project!r} in {PROJECTS}")
    if not data["id"].startswith(f"{project}-"):
        raise ValueError(f"{where}: the id must start with the project's name and a dash")
    if data["split"] not in SPLITS:
        raise ValueError(f"{where}: split must be one of {', '.join(SPLITS)}, got {data['split']!r}")
    if data["kind"] not in KINDS:
        raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}, got {data['kind']!r}")
    for field in ("prompt", "where"):
        if not isinstance(data[field], str) or not data[field].strip():
            raise ValueError(f"{where}: {field} must be a non-empty string")
    bug = _bug(where, PROJECTS / project, data["bug"])
    failing = data["failing"]
    if not isinstance(failing, list) or not failing or not all(isinstance(test, str) for test in failing):
        raise ValueError(f"{where}: failing must be a non-empty list of pytest node ids")
    if len(set(failing)) != len(failing):
        raise ValueError(f"{where}: failing lists a test twice")
    for test in failing:
        test_file = test.split("::", 1)[0]
        if "::" not in test or not is_test_file(test_file) or not (PROJECTS / project / test_file).is_file():
            raise ValueError(f"{where}: {test!r} is not a node id in one of the project's test files")
    return RealTask(
        data["id"], project, data["split"], data["kind"], data["prompt"], bug, tuple(failing), data["where"]
    )


def _bug(where: str, root: Path, bug: Any) -> Bug:
    if not isinstance(bug, dict) or set(bug) != BUG_FIELDS:
        raise ValueError(f"{where}: bug needs exactly {', '.join(sorted(BUG_FIELDS))}")
    file, line, old, new = bug["file"], bug["line"], bug["old"], bug["new"]
    if not isinstance(file, str) or not (root / file).is_file() or is_test_file(file):
        raise ValueError(f"{where}: bug.file {file!r} is not a library file of the project")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise ValueError(f"{where}: bug.line must be a positive integer")
    if not (isinstance(old, str) and isinstance(new, str)) or "\n" in old + new or old == new:
        raise ValueError(f"{where}: bug.old and bug.new must be two different single lines")
    return Bug(file, line, old, new)


# -- workspaces ----------------------------------------------------------------------------------


def is_test_file(relative: str) -> bool:
    """A test, a test helper, or a file that steers pytest, by its path relative to the project."""
    parts = relative.split("/")
    name = parts[-1]
    return (
        bool(TEST_FOLDERS & set(parts[:-1]))
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
        or name in STEERING
        or (len(parts) == 1 and name in PYTEST_CONFIGS)
    )


def project_files(root: Path) -> dict[str, Path]:
    """Every file under ``root`` by relative path, caches left out."""
    files = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and not SKIPPED & set(relative.parts):
            files[relative.as_posix()] = path
    return files


def materialize(task: RealTask, destination: Path) -> Path:
    """The task's project copied to ``destination`` (created) with the bug applied.

    Raises ``ValueError`` when line ``bug.line`` of ``bug.file`` is not exactly ``bug.old``.
    """
    shutil.copytree(task.root, destination, ignore=lambda folder, names: {n for n in names if n in SKIPPED})
    target = destination / task.bug.file
    lines = target.read_text().splitlines(keepends=True)
    line = lines[task.bug.line - 1] if task.bug.line <= len(lines) else ""
    text = line.rstrip("\r\n")
    if text != task.bug.old:
        raise ValueError(
            f"{task.id}: line {task.bug.line} of {task.bug.file} is {text!r}, not {task.bug.old!r}; "
            "the project changed under the task"
        )
    lines[task.bug.line - 1] = task.bug.new + line[len(text) :]
    target.write_text("".join(lines))
    return destination


def edited_tests(task: RealTask, workspace: Path) -> list[str]:
    """The project's test files changed or deleted in ``workspace``, and steering files added there."""
    originals = {relative: path for relative, path in project_files(task.root).items() if is_test_file(relative)}
    edited = [
        relative
        for relative, path in originals.items()
        if not (workspace / relative).is_file() or (workspace / relative).read_bytes() != path.read_bytes()
    ]
    added = [
        relative
        for relative in project_files(workspace)
        if relative not in originals
        and (relative.rsplit("/", 1)[-1] in STEERING or ("/" not in relative and relative in PYTEST_CONFIGS))
    ]
    return sorted(edited + added)


# -- running the suite ---------------------------------------------------------------------------


def suite_environment(workspace: Path) -> dict[str, str]:
    """This process's environment for a project's suite: the workspace importable, no plugins, no caches."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(workspace), str(workspace / "src")]),
        PYTHONDONTWRITEBYTECODE="1",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    return env


def run_suite(workspace: Path, extra: list[str] | None = None, timeout: float = SUITE_TIMEOUT) -> SuiteRun:
    """The project's whole suite in ``workspace``, stopped (with its children) after ``timeout`` seconds."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *(extra or [])]
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=workspace,
        env=suite_environment(workspace),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,  # so a timeout stops what the tests started too
    )
    try:
        output, _ = process.communicate(timeout=timeout)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        returncode = None
    return SuiteRun(returncode, time.perf_counter() - started, output)


def check(task: RealTask, workspace: Path, timeout: float = SUITE_TIMEOUT) -> Verdict:
    """Whether ``workspace`` fixes the task: the tests as shipped, and the whole suite passing."""
    edited = edited_tests(task, workspace)
    if edited:
        return Verdict(False, f"edited the tests ({', '.join(edited)})")
    run = run_suite(workspace, timeout=timeout)
    if run.returncode is None:
        return Verdict(False, f"the tests ran past {timeout:.0f}s")
    if run.returncode == 0:
        return Verdict(True)
    lines = [line for line in run.output.splitlines() if line.strip()]
    return Verdict(False, f"tests fail: {lines[-1] if lines else f'pytest exited {run.returncode}'}")


def junit_outcomes(report: Path) -> dict[str, str]:
    """Each test's outcome (``passed``, ``failed`` or ``skipped``) by node id, from a JUnit XML report.

    The report must be written with ``junit_family=xunit1``, whose test cases name their file; an error counts as
    a failure, and a module that failed to import is listed under its dotted name.
    """
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        file, classname, name = case.get("file"), case.get("classname", ""), case.get("name", "")
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        if not file:
            outcomes[name] = outcome
            continue
        module = file.removesuffix(".py").replace("/", ".")
        classes = classname[len(module) + 1 :].split(".") if classname.startswith(f"{module}.") else []
        node = "::".join([file, *classes, name])
        if outcomes.get(node) != "failed":  # a test that failed and then erred in teardown is listed twice
            outcomes[node] = outcome
    return outcomes


# -- checking the set ----------------------------------------------------------------------------


def check_set(tasks: list[RealTask], timeout: float = SUITE_TIMEOUT) -> list[dict[str, Any]]:
    """For each task: whether its clean project passes and its bugged copy fails exactly ``failing``."""
    clean: dict[str, Verdict] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="cortana-real-tasks-") as temporary:
        for task in tasks:
            if task.project not in clean:
                copy = Path(temporary) / f"clean-{task.project}"
                shutil.copytree(task.root, copy, ignore=lambda folder, names: {n for n in names if n in SKIPPED})
                clean[task.project] = check(task, copy, timeout)
            bugged = materialize(task, Path(temporary) / task.id)
            report = Path(temporary) / f"{task.id}.xml"
            run = run_suite(bugged, [f"--junitxml={report}", "-o", "junit_family=xunit1"], timeout)
            outcomes = junit_outcomes(report) if report.is_file() else {}
            failed = {test for test, outcome in outcomes.items() if outcome == "failed"}
            skipped = {test for test in task.failing if outcomes.get(test) == "skipped"}
            expected = set(task.failing)
            rows.append(
                {
                    "id": task.id,
                    "split": task.split,
                    "kind": task.kind,
                    "clean_passes": clean[task.project].ok,
                    "clean_reason": clean[task.project].reason,
                    "timed_out": run.returncode is None,
                    "expected": len(expected),
                    "failed": len(failed),
                    "unexpected": sorted(failed - expected),
                    "missing": sorted(expected - failed - skipped),
                    "skipped": sorted(skipped),
                    "bugged_seconds": round(run.seconds, 2),
                }
            )
    return rows


def _well_formed(row: dict[str, Any]) -> bool:
    return row["clean_passes"] and not row["timed_out"] and not row["unexpected"] and not row["missing"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", help="task ids, comma-separated (default: all)")
    parser.add_argument("--split", choices=SPLITS, help="only the development or the held-out tasks")
    parser.add_argument("--timeout", type=float, default=SUITE_TIMEOUT, help="seconds one suite may take")
    parser.add_argument(
        "--check-set", action="store_true", help="run no model: clean projects pass, bugs fail exactly their tests"
    )
    args = parser.parse_args()
    tasks = load_real_tasks(args.tasks.split(",") if args.tasks else None, args.split)
    if not args.check_set:
        table(
            ["task", "split", "kind", "bug", "failing"],
            [[t.id, t.split, t.kind, f"{t.project}/{t.bug.file}:{t.bug.line}", len(t.failing)] for t in tasks],
        )
        return
    rows = check_set(tasks, args.timeout)
    table(
        ["task", "split", "kind", "clean", "failing (expected)", "bugged suite s", "verdict"],
        [
            [
                row["id"],
                row["split"],
                row["kind"],
                "passes" if row["clean_passes"] else "FAILS",
                f"{row['failed']} ({row['expected']})" + (f", {len(row['skipped'])} skipped" if row["skipped"] else ""),
                f"{row['bugged_seconds']:.2f}",
                "ok" if _well_formed(row) else "BROKEN",
            ]
            for row in rows
        ],
    )
    for row in rows:
        if not row["clean_passes"]:
            print(f"  {row['id']}: the clean project fails: {row['clean_reason'][:160]}")
        if row["timed_out"]:
            print(f"  {row['id']}: the bugged suite ran past {args.timeout:.0f}s")
        for test in row["unexpected"]:
            print(f"  {row['id']}: fails but is not listed: {test}")
        for test in row["missing"]:
            print(f"  {row['id']}: listed but passes: {test}")
        for test in row["skipped"]:
            print(f"  {row['id']}: listed but skipped here (an optional dependency missing?): {test}")
    bad = [row["id"] for row in rows if not _well_formed(row)]
    print(f"{len(rows) - len(bad)}/{len(rows)} tasks well formed" + (f"; broken: {', '.join(bad)}" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
