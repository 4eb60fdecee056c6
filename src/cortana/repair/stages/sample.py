"""The samples of a round: which prompts a round asks (round one's, a climb's on a partial fix, a retry's on the
closest attempt), what every prompt is told, and one ask sent to the engine and its answers made into patches."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from cortana.messages import Message
from cortana.models.base import ModelRequest, ModelSettings, complete
from cortana.prompts import as_data, prompt_text
from cortana.repair.coders import ANYWHERE, Coder, Edits, Lines, NewDefinition, Rewrite, rewritable
from cortana.repair.deps import RepairDeps
from cortana.repair.feedback import calls_of, failing_text, unread_parameters
from cortana.repair.localize import views_for
from cortana.repair.patches import Patch, View, unified_diff
from cortana.repair.run import Ask, Attempt, RepairRun, Stage
from cortana.repair.stages.localize import missing, remapped, request_line
from cortana.repair.stages.report import failure_text, gain, still_failing
from cortana.repair.symbols import Symbol, SymbolIndex
from cortana.repair.windows import suspect_windows

__all__ = ["asked", "round_asks", "sample", "start_sampler"]


async def start_sampler(run: RepairRun, deps: RepairDeps) -> None:
    """Start the model that writes the samples (``models.sampler``), once a fix, as its first round begins; one that
    does not start leaves them to the model in use."""
    if deps.sampler is None or run.sampler_tried:
        return
    run.sampler_tried = True
    try:
        run.sampler = await deps.sampler.start()
    except Exception as error:  # any failure to start: the samples are the model in use's
        deps.say(run, Stage.SAMPLE, f"{deps.sampler.name} did not start ({error}); the model in use writes the samples")
        return
    run.sampler_name = deps.sampler.name
    deps.say(run, Stage.SAMPLE, f"the samples are written by {deps.sampler.name}")


def round_asks(run: RepairRun, deps: RepairDeps) -> list[Ask]:
    """The prompts of this round: what is written, how hot, how many, on what base."""
    if run.round == 1:
        return _first_asks(run, deps)
    if run.stronger is not None and run.round == run.stronger_from and run.base is None:
        return _first_asks(run, deps, fresh=True)  # a fresh model: a first round of its own, feedback included
    if run.base is not None:
        return _climb_asks(run, deps, run.base)
    closest = run.closest()
    return _retry_asks(run, deps, closest) if closest is not None else _first_asks(run, deps)


def _first_asks(run: RepairRun, deps: RepairDeps, *, fresh: bool = False) -> list[Ask]:
    """Round one's prompts (``fresh``: the same for a larger model that takes over, feedback rewrite included)."""
    assert run.index is not None
    settings, index = deps.settings, run.index
    hot, many = settings.temperature, settings.samples
    views = views_for(run.locations, index)
    asks: list[Ask] = []
    for file, name in missing(run, index)[:2]:
        asks += [Ask(NewDefinition(file, name), 0.0), Ask(NewDefinition(file, name), hot, max(many - 1, 1))]
    coders = _coders(run, deps, [loc.symbol for loc in run.locations], index)
    symbols = [loc.symbol for loc in run.locations[: settings.per_location] if loc.symbol in coders]
    for symbol in symbols:
        asks += [Ask(coder, 0.0) for coder in coders[symbol]]
    together = _in_file_order([symbol for symbol, written in coders.items() if isinstance(written[0], Rewrite)])
    if len(together) > 1:  # a change that takes them all at once (a new flag: the parser and its use)
        asks.append(Ask(Rewrite(together, index), 0.0, label="rewrite together"))
    asks += _feedback_asks(run, deps, symbols[:1], index, None, fresh=fresh)
    if symbols:  # before the edits: in the development half's runs edits never passed alone (merges only)
        asks.append(Ask(coders[symbols[0]][0], hot, many))
    edits = Edits(views, index, ANYWHERE, run.request.tests_may_change)
    asks += [Ask(edits, 0.0, label="anywhere"), Ask(edits, hot, many, label="anywhere")]
    for location in run.locations[: settings.per_location]:
        if location.symbol in symbols:
            continue  # its greedy rewrite is the sample made for just it
        lead = f"Make the change in {as_data(location.label)}."
        one = Edits(views_for([location], index), index, lead, run.request.tests_may_change)
        asks.append(Ask(one, 0.0, label="location"))
    return asks


def _feedback_asks(
    run: RepairRun,
    deps: RepairDeps,
    symbols: Sequence[Symbol],
    index: SymbolIndex,
    on: Attempt | None,
    *,
    fresh: bool = False,
) -> list[Ask]:
    """The top function written again, told what it was given and gave back while the failing tests ran (in the
    first ``feedback_rounds`` rounds, and in a larger model's round)."""
    if (run.round > deps.settings.feedback_rounds and not fresh) or not symbols:
        return []
    symbol = symbols[0]
    seen = calls_of(symbol, run.current, run.failing)
    if not seen:
        return []
    unread = unread_parameters(symbol, index, run.current, run.failing)
    told = f"Its code never reads {as_data(unread)}, which these calls give it.\n" if unread else ""
    lead = prompt_text("repair_feedback").format(name=as_data(symbol.qualname), calls=seen, unread=told)
    written = _coders(run, deps, [symbol], index, lead).get(symbol)
    if not written:
        return []
    feedback, label = written[0], f"feedback {written[0].kind}"
    hot, many = deps.settings.temperature, deps.settings.samples
    return [Ask(feedback, 0.0, on=on, label=label), Ask(feedback, hot, many, on=on, label=label)]


def _climb_asks(run: RepairRun, deps: RepairDeps, base: Attempt) -> list[Ask]:
    """On top of a partial fix: what still fails, localized again, rewritten and edited."""
    assert run.index is not None and run.before is not None
    patched = run.index.with_files(base.patch.files)
    views = views_for(run.locations, patched)
    hot, many = deps.settings.temperature, deps.settings.samples
    lead = prompt_text("repair_climb").format(
        diff=as_data(unified_diff(run.originals, base.patch)), gain=gain(run, base), failing=still_failing(run)
    )
    coders = _coders(run, deps, [loc.symbol for loc in run.locations[: deps.settings.per_location]], patched, lead)
    tops = list(coders)
    asks = _feedback_asks(run, deps, tops, patched, base)
    asks += [Ask(coder, 0.0, on=base, label=f"climb, {coder.kind}") for written in coders.values() for coder in written]
    edits = Edits(views, patched, lead, run.request.tests_may_change)
    asks += [Ask(edits, 0.0, on=base, label="climb"), Ask(edits, hot, many, on=base, label="climb")]
    return asks


def _retry_asks(run: RepairRun, deps: RepairDeps, closest: Attempt) -> list[Ask]:
    """No partial fix: build on the closest attempt, and ask for a different fix from the code as it was."""
    assert run.index is not None
    settings = deps.settings
    hot, many = settings.temperature, settings.samples
    failure = as_data(failure_text(closest.report))
    tried = as_data(unified_diff(run.originals, closest.patch))
    patched = run.index.with_files(closest.patch.files)
    moved = remapped(run.locations, patched)
    more = prompt_text("repair_more").format(diff=tried, failure=failure)
    on_top = Edits(views_for(moved, patched), patched, more, run.request.tests_may_change)
    different = prompt_text("repair_retry").format(diff=tried, failure=failure)
    again = Edits(views_for(run.locations, run.index), run.index, different, run.request.tests_may_change)
    asks = [Ask(on_top, 0.0, on=closest, label="more"), Ask(on_top, hot, many, on=closest, label="more")]
    left = [loc.symbol for loc in moved[: settings.per_location]]  # the definitions the attempt left as they were
    kept = [symbol for symbol in left if symbol is not None and _untouched(symbol, patched, run.index)]
    for written in _coders(run, deps, kept, patched, more).values():
        asks += [Ask(coder, 0.0, on=closest, label=f"more, {coder.kind}") for coder in written]
    coders = _coders(run, deps, [loc.symbol for loc in run.locations], run.index)
    asks += _feedback_asks(run, deps, list(coders), run.index, None)
    asks += [Ask(again, 0.0, label="different"), Ask(again, hot, many, label="different")]
    whole = [symbol for symbol, written in coders.items() if isinstance(written[0], Rewrite)]
    if len(whole) > 1:
        together = Rewrite(_in_file_order(whole), run.index, different)
        asks.append(Ask(together, hot, label="different, rewrite"))
    return asks


async def sample(run: RepairRun, deps: RepairDeps, ask: Ask) -> list[Patch]:
    """The patches ``ask``'s answers make: one request of ``ask.count`` answers (decoded together where the
    engine has slots; the prompt, which the round's asks share up to their last lines, read once)."""
    client = deps.writer(run)
    grammar = ask.coder.grammar() if client.supports_grammar else None
    if client.supports_grammar and grammar is None:
        return []  # nothing of the code could be shown to it under a grammar
    assert run.index is not None
    brief = _brief(run, ask)
    prompt = prompt_text("repair_request").format(**brief, instruction=ask.coder.instruction())
    most = ask.coder.tokens() or deps.settings.patch_tokens
    seed = deps.settings.seed + 100 * run.round + run.samples
    settings = ModelSettings(temperature=ask.temperature, seed=seed, max_tokens=most, grammar=grammar)
    if ask.count == 1 and ask.temperature == 0:  # a greedy answer is the same answer: asked once a fix
        if (client.model, prompt) in run.greedy:
            return []
        run.greedy.add((client.model, prompt))
    request = ModelRequest([Message.system(prompt_text("repair_system")), Message.user(prompt)], settings=settings)
    deps.say(run, Stage.SAMPLE, f"round {run.round}: {asked(ask)}")
    try:
        async with asyncio.timeout(run.seconds_left):  # the engine stops writing when the request is dropped
            if ask.count > 1:
                responses = await client.complete_many(request, ask.count)
            else:
                responses = [await complete(client, request)]
    except TimeoutError:
        run.cut_short = run.round
        run.model_calls += 1
        deps.say(run, Stage.SAMPLE, f"round {run.round}: {asked(ask)} stopped at the budget, unanswered")
        return []
    run.model_calls += 1 if ask.count <= client.parallel_samples else len(responses)
    run.samples += len(responses)
    patches = []
    for response in responses:
        run.usage.add(response.usage)
        patch = ask.coder.patch(response.message.content, ask.on.patch if ask.on else None, run.originals)
        if patch is not None:
            patches.append(patch)
    return patches


def asked(ask: Ask) -> str:
    """An ask as progress names it: ``4 samples (rewrite, T=0.8)``."""
    return f"{f'{ask.count} samples' if ask.count > 1 else 'a sample'} ({ask.origin})"


def _brief(run: RepairRun, ask: Ask) -> dict[str, str]:
    """What every sample of a round is told: the request, the failing tests and the code of the locations (on the
    attempt the ask builds on)."""
    assert run.index is not None
    index = run.index.with_files(ask.on.patch.files) if ask.on is not None else run.index
    locations = run.locations if ask.on is None or ask.on is run.base else remapped(run.locations, index)
    code = "\n\n".join(_shown(view, index) for view in views_for(locations, index))
    return {
        "request": request_line(run.request.text),
        "failing": failing_text(run.failing, index, run.current),
        "code": code,
    }


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


def _coders(
    run: RepairRun, deps: RepairDeps, symbols: Sequence[Symbol | None], index: SymbolIndex, lead: str = ""
) -> dict[Symbol, list[Coder]]:
    """How each function of ``symbols`` is asked for, in their order (those that cannot be left out; none when
    ``rewrite`` is off): one longer than ``rewrite_lines`` whose lines the spectrum ranks (it must read in
    ``index`` as it did when the spectrum was taken), by its most suspect lines, a window each; else whole, when it
    is short enough (``rewritable``)."""
    if not deps.settings.rewrite:
        return {}
    spectrum = run.current if run.current is not None and run.current.lines else None
    found: dict[Symbol, list[Coder]] = {}
    for symbol in symbols:
        if symbol is None or symbol.kind == "class" or symbol in found:
            continue
        written: list[Coder] = []
        spectral = run.index is not None and index.texts.get(symbol.file) == run.index.texts.get(symbol.file)
        if symbol.end - symbol.start + 1 > deps.settings.rewrite_lines and spectral:
            windows = suspect_windows(symbol, index, spectrum)
            written = [Lines(symbol, index, low, high, lead) for low, high in windows]
        if not written and rewritable(symbol):
            written = [Rewrite([symbol], index, lead)]
        if written:
            found[symbol] = written
    return found


def _in_file_order(symbols: Sequence[Symbol]) -> list[Symbol]:
    return sorted(symbols, key=lambda symbol: (symbol.file, symbol.start))


def _untouched(symbol: Symbol, patched: SymbolIndex, index: SymbolIndex) -> bool:
    """Whether ``symbol`` (found in ``patched``) reads as it did in ``index``."""
    before = [s for s in index.named(symbol.qualname) if s.file == symbol.file]
    return bool(before) and index.source(before[0]) == patched.source(symbol)
