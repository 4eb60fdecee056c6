"""A new folder's first answer does not read again what every folder's first prompt shares (the real CLI).

``cortana "QUESTION"`` in a folder saves the engine's prompt cache when it ends; a new folder, with no cache
of its own, starts from the newest one of the same model (``EmbeddedClient.seed_prompt_cache``), so only its
own question is read. This failed two ways before: requests with tools offered (guided ones) went to whatever
slot was free, so the saved slot was empty (``n_saved: 0``); and each folder's cache served only that folder.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import TEST_MODEL

QUESTION = "What is a mutex? One sentence."


def one_shot(folder: Path, home: Path) -> tuple[int, int]:
    """Run ``cortana --verbose QUESTION`` in ``folder`` on its own embedded engine; (tokens read, from cache)."""
    from cortana.config import cache_dir

    env = {"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": str(home), "NO_COLOR": "1"}
    env["CORTANA_CACHE_DIR"] = str(cache_dir())  # the bundled model, joined already, and the prompt caches
    env["CORTANA_KEEP_ALIVE"] = "0"  # the engine starts and stops with the command: nothing resident helps
    args = ["--engine", "embedded", "--model", TEST_MODEL, "--threads", "1", "--context-window", "4096"]
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", *args, "--verbose", QUESTION],
        cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r"prompt [\d,]+ tokens \(([\d,]+) read, ([\d,]+) from cache\)", done.stdout + done.stderr)
    assert found, (done.stdout + done.stderr)[-2000:]
    read, cached = (int(group.replace(",", "")) for group in found.groups())
    return read, cached


def test_a_new_folders_first_answer_reads_only_what_is_new(tmp_path: Path) -> None:
    home, first, second = tmp_path / "home", tmp_path / "first", tmp_path / "second"
    for folder in (home, first, second):
        folder.mkdir()
    one_shot(first, home)  # cold or not, its conversation is saved when it ends
    read, cached = one_shot(second, home)
    assert cached > 500, "the instructions and the tools were read again in a new folder"
    assert read < 60, f"only the question and its context line are new, yet {read} tokens were read"
