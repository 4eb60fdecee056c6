"""Durable runs on DBOS: a run killed mid-way is finished by ``resume_run`` in another process, each finished tool
call run once, each message stored once, on SQLite and on PostgreSQL; the unfinished runs listed; clear refusals.

The crashes are real: a subprocess runs a durable run and kills itself with SIGKILL at a chosen point after its
first tool call (when the model is asked again, or while the round is being stored), and another subprocess
resumes it. The tool appends a line to a file, so the file says how many times it ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

import cortana.durable
from cortana import Agent, tool
from cortana.agent.runner import AgentRunner, AgentTask
from cortana.companion.companion import AgentCheckIn
from cortana.errors import ModelError, UserError
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import ThreadRef
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools.permissions import PermissionGate

ROOT = Path(__file__).resolve().parents[2]
THREAD = ThreadRef(thread_id="t")

SCRIPT = '''
import json, os, signal, sys
from pathlib import Path

import cortana.durable
from cortana import Agent, tool
from cortana.testing import ScriptedModel, tool_call, tool_call_response

folder, backend, where, phase, kill = Path(sys.argv[1]), *sys.argv[2:6]
if backend == "sqlite":
    from cortana.memory.sqlite import SQLiteMemory as Memory
    cortana.durable.configure(folder / "durable.db")
else:
    from cortana.memory.postgres import PostgresMemory as Memory  # runs record in the memory's own database


class Stored(Memory):
    async def append_messages(self, thread, messages):
        if kill == "storing" and phase == "start" and any(m.role == "tool" for m in messages):
            os.kill(os.getpid(), signal.SIGKILL)  # the call finished; its round is not stored yet
        await super().append_messages(thread, messages)


@tool
def count(label: str) -> str:
    """Count one call."""
    with open(folder / "calls.txt", "a") as calls:
        calls.write(label + "\\n")
    return f"counted {label}"


def asked_again(request):
    os.kill(os.getpid(), signal.SIGKILL)  # the round is stored; the model is being asked again


def agent(model):
    return Agent(model, name="counter", tools=[count], memory=Stored(where))


if phase == "start":
    model = ScriptedModel([tool_call_response(tool_call("count", label="one")), asked_again])
    agent(model).run_sync("Count once.", thread="t", run_id="run-1", durable=True)
    print("not killed")
else:
    model = ScriptedModel(["Counted once."])
    result = agent(model).resume_run_sync("run-1")
    shown = [(m.role, m.content) for m in model.requests[0].messages]
    print(json.dumps({"output": result.output, "asked": len(model.requests), "shown": shown}))
'''


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _script(folder: Path, backend: str, where: str, phase: str, kill: str) -> subprocess.CompletedProcess[str]:
    (folder / "durable_script.py").write_text(SCRIPT)
    argv = [sys.executable, "durable_script.py", str(folder), backend, where, phase, kill]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=folder, env=_env())


@pytest.fixture(autouse=True)
def _own_dbos() -> Iterator[None]:
    """Each test records where it says; DBOS is stopped after it (one system database a process)."""
    yield
    cortana.durable.shutdown()
    cortana.durable.configure(None)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The memory the scripts use, as (backend, file or DSN): a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "memory.db")
        return
    try:
        server = request.getfixturevalue("postgres_server")
    except Exception as error:  # pgserver could not start here
        pytest.skip(f"PostgreSQL (pgserver) did not start: {error}")
    from psycopg.conninfo import make_conninfo

    database = f"t_{uuid.uuid4().hex[:12]}"
    server.psql(f"CREATE DATABASE {database};")
    yield "postgres", make_conninfo(server.get_uri(), dbname=database)


def _memory(backend: str, where: str) -> Any:
    if backend == "sqlite":
        return SQLiteMemory(where)
    from cortana.memory.postgres import PostgresMemory

    return PostgresMemory(where)


@pytest.mark.parametrize(
    ("kill", "recorded"),
    [
        ("asked", 6),  # history, context, the user's message stored, the model's call, the tool call, the round stored
        ("storing", 5),  # the same but the round: killed while it was being stored
    ],
)
def test_a_killed_run_is_finished_by_resume_run_each_tool_call_run_once(
    store: tuple[str, str], kill: str, recorded: int, tmp_path: Path
) -> None:
    backend, where = store
    started = _script(tmp_path, backend, where, "start", kill)
    assert started.returncode == -signal.SIGKILL, started.stdout + started.stderr
    assert (tmp_path / "calls.txt").read_text().splitlines() == ["one"], "the tool ran before the kill"

    memory = _memory(backend, where)
    if backend == "sqlite":
        cortana.durable.configure(tmp_path / "durable.db")
    try:
        before = asyncio.run(cortana.durable.unfinished_runs(memory))
        assert [(run.run_id, run.prompt, run.agent, run.thread.thread_id) for run in before] == [
            ("run-1", "Count once.", "counter", "t")
        ]
        assert before[0].steps == recorded

        resumed = _script(tmp_path, backend, where, "resume", kill)
        assert resumed.returncode == 0, resumed.stderr
        outcome = json.loads(resumed.stdout.strip().splitlines()[-1])
        assert outcome["output"] == "Counted once."
        assert outcome["asked"] == 1, "the model's first answer came from the record, not the model"
        assert outcome["shown"] == [["user", "Count once."], ["assistant", ""], ["tool", "counted one"]], (
            "the model is shown the history the run started with and the recorded round, each once"
        )
        assert (tmp_path / "calls.txt").read_text().splitlines() == ["one"], "the finished call did not run again"

        history = asyncio.run(memory.load_history(THREAD))
        assert [(m.role, m.content, [c.name for c in m.tool_calls]) for m in history] == [
            ("user", "Count once.", []),
            ("assistant", "", ["count"]),
            ("tool", "counted one", []),
            ("assistant", "Counted once.", []),
        ], "each message stored once"
        assert asyncio.run(cortana.durable.unfinished_runs(memory)) == []
    finally:
        memory.close()


@tool
def note(text: str) -> str:
    """Keep a note."""
    return f"noted {text}"


def _agent(model: ScriptedModel, tmp_path: Path, **options: Any) -> Agent:
    return Agent(model, name="notes", tools=[note], memory=SQLiteMemory(tmp_path / "memory.db"), **options)


async def test_each_model_call_tool_call_and_memory_write_is_a_dbos_step(tmp_path: Path) -> None:
    from dbos import DBOS

    cortana.durable.configure(tmp_path / "durable.db")
    model = ScriptedModel([tool_call_response(tool_call("note", text="milk")), "Noted."])
    result = await _agent(model, tmp_path).run("Note milk", thread="t", run_id="notes-1", durable=True)
    assert result.output == "Noted."
    steps = [step["function_name"] for step in await DBOS.list_workflow_steps_async("notes-1")]
    assert steps == [
        "cortana.memory.history",
        "cortana.memory.context",
        "cortana.memory.append",
        "cortana.model_call",
        "cortana.tool:note",
        "cortana.memory.append",
        "cortana.model_call",
        "cortana.memory.append",
    ]
    status = await DBOS.get_workflow_status_async("notes-1")
    assert status is not None
    assert (status.name, status.status) == (cortana.durable.WORKFLOW, "SUCCESS")


async def test_resume_run_refuses_an_unknown_run_id(tmp_path: Path) -> None:
    cortana.durable.configure(tmp_path / "durable.db")
    with pytest.raises(UserError, match=r"No durable run 'nope' in sqlite:///.*durable\.db.*unfinished\(\)"):
        await _agent(ScriptedModel(), tmp_path).resume_run("nope")


async def test_a_finished_run_is_neither_resumed_nor_run_again(tmp_path: Path) -> None:
    cortana.durable.configure(tmp_path / "durable.db")
    model = ScriptedModel(["Done."])
    await _agent(model, tmp_path).run("Hi", run_id="once", durable=True)
    with pytest.raises(UserError, match="'once' finished already; there is nothing to resume"):
        await _agent(model, tmp_path).resume_run("once")
    with pytest.raises(UserError, match=r"'once' exists already \(success\): give this run another run_id"):
        await _agent(model, tmp_path).run("Hi", run_id="once")
    assert len(model.requests) == 1


async def test_a_run_that_raises_gives_its_own_error_and_is_not_resumed(tmp_path: Path) -> None:
    cortana.durable.configure(tmp_path / "durable.db")
    with pytest.raises(ModelError, match="ScriptedModel has 0 scripted answers"):
        await _agent(ScriptedModel(), tmp_path).run("Hi", run_id="broken", durable=True)
    with pytest.raises(UserError, match="'broken' ended with an error and cannot be resumed"):
        await _agent(ScriptedModel(["x"]), tmp_path).resume_run("broken")
    assert await cortana.durable.unfinished_runs() == []
    with pytest.raises(UserError, match=r"record in sqlite:///.*durable\.db already; shutdown\(\) first"):
        cortana.durable.configure(tmp_path / "elsewhere.db")


async def test_a_cancelled_run_stays_unfinished_and_only_its_own_agent_resumes_it(tmp_path: Path) -> None:
    """Two calls at once, each allowed by a person: cut off before the model's next answer, the run is resumed with
    neither call run again nor the person asked again."""
    cortana.durable.configure(tmp_path / "durable.db")
    ran: list[str] = []
    asked: list[str] = []
    blocked = asyncio.Event()

    @tool
    async def slow(text: str) -> str:
        """A call that takes a while."""
        await asyncio.sleep(0.05 if text == "a" else 0.01)  # b finishes first: the record keeps request order
        ran.append(text)
        return f"done {text}"

    def approve(call: Any, tool: Any, reason: str) -> bool:
        asked.append(call.arguments["text"])
        return True

    async def hang(request: Any) -> str:
        blocked.set()
        await asyncio.sleep(3600)
        return "never"

    def worker(model: ScriptedModel, name: str = "worker", tools: Any = (slow,)) -> Agent:
        gate = PermissionGate(rules={"slow": "ask"}, approve=approve)
        return Agent(model, name=name, tools=tools, permissions=gate, memory=SQLiteMemory(tmp_path / "memory.db"))

    calls = tool_call_response(tool_call("slow", text="a"), tool_call("slow", text="b"))
    running = asyncio.create_task(worker(ScriptedModel([calls, hang])).run("Work", thread="t", run_id="work-1"))
    await blocked.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert (sorted(ran), asked) == (["a", "b"], ["a", "b"])

    listed = await cortana.durable.unfinished_runs()
    assert [(run.run_id, run.prompt) for run in listed] == [("work-1", "Work")]
    assert listed[0].steps == 9, "history, context, the message, the model, two decisions, two calls, the round"
    with pytest.raises(UserError, match="started by agent 'worker'; agent 'other' cannot resume it"):
        await worker(ScriptedModel(["x"]), name="other").resume_run("work-1")
    with pytest.raises(UserError, match=r"other tools \(note, slow differ"):
        await worker(ScriptedModel(["x"]), tools=[note]).resume_run("work-1")

    again = ScriptedModel(["Worked."])
    result = await worker(again).resume_run("work-1")
    assert (result.output, sorted(ran), asked, len(again.requests)) == ("Worked.", ["a", "b"], ["a", "b"], 1)
    shown = [(m.role, m.content) for m in again.requests[0].messages]
    assert shown == [("user", "Work"), ("assistant", ""), ("tool", "done a"), ("tool", "done b")]
    assert await cortana.durable.unfinished_runs() == []


async def test_a_durable_runner_gives_each_task_a_run_id(tmp_path: Path) -> None:
    from dbos import DBOS

    cortana.durable.configure(tmp_path / "durable.db")

    async def echo(request: Any) -> str:
        await asyncio.sleep(0.01)  # both runs under way at once
        return request.messages[-1].content.upper()

    agent = Agent(ScriptedModel([echo, echo]), name="batch")
    async with AgentRunner(agent, durable=True, max_concurrency=2) as runner:
        batch = await runner.run([AgentTask("one", run_id="task-a"), "two"])
    ids = [outcome.task.run_id for outcome in batch]
    assert ids[0] == "task-a" and ids[1] and ids[1] != "task-a"
    for run_id in ids:
        status = await DBOS.get_workflow_status_async(run_id or "")
        assert status is not None and status.status == "SUCCESS", run_id
    assert [outcome.result.output for outcome in batch if outcome.result] == ["ONE", "TWO"]
    with pytest.raises(UserError, match="local backend only"):
        AgentRunner(lambda: agent, backend="ray", durable=True)


async def test_a_durable_check_in_is_a_durable_run(tmp_path: Path) -> None:
    from dbos import DBOS

    cortana.durable.configure(tmp_path / "durable.db")
    agent = Agent(ScriptedModel(["Time to stretch."]), name="companion", memory=SQLiteMemory(tmp_path / "memory.db"))
    assert await AgentCheckIn(agent, THREAD, durable=True)("checklist") == "Time to stretch."
    runs = await DBOS.list_workflows_async(name=cortana.durable.WORKFLOW)
    assert [(run.workflow_id.startswith("check-in-"), run.status) for run in runs] == [(True, "SUCCESS")]


def test_the_database_is_chosen_as_documented(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTANA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CORTANA_DURABLE_DB", raising=False)
    assert cortana.durable.database_url() == f"sqlite:///{tmp_path / 'data' / 'durable.db'}"

    class Postgres:  # what PostgresMemory has: its store's connection string
        class store:
            dsn = "host=/run/pg user=me dbname=notes"

    assert cortana.durable.database_url(Postgres()) == "postgresql://me@/notes?host=%2Frun%2Fpg"
    monkeypatch.setenv("CORTANA_DURABLE_DB", str(tmp_path / "runs.db"))
    assert cortana.durable.database_url(Postgres()) == f"sqlite:///{tmp_path / 'runs.db'}"
    cortana.durable.configure("postgresql://me@db/runs")
    assert cortana.durable.database_url() == "postgresql://me@db/runs"


def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "durable.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/durable.md has its example"
    (tmp_path / "example.py").write_text(blocks[0])

    def example() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "example.py"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env())

    first = example()
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    second = example()
    assert second.returncode == 0, second.stderr
    assert "unfinished: invoice-acme 'Send ACME its invoice' (6 steps)" in second.stdout
    assert "ACME has its invoice." in second.stdout
    assert "invoices sent: 1" in second.stdout
