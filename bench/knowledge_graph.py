"""The code graph: build and rebuild time, per-turn lookup latency, and the memory a loaded graph holds.

Two codebases: this repository (its tracked files) and the source of ``rich``
(38k lines of Python, installed from PyPI as one of Cortana's own
dependencies), each copied to a temporary folder so nothing here is touched.

- **first build**: ``graphify update .`` with no graph and no cache;
- **incremental rebuild**: the same after one function is added to one file;
- **per-turn lookup**: ``KnowledgeGraph.context`` for prompts that name code
  (sampled from the graph: functions, classes, methods, files), for prompts
  naming code the graph does not have, and for prompts that name nothing;
  p50/p95 in milliseconds, and for the plain prompts the work done
  (processes started, graph loads: both must be zero);
- **a process per lookup**, side by side: ``graphify explain NAME``, what a
  turn would cost if every lookup spawned the CLI instead of reading the
  graph already in memory;
- **memory**: what the loaded index keeps (tracemalloc), next to graph.json's size.

    python bench/knowledge_graph.py [--lookups 300] [--spawns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from cortana.knowledge import GraphIndex, KnowledgeGraph
from cortana.knowledge.graphify import find_graphify, graph_json
from cortana.messages import ThreadRef
from report import RESULTS, save, table

REPOSITORY = Path(__file__).resolve().parents[1]
PLAIN = [
    "hi",
    "Thanks, that helps.",
    "Can you run the tests and tell me what failed?",
    "What should I work on next in this project?",
    "Summarize what we did today.",
    "Please register me for the lookup service.",
    "Is there anything risky in the last change?",
    "Write a short commit message for it.",
]
SHAPES = ["What calls `{}`?", "Explain {} please", "What depends on {}?", "Where is {} used?", "Show me {}"]


def copy_repository(target: Path) -> Path:
    """This repository's tracked files (no venvs, no results) in ``target``."""
    listed = subprocess.run(["git", "ls-files"], cwd=REPOSITORY, capture_output=True, text=True, check=True)
    for name in listed.stdout.splitlines():
        source = REPOSITORY / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def copy_rich(target: Path) -> Path:
    import rich

    shutil.copytree(Path(rich.__file__).parent, target / "rich", ignore=shutil.ignore_patterns("__pycache__"))
    return target


def lines_of_code(root: Path) -> int:
    return sum(len(path.read_bytes().splitlines()) for path in root.rglob("*.py"))


def update(graphify: str, root: Path) -> float:
    started = time.perf_counter()
    subprocess.run([graphify, "update", "."], cwd=root, check=True, capture_output=True, timeout=1800)
    return time.perf_counter() - started


def named_prompts(index: GraphIndex, count: int, rng: random.Random) -> list[str]:
    """Prompts naming real code of the graph, in the shapes a user writes them."""
    names = [node.name for node in index.nodes if node.is_code and node.kind in ("class", "function", "method")]
    files = [node.name for node in index.nodes if node.kind == "file"]
    prompts = []
    for number in range(count):
        name = rng.choice(files) if number % 5 == 4 else rng.choice(names)
        shape = rng.choice(SHAPES)
        prompts.append(shape.format(f"`{name}`" if "`" not in shape and not _named_by_shape(name) else name))
    return prompts


def _named_by_shape(name: str) -> bool:
    return "_" in name or "." in name or any(a.islower() and b.isupper() for a, b in itertools.pairwise(name))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def lookups(root: Path, prompts: list[str]) -> tuple[list[float], int]:
    """Milliseconds per ``context`` call on a loaded graph, and how many blocks were not empty."""
    graph = KnowledgeGraph(root, auto_rebuild=False)
    graph._refreshed = True  # measure lookups, not the once-per-session refresh
    await graph.ensure()
    thread = ThreadRef(thread_id="bench")
    times, found = [], 0
    for prompt in prompts:
        started = time.perf_counter()
        block = await graph.context(thread, prompt)
        times.append((time.perf_counter() - started) * 1000)
        found += block is not None
    return times, found


async def plain_work(root: Path, rounds: int) -> dict[str, Any]:
    """A fresh graph asked only plain prompts: time per prompt, processes started, graphs loaded."""
    graph = KnowledgeGraph(root, auto_rebuild=False)
    spawned: list[object] = []
    real = asyncio.create_subprocess_exec

    async def counting(*args: Any, **kwargs: Any) -> Any:
        spawned.append(args)
        return await real(*args, **kwargs)

    asyncio.create_subprocess_exec = counting  # type: ignore[assignment]
    try:
        thread = ThreadRef(thread_id="bench")
        times = []
        for _ in range(rounds):
            for prompt in PLAIN:
                started = time.perf_counter()
                assert await graph.context(thread, prompt) is None
                times.append((time.perf_counter() - started) * 1000)
    finally:
        asyncio.create_subprocess_exec = real  # type: ignore[assignment]
    return {"times": times, "processes": len(spawned), "graph_loaded": graph.index is not None}


def retained_memory(path: Path) -> tuple[int, int]:
    """Bytes the loaded index keeps, and the peak while loading."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    index = GraphIndex.load(path)
    gc.collect()
    after = tracemalloc.take_snapshot()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    del index
    return kept, peak


def spawned_explain(graphify: str, root: Path, names: list[str]) -> list[float]:
    times = []
    for name in names:
        started = time.perf_counter()
        subprocess.run([graphify, "explain", name], cwd=root, capture_output=True, timeout=120)
        times.append((time.perf_counter() - started) * 1000)
    return times


def measure(name: str, root: Path, graphify: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    loc = lines_of_code(root)
    first = update(graphify, root)
    target = sorted(root.rglob("*.py"), key=lambda p: p.stat().st_size)[-1]
    target.write_text(target.read_text() + "\n\ndef bench_added_function():\n    return 42\n")
    incremental = update(graphify, root)
    index = GraphIndex.load(graph_json(root))
    assert index.find("bench_added_function"), "the incremental rebuild found the new function"
    prompts = named_prompts(index, args.lookups, rng)
    named_times, found = asyncio.run(lookups(root, prompts))
    unknown = [f"Where is `{name}Zq` defined?" for name in (p.split("`")[1] for p in prompts if "`" in p)]
    unknown_times, unknown_found = asyncio.run(lookups(root, unknown))
    assert unknown_found == 0, "names that are not in the graph add no block"
    plain = asyncio.run(plain_work(root, max(1, args.lookups // len(PLAIN))))
    kept, peak = retained_memory(graph_json(root))
    asked = [prompt.split("`")[1] if "`" in prompt else prompt.split()[-1] for prompt in prompts]
    explain = spawned_explain(graphify, root, asked[: args.spawns])
    stats = index.stats()
    return {
        "codebase": name,
        "python_lines": loc,
        **stats,
        "graph_json_bytes": graph_json(root).stat().st_size,
        "first_build_s": round(first, 2),
        "incremental_rebuild_s": round(incremental, 2),
        "named_lookup_ms": {"p50": percentile(named_times, 0.5), "p95": percentile(named_times, 0.95)},
        "named_found": f"{found}/{len(prompts)}",
        "unknown_name_ms": {"p50": percentile(unknown_times, 0.5), "p95": percentile(unknown_times, 0.95)},
        "plain_ms": {"p50": percentile(plain["times"], 0.5), "p95": percentile(plain["times"], 0.95)},
        "plain_processes": plain["processes"],
        "plain_graph_loaded": plain["graph_loaded"],
        "index_kept_bytes": kept,
        "index_peak_bytes": peak,
        "explain_process_ms": {"p50": statistics.median(explain), "min": min(explain)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument("--spawns", type=int, default=10)
    parser.add_argument("--json", type=Path, default=RESULTS / "knowledge_graph.json")
    args = parser.parse_args()
    graphify = find_graphify()
    if graphify is None:
        sys.exit("graphify is not installed: scripts/bench installs it (cortana[graph])")
    results = []
    with tempfile.TemporaryDirectory() as temporary:
        for name, copy in (("cortana (this repository)", copy_repository), ("rich (PyPI source)", copy_rich)):
            root = Path(temporary) / name.split()[0]
            root.mkdir()
            results.append(measure(name, copy(root), graphify, args))
    rows = [
        [
            r["codebase"],
            r["python_lines"],
            r["nodes"],
            r["edges"],
            r["communities"],
            r["first_build_s"],
            r["incremental_rebuild_s"],
            r["named_lookup_ms"]["p50"],
            r["named_lookup_ms"]["p95"],
            r["unknown_name_ms"]["p95"],
            r["plain_ms"]["p95"],
            r["plain_processes"],
            round(r["index_kept_bytes"] / 2**20, 1),
            r["explain_process_ms"]["p50"],
        ]
        for r in results
    ]
    table(
        [
            "codebase",
            "py lines",
            "nodes",
            "edges",
            "comms",
            "build s",
            "rebuild s",
            "lookup p50 ms",
            "lookup p95 ms",
            "unknown p95 ms",
            "plain p95 ms",
            "plain procs",
            "index MiB",
            "spawn explain ms",
        ],
        rows,
    )
    save(args.json, {"lookups": args.lookups, "results": results})


if __name__ == "__main__":
    main()
