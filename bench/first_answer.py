"""A new user's first answers: the real ``cortana`` one-shot in new folders, the engine not running, tokens and time.

Issue 48. Each step runs ``cortana --verbose QUESTION`` (``CORTANA_KEEP_ALIVE=0``: the engine starts and stops with
the command, so nothing resident helps) in a new, empty folder, with a cache folder of its own that has the
installed models (linked) and no prompt cache yet, as after a fresh install:

1. **cold**: the first folder, no prompt cache anywhere (what every new folder cost before caches were shared);
2. ``cortana models warm``, as ``scripts/start`` runs it after installing (timed on its own);
3. **first folder after warm**: another new folder;
4. **second one-shot**: a second question in that folder (its first exchange is recalled);
5. **another new folder**: a third one, starting from the newest cache;
6. the same first and second one-shot in a fourth folder with ``cortana``'s default ``keep_alive`` (the engine
   stays loaded for the next ``cortana``), the second one on the loaded engine; stopped afterwards.

Reported per step: wall time from the command's start, first token, prompt tokens read and from cache (the
``--verbose`` line). Goals: a first answer within 15 s of the model being installed; a second one-shot reading
at most 150 tokens within 3 s (on the loaded engine, ``cortana``'s default).

    python bench/first_answer.py                     # the 1.5B model, the default
    python bench/first_answer.py --model qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cortana.config import cache_dir
from cortana.models.embedded import resolve_model_path
from cortana.models.resident import engine_record_path
from report import RESULTS, save, table

FIRST = "What is a mutex? One sentence."
SECOND = "And what is a semaphore? One sentence."
VERBOSE = re.compile(
    r"first token ([\d.]+)s · ([\d.]+)s in all .* prompt ([\d,]+) tokens \(([\d,]+) read, ([\d,]+) from cache\)"
)


def _cortana(folder: Path, env: dict[str, str], *args: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", *args], cwd=folder, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"cortana {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout + done.stderr


def _answer(folder: Path, env: dict[str, str], engine: list[str], question: str) -> dict[str, Any]:
    wall, shown = _cortana(folder, env, *engine, "--verbose", question)
    found = VERBOSE.search(shown)
    if found is None:
        raise SystemExit(f"no --verbose line in:\n{shown[-3000:]}")
    first, turn, prompt, read, cached = found.groups()
    return {
        "wall_s": round(wall, 2),
        "first_token_s": float(first),
        "turn_s": float(turn),
        "prompt_tokens": int(prompt.replace(",", "")),
        "read_tokens": int(read.replace(",", "")),
        "cached_tokens": int(cached.replace(",", "")),
    }


def _stop_resident(model: str, cache: Path) -> None:
    """Stop the resident engine the default ``keep_alive`` left running (its record is in ``cache``)."""
    os.environ["CORTANA_CACHE_DIR"] = str(cache)
    record_path = engine_record_path(resolve_model_path(model)[1])
    with contextlib.suppress(OSError, ValueError, KeyError, ProcessLookupError):
        pid = int(json.loads(record_path.read_text())["pid"])
        os.kill(pid, signal.SIGTERM)
        for _ in range(200):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    engine = ["--engine", "embedded", "--model", args.model]
    results: dict[str, Any] = {"model": args.model, "question": FIRST, "second question": SECOND, "steps": {}}
    steps = results["steps"]
    with tempfile.TemporaryDirectory(prefix="cortana-first-") as scratch:
        root = Path(scratch)
        cache, home = root / "cache", root / "home"
        cache.mkdir()
        home.mkdir()
        (cache / "models").symlink_to(cache_dir() / "models", target_is_directory=True)
        env = {**os.environ, "HOME": str(home), "CORTANA_CACHE_DIR": str(cache), "CORTANA_KEEP_ALIVE": "0"}
        env.pop("CORTANA_MODEL", None)
        folders = [root / name for name in ("cold", "after-warm", "another")]
        for folder in folders:
            folder.mkdir()
        steps["cold"] = _answer(folders[0], env, engine, FIRST)
        # The cold folder's cache would seed the next one: take it away, so the warm step starts from nothing.
        for saved in (cache / "prompt-cache").glob("*.bin"):
            saved.unlink()
        warm_s, _ = _cortana(home, env, "models", "warm", "--model", args.model)
        steps["models warm"] = {"wall_s": round(warm_s, 2)}
        steps["first folder after warm"] = _answer(folders[1], env, engine, FIRST)
        steps["second one-shot there"] = _answer(folders[1], env, engine, SECOND)
        steps["another new folder"] = _answer(folders[2], env, engine, FIRST)
        resident = {key: value for key, value in env.items() if key != "CORTANA_KEEP_ALIVE"}
        kept = root / "kept-loaded"
        kept.mkdir()
        try:
            steps["new folder, engine kept loaded after"] = _answer(kept, resident, engine, FIRST)
            steps["second one-shot on the loaded engine"] = _answer(kept, resident, engine, SECOND)
        finally:
            _stop_resident(args.model, cache)
    columns = ("wall_s", "first_token_s", "read_tokens", "cached_tokens")
    rows = [[name, *(step.get(column, "") for column in columns)] for name, step in steps.items()]
    print(f"{args.model}, engine not running (keep_alive 0), new folders, a fresh cache folder")
    table(["step", "wall s", "first token s", "tokens read", "from cache"], rows)
    first = steps["first folder after warm"]
    second = steps["second one-shot on the loaded engine"]
    results["goals"] = {
        "first answer <= 15 s": first["wall_s"] <= 15,
        "second one-shot <= 150 tokens read": second["read_tokens"] <= 150,
        "second one-shot <= 3 s": second["wall_s"] <= 3,
    }
    print(results["goals"])
    save(args.json or RESULTS / f"first_answer_{args.model}.json", results)


if __name__ == "__main__":
    main()
