"""Framework overhead per step: the same one-tool agent in every framework, against an instant server.

The scripted server (``scripted_server.py``, its own process) answers the
first model call with a ``get_weather`` tool call and the second with the
answer, at once. A run is therefore two HTTP round trips and one tool call;
all the time beyond the "raw HTTP" row (the same two requests sent with a bare
httpx client) is the framework's: building requests, parsing answers,
validating arguments, running the tool, keeping the conversation.

Each framework builds its agent once, runs 10 warm-ups, then the runs are
interleaved (every round runs every framework once, in a shuffled order) so
that drift on a shared machine hits all alike. Reported: median and p95 wall
time per run, median CPU time per run (``time.process_time``: this process,
all its threads; the server's CPU is not in it), and each framework's ratio
to Cortana. Goal: Cortana at most half the time of the best peer.

    python bench/step_overhead.py [--runs 300] [--frameworks cortana agno ...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from frameworks import FACTORIES, MODEL, PROMPT, Framework, available, call, interleaved
from report import RESULTS, save, table
from scripted_server import MARKER, ScriptedServer


class RawHTTP:
    """The floor: the run's two requests, sent with a bare httpx client, nothing else."""

    name = "raw HTTP (floor)"

    def __init__(self, base_url: str) -> None:
        self.client = httpx.AsyncClient(base_url=base_url)

    async def run(self) -> str:
        first = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}]}
        call_message = (await self.client.post("/chat/completions", json=first)).json()["choices"][0]["message"]
        second = {
            "model": MODEL,
            "messages": [
                *first["messages"],
                call_message,
                {"role": "tool", "tool_call_id": "call_1", "content": f"sunny ({MARKER})"},
            ],
        }
        return str(
            (await self.client.post("/chat/completions", json=second)).json()["choices"][0]["message"]["content"]
        )


async def measure(frameworks: list[Framework], server: ScriptedServer, runs: int, seed: int) -> dict[str, Any]:
    url = server.url("one")
    runners: dict[str, Callable[[], Awaitable[str]]] = {}
    raw = RawHTTP(url)
    runners[raw.name] = raw.run
    for framework in frameworks:
        agent = framework.build(url, "one")
        runners[framework.name] = lambda framework=framework, agent=agent: call(framework, agent, PROMPT)
    wall, cpu = await interleaved(runners, runs, seed, warm_ups=10)
    results: dict[str, Any] = {}
    for name in runners:
        ordered = sorted(wall[name])
        results[name] = {
            "wall_median_ms": statistics.median(ordered) * 1000,
            "wall_p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1000,
            "cpu_median_ms": statistics.median(cpu[name]) * 1000,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--frameworks", nargs="+", choices=list(FACTORIES), default=list(FACTORIES))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=RESULTS / "step_overhead.json")
    args = parser.parse_args()
    frameworks, missing = available(args.frameworks)
    with ScriptedServer() as server:
        results = asyncio.run(measure(frameworks, server, args.runs, args.seed))
    ours = results.get("cortana")
    rows = []
    for name, row in results.items():
        if ours:
            row["wall_vs_cortana"] = row["wall_median_ms"] / ours["wall_median_ms"]
            row["cpu_vs_cortana"] = row["cpu_median_ms"] / ours["cpu_median_ms"]
        rows.append(
            [
                name,
                row["wall_median_ms"],
                row["wall_p95_ms"],
                row["cpu_median_ms"],
                f"{row.get('wall_vs_cortana', 0):.1f}x",
                f"{row.get('cpu_vs_cortana', 0):.1f}x",
            ]
        )
    print(f"one tool step per run (2 model calls, 1 tool call), {args.runs} interleaved runs each")
    table(
        ["framework", "wall ms (median)", "wall ms (p95)", "CPU ms (median)", "wall / cortana", "CPU / cortana"], rows
    )
    report: dict[str, Any] = {
        "runs": args.runs,
        "method": "2 model calls + 1 tool call per run against scripted_server.py; 10 warm-ups; interleaved",
        "frameworks": {f.name: f.version for f in frameworks},
        "missing": missing,
        "results": results,
    }
    peers = [row["wall_median_ms"] for name, row in results.items() if name not in ("cortana", RawHTTP.name)]
    if ours and peers:
        best = min(peers)
        report["goal"] = {
            "cortana_ms": ours["wall_median_ms"],
            "best_peer_ms": best,
            "met": ours["wall_median_ms"] <= best / 2,
        }
        print(
            f"goal (cortana <= half the best peer): {ours['wall_median_ms']:.2f} ms vs {best:.2f} ms -> "
            f"{'met' if report['goal']['met'] else 'NOT met'}"
        )
    if missing:
        print(f"not installed (pip install -r bench/requirements.txt): {', '.join(missing)}")
    save(args.json, report)


if __name__ == "__main__":
    main()
