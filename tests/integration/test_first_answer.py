"""A new folder's first answer does not read again what every folder's first prompt shares (the real CLI).

``cortana models warm`` (run by scripts/start after installing) saves the engine's prompt cache of what every
folder's first prompt begins with; ``cortana "QUESTION"`` saves its own when it ends; a new folder, with no cache
of its own, starts from the newest one of the same model (``EmbeddedClient.seed_prompt_cache``), so only its
own question is read (a question no tool is for, sent without the tools, reads only that too). This failed two
ways before: requests with tools offered (guided ones) went to whatever slot was free, so the saved slot was
empty (``n_saved: 0``); and each folder's cache served only that folder.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import TEST_MODEL

QUESTION = "What is a mutex? One sentence."


def environment(home: Path, cache: Path) -> dict[str, str]:
    """A user's environment whose cache folder is new but for the installed models (linked, not copied)."""
    from cortana.config import cache_dir

    cache.mkdir(exist_ok=True)
    if not (cache / "models").exists():
        (cache / "models").symlink_to(cache_dir() / "models", target_is_directory=True)
    env = {"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": str(home), "NO_COLOR": "1"}
    env["CORTANA_CACHE_DIR"] = str(cache)  # no prompt cache saved yet: as on a fresh install
    env["CORTANA_KEEP_ALIVE"] = "0"  # the engine starts and stops with the command: nothing resident helps
    return env


ENGINE = ("--engine", "embedded", "--model", TEST_MODEL, "--threads", "1", "--context-window", "4096")


def cortana(folder: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", *args], cwd=folder, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def one_shot(folder: Path, env: dict[str, str]) -> tuple[int, int]:
    """``cortana --verbose QUESTION`` in ``folder`` on its own embedded engine: (tokens read, from cache)."""
    shown = cortana(folder, env, *ENGINE, "--verbose", QUESTION)
    found = re.search(r"prompt [\d,]+ tokens \(([\d,]+) read, ([\d,]+) from cache\)", shown)
    assert found, shown[-2000:]
    read, cached = (int(group.replace(",", "")) for group in found.groups())
    return read, cached


def test_after_the_install_warms_the_engine_a_new_folders_first_answer_reads_only_what_is_new(
    tmp_path: Path,
) -> None:
    home, first, second = tmp_path / "home", tmp_path / "first", tmp_path / "second"
    for folder in (home, first, second):
        folder.mkdir()
    env = environment(home, tmp_path / "cache")
    said = cortana(home, env, "models", "warm", *ENGINE[2:])  # what scripts/start runs after installing
    assert "a first question in a new folder reads only itself" in said, said
    start = re.search(r"read the assistant's ([\d,]+)-token start", said)
    assert start and int(start.group(1).replace(",", "")) > 1000, f"the tools' descriptions were not read: {said}"
    assert "warm already" in cortana(home, env, "models", "warm", *ENGINE[2:]), "made once"
    read, cached = one_shot(first, env)  # no tool is for this question: it is sent without any (the tool judge)
    assert cached > 150, "the instructions were read again in a new folder"
    assert read < 80, f"only the question and its context line are new, yet {read} tokens were read"
    # With the tools offered (the judge turned off), their descriptions come from the cache too.
    (home / ".config" / "cortana").mkdir(parents=True)
    (home / ".config" / "cortana" / "cortana.yml").write_text("agent:\n  tool_judge: false\n")
    read, cached = one_shot(second, env)  # starts from the first folder's conversation, the newest
    assert cached > 500 and read < 60, (read, cached)
