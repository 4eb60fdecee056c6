"""A turn whose answer is a typed value: the loop's run, then the answer as JSON, validated (``agent/output.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator

from cortana.agent.events import RunEvent, RunFinished
from cortana.agent.loop import run_events
from cortana.agent.output import OutputSpec, OutputValidationError
from cortana.agent.run import TurnRequest
from cortana.agent.run_config import RunConfig, RunDeps
from cortana.messages import RunResult

__all__ = ["typed_run_events"]


async def typed_run_events(
    config: RunConfig, deps: RunDeps, request: TurnRequest, spec: OutputSpec
) -> AsyncGenerator[RunEvent, None]:
    """The turn's events, its ``RunFinished`` carrying the validated value as ``output``."""
    constrain_first = not deps.tools and not deps.tool_groups
    first = dataclasses.replace(request, settings=spec.settings(request.settings)) if constrain_first else request
    results: list[RunResult] = []
    async for event in _passing_on(config, deps, first, results):
        yield event
    result = results[0]
    metrics, text = result.metrics, result.output
    value, problem = spec.parse(text)  # an agent with tools may have answered in JSON already
    history = list(request.history) if deps.memory is None else []
    if deps.memory is None:
        history += result.new_messages  # without memory, the follow-up sees the turn through ``history``
    asked = problem is not None and not constrain_first  # then ask for the JSON, without calling it a mistake
    retries = 0
    while problem is not None:
        if not asked and retries >= config.output_retries:
            raise OutputValidationError(
                f"The answer did not validate as {getattr(spec.type, '__name__', spec.type)!s} after "
                f"{retries + 1} attempts: {problem}",
                attempt=text,
                problem=problem,
            )
        prompt = spec.ask(None if asked else text, problem)
        if not asked:
            retries += 1
        asked = False
        follow = TurnRequest(
            prompt,
            request.thread,
            history=history,
            settings=spec.settings(request.settings),
            remember=False,  # the thread keeps the turn's own answer, not the asking for JSON
            unattended=request.unattended,
            extensions=(),
            use_tools=False,
        )
        async for event in _passing_on(config, deps, follow, results):
            yield event
        followed = results[-1]
        metrics = metrics.merge(followed.metrics)
        text = followed.output
        value, problem = spec.parse(text)
    yield RunFinished(result.model_copy(update={"output": value, "metrics": metrics}))


async def _passing_on(
    config: RunConfig, deps: RunDeps, request: TurnRequest, results: list[RunResult]
) -> AsyncGenerator[RunEvent, None]:
    """A run's events but its ``RunFinished``, whose result is appended to ``results``."""
    async for event in run_events(config, deps, request):
        if isinstance(event, RunFinished):
            results.append(event.result)
        else:
            yield event
