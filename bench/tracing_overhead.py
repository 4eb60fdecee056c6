"""What tracing costs per tool step: the same runs with OpenTelemetry off, and on (the SDK, a batch processor
and an in-memory exporter), side by side in one process.

Each run is one tool step (a model call asking for a tool, the tool, a model call answering) on a scripted
model, so what is timed is the loop's own work plus the spans. Off is the default: no span, no
OpenTelemetry import.

    python bench/tracing_overhead.py [--runs 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cortana import Agent, Instrumentation, tool
from cortana.testing import ScriptedModel, tool_call, tool_call_response

ROUNDS = 5
RESULTS = Path(__file__).resolve().parent / "results" / "tracing_overhead.json"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


async def timed(runs: int, instrument: Instrumentation | bool) -> list[float]:
    script = []
    for _ in range(runs + 20):
        script += [tool_call_response(tool_call("add", a=1, b=2)), "3"]
    agent = Agent(ScriptedModel(script), tools=[add], instrument=instrument)
    times = []
    for index in range(runs + 20):
        started = time.perf_counter()
        await agent.run("1 + 2?")
        if index >= 20:  # the first runs warm caches up
            times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000, help="runs per arm, over 5 alternating rounds")
    args = parser.parse_args()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    times: dict[str, list[float]] = {"off": [], "on": []}
    settings: dict[str, Instrumentation | bool] = {"off": False, "on": Instrumentation(tracer_provider=provider)}
    for _ in range(ROUNDS):  # the arms alternate, so drift on a shared machine falls on both
        for arm in ("off", "on"):
            times[arm] += asyncio.run(timed(args.runs // ROUNDS, settings[arm]))
            provider.force_flush()
    results: dict[str, object] = {
        arm: {"median_us": round(statistics.median(values) * 1e6), "mean_us": round(statistics.mean(values) * 1e6)}
        for arm, values in times.items()
    }
    results["spans_exported"] = len(exporter.get_finished_spans())
    results["on_minus_off_us_per_step"] = round(
        (statistics.median(times["on"]) - statistics.median(times["off"])) * 1e6
    )
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
