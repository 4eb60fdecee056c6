"""``cortana eval`` on the real bundled 0.5B model: the command starts the embedded engine on it, asks three plain
questions in new conversations, checks the answers and reports real times and token counts (the figures are
printed, for docs/evals.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cortana
from tests.integration.conftest import TEST_MODEL
from tests.integration.test_first_answer import environment

CASES = """\
instructions: Answer in as few words as you can.
cases:
  - name: sum
    input: What is 2+2? Answer with the number only.
    contains: "4"
  - name: capital
    input: What is the capital of France? Answer with the city only.
    contains: Paris
  - name: language
    input: Which programming language has the keyword `def` for functions, Python or Java? One word.
    contains: Python
"""


def test_cortana_eval_on_the_bundled_model_passes_plain_questions_and_counts_real_tokens(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "cases.yaml").write_text(CASES)
    env = {**environment(home, tmp_path / "cache"), "COLUMNS": "160"}
    env["PYTHONPATH"] = str(Path(cortana.__file__).resolve().parents[1])  # this checkout's code, not an install's
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "eval", "cases.yaml", "--engine", "embedded",
         "--models", TEST_MODEL, "--threads", "1", "--context-window", "4096", "--json", "report.json"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    print(done.stdout, done.stderr, sep="\n", file=sys.__stdout__)
    report = json.loads((tmp_path / "report.json").read_text())
    [model] = report["models"]
    assert done.returncode == 0, (done.stdout, done.stderr[-2000:])
    assert model["model"] == TEST_MODEL and (model["runs"], model["passed"]) == (3, 3)
    assert f"{TEST_MODEL}: 3/3 passed (100%)" in done.stdout
    for case in model["cases"]:
        [run] = case["runs"]
        assert 20 < run["prompt_tokens"] < 200, run  # the instructions and the question, read by the model
        assert 0 < run["completion_tokens"] < 30, run
        assert 0 < run["seconds"] < 120, run
    assert model["median_seconds"] == sorted(case["runs"][0]["seconds"] for case in model["cases"])[1]
