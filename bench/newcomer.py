"""A newcomer's first minutes: 20 one-shot questions through the real ``cortana`` command, counting tool calls.

Issue 44, part 4. Each question runs in a fresh folder, as ``cortana "QUESTION"``
would for a new user: the embedded engine, the configured default model,
stdin closed (so a write or a command is refused, and nothing changes). The
tool calls are read from what the command prints (``✓ name(...)`` /
``✗ name(...)``). Two repositories:

- ``--repo small`` (default): a small project (``invoice/money.py`` with its
  tests, a README, a notes file) committed to a new git repository;
- ``--repo clone``: a fresh ``git clone`` of this repository, as the README's
  quick start has a newcomer run it (where its ``What is a mutex?`` once read
  README.md first): big, with many files that share words with any question.

In each, 10 **general** questions ("What is a mutex?") are right when no tool
is called, and 10 **workspace** questions ("List the files in this folder.")
when the first call is one of the tools the question accepts.

None of these questions is in the judge's training or held-out sets
(``bench/judge_set``); some are on topics close to ones there. Each run
writes ``bench/results/newcomer_LABEL.json``.

    python bench/newcomer.py --label small-judge-on
    python bench/newcomer.py --label small-judge-off --judge off
    python bench/newcomer.py --label clone-judge-on --repo clone
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from report import RESULTS, save, table

GENERAL = [
    "What is a mutex?",
    "Explain big-O notation briefly.",
    "What is the difference between a process and a thread?",
    "What does HTTP status 404 mean?",
    "Write a haiku about autumn.",
    "What is a bloom filter?",
    "How many bytes are in a kilobyte?",
    "What is recursion? One sentence.",
    "Who wrote Pride and Prejudice?",
    "What is the capital of Australia?",
]
WORKSPACE: list[tuple[str, set[str]]] = [
    ("List the files in this folder.", {"list_files", "run_command"}),
    ("What does to_cents in invoice/money.py return?", {"read_file", "grep_files"}),
    ("Show me README.md.", {"read_file"}),
    ("Which files mention TODO?", {"grep_files", "run_command"}),
    ("Where is format_cents defined?", {"grep_files", "read_file"}),
    ("Run the tests.", {"run_command"}),
    ("What is in invoice/money.py?", {"read_file"}),
    ("Create a file notes.txt that says hello.", {"write_file"}),
    ("Search the code for 'import json'.", {"grep_files", "run_command"}),
    ("What does format_cents return for 1234?", {"read_file", "grep_files"}),
]
CLONE_WORKSPACE: list[tuple[str, set[str]]] = [
    ("List the files in this folder.", {"list_files", "run_command"}),
    ("What does strip_turn_context in src/cortana/prompts/__init__.py return?", {"read_file", "grep_files"}),
    ("Show me README.md.", {"read_file"}),
    ("Which files mention TODO?", {"grep_files", "run_command"}),
    ("Where is tool_text defined?", {"grep_files", "read_file"}),
    ("Run the tests.", {"run_command"}),
    ("What is in scripts/start?", {"read_file"}),
    ("Create a file notes.txt that says hello.", {"write_file"}),
    ("Search the code for 'import json'.", {"grep_files", "run_command"}),
    ("What does loose_name return for 'fs.read'?", {"read_file", "grep_files"}),
]
ROOT = Path(__file__).resolve().parents[1]
PROJECT = {
    "README.md": "# invoice\n\nSmall helpers for invoices: money amounts in cents, and their display.\n\n"
    "Run the tests with `python -m pytest`.\n",
    "invoice/__init__.py": '"""Invoices: amounts and their display."""\n',
    "invoice/money.py": '"""Money amounts, kept in integer cents."""\n\nimport json\n\n\n'
    "def to_cents(amount: str) -> int:\n"
    '    """Parse "12.34" into 1234 cents."""\n'
    '    whole, _, fraction = amount.partition(".")\n'
    '    return int(whole) * 100 + int((fraction + "00")[:2])\n\n\n'
    "def format_cents(cents: int) -> str:\n"
    '    """1234 -> "$12.34"."""\n'
    '    return f"${cents // 100}.{cents % 100:02d}"\n\n\n'
    "def dump(amounts: list[int]) -> str:\n"
    "    # TODO: a currency per amount\n"
    "    return json.dumps(amounts)\n",
    "tests/test_money.py": "from invoice.money import format_cents, to_cents\n\n\n"
    "def test_to_cents() -> None:\n"
    '    assert to_cents("12.34") == 1234\n\n\n'
    "def test_format_cents() -> None:\n"
    '    assert format_cents(1234) == "$12.34"\n',
    "NOTES.md": "TODO: rounding rules for refunds.\n",
}
CALL = re.compile(r"^\s*[✓✗] ([A-Za-z_][\w.\-]*)\(", re.M)


def make_project(folder: Path, repo: str, judge: bool) -> Path:
    """The repository a question is asked in, under ``folder``."""
    git = ["git", "-c", "user.name=n", "-c", "user.email=n@example.com"]
    if repo == "clone":
        project = folder / "cortana"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(project)], check=True)
    else:
        project = folder / "invoice"
        for name, text in PROJECT.items():
            path = project / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
            subprocess.run([*git, *command], cwd=project, check=True)
    if not judge:  # cortana.yml's agent.tool_judge (a clone's own cortana.yml, if any, is replaced)
        (project / "cortana.yml").write_text("agent:\n  tool_judge: false\n")
    return project


def ask(question: str, repo: str, judge: bool, model: str | None, timeout: float) -> dict[str, Any]:
    """One question in a fresh copy of the repository: the calls made, what was printed, the seconds."""
    cortana = Path(sys.executable).with_name("cortana")
    with tempfile.TemporaryDirectory(prefix="newcomer-") as parent:
        folder = make_project(Path(parent), repo, judge)
        command = [str(cortana), "--no-heartbeat", *(["--model", model] if model else []), question]
        started = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                cwd=folder,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
            )
            output, status = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as expired:  # what it printed by then comes as bytes
            output = b"".join(part or b"" for part in (expired.stdout, expired.stderr)).decode(errors="replace")
            status = -1
        seconds = round(time.perf_counter() - started, 1)
    return {"question": question, "calls": CALL.findall(output), "status": status, "seconds": seconds, "output": output}


def run(repo: str, judge: bool, model: str | None, timeout: float) -> dict[str, Any]:
    rows = []
    for question in GENERAL:
        row = ask(question, repo, judge, model, timeout) | {"kind": "general"}
        row["right"] = not row["calls"] and row["status"] == 0
        rows.append(row)
        print(f"general   {row['right']!s:5} {row['seconds']:6}s {row['calls']} {question}", file=sys.stderr)
    for question, accepted in CLONE_WORKSPACE if repo == "clone" else WORKSPACE:
        row = ask(question, repo, judge, model, timeout) | {"kind": "workspace", "accepted": sorted(accepted)}
        row["right"] = bool(row["calls"]) and row["calls"][0] in accepted
        rows.append(row)
        print(f"workspace {row['right']!s:5} {row['seconds']:6}s {row['calls']} {question}", file=sys.stderr)
    general = [r for r in rows if r["kind"] == "general"]
    workspace = [r for r in rows if r["kind"] == "workspace"]
    seconds = sorted(r["seconds"] for r in rows)
    return {
        "repo": repo,
        "judge": judge,
        "model": model or "default",
        "general: tool calls": sum(len(r["calls"]) for r in general),
        "general: answered without a tool": sum(r["right"] for r in general),
        "workspace: right first tool": sum(r["right"] for r in workspace),
        "workspace: no call": sum(not r["calls"] for r in workspace),
        "median s": seconds[len(seconds) // 2],
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--repo", choices=("small", "clone"), default="small")
    parser.add_argument("--judge", choices=("on", "off"), default="on")
    parser.add_argument("--model", help="the model (default: the assistant's default)")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    result = run(args.repo, args.judge == "on", args.model, args.timeout)
    keys = [k for k in result if k not in ("rows", "repo", "judge", "model")]
    table(["run", *keys], [[args.label, *(result[k] for k in keys)]])
    save(RESULTS / f"newcomer_{args.label}.json", result)


if __name__ == "__main__":
    main()
