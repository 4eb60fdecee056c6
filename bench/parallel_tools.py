"""Parallel tools: four 200 ms tool calls in one model response, wall time per framework.

The scripted server answers the first call with four ``slow_lookup`` calls at
once and the second with the answer. Each tool takes 200 ms, as a blocking
function (``time.sleep``: a typical sync tool, e.g. one using ``requests``)
and, where the framework takes them, as a coroutine (``asyncio.sleep``). A
framework that runs the calls concurrently finishes near 200 ms plus its step
overhead; one that runs them in turn needs 800 ms or more. Runs interleave
across frameworks; reported: the median wall time of a whole run.

    python bench/parallel_tools.py [--runs 15] [--frameworks cortana agno ...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from frameworks import FACTORIES, PARALLEL_PROMPT, TOOL_SECONDS, available, call, interleaved
from report import RESULTS, save, table
from scripted_server import ScriptedServer

KINDS = ("four-sync", "four-async")


async def measure(frameworks: list[Any], server: ScriptedServer, runs: int, seed: int) -> dict[str, dict[str, float]]:
    runners: dict[tuple[str, str], Callable[[], Awaitable[str]]] = {}
    for framework in frameworks:
        for kind in KINDS:
            if kind == "four-async" and not framework.async_tools:
                continue
            agent = framework.build(server.url("four"), kind)
            runners[framework.name, kind] = lambda framework=framework, agent=agent: call(
                framework, agent, PARALLEL_PROMPT
            )
    wall, _cpu = await interleaved(runners, runs, seed, warm_ups=1)
    results: dict[str, dict[str, float]] = {}
    for (name, kind), values in wall.items():
        results.setdefault(name, {})[f"{kind}_median_ms"] = statistics.median(values) * 1000
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--frameworks", nargs="+", choices=list(FACTORIES), default=list(FACTORIES))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=RESULTS / "parallel_tools.json")
    args = parser.parse_args()
    frameworks, missing = available(args.frameworks)
    with ScriptedServer() as server:
        results = asyncio.run(measure(frameworks, server, args.runs, args.seed))
    serial_ms = 4 * TOOL_SECONDS * 1000
    print(
        f"4 tools of {TOOL_SECONDS * 1000:.0f} ms in one response; {args.runs} interleaved runs each; "
        f"all in parallel = {TOOL_SECONDS * 1000:.0f} ms, one by one = {serial_ms:.0f} ms"
    )
    rows = [
        [name, row.get("four-sync_median_ms", "n/a"), row.get("four-async_median_ms", "n/a (sync tools only)")]
        for name, row in results.items()
    ]
    table(["framework", "sync tools, ms (median)", "async tools, ms (median)"], rows)
    report = {
        "runs": args.runs,
        "tool_seconds": TOOL_SECONDS,
        "frameworks": {f.name: f.version for f in frameworks},
        "missing": missing,
        "results": results,
    }
    if missing:
        print(f"not installed (pip install -r bench/requirements.txt): {', '.join(missing)}")
    save(args.json, report)


if __name__ == "__main__":
    main()
