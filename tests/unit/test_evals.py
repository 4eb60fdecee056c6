"""``cortana eval`` and ``cortana.evals``: cases run on pydantic-evals, one table per model, a JSON report.

The command is the real one (a subprocess, this checkout's code), against the loopback llama.cpp wire server
(``scripted_engine``), whose fixed answers make some cases pass and some fail; the report's numbers are checked
against the token counts those answers carry. Bad input is exit status 2 and one line naming the cause and the fix.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import cortana
from cortana.errors import ModelError
from cortana.evals import Cases, CasesError, EvalCase, load_cases, model_spec, run_eval
from cortana.testing import ScriptedModel, ScriptedResponse
from tests.wire import Reply

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(cortana.__file__).resolve().parents[1]
CHAT = "/v1/chat/completions"


def answer(text: str, prompt_tokens: int = 20, completion_tokens: int = 5) -> Reply:
    """An answer sent whole, as ``Agent.run`` asks for one, with the token counts the report must add up."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    message = {"role": "assistant", "content": text}
    return Reply.json({"object": "chat.completion", "usage": usage,
                       "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})  # fmt: skip


def cortana_eval(folder: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    """``cortana eval ARGS`` in ``folder``, on the wire server at ``url``; this checkout's code, a home of its own."""
    home = folder / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200",
           "PYTHONPATH": str(SOURCE), "CORTANA_KEEP_ALIVE": "0"}  # fmt: skip
    engine = ("--engine", "llamacpp", "--base-url", url) if url else ()
    return subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "eval", *args, *engine],
        cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


CASES = """\
instructions: Answer in as few words as you can.
cases:
  - name: sum
    input: What is 2+2? Answer with the number only.
    contains: "4"
  - name: capital
    input: What is the capital of France?
    equals: Paris
  - name: short
    input: Say hello.
    python: checks:is_short
"""

CHECKS = """\
def is_short(answer):
    return len(answer) < 20
"""


def test_cortana_eval_prints_a_table_and_writes_the_reports_numbers(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cases.yaml").write_text(CASES)
    (tmp_path / "checks.py").write_text(CHECKS)
    scripted_engine.add("POST", CHAT, answer("4", 11, 2), answer("Lyon", 12, 3), answer(" Hello! ", 13, 4))
    done = cortana_eval(tmp_path, "cases.yaml", "--json", "report.json", url=scripted_engine.url)
    assert done.returncode == 1, done.stderr  # one case failed
    assert "Traceback" not in done.stderr
    table = done.stdout
    assert "qwen0.5: 2/3 passed (67%)" in table, table
    rows = {line.split("│")[1].strip(): line for line in table.splitlines() if line.count("│") > 3}
    assert re.search(r"│\s+yes\s+│.*│\s+11\s+│\s+2\s+│", rows["sum"]), rows["sum"]
    assert re.search(r"│\s+no\s+│.*│\s+12\s+│\s+3\s+│ equals: expected 'Paris', got 'Lyon'", rows["capital"])
    assert re.search(r"│\s+yes\s+│", rows["short"])
    assert re.search(r"│ qwen0\.5\s+│\s+2/3\s+│\s+67%\s+│.*│\s+36\s+│\s+9\s+│", rows["qwen0.5"]), rows["qwen0.5"]

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["passed"] is False and report["repeat"] == 1
    [model] = report["models"]
    assert (model["model"], model["runs"], model["passed"]) == ("qwen0.5", 3, 2)
    assert (model["prompt_tokens"], model["completion_tokens"]) == (36, 9)
    assert model["median_seconds"] > 0
    sums, capital, short = model["cases"]
    assert sums["passed"] == 1 and sums["runs"][0]["output"] == "4"
    assert sums["runs"][0]["checks"] == {"contains '4'": {"passed": True, "reason": None}}
    [run] = capital["runs"]
    assert run["passed"] is False and run["output"] == "Lyon" and not run["checks"]["equals"]["passed"]
    assert short["runs"][0]["output"] == "Hello!", "the answer's surrounding space is not the model's answer"
    # Each case in a new conversation: the instructions, then its question alone.
    for body, (case, question) in zip(scripted_engine.bodies(CHAT), [("sum", "2+2"), ("capital", "France"),
                                                                      ("short", "hello")], strict=True):  # fmt: skip
        assert body["messages"][0] == {"role": "system", "content": "Answer in as few words as you can."}, case
        assert len(body["messages"]) == 2 and question in body["messages"][1]["content"], case


def test_every_case_passing_is_status_0_and_repeat_gives_pass_rates_per_model(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cases.yaml").write_text("cases:\n  - name: sum\n    input: What is 2+2?\n    contains: '4'\n")
    scripted_engine.add("POST", CHAT, answer("4"), answer("4"))
    done = cortana_eval(tmp_path, "cases.yaml", url=scripted_engine.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1/1 passed (100%)" in done.stdout

    scripted_engine.requests.clear()
    scripted_engine.routes[("POST", CHAT)] = [answer("4"), answer("4"), answer("4"), answer("5"), answer("4")]
    done = cortana_eval(
        tmp_path, "cases.yaml", "--models", "small,large", "--repeat", "2", "--json", "r.json", url=scripted_engine.url
    )
    assert done.returncode == 1, done.stderr
    assert "small: 2/2 passed (100%)" in done.stdout and "large: 1/2 passed (50%)" in done.stdout, done.stdout
    assert re.search(r"│ sum\s+│\s+1/2\s+│", done.stdout), "a case's row shows its runs passed"
    small, large = json.loads((tmp_path / "r.json").read_text())["models"]
    assert (small["model"], small["pass_rate"], len(small["cases"][0]["runs"])) == ("small", 1.0, 2)
    assert (large["model"], large["pass_rate"], large["cases"][0]["pass_rate"]) == ("large", 0.5, 0.5)
    assert [body["model"] for body in scripted_engine.bodies(CHAT)] == ["small", "small", "large", "large"]


TYPED = """\
output_type: shapes:Contact
instructions: Extract the contact as JSON.
cases:
  - name: maria
    input: Maria Lopez, 41, welder.
    fields: {name: Maria Lopez, age: 41}
  - name: ahmed
    input: Ahmed Khan, 35, baker.
    equals: {name: Ahmed Khan, age: 35}
    judge: The name is a person's full name.
"""

SHAPES = """\
from pydantic import BaseModel


class Contact(BaseModel):
    name: str
    age: int
"""


def test_typed_answers_are_checked_by_fields_and_equals_and_the_model_judges(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cases.yaml").write_text(TYPED)
    (tmp_path / "shapes.py").write_text(SHAPES)
    verdict = {"reason": "Only a first name is given.", "passed": False}
    scripted_engine.add(
        "POST", CHAT,
        answer('{"name": "Maria Lopez", "age": 40}'), answer('{"name": "Ahmed Khan", "age": 35}'),
        answer(json.dumps(verdict), 50, 9),
    )  # fmt: skip
    done = cortana_eval(tmp_path, "cases.yaml", "--json", "r.json", url=scripted_engine.url)
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["judge_model"] == "qwen0.5"
    maria, ahmed = report["models"][0]["cases"]
    [run] = maria["runs"]
    assert run["output"] == {"name": "Maria Lopez", "age": 40}
    assert run["checks"]["fields"]["passed"] is False and "'age'" in run["checks"]["fields"]["reason"]
    [run] = ahmed["runs"]
    assert run["checks"]["equals"] == {"passed": True, "reason": None}, "equals is read as a Contact"
    assert run["checks"]["judge"] == {"passed": False, "reason": "Only a first name is given."}
    assert report["models"][0]["prompt_tokens"] == 40, "the judge's tokens are not the model's"
    judged = scripted_engine.bodies(CHAT)[2]
    shown = judged["messages"][-1]["content"]
    assert "The name is a person's full name." in shown and "Ahmed Khan, 35, baker." in shown
    assert '"name":"Ahmed Khan"' in shown, "the judge reads the answer"
    assert judged["json_schema"]["required"] == ["reason", "passed"], "the verdict is a typed answer"


def write(folder: Path, text: str, name: str = "cases.yaml") -> str:
    (folder / name).write_text(text)
    return name


# (what the file says, the path given, what the message must say)
BAD_INPUT = {
    "missing-file": ("", "missing.yaml", ("missing.yaml: no such file", "docs/evals.md")),
    "bad-yaml": (
        "cases:\n  - name: a\n    input: [unclosed\n", "cases.yaml",
        ("cases.yaml: is not valid YAML at line", "column"),
    ),
    "unknown-check": (
        "cases:\n  - name: a\n    input: hi\n    regex: 'h.*'\n", "cases.yaml",
        ("key 'cases.0.regex': is not a key of a case", "equals, contains, python, fields, judge", "(case 'a')"),
    ),
    "unknown-key": (
        "prompts: []\ncases:\n  - {name: a, input: hi, contains: h}\n", "cases.yaml",
        ("key 'prompts': is not a key", "instructions, output_type"),
    ),
    "no-check": (
        "cases:\n  - name: a\n    input: hi\n", "cases.yaml",
        ("case 'a' has no check", "equals, contains, python, fields or judge"),
    ),
    "python-not-found": (
        "cases:\n  - {name: a, input: hi, python: nowhere:check}\n", "cases.yaml",
        ("key 'cases.0.python'", "cannot import 'nowhere'", "put nowhere.py beside the cases file"),
    ),
    "python-not-module-name": (
        "cases:\n  - {name: a, input: hi, python: is_short}\n", "cases.yaml",
        ("'is_short' is not module:name", "checks:is_sorted"),
    ),
    "python-no-such-name": (
        "cases:\n  - {name: a, input: hi, python: 'json:nothing_here'}\n", "cases.yaml",
        ("'json' has no 'nothing_here'; check the name after the colon",),
    ),
    "fields-untyped": (
        "cases:\n  - {name: a, input: hi, fields: {age: 4}}\n", "cases.yaml",
        ("case 'a' checks fields, but there is no output_type",),
    ),
    "same-name": (
        "cases:\n  - {name: a, input: hi, contains: h}\n  - {name: a, input: ho, contains: o}\n", "cases.yaml",
        ("two cases are named 'a'",),
    ),
    "unknown-engine": (
        "engine: lamma\ncases:\n  - {name: a, input: hi, contains: h}\n", "cases.yaml",
        ("key 'engine': no engine is called 'lamma'", "llamacpp"),
    ),
    "equals-a-list": (
        "cases:\n  - {name: a, input: hi, equals: [1, 2]}\n", "cases.yaml",
        ("case 'a': equals compares the answer's text, not a list; quote it",),
    ),
    "a-list": ("- name: a\n", "cases.yaml", ("must be a mapping with a list of cases, not a list",)),
}  # fmt: skip


@pytest.mark.parametrize(("text", "path", "said"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_status_2_with_the_cause_and_no_traceback(
    tmp_path: Path, text: str, path: str, said: tuple[str, ...]
) -> None:
    if text:
        write(tmp_path, text, path)
    done = cortana_eval(tmp_path, path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("cortana eval: ") and "Traceback" not in done.stderr, done.stderr
    for words in said:
        assert words in done.stderr, done.stderr
    assert done.stdout == ""


def test_an_unknown_model_is_status_2_before_any_engine_starts(tmp_path: Path) -> None:
    write(tmp_path, "cases:\n  - {name: a, input: hi, contains: h}\n")
    done = cortana_eval(tmp_path, "cases.yaml", "--engine", "embedded", "--models", "qwen2.5-coder-0.5b,qwen-coder-9z")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "No model named 'qwen-coder-9z'" in done.stderr and "`cortana models` lists them" in done.stderr
    assert "running" not in done.stderr, "the installed model before it did not start"


def test_bad_arguments_are_status_2(tmp_path: Path) -> None:
    write(tmp_path, "cases:\n  - {name: a, input: hi, contains: h}\n")
    done = cortana_eval(tmp_path, "cases.yaml", "--repeat", "0")
    assert done.returncode == 2 and "--repeat: must be 1 or more, got 0" in done.stderr
    done = cortana_eval(tmp_path, "cases.yaml", "--json", "no/such/folder/r.json")
    assert done.returncode == 2 and "the folder no/such/folder does not exist" in done.stderr
    done = cortana_eval(tmp_path, "cases.yaml", "--models", " , ")
    assert done.returncode == 2 and "--models: name one model or more" in done.stderr


@pytest.mark.parametrize(
    ("text", "engine", "model", "base_url"),
    [
        ("ollama:qwen2.5-coder:1.5b", "ollama", "qwen2.5-coder:1.5b", None),
        ("qwen2.5-coder:1.5b", "llamacpp", "qwen2.5-coder:1.5b", "http://127.0.0.1:9"),
        ("llama.cpp:served", "llamacpp", "served", "http://127.0.0.1:9"),
        ("hf:owner/repo/model.gguf", "llamacpp", "hf:owner/repo/model.gguf", "http://127.0.0.1:9"),
        ("", "llamacpp", None, "http://127.0.0.1:9"),
    ],
)
def test_a_model_names_its_engine_before_a_colon_only_when_it_names_one(
    text: str, engine: str, model: str | None, base_url: str | None
) -> None:
    spec = model_spec(text, engine="llamacpp", base_url="http://127.0.0.1:9")
    assert (spec.name, spec.engine, spec.model, spec.base_url) == (text, engine, model, base_url)


def test_load_cases_names_the_case_and_key_and_imports_from_the_files_folder(tmp_path: Path) -> None:
    for name, body in (("one", "def check(answer):\n    return 1\n"), ("two", "def check(answer):\n    return 2\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "checks.py").write_text(body)
        write(tmp_path / name, "cases:\n  - {name: a, input: hi, python: checks:check}\n")
    one, two = (load_cases(tmp_path / name / "cases.yaml").cases[0].python for name in ("one", "two"))
    assert one is not None and two is not None and (one(""), two("")) == (1, 2), "each file's own checks.py"
    with pytest.raises(CasesError) as caught:
        load_cases(tmp_path / write(tmp_path, "cases:\n  - {name: a, input: hi, contains: [h, '']}\n"))
    assert caught.value.key == "cases.0.contains" and "none of them empty" in str(caught.value)
    numbers = load_cases(
        tmp_path / write(tmp_path, "cases:\n  - {name: a, input: hi, equals: 4, contains: [4, 2.5]}\n")
    )
    assert (numbers.cases[0].equals, numbers.cases[0].contains) == ("4", ["4", "2.5"]), "YAML's numbers are the text"


async def test_run_eval_in_python_reports_a_failing_run_a_raising_check_and_a_score() -> None:
    def raises(answer: str) -> bool:
        raise ValueError("no good")

    cases = Cases(
        name="mixed",
        cases=[
            EvalCase(name="broken engine", input="Hi", contains="hi"),
            EvalCase(name="raising check", input="Hi", python=raises),
            EvalCase(name="score", input="Hi", python=lambda answer: len(answer) / 10, min_score=0.3),
            EvalCase(name="low score", input="Hi", python=lambda answer: 0.1),
        ],
    )
    model = ScriptedModel([ScriptedResponse(error=ModelError("the engine went away")), "fine", "four", "x"])
    report = await run_eval(cases, models=[model])
    [result] = report.models
    broken, raising, score, low = result.cases
    assert broken.runs[0].error == "ModelError: the engine went away" and not broken.runs[0].passed
    check = raising.runs[0].checks["python"]
    assert check.passed is False and "ValueError: no good" in (check.reason or "")
    assert score.runs[0].passed and score.runs[0].scores == {"python score": 0.4}
    assert not low.runs[0].passed and "scored 0.1, below 0.5" in low.runs[0].why()
    assert (result.passed, len(result.runs), report.passed) == (1, 4, False)
    assert result.evaluation.name == "scripted", "pydantic-evals' own report is kept"
    with pytest.raises(CasesError, match="key 'engine': no engine is called 'lama'"):
        await run_eval(cases, models=[model], engine="lama")


def test_importing_cortana_evals_leaves_pydantic_evals_for_the_run() -> None:
    code = "import sys, cortana.evals; print('pydantic_evals' in sys.modules, 'pydantic_ai' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(SOURCE)})  # fmt: skip
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "evals.md").read_text()
    blocks = [block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "run_eval" in block]
    assert blocks, "docs/evals.md has its Python example"
    (tmp_path / "example.py").write_text(blocks[0])
    env = {**os.environ, "PYTHONPATH": str(SOURCE), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "example.py"], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "scripted: 1/2 passed (50%)" in done.stdout, done.stdout
    shown: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{") :])
    assert shown == {"sum": True, "capital": False}


def test_the_documented_cases_file_loads_with_its_checks(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "evals.md").read_text()
    [cases_file] = re.findall(r"```yaml\n(.*?)```", text, re.S)
    checks = next(block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "is_sorted_list" in block)
    (tmp_path / "checks.py").write_text(checks)
    cases = load_cases(tmp_path / write(tmp_path, cases_file, "evals.yaml"))
    assert [case.checks() for case in cases.cases] == [["equals"], ["contains"], ["python"], ["judge"]]
    is_sorted_list = cases.cases[2].python
    assert is_sorted_list is not None and is_sorted_list("[1, 2, 3]") and not is_sorted_list("[1, 2]")
