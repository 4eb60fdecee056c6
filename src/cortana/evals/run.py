"""``run_eval``: ask every case of a ``Cases`` on each model, one after another, and report what passed.

Each model is connected in turn (an embedded one started, and stopped after its cases) and its cases go through
pydantic-evals' ``Dataset.evaluate``: each case asked in a new conversation of an ``Agent`` with the cases'
instructions and output type, one at a time (a local engine answers one prompt at a time, and the times are the
model's own), its checks run as evaluators. The judge model, when a case has a ``judge`` check, is connected once
and stays for every model; when it is one of the models, that model's client judges.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from cortana.agent.agent import Agent
from cortana.config import Settings, load_settings
from cortana.engines import UnknownEngine, engine_named
from cortana.evals.cases import Cases, CasesError, load_cases
from cortana.evals.report import TOKEN_METRICS, CaseResult, CaseRun, CheckResult, EvalReport, ModelReport
from cortana.messages import ThreadRef
from cortana.models.base import ModelClient, ModelSettings

__all__ = ["ModelSpec", "model_spec", "run_eval"]


@dataclass(frozen=True)
class ModelSpec:
    """A model to evaluate, as it was named.

    Attributes:
        name: the name as given (``qwen2.5-coder-0.5b``, ``ollama:qwen2.5-coder:1.5b``); '' for the default model.
        engine: the engine it runs on (None: ``--engine``, cortana.yml, else the first found).
        model: its name on that engine (None: the engine's own).
        base_url: the engine's address (None: its usual one).
    """

    name: str
    engine: str | None = None
    model: str | None = None
    base_url: str | None = None


Model = ModelSpec | ModelClient
"""A model to evaluate: as named, or a connected client."""


def model_spec(text: str | None, *, engine: str | None = None, base_url: str | None = None) -> ModelSpec:
    """``ENGINE:MODEL`` (``ollama:qwen2.5-coder:1.5b``) or a model on ``engine`` (``qwen2.5-coder-0.5b``).

    The part before the first colon is an engine only when it names one, so Ollama's ``name:tag`` alone is a model.
    ``base_url`` goes with ``engine``: not to a model that names another engine.
    """
    text = (text or "").strip()
    prefix, colon, rest = text.partition(":")
    if colon and rest:
        try:
            named = engine_named(prefix).name
        except UnknownEngine:
            named = None
        if named is not None:
            same = engine is None or engine_named(engine).name == named
            return ModelSpec(text, named, rest, base_url if same else None)
    return ModelSpec(text, engine, text or None, base_url)


async def run_eval(
    cases: Cases | Path | str,
    *,
    models: Sequence[str | ModelClient] = (),
    engine: str | None = None,
    base_url: str | None = None,
    judge_model: str | ModelClient | None = None,
    repeat: int = 1,
    max_concurrency: int = 1,
    context_window: int | None = None,
    threads: int | None = None,
    settings: Settings | None = None,
    progress: Callable[[str], None] | None = None,
) -> EvalReport:
    """Run every case on each model and return the report (``report.tables()``, ``report.to_json()``).

    Args:
        cases: the cases, or the path of a cases file (``load_cases``).
        models: model names (``qwen2.5-coder-0.5b``, ``ollama:NAME``, ``ENGINE:NAME``; see :func:`model_spec`) or
            connected clients (yours to close); default: the cases' ``models``, else the configured model.
        engine: the engine of the names that name none (default: the cases', else cortana.yml's, else found).
        base_url: that engine's address.
        judge_model: the model that judges ``judge`` checks, a name or a client (default: the cases', else the
            first model).
        repeat: runs of each case (for a temperature above 0); the report gives pass rates.
        max_concurrency: cases asked at once (1: one after another, the times each the model's own).
        context_window: the window to ask for (the embedded engine's size).
        threads: CPU threads for the embedded engine.
        settings: where what is not given comes from (default: cortana.yml of the current folder).
        progress: told a line as each model starts.

    Raises:
        CasesError: the cases cannot be run (a bad file, ``repeat`` below 1).
        CortanaError: a model cannot be found or reached (``ModelNotFound``, ``EngineUnavailable``...). A run or a
            check that fails is a failed case in the report, never an exception.
    """
    if not isinstance(cases, Cases):
        cases = load_cases(cases)
    if repeat < 1 or max_concurrency < 1:
        raise CasesError("must be 1 or more", key="repeat" if repeat < 1 else "max_concurrency")
    settings = settings if settings is not None else load_settings(Path.cwd())
    engine = _engine_name(engine) or cases.engine
    base_url = base_url or cases.base_url
    specs = [_spec(item, engine, base_url) for item in (list(models) or list(cases.models) or [""])]
    judge = _judge(cases, judge_model, specs, engine, base_url)
    for spec in [*specs, judge]:
        if isinstance(spec, ModelSpec):
            _check_installed(spec, settings)
    connect = _Connector(settings, context_window, threads)
    reports = []
    async with contextlib.AsyncExitStack() as stack:
        judge_client = await stack.enter_async_context(connect.held(judge)) if judge is not None else None
        for spec in specs:
            async with connect.held(spec, reuse=(judge, judge_client)) as client:
                label = _label(spec, client)
                if progress is not None:
                    progress(_starting(label, len(cases.cases), repeat))
                reports.append(await _evaluate(cases, client, label, judge_client, repeat, max_concurrency))
    judge_label = _label(judge, judge_client) if judge is not None else None
    return EvalReport(name=cases.name, repeat=repeat, judge_model=judge_label, models=_unique(reports))


def _spec(item: str | ModelClient, engine: str | None, base_url: str | None) -> Model:
    return model_spec(item, engine=engine, base_url=base_url) if isinstance(item, str) else item


def _judge(
    cases: Cases, judge_model: str | ModelClient | None, specs: list[Model], engine: str | None, base_url: str | None
) -> Model | None:
    """The model that judges: the one named (here, else in the cases), else the first model; None when no case
    has a ``judge`` check."""
    if not any(case.judge is not None for case in cases.cases):
        return None
    named = judge_model if judge_model is not None else cases.judge_model
    return _spec(named, engine, base_url) if named is not None else specs[0]


def _engine_name(engine: str | None) -> str | None:
    """``engine`` by its name (from an alias too); an unknown one is a ``CasesError`` listing the engines."""
    try:
        return engine_named(engine).name if engine else None
    except UnknownEngine as error:
        raise CasesError(str(error), key="engine") from None


def _starting(label: str, cases: int, repeat: int) -> str:
    each = f", {repeat} runs each" if repeat > 1 else ""
    return f"{label}: {cases} case{'s' if cases != 1 else ''}{each}"


def _check_installed(spec: ModelSpec, settings: Settings) -> None:
    """Before any engine starts: a model the embedded engine would not find is an error now, not after the
    models before it have run."""
    engine = spec.engine or settings.engine
    if engine_named(engine).name != "embedded":
        return
    from cortana.models.embedded import installed_models, resolve_model_path

    name = spec.model or settings.model
    installed = installed_models()
    if name in installed or (name is None and installed):
        return  # an installed bundled model is joined (a copy of its parts) when its engine starts, not here
    resolve_model_path(name)


class _Connector:
    """Connects the models named, with the command's window and threads, and closes what it connected."""

    def __init__(self, settings: Settings, context_window: int | None, threads: int | None) -> None:
        self.settings = settings
        self.context_window = context_window
        self.threads = threads

    @contextlib.asynccontextmanager
    async def held(self, spec: Model, reuse: tuple[Model | None, ModelClient | None] = (None, None)) -> Any:
        """The client of ``spec``: one given (not closed here), the judge's when it is the same model, or a new
        connection, closed on leaving."""
        if not isinstance(spec, ModelSpec):
            yield spec
            return
        if reuse[1] is not None and reuse[0] == spec:
            yield reuse[1]
            return
        from cortana.models.factory import create_model_client

        client = await create_model_client(
            spec.engine, model=spec.model, base_url=spec.base_url, context_window=self.context_window,
            threads=self.threads, settings=self.settings,
        )  # fmt: skip
        try:
            yield client
        finally:
            await client.aclose()


async def _evaluate(
    cases: Cases, client: ModelClient, label: str, judge: ModelClient | None, repeat: int, concurrency: int
) -> ModelReport:
    """One model's runs of every case, through pydantic-evals."""
    from pydantic_evals import Case, Dataset, increment_eval_metric

    from cortana.evals.checks import evaluators_of

    settings = ModelSettings(temperature=cases.temperature, max_tokens=cases.max_tokens)
    agent: Agent[Any] = Agent(client, instructions=cases.instructions, output_type=cases.output_type, settings=settings)

    async def answer(prompt: str) -> Any:
        result = await agent.run(prompt, thread=ThreadRef(resource_id="eval", thread_id=uuid.uuid4().hex))
        for name in TOKEN_METRICS:
            increment_eval_metric(name, getattr(result.metrics, name))
        return result.output.strip() if isinstance(result.output, str) else result.output

    dataset: Dataset[str, Any, Any] = Dataset(
        name=cases.name,
        cases=[
            Case(name=case.name, inputs=case.input, expected_output=case.equals, evaluators=evaluators_of(case, judge))
            for case in cases.cases
        ],
    )
    evaluation = await dataset.evaluate(
        answer, name=label, task_name=label, max_concurrency=concurrency, progress=False, repeat=repeat
    )
    return ModelReport(model=label, cases=_case_results(cases, evaluation), evaluation=evaluation)


def _case_results(cases: Cases, evaluation: Any) -> list[CaseResult]:
    """pydantic-evals' cases and failures, grouped by case in the cases' order (``--repeat``: its runs together)."""
    runs: dict[str, list[CaseRun]] = {case.name: [] for case in cases.cases}
    for item in evaluation.cases:
        runs[item.source_case_name or item.name].append(_run_of(item))
    for failure in evaluation.failures:
        runs[failure.source_case_name or failure.name].append(CaseRun(passed=False, error=failure.error_message))
    return [CaseResult(name=case.name, input=case.input, runs=runs[case.name]) for case in cases.cases]


def _run_of(item: Any) -> CaseRun:
    """One of pydantic-evals' ``ReportCase`` s as a ``CaseRun``: its assertions, its scores, its tokens."""
    checks = {name: CheckResult(passed=bool(result.value), reason=result.reason)
              for name, result in item.assertions.items()}  # fmt: skip
    for failure in item.evaluator_failures:
        checks[failure.name] = CheckResult(passed=False, reason=failure.error_message)
    return CaseRun(
        passed=all(check.passed for check in checks.values()),
        output=to_jsonable_python(item.output, fallback=str),
        seconds=item.task_duration,
        checks=checks,
        scores={name: float(result.value) for name, result in item.scores.items()},
        **{name: int(item.metrics.get(name, 0)) for name in TOKEN_METRICS},
    )


def _label(spec: Model, client: ModelClient | None) -> str:
    """What the reports call a model: its name as given, else the engine's name for it."""
    if isinstance(spec, ModelSpec) and spec.name:
        return spec.name
    served = str(getattr(client, "model", "") or type(client).__name__)
    return Path(served).stem if served.endswith(".gguf") else served


def _unique(reports: list[ModelReport]) -> list[ModelReport]:
    """Reports whose models share a name (two clients of one engine) told apart: ``name``, ``name #2``."""
    seen: dict[str, int] = {}
    for report in reports:
        count = seen[report.model] = seen.get(report.model, 0) + 1
        if count > 1:
            report.model = f"{report.model} #{count}"
    return reports
