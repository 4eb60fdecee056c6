"""What tracing costs per tool step: the same runs with OpenTelemetry off, and on (the SDK, a batch processor
and an in-memory exporter), side by side in one process.

Each run is one tool step (a model call asking for a tool, the tool, a model call answering) on a scripted
model, so what is timed is the loop's own work plus the spans. Off is the default: no span, no
OpenTelemetry import.

    python bench/tracing_overhead.py [--runs 400]
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
    parser.add_argument("--runs", type=int, default=400)
    args = parser.parse_args()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    results = {}
    for arm, setting in (("off", False), ("on", Instrumentation(tracer_provider=provider)), ("off again", False)):
        times = asyncio.run(timed(args.runs, setting))
        results[arm] = {
            "median_us": round(statistics.median(times) * 1e6),
            "mean_us": round(statistics.mean(times) * 1e6),
        }
    provider.force_flush()
    results["spans_exported"] = len(exporter.get_finished_spans())
    results["on_minus_off_us_per_step"] = results["on"]["median_us"] - results["off"]["median_us"]
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
