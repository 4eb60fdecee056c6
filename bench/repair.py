"""The fix workflow on the coding tasks of ``bench/tasks/``: today's against another checkout's, side by side, one run.

Each task (see ``bench/tasks/README.md``) runs in a fresh copy of its repository, on one bundled model, with the
same seed:

- ``workflow``: this checkout, through the library, as every front end reaches it: a new embedded engine (its
  start counted), ``Assistant(folder)`` with writes allowed (``--yes``), and ``assistant.fix(prompt)`` when the
  assistant routes the prompt to the workflow (a question goes to ``assistant.ask``, the tool loop);
- ``then MODEL`` (with ``--last-round MODEL``): the same, with ``fix.last_round: MODEL``: the last round goes to
  a larger model (the plain ``workflow`` arm has it off, so that it measures one model);
- ``baseline`` (with ``--baseline SRC``): another checkout's ``cortana --yes PROMPT`` (``PYTHONPATH=SRC``), the
  command it had: the workflow as it was, for the same tasks in the same run.

Success is the task's own check (the tests, as they were, must pass; or the answer holds what it must). Per arm,
model and split: tasks finished, median and worst wall time per task (engine start included), mean model calls
and, for the workflow, samples per minute. The development half is where every choice was made; the held-out
half is only reported. Results: ``bench/results/repair_MODEL.json``; a fix's row keeps its progress lines (seconds
into the fix, then the step), to see where its time went.

    python bench/repair.py --model qwen2.5-coder-1.5b --split held-out --baseline /tmp/main/src
    python bench/repair.py --model qwen2.5-coder-0.5b --split held-out --last-round qwen2.5-coder-1.5b
    python bench/repair.py --model qwen2.5-coder-0.5b --tasks fix-discount,fix-page-count
    python bench/repair.py --model qwen2.5-coder-0.5b --split held-out --last-round qwen2.5-coder-1.5b --no-plain

``--set real`` runs the single-token bugs in real libraries of ``bench/real_projects/`` instead (``real_tasks.py``:
the bugged copy is made there, and success is the project's whole suite passing, its tests untouched);
``--no-model`` adds an arm whose model answers nothing, so that only what needs no model (the small changes, a
rename) can fix: what the workflow does before a sample pays off.

    python bench/repair.py --set real --model qwen2.5-coder-1.5b --split held-out
    python bench/repair.py --set real --model qwen2.5-coder-1.5b --split dev --no-model --no-plain

``--fix KEY=VALUE`` sets one of cortana.yml's ``fix:`` settings for the arms run through the library (an ablation:
``--fix mutants=0 --fix rewrite_lines=400``, the samples alone, each function written whole).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from agentic_tasks import SPLITS, Task, Verdict, check_workspace, copy_repo, load_tasks, run_task
from real_tasks import RealTask, check, load_real_tasks, materialize
from report import RESULTS, save, table

MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
FIX_SUMMARY = re.compile(
    r"fix: (?P<model_calls>\d+) model calls · (?P<samples>\d+) samples · (?P<candidates>\d+) patches"
)


def prepared(task: Task | RealTask, destination: Path) -> Path:
    """The task's workspace, made at ``destination``: a copy of its repository (the real set: with the bug)."""
    return materialize(task, destination) if isinstance(task, RealTask) else copy_repo(task, destination)


def verdict(task: Task | RealTask, workspace: Path, answer: str) -> Verdict:
    """Whether the task is done: its own check."""
    return check(task, workspace) if isinstance(task, RealTask) else check_workspace(task, workspace, answer)


async def run_library_task(
    task: Task | RealTask,
    model: str,
    timeout: float,
    seed: int,
    last_round: str = "off",
    *,
    silent: bool = False,
    fix: dict[str, Any] | None = None,
    graph: bool = False,
) -> dict[str, Any]:
    """One task through ``Assistant.fix`` (or ``ask``) on a new engine (``silent``: a model that answers nothing,
    no engine; ``fix``: more of cortana.yml's ``fix:`` settings; ``graph``: the code graph on, as a user has it in
    a session opened a moment before, built or loaded before the fix, its seconds counted apart); the row of what
    happened."""
    from cortana import Assistant, Settings
    from cortana.models.embedded import EmbeddedClient
    from cortana.testing import ScriptedModel

    temporary = Path(tempfile.mkdtemp(prefix=f"cortana-task-{task.id}-"))
    workspace = prepared(task, temporary / "work")
    settings = Settings(seed=seed, permissions={"allow": ["*"]}, memory={"recall": False},
                        learning={"enabled": False}, graphify={"enabled": graph},
                        fix={**(fix or {}), "last_round": last_round})  # fmt: skip
    started = time.perf_counter()
    arm = "no model" if silent else "workflow" if last_round == "off" else f"then {last_round}"
    row: dict[str, Any] = {"id": task.id, "kind": task.kind, "split": task.split, "arm": arm}
    answer = ""
    engine: Any = None
    try:
        async with asyncio.timeout(timeout):
            engine = ScriptedModel(["" for _ in range(400)]) if silent else await EmbeddedClient.start(model)
            async with Assistant(workspace, settings, client=engine, heartbeat=False) as assistant:
                if graph and assistant.graph is not None:  # as in a session opened a moment ago: the graph is in
                    building = time.perf_counter()
                    index = await assistant.graph.ensure()
                    row.update(graph_seconds=round(time.perf_counter() - building, 1),
                               graph_nodes=len(index.nodes) if index is not None else None)  # fmt: skip
                if assistant.wants_fix(task.prompt):
                    steps: list[str] = []
                    outcome = await assistant.fix(
                        task.prompt, on_progress=lambda step: steps.append(f"{step.seconds:6.1f} {step.message}")
                    )
                    result = outcome.result
                    answer = outcome.answer
                    row.update(through_workflow=True, status=str(result.status), model_calls=result.model_calls,
                               samples=result.samples, candidates=result.candidates,
                               samples_per_minute=round(result.samples_per_minute, 1),
                               fix_seconds=round(result.seconds, 1), origin=result.origin,
                               last_round_on=result.stronger, progress=steps[-80:])  # fmt: skip
                else:
                    run = await assistant.ask(task.prompt)
                    answer = str(run.output)
                    row.update(through_workflow=False, model_calls=run.metrics.model_calls)
    except TimeoutError:
        row["timed_out"] = True
    except Exception as error:  # a fix that raised (an engine that refused the prompt) is a failed task, not the end
        row["error"] = f"{type(error).__name__}: {error}"[:300]
    finally:
        if engine is not None:
            await engine.aclose()
    wall = time.perf_counter() - started
    judged = verdict(task, workspace, answer)
    row.update(ok=judged.ok, reason=judged.reason, wall_seconds=round(wall, 2), answer=answer[-2000:])
    shutil.rmtree(temporary, ignore_errors=True)
    return row


def run_baseline_task(task: Task, model: str, timeout: float, seed: int, source: Path) -> dict[str, Any]:
    """One task through another checkout's command (``PYTHONPATH=source``)."""
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(source) + (os.pathsep + previous if previous else "")
    try:
        row = run_task(task, model, timeout, user_config=f"seed: {seed}\n")
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous
    found = FIX_SUMMARY.search(row.get("stderr_tail", ""))
    row.update(arm="baseline", through_workflow=found is not None)
    if found is not None:
        row.update(model_calls=int(found["model_calls"]), samples=int(found["samples"]),
                   candidates=int(found["candidates"]))  # fmt: skip
    return row


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [row["wall_seconds"] for row in rows]
    calls = [row["model_calls"] for row in rows if row.get("model_calls") is not None]
    rates = [row["samples_per_minute"] for row in rows if row.get("samples_per_minute")]
    return {
        "finished": sum(row["ok"] for row in rows),
        "tasks": len(rows),
        "median_wall_seconds": round(statistics.median(walls), 1) if walls else None,
        "worst_wall_seconds": round(max(walls), 1) if walls else None,
        "mean_model_calls": round(statistics.mean(calls), 1) if calls else None,
        "median_samples_per_minute": round(statistics.median(rates), 1) if rates else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=",".join(MODELS), help="comma-separated bundled models")
    parser.add_argument("--split", choices=SPLITS, help="only the development or the held-out tasks")
    parser.add_argument("--tasks", help="comma-separated task ids")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one task may take")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="another checkout's src folder, run side by side")
    parser.add_argument("--last-round", help="also run the workflow with its last round on this larger model")
    parser.add_argument("--label", default="", help="a suffix for the results file")
    parser.add_argument("--no-plain", action="store_true", help="leave out the plain workflow arm (one model)")
    parser.add_argument("--set", choices=("three-file", "real"), default="three-file", help="which tasks")
    parser.add_argument("--no-model", action="store_true", help="also an arm whose model answers nothing")
    parser.add_argument("--graph", action="store_true", help="the code graph on (graphify), as a user has it")
    parser.add_argument(
        "--fix", action="append", default=[], metavar="KEY=VALUE",
        help="a cortana.yml fix: setting for every arm run through the library (fix.mutants=0: --fix mutants=0)",
    )  # fmt: skip
    args = parser.parse_args()
    fix = {key: yaml.safe_load(value) for key, _, value in (item.partition("=") for item in args.fix)}
    more: dict[str, Any] = {"fix": fix, "graph": args.graph}
    ids = args.tasks.split(",") if args.tasks else None
    tasks: list[Task | RealTask] = [*(load_real_tasks(ids) if args.set == "real" else load_tasks(ids))]
    if args.split:
        tasks = [task for task in tasks if task.split == args.split]
    for model in [name.strip() for name in args.model.split(",") if name.strip()]:
        started = time.perf_counter()
        rows: list[dict[str, Any]] = []
        for task in tasks:  # the arms alternate task by task: a slow moment of the machine costs both alike
            arms: list[tuple[str, Path | None]] = [] if args.no_plain else [("workflow", None)]
            arms += [(f"then {args.last_round}", None)] if args.last_round else []
            arms += [("baseline", args.baseline)] if args.baseline else []
            arms += [("no model", None)] if args.no_model else []
            for arm, source in arms:
                if source is not None:
                    assert isinstance(task, Task), "the baseline arm runs the three-file tasks"
                    row = run_baseline_task(task, model, args.timeout, args.seed, source)
                elif arm == "no model":
                    quiet = run_library_task(task, model, args.timeout, args.seed, silent=True, **more)
                    row = asyncio.run(quiet)
                else:
                    last = args.last_round if arm.startswith("then ") else "off"
                    row = asyncio.run(run_library_task(task, model, args.timeout, args.seed, last, **more))
                rows.append(row)
                print(f"  {model} {arm[:8]:8} {task.id:28} {task.split:8} {'ok  ' if row['ok'] else 'FAIL'} "
                      f"{row['wall_seconds']:6.1f}s  {row.get('samples', '-')} samples  {row['reason'][:80]}",
                      flush=True)  # fmt: skip
        arms_seen = list(dict.fromkeys(row["arm"] for row in rows))
        summaries = {
            f"{arm}/{split}": summary([r for r in rows if r["arm"] == arm and r["split"] == split])
            for arm in arms_seen
            for split in SPLITS
            if any(r["arm"] == arm and r["split"] == split for r in rows)
        }
        table(
            ["arm / split", "finished", "median s", "worst s", "model calls", "samples/min"],
            [[key, f"{s['finished']}/{s['tasks']}", s["median_wall_seconds"], s["worst_wall_seconds"],
              s["mean_model_calls"], s["median_samples_per_minute"]] for key, s in summaries.items()],
        )  # fmt: skip
        kept = [{key: value for key, value in row.items() if key != "stderr_tail"} for row in rows]
        results = {"model": model, "seed": args.seed, **more, "seconds": round(time.perf_counter() - started, 1)}
        kind = "_real" if args.set == "real" else ""
        name = f"repair{kind}_{model}{'_' + args.label if args.label else ''}.json"
        save(RESULTS / name, {**results, "summaries": summaries, "rows": kept})


if __name__ == "__main__":
    main()
