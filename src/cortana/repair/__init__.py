"""The repair workflow: localize, sample patches, let the project's tests choose, apply with the user.

    testrun.py    finding and running the project's tests; reading what failed (TestCommand, TestReport)
    symbols.py    an index of a Python project's definitions and what each calls (SymbolIndex)
    localize.py   ranking where a change goes (Location, localize)
    patches.py    search/replace patches, their grammar, applying them
    scratch.py    the scratch copy candidates are tried in (ScratchCopy)
    request.py    FixRequest: what a fix request asks for, read once
    run.py        RepairRun: one fix's state; RepairResult, RepairSettings, Progress, Stronger
    coders.py     the formats a sample is written in (Rewrite, Edits, NewDefinition)
    feedback.py   what the tests computed, in words for a sample
    mutants.py    small changes of a blamed function, made without a model
    deps.py       RepairDeps: what a fix runs with, frozen; saying a step, asking the gate, running the tests
    stages/       the pipeline's stages (graph.py), and the work they do (localize, sample, judge, climb, ...)
    workflow.py   RepairWorkflow: runs the stages in a scratch copy, and applies a fix
    tool.py       the workflow as a tool an agent's loop can call (fix_with_tests)
    routing.py    which requests go through it without being named (is_change_request)

Names are imported on first use (PEP 562): the terminal reaches its prompt without the workflow's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortana.lazy import lazy_names

if TYPE_CHECKING:
    from cortana.repair.request import FixRequest
    from cortana.repair.routing import DEFAULT_REQUEST, is_change_request
    from cortana.repair.run import FixOutcome, FixStatus, Progress, RepairResult, RepairSettings, Stronger
    from cortana.repair.testrun import TestCommand, TestReport, find_test_command, run_tests
    from cortana.repair.workflow import RepairWorkflow

__all__ = [
    "DEFAULT_REQUEST",
    "FixOutcome",
    "FixRequest",
    "FixStatus",
    "Progress",
    "RepairResult",
    "RepairSettings",
    "RepairWorkflow",
    "Stronger",
    "TestCommand",
    "TestReport",
    "find_test_command",
    "is_change_request",
    "run_tests",
]

_LAZY = {
    "DEFAULT_REQUEST": "cortana.repair.routing",
    "is_change_request": "cortana.repair.routing",
    "TestCommand": "cortana.repair.testrun",
    "TestReport": "cortana.repair.testrun",
    "find_test_command": "cortana.repair.testrun",
    "run_tests": "cortana.repair.testrun",
    "FixOutcome": "cortana.repair.run",
    "FixRequest": "cortana.repair.request",
    "FixStatus": "cortana.repair.run",
    "Progress": "cortana.repair.run",
    "RepairResult": "cortana.repair.run",
    "RepairSettings": "cortana.repair.run",
    "RepairWorkflow": "cortana.repair.workflow",
    "Stronger": "cortana.repair.run",
}

__getattr__ = lazy_names(__name__, _LAZY)
