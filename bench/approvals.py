"""How many questions a newcomer's session asks, and what confining a command costs.

A scripted session in a small repository with a failing test, as a new user's first task goes: look around,
run the tests, read the code, fix it, run the tests again, look at the diff and the log. The model is
scripted (the same calls every time); the gate and the tools are the real ones. Questions are counted for
two habits: answering "yes" each time, and answering "always" whenever it is offered.

Then the time of one ``run_command`` (``true``) under the keeper alone, and confined in each mode: in an empty
folder, and in one like a project with a uv virtual environment (20,000 files, 2,000 of them hard links to a
cache outside it, in 100 package folders), where the sandbox first looks for files with another name outside.

    python bench/approvals.py [--label NAME] [--runs 30]

Run it on another checkout (``PYTHONPATH=/path/to/old/src``) to count the questions that code asks: the
script uses only ``builtin_tools`` and ``workspace_gate``, which both have.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cortana import Agent, PermissionDecision, ToolCall
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools import Tool
from cortana.tools.builtin import builtin_tools, workspace_gate

RESULTS = Path(__file__).resolve().parent / "results" / "approvals.json"
APP = "def total(prices):\n    return sum(prices[1:])\n"
TEST = "from app import total\n\n\ndef test_total():\n    assert total([1, 2, 3]) == 6\n"
SESSION: list[tuple[str, dict[str, Any]]] = [
    ("list_files", {"path": "."}),
    ("run_command", {"command": "git status --short"}),
    ("run_command", {"command": "ls -la tests"}),
    ("run_command", {"command": f"{sys.executable} -m pytest -q"}),
    ("read_file", {"path": "app.py"}),
    ("edit_file", {"path": "app.py", "old_text": "prices[1:]", "new_text": "prices"}),
    ("run_command", {"command": f"{sys.executable} -m pytest -q"}),
    ("run_command", {"command": f"{sys.executable} -m pytest -q tests/test_app.py"}),
    ("run_command", {"command": "git diff"}),
    ("run_command", {"command": "git diff --stat"}),
    ("run_command", {"command": "git log --oneline -3"}),
    ("run_command", {"command": "grep -rn total ."}),
]
"""The calls of the session, in order (one model response each)."""


def repository(root: Path) -> None:
    (root / "tests").mkdir(parents=True)
    (root / "app.py").write_text(APP)
    (root / "tests" / "test_app.py").write_text(TEST)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)


async def session(always: bool) -> dict[str, Any]:
    """The session once; the questions asked (tool and command) and whether the test passed at the end."""
    asked: list[str] = []

    def approve(call: ToolCall, tool: Tool, reason: str | None, scope: object = None) -> PermissionDecision:
        asked.append(f"{call.name}: {call.arguments.get('command') or call.arguments.get('path')}")
        return PermissionDecision.allow(remember=always and scope is not None)

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "project"
        repository(root)
        script = [tool_call_response(tool_call(name, **arguments)) for name, arguments in SESSION]
        agent = Agent(
            ScriptedModel([*script, "Fixed: total summed from the second price."]),
            tools=builtin_tools(root),
            permissions=workspace_gate(root, approve=approve),
            max_tool_iterations=len(SESSION) + 2,
        )
        result = await agent.run("The total test fails. Fix it.")
        results = [m.content for m in result.new_messages if m.role == "tool"]
    return {"questions": len(asked), "asked": asked, "tests_pass_at_the_end": "1 passed" in results[6]}


async def command_times(runs: int) -> dict[str, float]:
    """Median milliseconds of one ``run_command("true")``: the keeper alone, and confined in each mode."""
    try:
        from cortana.sandbox import Sandbox
        from cortana.tools.builtin import Workspace
    except ImportError:  # a checkout from before the sandbox
        return {}
    found: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "empty"
        root.mkdir()
        project = Path(folder) / "project"
        cache = Path(folder) / "cache"
        like_a_project(project, cache)
        arms = {
            "keeper only": Sandbox(root, enabled=False),
            "namespaces": Sandbox(root, mode="namespaces"),
            "landlock": Sandbox(root, mode="landlock"),
            "namespaces, 20,000 files": Sandbox(project, mode="namespaces"),
            "landlock, 20,000 files": Sandbox(project, mode="landlock"),
        }
        tools = {name: next(t for t in builtin_tools(Workspace(box.root, sandbox=box)) if t.name == "run_command")
                 for name, box in arms.items()}  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(runs):  # the arms alternate, so a busy moment costs each the same
            for name, command in tools.items():
                started = time.perf_counter()
                await command.function(command="true")
                times[name].append(time.perf_counter() - started)
        for name, values in times.items():
            found[name] = round(statistics.median(values) * 1000, 1)
    return found


def like_a_project(project: Path, cache: Path) -> None:
    """18,000 files of its own in 180 folders, and a ``.venv`` of 100 packages of 20 files linked from ``cache``."""
    for number in range(180):
        folder = project / "src" / f"module{number}"
        folder.mkdir(parents=True)
        for file in range(100):
            (folder / f"f{file}.py").write_text("x = 1\n")
    for number in range(100):
        source = cache / f"pkg{number}"
        target = project / ".venv" / "lib" / "site-packages" / f"pkg{number}"
        source.mkdir(parents=True)
        target.mkdir(parents=True)
        for file in range(20):
            (source / f"m{file}.py").write_text("y = 2\n")
            os.link(source / f"m{file}.py", target / f"m{file}.py")
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", default="this checkout", help="what the results are recorded under")
    parser.add_argument("--runs", type=int, default=30, help="commands timed per arm")
    args = parser.parse_args()
    report = {
        "yes each time": asyncio.run(session(always=False)),
        "always when offered": asyncio.run(session(always=True)),
        "run_command(true) median ms": asyncio.run(command_times(args.runs)),
    }
    recorded = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    recorded[args.label] = report
    RESULTS.write_text(json.dumps(recorded, indent=2) + "\n")
    for habit in ("yes each time", "always when offered"):
        print(f"{args.label}: {habit}: {report[habit]['questions']} questions")
    print(f"{args.label}: run_command('true'): {report['run_command(true) median ms']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
