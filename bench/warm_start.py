"""Starting the assistant as a user feels it: when the prompt appears, and when the engine is ready.

Runs the real ``cortana`` in a pseudo-terminal (pexpect) on the embedded engine,
for each bundled model installed, and times from the spawn to:

- **prompt visible**: the ``›`` prompt is on the screen and takes input;
- **engine ready**: the engine's line (``embedded llama.cpp: MODEL, N tokens``)
  is printed above the prompt, the model loaded.

The session loads the engine in the background, so the first comes before the
second; before that change the prompt appeared only once the engine was ready,
so "engine ready" is also what the prompt took then. Goal (issue 16): the prompt
visible in under 0.5 s.

    python bench/warm_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "warm_start.json")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
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
        }
        print(model, results[model])
    save(args.json, results)


if __name__ == "__main__":
    main()
