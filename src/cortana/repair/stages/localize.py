"""Where the change goes, for the stages: the ranking of ``repair/localize.py`` on a test run, cut to the few
locations a prompt can show (the model picks among their signatures when more compete), the definitions the tests
say are missing, and locations found again in patched code."""

from __future__ import annotations

import re
from collections.abc import Sequence

from cortana.messages import Message
from cortana.models.base import ModelRequest, ModelSettings, complete
from cortana.prompts import as_data, prompt_text
from cortana.repair.deps import RepairDeps
from cortana.repair.feedback import failing_text
from cortana.repair.localize import Location, localize, missing_definitions
from cortana.repair.run import RepairRun
from cortana.repair.symbols import Symbol, SymbolIndex
from cortana.repair.testrun import TestReport

__all__ = ["choose", "locate", "missing", "remapped", "request_line"]


async def locate(run: RepairRun, deps: RepairDeps, index: SymbolIndex, report: TestReport) -> list[Location]:
    """The locations to show for ``report``'s failures in ``index``: ranked (``repair/localize.py``), then chosen."""
    ranked = localize(
        run.request.text,
        list(report.failures if report.detailed else []),
        index,
        passed=report.passed,
        calls=report.calls or None,
        graph=deps.graph,
        tests_may_change=run.request.tests_may_change,
    )
    return await choose(run, deps, index, ranked) if ranked else []


async def choose(run: RepairRun, deps: RepairDeps, index: SymbolIndex, ranked: list[Location]) -> list[Location]:
    """The locations to show: the top ones, or, when more compete, those the model picks from their signatures."""
    limit = deps.settings.max_locations
    client = deps.engine(run)
    if len(ranked) <= limit or not client.supports_grammar:
        return ranked[:limit]
    shortlist = ranked[: limit * 2]
    skeleton = "\n".join(f"{n}. {_signature(location)}" for n, location in enumerate(shortlist, 1))
    text = prompt_text("repair_choose").format(
        request=request_line(run.request.text),
        failing=failing_text(run.failing, index),
        skeleton=as_data(skeleton),
    )
    numbers = " | ".join(f'"{n}"' for n in range(len(shortlist), 0, -1))  # "10" before "1"
    grammar = f'root ::= num (", " num){{0,{limit - 1}}}\nnum ::= {numbers}\n'
    run.model_calls += 1
    response = await complete(
        client,
        ModelRequest(
            [Message.system(prompt_text("repair_system")), Message.user(text)],
            settings=ModelSettings(temperature=0.0, max_tokens=24, grammar=grammar),
        ),
    )
    run.usage.add(response.usage)
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


def _signature(location: Location) -> str:
    symbol: Symbol | None = location.symbol
    if symbol is None:
        return f"{location.file} (the whole file)"
    doc = f" - {symbol.doc}" if symbol.doc else ""
    return f"{symbol.file}: {symbol.signature}{doc}"


def request_line(request: str) -> str:
    """The request, as data for a prompt."""
    return f"The request: {as_data(request.strip())}"


def missing(run: RepairRun, index: SymbolIndex | None = None) -> list[tuple[str, str]]:
    """The definitions the tests or the request say are missing, less those the request says are gone on purpose."""
    index = index or run.index
    assert index is not None
    found = missing_definitions(run.request.text, run.failing, index)
    return [(file, name) for file, name in found if name not in run.request.gone]


def remapped(locations: Sequence[Location], index: SymbolIndex) -> list[Location]:
    """``locations`` in a changed ``index``: each definition found again by its name (its lines may have moved)."""
    moved: list[Location] = []
    for location in locations:
        symbol = location.symbol
        again = [s for s in index.named(symbol.qualname) if s.file == location.file] if symbol is not None else []
        moved.append(Location(location.file, again[0] if again else None, location.score, location.reasons))
    return moved
