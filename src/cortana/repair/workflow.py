"""``RepairWorkflow``: run the tests, localize, sample patches, let the tests choose, and apply with the user.

One free-form tool loop asks a 1.5B model to do everything at once, and it
rarely does: it answers after one read, or edits the failing test. This is a
fixed pipeline instead, after Agentless (Xia et al., 2024), sized for small
models on a CPU:

1. **Tests.** Find how the project runs its tests (``testrun.py``), ask the
   gate once to run them (they are the project's code), and run them in a
   scratch copy (``scratch.py``): the failures, with their frames, are the
   evidence.
2. **Localize** (``localize.py``): rank functions and files from the
   failures, the code the tests call (one call further too), the request and
   the code graph; when there are more than fit, the model picks among their
   signatures under a grammar.
3. **Sample.** One prompt shows the failing tests and the code of the top
   locations (its prefix is read once: the engine's cache serves every sample
   after the first). Samples, in order: for a name the tests import and the
   code lacks, the whole new definition (greedy and hot); each top function
   written again whole, then all the functions shown together (a small model
   writes a function far better than search/replace edits of one); the greedy
   patch of edits anywhere in that code; ``samples - 1`` hotter ones, a
   function again and edits in turn; a greedy patch for a top location that
   is not a function. On llama.cpp each is written under a grammar
   (``patches.py``): well-formed, on the files shown, its SEARCH lines copied
   from them, a function kept to its own lines. A rename is made without a
   model (``rename.py``).
4. **Validate** each new patch at once, in the scratch copy: the failing
   tests first, then the whole run; the first kept ends the search: the
   failing tests pass and nothing that passed fails. With nothing failing
   before, two samples must also agree on it. A test file is never patched
   unless the user asked for it. When the request only asks for a fix, the
   kept patch then loses each edit the tests do not need (a small model's
   fix often carries a stray one).
5. **Retry.** With none kept, another round (``rounds`` in all) starts from
   the closest attempt, kept, asking for the edits still needed, and from the
   code as it was, asking for a different fix.
6. **Apply** (:meth:`RepairWorkflow.apply`): each changed file through the
   gate as an ``edit_file`` with its diff (asked, or allowed by ``--yes``),
   only if the file is still as it was read.

Progress (:class:`Progress`) is reported at each step; cancelling the task at
any point leaves the user's files untouched (the copy is removed).
"""

from __future__ import annotations

import ast
import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cortana.errors import UserError
from cortana.knowledge.index import GraphIndex
from cortana.messages import Message, ToolCall, Usage
from cortana.models.base import ModelClient, ModelRequest, ModelSettings, complete
from cortana.prompts import as_data, prompt_text
from cortana.repair.localize import Location, asks_to_change_tests, localize, missing_definitions, views_for
from cortana.repair.patches import (
    LINE_CHARS,
    Block,
    Patch,
    View,
    apply_patch,
    body_indent,
    changed_lines,
    definitions,
    definitions_grammar,
    new_definition,
    parse_patch,
    patch_grammar,
    unified_diff,
    without_new_comments,
)
from cortana.repair.rename import rename_patch, rename_request
from cortana.repair.scratch import ScratchCopy
from cortana.repair.symbols import Symbol, SymbolIndex
from cortana.repair.testrun import Failure, TestCommand, TestReport, is_test_file, run_tests
from cortana.sandbox.policy import Sandbox
from cortana.tools import Tool
from cortana.tools.permissions import PermissionDecision

__all__ = ["Authorize", "Progress", "RepairResult", "RepairSettings", "RepairWorkflow"]

Authorize = Callable[[ToolCall, Tool], Awaitable[PermissionDecision]]
"""Asks the permission gate about a call (running the tests, writing a file)."""


NO_TESTS = (
    "This folder has no tests Cortana can run (pytest, npm test, go test, cargo test, make test, or `test:` in "
    "cortana.yml), so no fix can be checked."
)


def _run_tests(command: str) -> str:
    """Run the project's tests (the workflow runs them itself, in a scratch copy; the gate decides)."""
    raise UserError("the repair workflow runs the tests itself")


def _edit(path: str, diff: str) -> str:
    """Apply a fix's diff to a file (the workflow writes it itself; the gate decides)."""
    raise UserError("the repair workflow writes its fix itself")


TEST_TOOL = Tool(_run_tests, name="run_command", description="Run a shell command in the workspace.")
EDIT_TOOL = Tool(_edit, name="edit_file", description="Change a file in the workspace.")


@dataclass(frozen=True, slots=True)
class RepairSettings:
    """How hard the workflow tries.

    Attributes:
        samples: samples of the patch over every location shown (the greedy one, then hotter ones).
        per_location: how many of the top locations also get a greedy sample of their own.
        rewrite: also ask for functions written again whole: each of the top ``per_location`` ones alone, and all
            the locations shown together (a change that takes several at once).
        temperature: the temperature of the samples after the first.
        rounds: sampling rounds in all (each after the first starts from the best failed attempt).
        max_locations: the most locations whose code the model is shown.
        test_timeout: seconds one test run may take.
        patch_tokens: the most tokens one sample may have.
        seed: the first sample's seed (each next sample adds one): the same run gives the same samples.
    """

    samples: int = 3
    per_location: int = 2
    rewrite: bool = True
    temperature: float = 0.8
    rounds: int = 2
    max_locations: int = 3
    test_timeout: float = 300.0
    patch_tokens: int = 600
    seed: int = 1


@dataclass(frozen=True, slots=True)
class Progress:
    """One step of the workflow, for a person to follow: the stage, a line, and the time so far."""

    stage: str
    message: str
    seconds: float


@dataclass
class _Tokens:
    prompt: int = 0
    cached: int = 0
    completion: int = 0

    def add(self, usage: Usage) -> None:
        self.prompt += usage.prompt_tokens
        self.cached += usage.cached_tokens
        self.completion += usage.completion_tokens


@dataclass(frozen=True)
class _Plan:
    """One sample to draw: its prompt, the code it may edit (its grammar), its temperature, the index the code
    comes from, and the attempt it builds on (None: the code as it was)."""

    prompt: str
    views: Sequence[View]
    temperature: float
    index: SymbolIndex
    on_top: Candidate | None = None
    new: tuple[str, str] | None = None
    """(file, name): a definition to write whole and add to the file, rather than edits."""
    rewrite: tuple[Symbol, ...] = ()
    """Definitions to write again whole, in this order, each in place of the one in its file, rather than edits."""
    kind: str = "anywhere"
    """What it asks for: ``new`` (a whole definition), ``rewrite`` (a definition again, whole), ``anywhere``,
    ``location``, ``more`` (on the closest attempt) or ``different``."""


@dataclass
class Candidate:
    """A distinct patch, the samples that made it, and how its tests went."""

    patch: Patch
    votes: int
    size: int
    report: TestReport | None = None
    fixed: int = 0
    broke: int = 0
    passed: bool = False
    origin: str = ""
    """Which sample first made it (``round 1, sample 2: anywhere, T=0.8``), for the figures of what pays."""


@dataclass
class RepairResult:
    """What the workflow found.

    Attributes:
        status: ``fixed`` (a patch the tests accept), ``failed`` (none found), ``no_tests`` (the project has
            none Cortana can run), ``passing`` (nothing fails and the request asks for no change),
            ``refused`` (running the tests was not allowed), ``not_found`` (nowhere to change was found).
        message: one paragraph for the user.
        diff: the kept patch as a unified diff ("" without one).
        patch: the kept patch.
        originals: the files it changes, as they were.
        before, after: the test runs before the patch and with it.
        candidates: distinct patches tried; samples: samples drawn; model_calls: model calls made.
        seconds: the workflow's time.
        locations: the locations shown to the model, best first.
    """

    status: str
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

    def summary(self) -> str:
        """One line of counts: ``11 model calls · 10 samples · 6 patches tried · 9,120 in, 8,004 cached / 812 out
        tokens · 95.3s``."""
        return (
            f"{self.model_calls} model calls · {self.samples} samples · {self.candidates} patches tried · "
            f"{self.prompt_tokens:,} in, {self.cached_tokens:,} cached / {self.completion_tokens:,} out tokens · "
            f"{self.seconds:.1f}s" + (f" · kept: {self.origin}" if self.origin else "")
        )


class RepairWorkflow:
    """The pipeline of the module docstring, over one workspace.

    Args:
        client: the engine.
        workspace: the project.
        test_command: how its tests run (:func:`~cortana.repair.testrun.find_test_command`); None: it has none.
        environment: the environment tests (and git) run with.
        authorize: asks the gate; None allows everything (a library caller that decided already).
        graph: the code graph's index, when one is loaded (for the names of the request).
        settings: how hard to try.
        on_progress: called with each :class:`Progress`.
        sandbox: the workspace's sandbox: git and every test run are confined by it (the tests write only the
            scratch copy); default: the kernel's, where it can (``Sandbox(workspace, enabled=False)`` for none).
    """

    def __init__(
        self,
        client: ModelClient,
        workspace: Path,
        *,
        test_command: TestCommand | None,
        environment: Mapping[str, str],
        authorize: Authorize | None = None,
        graph: GraphIndex | None = None,
        settings: RepairSettings | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.client = client
        self.sandbox = sandbox if sandbox is not None else Sandbox(workspace)
        self.workspace = workspace.resolve()
        self.test_command = test_command
        self.environment = environment
        self.authorize = authorize
        self.graph = graph
        self.settings = settings or RepairSettings()
        self.on_progress = on_progress
        self.model_calls = 0
        self.usage = _Tokens()
        self._started = time.perf_counter()

    # -- the pipeline -------------------------------------------------------------------------------------

    async def run(self, request: str) -> RepairResult:
        """Find a patch for ``request`` that the project's tests accept (nothing is written here)."""
        self._started = time.perf_counter()
        self.model_calls = 0
        self.usage = _Tokens()
        command = self.test_command
        if command is None:
            return self._result("no_tests", NO_TESTS)
        ask = ToolCall(id="repair-tests", name="run_command", arguments={"command": command.command})
        if not await self._allowed(ask, TEST_TOOL):
            return self._result(
                "refused", f"Running the tests (`{command.command}`) was not allowed; nothing was tried."
            )
        self._say("tests", f"running the tests ({command.command}) in a scratch copy")
        with ScratchCopy(self.workspace, self.environment, self.sandbox) as scratch:
            before = await self._tests(command, scratch, trace=True)
            self._say("tests", f"before any change: {before.summary()}{_first_failures(before)}")
            if before.ok and not _asks_for_change(request):
                message = f"The tests pass ({before.summary()}): nothing fails, so there is nothing to fix."
                return self._result("passing", message, before=before)
            failing = before.failures if before.detailed else []
            index = await asyncio.to_thread(SymbolIndex.build, self.workspace)
            renamed = rename_request(request)
            if renamed is not None:
                return await self._rename(renamed, index, scratch, command, before)
            self._say("localize", "looking for where the change goes")
            calls = before.calls or None
            ranked = localize(request, failing, index, passed=before.passed, calls=calls, graph=self.graph)
            if not ranked:
                return self._result("not_found", "Cortana could not tell where in the code this goes.", before=before)
            locations = await self._choose(request, failing, index, ranked)
            self._say("localize", "candidates: " + ", ".join(location.label for location in locations))
            return await self._search(request, failing, index, locations, scratch, command, before)

    async def _rename(
        self, names: tuple[str, str], index: SymbolIndex, scratch: ScratchCopy, command: TestCommand, before: TestReport
    ) -> RepairResult:
        """A rename is made without a model (``rename.py``); the tests judge it."""
        old, new = names
        patch = rename_patch(index.texts, old, new)
        if patch is None:
            return self._result("not_found", f"No Python file here uses the name {old}.", before=before)
        originals = {path: index.texts[path] for path in patch.files}
        self._say("rename", f"{old} -> {new} in {len(patch.files)} files")
        candidate = Candidate(patch, 1, changed_lines(originals, patch))
        await self._validate(candidate, scratch, command, before, 1)
        if candidate.passed:
            return self._fixed(
                candidate, originals, before, 1, 0, [f"every use of {old}"], what=f"Renamed {old} to {new}"
            )
        failure = _failure_text(candidate.report)[:300]
        message = f"Renaming {old} to {new} in {', '.join(sorted(patch.files))} broke the tests: {failure}"
        return self._result("failed", message, before=before, candidates=1)

    async def _search(
        self,
        request: str,
        failing: Sequence[Failure],
        index: SymbolIndex,
        locations: Sequence[Location],
        scratch: ScratchCopy,
        command: TestCommand,
        before: TestReport,
    ) -> RepairResult:
        """Sample and validate, round after round, until a patch passes or the rounds run out.

        A round after the first draws from two starting points: the closest attempt so far, kept, with the
        model asked for the edits still needed (a change in two places is often found one place at a time),
        and the code as it was, with the model asked for a different fix.
        """
        may_change_tests = asks_to_change_tests(request)
        originals = {location.file: index.texts[location.file] for location in locations}
        originals |= {file: index.texts[file] for file, _ in missing_definitions(request, failing, index)}
        tried: dict[tuple[tuple[str, str], ...], Candidate] = {}
        best: Candidate | None = None
        samples = 0
        labels = [location.label for location in locations]
        template = prompt_text("repair_request")
        for round_number in range(1, self.settings.rounds + 1):
            plans = self._plans(request, failing, index, locations, template, best, originals, round_number)
            for number, plan in enumerate(plans, 1):
                self._say("sample", f"round {round_number}: sample {number} of {len(plans)}")
                seed = self.settings.seed + 100 * round_number + number
                patch = await self._sample(plan, originals, may_change_tests, seed)
                samples += 1
                if patch is None:
                    continue
                candidate = tried.get(patch.key())
                if candidate is not None:
                    candidate.votes += 1
                else:  # a new patch is tried at once: the first that passes ends the search
                    candidate = tried[patch.key()] = Candidate(patch, 1, changed_lines(originals, patch))
                    candidate.origin = f"round {round_number}, sample {number}: {plan.kind}, T={plan.temperature:g}"
                    await self._validate(candidate, scratch, command, before, len(tried))
                # With nothing failing before, passing tests only show a change breaks nothing: samples must agree.
                if candidate.passed and (before.failed or candidate.votes >= 2):
                    kept = candidate
                    if before.failed and not _asks_for_more(request):
                        kept = await self._trim(candidate, originals, scratch, command, before)
                    return self._fixed(kept, originals, before, len(tried), samples, labels)
            best = _best_attempt(list(tried.values())) or best
        message = _failed_message(list(tried.values()), samples, best)
        return self._result("failed", message, before=before, candidates=len(tried), samples=samples, locations=labels)

    async def _trim(
        self,
        kept: Candidate,
        originals: Mapping[str, str],
        scratch: ScratchCopy,
        command: TestCommand,
        before: TestReport,
    ) -> Candidate:
        """``kept`` without the edits the tests do not need.

        A small model's passing patch often carries an edit besides the fix (a function written twice, a line
        reworded); each edit is left out in turn, and where the tests still accept the rest, it goes. One test run
        per edit, no model call.
        """
        blocks = list(kept.patch.blocks)
        index = 0
        while len(blocks) > 1 and index < len(blocks):
            rest = blocks[:index] + blocks[index + 1 :]
            applied = apply_patch(rest, originals)
            if isinstance(applied, str):
                index += 1
                continue
            patch = Patch(
                applied.blocks, {path: text for path, text in applied.files.items() if text != originals[path]}
            )
            if patch.key() == kept.patch.key():  # the edit changed nothing the others did not
                blocks = rest
                continue
            if not patch.files or not _parses(patch):
                index += 1
                continue
            trial = Candidate(patch, kept.votes, changed_lines(originals, patch), origin=kept.origin)
            await self._validate(trial, scratch, command, before, f"without edit {index + 1}")
            if trial.passed and trial.fixed >= kept.fixed:
                blocks, kept = rest, trial
            else:
                index += 1
        return kept

    def _plans(
        self,
        request: str,
        failing: Sequence[Failure],
        index: SymbolIndex,
        locations: Sequence[Location],
        template: str,
        best: Candidate | None,
        originals: Mapping[str, str],
        round_number: int,
    ) -> list[_Plan]:
        """The samples of one round: their prompts, what code they may edit, how hot, and on what base."""
        brief = _brief(request, failing, index, locations)
        views = views_for(locations, index)
        hot = self.settings.temperature
        shown = [loc.symbol for loc in locations if loc.symbol and _rewritable(loc)] if self.settings.rewrite else []
        rewrites = [
            symbol for symbol in shown if symbol in {loc.symbol for loc in locations[: self.settings.per_location]}
        ]
        together = _in_file_order(shown)

        def rewrite(symbols: Sequence[Symbol], temperature: float, lead: str = "", kind: str = "rewrite") -> _Plan:
            instruction = f"{lead}\n\n{_rewrite_instruction(symbols)}" if lead else _rewrite_instruction(symbols)
            prompt = template.format(**brief, instruction=instruction)
            return _Plan(prompt, views, temperature, index, rewrite=tuple(symbols), kind=kind)

        if round_number == 1 or best is None:
            anywhere = template.format(**brief, instruction=f"{ANYWHERE}\n\n{EDIT_FORMAT}")
            plans = []
            for file, name in missing_definitions(request, failing, index)[:2]:
                kind = "class" if name[:1].isupper() else "function"
                write = prompt_text("repair_new").format(kind=kind, name=name, file=file)
                plans += [
                    _Plan(template.format(**brief, instruction=write), views, t, index, new=(file, name), kind="new")
                    for t in (0.0, hot)
                ]
            plans += [rewrite([symbol], 0.0) for symbol in rewrites]
            if len(together) > 1:  # a change that takes them all at once (a new flag: the parser and its use)
                plans.append(rewrite(together, 0.0, kind="rewrite together"))
            plans += [_Plan(anywhere, views, 0.0, index)]
            for number in range(self.settings.samples - 1):  # hotter ones: a whole definition, edits, in turn
                if number % 2 == 0 and rewrites:
                    plans.append(rewrite([rewrites[number // 2 % len(rewrites)]], hot))
                else:
                    plans.append(_Plan(anywhere, views, hot, index))
            for location in locations[: self.settings.per_location]:
                if location.symbol in rewrites:
                    continue  # its greedy rewrite is the sample made for just it
                instruction = f"Make the change in {as_data(location.label)}.\n\n{EDIT_FORMAT}"
                plans.append(
                    _Plan(template.format(**brief, instruction=instruction), views_for([location], index), 0.0, index,
                          kind="location")
                )  # fmt: skip
            return plans
        failure = as_data(_failure_text(best.report))
        tried = as_data(unified_diff(originals, best.patch))
        retry = prompt_text("repair_retry").format(diff=tried, failure=failure)
        different = template.format(**brief, instruction=f"{retry}\n\n{EDIT_FORMAT}")
        patched = index.with_files(best.patch.files)
        moved = _remapped(locations, patched)
        more = prompt_text("repair_more").format(diff=tried, failure=failure)
        patched_brief = _brief(request, failing, patched, moved)
        on_top = template.format(**patched_brief, instruction=f"{more}\n\n{EDIT_FORMAT}")
        patched_views = views_for(moved, patched)
        plans = [
            _Plan(on_top, patched_views, 0.0, patched, best, kind="more"),
            _Plan(on_top, patched_views, hot, patched, best, kind="more"),
        ]
        for location in moved[: self.settings.per_location]:  # the definitions the attempt left as they were
            left = location.symbol
            if left is not None and _rewritable(location) and _untouched(left, patched, index):
                instruction = f"{more}\n\n{_rewrite_instruction([left])}"
                plans.append(
                    _Plan(template.format(**patched_brief, instruction=instruction), patched_views, 0.0, patched,
                          best, rewrite=(left,), kind="more, rewrite")
                )  # fmt: skip
        plans += [
            _Plan(different, views, 0.0, index, kind="different"),
            _Plan(different, views, hot, index, kind="different"),
        ]
        if together:
            plans.append(rewrite(together, hot, retry, kind="different, rewrite"))
        return plans

    async def _sample(
        self, plan: _Plan, originals: Mapping[str, str], may_change_tests: bool, seed: int
    ) -> Patch | None:
        """One sample of ``plan``: the patch it makes of ``originals`` when it applies and parses, else None.

        The samples of one starting point share their prompt up to the last lines (the instruction), so the
        engine reads it once and serves the rest from its cache.
        """
        if plan.new is not None:
            return await self._write_new(plan, originals, seed)
        if plan.rewrite:
            return await self._rewrite(plan, originals, seed)
        answer = await self._ask(plan, seed)
        blocks = [b for b in parse_patch(answer) if may_change_tests or not is_test_file(b.file)]
        return _patched(plan, blocks, originals)

    async def _write_new(self, plan: _Plan, originals: Mapping[str, str], seed: int) -> Patch | None:
        """A definition the code lacks, written whole and added at the end of its file."""
        assert plan.new is not None
        file, name = plan.new
        opening = f"{'class' if name[:1].isupper() else 'def'} {name}"
        grammar = definitions_grammar([(opening, "")]) if self.client.supports_grammar else None
        code = new_definition(await self._write(plan, seed, grammar), opening)
        if code is None:
            return None
        original = originals.get(file) or plan.index.texts.get(file, "")
        text = original.rstrip("\n") + "\n\n\n" + code + "\n"
        patch = Patch((Block(file, "", code),), {file: text})
        return patch if _parses(patch) else None

    async def _rewrite(self, plan: _Plan, originals: Mapping[str, str], seed: int) -> Patch | None:
        """Definitions written again, whole, each in place of the one in its file (its decorators kept).

        Asked for search/replace edits, a small model often copies one line as SEARCH and writes the function
        again after it, so the old body stays below the new one; asked for the function itself, it writes what it
        writes best, code, and where it goes is known. End-of-line comments it adds (``# Changed to round``) go.
        """
        base = {**originals, **(plan.on_top.patch.files if plan.on_top else {})}
        heads = [_definition_head(symbol, plan.index) for symbol in plan.rewrite]
        if any(head is None or symbol.file not in base for head, symbol in zip(heads, plan.rewrite, strict=True)):
            return None
        olds: list[str] = []
        for head, symbol in zip(heads, plan.rewrite, strict=True):
            assert head is not None
            lines = plan.index.texts[symbol.file].split("\n")
            olds.append("\n".join(lines[head[0] - 1 : symbol.end]))
        wanted = [(head[2], head[1]) for head in heads if head is not None]
        bodies = [body_indent(old) for old in olds]
        longest = max([LINE_CHARS, *(len(line) for old in olds for line in old.splitlines())])
        grammar = definitions_grammar(wanted, bodies, longest) if self.client.supports_grammar else None
        answer = await self._write(plan, seed, grammar, tokens=sum(len(old) for old in olds) // 2 + 200)
        codes = definitions(answer, wanted)
        if codes is None:
            return None
        blocks = [
            Block(symbol.file, old, without_new_comments(code, old))
            for symbol, old, code in zip(plan.rewrite, olds, codes, strict=True)
            if code.strip() != old.strip()
        ]
        return _patched(plan, blocks, originals)

    async def _write(self, plan: _Plan, seed: int, grammar: str | None, *, tokens: int = 0) -> str:
        """The model's answer to ``plan`` (under ``grammar``) in at most ``tokens`` tokens (at least
        ``patch_tokens``)."""
        most = max(self.settings.patch_tokens, tokens)
        settings = ModelSettings(temperature=plan.temperature, seed=seed, max_tokens=most, grammar=grammar)
        messages = [Message.system(prompt_text("repair_system")), Message.user(plan.prompt)]
        self.model_calls += 1
        response = await complete(self.client, ModelRequest(messages, settings=settings))
        self.usage.add(response.usage)
        return response.message.content

    async def _ask(self, plan: _Plan, seed: int) -> str:
        """The model's edits for ``plan``, under the grammar of the code it was shown where the engine takes one."""
        grammar = None
        if self.client.supports_grammar:
            try:
                grammar = patch_grammar(plan.views, plan.index.texts)
            except ValueError:
                return ""
        return await self._write(plan, seed, grammar)

    async def _choose(
        self, request: str, failing: Sequence[Failure], index: SymbolIndex, ranked: list[Location]
    ) -> list[Location]:
        """The locations to show: the top ones, or, when more compete, those the model picks from their signatures."""
        limit = self.settings.max_locations
        if len(ranked) <= limit or not self.client.supports_grammar:
            return ranked[:limit]
        shortlist = ranked[: limit * 2]
        skeleton = "\n".join(f"{n}. {_signature(location, index)}" for n, location in enumerate(shortlist, 1))
        text = prompt_text("repair_choose").format(
            request=_request_line(request), failing=_failing_text(failing, index), skeleton=as_data(skeleton)
        )
        numbers = " | ".join(f'"{n}"' for n in range(len(shortlist), 0, -1))  # "10" before "1"
        grammar = f'root ::= num (", " num){{0,{limit - 1}}}\nnum ::= {numbers}\n'
        self.model_calls += 1
        response = await complete(
            self.client,
            ModelRequest(
                [Message.system(prompt_text("repair_system")), Message.user(text)],
                settings=ModelSettings(temperature=0.0, max_tokens=24, grammar=grammar),
            ),
        )
        self.usage.add(response.usage)
        picked: list[Location] = []
        for word in re.findall(r"\d+", response.message.content):
            number = int(word)
            if 1 <= number <= len(shortlist) and shortlist[number - 1] not in picked:
                picked.append(shortlist[number - 1])
        for location in ranked:  # the model's picks first, then the best ranked, up to the limit
            if len(picked) >= limit:
                break
            if location not in picked:
                picked.append(location)
        return picked[:limit]

    async def _validate(
        self,
        candidate: Candidate,
        scratch: ScratchCopy,
        command: TestCommand,
        before: TestReport,
        number: int | str,
    ) -> None:
        """Run the tests on ``candidate`` in the copy: the failing ones first, then all."""
        scratch.write(candidate.patch.files)
        try:
            failing = sorted(before.failed) if before.detailed else []
            if failing and command.kind == "pytest":
                first = await self._tests(command, scratch, tests=failing)
                candidate.fixed = len(now_passing(before, first))
                if not first.ok:
                    candidate.report = first
                    shown = f"patch {number}: {candidate.fixed} of {len(failing)} failing tests pass"
                    self._say("validate", shown)
                    return
            after = await self._tests(command, scratch)
            candidate.report = after
            if after.detailed and before.detailed:
                candidate.fixed = len(now_passing(before, after))
                candidate.broke = len(before.passed - after.passed)
                candidate.passed = after.ok and candidate.broke == 0
            else:
                candidate.passed = after.ok
            verdict = "the tests pass" if candidate.passed else f"the tests fail ({after.summary()})"
            self._say("validate", f"patch {number}: {verdict}")
        finally:
            scratch.restore()

    async def _tests(
        self, command: TestCommand, scratch: ScratchCopy, *, tests: Sequence[str] = (), trace: bool = False
    ) -> TestReport:
        """The tests run in the scratch copy, confined to it when the workspace has a sandbox."""
        sandbox = self.sandbox.elsewhere(scratch.root)
        return await run_tests(
            command,
            scratch.root,
            self.environment,
            tests=tests,
            timeout=self.settings.test_timeout,
            trace=trace,
            sandbox=sandbox,
        )

    # -- applying ---------------------------------------------------------------------------------------------

    async def apply(self, result: RepairResult) -> list[str]:
        """Write ``result``'s patch into the workspace through the gate, one file at a time; the files written.

        A file that changed since the workflow read it is not written (the message says so).

        Raises:
            UserError: there is no patch, or a file changed since it was read.
        """
        if result.patch is None:
            raise UserError("there is no patch to apply")
        written: list[str] = []
        for relative, text in sorted(result.patch.files.items()):
            target = self.workspace / relative
            current = target.read_text(encoding="utf-8") if target.is_file() else None
            if current != result.originals.get(relative):
                raise UserError(f"{relative} changed while the fix was being found; nothing more was written")
            one = Patch(result.patch.blocks, {relative: text})
            call = ToolCall(id=f"repair-{relative}", name="edit_file",
                            arguments={"path": relative, "diff": unified_diff(result.originals, one)})  # fmt: skip
            if not await self._allowed(call, EDIT_TOOL):
                break
            target.write_text(text, encoding="utf-8")
            written.append(relative)
        return written

    # -- helpers ----------------------------------------------------------------------------------------------

    async def _allowed(self, call: ToolCall, tool: Tool) -> bool:
        if self.authorize is None:
            return True
        decision = await self.authorize(call, tool)
        return decision.action == "allow"

    def _say(self, stage: str, message: str) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(stage, message, time.perf_counter() - self._started))

    def _result(self, status: str, message: str, **fields: object) -> RepairResult:
        result = RepairResult(status, message, model_calls=self.model_calls, **fields)  # type: ignore[arg-type]
        result.seconds = time.perf_counter() - self._started
        result.prompt_tokens = self.usage.prompt
        result.cached_tokens = self.usage.cached
        result.completion_tokens = self.usage.completion
        return result

    def _fixed(
        self,
        winner: Candidate,
        originals: Mapping[str, str],
        before: TestReport,
        candidates: int,
        samples: int,
        locations: list[str],
        *,
        what: str = "Fixed",
    ) -> RepairResult:
        changed = {path: originals[path] for path in winner.patch.files}
        after = winner.report
        fixed_tests = sorted(now_passing(before, after)) if after is not None else []
        files = ", ".join(sorted(winner.patch.files))
        tests = f" {', '.join(fixed_tests[:5])} now pass{'es' if len(fixed_tests) == 1 else ''};" if fixed_tests else ""
        summary = after.summary() if after is not None else "passed"
        agreed = f" ({winner.votes} of {samples} samples agreed)" if winner.votes > 1 else ""
        unchecked = "" if before.failed else " No test failed before it, so the tests show only that it breaks nothing."
        message = f"{what} in {files}:{tests} the tests: {summary}{agreed}.{unchecked}"
        result = self._result(
            "fixed", message, diff=unified_diff(originals, winner.patch), patch=winner.patch, originals=changed,
            origin=winner.origin,
            before=before, after=after, candidates=candidates, samples=samples,
            locations=locations,
        )  # fmt: skip
        return result


_CHANGE = re.compile(
    r"\b(add|implement|make|change|rename|update|support|use|remove|replace|refactor|fix|allow|handle|default)\b",
    re.IGNORECASE,
)


def _asks_for_change(request: str) -> bool:
    """Whether the request asks for a change even when every test passes ("add a --reverse flag")."""
    return bool(_CHANGE.search(request)) and not re.search(r"\b(failing|fails|failed)\b", request, re.IGNORECASE)


_MORE = re.compile(
    r"\b(add|implement|change|rename|update|support|use|remove|replace|refactor|allow|handle|default|document|"
    r"docstring|also)\b",
    re.IGNORECASE,
)


def _asks_for_more(request: str) -> bool:
    """Whether the request asks for something the failing tests may not check ("... and document it"): then
    every edit of a passing patch is kept, not only those the tests need."""
    return bool(_MORE.search(request))


REWRITE_LINES = 80
"""The longest definition the model is asked to write again whole (a longer one gets edits only)."""
TEST_LINES = 60
"""The most lines of a failing test file shown when it could not be imported (its tests show what it expects)."""
ANYWHERE = "Fix it with the smallest change. It may take edits in more than one place."
EDIT_FORMAT = (
    "Write each edit like the example: FILE and the path, SEARCH and lines copied exactly from the code above, then "
    "REPLACE and the lines that take their place."
)


def _rewritable(location: Location) -> bool:
    """Whether ``location`` is a function or method short enough to be written again whole."""
    symbol = location.symbol
    return symbol is not None and symbol.kind != "class" and symbol.end - symbol.start < REWRITE_LINES


def _rewrite_instruction(symbols: Sequence[Symbol]) -> str:
    """Ask for ``symbols`` written again whole, in this order."""
    if len(symbols) == 1:
        symbol = symbols[0]
        kind = "method" if symbol.kind == "method" else "function"
        name, file = as_data(symbol.qualname), as_data(symbol.file)  # a repository's names: never template tokens
        return prompt_text("repair_rewrite").format(kind=kind, name=name, file=file)
    named = ", then ".join(f"{symbol.qualname} of {symbol.file}" for symbol in symbols)
    return prompt_text("repair_rewrite_all").format(names=as_data(named))


def _in_file_order(symbols: Sequence[Symbol]) -> list[Symbol]:
    return sorted(symbols, key=lambda symbol: (symbol.file, symbol.start))


def _definition_head(symbol: Symbol, index: SymbolIndex) -> tuple[int, str, str] | None:
    """Where ``symbol``'s own first line is (past its decorators), its indentation, and how it opens
    (``async def fetch``); None when it is not found."""
    lines = index.texts.get(symbol.file, "").split("\n")
    pattern = re.compile(rf"([ \t]*)((?:async\s+)?def\s+{re.escape(symbol.name)})\b")
    for number in range(symbol.start, min(symbol.end, len(lines)) + 1):
        found = pattern.match(lines[number - 1])
        if found is not None:
            return number, found[1], found[2]
    return None


def _untouched(symbol: Symbol, patched: SymbolIndex, index: SymbolIndex) -> bool:
    """Whether ``symbol`` (found in ``patched``) reads as it did in ``index``."""
    before = [s for s in index.named(symbol.qualname) if s.file == symbol.file]
    return bool(before) and index.source(before[0]) == patched.source(symbol)


def _brief(
    request: str, failing: Sequence[Failure], index: SymbolIndex, locations: Sequence[Location]
) -> dict[str, str]:
    """What every sample of a round is told: the request, the failing tests and the code of the locations."""
    code = "\n\n".join(_shown(view, index) for view in views_for(locations, index))
    return {"request": _request_line(request), "failing": _failing_text(failing, index), "code": code}


def _request_line(request: str) -> str:
    return f"The request: {as_data(request.strip())}"


def _shown(view: View, index: SymbolIndex) -> str:
    lines = index.texts[view.file].splitlines()
    parts = [f"### {view.file}"]
    for low, high in view.ranges:
        if low > 1:
            parts.append("...")
        parts.append("\n".join(lines[low - 1 : high]))
    if view.ranges and view.ranges[-1][1] < len(lines):
        parts.append("...")
    return as_data("\n".join(parts))


def _failing_text(failing: Sequence[Failure], index: SymbolIndex) -> str:
    if not failing:
        return ""
    lines = ["The failing tests:"]
    for failure in failing[:3]:
        lines.append(f"- {failure.test}: {failure.message.splitlines()[0] if failure.message else 'failed'}")
        if "::" not in failure.test:  # a test file that could not even be imported: its tests show what it expects
            source = index.texts.get(failure.file, "").splitlines()
            lines += ["  The test file:", *("    " + line for line in source[:TEST_LINES])]
            continue
        test = next((s for s in index.named(failure.name) if s.file == failure.file), None)
        if test is not None:
            source = index.source(test).splitlines()
            lines += ["  The test:", *("    " + line for line in source[:30])]
    if len(failing) > 3:
        lines.append(f"- and {len(failing) - 3} more")
    return as_data("\n".join(lines)) + "\n\n"


def _signature(location: Location, index: SymbolIndex) -> str:
    symbol: Symbol | None = location.symbol
    if symbol is None:
        return f"{location.file} (the whole file)"
    doc = f" - {symbol.doc}" if symbol.doc else ""
    return f"{symbol.file}: {symbol.signature}{doc}"


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


def _patched(plan: _Plan, blocks: Sequence[Block], originals: Mapping[str, str]) -> Patch | None:
    """The patch ``blocks`` make, on the code ``plan`` starts from (with the attempt it builds on, if any), as it
    changes ``originals``; None when they do not apply, change nothing, or leave a Python file that does not parse."""
    base = {**originals, **(plan.on_top.patch.files if plan.on_top else {})}
    applied = apply_patch(blocks, base) if blocks else "no edits"
    if isinstance(applied, str):
        return None
    if plan.on_top is not None:  # the new edits, and the attempt they build on
        applied = Patch((*plan.on_top.patch.blocks, *applied.blocks), {**plan.on_top.patch.files, **applied.files})
    patch = Patch(applied.blocks, {path: text for path, text in applied.files.items() if text != originals.get(path)})
    return patch if patch.files and _parses(patch) else None


def _parses(patch: Patch) -> bool:
    for path, text in patch.files.items():
        if path.endswith(".py"):
            try:
                ast.parse(text)
            except (SyntaxError, ValueError, RecursionError):
                return False
    return True


def _first_failures(report: TestReport) -> str:
    if not report.failures:
        return ""
    first = report.failures[0]
    return f"; {first.test}: {first.message.splitlines()[0][:120] if first.message else 'failed'}"


def _failure_text(report: TestReport | None) -> str:
    if report is None:
        return ""
    if report.failures:
        return "\n".join(
            f"{f.test}: {f.message.splitlines()[0][:200] if f.message else 'failed'}" for f in report.failures[:3]
        )
    return report.output[-800:]


def _remapped(locations: Sequence[Location], index: SymbolIndex) -> list[Location]:
    """``locations`` in a changed ``index``: each definition found again by its name (its lines may have moved)."""
    moved: list[Location] = []
    for location in locations:
        symbol = location.symbol
        again = [s for s in index.named(symbol.qualname) if s.file == location.file] if symbol is not None else []
        moved.append(Location(location.file, again[0] if again else None, location.score, location.reasons))
    return moved


def _best_attempt(candidates: list[Candidate]) -> Candidate | None:
    """The tried candidate that came closest: most failing tests fixed less tests broken, then votes, then size."""
    tried = [c for c in candidates if c.report is not None]
    if not tried:
        return None
    return max(tried, key=lambda c: (c.fixed - c.broke, c.votes, -c.size))


def _failed_message(candidates: list[Candidate], samples: int, best: Candidate | None) -> str:
    if not candidates:
        return f"No sample of the {samples} drawn made a change that applies to the code; nothing was changed."
    closest = ""
    if best is not None and best.report is not None:
        closest = f" The closest ({best.fixed} failing test(s) fixed) still failed: {_failure_text(best.report)[:300]}"
    tried = f"None of the {len(candidates)} distinct patches ({samples} samples) passed the tests"
    return f"{tried}; nothing was changed.{closest}"
