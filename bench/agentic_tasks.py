"""Agentic coding tasks, end to end through the ``cortana`` command: success rate, model calls, wall time.

The set (``bench/tasks/``, see its README) is twenty-four small Python
repositories with one task each, of these kinds (``KINDS``): fix a bug a
failing test shows (``fix_bug``; in some the broken function is one call away
from the test and the prompt does not name it), add a function a test expects
(``add_function``), rename a function or class across files (``rename``),
change a function's signature and its callers in other files
(``signature_change``), give a configuration key a default when it is missing
(``config_default``), add a flag to a small argparse command (``cli_flag``),
write the body of a function from its docstring (``docstring_function``), or
answer a question about the code (``question``).

Each task's ``task.json`` names its half, ``split``: ``dev`` (tune prompts and
workflows on these) or ``held-out`` (report on these); twelve tasks each, and
every kind of code task in both. ``--split`` runs one half. The field is
written down, not derived, so adding a task never moves another one.

For each task and model the runner copies the repository (without
``task.json``, ``solution/`` or ``solution.txt``) into a fresh temporary
folder and runs, there, with stdin closed::

    cortana --engine embedded --model MODEL --yes PROMPT

(the ``cortana`` script next to this Python). ``HOME`` and the XDG folders
point into the temporary folder, so no user cortana.yml, trusted folders or
history leak in; ``CORTANA_CACHE_DIR`` is set to the cache folder this
process sees, so the bundled model is not joined again. With no terminal,
Cortana asks nothing: ``--yes`` allows writes, edits and commands (never in
protected paths such as ``.git/``), and a workspace without a cortana.yml
needs no trust.

Success is decided by the task's check, never by eye:

- ``pytest``: ``python -m pytest ARGS`` in the workspace must pass (third-party
  plugins off, 120 s at most). The task's test files must be as they were: a
  changed or deleted file under ``tests/`` or ``conftest.py``, or an added
  ``conftest.py`` or pytest configuration file (``pytest.ini``...), fails as
  "edited the tests". For a rename (``check.rename``) the files under
  ``tests/`` are expected to change: ``check.forbid`` (a regular expression
  that must not match in any file under its ``paths``, as the agent left them)
  proves the old name is gone from the code and the tests, and the original
  tests with the old name replaced by the new one are written back before
  pytest runs, so deleting or weakening a test gains nothing.
- ``answer``: the answer (what ``cortana`` wrote to stdout) must contain one
  alternative of every ``must_include`` group and nothing of
  ``must_not_include``, case-insensitively, as whole words where an
  alternative starts or ends with a letter or digit (``4`` is not found in
  ``40``).

The check runs whatever the exit status (a fix written before the run hit
``max_tool_iterations`` still counts); a failure's reason then names it.

Model calls, tool calls and tokens are Cortana's own counts (``RunMetrics``):
with stderr not a terminal, ``AgentLogger`` prints them as its summary line at
the end of a run ("3 model calls · 2 tools · 1,234 in / 56 out tokens ·
7.8s"), which the runner parses. A run that ends in an error (e.g.
``max_tool_iterations``) prints no summary: its tool calls are then the tool
rows printed (one per finished call) and its model calls are unknown
(``null``), left out of the mean, and the table says how many runs were
counted. Wall time is the whole command: start, engine and model load,
every model and tool call, shutdown.

``--check-solutions`` runs no model: it checks that each task's reference
solution passes and the unmodified repository fails (the unit test uses it).

    python bench/agentic_tasks.py --model qwen2.5-coder-1.5b
    python bench/agentic_tasks.py --model qwen2.5-coder-0.5b,qwen2.5-coder-1.5b --tasks fix-discount,add-clamp
    python bench/agentic_tasks.py --model qwen2.5-coder-1.5b --split dev
    python bench/agentic_tasks.py --check-solutions
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from report import RESULTS, save, table

TASKS = Path(__file__).resolve().parent / "tasks"
KINDS = (
    "fix_bug",
    "add_function",
    "rename",
    "signature_change",
    "config_default",
    "cli_flag",
    "docstring_function",
    "question",
)
SPLITS = ("dev", "held-out")
"""A task's half (its task.json ``split``): ``dev`` to develop on, ``held-out`` to report on."""
MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
NOT_COPIED = frozenset({"task.json", "solution", "solution.txt"})
"""What the model never sees: the task's description for the runner, and the reference solution."""
SKIPPED = frozenset(
    {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".git", ".cortana", ".venv", "graphify-out"}
)
"""Folders never copied, compared or searched: caches, and what Cortana keeps in a workspace."""
TEST_FOLDER = "tests"
PYTEST_CONFIGS = frozenset({"pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
"""Files at the top that steer pytest, as ``conftest.py`` does anywhere: adding one counts as editing the tests."""
CHECK_TIMEOUT = 120.0
SUMMARY = re.compile(
    r"(?P<model_calls>\d+) model calls? · (?P<tool_calls>\d+) tools?(?: \((?P<tool_errors>\d+) failed\))? · "
    r"(?P<prompt_tokens>[\d,]+) in(?:, (?P<cached_tokens>[\d,]+) cached)? / (?P<completion_tokens>[\d,]+) out tokens"
    r" · (?P<elapsed>[\d.]+)s"
)
TOOL_ROW = re.compile(r"^[✓✗] [\w.-]+\(", re.MULTILINE)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class Task:
    id: str
    kind: str
    prompt: str
    check: dict[str, Any]
    root: Path
    split: str


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""


def load_tasks(ids: list[str] | None = None) -> list[Task]:
    """The tasks in ``bench/tasks/`` (or only ``ids``, in that order), each ``task.json`` validated."""
    found = {path.parent.name: path.parent for path in sorted(TASKS.glob("*/task.json"))}
    if ids:
        unknown = [task_id for task_id in ids if task_id not in found]
        if unknown:
            raise SystemExit(f"unknown task(s): {', '.join(unknown)}; known: {', '.join(found)}")
        found = {task_id: found[task_id] for task_id in ids}
    return [_task(root) for root in found.values()]


def _task(root: Path) -> Task:
    data = json.loads((root / "task.json").read_text())
    where = f"{root.name}/task.json"
    if set(data) != {"id", "kind", "split", "prompt", "check"}:
        raise ValueError(f"{where}: needs exactly id, kind, split, prompt and check, got {sorted(data)}")
    if data["id"] != root.name:
        raise ValueError(f"{where}: id {data['id']!r} is not the folder's name")
    if data["kind"] not in KINDS:
        raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}, got {data['kind']!r}")
    if data["split"] not in SPLITS:
        raise ValueError(f"{where}: split must be one of {', '.join(SPLITS)}, got {data['split']!r}")
    if not isinstance(data["prompt"], str) or not data["prompt"].strip():
        raise ValueError(f"{where}: prompt must be a non-empty string")
    check = data["check"]
    question = data["kind"] == "question"
    if check.get("type") != ("answer" if question else "pytest"):
        raise ValueError(f"{where}: a {data['kind']} task is checked by {'answer' if question else 'pytest'}")
    if question:
        groups = check.get("must_include")
        if not groups or not all(isinstance(g, list) and g and all(isinstance(a, str) for a in g) for g in groups):
            raise ValueError(f"{where}: must_include must be a non-empty list of non-empty lists of strings")
        if not all(isinstance(word, str) for word in check.get("must_not_include", [])):
            raise ValueError(f"{where}: must_not_include must be a list of strings")
        if not (root / "solution.txt").is_file():
            raise ValueError(f"{where}: a question needs solution.txt")
    else:
        if not isinstance(check.get("args"), list):
            raise ValueError(f"{where}: a pytest check needs args (a list)")
        if not (root / "solution").is_dir():
            raise ValueError(f"{where}: needs a solution/ folder")
        if data["kind"] == "rename" and not ({"old", "new"} <= set(check.get("rename", {})) and "forbid" in check):
            raise ValueError(f"{where}: a rename check needs rename.old, rename.new and forbid")
        if "forbid" in check:
            re.compile(check["forbid"]["pattern"])
            if not check["forbid"].get("paths"):
                raise ValueError(f"{where}: forbid needs paths")
    return Task(data["id"], data["kind"], data["prompt"], check, root, data["split"])


# -- workspaces ----------------------------------------------------------------------------------


def copy_repo(task: Task, destination: Path) -> Path:
    """The task's repository copied to ``destination`` (created), without what the model must not see."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == task.root
        return {name for name in names if name in SKIPPED or (top and name in NOT_COPIED)}

    shutil.copytree(task.root, destination, ignore=ignore)
    return destination


def apply_solution(task: Task, workspace: Path) -> None:
    """Copy the reference solution's files over ``workspace``."""
    shutil.copytree(task.root / "solution", workspace, dirs_exist_ok=True)


def _repo_files(root: Path) -> dict[str, Path]:
    """Every file of the repository in ``root`` by relative path, as ``copy_repo`` copies it."""
    files = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in NOT_COPIED or SKIPPED & set(relative.parts) or not path.is_file():
            continue
        files[relative.as_posix()] = path
    return files


def _is_test_file(relative: str) -> bool:
    """A test, or a file that steers pytest."""
    return relative.split("/", 1)[0] == TEST_FOLDER or _steers_pytest(relative)


def _steers_pytest(relative: str) -> bool:
    return relative.rsplit("/", 1)[-1] == "conftest.py" or relative in PYTEST_CONFIGS


def expected_tests(task: Task) -> dict[str, bytes]:
    """The test files the check runs on: the originals, renamed for a rename task."""
    rename = task.check.get("rename")
    expected = {}
    for relative, path in _repo_files(task.root).items():
        if not _is_test_file(relative):
            continue
        content = path.read_bytes()
        if rename:
            pattern = rf"\b{re.escape(rename['old'])}\b"
            content = re.sub(pattern, rename["new"], content.decode()).encode()
        expected[relative] = content
    return expected


def edited_tests(task: Task, workspace: Path) -> list[str]:
    """The test files the agent changed or deleted, and pytest configuration it added."""
    originals = {relative: path.read_bytes() for relative, path in _repo_files(task.root).items()}
    edited = [
        relative
        for relative, content in originals.items()
        if _is_test_file(relative)
        and (not (workspace / relative).is_file() or (workspace / relative).read_bytes() != content)
    ]
    added = [relative for relative in _repo_files(workspace) if _steers_pytest(relative) and relative not in originals]
    return sorted(edited + added)


def forbidden_matches(check: dict[str, Any], workspace: Path) -> list[str]:
    """The files under ``check.forbid.paths`` where ``check.forbid.pattern`` matches."""
    forbid = check.get("forbid")
    if not forbid:
        return []
    pattern = re.compile(forbid["pattern"])
    found = []
    for folder in forbid["paths"]:
        base = workspace / folder
        paths = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for path in paths:
            relative = path.relative_to(workspace)
            searched = path.is_file() and not SKIPPED & set(relative.parts)
            if searched and pattern.search(path.read_text(errors="replace")):
                found.append(relative.as_posix())
    return found


# -- checks --------------------------------------------------------------------------------------


def check_workspace(task: Task, workspace: Path, answer: str = "") -> Verdict:
    """Whether the task is done in ``workspace`` (code tasks) or by ``answer`` (questions)."""
    if task.check["type"] == "answer":
        return check_answer(task.check, answer)
    edited = edited_tests(task, workspace)
    if "rename" in task.check:  # a rename changes the tests: they are checked by forbid, and written back below
        edited = [relative for relative in edited if relative.split("/", 1)[0] != TEST_FOLDER]
    if edited:
        return Verdict(False, f"edited the tests ({', '.join(edited)})")
    if left := forbidden_matches(task.check, workspace):
        return Verdict(False, f"{task.check['forbid']['pattern']} still in {', '.join(left)}")
    for relative, content in expected_tests(task).items():  # a rename's tests as they should be
        target = workspace / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return run_pytest(task.check["args"], workspace)


def run_pytest(args: list[str], workspace: Path, timeout: float = CHECK_TIMEOUT) -> Verdict:
    """``python -m pytest ARGS`` in ``workspace``: passing, or the line that says why not."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    try:
        done = subprocess.run(
            command,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Verdict(False, f"the tests ran past {timeout:.0f}s")
    if done.returncode == 0:
        return Verdict(True)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return Verdict(False, f"tests fail: {lines[-1] if lines else f'pytest exited {done.returncode}'}")


def _contains(text: str, alternative: str) -> bool:
    """``alternative`` in ``text``, case-insensitively, as a whole word where it starts or ends with one."""
    start = r"(?<![A-Za-z0-9_])" if alternative[:1].isalnum() else ""
    end = r"(?![A-Za-z0-9_])" if alternative[-1:].isalnum() else ""
    return re.search(start + re.escape(alternative) + end, text, re.IGNORECASE) is not None


def check_answer(check: dict[str, Any], answer: str) -> Verdict:
    """Every ``must_include`` group has an alternative in ``answer``, and no ``must_not_include`` is there."""
    if not answer.strip():
        return Verdict(False, "no answer")
    for group in check["must_include"]:
        if not any(_contains(answer, alternative) for alternative in group):
            return Verdict(False, f"answer lacks {' or '.join(map(repr, group))}")
    for word in check.get("must_not_include", []):
        if _contains(answer, word):
            return Verdict(False, f"answer says {word!r}")
    return Verdict(True)


def check_solutions(tasks: list[Task]) -> list[dict[str, Any]]:
    """For each task: whether its reference solution passes and its unmodified repository fails."""
    rows = []
    for task in tasks:
        with tempfile.TemporaryDirectory(prefix=f"cortana-task-{task.id}-") as temporary:
            before = copy_repo(task, Path(temporary) / "before")
            after = copy_repo(task, Path(temporary) / "after")
            solution = ""
            if task.kind == "question":
                solution = (task.root / "solution.txt").read_text()
            else:
                apply_solution(task, after)
            unmodified = check_workspace(task, before, "")
            solved = check_workspace(task, after, solution)
        rows.append(
            {
                "id": task.id,
                "kind": task.kind,
                "solution_passes": solved.ok,
                "solution_reason": solved.reason,
                "unmodified_fails": not unmodified.ok,
                "unmodified_reason": unmodified.reason,
            }
        )
    return rows


# -- running cortana -----------------------------------------------------------------------------


def cortana_command(model: str, prompt: str, threads: int | None = None) -> list[str]:
    """The command line a task runs: the ``cortana`` script beside this Python (its module where absent)."""
    script = Path(sys.executable).parent / "cortana"
    base = [str(script)] if script.is_file() else [sys.executable, "-m", "cortana.cli.main"]
    extra = ["--threads", str(threads)] if threads else []
    return [*base, "--engine", "embedded", "--model", model, "--yes", *extra, prompt]


def isolated_environment(home: Path) -> dict[str, str]:
    """This process's environment with ``HOME`` and the XDG folders in ``home``, the model cache kept."""
    from cortana.config import cache_dir

    env = dict(os.environ)
    env["CORTANA_CACHE_DIR"] = str(cache_dir().resolve())  # where the bundled models were joined
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        NO_COLOR="1",
        TERM="dumb",
    )
    env.pop("FORCE_COLOR", None)
    return env


def parse_counts(stderr: str) -> dict[str, Any]:
    """Cortana's counts from its summary line; without one, the tool rows and no model-call count."""
    text = ANSI.sub("", stderr)
    found = list(SUMMARY.finditer(text))
    if not found:
        return {"model_calls": None, "tool_calls": len(TOOL_ROW.findall(text)), "counted_by": "tool rows"}
    numbers = {key: float(value.replace(",", "")) if value else 0 for key, value in found[-1].groupdict().items()}
    counts: dict[str, Any] = {key: int(value) for key, value in numbers.items() if key != "elapsed"}
    counts["run_seconds"] = numbers["elapsed"]
    counts["counted_by"] = "summary line"
    return counts


def run_task(
    task: Task,
    model: str,
    timeout: float,
    threads: int | None = None,
    keep: bool = False,
    user_config: str | None = None,
) -> dict[str, Any]:
    """One task on one model: the command, its counts, the check's verdict.

    ``user_config`` is written as the (temporary) user's own cortana.yml.
    """
    temporary = Path(tempfile.mkdtemp(prefix=f"cortana-task-{task.id}-"))
    workspace = copy_repo(task, temporary / "work")
    (temporary / "home").mkdir()
    if user_config is not None:
        config = temporary / "home" / ".config" / "cortana" / "cortana.yml"
        config.parent.mkdir(parents=True)
        config.write_text(user_config)
    command = cortana_command(model, task.prompt, threads)
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=workspace,
        env=isolated_environment(temporary / "home"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,  # so a timeout stops the engine's processes too
    )
    timed_out = False
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    answer = ANSI.sub("", stdout).strip()
    verdict = check_workspace(task, workspace, answer)
    reason = verdict.reason
    if not verdict.ok and timed_out:
        reason = f"timed out after {timeout:.0f}s; {reason}"
    elif not verdict.ok and process.returncode:
        last = [line for line in ANSI.sub("", stderr).splitlines() if line.strip()]
        reason = f"{reason} (cortana exited {process.returncode}: {last[-1][:160] if last else 'no message'})"
    row = {
        "id": task.id,
        "kind": task.kind,
        "split": task.split,
        "ok": verdict.ok,
        "reason": reason,
        "exit_code": None if timed_out else process.returncode,
        "wall_seconds": round(wall, 2),
        **parse_counts(stderr),
        "answer": answer[-4000:],
        "stderr_tail": ANSI.sub("", stderr)[-2000:],
    }
    if keep:
        row["workspace"] = str(workspace)
    else:
        shutil.rmtree(temporary, ignore_errors=True)
    return row


def summarize(model: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Success rate and means of one model's runs."""
    counted = [row["model_calls"] for row in rows if row["model_calls"] is not None]
    per_kind = {
        kind: {"ok": sum(r["ok"] for r in rows if r["kind"] == kind), "n": sum(r["kind"] == kind for r in rows)}
        for kind in KINDS
    }
    per_split = {
        split: {"ok": sum(r["ok"] for r in rows if r["split"] == split), "n": sum(r["split"] == split for r in rows)}
        for split in SPLITS
    }
    return {
        "model": model,
        "tasks": len(rows),
        "per_split": per_split,
        "succeeded": sum(row["ok"] for row in rows),
        "success_rate": sum(row["ok"] for row in rows) / len(rows) if rows else 0.0,
        "per_kind": per_kind,
        "mean_model_calls": statistics.fmean(counted) if counted else None,
        "model_calls_counted": len(counted),
        "mean_tool_calls": statistics.fmean(row["tool_calls"] for row in rows) if rows else None,
        "mean_wall_seconds": statistics.fmean(row["wall_seconds"] for row in rows) if rows else None,
        "total_wall_seconds": sum(row["wall_seconds"] for row in rows),
    }


def report(results: list[dict[str, Any]]) -> None:
    """The summary per model, then one row per task and model."""
    print("\nagentic tasks: success, and means per task (model calls over the runs that printed their summary)")
    table(
        ["model", "success", *SPLITS, *KINDS, "model calls", "tool calls", "wall s"],
        [
            [
                result["summary"]["model"],
                f"{result['summary']['succeeded']}/{result['summary']['tasks']} "
                f"({result['summary']['success_rate']:.0%})",
                *(
                    f"{result['summary']['per_split'][s]['ok']}/{result['summary']['per_split'][s]['n']}"
                    for s in SPLITS
                ),
                *(f"{result['summary']['per_kind'][k]['ok']}/{result['summary']['per_kind'][k]['n']}" for k in KINDS),
                _mean(result["summary"]["mean_model_calls"], result["summary"]["model_calls_counted"], result["runs"]),
                _number(result["summary"]["mean_tool_calls"]),
                _number(result["summary"]["mean_wall_seconds"]),
            ]
            for result in results
        ],
    )
    print()
    table(
        ["task", "split", "model", "result", "model calls", "tool calls", "wall s"],
        [
            [
                row["id"],
                row["split"],
                result["summary"]["model"],
                "ok" if row["ok"] else "FAIL",
                "?" if row["model_calls"] is None else row["model_calls"],
                row["tool_calls"],
                row["wall_seconds"],
            ]
            for result in results
            for row in result["runs"]
        ],
    )
    failures = [(result["summary"]["model"], row) for result in results for row in result["runs"] if not row["ok"]]
    if failures:
        print("\nwhy the failures failed:")
        for model, row in failures:
            print(f"  {row['id']} / {model}: {row['reason'][:200]}")


def _mean(value: float | None, counted: int, runs: list[dict[str, Any]]) -> str:
    if value is None:
        return "?"
    return f"{value:.1f}" + (f" ({counted}/{len(runs)} runs)" if counted != len(runs) else "")


def _number(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default=",".join(MODELS), help="bundled model(s), comma-separated (default: both bundled models)"
    )
    parser.add_argument("--tasks", help="task ids, comma-separated (default: all)")
    parser.add_argument("--split", choices=SPLITS, help="only the development or the held-out tasks")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one cortana run may take (default 600)")
    parser.add_argument("--threads", type=int, help="CPU threads of the embedded engine (default: Cortana's)")
    parser.add_argument("--keep", action="store_true", help="keep each run's temporary workspace and say where")
    parser.add_argument("--json", type=Path, help="where to write the results (default: bench/results/...)")
    parser.add_argument(
        "--check-solutions", action="store_true", help="run no model: the solutions pass, the repositories fail"
    )
    args = parser.parse_args()
    tasks = load_tasks(args.tasks.split(",") if args.tasks else None)
    if args.split:
        tasks = [task for task in tasks if task.split == args.split]
    if args.check_solutions:
        rows = check_solutions(tasks)
        table(
            ["task", "kind", "solution", "unmodified", "unmodified fails because"],
            [
                [
                    row["id"],
                    row["kind"],
                    "passes" if row["solution_passes"] else f"FAILS: {row['solution_reason']}",
                    "fails" if row["unmodified_fails"] else "PASSES",
                    row["unmodified_reason"][:80],
                ]
                for row in rows
            ],
        )
        bad = [row["id"] for row in rows if not (row["solution_passes"] and row["unmodified_fails"])]
        print(f"{len(rows) - len(bad)}/{len(rows)} tasks well formed" + (f"; broken: {', '.join(bad)}" if bad else ""))
        sys.exit(1 if bad else 0)
    models = [name.strip() for name in args.model.split(",") if name.strip()]
    results = []
    for model in models:
        runs = []
        for task in tasks:
            row = run_task(task, model, args.timeout, args.threads, args.keep)
            runs.append(row)
            calls = "?" if row["model_calls"] is None else row["model_calls"]
            status = "ok" if row["ok"] else f"FAIL {row['reason'][:90]}"
            print(
                f"{model} {task.id}: {status} · {calls} model calls · {row['tool_calls']} tools · "
                f"{row['wall_seconds']:.0f}s" + (f" · {row['workspace']}" if args.keep else ""),
                file=sys.stderr,
            )
        results.append({"summary": summarize(model, runs), "runs": runs})
    report(results)
    default = f"agentic_tasks_{models[0]}.json" if len(models) == 1 else "agentic_tasks.json"
    save(
        args.json or RESULTS / default,
        {
            "command": cortana_command("MODEL", "PROMPT", args.threads),
            "timeout_seconds": args.timeout,
            "environment": _cortana_environment(),
            "tasks": [{"id": t.id, "kind": t.kind, "split": t.split, "prompt": t.prompt} for t in tasks],
            "results": results,
        },
    )


def _cortana_environment() -> dict[str, str]:
    """The Cortana variables set for this run (they steer every task's run), the API key left out."""
    from cortana.config import ENVIRONMENT_VARIABLES

    return {
        name: os.environ[name]
        for name in ENVIRONMENT_VARIABLES
        if name in os.environ and name != "CORTANA_API_KEY" and not name.startswith("XDG_")
    }


if __name__ == "__main__":
    main()
