"""Evaluations: ask a set of cases on one or several models and see which answers pass, how fast, at what cost.

    from cortana.evals import Cases, EvalCase, run_eval

    cases = Cases(cases=[EvalCase(name="sum", input="What is 2+2? Answer with the number only.", equals="4")])
    report = await run_eval(cases, models=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
    Console().print(report.tables())

``cortana eval CASES.yaml`` is the same from the command line (``load_cases`` reads the file). The cases run on
pydantic-evals (``pip install 'cortana[evals]'``), imported only when they run; docs/evals.md has the whole of it.
"""

from cortana.evals.cases import CHECKS, Cases, CasesError, EvalCase, load_cases
from cortana.evals.report import CaseResult, CaseRun, CheckResult, EvalReport, ModelReport
from cortana.evals.run import ModelSpec, model_spec, run_eval

__all__ = [
    "CHECKS",
    "CaseResult",
    "CaseRun",
    "Cases",
    "CasesError",
    "CheckResult",
    "EvalCase",
    "EvalReport",
    "ModelReport",
    "ModelSpec",
    "load_cases",
    "model_spec",
    "run_eval",
]
