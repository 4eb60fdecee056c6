"""``cortana serve`` under the issue's load: 50 concurrent streams through the official ``openai`` client.

bench/serve_load.py is the harness (a scripted engine, the real server on loopback); its figures are in
docs/benchmarks.md. Here: every answer complete and in order, within a generous 30 s deadline (a liveness
bound, not a performance target: the benchmark took ~2 s), and the server's descriptors and Python memory
back to where they started.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

BENCH = Path(__file__).parents[2] / "bench"


def harness() -> Any:
    spec = importlib.util.spec_from_file_location("bench_serve_load", BENCH / "serve_load.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_fifty_concurrent_streams_complete_in_order_and_leave_nothing_open(tmp_path: Path) -> None:
    figures = await asyncio.wait_for(harness().load(tmp_path, streams=50, words=100), 60)
    assert figures["wrong"] == [] and figures["complete_and_in_order"] == 100
    assert figures["turns_answered"] == 100, "every request reached the engine once"
    assert (figures["stored_messages"], figures["stored_threads"]) == (200, 100), "nothing lost, nothing twice"
    assert figures["wall_s"] < 30
    assert figures["descriptors_after"] <= figures["descriptors_before"], figures
    assert figures["python_memory_growth_kib"] < 2048, figures
