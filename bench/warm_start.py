"""Starting the assistant as a user feels it: the prompt, the engine, and a one-shot answer cold and warm.

Runs the real ``cortana`` on the embedded engine, for each bundled model installed.

In a pseudo-terminal (pexpect), from the spawn to:

- **prompt visible**: the ``›`` prompt is on the screen and takes input;
- **engine ready**: the engine's line (``embedded llama.cpp: MODEL, N tokens``)
  is printed above the prompt, the model loaded.

The session loads the engine in the background, so the first comes before the
second; before that change the prompt appeared only once the engine was ready,
so "engine ready" is also what the prompt took then. Goal (issue 16): the prompt
visible in under 0.5 s.

Answers, in a new workspace, twice (cold, then warm), three ways:

- **one-shot**: ``cortana --verbose "QUESTION"``;
- **first turn**: a new interactive session in a pseudo-terminal, the question
  typed at the prompt (so it may wait for the engine), timed from the spawn to
  the turn's ``--verbose`` line.

and, for each, the two ways a second process finds what the first one read:

- **saved cache** (``keep_alive: 0``): the engine stops with ``cortana``; the
  next one loads the model again and restores the prompt cache the first one
  saved (``models/embedded.py``);
- **resident** (``keep_alive: 300``): the engine stays loaded after
  ``cortana`` exits and the next one uses it (``models/resident.py``), its
  prompt cache still in memory. Stopped between pairs, so every cold run is cold.

Each gives the wall time, the time to the first token and the prompt tokens the
engine read (from ``--verbose``), and the resident engine's memory while idle.
Goal (issue 16): warm under a quarter of cold on the 1.5B model, for the
one-shot and for the first turn.

    python bench/warm_start.py [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pexpect

from cortana.config import cache_dir
from cortana.models.embedded import installed_models, resolve_model_path
from cortana.models.resident import engine_record_path
from report import save

PROMPT = "› "


def one_start(model: str, workspace: Path) -> tuple[float, float]:
    env = {"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": str(workspace), "CORTANA_CACHE_DIR": str(cache_dir())}
    args = ["-m", "cortana.cli.main", "--engine", "embedded", "--model", model, "--no-heartbeat"]
    started = time.perf_counter()
    child = pexpect.spawn(sys.executable, args, cwd=str(workspace), encoding="utf-8", timeout=300, env=env)
    child.expect_exact(PROMPT)
    prompt = time.perf_counter() - started
    child.expect(f"embedded llama.cpp: {model}")
    ready = time.perf_counter() - started
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=60)
    return prompt, ready


QUESTIONS = ["What is a mutex? Answer in one sentence.", "Say OK."]
ISOLATED = """temperature: 0
graphify: {enabled: false}
memory: {recall: false, working_memory: "off"}
learning: {enabled: false}
agent: {local_time: false}
keep_alive: KEEP
"""
"""The second run's prompt is the first's but for the question: without these, the first conversation comes
back in the second's context (recall, the time since it) and the small model answers differently, often with
tool calls, which measures the model, not the start."""
MODES = {"saved_cache": 0, "resident": 300}
VERBOSE = re.compile(r"first token ([\d.]+)s · ([\d.]+)s in all · .* prompt ([\d,]+) tokens \(([\d,]+) read")


def _env(workspace: Path) -> dict[str, str]:
    return {"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": str(workspace), "CORTANA_CACHE_DIR": str(cache_dir())}


def _measured(wall: float, text: str) -> dict[str, float]:
    found = VERBOSE.search(text)
    if found is None:
        raise SystemExit(f"no --verbose line in: {text[-500:]}")
    return {
        "wall_s": wall,
        "first_token_s": float(found[1]),
        "prompt_tokens": int(found[3].replace(",", "")),
        "read_tokens": int(found[4].replace(",", "")),
    }


def one_shot(model: str, workspace: Path, question: str) -> dict[str, float]:
    args = ["-m", "cortana.cli.main", "--engine", "embedded", "--model", model, "--verbose", question]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], cwd=workspace, env=_env(workspace), capture_output=True, text=True, timeout=600
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"cortana failed ({done.returncode}): {done.stderr[-800:]}")
    return _measured(wall, done.stderr)


def first_turn(model: str, workspace: Path, question: str) -> dict[str, float]:
    """Spawn the session, type the question at the prompt, time to the end of its answer."""
    args = ["-m", "cortana.cli.main", "--engine", "embedded", "--model", model, "--verbose", "--no-heartbeat"]
    started = time.perf_counter()
    child = pexpect.spawn(sys.executable, args, cwd=str(workspace), encoding="utf-8", timeout=600, env=_env(workspace))
    child.expect_exact(PROMPT)
    child.sendline(question)
    child.expect(VERBOSE)
    wall = time.perf_counter() - started
    text = child.after
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=120)
    return _measured(wall, text)


def stop_resident(model: str) -> float | None:
    """Stop the model's resident engine, if one runs; its resident memory in MB before that."""
    record_path = engine_record_path(resolve_model_path(model)[1])
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        return None
    pid = int(record["pid"])
    rss = None
    with contextlib.suppress(OSError):
        status = Path(f"/proc/{pid}/status").read_text()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    for _ in range(200):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.05)
    return rss


def pairs(model: str, runs: int, how: Any, keep_alive: float) -> dict[str, Any]:
    cold: list[dict[str, float]] = []
    warm: list[dict[str, float]] = []
    memory: list[float] = []
    for _ in range(runs):
        for question in QUESTIONS:
            stop_resident(model)
            with tempfile.TemporaryDirectory() as folder:
                workspace = Path(folder)
                (workspace / "cortana.yml").write_text(ISOLATED.replace("KEEP", str(keep_alive)))
                cold.append(how(model, workspace, question))
                warm.append(how(model, workspace, question))
            if (rss := stop_resident(model)) is not None:
                memory.append(rss)

    def median(rows: list[dict[str, float]], key: str) -> float:
        return round(statistics.median(row[key] for row in rows), 2)

    return {
        f"{kind}_{key}": median(rows, key)
        for kind, rows in (("cold", cold), ("warm", warm))
        for key in ("wall_s", "first_token_s", "read_tokens", "prompt_tokens")
    } | {
        "warm_over_cold_wall": round(median(warm, "wall_s") / median(cold, "wall_s"), 3),
        **({"resident_rss_mb": round(statistics.median(memory))} if memory else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", action="append", help="only this bundled model (repeatable)")
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "warm_start.json")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for model in args.model or sorted(installed_models()):
        prompts, readies = [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                (Path(folder) / "cortana.yml").write_text("graphify: {enabled: false}\nkeep_alive: 0\n")
                prompt, ready = one_start(model, Path(folder))
            prompts.append(prompt)
            readies.append(ready)
        results[model] = {
            "prompt_visible_p50_s": round(statistics.median(prompts), 3),
            "prompt_visible_max_s": round(max(prompts), 3),
            "engine_ready_p50_s": round(statistics.median(readies), 3),
            "engine_ready_max_s": round(max(readies), 3),
        }
        for mode, keep_alive in MODES.items():
            results[model][f"one_shot_{mode}"] = pairs(model, args.runs, one_shot, keep_alive)
            results[model][f"first_turn_{mode}"] = pairs(model, args.runs, first_turn, keep_alive)
            print(model, mode, results[model][f"one_shot_{mode}"], results[model][f"first_turn_{mode}"], flush=True)
        print(model, results[model], flush=True)
    save(args.json, results)


if __name__ == "__main__":
    main()
