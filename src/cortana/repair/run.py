"""One fix's state, which every stage of the workflow reads and extends, and what a fix gives back.

``RepairRun`` holds the request, the tests before any change, where the
change may go, every attempt with how its tests went, the starting point the
climb is on, the time budget and the counts; ``workflow.py`` walks it through
its stages (``stages/graph.py``), which hold no dependencies of their own: those
are ``deps.py``'s. ``RepairResult`` is what comes out.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from cortana.config import FixSettings
from cortana.messages import Usage
from cortana.repair.localize import Location
from cortana.repair.patches import Patch
from cortana.repair.request import FixRequest
from cortana.repair.symbols import SymbolIndex
from cortana.repair.testrun import Failure, TestCommand, TestReport
from cortana.repair.warm import WarmTests

if TYPE_CHECKING:
    from cortana.models.base import ModelClient
    from cortana.repair.coders import Coder
    from cortana.repair.scratch import ScratchCopy

__all__ = [
    "Ask",
    "Attempt",
    "FixOutcome",
    "FixStatus",
    "Progress",
    "RepairResult",
    "RepairRun",
    "RepairSettings",
    "Stage",
    "Stronger",
    "Tokens",
    "collected",
    "configured_fields",
    "got_further",
    "now_passing",
]


class Stage(StrEnum):
    """The workflow's stages, as progress names them."""

    TESTS = "tests"
    LOCALIZE = "localize"
    SAMPLE = "sample"
    VALIDATE = "validate"
    CLIMB = "climb"
    ESCALATE = "escalate"
    RENAME = "rename"
    TRIM = "trim"


class FixStatus(StrEnum):
    """How a fix ended."""

    FIXED = "fixed"
    """A patch the tests accept."""
    FAILED = "failed"
    """None found within the budget."""
    NO_TESTS = "no_tests"
    """The project has no tests Cortana can run."""
    PASSING = "passing"
    """Nothing fails and the request asks for no change."""
    REFUSED = "refused"
    """Running the tests was not allowed."""
    NOT_FOUND = "not_found"
    """Nowhere to change was found."""
    PLANNED = "planned"
    """Plan mode: the tests ran and the places to change were found; nothing was tried yet."""


_CONFIGURED = FixSettings()
"""cortana.yml's ``fix:`` defaults: where :class:`RepairSettings` reads each default it shares with them."""


@dataclass(frozen=True, slots=True)
class RepairSettings:
    """How hard the workflow tries.

    The fields that cortana.yml's ``fix:`` section also has (:class:`~cortana.config.FixSettings`) take their
    defaults from it, so each default is written once; :meth:`from_config` builds one from that section.

    Attributes:
        budget_seconds: the time one fix may take, tests included; rounds go on until a patch passes or it is
            spent (cortana.yml ``fix.budget_seconds``).
        samples: hot samples asked of each prompt at once (the engine decodes them together where it has slots).
        per_location: how many of the top locations also get a greedy sample of their own.
        rewrite: also ask for functions written again whole.
        rewrite_lines: the longest function asked for whole; a longer one with a line spectrum is asked for its
            most suspect lines (``windows.py``).
        temperature: the temperature of the hot samples.
        rounds: the most rounds (each after the first builds on the closest attempt, or climbs from a partial fix).
        feedback_rounds: the most rounds whose rewrite is given the values the failing tests computed.
        max_locations: the most locations whose code the model is shown.
        test_timeout: seconds one test run may take.
        patch_tokens: the fewest tokens one sample may have (a rewrite gets more, by the size of what it rewrites).
        seed: the first sample's seed (each next one adds one): the same run gives the same samples.
        merge_partners: the most earlier attempts each new one is made together with (a test run each).
        mutants: the most small changes of the blamed functions tried without a model (``mutants.py``).
    """

    budget_seconds: float = _CONFIGURED.budget_seconds
    samples: int = _CONFIGURED.samples
    per_location: int = _CONFIGURED.per_location
    rewrite: bool = _CONFIGURED.rewrite
    rewrite_lines: int = _CONFIGURED.rewrite_lines
    temperature: float = 0.8
    rounds: int = _CONFIGURED.rounds
    feedback_rounds: int = 2
    max_locations: int = 3
    test_timeout: float = _CONFIGURED.test_timeout
    patch_tokens: int = 600
    seed: int = 1
    merge_partners: int = 3
    mutants: int = _CONFIGURED.mutants

    @classmethod
    def from_config(cls, fix: FixSettings, **more: Any) -> RepairSettings:
        """The settings of cortana.yml's ``fix:`` section, each field the two share taken from it; ``more`` sets
        the others (``seed``)."""
        shared = {name: getattr(fix, name) for name in configured_fields()}
        return cls(**{**shared, **more})


def configured_fields() -> tuple[str, ...]:
    """The :class:`RepairSettings` fields that cortana.yml's ``fix:`` section sets too."""
    return tuple(item.name for item in fields(RepairSettings) if item.name in FixSettings.model_fields)


@dataclass(frozen=True)
class Stronger:
    """A model of a role (``models:``) the fix starts when it gets to it: its name, and how to start its engine. The
    last round's (``stronger=``) is started only when the search gets to its last round (the last by count, or the
    second half of the budget); the sampler's (``sampler=``) as the first round begins. Both are closed when the fix
    ends.

    Attributes:
        name: the model, as progress and the result name it.
        start: starts its engine (an error is said in progress, and the fix goes on with the model in use).
    """

    name: str
    start: Callable[[], Awaitable[ModelClient]]


@dataclass(frozen=True, slots=True)
class Progress:
    """One step of the workflow, for a person to follow: the stage, a line, and the time so far."""

    stage: Stage
    message: str
    seconds: float


@dataclass
class Tokens:
    """The tokens a fix's model calls used."""

    prompt: int = 0
    cached: int = 0
    completion: int = 0

    def add(self, usage: Usage) -> None:
        self.prompt += usage.prompt_tokens
        self.cached += usage.cached_tokens
        self.completion += usage.completion_tokens


@dataclass(frozen=True)
class Ask:
    """One prompt to sample: the coder that writes it, how hot, how many answers, and the attempt it builds on
    (None: the code as it was)."""

    coder: Coder
    temperature: float
    count: int = 1
    on: Attempt | None = None
    label: str = ""

    @property
    def origin(self) -> str:
        """How the progress and the result name where a patch came from (``rewrite, T=0``)."""
        return f"{self.label or self.coder.kind}, T={self.temperature:g}"


@dataclass
class Attempt:
    """A distinct patch, the samples that made it, and how its tests went.

    Attributes:
        patch: what it changes.
        votes: how many samples made it.
        size: how many lines it adds or removes.
        report: its tests (the failing ones first; all of them when those passed).
        fixed: failing tests it makes pass; broke: passing tests it makes fail.
        further: failing tests that still fail with it, but further on (:func:`got_further`).
        collected: a test file that could not be collected before runs with it (:func:`collected`).
        passed: the tests accept it.
        origin: which sample first made it (``round 2, feedback rewrite, T=0.8``).
        merges: 0 when sampled; else how many merges made it of sampled attempts (1: two of them).
    """

    patch: Patch
    votes: int
    size: int
    report: TestReport | None = None
    fixed: int = 0
    broke: int = 0
    further: int = 0
    collected: bool = False
    passed: bool = False
    origin: str = ""
    merges: int = 0

    @property
    def partial(self) -> bool:
        """It fixes some failing tests, or gets some further, and breaks none: a place to climb from."""
        return (self.fixed > 0 or self.further > 0) and self.broke == 0 and not self.passed

    @property
    def gain(self) -> tuple[int, int]:
        """How much it moves the failing tests: those it fixes, then those it gets further."""
        return self.fixed, self.further


@dataclass
class RepairRun:
    """The state of one fix (see the module docstring).

    Attributes:
        request: the request, read once.
        settings: how hard to try.
        command: how the project's tests run.
        started: when the fix started (``time.perf_counter()``).
        scratch: the copy candidates are tried in.
        before: the tests before any change (traced: each test's calls and, for a failing one, the values).
        index: the project's definitions.
        failing: the failures the current starting point has (the code as it was, or the partial fix climbed to).
        current: that starting point's test run.
        locations: where the change may go, best first, on that starting point.
        originals: the files the fix may change, as they were.
        attempts: every distinct patch tried, by its key.
        base: the partial fix the climb is on (None: the code as it was).
        round: the round under way (from 1).
        samples, model_calls, usage: what the model was asked.
        progress: every step said so far.
        stronger: the larger model's engine once the last round went to it (None: every round on the one in use).
        stronger_name: its name.
        sampler: the engine of the model that writes the samples (``models.sampler``), once started; None: the
            engine in use writes them (none named, it did not start, or the last round went to the larger model).
        sampler_name: its name ("" when it never started).
        sampler_tried: whether starting it was tried (once a fix).
        held: a passing patch that only adds a failing assertion's difference, kept aside to the end of its round.
        escalated: the last round was handed to the larger model (whether or not it started): once a fix.
        stronger_from: the round the larger model started in (its own first round: round one's prompts).
        plan_only: stop once the places to change are found (plan mode).
        greedy: the greedy prompts asked so far, with the model asked (the same prompt is not asked again).
        mutated: whether the small changes that need no model (``mutants.py``) were tried.
        took: how long each ask that made a request took, its answers' test runs included, by model and number of
            answers (:meth:`expected`).
        cut_short: the last round in which an ask was left out, or stopped, because it would have ended past the
            budget (0: none).
        set_aside: patches the tests accepted that go against the request's words (``intent.py``), each with why.
        warm: the process that runs a few tests at a time warm (``warm.py``); None: not started, or not usable.
        warm_tried: whether starting it was tried (once a fix).
    """

    request: FixRequest
    settings: RepairSettings
    command: TestCommand
    started: float = field(default_factory=time.perf_counter)
    scratch: ScratchCopy | None = None
    before: TestReport | None = None
    index: SymbolIndex | None = None
    failing: list[Failure] = field(default_factory=list)
    current: TestReport | None = None
    locations: list[Location] = field(default_factory=list)
    originals: dict[str, str] = field(default_factory=dict)
    attempts: dict[tuple[tuple[str, str], ...], Attempt] = field(default_factory=dict)
    base: Attempt | None = None
    round: int = 1
    samples: int = 0
    model_calls: int = 0
    usage: Tokens = field(default_factory=Tokens)
    progress: list[Progress] = field(default_factory=list)
    stronger: ModelClient | None = None
    stronger_name: str = ""
    sampler: ModelClient | None = None
    sampler_name: str = ""
    sampler_tried: bool = False
    held: Attempt | None = None
    escalated: bool = False
    stronger_from: int = 0
    plan_only: bool = False
    greedy: set[tuple[str, str]] = field(default_factory=set)
    mutated: bool = False
    took: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    cut_short: int = 0
    set_aside: dict[tuple[tuple[str, str], ...], tuple[Attempt, str]] = field(default_factory=dict)
    warm: WarmTests | None = None
    warm_tried: bool = False

    @property
    def seconds(self) -> float:
        """Time since the fix started."""
        return time.perf_counter() - self.started

    @property
    def out_of_time(self) -> bool:
        """The budget is spent."""
        return self.seconds >= self.settings.budget_seconds

    def expected(self, model: str, count: int) -> float | None:
        """How long an ask of ``count`` answers from ``model`` is expected to take, tests included: the median of
        the last three such asks; with none yet, the longest ask of that model with fewer answers (a lower bound:
        more answers never take less). None: nothing to go by yet."""
        same = self.took.get((model, count))
        if same:
            return sorted(same[-3:])[len(same[-3:]) // 2]
        fewer = [seconds for (name, answers), took in self.took.items() if name == model and answers < count
                 for seconds in took]  # fmt: skip
        return max(fewer) if fewer else None

    def fits(self, model: str, count: int) -> bool:
        """Whether an ask of ``count`` answers from ``model``, begun now, is expected to end within the budget."""
        expected = self.expected(model, count)
        return expected is None or self.seconds + expected <= self.settings.budget_seconds

    @property
    def seconds_left(self) -> float:
        """What is left of the budget (0 once spent)."""
        return max(0.0, self.settings.budget_seconds - self.seconds)

    def closest(self) -> Attempt | None:
        """The attempt that came closest: most failing tests fixed less tests broken, then most got further, then
        votes, then size."""
        tried = [a for a in self.attempts.values() if a.report is not None]
        return max(tried, key=lambda a: (a.fixed - a.broke, a.further, a.votes, -a.size)) if tried else None

    def shown_closest(self) -> Attempt | None:
        """The closest attempt worth showing the user when nothing passed: one that made a failing test pass and
        broke none (an attempt that only moved where a test fails, or broke more, is not shown as progress; one set
        aside is shown as such)."""
        helpful = [a for key, a in self.attempts.items() if a.report is not None and a.fixed > 0 and a.broke == 0
                   and key not in self.set_aside]  # fmt: skip
        return max(helpful, key=lambda a: (a.fixed, a.further, a.votes, -a.size)) if helpful else None

    def best_partial(self) -> Attempt | None:
        """The partial fix (failing tests pass or get further, none broken) that moves them most, better than the
        base."""
        floor = self.base.gain if self.base is not None else (0, 0)
        partial = [a for a in self.attempts.values() if a.partial and a.gain > floor]
        return max(partial, key=lambda a: (a.gain, a.votes, -a.size)) if partial else None

    def labels(self) -> list[str]:
        return [location.label for location in self.locations]


@dataclass
class RepairResult:
    """What the workflow found.

    Attributes:
        status: how it ended.
        message: one paragraph for the user.
        diff: the kept patch (or, when none passed, the closest attempt) as a unified diff ("" without one).
        patch: the kept patch (None when none passed).
        originals: the files it changes, as they were.
        before, after: the test runs before the patch and with it (with the closest attempt, when none passed).
        candidates: distinct patches tried; samples: samples drawn; model_calls: requests to the engine.
        seconds: the workflow's time.
        locations: the locations shown to the model, best first.
        closest: the closest attempt's diff when none passed ("" otherwise): one that made a failing test pass and
            broke none.
        stronger: the larger model the last round went to ("" when it did not).
        sampler: the model that wrote the samples before it (``models.sampler``; "" when the model in use did).
        set_aside: a patch the tests accepted but the request's words rule out, as a diff ("" when none), and why
            (``set_aside_why``).
    """

    status: FixStatus
    message: str
    diff: str = ""
    patch: Patch | None = None
    originals: dict[str, str] = field(default_factory=dict)
    before: TestReport | None = None
    after: TestReport | None = None
    candidates: int = 0
    samples: int = 0
    model_calls: int = 0
    seconds: float = 0.0
    locations: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    origin: str = ""
    """Which sample first made the kept patch."""
    closest: str = ""
    stronger: str = ""
    sampler: str = ""
    set_aside: str = ""
    set_aside_why: str = ""

    def summary(self) -> str:
        """One line of counts: ``11 model calls · 10 samples · 6 patches tried · 9,120 in, 8,004 cached / 812 out
        tokens · 95.3s``."""
        return (
            f"{self.model_calls} model calls · {self.samples} samples · {self.candidates} patches tried · "
            f"{self.prompt_tokens:,} in, {self.cached_tokens:,} cached / {self.completion_tokens:,} out tokens · "
            f"{self.seconds:.1f}s"
            + (f" · samples by {self.sampler}" if self.sampler else "")
            + (f" · last round on {self.stronger}" if self.stronger else "")
            + (f" · kept: {self.origin}" if self.origin else "")
        )

    @property
    def samples_per_minute(self) -> float:
        """Samples drawn per minute of the fix."""
        return self.samples * 60 / self.seconds if self.seconds else 0.0


def now_passing(before: TestReport, after: TestReport) -> set[str]:
    """The tests that failed before and pass after; a test file that could not be collected counts as one test,
    passing when its tests run and none fails."""
    fixed = before.failed & after.passed
    for failed in before.failed - fixed:
        if "::" not in failed:
            ran = [test for test in after.passed if test.startswith(failed + "::")]
            if ran and not any(failure.file == failed for failure in after.failures):
                fixed.add(failed)
    return fixed


def got_further(before: TestReport, after: TestReport) -> set[str]:
    """The tests that fail in both runs but got further in ``after``: they stop at a later line of their own, or
    at the same line on an assertion where before an error was raised (``--reverse`` now accepted, the output
    still wrong). Tests are a dense reward: a change in one of two places a fix needs passes no test, but it
    moves where they fail. A test file that could not be collected before counts by its tests (:func:`collected`)."""
    was = {failure.test: failure.reached for failure in before.failures}
    further: set[str] = set()
    for failure in after.failures:
        old, new = was.get(failure.test), failure.reached
        if old is not None and new is not None and new > old:
            further.add(failure.test)
    return further | collected(before, after)


def collected(before: TestReport, after: TestReport) -> set[str]:
    """The tests that now pass in a test file that could not be collected before, while others of it still fail.

    A missing definition fails a whole file at its import: one opaque failure. A patch that writes the definition,
    however wrong, turns it into the file's own tests, some passing and the rest failing with values to go on
    (``clamp(5, 0, 10)`` returned ``True``): a place to climb from, ranked by how many of them pass. A file none of
    whose tests fails any more is fixed (:func:`now_passing`), not further.
    """
    further: set[str] = set()
    for file in (test for test in before.failed if "::" not in test):
        if file in after.failed:
            continue  # still not collected
        mine = file + "::"
        if any(test.startswith(mine) for test in after.failed):
            further |= {test for test in after.passed if test.startswith(mine)}
    return further


@dataclass
class FixOutcome:
    """A fix as a front end shows it: the result, the files written, and the answer.

    Attributes:
        result: what the workflow found.
        written: the files written into the workspace (each one the gate allowed).
    """

    result: RepairResult
    written: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """The request is done: nothing failed, or the fix was found and written whole."""
        result = self.result
        whole = result.patch is not None and len(self.written) == len(result.patch.files)
        return result.status is FixStatus.PASSING or (result.status is FixStatus.FIXED and whole)

    @property
    def answer(self) -> str:
        """What the user is told, and what the conversation keeps: the message, what was written, and the diff (the
        closest attempt's, when nothing passed)."""
        result = self.result
        lines = [result.message]
        if result.status is FixStatus.FIXED:
            files = len(result.patch.files) if result.patch is not None else 0
            if self.written and len(self.written) == files:
                lines.append(f"Applied to {', '.join(self.written)}.")
            elif self.written:
                lines.append(f"Applied to {', '.join(self.written)} only; the rest was not allowed.")
            else:
                lines.append("Not applied: writing it was not allowed (the diff is below).")
        text = " ".join(lines)
        if result.status is FixStatus.FIXED and result.diff:
            return f"{text}\n\n```diff\n{result.diff}```"
        if result.closest:
            text = f"{text}\n\nThe closest attempt:\n\n```diff\n{result.closest}```"
        if result.set_aside and result.status is not FixStatus.FIXED:
            text += f"\n\nSet aside ({result.set_aside_why}):\n\n```diff\n{result.set_aside}```"
        return text
