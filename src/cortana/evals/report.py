"""What an evaluation found: per model, per case, per run; as tables for a terminal and as JSON.

Built from pydantic-evals' ``EvaluationReport`` (kept on each :class:`ModelReport` as ``evaluation``, for its own
``print()``), with what Cortana measured beside it: each run's tokens, from ``RunResult.metrics``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python
from rich.console import Group
from rich.table import Table

__all__ = ["CaseResult", "CaseRun", "CheckResult", "EvalReport", "ModelReport"]

TOKEN_METRICS = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")
"""The ``RunMetrics`` counts each run records (pydantic-evals' ``increment_eval_metric``)."""


class CheckResult(BaseModel):
    """One check of one run: whether it passed, and why not."""

    passed: bool
    reason: str | None = None


class CaseRun(BaseModel):
    """One run of one case.

    Attributes:
        passed: every check passed (a run that raised, or a check that raised, did not).
        output: the answer (a typed one as JSON data); ``None`` when the run raised.
        error: what the run, or a check, raised.
        seconds: how long the run took (``None`` when it raised).
        prompt_tokens: tokens the model read, over the run's model calls (cached ones included).
        completion_tokens: tokens the model wrote.
        cached_prompt_tokens: of those read, the ones the engine had in its cache.
        checks: each check by name (``equals``, ``contains '4'``, ``python``, ``fields``, ``judge``...).
        scores: the scores checks gave (``python score``), by name.
    """

    passed: bool
    output: Any = None
    error: str | None = None
    seconds: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    checks: dict[str, CheckResult] = Field(default_factory=dict)
    scores: dict[str, float] = Field(default_factory=dict)

    def why(self) -> str:
        """The first reason it failed ('' when it passed)."""
        if self.error:
            return self.error
        for name, check in self.checks.items():
            if not check.passed:
                return f"{name}: {check.reason}" if check.reason else f"{name} failed"
        return ""


class CaseResult(BaseModel):
    """One case's runs on one model (``--repeat N``: N of them)."""

    name: str
    input: str
    runs: list[CaseRun]

    @property
    def passed(self) -> int:
        """How many runs passed."""
        return sum(run.passed for run in self.runs)

    @property
    def pass_rate(self) -> float:
        """The share of runs that passed."""
        return self.passed / len(self.runs) if self.runs else 0.0

    def summary(self) -> dict[str, Any]:
        """The case's numbers, for the JSON report."""
        return {"passed": self.passed, "pass_rate": self.pass_rate, "median_seconds": _median(self.runs)}


class ModelReport(BaseModel):
    """One model's results: every case, and the totals.

    Attributes:
        model: the model as it was named (``qwen2.5-coder-0.5b``, ``ollama:qwen2.5-coder:1.5b``).
        cases: each case, in the order given.
        evaluation: pydantic-evals' own report of the same runs (``report.models[0].evaluation.print()``);
            not in the JSON.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: str
    cases: list[CaseResult]
    evaluation: Any = Field(default=None, exclude=True)

    @property
    def runs(self) -> list[CaseRun]:
        """Every run of every case."""
        return [run for case in self.cases for run in case.runs]

    @property
    def passed(self) -> int:
        """How many runs passed."""
        return sum(run.passed for run in self.runs)

    @property
    def pass_rate(self) -> float:
        """The share of runs that passed."""
        runs = self.runs
        return self.passed / len(runs) if runs else 0.0

    @property
    def median_seconds(self) -> float | None:
        """The median time of the runs that finished."""
        return _median(self.runs)

    def tokens(self, name: str) -> int:
        """One of ``TOKEN_METRICS``, summed over every run."""
        return sum(getattr(run, name) for run in self.runs)

    def summary(self) -> dict[str, Any]:
        """The model's numbers, for the JSON report."""
        runs = self.runs
        totals = {name: self.tokens(name) for name in TOKEN_METRICS}
        return {"runs": len(runs), "passed": self.passed, "pass_rate": self.pass_rate,
                "median_seconds": self.median_seconds, **totals}  # fmt: skip

    def table(self, repeat: int = 1) -> Table:
        """A row per case: passed (runs passed, with ``--repeat``), time, tokens, and why it failed."""
        table = Table(title=f"{self.model}: {self._headline()}", title_justify="left", expand=False)
        for column, justify in (("case", "left"), ("passed", "right"), ("median s", "right"),
                                ("read", "right"), ("written", "right"), ("why not", "left")):  # fmt: skip
            table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
        for case in self.cases:
            shown = ("yes" if case.passed else "no") if repeat == 1 else f"{case.passed}/{len(case.runs)}"
            reasons = [run.why() for run in case.runs if not run.passed]
            table.add_row(
                case.name, shown, _seconds(_median(case.runs)),
                f"{sum(run.prompt_tokens for run in case.runs):,}",
                f"{sum(run.completion_tokens for run in case.runs):,}",
                _short(reasons[0]) if reasons else "",
            )  # fmt: skip
        return table

    def _headline(self) -> str:
        runs = len(self.runs)
        return f"{self.passed}/{runs} passed ({self.pass_rate:.0%}), median {_seconds(self.median_seconds)} s"


class EvalReport(BaseModel):
    """What ``run_eval`` found: a :class:`ModelReport` per model, in the order named.

    Attributes:
        name: the cases' name (a file's stem).
        repeat: the runs of each case on each model.
        judge_model: the model that judged ``judge`` checks, if any did.
        models: each model's report.
    """

    name: str
    repeat: int = 1
    judge_model: str | None = None
    models: list[ModelReport]

    @property
    def passed(self) -> bool:
        """Every run of every case passed on every model."""
        return all(run.passed for model in self.models for run in model.runs)

    def tables(self) -> Group:
        """A table per model, then one row per model (rich renderables: ``Console().print(report.tables())``)."""
        return Group(*(model.table(self.repeat) for model in self.models), self.summary_table())

    def summary_table(self) -> Table:
        """A row per model: runs passed, pass rate, median time, tokens read and written."""
        table = Table(title=f"{self.name}: {self._runs_line()}", title_justify="left")
        for column in ("model", "passed", "pass rate", "median s", "tokens read", "tokens written"):
            table.add_column(column, justify="left" if column == "model" else "right")
        for model in self.models:
            table.add_row(
                model.model, f"{model.passed}/{len(model.runs)}", f"{model.pass_rate:.0%}",
                _seconds(model.median_seconds), f"{model.tokens('prompt_tokens'):,}",
                f"{model.tokens('completion_tokens'):,}",
            )  # fmt: skip
        return table

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data: every model's and case's numbers, and every run with its answer and checks."""
        return {
            "name": self.name,
            "repeat": self.repeat,
            "judge_model": self.judge_model,
            "passed": self.passed,
            "models": [_model_json(model) for model in self.models],
        }

    def _runs_line(self) -> str:
        cases = len(self.models[0].cases) if self.models else 0
        each = f", each run {self.repeat} times" if self.repeat > 1 else ""
        return f"{cases} case{'s' if cases != 1 else ''}{each}"


def _model_json(model: ModelReport) -> dict[str, Any]:
    cases = [{"name": case.name, "input": case.input, **case.summary(),
              "runs": [to_jsonable_python(run.model_dump()) for run in case.runs]} for case in model.cases]  # fmt: skip
    return {"model": model.model, **model.summary(), "cases": cases}


def _median(runs: Iterable[CaseRun]) -> float | None:
    times = [run.seconds for run in runs if run.seconds is not None]
    return statistics.median(times) if times else None


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _short(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
