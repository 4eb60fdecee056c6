"""AgentRunner(backend="ray") on a real Ray cluster: two nodes started on this machine.

Scripted-model agents are built by factories on the Ray workers; what they did there (which node,
which process, when) they write to files the tests read. Covered: order and metrics, failure
isolation, timeouts and cancellation reaching the workers, a worker that will not stop, the total
and per-node bounds, a worker killed mid-run; and, apart from the cluster, the checks of the
settings, an Agent refused, and a runner that starts its own Ray (ray not imported before).
About 30 s on 2 cores: 7 s to start the cluster, 9 s for the runner that starts its own Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana import Agent, AgentLogger, MaxToolIterationsError, ModelError, UserError
from cortana.agent import ray_runner
from cortana.agent.ray_runner import WorkerDiedError
from cortana.agent.runner import AgentRunner, AgentTask
from cortana.models.base import ModelRequest
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

STEPS = 100
"""Scripted answers per agent: one agent serves every task its worker runs."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[str]]:
    """Two Ray nodes of two (logical) CPUs each; yields their node ids."""
    nodes = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    nodes.add_node(num_cpus=2)
    ray.init(address=nodes.address, log_to_driver=False)
    try:
        nodes.wait_for_nodes()
        yield [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    finally:
        ray.shutdown()
        nodes.shutdown()


# -- factories: module-level functions (and partials of them), built on the workers ----------------


def recording_agent(log: str, delay: float = 0.2) -> Agent:
    """Answers "answer to PROMPT" after ``delay`` seconds; appends node, pid, start and end to ``log``."""

    async def answer(request: ModelRequest) -> str:
        began = time.time()
        await asyncio.sleep(delay)
        node = ray.get_runtime_context().get_node_id()
        append(log, {"node": node, "pid": os.getpid(), "began": began, "ended": time.time()})
        return f"answer to {request.messages[-1].content}"

    return Agent(ScriptedModel([answer] * STEPS))


def failing_agent() -> Agent:
    return Agent(ScriptedModel([ScriptedResponse(error=ModelError("engine died"))] * STEPS))


def looping_agent() -> Agent:
    """Calls a tool every turn, so the run stops at max_tool_iterations=2."""

    def lookup() -> str:
        """Look something up."""
        return "nothing yet"

    script = [tool_call_response(tool_call("lookup"))] * STEPS
    return Agent(ScriptedModel(script), tools=[lookup], max_tool_iterations=2, nudge_repeated_calls=False)


def crashing_agent() -> Agent:
    """Its one tool kills the worker process, as a segfault or the OOM killer would."""

    def crash() -> str:
        """Crash."""
        os.kill(os.getpid(), signal.SIGKILL)
        return "unreachable"

    return Agent(ScriptedModel([tool_call_response(tool_call("crash")), "never sent"] * STEPS), tools=[crash])


def marking_agent(folder: str, seconds: float) -> Agent:
    """Writes started-PID when a run starts and finished-PID after ``seconds``."""

    async def answer(request: ModelRequest) -> str:
        mark(folder, "started")
        await asyncio.sleep(seconds)
        mark(folder, "finished")
        return "done"

    return Agent(ScriptedModel([answer] * STEPS))


def append(log: str, record: dict[str, object]) -> None:
    with open(log, "a") as file:
        file.write(json.dumps(record) + "\n")


def mark(folder: str, what: str) -> None:
    Path(folder, f"{what}-{os.getpid()}").touch()


def marked(folder: Path, what: str) -> list[int]:
    """The pids of the workers that wrote a ``what`` mark."""
    return [int(path.name.split("-")[1]) for path in folder.glob(f"{what}-*")]


def stubborn_agent(folder: str) -> Agent:
    """Its run swallows cancellation and carries on for 5 s, as a run stuck in a C call would."""

    async def answer(request: ModelRequest) -> str:
        mark(folder, "started")
        for _ in range(50):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.1)
        return "late"

    return Agent(ScriptedModel([answer] * STEPS))


def records(log: Path) -> list[dict[str, float | str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def peak(runs: list[dict[str, float | str]]) -> int:
    """The most runs that overlapped in time."""
    edges = sorted([(float(run["began"]), 1) for run in runs] + [(float(run["ended"]), -1) for run in runs])
    current = highest = 0
    for _, step in edges:
        current += step
        highest = max(highest, current)
    return highest


# -- without a cluster -------------------------------------------------------------------------------


async def test_an_agent_instance_is_refused_with_the_fix() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    with pytest.raises(UserError, match="Give a factory instead"):
        AgentRunner(agent, backend="ray")
    with pytest.raises(UserError, match=r"Task 1's AgentTask\(agent=...\) is an Agent"):
        await AgentRunner(failing_agent, backend="ray").run(["a", AgentTask("b", agent=agent)])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"backend": "spark"}, "backend must be 'local' or 'ray'"),
        ({"backend": "ray", "address": 6379}, "address must be None or a string"),
        ({"backend": "ray", "max_per_node": 0}, "max_per_node must be at least 1"),
        ({"address": "auto"}, "are settings of backend='ray'"),
    ],
)
def test_bad_settings_are_user_errors(settings: dict[str, object], message: str) -> None:
    with pytest.raises(UserError, match=message):
        AgentRunner(failing_agent, **settings)  # type: ignore[arg-type]


def test_the_runner_starts_ray_only_when_it_runs_and_shuts_down_what_it_started(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        import cortana
        from cortana.agent.runner import AgentRunner
        from cortana.testing import ScriptedModel

        def make_agent():
            return cortana.Agent(ScriptedModel(["pong"] * 5))

        runner = AgentRunner(make_agent, backend="ray", ray_init={"num_cpus": 1})
        print("ray" in sys.modules)

        async def main():
            async with runner:
                batch = await runner.run(["ping", "ping"])
                print([outcome.result.output for outcome in batch])
            import ray
            print(ray.is_initialized())

        asyncio.run(main())
        """
    )
    (tmp_path / "job.py").write_text(script)
    env = {**os.environ, "RAY_ADDRESS": "local"}  # a new instance, even while this module's cluster is up
    out = subprocess.run(
        [sys.executable, str(tmp_path / "job.py")], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert out.stdout.splitlines() == ["False", "['pong', 'pong']", "False"], out.stderr[-3000:]


# -- on the cluster ----------------------------------------------------------------------------------


async def test_outcomes_come_back_in_input_order_with_metrics(cluster: list[str], tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    buffer = io.StringIO()
    factory = functools.partial(recording_agent, str(log), 0.3)
    runner = AgentRunner(factory, backend="ray", max_concurrency=4, max_per_node=1, logger=AgentLogger(file=buffer))
    batch = await runner.run([f"q{i}" for i in range(6)])
    assert [outcome.result.output if outcome.result else outcome.error for outcome in batch] == [
        f"answer to q{i}" for i in range(6)
    ]
    assert batch.metrics.model_calls == 6 and batch.metrics.prompt_tokens > 0
    assert all(outcome.metrics.model_calls == 1 and outcome.duration > 0.3 for outcome in batch)
    assert len(buffer.getvalue().splitlines()) == 6 and "✓ task 1" in buffer.getvalue()
    ran = records(log)
    assert os.getpid() not in {run["pid"] for run in ran}, "the runs happen in Ray workers, not here"
    assert [peak([run for run in ran if run["node"] == node]) for node in cluster] == [1, 1], "max_per_node=1"
    assert peak(ran) == 2


async def test_the_total_bound_holds_and_runs_spread_over_the_nodes(cluster: list[str], tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    runner = AgentRunner(functools.partial(recording_agent, str(log), 0.3), backend="ray", max_concurrency=3)
    batch = await runner.run([f"q{i}" for i in range(9)])
    assert not batch.failed
    ran = records(log)
    assert peak(ran) == 3
    assert sorted(peak([run for run in ran if run["node"] == node]) for node in cluster) == [1, 2]


async def test_a_failing_task_keeps_its_error_and_the_others_run(cluster: list[str], tmp_path: Path) -> None:
    echo = functools.partial(recording_agent, str(tmp_path / "runs.log"), 0.0)
    tasks = [AgentTask("a"), AgentTask("boom", agent=failing_agent), AgentTask("loop", agent=looping_agent), "d"]
    batch = await AgentRunner(echo, backend="ray", max_concurrency=2).run(tasks)
    assert [outcome.ok for outcome in batch] == [True, False, False, True]
    assert isinstance(batch[1].error, ModelError) and str(batch[1].error) == "engine died"
    assert "Raised on a Ray worker" in "".join(getattr(batch[1].error, "__notes__", []))
    assert isinstance(batch[2].error, MaxToolIterationsError) and batch[2].error.iterations == 2
    assert batch[2].metrics.tool_calls == 2, "the partial metrics come back with the error"


async def test_a_run_past_its_timeout_is_cancelled_on_its_worker(cluster: list[str], tmp_path: Path) -> None:
    slow = functools.partial(marking_agent, str(tmp_path), 10.0)  # far past the timeout: slack for a loaded machine
    log = tmp_path / "runs.log"
    runner = AgentRunner(
        functools.partial(recording_agent, str(log), 0.0), backend="ray", max_concurrency=1, timeout=1.0
    )
    batch = await runner.run([AgentTask("slow", agent=slow), "fast"])
    assert isinstance(batch[0].error, TimeoutError) and "did not finish within 1s" in str(batch[0].error)
    assert batch[0].duration < 5 and batch[1].ok
    assert [records(log)[0]["pid"]] == marked(tmp_path, "started"), (
        "the worker stopped the cancelled run and took the next task (one that ignored ray.cancel would be replaced)"
    )
    assert batch.elapsed < 9 and not marked(tmp_path, "finished")


async def test_a_worker_that_will_not_stop_is_replaced(
    cluster: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_runner, "RECYCLE_GRACE", 0.5)
    log = tmp_path / "runs.log"
    stubborn = functools.partial(stubborn_agent, str(tmp_path))
    runner = AgentRunner(
        functools.partial(recording_agent, str(log), 0.0), backend="ray", max_concurrency=1, timeout=0.5
    )
    batch = await runner.run([AgentTask("stuck", agent=stubborn), "next"])
    assert isinstance(batch[0].error, TimeoutError) and batch[1].ok
    assert [records(log)[0]["pid"]] != marked(tmp_path, "started"), "the next task ran on a new worker"


async def test_cancelling_the_runner_cancels_the_ray_tasks(cluster: list[str], tmp_path: Path) -> None:
    runner = AgentRunner(functools.partial(marking_agent, str(tmp_path), 5.0), backend="ray", max_concurrency=2)
    job = asyncio.create_task(runner.run([f"q{i}" for i in range(4)]))
    for _ in range(100):
        if len(marked(tmp_path, "started")) == 2:
            break
        await asyncio.sleep(0.1)
    pids = marked(tmp_path, "started")
    assert len(pids) == 2, "two runs started, the other two wait for a slot"
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    for _ in range(100):
        if not any(alive(pid) for pid in pids):
            break
        await asyncio.sleep(0.1)
    assert not any(alive(pid) for pid in pids), "the workers are gone"
    assert not marked(tmp_path, "finished") and sorted(marked(tmp_path, "started")) == sorted(pids)


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting for its parent counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


async def test_a_killed_worker_fails_only_its_task(cluster: list[str], tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    echo = functools.partial(recording_agent, str(log), 0.1)
    tasks = [AgentTask("crash", agent=crashing_agent), *[f"q{i}" for i in range(5)]]
    batch = await AgentRunner(echo, backend="ray", max_concurrency=2).run(tasks)
    error = batch[0].error
    assert isinstance(error, WorkerDiedError) and isinstance(error.__cause__, ray.exceptions.RayActorError)
    assert "The Ray worker running task 1 died" in str(error) and "the other tasks ran on" in str(error)
    assert [outcome.ok for outcome in batch[1:]] == [True] * 5
    assert len(records(log)) == 5


async def test_a_factory_that_cannot_travel_is_a_user_error(cluster: list[str]) -> None:
    lock = threading.Lock()

    def holds_a_lock() -> Agent:
        with lock:
            return failing_agent()

    with pytest.raises(UserError, match="cannot be sent to Ray workers"):
        await AgentRunner(holds_a_lock, backend="ray").run(["q"])


LISTENING = """
def listening(port):
    # the addresses a LISTEN socket on ``port`` is bound to, from /proc/net/tcp and tcp6
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.append(address)
    return found
"""


def test_a_local_ray_instance_listens_on_loopback_only_and_keeps_its_token_private(tmp_path: Path) -> None:
    """Reported: the runner's local Ray instance listened on all interfaces, trusting a token in a 0644 file."""
    script = LISTENING + textwrap.dedent(
        """
        import asyncio, os, stat
        from pathlib import Path
        import cortana
        from cortana.agent.runner import AgentRunner
        from cortana.testing import ScriptedModel

        def make_agent():
            return cortana.Agent(ScriptedModel(["pong"] * 5))

        async def main():
            async with AgentRunner(make_agent, backend="ray", ray_init={"num_cpus": 1}) as runner:
                batch = await runner.run(["ping"])
                import ray
                gcs_host, gcs_port = ray.get_runtime_context().gcs_address.rsplit(":", 1)
                print(batch[0].result.output, gcs_host, sorted({n["NodeManagerAddress"] for n in ray.nodes()}))
                print(sorted(set(listening(int(gcs_port)))))
                token = Path.home() / ".ray" / "auth_token"
                print(oct(stat.S_IMODE(token.stat().st_mode)) if token.exists() else "no token")

        asyncio.run(main())
        """
    )
    (tmp_path / "job.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    env["HOME"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, str(tmp_path / "job.py")], capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stderr[-3000:]
    assert lines[0] == "pong 127.0.0.1 ['127.0.0.1']"
    assert lines[1] in ("['0100007F']", "['0000000000000000FFFF00000100007F']"), f"GCS listens on {lines[1]}"
    assert lines[2] in ("0o600", "no token")
