"""A case's checks as pydantic-evals evaluators, and the judge that asks a Cortana model.

``contains`` is pydantic-evals' own ``Contains``, and ``fields`` the same given a mapping; ``equals`` is
:class:`EqualsAnswer` (its ``EqualsExpected``, saying what differed), ``python`` :class:`PythonCheck` and ``judge``
:class:`Judge`. The judge is ours rather than
pydantic-evals' ``LLMJudge``, which talks to a model through pydantic-ai's providers: ours asks any engine Cortana
drives (the embedded one included, which has no such provider) through an ``Agent``, its verdict a typed answer.

Imported only when cases run: pydantic-evals (with pydantic-ai) takes about a second to import.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_evals.evaluators import (
    Contains,
    EvaluationReason,
    Evaluator,
    EvaluatorContext,
    EvaluatorOutput,
)

from cortana.agent.agent import Agent
from cortana.evals.cases import EvalCase
from cortana.models.base import ModelClient, ModelSettings

__all__ = ["JUDGE_INSTRUCTIONS", "EqualsAnswer", "Judge", "PythonCheck", "Verdict", "evaluators_of"]

JUDGE_INSTRUCTIONS = (
    "You grade one answer against a rubric. Read the question, the answer and the rubric, then say in one "
    "sentence why the answer meets the rubric or not, and whether it passes: true only when it meets the rubric."
)
"""The judge's system prompt."""


class Verdict(BaseModel):
    """The judge's answer: why, then whether the answer meets the rubric (the reason first, so it is thought of
    before the verdict is written)."""

    reason: str
    passed: bool


@dataclass(repr=False)
class EqualsAnswer(Evaluator[str, Any, Any]):
    """A case's ``equals`` check: the answer is the case's expected output; when not, the reason shows both."""

    def evaluate(self, ctx: EvaluatorContext[str, Any, Any]) -> EvaluationReason:
        """Whether ``ctx.output`` equals ``ctx.expected_output``."""
        if ctx.output == ctx.expected_output:
            return EvaluationReason(True)
        return EvaluationReason(False, f"expected {_shown(ctx.expected_output)}, got {_shown(ctx.output)}")

    def get_default_evaluation_name(self) -> str:
        """``equals``, the key the case gave."""
        return "equals"


@dataclass(repr=False)
class PythonCheck(Evaluator[str, Any, Any]):
    """A case's ``python`` check: ``function(answer)`` returns True/False, or a score that passes at ``min_score``.

    Attributes:
        function: called with the answer (a coroutine function is awaited).
        min_score: the least score that passes.
    """

    function: Callable[[Any], Any]
    min_score: float = 0.5

    async def evaluate(self, ctx: EvaluatorContext[str, Any, Any]) -> EvaluatorOutput:
        """The function's verdict on ``ctx.output``: an assertion, and for a score the score too."""
        value = self.function(ctx.output)
        if inspect.isawaitable(value):
            value = await value
        name = _function_name(self.function)
        if isinstance(value, bool):
            return EvaluationReason(value, None if value else f"{name} returned False")
        if isinstance(value, int | float):
            passed = value >= self.min_score
            reason = None if passed else f"{name} scored {value:g}, below {self.min_score:g}"
            return {"python": EvaluationReason(passed, reason), "python score": float(value)}
        raise TypeError(f"{name} returned a {type(value).__name__}; a check returns True/False or a number")

    def get_default_evaluation_name(self) -> str:
        """``python``, the key the case gave."""
        return "python"

    def build_serialization_arguments(self) -> dict[str, Any]:
        """The function by name, not the object (reports are written as JSON)."""
        return {"function": _function_name(self.function), "min_score": self.min_score}


@dataclass(repr=False)
class Judge(Evaluator[str, Any, Any]):
    """A case's ``judge`` check: a model reads the question, the answer and the rubric, and gives a
    :class:`Verdict` (its reason is the check's reason).

    Attributes:
        rubric: what a passing answer does.
        model: the judging engine's client (``run_eval`` gives the judge model's).
        settings: its generation settings (default: temperature 0, a short answer).
    """

    rubric: str
    model: ModelClient | None = field(default=None, compare=False)
    settings: ModelSettings = field(default_factory=lambda: ModelSettings(temperature=0.0, max_tokens=300))

    async def evaluate(self, ctx: EvaluatorContext[str, Any, Any]) -> EvaluationReason:
        """Ask the judge model for its verdict on ``ctx.output``."""
        if self.model is None:
            raise ValueError("the judge has no model; give run_eval a judge_model")
        agent = Agent(self.model, instructions=JUDGE_INSTRUCTIONS, output_type=Verdict, settings=self.settings)
        result = await agent.run(judge_prompt(ctx.inputs, ctx.output, self.rubric))
        return EvaluationReason(result.output.passed, result.output.reason)

    def get_default_evaluation_name(self) -> str:
        """``judge``, the key the case gave."""
        return "judge"

    def build_serialization_arguments(self) -> dict[str, Any]:
        """The rubric alone: a client is no argument a report can hold."""
        return {"rubric": self.rubric}


def judge_prompt(question: str, answer: Any, rubric: str) -> str:
    """What the judge reads: the question, the answer and the rubric, each marked off."""
    shown = answer.model_dump_json() if isinstance(answer, BaseModel) else str(answer)
    return f"<question>\n{question}\n</question>\n<answer>\n{shown}\n</answer>\n<rubric>\n{rubric}\n</rubric>"


def evaluators_of(case: EvalCase, judge: ModelClient | None) -> list[Evaluator[str, Any, Any]]:
    """The pydantic-evals evaluators of ``case``'s checks, in ``CHECKS`` order, then its own."""
    evaluators: list[Evaluator[str, Any, Any]] = []
    if case.equals is not None:
        evaluators.append(EqualsAnswer())
    for text in case.contains or ():
        evaluators.append(Contains(text, evaluation_name=f"contains {text!r}"))
    if case.python is not None:
        evaluators.append(PythonCheck(case.python, case.min_score))
    if case.fields is not None:
        evaluators.append(Contains(case.fields, evaluation_name="fields"))
    if case.judge is not None:
        evaluators.append(Judge(case.judge, judge))
    evaluators.extend(case.evaluators)
    return evaluators


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _function_name(function: Callable[..., Any]) -> str:
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or repr(function)
    return f"{module}:{name}" if module else name
