"""AgentRunner: its own overhead, and the Ray backend's against the local one.

Default mode: 1,000 runs of a scripted model (in-process) at concurrency 50, the
runner against the same runs started by a bare ``asyncio.gather`` under a
semaphore, so the difference is the runner's own bookkeeping (outcomes, timing,
totals, timeouts).

``--backend local|ray|both``: 2,000 runs against the loopback scripted server
(``bench/scripted_server.py``, in its own process; each run is one tool call and
an answer, so two HTTP requests), through the OpenAI-compatible engine client
that the agent factory makes where the run happens. The local backend runs them
on this event loop; the Ray backend on Ray actors of a local Ray instance, one
worker process per slot. ``*_per_run_us`` is the batch's wall time over the
runs, all in; a Ray batch first starts its workers (``ray_workers_start_s``: the
wall time less the span from the first run's start to the last run's end), and
``*_per_run_after_start_us`` is that span over the runs. ``ray_overhead_*`` is
the Ray figure less the local one.

    python bench/runner.py [--runs 1000] [--concurrency 50]
    python bench/runner.py --backend both [--runs 2000] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import statistics
import time
from pathlib import Path
from typing import Any

from cortana import Agent
from cortana.agent.runner import AgentRunner, BatchResult
from cortana.models.factory import create_model_client
from cortana.testing import ScriptedModel
from report import RESULTS, save
from scripted_server import ANSWER, MARKER, ScriptedServer

# -- the runner's own overhead ------------------------------------------------------------------------


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


def overhead(args: argparse.Namespace) -> dict[str, Any]:
    runs, concurrency = args.runs or 1000, args.concurrency or 50
    runner_times, gather_times = [], []
    for _ in range(args.repeat):  # interleaved, so machine noise hits both alike
        runner_times.append(asyncio.run(with_runner(runs, concurrency)))
        gather_times.append(asyncio.run(with_gather(runs, concurrency)))
    runner_s, gather_s = statistics.median(runner_times), statistics.median(gather_times)
    return {
        "runs": runs,
        "concurrency": concurrency,
        "runner_total_s": round(runner_s, 3),
        "bare_gather_total_s": round(gather_s, 3),
        "runner_overhead_per_run_us": round((runner_s - gather_s) / runs * 1e6, 1),
        "runner_per_run_us": round(runner_s / runs * 1e6, 1),
    }


# -- local backend against Ray backend ----------------------------------------------------------------


def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city name.
    """
    return f"The weather in {city} is sunny ({MARKER})."


async def weather_agent(base_url: str) -> Agent:
    """The factory: runs where the task runs, so the engine client is made there."""
    model = await create_model_client("openai", base_url=base_url, model="bench")
    return Agent(model, instructions="Answer briefly.", tools=[get_weather])


async def timed(runner: AgentRunner, runs: int) -> tuple[float, BatchResult]:
    started = time.perf_counter()
    batch = await runner.run([f"Weather in Tokyo? ({i})" for i in range(runs)])
    elapsed = time.perf_counter() - started
    assert not batch.failed, batch.failed[0].error
    assert all(outcome.result is not None and outcome.result.output == ANSWER for outcome in batch)
    assert batch.metrics.model_calls == 2 * runs
    return elapsed, batch


async def compare(args: argparse.Namespace) -> dict[str, Any]:
    runs, concurrency = args.runs or 2000, args.concurrency or 4
    backends = ["local", "ray"] if args.backend == "both" else [args.backend]
    walls: dict[str, list[float]] = {backend: [] for backend in backends}
    spans: dict[str, list[float]] = {backend: [] for backend in backends}
    latencies: dict[str, list[float]] = {backend: [] for backend in backends}
    cpus = os.cpu_count() or 1
    with ScriptedServer() as server:
        factory = functools.partial(weather_agent, server.url("one"))
        settings: dict[str, Any] = {"backend": "ray", "ray_init": {"num_cpus": cpus}}
        runners = {
            backend: AgentRunner(factory, max_concurrency=concurrency, **(settings if backend == "ray" else {}))
            for backend in backends
        }
        async with contextlib.AsyncExitStack() as stack:
            for runner in runners.values():
                await stack.enter_async_context(runner)
                started = time.perf_counter()
                await timed(runner, concurrency)  # warm up: the engine connections; for Ray, starting Ray
                print(f"{runner.backend:<5} warm-up {time.perf_counter() - started:.1f}s")
            for _ in range(args.repeat):  # interleaved, so machine noise hits both alike
                for backend, runner in runners.items():
                    elapsed, batch = await timed(runner, runs)
                    # From the first run's start to the last one's end: the batch less starting Ray's workers.
                    span = max(o.started + o.duration for o in batch) - min(o.started for o in batch)
                    walls[backend].append(elapsed)
                    spans[backend].append(span)
                    latencies[backend].append(statistics.median(outcome.duration for outcome in batch))
                    print(f"{backend:<5} {runs} runs in {elapsed:.2f}s ({span:.2f}s from the first run to the last)")
    results: dict[str, Any] = {"runs": runs, "concurrency": concurrency, "repeat": args.repeat, "cpus": cpus}
    for backend in backends:
        wall, span = statistics.median(walls[backend]), statistics.median(spans[backend])
        results[f"{backend}_total_s"] = round(wall, 3)
        results[f"{backend}_total_s_range"] = [round(min(walls[backend]), 3), round(max(walls[backend]), 3)]
        results[f"{backend}_per_run_us"] = round(wall / runs * 1e6, 1)
        results[f"{backend}_per_run_after_start_us"] = round(span / runs * 1e6, 1)
        results[f"{backend}_median_run_ms"] = round(statistics.median(latencies[backend]) * 1e3, 2)
    if "ray" in backends:
        starts = [wall - span for wall, span in zip(walls["ray"], spans["ray"], strict=True)]
        results["ray_workers_start_s"] = round(statistics.median(starts), 3)
    if len(backends) == 2:
        for key in ("per_run_us", "per_run_after_start_us", "median_run_ms"):
            results[f"ray_overhead_{key}"] = round(results[f"ray_{key}"] - results[f"local_{key}"], 2)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["local", "ray", "both"], help="compare backends on the scripted server")
    parser.add_argument("--runs", type=int, help="default: 1000; with --backend, 2000")
    parser.add_argument("--concurrency", type=int, help="default: 50; with --backend, 4")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = asyncio.run(compare(args)) if args.backend else overhead(args)
    for key, value in results.items():
        print(f"{key:<36} {value}")
    default = "runner_backends.json" if args.backend else "runner.json"
    save(args.json or RESULTS / default, results)


if __name__ == "__main__":
    main()
