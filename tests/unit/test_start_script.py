"""``scripts/start`` installs only when what decides the install changed, and otherwise starts at once.

The script runs for real, on a copy of the project whose ``.venv`` holds a stand-in Python (it records the pip
commands it is given) and a stand-in ``cortana`` (it prints its arguments): pip and the engine are not what is
tested here, the script's decision is.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def project(tmp_path: Path) -> Path:
    root = tmp_path / "cortana"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/start", root / "scripts/start")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    bin_dir = root / ".venv/bin"
    bin_dir.mkdir(parents=True)
    executable(bin_dir / "python", f'#!/bin/sh\necho "$*" >> "{tmp_path}/pip.log"\n')
    executable(bin_dir / "cortana", f'#!/bin/sh\necho "cortana $*"\necho "$*" >> "{tmp_path}/cortana.log"\n')
    return root


def start(root: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent)}
    done = subprocess.run([str(root / "scripts/start"), *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def installs(tmp_path: Path) -> list[str]:
    log = tmp_path / "pip.log"
    return [line for line in log.read_text().splitlines() if " -e " in line] if log.exists() else []


def test_start_installs_once_then_only_when_pyproject_changes(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert start(root, "--help").strip() == "cortana --help"
    assert len(installs(tmp_path)) == 1 and installs(tmp_path)[0].endswith("[local,graph,serve,models,acp]")
    assert start(root, "what is here?").strip() == "cortana what is here?"
    assert len(installs(tmp_path)) == 1, "nothing changed: no second install"
    ran = (tmp_path / "cortana.log").read_text().splitlines()
    assert ran == ["models warm", "--help", "what is here?"], "the prompt cache is made with the install, once"
    with (root / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n# a new dependency\n")
    start(root)
    assert len(installs(tmp_path)) == 2, "pyproject.toml changed: installed again"
    (root / ".venv/.cortana-start-stamp").write_text("left by a failed install\n")
    start(root)
    assert len(installs(tmp_path)) == 3, "a stamp that does not match means install"
