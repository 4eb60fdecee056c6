"""Startup time of the command: ``cortana --help`` against ``llm --help`` (simonw/llm).

Whole processes, several runs each, interleaved; prints the median and the
fastest. Install the peer from bench/requirements.txt (``llm``); without it
only Cortana is measured, and the report says so.

    python bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from report import RESULTS, save


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path, default=RESULTS / "startup.json")
    args = parser.parse_args()
    folder = Path(sys.executable).parent
    commands = {"cortana --help": [str(folder / "cortana"), "--help"]}
    llm = shutil.which("llm", path=str(folder)) or shutil.which("llm")
    if llm:
        commands["llm --help"] = [llm, "--help"]
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():
        timed(command)  # warm the file cache
    for _ in range(args.runs):
        for name, command in commands.items():
            times[name].append(timed(command))
    results: dict[str, object] = {"runs": args.runs}
    for name, values in times.items():
        median, fastest = round(statistics.median(values) * 1000, 1), round(min(values) * 1000, 1)
        results[name] = {"median_ms": median, "min_ms": fastest}
        print(f"{name:<16} median {median:>7} ms   fastest {fastest:>7} ms")
    if not llm:
        results["note"] = "llm is not installed (pip install -r bench/requirements.txt); only cortana was measured"
        print(results["note"])
    save(args.json, results)


if __name__ == "__main__":
    main()
