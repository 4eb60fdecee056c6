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

One-shot answers, ``cortana --verbose "QUESTION"`` in a new workspace, twice:

- **cold**: no prompt cache for this workspace, the engine reads the whole prompt;
- **warm**: the second run in the same workspace, the engine starting from the
  prompt cache the first one saved (``models/embedded.py``).

Each gives the command's wall time, its time to the first token and the prompt
tokens the engine read (from ``--verbose``). Goal (issue 16): warm under a
quarter of cold on the 1.5B model.

    python bench/warm_start.py [--runs 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pexpect

from cortana.config import cache_dir
from cortana.models.embedded import installed_models
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
"""
"""The second run's prompt is the first's but for the question: without these, the first conversation comes
back in the second's context (recall, the time since it) and the small model answers differently, often with
tool calls, which measures the model, not the start."""
VERBOSE = re.compile(r"first token ([\d.]+)s · ([\d.]+)s in all · .* prompt ([\d,]+) tokens \(([\d,]+) read")


def one_shot(model: str, workspace: Path, question: str) -> dict[str, float]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workspace), "CORTANA_CACHE_DIR": str(cache_dir())}
    args = ["-m", "cortana.cli.main", "--engine", "embedded", "--model", model, "--verbose", question]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=600, check=True
    )
    wall = time.perf_counter() - started
    found = VERBOSE.search(done.stderr)
    if found is None:
        raise SystemExit(f"no --verbose line in: {done.stderr[-500:]}")
    return {
        "wall_s": wall,
        "first_token_s": float(found[1]),
        "prompt_tokens": int(found[3].replace(",", "")),
        "read_tokens": int(found[4].replace(",", "")),
    }


def one_shots(model: str, runs: int) -> dict[str, Any]:
    cold: list[dict[str, float]] = []
    warm: list[dict[str, float]] = []
    for _ in range(runs):
        for question in QUESTIONS:
            with tempfile.TemporaryDirectory() as folder:
                workspace = Path(folder)
                (workspace / "cortana.yml").write_text(ISOLATED)
                cold.append(one_shot(model, workspace, question))
                warm.append(one_shot(model, workspace, question))

    def median(rows: list[dict[str, float]], key: str) -> float:
        return round(statistics.median(row[key] for row in rows), 2)

    return {
        f"{kind}_{key}": median(rows, key)
        for kind, rows in (("cold", cold), ("warm", warm))
        for key in ("wall_s", "first_token_s", "read_tokens", "prompt_tokens")
    } | {"warm_over_cold_wall": round(median(warm, "wall_s") / median(cold, "wall_s"), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "warm_start.json")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for model in sorted(installed_models()):
        prompts, readies = [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                (Path(folder) / "cortana.yml").write_text("graphify:\n  enabled: false\n")
                prompt, ready = one_start(model, Path(folder))
            prompts.append(prompt)
            readies.append(ready)
        results[model] = {
            "prompt_visible_p50_s": round(statistics.median(prompts), 3),
            "prompt_visible_max_s": round(max(prompts), 3),
            "engine_ready_p50_s": round(statistics.median(readies), 3),
            "engine_ready_max_s": round(max(readies), 3),
            **one_shots(model, args.runs),
        }
        print(model, results[model], flush=True)
    save(args.json, results)


if __name__ == "__main__":
    main()
