"""The tool loop against the repair workflow on the coding tasks of ``bench/tasks/``, side by side, one run.

Each task (see ``bench/tasks/README.md``) runs twice per model, through the
real ``cortana`` command as ``agentic_tasks.py`` runs it (a temporary copy,
``--engine embedded --model MODEL --yes PROMPT``, stdin closed, a temporary
``HOME``), with the same seed and temperature:

- ``loop``: the user's cortana.yml says ``fix: {auto: false}``: the tool loop
  alone, as before the workflow;
- ``workflow``: the default: a request to change code in a folder with tests
  goes through the repair workflow (a question still goes to the loop).

Success is the task's own check (the tests, as they were, must pass; or the
answer holds what it must). Per arm, model and split: tasks finished, median
and worst wall time per task (the whole command: engine start included),
mean model calls. The development half is where every choice was made; the
held-out half is only reported. Results: ``bench/results/repair_MODEL.json``.

    python bench/repair.py                                   # both bundled models, both arms, every task
    python bench/repair.py --model qwen2.5-coder-1.5b --split held-out
    python bench/repair.py --arms workflow --tasks fix-invoice-vat,cli-reverse-flag
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from typing import Any

from agentic_tasks import SPLITS, load_tasks, run_task
from report import RESULTS, save, table

MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
ARMS = {
    "loop": "fix:\n  auto: false\nseed: {seed}\n",
    "workflow": "seed: {seed}\n",
}
"""Each arm's user cortana.yml (the workspace has none)."""
FIX_SUMMARY = re.compile(
    r"fix: (?P<model_calls>\d+) model calls · (?P<samples>\d+) samples · (?P<candidates>\d+) patches"
)


def run_arm(
    model: str, arm: str, tasks: list[Any], timeout: float, seed: int, threads: int | None
) -> list[dict[str, Any]]:
    rows = []
    for task in tasks:
        row = run_task(task, model, timeout, threads=threads, user_config=ARMS[arm].format(seed=seed))
        found = FIX_SUMMARY.search(row.get("stderr_tail", ""))
        row["arm"] = arm
        row["through_workflow"] = found is not None
        if found is not None:
            loop_calls = row.get("model_calls") or 0  # a fallback to the loop prints its own summary too
            row["model_calls"] = int(found["model_calls"]) + (
                loop_calls if row.get("counted_by") == "summary line" else 0
            )
            row["samples"] = int(found["samples"])
            row["candidates"] = int(found["candidates"])
        print(f"  {model} {arm:8} {task.id:28} {task.split:8} {'ok  ' if row['ok'] else 'FAIL'} "
              f"{row['wall_seconds']:6.1f}s  {row['reason'][:90]}", flush=True)  # fmt: skip
        rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [row["wall_seconds"] for row in rows]
    calls = [row["model_calls"] for row in rows if row.get("model_calls") is not None]
    return {
        "finished": sum(row["ok"] for row in rows),
        "tasks": len(rows),
        "median_wall_seconds": round(statistics.median(walls), 1) if walls else None,
        "worst_wall_seconds": round(max(walls), 1) if walls else None,
        "mean_model_calls": round(statistics.mean(calls), 1) if calls else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=",".join(MODELS), help="comma-separated bundled models")
    parser.add_argument("--arms", default="loop,workflow")
    parser.add_argument("--split", choices=SPLITS, help="only the development or the held-out tasks")
    parser.add_argument("--tasks", help="comma-separated task ids")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one task may take (the command)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, help="engine threads (default: the engine's)")
    args = parser.parse_args()
    tasks = load_tasks(args.tasks.split(",") if args.tasks else None)
    if args.split:
        tasks = [task for task in tasks if task.split == args.split]
    for model in [name.strip() for name in args.model.split(",") if name.strip()]:
        started = time.perf_counter()
        rows: list[dict[str, Any]] = []
        for arm in args.arms.split(","):
            rows += run_arm(model, arm, tasks, args.timeout, args.seed, args.threads)
        summaries = {
            f"{arm}/{split}": summary([r for r in rows if r["arm"] == arm and r["split"] == split])
            for arm in args.arms.split(",")
            for split in SPLITS
            if any(r["arm"] == arm and r["split"] == split for r in rows)
        }
        table(
            ["arm / split", "finished", "median s", "worst s", "model calls"],
            [
                [key, f"{s['finished']}/{s['tasks']}", s["median_wall_seconds"], s["worst_wall_seconds"],
                 s["mean_model_calls"]]
                for key, s in summaries.items()
            ],
        )  # fmt: skip
        kept = [{**row, "stderr_tail": row["stderr_tail"][-800:]} for row in rows]
        results = {"model": model, "seed": args.seed, "seconds": round(time.perf_counter() - started, 1)}
        save(RESULTS / f"repair_{model}.json", {**results, "summaries": summaries, "rows": kept})


if __name__ == "__main__":
    main()
