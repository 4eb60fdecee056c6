"""Cortana's loop overhead per step, with no HTTP at all.

Uses ``ScriptedModel`` with no sleeps, so every microsecond measured is
Cortana's own: building requests, validating arguments, running the tool,
appending results. The same agent against an HTTP server, side by side with
the peer frameworks, is ``step_overhead.py``; building an agent is
``instantiation.py``.

    python bench/loop_overhead.py [--runs 2000] [--json bench/results/loop_overhead.json]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import cortana
from cortana import Agent, tool
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call
from report import save


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city name.
    """
    return f"The weather in {city} is sunny."


def one_step_script() -> list[ScriptedResponse | str]:
    """A run of two model calls: one tool call, then the answer."""
    return [ScriptedResponse(tool_calls=[tool_call("get_weather", city="Tokyo")]), "It is sunny in Tokyo."]


async def time_runs(runs: int, steps_per_run: int) -> list[float]:
    """Seconds per run of ``steps_per_run`` tool steps plus a final answer."""
    timings = []
    script: list[ScriptedResponse | str] = [
        ScriptedResponse(tool_calls=[tool_call("get_weather", city=f"City{i}")]) for i in range(steps_per_run)
    ]
    script.append("Done.")
    for _ in range(10):  # warm-up
        await Agent(ScriptedModel(script), tools=[get_weather]).run("weather?")
    for _ in range(runs):
        agent = Agent(ScriptedModel(script), tools=[get_weather])
        start = time.perf_counter()
        await agent.run("weather?")
        timings.append(time.perf_counter() - start)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "loop_overhead.json")
    args = parser.parse_args()

    one = asyncio.run(time_runs(args.runs, steps_per_run=1))
    five = asyncio.run(time_runs(args.runs // 4, steps_per_run=5))
    # per step: the cost a 5-step run adds over a 1-step run, divided by the 4 extra steps
    per_step = (statistics.median(five) - statistics.median(one)) / 4

    results = {
        "cortana": cortana.__version__,
        "run_1_tool_step_median_us": statistics.median(one) * 1e6,
        "run_1_tool_step_p95_us": sorted(one)[int(0.95 * len(one))] * 1e6,
        "run_5_tool_steps_median_us": statistics.median(five) * 1e6,
        "loop_overhead_per_step_us": per_step * 1e6,
    }
    width = max(map(len, results))
    for key, value in results.items():
        shown = f"{value:,.1f}" if isinstance(value, float) else value
        print(f"{key:<{width}}  {shown}")
    save(args.json, results)


if __name__ == "__main__":
    main()
