"""AgentRunner overhead: 1,000 scripted runs at concurrency 50.

Compares the runner with the same runs started by a bare ``asyncio.gather``
under a semaphore, so the difference is the runner's own bookkeeping
(outcomes, timing, totals, timeouts).

    python bench/runner.py [--runs 1000] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from cortana import Agent
from cortana.agent.runner import AgentRunner
from cortana.testing import ScriptedModel
from report import save


def agent(runs: int) -> Agent:
    return Agent(ScriptedModel(["done"] * runs))


async def with_runner(runs: int, concurrency: int) -> float:
    runner = AgentRunner(agent(runs), max_concurrency=concurrency, timeout=60)
    started = time.perf_counter()
    batch = await runner.run([f"task {i}" for i in range(runs)])
    assert not batch.failed
    return time.perf_counter() - started


async def with_gather(runs: int, concurrency: int) -> float:
    shared = agent(runs)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(prompt: str) -> None:
        async with semaphore:
            await shared.run(prompt)

    started = time.perf_counter()
    await asyncio.gather(*(one(f"task {i}") for i in range(runs)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "runner.json")
    args = parser.parse_args()
    runner_times, gather_times = [], []
    for _ in range(args.repeat):  # interleaved, so machine noise hits both alike
        runner_times.append(asyncio.run(with_runner(args.runs, args.concurrency)))
        gather_times.append(asyncio.run(with_gather(args.runs, args.concurrency)))
    runner_s, gather_s = statistics.median(runner_times), statistics.median(gather_times)
    results = {
        "runs": args.runs,
        "concurrency": args.concurrency,
        "runner_total_s": round(runner_s, 3),
        "bare_gather_total_s": round(gather_s, 3),
        "runner_overhead_per_run_us": round((runner_s - gather_s) / args.runs * 1e6, 1),
        "runner_per_run_us": round(runner_s / args.runs * 1e6, 1),
    }
    for key, value in results.items():
        print(f"{key:<28} {value}")
    save(args.json, results)


if __name__ == "__main__":
    main()
