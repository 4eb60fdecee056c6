"""Agent instantiation time and memory, by agno's published method, for every framework.

agno's ``PerfEval`` (agno/eval/performance.py), reproduced here so every
framework is measured by the same code: 10 warm-ups; then 1,000 timed calls
of a function that builds one agent (model object, one tool, instructions);
then, for memory, 1,000 calls each run as ``gc.collect()``,
``tracemalloc.start()``, build, peak of ``tracemalloc.get_traced_memory()``,
``tracemalloc.stop()``, minus the same measured around an empty function.
Reported: mean and median time, mean memory (agno reports the mean of both).

The model object points at a local OpenAI-compatible address; nothing is
sent (building an agent makes no request in any of these frameworks). The
tool is decorated once at import, as in agno's comparisons. Goal: Cortana at
or below agno in time and memory.

    python bench/instantiation.py [--runs 1000] [--frameworks cortana agno ...]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frameworks import FACTORIES, available
from report import RESULTS, save, table


def empty() -> None:
    return None


def peak_bytes(build: Callable[[], Any]) -> int:
    """agno's ``_measure_memory``: the tracemalloc peak of one call, started after a collection."""
    gc.collect()
    tracemalloc.start()
    build()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def measure(build: Callable[[], Any], runs: int) -> dict[str, float]:
    for _ in range(10):
        build()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        build()
        times.append(time.perf_counter() - started)
    baseline = statistics.mean(peak_bytes(empty) for _ in range(3))
    memory = [max(0.0, peak_bytes(build) - baseline) for _ in range(runs)]
    return {
        "time_mean_us": statistics.mean(times) * 1e6,
        "time_median_us": statistics.median(times) * 1e6,
        "memory_mean_kib": statistics.mean(memory) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--frameworks", nargs="+", choices=list(FACTORIES), default=list(FACTORIES))
    parser.add_argument("--json", type=Path, default=RESULTS / "instantiation.json")
    args = parser.parse_args()
    frameworks, missing = available(args.frameworks)
    results = {}
    for framework in frameworks:
        print(f"measuring {framework.name} {framework.version}...", file=sys.stderr, flush=True)
        results[framework.name] = measure(framework.instantiate, args.runs)
    ours = results.get("cortana")
    rows = []
    for name, row in results.items():
        if ours:
            row["time_vs_cortana"] = row["time_mean_us"] / ours["time_mean_us"]
            row["memory_vs_cortana"] = row["memory_mean_kib"] / ours["memory_mean_kib"]
        rows.append(
            [
                name,
                row["time_mean_us"],
                row["time_median_us"],
                row["memory_mean_kib"],
                f"{row.get('time_vs_cortana', 0):.1f}x",
                f"{row.get('memory_vs_cortana', 0):.1f}x",
            ]
        )
    print(f"building one agent with one tool, {args.runs} runs after 10 warm-ups (agno's PerfEval method)")
    table(
        ["framework", "time µs (mean)", "time µs (median)", "memory KiB (mean)", "time / cortana", "memory / cortana"],
        rows,
    )
    report: dict[str, Any] = {
        "runs": args.runs,
        "method": "agno PerfEval: 10 warm-ups; mean of N timed builds; "
        "mean tracemalloc peak after gc.collect minus an empty baseline",
        "frameworks": {f.name: f.version for f in frameworks},
        "missing": missing,
        "results": results,
    }
    if ours and "agno" in results:
        agno = results["agno"]
        met = ours["time_mean_us"] <= agno["time_mean_us"] and ours["memory_mean_kib"] <= agno["memory_mean_kib"]
        report["goal"] = {"met": met, "cortana": ours, "agno": agno}
        print(f"goal (cortana at or below agno in time and memory): {'met' if met else 'NOT met'}")
    if missing:
        print(f"not installed (pip install -r bench/requirements.txt): {', '.join(missing)}")
    save(args.json, report)


if __name__ == "__main__":
    main()
