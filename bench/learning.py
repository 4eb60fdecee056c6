"""Does experience make the second run of a task cheaper? Measured on the embedded engine.

Each task of ``bench/learning_tasks/tasks.py`` (a fixture repository, tasks that take
three or more tool calls) runs three times, each in a fresh copy of the repository:

1. the first wording, experience on (nothing learned yet: this is the baseline run,
   and it is distilled into a recipe afterwards);
2. the second wording, experience on (the recipe can be shown);
3. the second wording, experience off (the control: is the second wording simply easier?).

One experience file serves every task in order, so a later task may be shown an
earlier task's recipe, as a user's would be. Each run is ``cortana.Assistant``, the
assistant the ``cortana`` command runs (its instructions, the built-in tools behind the
workspace gate, the files a prompt names, the lines its words are on, retry of failed
calls, the command's generation settings), in process, on one engine, so the engine's
prompt cache serves all runs alike; the code graph, the local time, recall and the
heartbeat are off, so the arms differ only by experience. Answers are checked by the
task's script, never by eye.

Tasks are split into a development and a held-out half by a hash of their name;
the distilling prompt and the recipe's shape are decided on the development half.

    python bench/learning.py [--model qwen2.5-coder-1.5b] [--threads 2] [--only NAME,...] [--split dev|held-out]
                             [--context on|off]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cortana import Assistant, Experience
from cortana.config import Settings
from cortana.models.base import ModelClient
from cortana.models.factory import create_model_client
from learning_tasks.tasks import TASKS, LearningTask

RESULTS = Path(__file__).parent / "results"


def split_of(task: LearningTask) -> str:
    """``dev`` or ``held-out``, fixed by a hash of the task's name."""
    return "dev" if hashlib.sha256(task.name.encode()).digest()[0] % 2 == 0 else "held-out"


def fresh_copy(task: LearningTask, root: Path, label: str) -> Path:
    """A fresh copy of the fixture repository for one run, prepared by the task's setup."""
    destination = root / f"{task.name}-{label}"
    shutil.copytree(Path(__file__).parent / "learning_tasks" / "repo", destination)
    if task.setup is not None:
        task.setup(destination)
    return destination


def assistant_for(client: ModelClient, workspace: Path, experience: Experience | None, context: bool) -> Assistant:
    """The assistant the ``cortana`` command runs in ``workspace``, with the bench's own engine and experience.

    What would make the two arms differ by chance is off: the code graph, the local time and recall (each copy
    is a fresh folder with nothing to recall), the heartbeat. Every tool call is allowed (``--yes``); the seed
    is fixed. ``context=False`` (``--context off``): without the files a prompt names and the lines its words
    are on, so the model has to search (the 1.5B model answers from those lines with 0-1 tool calls, which
    leaves nothing to distill).
    """
    settings = Settings()
    settings.seed = 7
    settings.graphify.enabled = False
    settings.agent.local_time = False
    settings.memory.recall = False
    settings.learning.enabled = experience is not None
    if not context:
        settings.agent.named_files = 0
        settings.agent.prompt_search = 0
    return Assistant(
        workspace,
        settings,
        client=client,
        keep_client=True,
        experience=experience,
        allow_all=True,
        heartbeat=False,
    )


async def one_run(
    client: ModelClient,
    task: LearningTask,
    prompt: str,
    workspace: Path,
    experience: Experience | None,
    context: bool,
) -> dict[str, Any]:
    """Run ``prompt`` in ``workspace`` and check it; with experience, wait for the distilling after it."""
    if experience is not None:
        experience.workspace = workspace
    async with assistant_for(client, workspace, experience, context) as assistant:
        started = time.perf_counter()
        error = None
        answer = ""
        metrics: dict[str, Any] = {}
        try:
            result = await assistant.ask(prompt)
            answer = result.output
            metrics = result.metrics.model_dump()
        except Exception as exc:  # a run that fails counts as wrong, with its reason
            error = f"{type(exc).__name__}: {exc}"
        wall = time.perf_counter() - started
        shown: list[int] = []
        distilled: list[int] = []
        distill_seconds = 0.0
        if experience is not None:
            before = time.perf_counter()
            await (await assistant.agent()).background.wait()
            distill_seconds = time.perf_counter() - before
            last = await experience.last_run()
            if last is not None:
                shown = await experience.shown_to(last[0])
                distilled = [r for r in await experience.rated_recipes(last[0]) if r not in shown]
    right = error is None and await asyncio.to_thread(task.check, answer, workspace)
    return {
        "prompt": prompt,
        "right": right,
        "error": error,
        "answer": answer[:600],
        "tool_calls": metrics.get("tool_calls"),
        "tool_errors": metrics.get("tool_errors"),
        "model_calls": metrics.get("model_calls"),
        "seconds": round(metrics.get("elapsed", wall), 1),
        "prompt_tokens": metrics.get("prompt_tokens"),
        "shown": shown,
        "distilled": distilled,
        "distill_seconds": round(distill_seconds, 1),
    }


async def run_task(
    client: ModelClient, task: LearningTask, experience: Experience, root: Path, context: bool
) -> dict[str, Any]:
    """The three runs of one task."""
    first = await one_run(client, task, task.prompts[0], fresh_copy(task, root, "first"), experience, context)
    print(f"  first:        {_row(first)}", flush=True)
    second = await one_run(client, task, task.prompts[1], fresh_copy(task, root, "second"), experience, context)
    print(f"  second (on):  {_row(second)}", flush=True)
    control = await one_run(client, task, task.prompts[1], fresh_copy(task, root, "control"), None, context)
    print(f"  second (off): {_row(control)}", flush=True)
    return {"task": task.name, "kind": task.kind, "split": split_of(task), "first": first, "on": second, "off": control}


def _row(run: dict[str, Any]) -> str:
    mark = "right" if run["right"] else "WRONG"
    extra = f" shown recipe {run['shown']}" if run["shown"] else ""
    extra += f", distilled into {run['distilled']}" if run["distilled"] else ""
    return f"{mark} {run['tool_calls']} tool calls, {run['model_calls']} model calls, {run['seconds']} s{extra}"


def summarize(rows: list[dict[str, Any]], split: str) -> str:
    """A Markdown table and the two headline figures for ``rows`` of one split."""
    rows = [r for r in rows if split == "all" or r["split"] == split]
    if not rows:
        return ""
    lines = [
        f"### {split} ({len(rows)} tasks)",
        "",
        "| task | first: calls / model / s / right | second, experience on | second, experience off |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = [
            f"{x['tool_calls']} / {x['model_calls']} / {x['seconds']} / {'yes' if x['right'] else 'no'}"
            for x in (r["first"], r["on"], r["off"])
        ]
        lines.append(f"| {r['task']} | " + " | ".join(cells) + " |")
    for label in ("on", "off"):
        fewer = sum(1 for r in rows if (r[label]["tool_calls"] or 0) < (r["first"]["tool_calls"] or 0))
        worse = sum(1 for r in rows if r["first"]["right"] and not r[label]["right"])
        right = sum(1 for r in rows if r[label]["right"])
        calls = [r[label]["tool_calls"] or 0 for r in rows]
        seconds = [r[label]["seconds"] for r in rows]
        lines.append("")
        lines.append(
            f"- experience {label}: fewer tool calls on {fewer}/{len(rows)} tasks; right {right}/{len(rows)}; "
            f"right before and wrong now: {worse}; mean tool calls {sum(calls) / len(calls):.1f}, "
            f"mean {sum(seconds) / len(seconds):.0f} s"
        )
    first_calls = [r["first"]["tool_calls"] or 0 for r in rows]
    first_right = sum(1 for r in rows if r["first"]["right"])
    lines.append(
        f"- first runs: right {first_right}/{len(rows)}, mean tool calls {sum(first_calls) / len(first_calls):.1f}"
    )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", help="comma-separated task names")
    parser.add_argument("--split", choices=["dev", "held-out", "all"], default="all")
    parser.add_argument("--out", type=Path, help="where to write the JSON results")
    parser.add_argument("--context", choices=["on", "off"], default="on", help="the command's per-turn context")
    args = parser.parse_args()
    tasks = [t for t in TASKS if args.split == "all" or split_of(t) == args.split]
    if args.only:
        wanted = set(args.only.split(","))
        tasks = [t for t in tasks if t.name in wanted]
    client = await create_model_client("embedded", model=args.model, threads=args.threads, settings=Settings())
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="cortana-learning-") as scratch:
            root = Path(scratch)
            experience = Experience(root / "experience.db", embedder=None, workspace=root)
            for task in tasks:
                print(f"{task.name} ({split_of(task)}, {task.kind})", flush=True)
                rows.append(await run_task(client, task, experience, root, args.context == "on"))
            recipes = await experience.recipes()
            experience.close()
    finally:
        await client.aclose()
    out = args.out or RESULTS / f"learning-{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "model": args.model,
                "context": args.context,
                "rows": rows,
                "recipes": [
                    {"id": i.id, "task": i.recipe.task, "steps": i.recipe.steps, "avoid": i.recipe.avoid}
                    for i in recipes
                ],
            },
            indent=2,
        )
    )
    print(f"\n## {args.model}, context {args.context}\n")
    for split in ("dev", "held-out", "all"):
        text = summarize(rows, split)
        if text:
            print(text + "\n")
    print(f"results: {out}")


if __name__ == "__main__":
    asyncio.run(main())
