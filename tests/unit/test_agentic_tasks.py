"""The agentic task set is well formed: each reference solution passes its check, each untouched repository fails.

No model runs here: ``--check-solutions``' logic runs in-process (each check is a pytest in a temporary copy).
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from cortana.agent.events import RunFinished, ToolCallFinished
from cortana.agent.logger import AgentLogger
from cortana.messages import Message, RunMetrics, RunResult, ThreadRef, ToolCall

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture(scope="module")
def tasks_module() -> Any:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # the benchmarks import their shared report module
    spec = importlib.util.spec_from_file_location("bench_agentic_tasks", BENCH / "agentic_tasks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are created
    spec.loader.exec_module(module)
    return module


def test_every_task_json_is_valid_and_the_set_covers_every_kind(tasks_module: Any) -> None:
    tasks = tasks_module.load_tasks()
    assert len(tasks) >= 24
    kinds = Counter(task.kind for task in tasks)
    assert set(kinds) == set(tasks_module.KINDS)
    assert kinds["fix_bug"] >= 7 and kinds["add_function"] >= 3 and kinds["rename"] >= 2 and kinds["question"] >= 4
    assert all(kinds[kind] >= 2 for kind in tasks_module.KINDS)
    for task in tasks:
        data = json.loads((task.root / "task.json").read_text())
        assert data["id"] == task.root.name and len(data["prompt"]) < 300, task.id
        assert not list(task.root.rglob("__pycache__")), f"{task.id}: no caches in the set"


def test_every_solution_passes_and_every_untouched_repository_fails(tasks_module: Any) -> None:
    rows = tasks_module.check_solutions(tasks_module.load_tasks())
    for row in rows:
        assert row["solution_passes"], f"{row['id']}: {row['solution_reason']}"
        assert row["unmodified_fails"], f"{row['id']}: the untouched repository passes its check"


def test_the_model_never_sees_the_task_or_its_solution(tasks_module: Any, tmp_path: Path) -> None:
    for task in tasks_module.load_tasks():
        copied = tasks_module.copy_repo(task, tmp_path / task.id)
        names = {path.name for path in copied.rglob("*")}
        assert not names & {"task.json", "solution", "solution.txt"}, task.id
        assert any(path.suffix == ".py" for path in copied.rglob("*")), task.id


def test_editing_the_tests_fails_even_when_they_then_pass(tasks_module: Any, tmp_path: Path) -> None:
    task = tasks_module.load_tasks(["fix-discount"])[0]
    workspace = tasks_module.copy_repo(task, tmp_path / "work")
    (workspace / "tests" / "test_prices.py").write_text("def test_nothing():\n    pass\n")
    verdict = tasks_module.check_workspace(task, workspace)
    assert not verdict.ok and verdict.reason.startswith("edited the tests")
    workspace = tasks_module.copy_repo(task, tmp_path / "added")
    tasks_module.apply_solution(task, workspace)
    (workspace / "pytest.ini").write_text("[pytest]\naddopts = -k nothing\n")
    assert tasks_module.check_workspace(task, workspace).reason == "edited the tests (pytest.ini)"


def test_a_rename_must_reach_the_tests_and_cannot_drop_them(tasks_module: Any, tmp_path: Path) -> None:
    task = tasks_module.load_tasks(["rename-calc-total"])[0]
    workspace = tasks_module.copy_repo(task, tmp_path / "work")
    tasks_module.apply_solution(task, workspace)
    shutil.copy(task.root / "tests" / "test_cart.py", workspace / "tests" / "test_cart.py")  # tests not renamed
    verdict = tasks_module.check_workspace(task, workspace)
    assert not verdict.ok and "tests/test_cart.py" in verdict.reason
    workspace = tasks_module.copy_repo(task, tmp_path / "dropped")
    tasks_module.apply_solution(task, workspace)
    (workspace / "shop" / "receipt.py").write_text('"""Gone."""\n')  # callers broken, tests emptied
    (workspace / "tests" / "test_cart.py").write_text("def test_nothing():\n    pass\n")
    verdict = tasks_module.check_workspace(task, workspace)
    assert not verdict.ok and verdict.reason.startswith("tests fail")


def test_answers_need_every_group_as_whole_words(tasks_module: Any) -> None:
    check = {"type": "answer", "must_include": [["4", "four"], ["MAX_RETRIES"]], "must_not_include": ["never"]}
    assert tasks_module.check_answer(check, "It retries four times (max_retries).").ok
    assert not tasks_module.check_answer(check, "MAX_RETRIES is 40").ok
    assert not tasks_module.check_answer(check, "MAX_RETRIES = 4, so it never gives up").ok
    assert tasks_module.check_answer(check, "").reason == "no answer"


def test_counts_are_read_from_what_the_cortana_command_prints(tasks_module: Any) -> None:
    stream = io.StringIO()
    logger = AgentLogger(Console(file=stream, width=40, force_terminal=False, no_color=True))
    call = ToolCall(id="1", name="read_file", arguments={"path": "shop/prices.py"})
    logger.handle(ToolCallFinished(call, Message.tool(call, "..."), 0.01))
    logger.handle(ToolCallFinished(call, Message.tool(call, "no such file", is_error=True), 0.01))
    metrics = RunMetrics(
        model_calls=3, tool_calls=2, tool_errors=1, prompt_tokens=12_345, completion_tokens=67, elapsed=8.24
    )
    logger.handle(RunFinished(RunResult(output="done", new_messages=[], metrics=metrics, thread=ThreadRef())))
    counts = tasks_module.parse_counts(stream.getvalue())
    assert counts["model_calls"] == 3 and counts["tool_calls"] == 2 and counts["tool_errors"] == 1
    assert counts["prompt_tokens"] == 12_345 and counts["completion_tokens"] == 67 and counts["run_seconds"] == 8.2
    cut_short = stream.getvalue().rsplit("\n", 2)[0]  # a run that raised prints no summary line
    assert tasks_module.parse_counts(cut_short) == {"model_calls": None, "tool_calls": 2, "counted_by": "tool rows"}


def test_the_command_runs_the_embedded_engine_without_asking(tasks_module: Any, tmp_path: Path) -> None:
    command = tasks_module.cortana_command("qwen2.5-coder-0.5b", "Fix it.")
    assert command[-6:] == ["--engine", "embedded", "--model", "qwen2.5-coder-0.5b", "--yes", "Fix it."]
    env = tasks_module.isolated_environment(tmp_path)
    assert env["HOME"] == str(tmp_path) and env["XDG_CONFIG_HOME"].startswith(str(tmp_path))
    assert not env["CORTANA_CACHE_DIR"].startswith(str(tmp_path))


def test_a_run_is_checked_in_its_own_copy_and_counted(
    tasks_module: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "fake_cortana.py"  # stands in for the cortana command: no model starts
    fake.write_text(
        "import os, shutil, sys\n"
        "assert sys.stdin.read() == '' and not os.path.exists('task.json')\n"
        "shutil.copy(sys.argv[1], 'stats/summary.py')\n"
        "print('Fixed: average returns None for an empty list.')\n"
        "print('✓ edit_file(path=\"stats/summary.py\")  0.01s', file=sys.stderr)\n"
        "print('2 model calls · 1 tool · 1,000 in, 800 cached / 50 out tokens · 3.0s', file=sys.stderr)\n"
        "print(os.environ['HOME'], file=sys.stderr)\n"
    )
    task = tasks_module.load_tasks(["fix-average-empty"])[0]
    solution = task.root / "solution" / "stats" / "summary.py"
    monkeypatch.setattr(tasks_module, "cortana_command", lambda *_: [sys.executable, str(fake), str(solution)])
    row = tasks_module.run_task(task, "qwen2.5-coder-0.5b", timeout=60)
    assert row["ok"] and row["exit_code"] == 0, row
    assert row["model_calls"] == 2 and row["tool_calls"] == 1 and row["cached_tokens"] == 800
    assert row["answer"].startswith("Fixed") and "home" in row["stderr_tail"]
    assert (task.root / "stats" / "summary.py").read_text() != solution.read_text()  # the original is untouched
    summary = tasks_module.summarize("qwen2.5-coder-0.5b", [row])
    assert summary["success_rate"] == 1.0 and summary["mean_model_calls"] == 2


def test_a_run_past_its_timeout_is_stopped_and_fails(
    tasks_module: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        tasks_module, "cortana_command", lambda *_: [sys.executable, "-c", "import time; time.sleep(60)"]
    )
    task = tasks_module.load_tasks(["question-which-file"])[0]
    row = tasks_module.run_task(task, "qwen2.5-coder-0.5b", timeout=0.5)
    assert not row["ok"] and row["exit_code"] is None and row["reason"].startswith("timed out after")
    assert row["wall_seconds"] < 30


def test_the_halves_are_written_down_equal_and_hold_every_code_kind(tasks_module: Any) -> None:
    tasks = tasks_module.load_tasks()
    for task in tasks:
        assert task.split == json.loads((task.root / "task.json").read_text())["split"], task.id
    halves = {split: [task for task in tasks if task.split == split] for split in tasks_module.SPLITS}
    assert [len(halves[split]) for split in tasks_module.SPLITS] == [12, 12]
    code_kinds = set(tasks_module.KINDS) - {"question"}
    for split, half in halves.items():
        assert code_kinds <= {task.kind for task in half}, f"{split} lacks a kind"
    assert {task.kind for task in halves["dev"]} == set(tasks_module.KINDS)
    held_out = {task.id for task in halves["held-out"]}
    assert {  # the first twelve tasks keep the halves they were given when the split was derived from their ids
        "add-is-palindrome",
        "fix-discount",
        "fix-page-count",
        "question-which-file",
        "rename-calc-total",
    } <= held_out
    assert not held_out & {"add-clamp", "fix-average-empty", "question-retry-count", "rename-user-record"}
    assert [t.split for t in tasks_module.load_tasks(["fix-discount"])] == ["held-out"], "a subset keeps its half"


@pytest.mark.parametrize("split", [None, "test", "heldout"])
def test_a_task_without_a_valid_split_is_rejected(tasks_module: Any, tmp_path: Path, split: str | None) -> None:
    source = tasks_module.TASKS / "fix-discount"
    root = tmp_path / "fix-discount"
    shutil.copytree(source, root)
    data = json.loads((source / "task.json").read_text())
    if split is None:
        del data["split"]
    else:
        data["split"] = split
    (root / "task.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="split"):
        tasks_module._task(root)
