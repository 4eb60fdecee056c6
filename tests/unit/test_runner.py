"""AgentRunner: order, failure isolation, timeouts, cancellation, the concurrency bound, totals."""

from __future__ import annotations

import asyncio
import importlib.util
import io

import pytest

from cortana import Agent, AgentLogger, ModelError, UserError
from cortana.agent.runner import AgentRunner, AgentTask
from cortana.models.base import ModelRequest
from cortana.testing import ScriptedModel, ScriptedResponse


class Gauge:
    """A model answer that records how many runs are in flight."""

    def __init__(self) -> None:
        self.current = 0
        self.peak = 0

    def step(self, delay: float = 0.05):  # type: ignore[no-untyped-def]
        async def answer(request: ModelRequest) -> str:
            self.current += 1
            self.peak = max(self.peak, self.current)
            try:
                await asyncio.sleep(delay)
            finally:
                self.current -= 1
            return f"answer to {request.messages[-1].content}"

        return answer


def agent_for(gauge: Gauge, count: int, delay: float = 0.05) -> Agent:
    return Agent(ScriptedModel([gauge.step(delay) for _ in range(count)]))


async def test_outcomes_come_back_in_input_order_with_totals() -> None:
    gauge = Gauge()
    runner = AgentRunner(agent_for(gauge, 8), max_concurrency=3)
    batch = await runner.run([f"q{i}" for i in range(8)])
    assert len(batch) == 8 and all(outcome.ok for outcome in batch)
    assert {outcome.result.output for outcome in batch if outcome.result} == {f"answer to q{i}" for i in range(8)}
    assert [outcome.task.prompt for outcome in batch] == [f"q{i}" for i in range(8)]
    assert batch.metrics.model_calls == 8 and batch.metrics.prompt_tokens > 0
    assert batch.metrics.elapsed < sum(outcome.duration for outcome in batch)


async def test_the_concurrency_bound_is_respected() -> None:
    gauge = Gauge()
    await AgentRunner(agent_for(gauge, 10), max_concurrency=4).run([f"q{i}" for i in range(10)])
    assert gauge.peak == 4


async def test_one_failure_does_not_cancel_the_others() -> None:
    failing = Agent(ScriptedModel([ScriptedResponse(error=ModelError("engine died"))]))
    gauge = Gauge()
    tasks = [AgentTask("a"), AgentTask("boom", agent=failing), AgentTask("c")]
    batch = await AgentRunner(agent_for(gauge, 2), max_concurrency=2).run(tasks)
    assert [outcome.ok for outcome in batch] == [True, False, True]
    assert isinstance(batch[1].error, ModelError) and batch.failed == [batch[1]]


async def test_a_run_past_its_timeout_ends_with_timeout_error() -> None:
    slow = Agent(ScriptedModel([ScriptedResponse(text="late", delay=2)]))
    gauge = Gauge()
    batch = await AgentRunner(agent_for(gauge, 1), timeout=0.2).run([AgentTask("slow", agent=slow), "fast"])
    assert isinstance(batch[0].error, TimeoutError) and "did not finish within 0.2s" in str(batch[0].error)
    assert batch[0].duration < 1 and batch[1].ok


async def test_cancelling_the_runner_cancels_every_run() -> None:
    gauge = Gauge()
    runner = AgentRunner(agent_for(gauge, 6, delay=5), max_concurrency=3)
    job = asyncio.create_task(runner.run([f"q{i}" for i in range(6)]))
    await asyncio.sleep(0.1)
    assert gauge.current == 3
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert gauge.current == 0, "no run is left behind"


async def test_a_task_needs_an_agent() -> None:
    with pytest.raises(UserError, match="has no agent"):
        await AgentRunner().run(["q"])


async def test_progress_rows_per_task() -> None:
    buffer = io.StringIO()
    failing = Agent(ScriptedModel([ScriptedResponse(error=ModelError("engine died"))]))
    gauge = Gauge()
    runner = AgentRunner(agent_for(gauge, 1), logger=AgentLogger(file=buffer))
    await runner.run([AgentTask("a", name="first"), AgentTask("b", agent=failing, name="second")])
    rows = sorted(buffer.getvalue().splitlines(), key=lambda row: "second" in row)
    assert rows[0].startswith("✓ first") and "1 model calls" in rows[0]
    assert rows[1].startswith("✗ second") and "ModelError: engine died" in rows[1]


async def test_a_factory_is_built_once_and_its_agent_closed_with_the_runner() -> None:
    built: list[ScriptedModel] = []
    closed: list[ScriptedModel] = []

    class ClosingModel(ScriptedModel):
        async def aclose(self) -> None:
            closed.append(self)

    async def make_agent() -> Agent:
        await asyncio.sleep(0.01)  # the first tasks all wait on this one build
        built.append(ClosingModel(["done"] * 4))
        return Agent(built[-1])

    async with AgentRunner(make_agent, max_concurrency=4) as runner:
        batch = await runner.run(["a", "b", "c", "d"])
    assert all(outcome.ok for outcome in batch)
    assert len(built) == 1 and closed == built


async def test_a_timeout_error_of_the_run_itself_is_kept_as_it_is() -> None:
    failing = Agent(ScriptedModel([ScriptedResponse(error=TimeoutError("engine read timed out"))]))
    batch = await AgentRunner(failing, timeout=30).run(["q"])
    assert isinstance(batch[0].error, TimeoutError) and str(batch[0].error) == "engine read timed out"


def test_a_factory_must_be_callable() -> None:
    with pytest.raises(UserError, match="an Agent or a function that builds one"):
        AgentRunner("not an agent")  # type: ignore[arg-type]


def test_the_ray_backend_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *rest: None if name == "ray" else find_spec(name, *rest)
    )
    with pytest.raises(UserError, match=r"pip install 'cortana\[ray\]'"):
        AgentRunner(lambda: Agent(ScriptedModel(["hi"])), backend="ray")
